//! Lookups against the running kernel's conntrack, in a throwaway network namespace: a TCP
//! connection over lo whose two ends offered different window scales (one end's receive
//! buffer is set small before it connects), compared with what each socket's `TCP_INFO` says;
//! the same connection after `conntrack -F` (conntrack picks it up again mid-stream and knows no
//! scale); and a tuple with no entry.
//!
//! Needs root, `ip` and iptables-legacy (a rule with a conntrack match makes the namespace track
//! connections) and `conntrack` for the flush: ignored by default, run with --ignored; without
//! them it fails saying why.
#![allow(unsafe_code, reason = "TCP_INFO and a socket with a small receive buffer")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::process::Command;
use std::time::Duration;

use slipstream_conntrack::{Conntrack, Scales};

fn run(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

struct Netns(String);

impl Netns {
    /// A throwaway namespace named `prefix` and the test's pid, its loopback up; panics saying
    /// why where the tools are missing.
    fn new(prefix: &str) -> Netns {
        if let Some(why) = slipstream_testbed::missing_prerequisite(&["ip", "iptables-legacy"]) {
            panic!("cannot run here: {why}");
        }
        let name = format!("{prefix}{}", std::process::id());
        assert!(run(&["ip", "netns", "add", &name]), "ip netns add");
        let ns = Netns(name);
        assert!(ns.exec(&["ip", "link", "set", "lo", "up"]));
        ns
    }

    /// Runs a command inside the namespace.
    fn exec(&self, args: &[&str]) -> bool {
        let mut full = vec!["ip", "netns", "exec", self.0.as_str()];
        full.extend_from_slice(args);
        run(&full)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        run(&["ip", "netns", "del", &self.0]);
    }
}

fn enter(name: &str) {
    slipstream_testbed::enter_netns(name).expect("enter the namespace");
}

/// (own shift, peer's shift) from TCP_INFO.
fn wscales(s: &TcpStream) -> (u8, u8) {
    // SAFETY: tcp_info is plain data; zero is a valid value for every field.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt fills a tcp_info of the size we pass.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut libc::tcp_info as *mut libc::c_void,
            &mut len,
        )
    };
    assert_eq!(rc, 0, "TCP_INFO");
    // Bit fields: tcpi_snd_wscale in the low nibble, tcpi_rcv_wscale in the high one.
    let both = info.tcpi_snd_rcv_wscale;
    (both >> 4, both & 0x0f)
}

