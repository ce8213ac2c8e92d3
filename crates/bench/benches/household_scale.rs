//! Household control at scale: an apartment building's router with up to 10 000 background
//! flows over 200 LAN hosts. Run: `cargo bench -p slipstream-bench --bench household_scale`.
//!
//! * `allocate/{ample,mixed,scarce,host_per_flow}/N`: the allocator alone
//!   (`slipstream_household::allocate_with`, its scratch space kept between rounds as the engine
//!   keeps it) over N flows of 200 hosts and two rules (weights 1 and 3): a budget above every
//!   flow's fair share, flows of varied demands that take half the budget, a budget below the
//!   flows' floors (time-sharing), and `ample` with every flow on a host of its own.
//! * `round/N`: one household round through the engine (collect the link's flows, sort them,
//!   build their demands, the budget controller, allocate, apply) with N flows, every flow having
//!   had a data segment and its ACK since the last round.
//! * `packet_10000/{no_round,with_rounds,batched_rounds}`: the per-packet path (a data segment
//!   or an ACK of one of 10 000 household flows, in turn); `no_round` at one instant, so no
//!   round comes due, and `with_rounds` with 10 us between packets (100 000 packets/s), so a
//!   round per link and round length runs inside `handle_packet`, its cost spread over the
//!   packets; `batched_rounds` the same with the rounds deferred to the end of each batch of 256
//!   packets (`Engine::defer_rounds`, as the daemon runs them).
//!
//! Times are the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall time: on a shared
//! machine, wall time also counts the time other processes held the core.
#![allow(
    clippy::incompatible_msrv,
    reason = "benches, like the tests, build with Rust 1.88+; the 1.85 floor is the router build's"
)]
#![allow(unsafe_code, reason = "clock_gettime for the thread's CPU time")]

use std::hint::black_box;
use std::time::Duration as StdDuration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use etherparse::{PacketBuilder, TcpOptionElement};
use slipstream_control::{ControllerConfig, Duration, Instant};
use slipstream_engine::{Engine, EngineConfig, PacketCopy, PacketMeta, RuleSpec, ShareSpec};
use slipstream_household::{allocate_with, AllocScratch, FlowDemand};

const HOSTS: usize = 200;
const MSS: u32 = 1448;
const SCALE: u8 = 7;
const SERVER_ISN: u32 = 1000;
/// The hosts' window field: 4 MiB at scale 7.
const HOST_FIELD: u16 = 32768;
/// Offsets in the packets below (IPv4 header of 20 bytes, no IP options).
const TCP: usize = 20;
const RTT_US: u64 = 20_000;

/// The calling thread's CPU time.
fn thread_cpu() -> StdDuration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through the pointer, which points to one.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    StdDuration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Criterion measuring the thread's CPU time.
struct ThreadTime;

static WALL: WallTime = WallTime;

impl Measurement for ThreadTime {
    type Intermediate = StdDuration;
    type Value = StdDuration;

    fn start(&self) -> StdDuration {
        thread_cpu()
    }

    fn end(&self, start: StdDuration) -> StdDuration {
        thread_cpu().saturating_sub(start)
    }

    fn add(&self, a: &StdDuration, b: &StdDuration) -> StdDuration {
        *a + *b
    }

    fn zero(&self) -> StdDuration {
        StdDuration::ZERO
    }

    fn to_f64(&self, value: &StdDuration) -> f64 {
        value.as_nanos() as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

type Crit = Criterion<ThreadTime>;

fn rule_of(i: usize) -> u16 {
    if i % 4 == 3 {
        2
    } else {
        1
    }
}

fn share_of(rule: u16) -> ShareSpec {
    ShareSpec {
        weight: if rule == 2 { 3 } else { 1 },
        ..ShareSpec::default()
    }
}

// --- The allocator alone ------------------------------------------------------------------------

fn demands(n: usize, hosts: usize, limited: impl Fn(usize) -> Option<u64>) -> Vec<FlowDemand> {
    (0..n)
        .map(|i| {
            let rule = rule_of(i);
            FlowDemand {
                host: (i % hosts) as u64 * 0x9e37_79b9_7f4a_7c15,
                rule,
                share: share_of(rule),
                rtt: Duration::from_millis(20 + (i % 7) as u64),
                floor: 2 * MSS,
                demand: limited(i).unwrap_or(u64::MAX),
                outstanding: u64::from(MSS),
                credit: 0,
                turn_since: None,
                held_since: None,
            }
        })
        .collect()
}

fn bench_allocate(c: &mut Crit) {
    let mut group = c.benchmark_group("allocate");
    group.measurement_time(StdDuration::from_secs(3));
    for n in [16usize, 1000, 10_000] {
        let floors = n as u64 * u64::from(2 * MSS);
        // Varied demands (one to 64 segments), so water-filling satisfies claimants in many steps.
        let varied = |i: usize| Some(u64::from(MSS) * (1 + (i as u64 * 7919) % 64));
        let total_varied: u64 = (0..n).filter_map(varied).sum();
        let ample = |i: usize| i.is_multiple_of(4).then_some(20_000);
        let cases: [(&str, Vec<FlowDemand>, u64); 4] = [
            ("ample", demands(n, HOSTS, ample), 4 * floors),
            ("mixed", demands(n, HOSTS, varied), total_varied / 2),
            ("scarce", demands(n, HOSTS, |_| None), floors / 3),
            // Every flow a host of its own (a group per flow): the case a search through the
            // groups found so far made quadratic.
            ("host_per_flow", demands(n, n, ample), 4 * floors),
        ];
        for (name, flows, budget) in cases {
            let mut flows = flows;
            let mut out = Vec::new();
            let mut scratch = AllocScratch::default();
            let mut round = 0u64;
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| {
                    round += 1;
                    let now = Instant::from_micros(round * RTT_US);
                    allocate_with(
                        &mut scratch,
                        black_box(budget),
                        &mut flows,
                        now,
                        Duration::from_millis(500),
                        &mut out,
                    )
                })
            });
        }
    }
    group.finish();
}

