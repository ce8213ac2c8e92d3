//! Flows first seen mid-stream (the daemon restarted under load): unclamped and reported until
//! the shell hands over their window scales (from conntrack), then controlled from the next
//! packet on, their right edge learned from the next ACK and never moved left.

mod common;

use common::*;
use slipstream_control::{ControllerConfig, FixedWindowConfig, Instant};
use slipstream_engine::{Engine, FlowEvent, FlowKey, PassReason, Side, Verdict};
use slipstream_wire::tcp_checksum_valid;

fn engine(controller: ControllerConfig) -> Engine {
    one_rule_engine("bulk", controller, 16)
}

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

/// The download's server sequence number where the daemon first sees it.
const SEQ0: u32 = 1_000_000;
const SEGMENT: u32 = 1448;
/// Client's window scale (the server's is 9): the client's windows are in 128-byte units.
const CLIENT_SCALE: u8 = 7;
const SERVER_SCALE: u8 = 9;
/// The client's window field: 2000 x 128 = 256 000 bytes.
const HOST_FIELD: u16 = 2000;

fn data(i: u32) -> Seg {
    Seg {
        from_server: true,
        seq: SEQ0 + i * SEGMENT,
        ack: 101,
        payload: SEGMENT as usize,
        ts: Some((70_000 + i, 900)),
        ..Default::default()
    }
}

/// The client's ACK of the first `segments` segments, with the host's window.
fn ack(segments: u32) -> Seg {
    Seg {
        seq: 101,
        ack: SEQ0 + segments * SEGMENT,
        window: HOST_FIELD,
        ts: Some((900 + segments, 70_000)),
        ..Default::default()
    }
}

/// Window field of a forwarded packet (IPv4, 20-byte header: TCP window at 20 + 14).
fn window_field(bytes: &[u8]) -> u16 {
    u16::from_be_bytes([bytes[34], bytes[35]])
}

fn key() -> FlowKey {
    FlowKey::from_packet(CLIENT.into(), CLIENT_PORT, SERVER.into(), SERVER_PORT).0
}

/// (low, high) scales for the key's endpoints.
fn scales() -> (u8, u8) {
    let client = std::net::SocketAddr::new(CLIENT.into(), CLIENT_PORT);
    if key().endpoint(Side::Low) == client {
        (CLIENT_SCALE, SERVER_SCALE)
    } else {
        (SERVER_SCALE, CLIENT_SCALE)
    }
}

/// Eight segments and the client's ACK of them, seen without a handshake: everything passes,
/// the flow is reported once.
fn midstream_download(engine: &mut Engine) {
    for i in 0..8 {
        let (v, _) = feed(engine, ms(u64::from(i)), data(i));
        assert_eq!(v, Verdict::Accept);
    }
    let (v, bytes) = feed(engine, ms(10), ack(8));
    assert_eq!(v, Verdict::Accept);
    assert_eq!(window_field(&bytes), HOST_FIELD);
    let events: Vec<FlowEvent> = engine.drain_events().map(|(e, _)| e).collect();
    assert_eq!(events, vec![FlowEvent::HandshakeMissed { key: key(), rule: 1 }]);
    assert_eq!(engine.counters().flows_without_handshake, 1);
}

