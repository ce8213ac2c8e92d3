//! Sends the window updates the engine asks for (`Engine::drain_window_updates`).
//!
//! A window update is a copy of a flow's last forwarded ACK with a larger window, a whole IPv4
//! or IPv6 packet with valid checksums, from the flow's receiver to its sender: the engine
//! needs it when a held flow's turn comes while its receiver has nothing to acknowledge, so no
//! ACK would carry the news for a while. It goes out as the packet it is, through raw sockets
//! with the IP header included (`IPPROTO_RAW`: `IP_HDRINCL` for IPv4, and for IPv6 the kernel
//! sets `hdrincl` on `SOCK_RAW`/`IPPROTO_RAW` sockets too, see raw(7) and `inet6_create`), routed
//! by its destination address. Sent from the router itself it leaves through OUTPUT and
//! POSTROUTING, so the flow's conntrack entry and NAT apply as to the original ACK: right for an
//! update from a LAN host (a download's receiver) towards the internet.
//!
//! An update *to* a LAN host (an upload's receiver is the server) is a copy of an ACK the router
//! already de-masqueraded; through conntrack again it would start a stray entry (see
//! `lan_hosts`). It goes out as a link-layer frame instead (`AF_PACKET`, `SOCK_DGRAM`: the kernel
//! writes the Ethernet header) on the interface the host's packets came in on, to its MAC, which
//! skips netfilter, as the forwarded ACK it copies did after NAT. A host not learned yet (no
//! packet from it queued) gets the IP packet.
//!
//! The sockets are opened once, at start: opening needs CAP_NET_RAW, which the daemon has as
//! root. Without them the daemon runs on, warns once, and counts each update as failed. The
//! sockets are non-blocking: a full send buffer costs an update (counted), never the packet
//! thread's time.
#![allow(
    unsafe_code,
    reason = "raw IP and packet sockets: socket, shutdown, sendto with sockaddr structs"
)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tracing::warn;

use crate::lan_hosts::{LanHosts, LanLink};

/// Window updates sent and failed since start (readable from other threads).
#[derive(Debug, Default)]
pub(crate) struct WindowUpdateCounters {
    pub sent: AtomicU64,
    /// Of `sent`, those sent as link-layer frames to a LAN host.
    pub sent_to_lan_link: AtomicU64,
    /// Not sent: no raw socket, a malformed packet, or the kernel refused it.
    pub failed: AtomicU64,
}

impl WindowUpdateCounters {
    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
    pub(crate) fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
    pub(crate) fn sent_to_lan_link(&self) -> u64 {
        self.sent_to_lan_link.load(Ordering::Relaxed)
    }
}

/// The raw sockets window updates go out on.
pub(crate) struct WindowUpdateSender {
    v4: Option<OwnedFd>,
    v6: Option<OwnedFd>,
    /// `AF_PACKET` datagram socket for updates to LAN hosts.
    link: Option<OwnedFd>,
    /// Where the LAN hosts are (learned by the packet loop).
    lan_hosts: LanHosts,
    counters: Arc<WindowUpdateCounters>,
    /// A failure was logged already (later ones are only counted).
    warned: bool,
}

impl WindowUpdateSender {
    /// Opens both raw sockets; a family whose socket cannot be opened is warned about here and
    /// its updates are counted as failed.
    pub(crate) fn open(counters: Arc<WindowUpdateCounters>) -> WindowUpdateSender {
        let open = |family: libc::c_int, name: &str| match raw_socket(family) {
            Ok(fd) => Some(fd),
            Err(e) => {
                warn!(
                    "cannot open a raw {name} socket for window updates ({e}; needs CAP_NET_RAW): \
                     held flows will resume only with their next ACK"
                );
                None
            }
        };
        let v4 = open(libc::AF_INET, "IPv4");
        let v6 = open(libc::AF_INET6, "IPv6");
        let link = match link_socket() {
            Ok(fd) => Some(fd),
            Err(e) => {
                warn!(
                    "cannot open a packet socket for window updates to LAN hosts ({e}; needs \
                     CAP_NET_RAW): they go out as IP packets, which NAT may misroute"
                );
                None
            }
        };
        WindowUpdateSender {
            warned: v4.is_none() || v6.is_none(),
            v4,
            v6,
            link,
            lan_hosts: LanHosts::default(),
            counters,
        }
    }

