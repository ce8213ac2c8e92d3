//! Tests of `harness::daemon`.

use super::*;

#[test]
fn series_follow_the_busiest_flow_on_the_port() {
    let flow = |sender: &str, acked: u64, rwnd: u32| FlowInfo {
        sender: Some(sender.into()),
        receiver: Some("10.0.1.2:40000".into()),
        mode: "aggressive".into(),
        rwnd_bytes: Some(rwnd),
        acked_bytes: acked,
        rtt_ms: Some(101.5),
        piv: Some(slipstream_inspect::PivSummary { sum_ms: -1.5, positive_ratio: 0.5, count: 10 }),
        ..Default::default()
    };
    let samples = vec![
        (0.1, vec![flow("10.0.0.2:6881", 10, 1000), flow("10.0.0.2:6881", 99, 2000)]),
        (0.2, vec![flow("10.0.0.2:5201", 99, 3000)]),
    ];
    let series = flow_series(&samples, "bg", Role::Background, 6881);
    let get = |n: &str| series.iter().find(|s| s.name == n).unwrap();
    assert_eq!(get("rwnd").points, vec![(0.1, 2000.0)]);
    assert_eq!(get("piv_sum").points, vec![(0.1, -1.5)]);
    assert_eq!(get("piv_sum").unit, Unit::Ms);
    assert!(series.iter().all(|s| s.name != "cwnd_estimate"));
    assert!(flow_series(&samples, "x", Role::Background, 1).is_empty());
}
