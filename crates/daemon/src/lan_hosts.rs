//! Where each LAN host is on the link: the interface its packets came in on and its MAC address,
//! learned from the queued packets that entered from the LAN (NFQUEUE hands over both).
//!
//! Why: a window update for an upload goes to the LAN host, a copy of the server's ACK as the
//! daemon saw it, that is after the router undid the masquerade. Sent as an IP packet from the
//! router it would pass conntrack again, match no entry (the flow's entry holds the router's WAN
//! address on that side), and start a stray one that then captures the LAN host's own packets of
//! the flow, which leave un-masqueraded and are reset by the server (measured: 813 resets in
//! 30 s of 48 uploads behind NAT). Sent as a link-layer frame straight to the host's MAC, it
//! skips netfilter altogether, as the packet it copies would have after the router's NAT.

use std::collections::HashMap;
use std::net::IpAddr;

/// Most hosts remembered; a household has far fewer. When full, new hosts are not learned (their
/// updates go out as IP packets, as before).
pub(crate) const MAX_LAN_HOSTS: usize = 4096;

/// A LAN host's link: interface index and MAC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LanLink {
    pub ifindex: u32,
    pub mac: [u8; 6],
}

/// The LAN hosts seen so far, bounded.
#[derive(Debug, Default)]
pub(crate) struct LanHosts {
    hosts: HashMap<IpAddr, LanLink>,
}

impl LanHosts {
    /// A packet from `src` entered on `ifindex` with source MAC `hw` (NFQA_HWADDR); `hw` of any
    /// other length than six bytes (not Ethernet) teaches nothing.
    pub(crate) fn learn(&mut self, src: IpAddr, ifindex: u32, hw: &[u8]) {
        let Ok(mac) = <[u8; 6]>::try_from(hw) else {
            return;
        };
        if ifindex == 0 || mac == [0; 6] {
            return;
        }
        let link = LanLink { ifindex, mac };
        if let Some(known) = self.hosts.get_mut(&src) {
            *known = link;
        } else if self.hosts.len() < MAX_LAN_HOSTS {
            self.hosts.insert(src, link);
        }
    }

    pub(crate) fn get(&self, addr: &IpAddr) -> Option<LanLink> {
        self.hosts.get(addr).copied()
    }
}

/// The source address of an IPv4 or IPv6 packet, if it has a whole enough header.
pub(crate) fn source_address(packet: &[u8]) -> Option<IpAddr> {
    match packet.first()? >> 4 {
        4 => {
            let src: [u8; 4] = packet.get(12..16)?.try_into().ok()?;
            Some(IpAddr::from(src))
        }
        6 => {
            let src: [u8; 16] = packet.get(8..24)?.try_into().ok()?;
            Some(IpAddr::from(src))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 7];

    #[test]
    fn learns_the_latest_link_of_each_host() {
        let mut hosts = LanHosts::default();
        let a: IpAddr = "192.168.1.20".parse().unwrap();
        hosts.learn(a, 3, &MAC);
        assert_eq!(hosts.get(&a), Some(LanLink { ifindex: 3, mac: MAC }));
        // The host moved (Wi-Fi to cable, or a new lease on another machine).
        hosts.learn(a, 4, &[2, 0, 0, 0, 0, 8]);
        assert_eq!(hosts.get(&a).unwrap().ifindex, 4);
        // Not Ethernet, no interface, no MAC: nothing learned.
        let b: IpAddr = "192.168.1.21".parse().unwrap();
        hosts.learn(b, 3, &[1, 2, 3, 4]);
        hosts.learn(b, 0, &MAC);
        hosts.learn(b, 3, &[0; 6]);
        assert_eq!(hosts.get(&b), None);
    }

    #[test]
    fn bounded() {
        let mut hosts = LanHosts::default();
        for i in 0..(MAX_LAN_HOSTS as u32 + 10) {
            hosts.learn(IpAddr::from((0x0a00_0000 + i).to_be_bytes()), 3, &MAC);
        }
        assert_eq!(hosts.hosts.len(), MAX_LAN_HOSTS);
    }

    #[test]
    fn source_of_each_family() {
        let mut v4 = vec![0u8; 20];
        v4[0] = 0x45;
        v4[12..16].copy_from_slice(&[10, 0, 0, 2]);
        assert_eq!(source_address(&v4), Some("10.0.0.2".parse().unwrap()));
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        v6[8..24].copy_from_slice(&"fd00::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
        assert_eq!(source_address(&v6), Some("fd00::2".parse().unwrap()));
        assert_eq!(source_address(&v4[..10]), None);
        assert_eq!(source_address(&[0x55; 40]), None);
    }
}
