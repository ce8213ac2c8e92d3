//! `Engine::reconfigure` (a config reload): existing flows keep their state, controller and rule
//! (matched by name, whatever number their conntrack mark still carries); flows of a removed rule
//! are released; new flows use the new rules; a lowered `max_flows` drops nothing at once.

mod common;

use common::*;
use slipstream_control::{ControllerConfig, FixedWindowConfig, Instant};
use slipstream_engine::{Engine, PacketCopy, PacketMeta, PassReason, ReconfigureSummary, RuleSpec, Verdict};

fn fixed(name: &str, window_bytes: u32) -> RuleSpec {
    RuleSpec {
        name: name.into(),
        controller: ControllerConfig::FixedWindow(FixedWindowConfig { window_bytes }),
        share: Default::default(),
    }
}

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

/// Like `feed`, with the rule number the packet's mark carries and the client port.
fn feed_as(engine: &mut Engine, now: Instant, seg: Seg, rule: u16, client_port: u16) -> (Verdict, Vec<u8>) {
    let mut bytes = build(seg);
    let port = client_port.to_be_bytes();
    let at = if seg.from_server { 22 } else { 20 };
    bytes[at] = port[0];
    bytes[at + 1] = port[1];
    let copy = if seg.payload > 0 {
        bytes.truncate(bytes.len() - seg.payload);
        PacketCopy::HeaderOnly
    } else {
        PacketCopy::Full
    };
    let meta = PacketMeta {
        rule: Some(rule),
        copy,
        checksum_ready: true,
        from_lan: None,
        arrival: None,
    };
    let v = engine.handle_packet(now, &mut bytes, meta);
    (v, bytes)
}

/// Handshake and four server segments (the server becomes the bulk sender), marked `rule`.
fn download(engine: &mut Engine, at: u64, rule: u16, port: u16) {
    let syn = Seg {
        syn: true,
        seq: 100,
        ts: Some((1000, 0)),
        wscale: Some(7),
        mss: Some(1460),
        ..Default::default()
    };
    feed_as(engine, ms(at), syn, rule, port);
    let syn_ack = Seg {
        from_server: true,
        syn: true,
        seq: 5000,
        ack: 101,
        ts: Some((70000, 1000)),
        wscale: Some(7),
        mss: Some(1460),
        ..Default::default()
    };
    feed_as(engine, ms(at), syn_ack, rule, port);
    let ack = Seg {
        seq: 101,
        ack: 5001,
        window: 502,
        ts: Some((1001, 70000)),
        ..Default::default()
    };
    feed_as(engine, ms(at + 1), ack, rule, port);
    for i in 0..4u32 {
        let data = Seg {
            from_server: true,
            seq: 5001 + i * 1448,
            ack: 101,
            payload: 1448,
            ts: Some((70100, 1001)),
            ..Default::default()
        };
        feed_as(engine, ms(at + 100), data, rule, port);
    }
}

/// A receiver ACK far past the first advertised edge (so only the target limits the window),
/// host window 3000 units (384 000 bytes).
fn ack(engine: &mut Engine, at: u64, ack: u32, rule: u16, port: u16) -> (Verdict, u16) {
    let seg = Seg {
        seq: 101,
        ack,
        window: 3000,
        ts: Some((1100 + at as u32, 70100)),
        ..Default::default()
    };
    let (v, bytes) = feed_as(engine, ms(at), seg, rule, port);
    (v, window_field(&bytes))
}

#[test]
fn reordered_rules_keep_existing_flows_on_their_rule_and_controller() {
    let mut engine = Engine::new(engine_config(vec![fixed("bulk", 20_000), fixed("other", 1)], 16));
    download(&mut engine, 0, 1, 40_000);
    // ceil(20000 / 128) = 157 units.
    assert_eq!(
        ack(&mut engine, 200, 100_000, 1, 40_000),
        (Verdict::AcceptModified, 157)
    );

    // "bulk" moves to number 2 (with a new window), "other" is removed, "new" takes number 1.
    let summary = engine.reconfigure(engine_config(vec![fixed("new", 1), fixed("bulk", 40_000)], 16));
    assert_eq!(
        summary,
        ReconfigureSummary {
            flows: 1,
            released: 0,
            rules_added: 1,
            rules_removed: 1,
        }
    );
    // The connection's conntrack mark still says 1 (now "new", a 1-byte window): the flow keeps
    // the controller it was built with (20 000 bytes), not new's nor bulk's new setting.
    assert_eq!(
        ack(&mut engine, 300, 200_000, 1, 40_000),
        (Verdict::AcceptModified, 157)
    );

    let snap = engine.snapshot(usize::MAX);
    assert_eq!(engine.configured_rules(), 2);
    let names: Vec<&str> = snap.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["new", "bulk"], "removed rules without flows are gone");
    assert_eq!(snap.flows.len(), 1);
    assert_eq!(
        snap.flows[0].rule, 2,
        "the flow is listed under bulk, now number 2"
    );
    assert_eq!(snap.flows[0].unclamped_reason, None);
    let bulk = &snap.rules[1];
    assert_eq!((bulk.active_flows, bulk.flows_started, bulk.rewritten), (1, 1, 2));
    assert!(bulk.acked_bytes > 0);
    assert_eq!((snap.rules[0].active_flows, snap.rules[0].flows_started), (0, 0));

    // A new connection marked 2 is bulk's and gets bulk's new controller: ceil(40000/128) = 313.
    download(&mut engine, 1000, 2, 40_001);
    assert_eq!(
        ack(&mut engine, 1200, 100_000, 2, 40_001),
        (Verdict::AcceptModified, 313)
    );
    // One marked 1 is "new"'s.
    download(&mut engine, 2000, 1, 40_002);
    let snap = engine.snapshot(usize::MAX);
    assert_eq!(snap.rules[0].flows_started, 1);
    assert_eq!(snap.rules[1].flows_started, 2);
}

