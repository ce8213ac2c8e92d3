//! `Engine::defer_rounds`: household rounds leave the per-packet path and run where the shell
//! says (`run_due_rounds`, `on_tick`).

mod common;

use common::{feed_lan, handshake, one_rule_engine, Seg};
use slipstream_control::{ControllerConfig, Instant};
use slipstream_engine::Engine;

/// A household download: handshake, then data and ACKs every 10 ms for a second.
fn download(engine: &mut Engine) {
    handshake(engine, Instant::ZERO, false);
    let mut seq = 5001u32;
    for k in 1..=100u64 {
        let now = Instant::from_millis(k * 10);
        let data = Seg {
            from_server: true,
            seq,
            ack: 101,
            payload: 1448,
            ..Default::default()
        };
        feed_lan(engine, now, data);
        seq = seq.wrapping_add(1448);
        let ack = Seg {
            seq: 101,
            ack: seq,
            window: 32768,
            ..Default::default()
        };
        feed_lan(engine, now, ack);
    }
}

#[test]
fn rounds_run_inside_handle_packet_by_default() {
    let mut engine = one_rule_engine("h", ControllerConfig::Household, 16);
    download(&mut engine);
    assert!(engine.household_rounds() > 2, "{}", engine.household_rounds());
}

#[test]
fn deferred_rounds_run_only_when_asked() {
    let mut engine = one_rule_engine("h", ControllerConfig::Household, 16);
    engine.defer_rounds(true);
    download(&mut engine);
    assert_eq!(engine.household_rounds(), 0, "no round inside handle_packet");
    engine.run_due_rounds(Instant::from_millis(1000));
    let after = engine.household_rounds();
    assert_eq!(after, 2, "one round per link");
    assert_eq!(
        engine.snapshot(0).links[0].flows,
        1,
        "the download is in its link's round"
    );
    // Nothing more is due until a round's length has passed.
    engine.run_due_rounds(Instant::from_millis(1001));
    assert_eq!(engine.household_rounds(), after);
    engine.on_tick(Instant::from_millis(2000));
    assert!(engine.household_rounds() > after, "on_tick runs due rounds");
}
