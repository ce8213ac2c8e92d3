//! Do NFQUEUE messages carry the kernel's receive timestamp? The daemon uses it as the packet's
//! arrival time (instead of the time it read the packet), so this measures, in throwaway network
//! namespaces `a — r — b` (r forwards), which packets come with one:
//!
//! * forwarded packets (r, `mangle FORWARD`), UDP and TCP;
//! * locally received ones (b, `mangle INPUT`) and locally sent ones (a, `mangle OUTPUT`);
//!
//! first as the host happens to be, then while [`RxTimestamps`] holds a `SO_TIMESTAMPNS` socket.
//! Only the second phase is asserted: the kernel's switch is host-wide, so any other process
//! with a timestamping socket (an NTP daemon, a packet capture, a test running beside this one)
//! turns stamping on for the first phase too. The findings are printed (`--nocapture`).
//!
//! Measured on Linux 6.18 (nothing else stamping): without the socket no packet had a
//! timestamp, forwarded or local; with it every forwarded and locally received packet had one,
//! 0.02-0.14 ms old when this idle reader got it; locally sent packets (OUTPUT) never do. 0.5 s
//! after the socket closed, stamping was off again.
//!
//! `cost_of_timestamps_under_a_flood` (ignored, a measurement) floods the queue with 200 000
//! UDP datagrams. On the 2-core test VM (release build): the reader spent 7.3-7.8 us of CPU per
//! packet with `try_recv` (the verdict carries the packet on through the kernel) and 8.6-9.1 us
//! with `try_recv_timed`, so the extra `MSG_PEEK` costs about 1.3 us per packet; and packets
//! had waited p50 2.2-2.3 ms, p90 6.2-6.4 ms, p99 11-15 ms (once 155 ms) between the kernel's
//! stamp and the read: the error the daemon's RTT samples carry without the stamp.
//!
//! Needs root and iptables-legacy: ignored by default, run with --ignored; without them it fails
//! saying why.
#![allow(unsafe_code, reason = "recv, thread CPU time")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use slipstream_nfqueue::{parse_packet_head, Datapath, QueueConfig, RxTimestamps};

mod common;
use common::{enter_netns, sh, Namespaces};

/// One queued packet: protocol, and the age of its kernel timestamp when read (ms; negative if
/// in the future), or `None` if it had none.
type Seen = (u8, Option<f64>);

fn reader(ns: String, queue: u16, stop: Arc<AtomicBool>, seen: Arc<Mutex<Vec<Seen>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        enter_netns(&ns);
        let mut dp = Datapath::open(QueueConfig {
            ack_queue: queue,
            data_queue: queue + 100,
            max_len: 1024,
            data_copy_bytes: 128,
        })
        .expect("open queue");
        // Peeks at each message's head itself (as `try_recv_timed` does, but without holding an
        // `RxTimestamps`, which would switch stamping on).
        let mut head = vec![0u8; 512];
        while !stop.load(Ordering::Relaxed) {
            dp.wait_readable(20).unwrap();
            loop {
                // SAFETY: recv writes at most `head.len()` bytes into `head`.
                let n = unsafe {
                    libc::recv(
                        dp.fd(),
                        head.as_mut_ptr().cast(),
                        head.len(),
                        libc::MSG_PEEK | libc::MSG_DONTWAIT,
                    )
                };
                // Nothing to peek: nothing to read either. Reading anyway would race a message
                // that arrives between the two calls and pair it with no head.
                if n <= 0 {
                    break;
                }
                let peeked = parse_packet_head(&head[..n as usize]);
                let Some(mut msg) = dp.try_recv().unwrap() else {
                    break;
                };
                let now = SystemTime::now();
                let peeked = peeked.filter(|h| h.packet_id == msg.get_packet_id());
                assert!(peeked.is_some(), "the peeked head is the message nfq read");
                let age = peeked
                    .and_then(|h| h.timestamp)
                    .map(|ts| match now.duration_since(ts) {
                        Ok(d) => d.as_secs_f64() * 1e3,
                        Err(e) => -e.duration().as_secs_f64() * 1e3,
                    });
                let proto = msg.get_payload().get(9).copied().unwrap_or(0);
                seen.lock().unwrap().push((proto, age));
                msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
                dp.verdict(msg).unwrap();
            }
        }
    })
}

