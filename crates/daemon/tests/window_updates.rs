//! The window-update sender on a real wire: hand-built window updates (an ACK with TCP
//! timestamps, IPv4 and IPv6, valid checksums) go out through `WindowUpdateSender` in one
//! network namespace, and an AF_PACKET socket on the far end of a veth pair in another checks
//! that each arrived byte for byte, checksums valid. For IPv6 this also shows that an
//! `AF_INET6`/`IPPROTO_RAW` socket sends the header we give it instead of adding one.
//!
//! Needs root and `ip` (CI runs as root): ignored by default, run with --ignored; without them
//! each test fails saying why.
//! Namespaces are `sswu<pid><tag>{a,b}`, deleted at the end, also after a failure.
#![allow(unsafe_code, reason = "a packet socket that captures the updates")]

#[allow(dead_code)]
#[path = "../src/lan_hosts.rs"]
mod lan_hosts;
#[allow(dead_code)]
#[path = "../src/window_updates.rs"]
mod window_updates;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use window_updates::{WindowUpdateCounters, WindowUpdateSender};

mod common;
use common::{sh, Pair};

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    slipstream_testbed::missing_prerequisite(&["ip"])
}

/// Two namespaces joined by a veth pair (`a` 10.83.0.1 / fd83::1 on `vA`, `b` 10.83.0.2 / fd83::2
/// on `vB`), deleted on drop.
fn pair(tag: &str) -> Pair {
    let pair = Pair::create(&format!("sswu{tag}"), "10.83.0");
    pair.add_v6("fd83");
    pair
}

/// A window update as the engine makes them: an ACK without payload, window 0x7fff, with the
/// timestamps option (NOP NOP TS), checksums valid.
fn window_update(src: IpAddr, dst: IpAddr) -> Vec<u8> {
    let mut tcp = Vec::new();
    tcp.extend_from_slice(&50000u16.to_be_bytes()); // receiver's port
    tcp.extend_from_slice(&8443u16.to_be_bytes()); // sender's port
    tcp.extend_from_slice(&0x1111_2222u32.to_be_bytes()); // seq
    tcp.extend_from_slice(&0x3333_4444u32.to_be_bytes()); // ack
    tcp.push(8 << 4); // data offset: 32 bytes
    tcp.push(0x10); // ACK
    tcp.extend_from_slice(&0x7fffu16.to_be_bytes()); // window
    tcp.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    tcp.extend_from_slice(&[1, 1, 8, 10]);
    tcp.extend_from_slice(&0x0102_0304u32.to_be_bytes()); // TSval
    tcp.extend_from_slice(&0x0506_0708u32.to_be_bytes()); // TSecr
    let mut packet = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
            ip.extend_from_slice(&[0x12, 0x34, 0x40, 0]); // id, DF
            ip.extend_from_slice(&[64, 6, 0, 0]); // TTL, TCP, checksum
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let sum = ipv4_header_checksum(&ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            ip
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut ip = vec![0x60, 0, 0, 0];
            ip.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
            ip.extend_from_slice(&[6, 64]); // TCP, hop limit
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            ip
        }
        _ => unreachable!(),
    };
    let tcp_at = packet.len();
    packet.extend(tcp);
    let sum = slipstream_wire::tcp_checksum(&packet).expect("parses");
    packet[tcp_at + 16..tcp_at + 18].copy_from_slice(&sum.to_be_bytes());
    assert!(slipstream_wire::tcp_checksum_valid(&packet));
    packet
}

fn ipv4_header_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An AF_PACKET socket on `dev` of the calling thread's namespace, seeing IP packets (no link
/// header), with a short receive timeout.
fn packet_socket(dev: &str) -> OwnedFd {
    let name = std::ffi::CString::new(dev).unwrap();
    // SAFETY: if_nametoindex reads the NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    assert_ne!(ifindex, 0, "{dev} exists");
    let all = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: socket has no memory preconditions; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            i32::from(all),
        )
    };
    assert!(fd >= 0, "AF_PACKET socket: {}", std::io::Error::last_os_error());
    // SAFETY: fd is fresh and owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; zero is valid for every field.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = all;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: bind reads a sockaddr_ll of the given size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "bind AF_PACKET: {}", std::io::Error::last_os_error());
    let timeout = libc::timeval {
        tv_sec: 0,
        tv_usec: 200_000,
    };
    // SAFETY: setsockopt reads a timeval of the given size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    fd
}

/// The first TCP packet to port 8443 seen on `fd` within 3 s.
fn capture(fd: &OwnedFd) -> Option<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut buf = vec![0u8; 2048];
    while Instant::now() < deadline {
        // SAFETY: recv writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            continue;
        }
        let packet = &buf[..n as usize];
        if let Ok(info) = slipstream_wire::parse(packet) {
            if info.dst_port == 8443 {
                return Some(packet.to_vec());
            }
        }
    }
    None
}

/// Sends `packet` from namespace `a` with a fresh sender; returns what `b` received.
fn send_across(pair: &Pair, packet: Vec<u8>) -> (Option<Vec<u8>>, Arc<WindowUpdateCounters>) {
    send_across_with(pair, packet, |_| {})
}

