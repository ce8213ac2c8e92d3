//! Household control hears best effort start: the SYN of an unclassed flow (which the firewall
//! queues only for this) makes the delay-target budget drop to the floors at the next round,
//! before any queue shows, and passes unchanged.

mod common;

use common::*;
use etherparse::PacketBuilder;
use slipstream_control::{ControllerConfig, Duration, Instant};
use slipstream_engine::{
    BudgetPhase, Engine, EngineConfig, HouseholdConfig, LinkCounters, PacketCopy, PacketMeta, RuleSpec,
    Verdict,
};

fn household_engine() -> Engine {
    Engine::new(EngineConfig {
        rules: vec![RuleSpec {
            name: "bulk".into(),
            controller: ControllerConfig::Household,
            share: Default::default(),
        }],
        max_flows: 64,
        idle_timeout: Duration::from_secs(120),
        evict_idle_after: Duration::from_secs(10),
        // No coordinated slowdown: it would hold the budget at its minimum too.
        household: HouseholdConfig {
            slowdown_interval: Duration::ZERO,
            ..Default::default()
        },
    })
}

/// A download paced at 20 segments per 100 ms RTT, each acked 100 ms after the router saw it
/// (no queue), for `until` ms, packets in time order; `at(engine, t)` runs every 5 ms before them.
fn download(engine: &mut Engine, until: u64, mut at: impl FnMut(&mut Engine, u64)) {
    let (first, step) = (5001u32, 1448u32);
    for t in (1..until).step_by(5) {
        at(engine, t);
        let k = ((t - 1) / 5) as u32;
        feed(
            engine,
            Instant::from_millis(t),
            Seg {
                from_server: true,
                seq: first.wrapping_add(k * step),
                ack: 101,
                payload: 1448,
                ts: Some((70000 + t as u32, 1000 + t as u32)),
                ..Default::default()
            },
        );
        if t > 100 {
            // The ACK of the segment sent 100 ms ago.
            let acked = k - 20 + 1;
            feed(
                engine,
                Instant::from_millis(t),
                Seg {
                    seq: 101,
                    ack: first.wrapping_add(acked * step),
                    window: 2000,
                    ts: Some((1000 + t as u32, 70000 + t as u32 - 100)),
                    ..Default::default()
                },
            );
        }
    }
}

/// An unclassed SYN (no rule in the mark) from another LAN port.
fn best_effort_syn(engine: &mut Engine, now: Instant) -> Verdict {
    let b = PacketBuilder::ipv4(CLIENT, SERVER, 64)
        .tcp(40001, 443, 7000, 64240)
        .syn();
    let mut bytes = Vec::new();
    b.write(&mut bytes, &[]).unwrap();
    let meta = PacketMeta {
        rule: None,
        copy: PacketCopy::Full,
        checksum_ready: true,
        from_lan: Some(true),
        arrival: None,
    };
    engine.handle_packet(now, &mut bytes, meta)
}

fn download_link(engine: &Engine) -> (u64, BudgetPhase) {
    let s = engine.snapshot(0);
    let link = s
        .links
        .iter()
        .find(|l| l.flows > 0)
        .expect("a link with the flow");
    (link.budget_bytes, link.phase)
}

#[test]
fn a_best_effort_syn_drops_the_budget_at_the_next_round() {
    let mut engine = household_engine();
    handshake(&mut engine, Instant::from_millis(0), true);
    let mut before = None;
    download(&mut engine, 2400, |engine, t| {
        if t == 2101 {
            before = Some(download_link(engine));
            assert_eq!(best_effort_syn(engine, Instant::from_millis(t)), Verdict::Accept);
        }
    });
    let (before, phase) = before.unwrap();
    assert_ne!(phase, BudgetPhase::Yield);
    assert!(before > 10 * 1448, "the budget grew on an empty queue: {before}");
    let (after, phase) = download_link(&engine);
    // One flow: its floor, two segments of its MSS.
    assert_eq!((after, phase), (2 * 1448, BudgetPhase::Yield));
}

