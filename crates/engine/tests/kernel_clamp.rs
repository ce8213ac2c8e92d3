//! `Engine::kernel_clamp`: what the eBPF datapath writes into the kernel's flow map, checked
//! against the clamp the engine itself applies through NFQUEUE.

mod common;

use common::*;
use slipstream_control::{ControllerConfig, Instant};
use slipstream_engine::{Engine, FlowKey, Side, Verdict};

fn engine(controller: ControllerConfig) -> Engine {
    one_rule_engine("background", controller, 16)
}

/// The LAN client's SYN (MSS 1460, scale 7) and the server's SYN-ACK (scale 8).
fn handshake(engine: &mut Engine) {
    feed_lan(
        engine,
        Instant::from_millis(1),
        Seg {
            syn: true,
            seq: 100,
            wscale: Some(7),
            mss: Some(1460),
            ts: Some((1000, 0)),
            ..Default::default()
        },
    );
    feed_lan(
        engine,
        Instant::from_millis(1),
        Seg {
            from_server: true,
            syn: true,
            seq: 5000,
            ack: 101,
            wscale: Some(8),
            mss: Some(1460),
            ts: Some((70000, 1000)),
            ..Default::default()
        },
    );
}

fn key() -> (FlowKey, Side) {
    FlowKey::from_packet(CLIENT.into(), CLIENT_PORT, SERVER.into(), SERVER_PORT)
}

/// Before the bulk direction is known, a household flow's LAN host is held to four of its
/// segments (4 x 1460 bytes, its announced MSS), in the kernel as through NFQUEUE.
#[test]
fn household_lan_host_is_held_to_an_initial_window_before_the_direction_is_known() {
    let mut engine = engine(ControllerConfig::Household);
    handshake(&mut engine);
    let (key, client) = key();
    let clamp = engine
        .kernel_clamp(&key)
        .expect("early clamp after the handshake");
    assert_eq!(clamp.receiver, client);
    assert_eq!(clamp.scale, 7);
    assert_eq!(clamp.mss, 1460);
    assert_eq!(clamp.target_bytes, Some(4 * 1460));
    assert!(!clamp.hold);
    // The same window the engine writes itself: ceil(5840 / 128) = 46 units.
    let (v, bytes) = feed_lan(
        &mut engine,
        Instant::from_millis(1),
        Seg {
            seq: 101,
            ack: 5001,
            window: 502,
            ts: Some((1001, 70000)),
            ..Default::default()
        },
    );
    assert_eq!(v, Verdict::AcceptModified);
    assert_eq!(window_field(&bytes), 46);
}

/// Other controllers lower nothing until the bulk direction is known.
#[test]
fn other_controllers_wait_for_the_direction() {
    let mut engine = engine(ControllerConfig::Vulture(Default::default()));
    handshake(&mut engine);
    assert_eq!(engine.kernel_clamp(&key().0), None);
}