// --- Through the engine -------------------------------------------------------------------------

/// One flow of the model: its packets, prebuilt, and where its sender is.
struct BenchFlow {
    data: Vec<u8>,
    ack: Vec<u8>,
    seq: u32,
}

fn client(i: usize, hosts: usize) -> ([u8; 4], u16) {
    let h = i % hosts;
    (
        [10, 0, (h / 250) as u8, (h % 250 + 2) as u8],
        40000 + (i / hosts) as u16,
    )
}

const SERVER: ([u8; 4], u16) = ([192, 0, 2, 1], 6881);

fn build(from_server: bool, i: usize, hosts: usize, seq: u32, ack: u32, syn: bool, payload: u32) -> Vec<u8> {
    let c = client(i, hosts);
    let ((src, sp), (dst, dp)) = if from_server { (SERVER, c) } else { (c, SERVER) };
    let field = if syn { 65535 } else { HOST_FIELD };
    let mut b = PacketBuilder::ipv4(src, dst, 64).tcp(sp, dp, seq, field);
    if syn {
        b = b.syn();
    }
    if !syn || from_server {
        b = b.ack(ack);
    }
    let b = if syn {
        b.options(&[
            TcpOptionElement::MaximumSegmentSize(MSS as u16),
            TcpOptionElement::Noop,
            TcpOptionElement::WindowScale(SCALE),
        ])
        .expect("options")
    } else {
        b
    };
    let mut out = Vec::new();
    b.write(&mut out, &vec![0u8; payload as usize]).expect("write");
    out
}

fn meta(rule: u16, from_lan: bool, copy: PacketCopy) -> PacketMeta {
    PacketMeta {
        rule: Some(rule),
        copy,
        checksum_ready: true,
        from_lan: Some(from_lan),
        arrival: None,
    }
}

