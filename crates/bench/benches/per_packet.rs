//! Per-packet cost of the core path (parse, flow lookup, controller update, rewrite) and the
//! memory one flow takes. Run: `cargo bench -p slipstream-bench --bench per_packet`.
//!
//! The flow is a steady download under the Vulture controller: each iteration patches the next
//! sequence number and timestamps into a prebuilt packet, as a real stream would bring them.
#![allow(unsafe_code, reason = "a counting global allocator measures memory per flow")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{criterion_group, criterion_main, Criterion};
use etherparse::{PacketBuilder, TcpOptionElement};
use slipstream_control::{ControllerConfig, ControllerMode, Duration, FixedWindowConfig, Instant};
use slipstream_engine::{Engine, EngineConfig, PacketCopy, PacketMeta, RuleSpec};

/// Counts live heap bytes, to measure memory per flow.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
// SAFETY: every call is passed on to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds alloc's contract, which System's is the same as.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from System.alloc with this layout (alloc above).
        unsafe { System.dealloc(ptr, layout) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

const TCP: usize = 20; // IPv4 header length of the packets below

fn packet(
    from_server: bool,
    client_port: u16,
    seq: u32,
    ack: u32,
    window: u16,
    payload: usize,
    syn: bool,
) -> Vec<u8> {
    let (src, dst, sp, dp) = if from_server {
        ([192, 0, 2, 1], [10, 0, 0, 2], 6881, client_port)
    } else {
        ([10, 0, 0, 2], [192, 0, 2, 1], client_port, 6881)
    };
    let mut b = PacketBuilder::ipv4(src, dst, 64).tcp(sp, dp, seq, window);
    if syn {
        b = b.syn();
    }
    if !syn || from_server {
        b = b.ack(ack);
    }
    let mut opts = vec![TcpOptionElement::Timestamp(1, 1)];
    if syn {
        opts.push(TcpOptionElement::MaximumSegmentSize(1460));
        opts.push(TcpOptionElement::WindowScale(7));
    }
    let b = b.options(&opts).unwrap();
    let mut out = Vec::new();
    b.write(&mut out, &vec![0u8; payload]).unwrap();
    out
}

fn set_u32(p: &mut [u8], at: usize, v: u32) {
    p[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn engine(max_flows: usize) -> Engine {
    engine_with(max_flows, ControllerConfig::Vulture(Default::default()))
}

fn engine_with(max_flows: usize, controller: ControllerConfig) -> Engine {
    Engine::new(EngineConfig {
        rules: vec![RuleSpec {
            name: "bulk".into(),
            controller,
            share: Default::default(),
        }],
        max_flows,
        idle_timeout: Duration::from_secs(120),
        evict_idle_after: Duration::from_secs(10),
        household: Default::default(),
    })
}

fn meta(copy: PacketCopy) -> PacketMeta {
    PacketMeta {
        rule: Some(1),
        copy,
        checksum_ready: true,
        from_lan: None,
        arrival: None,
    }
}

fn open_flow(e: &mut Engine, client_port: u16, now: Instant) {
    e.handle_packet(
        now,
        &mut packet(false, client_port, 100, 0, 65535, 0, true),
        meta(PacketCopy::Full),
    );
    e.handle_packet(
        now,
        &mut packet(true, client_port, 5000, 101, 65535, 0, true),
        meta(PacketCopy::Full),
    );
}

fn per_packet(c: &mut Criterion) {
    let mut e = engine(16);
    open_flow(&mut e, 40000, Instant::ZERO);
    let mut data = packet(true, 40000, 5001, 101, 1000, 1448, false);
    // The header-only copy (`data_copy_bytes = 128`, parse_headers); the default copies data
    // packets whole.
    data.truncate(data.len() - 1448);
    let mut ack = packet(false, 40000, 101, 5001, 20000, 0, false);
    let mut seq = 5001u32;
    let mut now_us = 1_000_000u64;
    let mut ts = 1000u32;
    // Warm up the flow so Vulture is past its warm-up and clamping.
    let mut step = |e: &mut Engine, data: &mut Vec<u8>, ack: &mut Vec<u8>, which: u8| {
        now_us += 1157; // 1448 B at 10 Mbit/s
        ts = (now_us / 1000) as u32;
        if which == 0 {
            set_u32(data, TCP + 4, seq);
            // Timestamp option first: kind, length, TSval at +22, TSecr at +26. The data echoes
            // the receiver's TSval of about one 100 ms RTT earlier.
            set_u32(data, TCP + 22, ts);
            set_u32(data, TCP + 26, ts.wrapping_sub(100));
            seq = seq.wrapping_add(1448);
            e.handle_packet(Instant::from_micros(now_us), data, meta(PacketCopy::HeaderOnly))
        } else {
            set_u32(ack, TCP + 8, seq);
            // The host's window again (a rewrite of the previous round changed it in place).
            ack[TCP + 14..TCP + 16].copy_from_slice(&20000u16.to_be_bytes());
            set_u32(ack, TCP + 22, ts);
            e.handle_packet(Instant::from_micros(now_us), ack, meta(PacketCopy::Full))
        }
    };
    for i in 0..20_000u32 {
        step(&mut e, &mut data, &mut ack, (i % 2) as u8);
    }
    let stats = e.snapshot(1).flows[0]
        .controller
        .expect("the flow has its controller");
    eprintln!(
        "after warm-up: mode {} policy {} target {:?}",
        stats.mode, stats.policy, stats.target_window
    );
    c.bench_function("data_packet", |b| b.iter(|| step(&mut e, &mut data, &mut ack, 0)));
    c.bench_function("ack_packet", |b| b.iter(|| step(&mut e, &mut data, &mut ack, 1)));

    // The same ACK path when every ACK is rewritten (a fixed clamp below the host's window):
    // the cost of the clamp rules and the RFC 1624 checksum update on top.
    let mut fixed = engine_with(
        16,
        ControllerConfig::FixedWindow(FixedWindowConfig { window_bytes: 64_000 }),
    );
    open_flow(&mut fixed, 40000, Instant::ZERO);
    // Long enough for the ACKs to pass the right edge the host's first window advertised, which
    // the clamp must not pull back.
    for i in 0..10_000u32 {
        step(&mut fixed, &mut data, &mut ack, (i % 2) as u8);
    }
    let verdict = step(&mut fixed, &mut data, &mut ack, 1);
    assert_eq!(
        verdict,
        slipstream_engine::Verdict::AcceptModified,
        "the fixed clamp rewrites"
    );
    c.bench_function("ack_packet_rewritten", |b| {
        b.iter(|| step(&mut fixed, &mut data, &mut ack, 1))
    });
}

/// Heap bytes per flow for `flows` flows that each have a running Vulture controller
/// (handshake, four data segments, one ACK), hash table included.
fn heap_per_flow(flows: usize) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    let mut e = engine(flows);
    for i in 0..flows {
        let port = 10_000 + i as u16;
        let now = Instant::from_micros(i as u64);
        open_flow(&mut e, port, now);
        for k in 0..4u32 {
            let mut d = packet(true, port, 5001 + k * 1448, 101, 1000, 1448, false);
            d.truncate(d.len() - 1448);
            e.handle_packet(now, &mut d, meta(PacketCopy::HeaderOnly));
        }
        e.handle_packet(
            now,
            &mut packet(false, port, 101, 7897, 20000, 0, false),
            meta(PacketCopy::Full),
        );
    }
    let after = LIVE.load(Ordering::Relaxed);
    assert_eq!(e.active_flows(), flows);
    assert_eq!(
        e.snapshot(1).flows[0].controller.map(|c| c.mode),
        Some(ControllerMode::Warmup),
        "each flow has its controller"
    );
    (after - before) / flows
}

fn memory_per_flow(_c: &mut Criterion) {
    // The hash table doubles its capacity at 7/8 load, so the per-flow share of its slots
    // depends on how full it is: 10 000 flows sit in a 16 384-slot table (61% full), 14 000 in
    // the same table at 85%.
    for flows in [10_000, 14_000] {
        eprintln!(
            "memory: {flows} flows with a Vulture controller: {} heap bytes per flow",
            heap_per_flow(flows)
        );
    }
}

criterion_group!(benches, memory_per_flow, per_packet);
criterion_main!(benches);
