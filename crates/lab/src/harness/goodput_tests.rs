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

#[test]
fn udp_flows_are_placed_where_their_series_starts() {
    // A QUIC flow spawned at 5.0 s whose client counts from its request, one RTT later: no
    // sender-side sample places it, and none is needed (no "placed at spawn" note).
    let iv = |start: f64, end: f64| slipstream_testbed::Interval {
        start,
        end,
        bytes: 125_000,
        bits_per_second: 1e7,
        omitted: false,
    };
    let result = IperfResult {
        goodput_mbps: 10.0,
        intervals: vec![iv(0.0, 0.1), iv(0.1, 0.2)],
        local_port: None,
        remote_port: None,
        retransmits: None,
        raw: serde_json::Value::Null,
    };
    let spec = crate::harness::FlowSpec::quic_download("bg", crate::result::Role::Background, 443, 1.0);
    let flow = FlowRun { spec, offset_s: 5.0, series_start_s: Some(5.1), run: None, result: Some(result) };
    let mut r = RunResult::default();
    add_goodput_series(&[flow], &SsSamples::default(), 0.05, &mut r);
    let pts = &r.series("goodput", "bg").unwrap().points;
    assert!((pts[0].0 - 5.15).abs() < 1e-9 && (pts[0].1 - 10.0).abs() < 1e-9, "{pts:?}");
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert!((r.flow_spans[0].start_s - 5.1).abs() < 1e-9);
}
