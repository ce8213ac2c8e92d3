//! Tests of `scenarios::both`.

use super::*;
use crate::result::{RunParams, Series};

/// A step series over phases of 10 s: `values[i]` in phase `i` (`None`: no point).
fn phased(values: [Option<f64>; 5]) -> Vec<(f64, f64)> {
    (0..500).filter_map(|i| values[i / 100].map(|v| (i as f64 * 0.1, v))).collect()
}

#[test]
fn a_direction_is_filled_by_what_its_link_delivered() {
    // 20/2 Mbit/s, phases of 10 s. The background upload alone sends 1.5 Mbit/s of goodput
    // while its download's ACKs take 0.3 Mbit/s of the uplink: the uplink delivered 1.8 against
    // best effort's 2.0 alone, a fill of 0.9, where the goodput alone reads 1.5 / 1.9.
    let c = Case { timestamps: true, phase: 10.0 };
    let goodput = |label, values| {
        Series::new("goodput", Unit::Mbps, label, Role::BestEffort, "receiver").with_points(phased(values))
    };
    let link = |label, values| {
        Series::new("link_tx", Unit::Mbps, label, Role::Link, "/proc/net/dev").with_points(phased(values))
    };
    let r = RunResult {
        params: RunParams { rate_mbit: 20.0, upload_rate_mbit: Some(2.0), ..Default::default() },
        series: vec![
            goodput("be_down", [Some(19.0), None, None, Some(18.0), None]),
            goodput("be_up", [None, Some(1.9), None, None, Some(1.8)]),
            goodput("bg_down", [None, None, Some(17.0), Some(1.0), None]),
            goodput("bg_up", [None, None, Some(1.5), None, Some(0.1)]),
            link("download", [Some(19.6), Some(0.1), Some(18.0), Some(19.6), Some(1.0)]),
            link("upload", [Some(0.5), Some(2.0), Some(1.8), Some(0.4), Some(2.0)]),
        ],
        ..Default::default()
    };
    let r = with_metrics(r, &c);
    let m = |name: &str, period: &str| r.metric(name, Some(period)).unwrap();
    assert!((m("bg_link_fill", "upload") - 0.9).abs() < 1e-9);
    assert!((m("bg_link_fill", "download") - 18.0 / 19.6).abs() < 1e-9);
    assert!((m("bg_fill", "upload") - 1.5 / 1.9).abs() < 1e-9);
    assert!((m("be_kept", "be-up-beside") - 1.8 / 1.9).abs() < 1e-9);
    assert!((m("link_use", "upload bg-alone") - 0.9).abs() < 1e-9);
    assert!((m("link_use", "download be-down-beside") - 0.98).abs() < 1e-9);
}