#[test]
fn flows_of_a_removed_rule_are_released_until_they_end() {
    let mut engine = Engine::new(engine_config(vec![fixed("bulk", 20_000)], 16));
    download(&mut engine, 0, 1, 40_000);
    assert_eq!(
        ack(&mut engine, 200, 100_000, 1, 40_000),
        (Verdict::AcceptModified, 157)
    );

    let summary = engine.reconfigure(engine_config(vec![fixed("other", 1)], 16));
    assert_eq!(summary.released, 1);
    assert_eq!((summary.rules_added, summary.rules_removed), (1, 1));
    // Its ACKs now pass with the host's window (the right edge only moves right) ...
    assert_eq!(ack(&mut engine, 300, 200_000, 1, 40_000), (Verdict::Accept, 3000));
    assert_eq!(engine.counters().passed(PassReason::RuleRemoved), 1);
    // ... and its packets are not taken for a flow of "other", which now has number 1.
    let snap = engine.snapshot(usize::MAX);
    assert_eq!(engine.configured_rules(), 1);
    let names: Vec<&str> = snap.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["other", "bulk"],
        "the removed rule is listed while it has flows"
    );
    assert_eq!(snap.rules[0].flows_started, 0);
    assert_eq!(snap.rules[1].active_flows, 1);
    assert_eq!(snap.flows[0].rule, 2);
    assert_eq!(snap.flows[0].unclamped_reason, Some(PassReason::RuleRemoved));

    // Bringing "bulk" back does not re-clamp the released flow; its counters carry on.
    let summary = engine.reconfigure(engine_config(vec![fixed("other", 1), fixed("bulk", 20_000)], 16));
    assert_eq!(
        (summary.released, summary.rules_added, summary.rules_removed),
        (0, 1, 0)
    );
    assert_eq!(ack(&mut engine, 400, 300_000, 1, 40_000), (Verdict::Accept, 3000));
    let snap = engine.snapshot(usize::MAX);
    assert_eq!(snap.rules.len(), 2);
    assert_eq!(
        (snap.rules[1].name.as_str(), snap.rules[1].flows_started),
        ("bulk", 1)
    );

    // The flow ends (RST); after the linger it is gone, and so is the class.
    let rst = Seg {
        rst: true,
        seq: 101,
        ack: 300_000,
        ..Default::default()
    };
    feed_as(&mut engine, ms(500), rst, 1, 40_000);
    engine.on_tick(ms(500) + slipstream_engine::CLOSE_LINGER);
    assert_eq!(engine.active_flows(), 0);
    engine.reconfigure(engine_config(vec![fixed("other", 1)], 16));
    let snap = engine.snapshot(usize::MAX);
    assert_eq!(snap.rules.len(), 1);
}

#[test]
fn unknown_numbers_of_new_flows_pass_after_rules_are_removed() {
    let mut engine = Engine::new(engine_config(vec![fixed("a", 20_000), fixed("b", 20_000)], 16));
    download(&mut engine, 0, 2, 40_000);
    engine.reconfigure(engine_config(vec![fixed("b", 20_000)], 16));
    // The existing flow of "b" still arrives with mark 2, past the new rule count: still tracked.
    assert_eq!(
        ack(&mut engine, 200, 100_000, 2, 40_000),
        (Verdict::AcceptModified, 157)
    );
    // A connection the engine does not know with mark 2 is unclassified.
    let (v, _) = ack(&mut engine, 300, 100_000, 2, 40_001);
    assert_eq!(v, Verdict::Accept);
    assert_eq!(engine.counters().passed(PassReason::Unclassified), 1);
    assert_eq!(engine.active_flows(), 1);
}

#[test]
fn lowered_max_flows_keeps_existing_flows() {
    let mut engine = Engine::new(engine_config(vec![fixed("bulk", 20_000)], 4));
    for (i, port) in (40_000..40_003).enumerate() {
        download(&mut engine, i as u64 * 10, 1, port);
    }
    engine.reconfigure(engine_config(vec![fixed("bulk", 20_000)], 1));
    assert_eq!(engine.active_flows(), 3);
    let snap = engine.snapshot(usize::MAX);
    assert_eq!((snap.active_flows, snap.max_flows), (3, 1));
    // Busy flows stay and keep being clamped; a newcomer is refused (the others are not idle).
    assert_eq!(
        ack(&mut engine, 1000, 100_000, 1, 40_000),
        (Verdict::AcceptModified, 157)
    );
    engine.on_tick(ms(1000));
    assert_eq!(engine.active_flows(), 3);
    download(&mut engine, 1000, 1, 40_010);
    assert_eq!(engine.counters().passed(PassReason::TableFull), 7);
    // Once two of them have been idle 10 s, they are evicted down to the new bound.
    ack(&mut engine, 10_500, 200_000, 1, 40_000);
    engine.on_tick(ms(10_500));
    assert_eq!(engine.active_flows(), 1);
    assert_eq!(engine.counters().flows_evicted, 2);
    assert_eq!(
        ack(&mut engine, 10_600, 300_000, 1, 40_000).0,
        Verdict::AcceptModified
    );
}