/// How long any step of [`traffic`] may block: a stuck queue fails the test, never hangs it.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends 10 UDP datagrams and one short TCP connection from a to b, through r.
fn traffic(a: &str, b: &str, port: u16) {
    let server = {
        let b = b.to_owned();
        std::thread::spawn(move || {
            enter_netns(&b);
            let listener = TcpListener::bind(("10.82.2.2", port)).unwrap();
            listener.set_nonblocking(true).unwrap();
            let deadline = std::time::Instant::now() + STEP_TIMEOUT;
            let mut conn = loop {
                match listener.accept() {
                    Ok((conn, _)) => break conn,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        assert!(
                            std::time::Instant::now() < deadline,
                            "no connection through the queues"
                        );
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            };
            conn.set_nonblocking(false).unwrap();
            conn.set_read_timeout(Some(STEP_TIMEOUT)).unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got)
                .expect("the whole TCP transfer within the timeout");
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let a = a.to_owned();
    let client = std::thread::spawn(move || {
        enter_netns(&a);
        let udp = UdpSocket::bind("10.82.1.2:0").unwrap();
        for _ in 0..10 {
            udp.send_to(b"stamp?", ("10.82.2.2", 9)).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        let to = std::net::SocketAddr::from(([10, 82, 2, 2], port));
        let mut tcp = TcpStream::connect_timeout(&to, STEP_TIMEOUT).expect("connect through the queues");
        tcp.set_write_timeout(Some(STEP_TIMEOUT)).unwrap();
        tcp.write_all(&[b'x'; 3000]).unwrap();
    });
    let client = client.join();
    let server = server.join();
    if let Err(e) = client.and(server) {
        std::panic::resume_unwind(e);
    }
    std::thread::sleep(Duration::from_millis(100));
}

/// "proto: n packets, k stamped, ages min..max ms" per protocol.
fn summary(seen: &[Seen]) -> String {
    let mut parts = Vec::new();
    for (proto, name) in [(17u8, "udp"), (6, "tcp")] {
        let all: Vec<_> = seen.iter().filter(|s| s.0 == proto).collect();
        let ages: Vec<f64> = all.iter().filter_map(|s| s.1).collect();
        let range = if ages.is_empty() {
            String::new()
        } else {
            let min = ages.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = ages.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            format!(", age {min:.3}..{max:.3} ms")
        };
        parts.push(format!(
            "{name}: {} packets, {} stamped{range}",
            all.len(),
            ages.len()
        ));
    }
    parts.join("; ")
}

/// Namespaces `sst<tag>{a,r,b}<pid>`: a (10.82.1.2) — r (forwards) — b (10.82.2.2).
fn topology(tag: &str) -> (Namespaces, [String; 3]) {
    let pid = std::process::id();
    let [a, r, b] = ["a", "r", "b"].map(|n| format!("sst{tag}{n}{pid}"));
    let cleanup = Namespaces(vec![a.clone(), r.clone(), b.clone()]);
    for ns in [&a, &r, &b] {
        sh(&["ip", "netns", "add", ns]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
    }
    let [ta, tra, tb, trb] = ["ta", "tra", "tb", "trb"].map(|n| format!("{n}{tag}{pid}"));
    sh(&[
        "ip", "link", "add", &ta, "netns", &a, "type", "veth", "peer", "name", &tra, "netns", &r,
    ]);
    sh(&[
        "ip", "link", "add", &tb, "netns", &b, "type", "veth", "peer", "name", &trb, "netns", &r,
    ]);
    for (ns, dev, addr) in [
        (&a, &ta, "10.82.1.2/24"),
        (&r, &tra, "10.82.1.1/24"),
        (&r, &trb, "10.82.2.1/24"),
        (&b, &tb, "10.82.2.2/24"),
    ] {
        sh(&["ip", "-n", ns, "addr", "add", addr, "dev", dev]);
        sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
    }
    sh(&["ip", "-n", &a, "route", "add", "default", "via", "10.82.1.1"]);
    sh(&["ip", "-n", &b, "route", "add", "default", "via", "10.82.2.1"]);
    sh(&[
        "ip",
        "netns",
        "exec",
        &r,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
    ]);
    (cleanup, [a, r, b])
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn forwarded_packets_carry_kernel_timestamps_while_a_socket_asks_for_them() {
    if let Some(why) = slipstream_testbed::missing_prerequisite(&["ip", "iptables-legacy"]) {
        panic!("cannot run here: {why}");
    }
    let (_cleanup, [a, r, b]) = topology("t");
    let queue_rule = |ns: &str, chain: &str, queue: &str| {
        for proto in ["udp", "tcp"] {
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
                proto,
                "-d",
                "10.82.2.2",
                "-j",
                "NFQUEUE",
                "--queue-num",
                queue,
                // A reader that died must not blackhole the traffic (and hang the test).
                "--queue-bypass",
            ]);
        }
    };
    queue_rule(&a, "OUTPUT", "7203");
    queue_rule(&r, "FORWARD", "7201");
    queue_rule(&b, "INPUT", "7202");

    let stop = Arc::new(AtomicBool::new(false));
    let hooks = [
        ("forward (r)", &r, 7201),
        ("input (b)", &b, 7202),
        ("output (a)", &a, 7203),
    ];
    let seen: Vec<Arc<Mutex<Vec<Seen>>>> = hooks.iter().map(|_| Arc::default()).collect();
    let readers: Vec<_> = hooks
        .iter()
        .zip(&seen)
        .map(|((_, ns, q), s)| reader(ns.to_string(), *q, stop.clone(), s.clone()))
        .collect();
    std::thread::sleep(Duration::from_millis(200));

    let report = |phase: &str| -> Vec<Vec<Seen>> {
        let taken: Vec<Vec<Seen>> = seen
            .iter()
            .map(|s| std::mem::take(&mut *s.lock().unwrap()))
            .collect();
        for ((hook, _, _), s) in hooks.iter().zip(&taken) {
            eprintln!("{phase:>26} | {hook:<12} | {}", summary(s));
        }
        taken
    };

    traffic(&a, &b, 9001);
    report("as the host is");

    let stamping = RxTimestamps::enable().expect("SO_TIMESTAMPNS socket");
    std::thread::sleep(Duration::from_millis(50));
    traffic(&a, &b, 9002);
    let enabled = report("with SO_TIMESTAMPNS open");

    drop(stamping);
    std::thread::sleep(Duration::from_millis(500));
    traffic(&a, &b, 9003);
    report("after it closed");

    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }

    let forwarded = &enabled[0];
    assert!(
        forwarded.len() >= 10 + 3,
        "UDP and TCP packets were forwarded through the queue"
    );
    for &(proto, age) in forwarded {
        let age = age.unwrap_or_else(|| panic!("a forwarded packet (protocol {proto}) had no timestamp"));
        assert!(
            (0.0..1000.0).contains(&age),
            "a forwarded packet's timestamp is {age} ms old when read"
        );
    }
}

fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// What the cost and the use of timestamps are: the queue reader's CPU time per packet with
/// plain `try_recv` and with `try_recv_timed` (stamping on, one `MSG_PEEK` more per packet),
/// and how long packets waited between the kernel's stamp and the read under a flood (what the
/// daemon's arrival times take out of its measurements). A measurement, not a check:
/// `cargo test --release -p slipstream-nfqueue --test kernel_timestamps -- --ignored --nocapture`.
#[test]
#[ignore = "measurement; run with --ignored --nocapture (release build)"]
fn cost_of_timestamps_under_a_flood() {
    if let Some(why) = slipstream_testbed::missing_prerequisite(&["ip", "iptables-legacy"]) {
        panic!("cannot run here: {why}");
    }
    let (_cleanup, [a, r, _b]) = topology("m");
    sh(&[
        "ip",
        "netns",
        "exec",
        &r,
        "iptables-legacy",
        "-t",
        "mangle",
        "-A",
        "FORWARD",
        "-p",
        "udp",
        "-j",
        "NFQUEUE",
        "--queue-num",
        "7301",
    ]);
    const DATAGRAMS: usize = 200_000;
    for timed in [false, true, false, true] {
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (r, stop) = (r.clone(), stop.clone());
            std::thread::spawn(move || {
                enter_netns(&r);
                let mut dp = Datapath::open(QueueConfig {
                    ack_queue: 7301,
                    data_queue: 7401,
                    max_len: 4096,
                    data_copy_bytes: 128,
                })
                .unwrap();
                if timed {
                    dp.enable_timestamps().unwrap();
                }
                let (mut packets, mut waits) = (0usize, Vec::new());
                let mut cpu = 0.0;
                while !stop.load(Ordering::Relaxed) {
                    dp.wait_readable(20).unwrap();
                    let started = thread_cpu_seconds();
                    while let Some((mut msg, stamp)) = dp.try_recv_timed().unwrap() {
                        if let Some(stamp) = stamp {
                            if let Ok(wait) = SystemTime::now().duration_since(stamp) {
                                waits.push(wait.as_secs_f64() * 1e3);
                            }
                        }
                        packets += 1;
                        msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
                        dp.verdict(msg).unwrap();
                    }
                    cpu += thread_cpu_seconds() - started;
                }
                (packets, cpu, waits)
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        let a = a.clone();
        std::thread::spawn(move || {
            enter_netns(&a);
            let udp = UdpSocket::bind("10.82.1.2:0").unwrap();
            for _ in 0..DATAGRAMS {
                let _ = udp.send_to(&[0u8; 64], ("10.82.2.2", 9));
            }
        })
        .join()
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        let (packets, cpu, mut waits) = reader.join().unwrap();
        waits.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            waits
                .get(((waits.len() as f64 - 1.0) * p) as usize)
                .copied()
                .unwrap_or(f64::NAN)
        };
        eprintln!(
            "{:>15}: {packets} of {DATAGRAMS} datagrams read, reader CPU {:.2} us/packet; \
             stamp-to-read wait (ms) p50 {:.3}, p90 {:.3}, p99 {:.3}, max {:.3} ({} stamped)",
            if timed { "try_recv_timed" } else { "try_recv" },
            cpu * 1e6 / packets.max(1) as f64,
            pct(0.5),
            pct(0.9),
            pct(0.99),
            pct(1.0),
            waits.len()
        );
    }
}