fn set_u32(p: &mut [u8], at: usize, v: u32) {
    p[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// The household engine with `n` flows over `hosts` LAN hosts, each past its handshake and its
/// first segments; returns it with the flows and the time reached.
fn household(n: usize, hosts: usize) -> (Engine, Vec<BenchFlow>, u64) {
    let mut e = Engine::new(EngineConfig {
        rules: (1..=2)
            .map(|r| RuleSpec {
                name: format!("r{r}"),
                controller: ControllerConfig::Household,
                share: share_of(r),
            })
            .collect(),
        max_flows: n + 16,
        idle_timeout: Duration::from_secs(120),
        evict_idle_after: Duration::from_secs(10),
        household: Default::default(),
    });
    let mut flows = Vec::with_capacity(n);
    // Handshakes 10 us apart (each takes one RTT).
    for i in 0..n {
        let t = i as u64 * 10;
        let rule = rule_of(i);
        let mut syn = build(false, i, hosts, 100, 0, true, 0);
        let mut synack = build(true, i, hosts, SERVER_ISN, 101, true, 0);
        let mut ack = build(false, i, hosts, 101, SERVER_ISN + 1, false, 0);
        e.handle_packet(
            Instant::from_micros(t),
            &mut syn,
            meta(rule, true, PacketCopy::Full),
        );
        e.handle_packet(
            Instant::from_micros(t + RTT_US),
            &mut synack,
            meta(rule, false, PacketCopy::Full),
        );
        e.handle_packet(
            Instant::from_micros(t + RTT_US + 400),
            &mut ack,
            meta(rule, true, PacketCopy::Full),
        );
        let mut data = build(true, i, hosts, SERVER_ISN + 1, 101, false, MSS);
        // Header-only, as through the data queue (the IP length still says the whole segment).
        data.truncate(data.len() - MSS as usize);
        flows.push(BenchFlow {
            data,
            ack,
            seq: SERVER_ISN + 1,
        });
    }
    let mut now = n as u64 * 10 + RTT_US + 1000;
    // A few segments per flow, so every flow knows its sender and has a share.
    for _ in 0..4 {
        for (i, f) in flows.iter_mut().enumerate() {
            now += 10;
            step(&mut e, f, i, now, 0);
            step(&mut e, f, i, now, 1);
        }
    }
    (e, flows, now)
}

/// Flow `i`'s next data segment (`which` 0) or the ACK of its last one (1).
fn step(e: &mut Engine, f: &mut BenchFlow, i: usize, now_us: u64, which: u8) {
    let rule = rule_of(i);
    let now = Instant::from_micros(now_us);
    if which == 0 {
        set_u32(&mut f.data, TCP + 4, f.seq);
        f.seq = f.seq.wrapping_add(MSS);
        e.handle_packet(now, &mut f.data, meta(rule, false, PacketCopy::HeaderOnly));
    } else {
        set_u32(&mut f.ack, TCP + 8, f.seq);
        // The host's window again (a rewrite changed it in place).
        f.ack[TCP + 14..TCP + 16].copy_from_slice(&HOST_FIELD.to_be_bytes());
        e.handle_packet(now, &mut f.ack, meta(rule, true, PacketCopy::Full));
    }
}

fn bench_round(c: &mut Crit) {
    let mut group = c.benchmark_group("round");
    group.sample_size(10);
    group.measurement_time(StdDuration::from_secs(4));
    for n in [16usize, 1000, 10_000] {
        let hosts = HOSTS.min(n);
        let (mut e, mut flows, mut now) = household(n, hosts);
        // Rounds every second of model time: between two, each flow sends a segment and its
        // receiver ACKs it (not timed), then the round that is due runs (timed).
        now += 1_000_000;
        e.run_due_rounds(Instant::from_micros(now));
        let snap = e.snapshot(0);
        assert_eq!(snap.links[0].flows, n, "every flow is in the round");
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                let mut spent = StdDuration::ZERO;
                for _ in 0..iters {
                    for (i, f) in flows.iter_mut().enumerate() {
                        step(&mut e, f, i, now + 1, 0);
                        step(&mut e, f, i, now + 1, 1);
                    }
                    now += 1_000_000;
                    let before = e.household_rounds();
                    let start = thread_cpu();
                    e.run_due_rounds(Instant::from_micros(now));
                    spent += thread_cpu() - start;
                    assert!(e.household_rounds() > before, "a round ran");
                }
                spent
            })
        });
        let snap = e.snapshot(0);
        eprintln!(
            "round/{n}: {} flows, {} held, budget {} bytes",
            snap.links[0].flows, snap.links[0].held_flows, snap.links[0].budget_bytes
        );
    }
    group.finish();
}

fn bench_packets(c: &mut Crit) {
    let mut group = c.benchmark_group("packet_10000");
    let n = 10_000;
    let (mut e, mut flows, now) = household(n, HOSTS);
    let now = now + 1_000_000;
    e.run_due_rounds(Instant::from_micros(now));
    let mut k = 0usize;
    // At one instant: no round comes due.
    group.bench_function("no_round", |b| {
        b.iter(|| {
            let i = (k / 2) % n;
            step(&mut e, &mut flows[i], i, now, (k % 2) as u8);
            k += 1;
        })
    });
    // 10 us apart: a round every 2000 packets, run inside handle_packet.
    let mut now = now;
    let rounds_before = e.household_rounds();
    let mut packets = 0u64;
    group.bench_function("with_rounds", |b| {
        b.iter(|| {
            now += 10;
            let i = (k / 2) % n;
            step(&mut e, &mut flows[i], i, now, (k % 2) as u8);
            k += 1;
            packets += 1;
        })
    });
    eprintln!(
        "packet_10000/with_rounds: {} rounds over {packets} packets",
        e.household_rounds() - rounds_before
    );
    // The same, as the daemon runs it: rounds deferred to the end of each batch of 256 packets.
    e.defer_rounds(true);
    let rounds_before = e.household_rounds();
    let mut packets = 0u64;
    group.bench_function("batched_rounds", |b| {
        b.iter(|| {
            now += 10;
            let i = (k / 2) % n;
            step(&mut e, &mut flows[i], i, now, (k % 2) as u8);
            k += 1;
            packets += 1;
            if packets.is_multiple_of(256) {
                e.run_due_rounds(Instant::from_micros(now));
            }
        })
    });
    eprintln!(
        "packet_10000/batched_rounds: {} rounds over {packets} packets",
        e.household_rounds() - rounds_before
    );
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadTime);
    targets = bench_allocate, bench_round, bench_packets
}
criterion_main!(benches);
