//! The default route's gateway (`household.probe = "auto"`): the first router beyond this one,
//! which answers pings on every access network and sits on the far side of the link's queue
//! (the modem's or the DSLAM's; cake-autorate measures the same way with its reflectors).
//!
//! Read from the routing tables the kernel prints (`/proc/net/route`, `/proc/net/ipv6_route`)
//! rather than asked over rtnetlink: a read every few seconds while probing, no socket to keep.
//! IPv4 first (where home routers' gateways answer most reliably), IPv6 if the router has no
//! IPv4 default route; of several, the lowest metric. A default route without a gateway (a
//! point-to-point link such as PPPoE) gives none: set the reflector's address then.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `RTF_GATEWAY` in the flags of `/proc/net/route`.
const RTF_GATEWAY: u32 = 0x2;

/// A default route's gateway and the interface it is reached through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Gateway {
    pub(crate) address: IpAddr,
    pub(crate) interface: String,
}

/// The gateway probes go to, from the texts of `/proc/net/route` and `/proc/net/ipv6_route`.
pub(crate) fn default_gateway(ipv4_routes: &str, ipv6_routes: &str) -> Option<Gateway> {
    default_gateway_v4(ipv4_routes).or_else(|| default_gateway_v6(ipv6_routes))
}

/// The gateway of this thread's network namespace (the daemon has one; a test thread may have
/// entered another, which `/proc/net`, the process's, would not show).
pub(crate) fn read_default_gateway() -> Option<Gateway> {
    let read =
        |name: &str| std::fs::read_to_string(format!("/proc/thread-self/net/{name}")).unwrap_or_default();
    default_gateway(&read("route"), &read("ipv6_route"))
}

/// `/proc/net/route`: destination and mask 0, the gateway flag, the lowest metric. Addresses
/// are the kernel's `__be32` printed as a native integer: its native bytes are the address.
fn default_gateway_v4(text: &str) -> Option<Gateway> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let hex = |i: usize| f.get(i).and_then(|v| u32::from_str_radix(v, 16).ok());
            let (dest, gateway, flags, metric, mask) =
                (hex(1)?, hex(2)?, hex(3)?, f.get(6)?.parse::<u32>().ok()?, hex(7)?);
            (dest == 0 && mask == 0 && flags & RTF_GATEWAY != 0 && gateway != 0 && f[0] != "lo").then(|| {
                let address = IpAddr::V4(Ipv4Addr::from(gateway.to_ne_bytes()));
                (
                    metric,
                    Gateway {
                        address,
                        interface: f[0].to_owned(),
                    },
                )
            })
        })
        .min_by_key(|(metric, _)| *metric)
        .map(|(_, gateway)| gateway)
}

/// `/proc/net/ipv6_route`: destination ::/0 with a next hop, the lowest metric.
fn default_gateway_v6(text: &str) -> Option<Gateway> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 10 || f[0].bytes().any(|b| b != b'0') || f[1] != "00" || f[9] == "lo" {
                return None;
            }
            let next_hop = Ipv6Addr::from(u128::from_str_radix(f[4], 16).ok()?);
            let metric = u32::from_str_radix(f[5], 16).ok()?;
            (!next_hop.is_unspecified()).then(|| {
                (
                    metric,
                    Gateway {
                        address: IpAddr::V6(next_hop),
                        interface: f[9].to_owned(),
                    },
                )
            })
        })
        .min_by_key(|(metric, _)| *metric)
        .map(|(_, gateway)| gateway)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";

    /// A `/proc/net/route` line as this machine's kernel prints it (native byte order).
    fn v4_line(
        iface: &str,
        dest: [u8; 4],
        gateway: [u8; 4],
        flags: u32,
        metric: u32,
        mask: [u8; 4],
    ) -> String {
        let hex = |a: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(a));
        format!(
            "{iface}\t{}\t{}\t{flags:04X}\t0\t0\t{metric}\t{}\t0\t0\t0\n",
            hex(dest),
            hex(gateway),
            hex(mask)
        )
    }

    #[test]
    fn finds_the_ipv4_default_gateway() {
        let text = format!(
            "{HEADER}{}{}{}{}",
            v4_line("br-lan", [192, 168, 1, 0], [0; 4], 1, 0, [255, 255, 255, 0]),
            v4_line("wan", [0; 4], [100, 64, 0, 1], 3, 10, [0; 4]),
            v4_line("wwan", [0; 4], [10, 0, 0, 1], 3, 20, [0; 4]),
            v4_line("wan", [100, 64, 0, 0], [0; 4], 1, 0, [255, 255, 255, 0]),
        );
        assert_eq!(
            default_gateway(&text, ""),
            Some(Gateway {
                address: "100.64.0.1".parse().unwrap(),
                interface: "wan".into()
            }),
            "the lowest metric"
        );
    }

    /// The text a little-endian router (x86, ARM) prints, as written: 10.0.0.1 is `0100000A`.
    #[cfg(target_endian = "little")]
    #[test]
    fn reads_the_kernels_byte_order() {
        let text = format!("{HEADER}eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n");
        assert_eq!(
            default_gateway(&text, "").unwrap().address,
            IpAddr::from([10, 0, 0, 1])
        );
    }

    #[test]
    fn a_default_route_without_gateway_gives_none() {
        // PPPoE: the default route points at the interface; and a gateway-flagged route to a
        // subnet is no default.
        let text = format!(
            "{HEADER}{}{}",
            v4_line("pppoe-wan", [0; 4], [0; 4], 1, 0, [0; 4]),
            v4_line("wan", [10, 0, 0, 0], [10, 0, 0, 1], 3, 0, [255, 0, 0, 0]),
        );
        assert_eq!(default_gateway(&text, ""), None);
        assert_eq!(default_gateway("", ""), None);
        assert_eq!(default_gateway("garbage\nmore garbage here\n", "garbage"), None);
    }

    #[test]
    fn falls_back_to_the_ipv6_default_gateway() {
        let v6 = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 00000100 00000001 00000000 00000001 br-lan\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  fe800000000000000000000000000001 00000400 00000001 00000000 00000003 wan6\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  fe800000000000000000000000000002 00000200 00000001 00000000 00000003 wwan\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n";
        assert_eq!(
            default_gateway("", v6),
            Some(Gateway {
                address: "fe80::2".parse().unwrap(),
                interface: "wwan".into()
            })
        );
        // IPv4 first.
        let v4 = format!("{HEADER}{}", v4_line("wan", [0; 4], [192, 0, 2, 1], 3, 0, [0; 4]));
        assert_eq!(
            default_gateway(&v4, v6).unwrap().address,
            IpAddr::from([192, 0, 2, 1])
        );
    }
}
