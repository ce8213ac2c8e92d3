//! Helpers the NFQUEUE namespace tests share (each test file uses a part of them).
#![allow(
    dead_code,
    reason = "compiled into every test file, each of which uses a part"
)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use slipstream_nfqueue::{Datapath, QueueConfig};

/// Runs `args[0] args[1..]`; panics with the command and its stderr if it fails.
pub(crate) fn sh(args: &[&str]) {
    if let Err(e) = slipstream_testbed::cmd::run(args[0], &args[1..]) {
        panic!("{e:#}");
    }
}

/// Moves the calling thread into a named network namespace.
pub(crate) fn enter_netns(name: &str) {
    slipstream_testbed::enter_netns(name).expect("enter the namespace");
}

/// Network namespaces deleted on drop.
pub(crate) struct Namespaces(pub(crate) Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// Two namespaces `ss<tag>a<pid>` and `ss<tag>b<pid>` joined by a veth pair (`<tag>a<pid>` /
/// `<tag>b<pid>`), `<net>.1/24` in the first and `<net>.2/24` in the second, all links up.
/// Returns the guard that deletes them and their two names.
pub(crate) fn veth_pair(tag: &str, net: &str) -> (Namespaces, String, String) {
    let pid = std::process::id();
    let (a, b) = (format!("ss{tag}a{pid}"), format!("ss{tag}b{pid}"));
    let cleanup = Namespaces(vec![a.clone(), b.clone()]);
    sh(&["ip", "netns", "add", &a]);
    sh(&["ip", "netns", "add", &b]);
    let (va, vb) = (format!("{tag}a{pid}"), format!("{tag}b{pid}"));
    sh(&[
        "ip", "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b,
    ]);
    sh(&["ip", "-n", &a, "addr", "add", &format!("{net}.1/24"), "dev", &va]);
    sh(&["ip", "-n", &b, "addr", "add", &format!("{net}.2/24"), "dev", &vb]);
    for (ns, dev) in [(&a, &va), (&b, &vb)] {
        sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
    }
    (cleanup, a, b)
}

/// Sends the TCP packets to `port` that pass `chain` of namespace `ns`'s mangle table to NFQUEUE
/// `queue` (iptables-legacy).
pub(crate) fn queue_tcp_port(ns: &str, chain: &str, port: u16, queue: u16) {
    sh(&[
        "ip",
        "netns",
        "exec",
        ns,
        "iptables-legacy",
        "-t",
        "mangle",
        "-A",
        chain,
        "-p",
        "tcp",
        "--dport",
        &port.to_string(),
        "-j",
        "NFQUEUE",
        "--queue-num",
        &queue.to_string(),
    ]);
}

/// A thread in namespace `ns` that opens NFQUEUE `queue` (its data queue `queue + 100`) and,
/// until `stop`, calls `drain` each time the queue is readable (or every 50 ms); `drain` reads
/// the messages and gives their verdicts.
pub(crate) fn queue_reader(
    ns: String,
    queue: u16,
    stop: Arc<AtomicBool>,
    mut drain: impl FnMut(&mut Datapath) + Send + 'static,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        enter_netns(&ns);
        let config = QueueConfig {
            ack_queue: queue,
            data_queue: queue + 100,
            max_len: 1024,
            data_copy_bytes: 128,
        };
        let mut dp = Datapath::open(config).expect("open queue");
        while !stop.load(Ordering::Relaxed) {
            dp.wait_readable(50).unwrap();
            drain(&mut dp);
        }
    })
}

/// One TCP connection from namespace `client_ns` to a listener at `server` in namespace
/// `server_ns`: the client writes one segment of `fill` bytes per entry of `lengths` (no Nagle,
/// `gap` apart) and closes. Returns what the server read and the time from the connect to the
/// end of the stream.
pub(crate) fn transfer(
    client_ns: &str,
    server_ns: &str,
    server: &'static str,
    lengths: &'static [usize],
    gap: Duration,
    fill: u8,
) -> (Vec<u8>, Duration) {
    let receiver = {
        let ns = server_ns.to_owned();
        std::thread::spawn(move || {
            enter_netns(&ns);
            let listener = TcpListener::bind(server).unwrap();
            let (mut conn, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).unwrap();
            got
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let sender = {
        let ns = client_ns.to_owned();
        std::thread::spawn(move || {
            enter_netns(&ns);
            let mut s = TcpStream::connect(server).unwrap();
            s.set_nodelay(true).unwrap();
            for &len in lengths {
                s.write_all(&vec![fill; len]).unwrap();
                std::thread::sleep(gap);
            }
        })
    };
    sender.join().unwrap();
    let got = receiver.join().unwrap();
    (got, started.elapsed())
}
