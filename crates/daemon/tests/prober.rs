//! The link-delay prober on a real wire: it measures a queue of known depth behind the gateway.
//!
//! Two namespaces joined by a veth pair: `a` runs the prober (the router; its default route
//! goes via `b`, so `household.probe = "auto"` finds `b`), `b` is the gateway and reflector.
//! `b`'s egress towards `a` is a tbf at 10 Mbit/s holding at most 62 500 bytes: once a UDP
//! flood from `b` to `a` (iperf3, 20 Mbit/s, twice the rate) keeps it full, every echo reply
//! waits behind 50 ms of queue (62 500 bytes × 8 / 10 Mbit/s). The prober runs on a thread
//! that entered `a`, driven as the packet loop drives it, with a fixed interval (the engine
//! decides it in the daemon). Checked: idle RTTs are small with both socket kinds (raw, with
//! the daemon's two capabilities, and unprivileged, with none, once `ping_group_range`
//! allows), over IPv6 to an address, and with a slow loop (kernel receive stamps: the time a
//! reply waits to be read does not count); with neither socket kind allowed, nothing is sent;
//! the raw IPv4 socket's timestamp probes give one-way halves, and echoes follow once a
//! reflector has dropped them; loaded, the RTT rises by the queue's 50 ms, and agrees with
//! `ping` measuring next to it, and of the halves only the reply's rises; the counters add up.
//!
//! Needs root, `ip`, `tc`, `iptables`, `iperf3` and `ping`: ignored by default, `scripts/test.sh` runs it
//! (--ignored); without them it fails saying why. About 13 s. Namespaces are `ssprb{a,b}<pid>`,
//! deleted at the end, also after a failure.
#![allow(unsafe_code, reason = "setns(2) for the prober's thread")]

#[allow(dead_code)]
#[path = "../src/clock.rs"]
mod clock;
#[allow(dead_code)]
#[path = "../src/kernel_time.rs"]
mod kernel_time;
#[allow(dead_code)]
#[path = "../src/prober/mod.rs"]
mod prober;

mod common;