    /// A sender without sockets: every update fails (for tests of the counting).
    #[cfg(test)]
    pub(crate) fn closed(counters: Arc<WindowUpdateCounters>) -> WindowUpdateSender {
        WindowUpdateSender {
            v4: None,
            v6: None,
            link: None,
            lan_hosts: LanHosts::default(),
            counters,
            warned: true,
        }
    }

    /// Marks the frames sent to LAN hosts with `mark` (SO_MARK, needs CAP_NET_ADMIN): the eBPF
    /// datapath's program passes them untouched and unreported (`slipstream_ebpf::OWN_MARK`).
    /// Only link frames: they skip routing and netfilter, where a mark could mean something else.
    pub(crate) fn mark_link_frames(&mut self, mark: u32) -> io::Result<()> {
        let Some(fd) = self.link.as_ref() else {
            return Ok(());
        };
        // SAFETY: a valid socket and a c_uint option value that lives through the call.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MARK,
                (&mark as *const u32).cast(),
                std::mem::size_of::<u32>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// A packet from LAN host `src` entered on `ifindex` with source MAC `hw`.
    pub(crate) fn learn_lan_host(&mut self, src: IpAddr, ifindex: u32, hw: &[u8]) {
        self.lan_hosts.learn(src, ifindex, hw);
    }

    /// Sends one packet to its destination: a LAN host's link if it is a known LAN host, else
    /// routed by its address; counts the outcome.
    pub(crate) fn send(&mut self, packet: &[u8]) -> io::Result<()> {
        let result = self.try_send(packet);
        match &result {
            Ok(to_lan_link) => {
                self.counters.sent.fetch_add(1, Ordering::Relaxed);
                if *to_lan_link {
                    self.counters.sent_to_lan_link.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                if !self.warned {
                    self.warned = true;
                    warn!("sending a window update failed: {e} (further failures are only counted)");
                }
            }
        }
        result.map(|_| ())
    }

    /// Ok(true) when sent to a LAN host's link.
    fn try_send(&self, packet: &[u8]) -> io::Result<bool> {
        let no_socket = || io::Error::new(io::ErrorKind::NotConnected, "no raw socket");
        let dst = destination(packet)?;
        let addr = match dst {
            Destination::V4(a) => IpAddr::V4(a),
            Destination::V6(a) => IpAddr::V6(a),
        };
        if let (Some(fd), Some(lan)) = (self.link.as_ref(), self.lan_hosts.get(&addr)) {
            send_on_link(fd, packet, lan, addr.is_ipv6())?;
            return Ok(true);
        }
        match dst {
            Destination::V4(addr) => {
                let fd = self.v4.as_ref().ok_or_else(no_socket)?;
                // SAFETY: sockaddr_in is plain data; zero is a valid value for every field.
                let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
                sa.sin_family = libc::AF_INET as libc::sa_family_t;
                sa.sin_addr.s_addr = u32::from_ne_bytes(addr.octets());
                send_to(fd, packet, &sa).map(|()| false)
            }
            Destination::V6(addr) => {
                let fd = self.v6.as_ref().ok_or_else(no_socket)?;
                // SAFETY: sockaddr_in6 is plain data; zero is a valid value for every field.
                // sin6_port stays 0: the kernel then takes the socket's protocol (IPPROTO_RAW).
                let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
                sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                sa.sin6_addr.s6_addr = addr.octets();
                send_to(fd, packet, &sa).map(|()| false)
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Destination {
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

/// The destination address of a whole IP packet, checked against its own length fields (the
/// kernel sends header-included packets as they are).
fn destination(packet: &[u8]) -> io::Result<Destination> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("not a window update: {why}"));
    match packet.first().map(|b| b >> 4) {
        Some(4) => {
            if packet.len() < 20 || usize::from(packet[0] & 0x0f) * 4 < 20 {
                return Err(bad("IPv4 header too short"));
            }
            if usize::from(u16::from_be_bytes([packet[2], packet[3]])) != packet.len() {
                return Err(bad("IPv4 total length differs from the packet's"));
            }
            let dst: [u8; 4] = packet[16..20].try_into().unwrap();
            Ok(Destination::V4(Ipv4Addr::from(dst)))
        }
        Some(6) => {
            if packet.len() < 40 {
                return Err(bad("IPv6 header too short"));
            }
            if usize::from(u16::from_be_bytes([packet[4], packet[5]])) + 40 != packet.len() {
                return Err(bad("IPv6 payload length differs from the packet's"));
            }
            let dst: [u8; 16] = packet[24..40].try_into().unwrap();
            Ok(Destination::V6(Ipv6Addr::from(dst)))
        }
        _ => Err(bad("neither IPv4 nor IPv6")),
    }
}

/// A non-blocking raw socket of `family` that sends whole IP packets.
fn raw_socket(family: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket has no memory preconditions; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::IPPROTO_RAW,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // Never read: an IPPROTO_RAW socket receives nothing, and a closed read side says so.
    // SAFETY: shutdown on a valid descriptor.
    unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RD) };
    Ok(fd)
}

/// A non-blocking `AF_PACKET` datagram socket (the kernel adds the link-layer header).
fn link_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket has no memory preconditions; the result is checked before use. Protocol 0:
    // the socket receives nothing; sends name their protocol in the address.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends a whole IP packet as one frame to `lan`'s MAC on its interface.
fn send_on_link(fd: &OwnedFd, packet: &[u8], lan: LanLink, ipv6: bool) -> io::Result<()> {
    let ethertype = if ipv6 { libc::ETH_P_IPV6 } else { libc::ETH_P_IP } as u16;
    // SAFETY: sockaddr_ll is plain data; zero is a valid value for every field.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as libc::c_ushort;
    sa.sll_protocol = ethertype.to_be();
    sa.sll_ifindex = lan.ifindex as libc::c_int;
    sa.sll_halen = 6;
    sa.sll_addr[..6].copy_from_slice(&lan.mac);
    send_to(fd, packet, &sa)
}

fn send_to<A>(fd: &OwnedFd, packet: &[u8], addr: &A) -> io::Result<()> {
    // SAFETY: sendto reads `packet.len()` bytes from `packet` and `size_of::<A>()` bytes from
    // `addr`, a sockaddr_in, sockaddr_in6 or sockaddr_ll matching the socket's family.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            packet.as_ptr().cast(),
            packet.len(),
            0,
            (addr as *const A).cast(),
            std::mem::size_of::<A>() as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != packet.len() {
        return Err(io::Error::other(format!("sent {n} of {} bytes", packet.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[16..20].copy_from_slice(&[192, 0, 2, 7]);
        p
    }

    fn ipv6(payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 40 + payload];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
        p[24..40].copy_from_slice(&"2001:db8::9".parse::<Ipv6Addr>().unwrap().octets());
        p
    }

    #[test]
    fn destination_of_each_family() {
        assert_eq!(
            destination(&ipv4(52)).unwrap(),
            Destination::V4(Ipv4Addr::new(192, 0, 2, 7))
        );
        assert_eq!(
            destination(&ipv6(32)).unwrap(),
            Destination::V6("2001:db8::9".parse().unwrap())
        );
    }

    #[test]
    fn malformed_packets_are_refused() {
        let mut short_header = ipv4(40);
        short_header[0] = 0x44;
        let mut wrong_len = ipv4(40);
        wrong_len[3] = 41;
        let mut wrong_payload = ipv6(20);
        wrong_payload[5] = 21;
        for p in [
            &[][..],
            &[0x20; 40],
            &ipv4(40)[..19],
            &short_header,
            &wrong_len,
            &wrong_payload,
        ] {
            assert_eq!(
                destination(p).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{p:?}"
            );
        }
    }

    #[test]
    fn without_sockets_every_update_counts_as_failed() {
        let counters = Arc::new(WindowUpdateCounters::default());
        let mut sender = WindowUpdateSender::closed(counters.clone());
        assert!(sender.send(&ipv4(40)).is_err());
        assert!(sender.send(&ipv6(20)).is_err());
        assert!(sender.send(&[1, 2, 3]).is_err());
        assert_eq!((counters.sent(), counters.failed()), (0, 3));
    }
}
