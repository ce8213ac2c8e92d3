//! Tests of `harness::goodput`.

use super::*;

#[test]
fn goodput_points_sit_at_interval_midpoints() {
    let iv = |start: f64, end: f64, bytes: u64, omitted: bool| slipstream_testbed::Interval {
        start,
        end,
        bytes,
        bits_per_second: 0.0,
        omitted,
    };
    let r = IperfResult {
        goodput_mbps: 0.0,
        intervals: vec![iv(0.0, 0.1, 0, true), iv(0.1, 0.2, 125_000, false), iv(0.2, 0.25, 0, false)],
        local_port: None,
        remote_port: None,
        retransmits: None,
        raw: serde_json::Value::Null,
    };
    let pts = iperf_goodput_series(&r, 10.0);
    assert_eq!(pts.len(), 2, "omitted intervals are left out");
    assert!((pts[0].0 - 10.15).abs() < 1e-9 && (pts[0].1 - 10.0).abs() < 1e-9);
    assert!((pts[1].0 - 10.225).abs() < 1e-9 && pts[1].1 == 0.0);
}