/// [`send_across`], with `prepare` run on the sender (in `a`) first.
fn send_across_with(
    pair: &Pair,
    packet: Vec<u8>,
    prepare: impl FnOnce(&mut WindowUpdateSender) + Send + 'static,
) -> (Option<Vec<u8>>, Arc<WindowUpdateCounters>) {
    let b = pair.b.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = std::thread::spawn(move || {
        slipstream_testbed::enter_netns(&b).expect("enter the namespace");
        let fd = packet_socket("vB");
        ready_tx.send(()).unwrap();
        capture(&fd)
    });
    ready_rx.recv().unwrap();
    let a = pair.a.clone();
    let counters = Arc::new(WindowUpdateCounters::default());
    let sender_counters = counters.clone();
    std::thread::spawn(move || {
        slipstream_testbed::enter_netns(&a).expect("enter the namespace");
        let mut sender = WindowUpdateSender::open(sender_counters);
        prepare(&mut sender);
        sender.send(&packet).expect("window update sent");
    })
    .join()
    .unwrap();
    (receiver.join().unwrap(), counters)
}

fn check_arrival(sent: &[u8], got: Option<Vec<u8>>) {
    let got = got.expect("the window update arrived on the far side");
    assert_eq!(got, sent, "it arrived byte for byte");
    assert!(slipstream_wire::tcp_checksum_valid(&got), "TCP checksum valid");
    let info = slipstream_wire::parse(&got).unwrap();
    assert_eq!(info.window, 0x7fff);
    assert!(info.flags.ack);
    assert_eq!(info.options.timestamps, Some((0x0102_0304, 0x0506_0708)));
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn ipv4_window_update_arrives_intact() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let pair = pair("4");
    let packet = window_update(
        IpAddr::V4(Ipv4Addr::new(10, 83, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 83, 0, 2)),
    );
    let (got, counters) = send_across(&pair, packet.clone());
    if let Some(got) = &got {
        assert_eq!(ipv4_header_checksum(&got[..20]), 0, "IPv4 header checksum valid");
    }
    check_arrival(&packet, got);
    assert_eq!((counters.sent(), counters.failed()), (1, 0));
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn ipv6_window_update_arrives_intact() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let pair = pair("6");
    let packet = window_update(
        IpAddr::V6("fd83::1".parse::<Ipv6Addr>().unwrap()),
        IpAddr::V6("fd83::2".parse::<Ipv6Addr>().unwrap()),
    );
    let (got, counters) = send_across(&pair, packet.clone());
    check_arrival(&packet, got);
    assert_eq!((counters.sent(), counters.failed()), (1, 0));
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn a_malformed_update_is_counted_not_sent() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let pair = pair("x");
    let mut packet = window_update(
        IpAddr::V4(Ipv4Addr::new(10, 83, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 83, 0, 2)),
    );
    packet.truncate(30);
    let a = pair.a.clone();
    let counters = Arc::new(WindowUpdateCounters::default());
    let c = counters.clone();
    std::thread::spawn(move || {
        slipstream_testbed::enter_netns(&a).expect("enter the namespace");
        let mut sender = WindowUpdateSender::open(c);
        assert!(sender.send(&packet).is_err());
    })
    .join()
    .unwrap();
    assert_eq!((counters.sent(), counters.failed()), (0, 1));
}

/// An update to a learned LAN host goes out as a frame on the host's link, to its MAC, past
/// netfilter: a rule in `a` that drops every locally sent packet to port 8443 (as conntrack's
/// NAT would misroute an upload's update) does not touch it, and the counters say so.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn an_update_to_a_lan_host_goes_on_its_link_past_netfilter() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let pair = pair("l");
    sh(&[
        "ip",
        "netns",
        "exec",
        &pair.a,
        "iptables-legacy",
        "-t",
        "raw",
        "-A",
        "OUTPUT",
        "-p",
        "tcp",
        "--dport",
        "8443",
        "-j",
        "DROP",
    ]);
    let link = Command::new("ip")
        .args(["-n", &pair.b, "-o", "link", "show", "vB"])
        .output()
        .expect("ip link");
    let link = String::from_utf8_lossy(&link.stdout).to_string();
    let mac_text = link
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .expect("b's MAC address");
    let mac: Vec<u8> = mac_text
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    let dst = IpAddr::V4(Ipv4Addr::new(10, 83, 0, 2));
    let packet = window_update(IpAddr::V4(Ipv4Addr::new(10, 83, 0, 1)), dst);
    let (got, counters) = send_across_with(&pair, packet.clone(), move |sender| {
        let name = std::ffi::CString::new("vA").unwrap();
        // SAFETY: if_nametoindex reads the NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(ifindex, 0);
        sender.learn_lan_host(dst, ifindex, &mac);
    });
    check_arrival(&packet, got);
    assert_eq!(
        (counters.sent(), counters.sent_to_lan_link(), counters.failed()),
        (1, 1, 0)
    );
}