#[test]
fn a_flow_seen_midstream_is_clamped_once_its_scales_arrive_and_its_edge_never_moves_left() {
    let target = 40_000;
    let mut engine = engine(ControllerConfig::FixedWindow(FixedWindowConfig {
        window_bytes: target,
    }));
    midstream_download(&mut engine);
    let passed = engine.counters().passed(PassReason::NoHandshake);

    let (low, high) = scales();
    assert!(engine.learn_window_scales(key(), low, high));
    assert!(!engine.learn_window_scales(key(), low, high), "already learned");
    assert_eq!(engine.counters().flows_recovered, 1);

    // The host had advertised up to ACK 8 + 256 000 bytes (passed unclamped). Every forwarded
    // window keeps at least that edge, and comes down to the target as the ACKs pass it.
    let host_edge = SEQ0 + 8 * SEGMENT + (u32::from(HOST_FIELD) << CLIENT_SCALE);
    let mut edge = host_edge;
    let mut fields = Vec::new();
    let mut sent = 8;
    for round in 0..60u32 {
        // 4 more segments per ACK, as a sender at full speed would.
        for _ in 0..4 {
            feed(&mut engine, ms(20 + u64::from(round)), data(sent));
            sent += 1;
        }
        let a = ack(sent);
        let (v, bytes) = feed(&mut engine, ms(21 + u64::from(round)), a);
        let field = window_field(&bytes);
        assert!(field <= HOST_FIELD, "never above the host's window");
        let forwarded_edge = a.ack.wrapping_add(u32::from(field) << CLIENT_SCALE);
        assert!(
            forwarded_edge.wrapping_sub(edge) as i32 >= 0,
            "round {round}: edge {forwarded_edge} left of {edge}"
        );
        edge = forwarded_edge;
        if v == Verdict::AcceptModified {
            assert!(tcp_checksum_valid(&bytes), "checksum after the rewrite");
        }
        fields.push(field);
    }
    let target_field = target.div_ceil(1 << CLIENT_SCALE) as u16;
    // The first ACK after the scales came gives the edge (the host's own: nothing to lower);
    // the next is clamped.
    assert_eq!(fields[0], HOST_FIELD);
    assert!(
        fields[1] < HOST_FIELD,
        "clamped from the second ACK on: {fields:?}"
    );
    assert_eq!(
        *fields.last().unwrap(),
        target_field,
        "down to the target once the ACKs passed the host's old edge: {fields:?}"
    );
    assert!(fields.windows(2).all(|w| w[1] <= w[0]), "{fields:?}");
    assert_eq!(
        engine.counters().passed(PassReason::NoHandshake),
        passed,
        "no packet passes for a missed handshake after the scales came"
    );
    let snapshot = engine.snapshot(usize::MAX);
    let flow = &snapshot.flows[0];
    assert_eq!(flow.unclamped_reason, None);
    assert_eq!(
        flow.forwarded_window,
        Some(u32::from(target_field) << CLIENT_SCALE)
    );
    assert_eq!(flow.host_window, Some(u32::from(HOST_FIELD) << CLIENT_SCALE));
}

#[test]
fn household_control_takes_over_a_flow_seen_midstream() {
    let mut engine = engine(ControllerConfig::Household);
    midstream_download(&mut engine);
    let (low, high) = scales();
    assert!(engine.learn_window_scales(key(), low, high));
    let host_edge = SEQ0 + 8 * SEGMENT + (u32::from(HOST_FIELD) << CLIENT_SCALE);
    let mut sent = 8;
    let mut last = HOST_FIELD;
    for round in 0..120u32 {
        for _ in 0..4 {
            feed(&mut engine, ms(20 + u64::from(round) * 10), data(sent));
            sent += 1;
        }
        let a = ack(sent);
        let (_, bytes) = feed(&mut engine, ms(25 + u64::from(round) * 10), a);
        last = window_field(&bytes);
        let forwarded_edge = a.ack.wrapping_add(u32::from(last) << CLIENT_SCALE);
        assert!(
            forwarded_edge.wrapping_sub(host_edge) as i32 >= 0,
            "round {round}"
        );
    }
    let snapshot = engine.snapshot(usize::MAX);
    let flow = &snapshot.flows[0];
    assert!(flow.controller.is_some(), "the flow has its household controller");
    assert!(flow.allocation.is_some(), "and an allocation");
    assert!(last < HOST_FIELD, "its window is clamped: {last}");
}

#[test]
fn scales_for_other_flows_change_nothing() {
    let mut engine = engine(ControllerConfig::FixedWindow(FixedWindowConfig {
        window_bytes: 40_000,
    }));
    assert!(!engine.learn_window_scales(key(), 7, 7), "no such flow");
    // A flow whose handshake was seen keeps what its SYNs said.
    handshake(&mut engine, ms(0), true);
    assert!(!engine.learn_window_scales(key(), 1, 1));
    assert_eq!(engine.counters().flows_recovered, 0);
}

#[test]
fn without_scales_a_flow_seen_midstream_stays_unclamped() {
    let mut engine = engine(ControllerConfig::FixedWindow(FixedWindowConfig {
        window_bytes: 40_000,
    }));
    midstream_download(&mut engine);
    for n in 9..40 {
        feed(&mut engine, ms(20), data(n - 1));
        let (v, bytes) = feed(&mut engine, ms(21), ack(n));
        assert_eq!(v, Verdict::Accept);
        assert_eq!(window_field(&bytes), HOST_FIELD);
    }
    assert_eq!(
        engine.snapshot(usize::MAX).flows[0].unclamped_reason,
        Some(PassReason::NoHandshake)
    );
}