/// A client socket with a small receive buffer (so a small window scale), connected to `to`.
fn small_buffer_client(to: SocketAddr) -> TcpStream {
    // SAFETY: plain socket/setsockopt/connect on a descriptor we own; it is handed to TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let size: libc::c_int = 256 * 1024;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &size as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let SocketAddr::V4(v4) = to else { panic!("IPv4") };
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(v4.ip().octets()),
            },
            sin_zero: [0; 8],
        };
        let rc = libc::connect(
            fd,
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(rc, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn window_scales_from_the_kernel() {
    let ns = Netns::new("slipct");
    let name = ns.0.clone();
    let exec = |args: &[&str]| ns.exec(args);
    assert!(exec(&[
        "iptables-legacy",
        "-A",
        "INPUT",
        "-m",
        "conntrack",
        "--ctstate",
        "ESTABLISHED",
        "-j",
        "ACCEPT"
    ]));
    let has_conntrack_tool = run(&["conntrack", "--version"]);

    let inside = name.clone();
    let (client_addr, server_addr, client_ws, server_ws, known, reversed, missing, streams) =
        std::thread::spawn(move || {
            enter(&inside);
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let server_addr = listener.local_addr().unwrap();
            let client = small_buffer_client(server_addr);
            let (server, _) = listener.accept().expect("accept");
            let client_addr = client.local_addr().unwrap();
            let (client_ws, client_peer) = wscales(&client);
            let (server_ws, server_peer) = wscales(&server);
            assert_eq!(
                (client_peer, server_peer),
                (server_ws, client_ws),
                "TCP_INFO agrees with itself"
            );
            let mut ct = Conntrack::open(Duration::from_millis(500)).expect("ctnetlink socket");
            let known = ct.lookup(client_addr, server_addr).expect("lookup");
            let reversed = ct.lookup(server_addr, client_addr).expect("lookup");
            let unused: SocketAddr = format!("127.0.0.1:{}", server_addr.port().wrapping_add(1))
                .parse()
                .unwrap();
            let missing = ct.lookup(client_addr, unused).expect("lookup");
            (
                client_addr,
                server_addr,
                client_ws,
                server_ws,
                known,
                reversed,
                missing,
                (client, server),
            )
        })
        .join()
        .expect("namespace thread");
    eprintln!("client {client_addr} offered scale {client_ws}, server {server_addr} {server_ws}");
    assert_ne!(
        client_ws, server_ws,
        "the small buffer gives the client another scale"
    );
    assert_eq!(
        known,
        Some(Scales::Known {
            a: client_ws,
            b: server_ws
        })
    );
    assert_eq!(
        reversed,
        Some(Scales::Known {
            a: server_ws,
            b: client_ws
        })
    );
    assert_eq!(missing, None, "no entry for a tuple never used");

    assert!(
        has_conntrack_tool,
        "the conntrack tool is needed for the mid-stream pickup part (scripts/setup.sh installs it)"
    );
    assert!(exec(&["conntrack", "-F"]), "conntrack -F");
    let inside = name.clone();
    let picked_up = std::thread::spawn(move || {
        enter(&inside);
        let (mut client, mut server) = streams;
        client.write_all(&[7u8; 1000]).unwrap();
        let mut buf = [0u8; 1000];
        server.read_exact(&mut buf).unwrap();
        server.write_all(&buf).unwrap();
        client.read_exact(&mut buf).unwrap();
        let mut ct = Conntrack::open(Duration::from_millis(500)).expect("ctnetlink socket");
        ct.lookup(client_addr, server_addr).expect("lookup")
    })
    .join()
    .expect("namespace thread");
    assert_eq!(
        picked_up,
        Some(Scales::Unknown),
        "an entry picked up mid-stream knows no scale"
    );
}

/// The UDP dump: a flow's packets each way as conntrack counted them (accounting on, as
/// OpenWrt has it), a flow whose mark has a bit of the mask left out (the background's), and no
/// TCP connection in it.
#[test]
#[ignore = "needs root, ip and iptables-legacy"]
fn udp_counters_from_the_kernel() {
    use std::net::UdpSocket;
    let ns = Netns::new("slipctu");
    let name = ns.0.clone();
    let exec = |args: &[&str]| ns.exec(args);
    assert!(exec(&["sysctl", "-qw", "net.netfilter.nf_conntrack_acct=1"]));
    assert!(exec(&[
        "iptables-legacy",
        "-A",
        "INPUT",
        "-m",
        "conntrack",
        "--ctstate",
        "NEW",
        "-j",
        "ACCEPT"
    ]));
    let classed_port = "40123";
    assert!(exec(&[
        "iptables-legacy",
        "-t",
        "mangle",
        "-A",
        "OUTPUT",
        "-p",
        "udp",
        "--dport",
        classed_port,
        "-j",
        "CONNMARK",
        "--set-mark",
        "0x30000"
    ]));
    let inside = name.clone();
    let (counts, call_id_port) = std::thread::spawn(move || {
        enter(&inside);
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let classed = UdpSocket::bind(format!("127.0.0.1:{classed_port}")).unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 2048];
        for _ in 0..7 {
            client.send_to(&[7u8; 100], server.local_addr().unwrap()).unwrap();
            server.recv_from(&mut buf).unwrap();
        }
        for _ in 0..3 {
            server.send_to(&[3u8; 50], client.local_addr().unwrap()).unwrap();
            client.recv_from(&mut buf).unwrap();
            client.send_to(&[1u8; 10], classed.local_addr().unwrap()).unwrap();
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _tcp = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let mut ct = Conntrack::open(Duration::from_secs(2)).expect("ctnetlink socket");
        let counts = ct.udp_counts(0x00ff_0000, 100).expect("dump");
        // The same counters by the flow's tuple (one hash lookup); two packets more each way.
        let later = counts.first().map(|found| {
            for _ in 0..2 {
                client.send_to(&[7u8; 100], server.local_addr().unwrap()).unwrap();
                server.recv_from(&mut buf).unwrap();
                server.send_to(&[3u8; 50], client.local_addr().unwrap()).unwrap();
                client.recv_from(&mut buf).unwrap();
            }
            ct.udp_count_of(found.original, 0x00ff_0000).expect("get")
        });
        // The classed flow is found by its tuple too, but it is not best effort.
        let classed_tuple = (client.local_addr().unwrap(), classed.local_addr().unwrap());
        let classed_count = ct.udp_count_of(classed_tuple, 0x00ff_0000).expect("get");
        assert_eq!(classed_count, None, "a classed flow is not best effort");
        ((counts, later), server.local_addr().unwrap().port())
    })
    .join()
    .unwrap();
    let (counts, later) = counts;
    assert_eq!(
        counts.len(),
        1,
        "only the unclassed UDP flow (server port {call_id_port}): {counts:?}"
    );
    // IP length: 20 + 8 + payload.
    assert_eq!(counts[0].packets, [7, 3]);
    assert_eq!(counts[0].bytes, [7 * 128, 3 * 78]);
    let later = later.flatten().expect("the flow by its tuple");
    assert_eq!((later.id, later.original), (counts[0].id, counts[0].original));
    assert_eq!(later.packets, [9, 5]);
    drop(ns);
}