#[test]
fn without_a_syn_the_budget_holds() {
    let mut engine = household_engine();
    handshake(&mut engine, Instant::from_millis(0), true);
    download(&mut engine, 2400, |_, _| {});
    let (after, phase) = download_link(&engine);
    assert_ne!(phase, BudgetPhase::Yield);
    assert!(after > 10 * 1448, "{after}");
}

/// The SYN-ACK of an inbound connection to LAN host `CLIENT` port 8022, classed by the
/// background rule at this packet (a MAC rule on the answering host): its SYN passed unclassed.
fn background_syn_ack(engine: &mut Engine, now: Instant) {
    let b = PacketBuilder::ipv4(CLIENT, SERVER, 64)
        .tcp(8022, 50000, 9000, 64240)
        .syn()
        .ack(8001);
    let mut bytes = Vec::new();
    b.write(&mut bytes, &[]).unwrap();
    let meta = PacketMeta {
        rule: Some(1),
        copy: PacketCopy::Full,
        checksum_ready: true,
        from_lan: Some(true),
        arrival: None,
    };
    engine.handle_packet(now, &mut bytes, meta);
}

#[test]
fn a_syn_that_a_background_rule_answers_is_no_competitor() {
    let mut engine = household_engine();
    handshake(&mut engine, Instant::from_millis(0), true);
    download(&mut engine, 2400, |engine, t| {
        if t == 2101 {
            best_effort_syn(engine, Instant::from_millis(t));
        }
        if t == 2106 {
            background_syn_ack(engine, Instant::from_millis(t));
        }
    });
    let (after, phase) = download_link(&engine);
    assert_ne!(phase, BudgetPhase::Yield);
    assert!(after > 10 * 1448, "{after}");
}

#[test]
fn best_effort_rising_on_the_wan_counters_takes_the_budget_without_a_syn() {
    let mut engine = household_engine();
    handshake(&mut engine, Instant::from_millis(0), true);
    let mut before = None;
    download(&mut engine, 2700, |engine, t| {
        // What the WAN interface counted: the background's segments so far (1448 bytes of
        // payload, 52 of TCP/IP headers with timestamps, 14 of Ethernet), and from 2.1 s a best
        // effort QUIC download in slow start (no SYN), doubling every 100 ms from 2 kB.
        let segments = (t - 1) / 5;
        let best_effort = if t < 2100 {
            0
        } else {
            (2000.0 * 2f64.powf((t - 2100) as f64 / 100.0)) as u64 - 2000
        };
        let counted = LinkCounters {
            bytes: segments * 1514 + best_effort,
            packets: segments + best_effort / 1000,
            header_bytes: 14,
        };
        engine.on_link_counters(counted, LinkCounters::default());
        if t == 2101 {
            before = Some(download_link(engine));
        }
    });
    let (before, phase) = before.unwrap();
    assert_ne!(phase, BudgetPhase::Yield);
    assert!(before > 10 * 1448, "the budget grew on an empty queue: {before}");
    // The link carried about 29 kB per 100 ms round; best effort doubling past it leaves the
    // background little of it within six doublings. (Five sufficed while a slow start's
    // packets, two rounds of 20 a second, also switched on the 3 ms interactive target; over
    // 300 ms windows they do later, and with the 10 ms target the bound is a round slower:
    // 0.35 of the budget after five.)
    let (after, phase) = download_link(&engine);
    assert_eq!(phase, BudgetPhase::Yield);
    assert!(after < before / 3, "{after} of {before}");
}

#[test]
fn a_steady_best_effort_on_the_wan_counters_leaves_the_background_what_it_uses() {
    let mut engine = household_engine();
    handshake(&mut engine, Instant::from_millis(0), true);
    download(&mut engine, 2600, |engine, t| {
        // A steady 5 kB per 100 ms beside the background (a call): the background keeps what
        // it uses (20 segments per 100 ms), the free capacity bounds the rest.
        let segments = (t - 1) / 5;
        let best_effort = t * 50;
        let counted = LinkCounters {
            bytes: segments * 1514 + best_effort,
            packets: segments + t / 20,
            header_bytes: 14,
        };
        engine.on_link_counters(counted, LinkCounters::default());
    });
    let (after, phase) = download_link(&engine);
    assert_ne!(phase, BudgetPhase::Yield);
    assert!(after >= 20 * 1448, "{after}");
}