use std::os::fd::AsRawFd;
use std::process::{Child, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caps::{CapSet, Capability};
use common::{sh, Pair};
use slipstream_config::ProbeTarget;
use slipstream_metrics::ProbeCounters;

/// The bottleneck on the reflector's egress, and the queue it holds.
const RATE_BPS: u64 = 10_000_000;
const QUEUE_BYTES: u64 = 62_500;
/// The delay a full queue adds: 50 ms.
const QUEUE_DELAY_MS: f64 = (QUEUE_BYTES * 8) as f64 * 1000.0 / RATE_BPS as f64;

fn skip_reason() -> Option<String> {
    slipstream_testbed::missing_prerequisite(&["ip", "tc", "iptables", "iperf3", "ping"])
}

/// Child processes killed on drop.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What one run of the prober measured.
struct Run {
    /// Round-trip times of the answered probes, ms.
    rtts_ms: Vec<f64>,
    /// The one-way halves (up, down) of the answered timestamp probes, ms, on the two clocks'
    /// offset (none here: both namespaces share the machine's clock).
    halves_ms: Vec<(f64, f64)>,
    counters: Arc<ProbeCounters>,
    /// Turns that began with a probe due and ended with one still due: the turn did not use the
    /// slot, and a loop sleeping until the next probe would spin.
    spinning_turns: usize,
}

/// The capabilities the daemon keeps (`privileges::KEPT`): its packet thread opens the socket.
const KEPT: [Capability; 2] = [Capability::CAP_NET_ADMIN, Capability::CAP_NET_RAW];

/// Runs a prober (target "auto") in namespace `ns` for `length` with only the `effective`
/// capabilities, probing every `interval`, the loop turning every `turn` (as the packet loop
/// does between batches).
fn probe(ns: &str, effective: &[Capability], length: Duration, interval: Duration, turn: Duration) -> Run {
    probe_to(ProbeTarget::Auto, ns, effective, length, interval, turn)
}

/// [`probe`] to `target`.
fn probe_to(
    target: ProbeTarget,
    ns: &str,
    effective: &[Capability],
    length: Duration,
    interval: Duration,
    turn: Duration,
) -> Run {
    let path = format!("/var/run/netns/{ns}");
    std::thread::scope(|s| {
        s.spawn(|| {
            let netns = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns on a valid namespace descriptor; it moves only this thread.
            let r = unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            // This thread only: capabilities belong to threads.
            caps::set(None, CapSet::Effective, &effective.iter().copied().collect()).expect("capset");
            let counters = Arc::new(ProbeCounters::default());
            let mut prober = prober::Prober::new(target, counters.clone());
            let clock = clock::MonotonicClock::start();
            let mut rtts_ms = Vec::new();
            let mut halves_ms = Vec::new();
            let mut spinning_turns = 0;
            let end = Instant::now() + length;
            let due_now = |prober: &prober::Prober| {
                prober.until_due(Some(interval), clock.now()) == Some(Duration::ZERO)
            };
            while Instant::now() < end {
                // Due after the turn alone is no spin: the slot may have come due between the
                // turn's clock read and this one, and the next turn takes it.
                let due_before = due_now(&prober);
                prober.turn(Some(interval), &clock, |sent, received, halves| {
                    rtts_ms.push(received.saturating_since(sent).as_secs_f64() * 1000.0);
                    halves_ms.extend(halves.map(|h| (h.up_us as f64 / 1000.0, h.down_us as f64 / 1000.0)));
                });
                if due_before && due_now(&prober) {
                    spinning_turns += 1;
                }
                std::thread::sleep(turn);
            }
            // The last replies in flight: read, nothing more sent.
            std::thread::sleep(Duration::from_millis(150));
            prober.turn(None, &clock, |sent, received, halves| {
                rtts_ms.push(received.saturating_since(sent).as_secs_f64() * 1000.0);
                halves_ms.extend(halves.map(|h| (h.up_us as f64 / 1000.0, h.down_us as f64 / 1000.0)));
            });
            Run {
                rtts_ms,
                halves_ms,
                counters,
                spinning_turns,
            }
        })
        .join()
        .expect("the prober's thread")
    })
}

fn median(values: &[f64]) -> f64 {
    assert!(!values.is_empty(), "no samples");
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The medians of the up and of the down halves.
fn half_medians(halves: &[(f64, f64)]) -> (f64, f64) {
    let up: Vec<f64> = halves.iter().map(|h| h.0).collect();
    let down: Vec<f64> = halves.iter().map(|h| h.1).collect();
    (median(&up), median(&down))
}

/// `ping`'s per-reply RTTs, ms.
fn ping_rtts(output: &str) -> Vec<f64> {
    output
        .lines()
        .filter_map(slipstream_testbed::cmd::ping_reply_rtt_ms)
        .collect()
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn the_prober_measures_the_queue_behind_the_gateway() {
    if let Some(why) = skip_reason() {
        panic!("cannot run: {why}");
    }
    let pair = Pair::create("ssprb", "10.84.0");
    sh(&["ip", "-n", &pair.a, "route", "add", "default", "via", "10.84.0.2"]);
    let burst = slipstream_testbed::cmd::tbf_burst_bytes(RATE_BPS);
    let tbf = slipstream_testbed::cmd::tbf_args("vB", RATE_BPS, burst, QUEUE_BYTES);
    let mut tc = vec!["tc", "-n", pair.b.as_str()];
    tc.extend(tbf.iter().map(String::as_str));
    sh(&tc);

    // Idle, raw socket (a fresh namespace's ping_group_range is "1 0": no unprivileged pings).
    let interval = Duration::from_millis(20);
    let idle = probe(
        &pair.a,
        &KEPT,
        Duration::from_millis(1500),
        interval,
        Duration::from_millis(1),
    );
    let idle_ms = median(&idle.rtts_ms);
    println!(
        "idle, raw socket: {} samples, median {idle_ms:.3} ms, target {}",
        idle.rtts_ms.len(),
        idle.counters.target()
    );
    assert_eq!(idle.counters.target(), "10.84.0.2 (gateway via vA)");
    assert!(idle.rtts_ms.len() >= 50, "{} samples", idle.rtts_ms.len());
    assert!(idle_ms < 5.0, "idle median {idle_ms} ms");
    // The raw socket sends ICMP timestamp requests, which Linux answers: every answer has its
    // one-way halves, each within the reflector's millisecond ticks of the idle path.
    assert_eq!(idle.halves_ms.len(), idle.rtts_ms.len(), "timestamp replies");
    let (idle_up, idle_down) = half_medians(&idle.halves_ms);
    println!("idle, one-way halves: up {idle_up:.3} ms, down {idle_down:.3} ms");
    assert!(idle_up.abs() < 2.0 && idle_down.abs() < 2.0);

    // A slow loop (turns 25 ms apart): replies wait up to 25 ms to be read, and do not count.
    let slow = probe(
        &pair.a,
        &KEPT,
        Duration::from_millis(1500),
        interval,
        Duration::from_millis(25),
    );
    let slow_ms = median(&slow.rtts_ms);
    println!(
        "idle, slow loop: {} samples, median {slow_ms:.3} ms",
        slow.rtts_ms.len()
    );
    assert!(slow.rtts_ms.len() >= 30, "{} samples", slow.rtts_ms.len());
    assert!(
        slow_ms < 5.0,
        "with a 25 ms loop the median is {slow_ms} ms: no kernel stamps?"
    );

    // IPv6, to an address (raw ICMPv6 socket).
    pair.add_v6("fd84");
    let v6 = probe_to(
        ProbeTarget::Address("fd84::2".parse().unwrap()),
        &pair.a,
        &KEPT,
        Duration::from_millis(600),
        interval,
        Duration::from_millis(1),
    );
    let v6_ms = median(&v6.rtts_ms);
    println!("idle, IPv6: {} samples, median {v6_ms:.3} ms", v6.rtts_ms.len());
    assert_eq!(v6.counters.target(), "fd84::2");
    assert!(v6.rtts_ms.len() >= 20, "{} samples", v6.rtts_ms.len());
    assert!(v6_ms < 5.0, "idle median {v6_ms} ms");
    assert!(v6.halves_ms.is_empty(), "ICMPv6 has no timestamps: echoes");

    // Without CAP_NET_RAW and without unprivileged pings: no socket, nothing sent, no samples.
    let none = probe(
        &pair.a,
        &[Capability::CAP_NET_ADMIN],
        Duration::from_millis(300),
        interval,
        Duration::from_millis(1),
    );
    assert!(none.rtts_ms.is_empty());
    assert_eq!(none.spinning_turns, 0, "without a socket the loop would spin");
    assert_eq!(none.counters.sent.load(Ordering::Relaxed), 0);

    // Idle, unprivileged socket (no capability needed).
    sh(&[
        "ip",
        "netns",
        "exec",
        &pair.a,
        "sysctl",
        "-q",
        "-w",
        "net.ipv4.ping_group_range=0 0",
    ]);
    let dgram = probe(
        &pair.a,
        &[],
        Duration::from_millis(1000),
        interval,
        Duration::from_millis(1),
    );
    let dgram_ms = median(&dgram.rtts_ms);
    println!(
        "idle, unprivileged socket: {} samples, median {dgram_ms:.3} ms",
        dgram.rtts_ms.len()
    );
    assert!(dgram.rtts_ms.len() >= 30, "{} samples", dgram.rtts_ms.len());
    assert!(dgram_ms < 5.0, "idle median {dgram_ms} ms");
    assert!(
        dgram.halves_ms.is_empty(),
        "an unprivileged socket sends echoes only"
    );

    // A reflector that drops timestamp requests: after TIMESTAMP_TRIES of them are lost (2 s
    // each), echoes, whose round trips are samples again.
    sh(&[
        "ip",
        "netns",
        "exec",
        &pair.b,
        "iptables",
        "-A",
        "INPUT",
        "-p",
        "icmp",
        "--icmp-type",
        "timestamp-request",
        "-j",
        "DROP",
    ]);
    let refused = probe(
        &pair.a,
        &KEPT,
        Duration::from_millis(3000),
        interval,
        Duration::from_millis(1),
    );
    sh(&[
        "ip",
        "netns",
        "exec",
        &pair.b,
        "iptables",
        "-D",
        "INPUT",
        "-p",
        "icmp",
        "--icmp-type",
        "timestamp-request",
        "-j",
        "DROP",
    ]);
    println!(
        "timestamps refused: {} echo samples, {} lost",
        refused.rtts_ms.len(),
        refused.counters.lost.load(Ordering::Relaxed)
    );
    assert!(refused.halves_ms.is_empty());
    assert!(
        refused.rtts_ms.len() >= 10,
        "echoes after the refusal: {}",
        refused.rtts_ms.len()
    );
    assert!(median(&refused.rtts_ms) < 5.0);

    // Loaded: the flood fills b's queue towards a; ping measures next to the prober.
    let mut children = Children(Vec::new());
    children.0.push(
        Pair::exec(&pair.a, &["iperf3", "-s", "-1", "-p", "5284", "-B", "10.84.0.1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    children.0.push(
        Pair::exec(
            &pair.b,
            &[
                "iperf3",
                "-c",
                "10.84.0.1",
                "-p",
                "5284",
                "-u",
                "-b",
                "20M",
                "-t",
                "8",
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    let ping = Pair::exec(&pair.a, &["ping", "-n", "-i", "0.05", "-c", "50", "10.84.0.2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let loaded = probe(
        &pair.a,
        &KEPT,
        Duration::from_millis(2500),
        interval,
        Duration::from_millis(1),
    );
    let ping_out = String::from_utf8_lossy(&ping.wait_with_output().unwrap().stdout).into_owned();
    drop(children);
    let loaded_ms = median(&loaded.rtts_ms);
    let ping_ms = median(&ping_rtts(&ping_out));
    let c = &loaded.counters;
    let (sent, answered, lost) = (
        c.sent.load(Ordering::Relaxed),
        c.answered.load(Ordering::Relaxed),
        c.lost.load(Ordering::Relaxed),
    );
    println!(
        "loaded: {} samples, median {loaded_ms:.2} ms (rise {:.2} ms, the queue holds {QUEUE_DELAY_MS} ms); \
         ping next to it: median {ping_ms:.2} ms of {} replies; probes sent {sent}, answered {answered}, lost {lost}",
        loaded.rtts_ms.len(),
        loaded_ms - idle_ms,
        ping_rtts(&ping_out).len()
    );
    assert!(loaded.rtts_ms.len() >= 20, "{} samples", loaded.rtts_ms.len());
    for run in [&idle, &slow, &v6, &dgram, &loaded] {
        assert_eq!(run.spinning_turns, 0);
    }
    let rise = loaded_ms - idle_ms;
    assert!(
        (QUEUE_DELAY_MS * 0.8..=QUEUE_DELAY_MS * 1.2).contains(&rise),
        "the RTT rose by {rise:.2} ms; a full queue adds {QUEUE_DELAY_MS} ms"
    );
    assert!(
        (loaded_ms - ping_ms).abs() <= 5.0,
        "prober {loaded_ms:.2} ms, ping {ping_ms:.2} ms"
    );
    // The queue is on b's egress: the reply's half rose by it, the request's did not.
    let (loaded_up, loaded_down) = half_medians(&loaded.halves_ms);
    println!("loaded, one-way halves: up {loaded_up:.3} ms, down {loaded_down:.3} ms");
    assert_eq!(loaded.halves_ms.len(), loaded.rtts_ms.len());
    let down_rise = loaded_down - idle_down;
    assert!(
        (QUEUE_DELAY_MS * 0.8..=QUEUE_DELAY_MS * 1.2).contains(&down_rise),
        "the reply's half rose by {down_rise:.2} ms; the queue holds {QUEUE_DELAY_MS} ms"
    );
    assert!(
        (loaded_up - idle_up).abs() < 3.0,
        "the request's half moved: {idle_up:.2} -> {loaded_up:.2} ms"
    );
    // Each answer is one sample; a probe the full queue dropped waits to be counted lost (2 s).
    assert_eq!(answered, loaded.rtts_ms.len() as u64);
    assert!(
        answered + lost <= sent,
        "sent {sent}, answered {answered}, lost {lost}"
    );
    assert!(sent >= 100, "{sent} probes in 2.5 s at 20 ms");
    assert!(c.last_rtt_seconds().is_some());

    // "auto" without a default route: no target, nothing sent, said in the target.
    sh(&["ip", "-n", &pair.a, "route", "del", "default"]);
    let gone = probe(
        &pair.a,
        &KEPT,
        Duration::from_millis(300),
        interval,
        Duration::from_millis(1),
    );
    assert_eq!(gone.counters.target(), "none: no default gateway");
    assert_eq!(gone.counters.sent.load(Ordering::Relaxed), 0);
    assert_eq!(gone.spinning_turns, 0);
}
