//! The access link's own counters: the byte and packet counters of the router's WAN interfaces
//! (those of its default routes), read often, so the engine can tell best effort's traffic (all
//! that crossed the link less the background's own packets) from the background's.
//!
//! The WAN side and not the LAN side: traffic between LAN hosts and the router itself (a NAS
//! on the router's USB port, LuCI, DNS answers) never crosses the access link, and the router's
//! own downloads do. The interfaces are looked up again every few seconds (a PPPoE session
//! that comes back is a new interface). Each counter is a sysfs file kept open and read again
//! at offset 0: a few microseconds a read, no allocation.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use slipstream_engine::LinkCounters;

/// How often the WAN interfaces are looked up again.
const RESOLVE_EVERY: Duration = Duration::from_secs(5);
/// The counters are read at most this often (the engine's rounds last an RTT, 10 ms or more).
pub(crate) const READ_EVERY: Duration = Duration::from_millis(2);

/// One WAN interface's counter files.
struct Interface {
    name: String,
    header_bytes: u64,
    /// rx_bytes, rx_packets, tx_bytes, tx_packets.
    files: [File; 4],
}

/// The WAN interfaces' counters.
pub(crate) struct WanCounters {
    interfaces: Vec<Interface>,
    resolved_at: Option<Instant>,
    read_at: Option<Instant>,
}

impl WanCounters {
    pub(crate) fn new() -> WanCounters {
        WanCounters {
            interfaces: Vec::new(),
            resolved_at: None,
            read_at: None,
        }
    }

    /// Download and upload counters summed over the WAN interfaces, if it is time to read them
    /// and there are any.
    pub(crate) fn read(&mut self, now: Instant) -> Option<(LinkCounters, LinkCounters)> {
        if self.read_at.is_some_and(|t| now.duration_since(t) < READ_EVERY) {
            return None;
        }
        self.read_at = Some(now);
        if self
            .resolved_at
            .is_none_or(|t| now.duration_since(t) >= RESOLVE_EVERY)
        {
            self.resolved_at = Some(now);
            self.resolve();
        }
        if self.interfaces.is_empty() {
            return None;
        }
        let mut down = LinkCounters::default();
        let mut up = LinkCounters::default();
        for interface in &self.interfaces {
            let mut values = [0u64; 4];
            for (value, file) in values.iter_mut().zip(&interface.files) {
                *value = read_number(file)?;
            }
            down.bytes += values[0];
            down.packets += values[1];
            up.bytes += values[2];
            up.packets += values[3];
            down.header_bytes = down.header_bytes.max(interface.header_bytes);
        }
        up.header_bytes = down.header_bytes;
        Some((down, up))
    }

    fn resolve(&mut self) {
        let mut names = default_route_interfaces(
            &std::fs::read_to_string("/proc/net/route").unwrap_or_default(),
            &std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default(),
        );
        names.sort();
        names.dedup();
        let current: Vec<&str> = self.interfaces.iter().map(|i| i.name.as_str()).collect();
        if current == names.iter().map(String::as_str).collect::<Vec<_>>() {
            return;
        }
        self.interfaces = names.into_iter().filter_map(|name| open(&name)).collect();
    }
}

fn open(name: &str) -> Option<Interface> {
    let dir = format!("/sys/class/net/{name}");
    let file = |counter: &str| File::open(format!("{dir}/statistics/{counter}")).ok();
    // ARPHRD_ETHER (1): a 14-byte Ethernet header in each counted packet; PPP and tunnels count
    // the IP packet alone.
    let kind = std::fs::read_to_string(format!("{dir}/type")).unwrap_or_default();
    let header_bytes = if kind.trim() == "1" { 14 } else { 0 };
    Some(Interface {
        name: name.to_owned(),
        header_bytes,
        files: [
            file("rx_bytes")?,
            file("rx_packets")?,
            file("tx_bytes")?,
            file("tx_packets")?,
        ],
    })
}

fn read_number(file: &File) -> Option<u64> {
    let mut buf = [0u8; 24];
    let n = file.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

/// The interfaces of the default routes in `/proc/net/route` (IPv4: destination and mask 0) and
/// `/proc/net/ipv6_route` (destination ::/0), loopback left out.
fn default_route_interfaces(ipv4: &str, ipv6: &str) -> Vec<String> {
    let v4 = ipv4.lines().skip(1).filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000").then(|| f[0].to_owned())
    });
    let v6 = ipv6.lines().filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() == 10 && f[0].bytes().all(|b| b == b'0') && f[1] == "00").then(|| f[9].to_owned())
    });
    v4.chain(v6).filter(|name| name != "lo").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_default_routes_interfaces() {
        let ipv4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                    wan0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                    wan0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                    br-lan\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let ipv6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                    fd000000000000000000000000000001 00000400 00000001 00000000 00000003 pppoe-wan\n\
                    fd000000000000000000000000000000 40 00000000000000000000000000000000 00 \
                    00000000000000000000000000000000 00000100 00000001 00000000 00000001 br-lan\n\
                    00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                    00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n";
        assert_eq!(default_route_interfaces(ipv4, ipv6), ["wan0", "pppoe-wan"]);
        assert!(default_route_interfaces("", "").is_empty());
    }

    #[test]
    fn reads_a_counter_again_from_the_start() {
        let dir = std::env::temp_dir().join(format!("slipstream-wan-{}", std::process::id()));
        std::fs::write(&dir, "12345\n").unwrap();
        let file = File::open(&dir).unwrap();
        assert_eq!(read_number(&file), Some(12345));
        std::fs::write(&dir, "99\n").unwrap();
        assert_eq!(read_number(&file), Some(99));
        std::fs::remove_file(&dir).unwrap();
    }
}
