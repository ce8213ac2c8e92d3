//! Cases the fuzzer (`fuzz/`, `scripts/fuzz.sh`) found, kept as regression tests.

mod common;

use common::*;
use slipstream_control::{ControllerConfig, Instant};
use slipstream_engine::{Engine, Verdict};
use slipstream_wire::tcp_checksum_valid;

fn household_engine() -> Engine {
    one_rule_engine("household", ControllerConfig::Household, 16)
}

/// A LAN host announcing MSS 0 (which Linux reads as no MSS option at all) made the initial
/// window of a household flow 4 x 0 bytes: its ACKs were rewritten to a zero window until the
/// bulk direction was known, which a sender held at zero window never lets happen.
#[test]
fn household_initial_window_with_mss_zero_is_not_zero() {
    for mss in [0u16, 1, 40] {
        let mut engine = household_engine();
        let t = Instant::from_millis(1);
        feed_lan(
            &mut engine,
            t,
            Seg {
                syn: true,
                seq: 100,
                wscale: Some(7),
                mss: Some(mss),
                ts: Some((1000, 0)),
                ..Default::default()
            },
        );
        feed_lan(
            &mut engine,
            t,
            Seg {
                from_server: true,
                syn: true,
                seq: 5000,
                ack: 101,
                wscale: Some(7),
                mss: Some(1460),
                ts: Some((70000, 1000)),
                ..Default::default()
            },
        );
        let (v, bytes) = feed_lan(
            &mut engine,
            t,
            Seg {
                seq: 101,
                ack: 5001,
                window: 502,
                ts: Some((1001, 70000)),
                ..Default::default()
            },
        );
        // Held to four default-sized (536-byte) segments: ceil(2144 / 128) = 17 units.
        assert_eq!(v, Verdict::AcceptModified, "mss {mss}");
        assert_eq!(window_field(&bytes), 17, "mss {mss}");
        assert!(tcp_checksum_valid(&bytes));
    }
}
