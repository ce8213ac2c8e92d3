//! Household control hears best effort start: the SYN of an unclassed flow (which the firewall
//! queues only for this) makes the delay-target budget drop to the floors at the next round,
//! before any queue shows, and passes unchanged.

mod common;

use common::*;
use etherparse::PacketBuilder;
use slipstream_control::{ControllerConfig, Duration, Instant};
use slipstream_engine::{
    BudgetPhase, Engine, EngineConfig, HouseholdConfig, PacketCopy, PacketMeta, RuleSpec, Verdict,
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
