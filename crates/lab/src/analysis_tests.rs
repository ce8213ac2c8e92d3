//! Tests of `analysis`.

use super::*;

#[test]
fn means() {
    assert_eq!(mean([1.0, 2.0, 3.0]), Some(2.0));
    assert_eq!(mean(std::iter::empty()), None);
    assert_eq!(min_max([3.0, f64::NAN, -1.0, 2.0]), Some((-1.0, 3.0)));
    assert_eq!(min_max([f64::INFINITY]), None);
}

/// Jain's fairness index `(Σx)² / (n · Σx²)` (Vulture Sec. 0.4.6), as the lab uses it.
#[test]
fn jain() {
    use slipstream_testbed::scenario::jain_index;
    assert_eq!(jain_index(&[3.0, 3.0, 3.0, 3.0]), Some(1.0));
    // One flow takes everything: 1/n.
    assert_eq!(jain_index(&[4.0, 0.0, 0.0, 0.0]), Some(0.25));
    // (1+2)^2 / (2 * (1+4)) = 9/10.
    assert!((jain_index(&[1.0, 2.0]).unwrap() - 0.9).abs() < 1e-12);
    assert_eq!(jain_index(&[]), None);
    assert_eq!(jain_index(&[0.0, 0.0]), None);
}

#[test]
fn time_to_ninety_percent() {
    // Ramps 0, 1, 2, ... Mbit/s every 0.1 s from t = 5; threshold 9 (90% of 10).
    let pts: Vec<(f64, f64)> = (0..200).map(|i| (i as f64 * 0.1, (i as f64 - 50.0).max(0.0))).collect();
    // Single samples: 9 at i = 59 -> t = 5.9; measured from t = 5 -> 0.9 s.
    let t = time_to_reach(&pts, 5.0, 9.0, 0.0).unwrap();
    assert!((t - 0.9).abs() < 1e-9, "{t}");
    // 0.5 s window (5 samples: i-4..=i, mean = i - 52): first i with mean >= 9 is 61.
    let t = time_to_reach(&pts, 5.0, 9.0, 0.5).unwrap();
    assert!((t - 1.1).abs() < 1e-9, "{t}");
    assert_eq!(time_to_reach(&pts, 0.0, 1000.0, 0.0), None);
}

#[test]
fn utilization_windows() {
    let pts = [(0.0, 2.0), (1.0, 4.0), (2.0, 9.0), (3.0, 9.0)];
    assert_eq!(mean_between(&pts, 2.0, 4.0), Some(9.0));
    assert_eq!(mean_between(&pts, 0.0, 4.0), Some(6.0));
    assert_eq!(mean_between(&pts, 5.0, 6.0), None);
    assert!((max_goodput_mbit(10.0) - 9.5640).abs() < 1e-3);
}

#[test]
fn estimate_errors() {
    let truth = [(0.0, 100.0), (1.0, 200.0), (2.0, 400.0)];
    let est = [(0.02, 90.0), (1.01, 180.0), (2.0, 440.0), (9.0, 1.0)];
    let pairs = pair_series(&est, &truth, 0.05);
    assert_eq!(pairs, vec![(90.0, 100.0), (180.0, 200.0), (440.0, 400.0)]);
    let mare = mean_abs_rel_error(&pairs).unwrap();
    assert!((mare - 0.1).abs() < 1e-12);
    let bias = mean_rel_bias(&pairs).unwrap();
    assert!((bias - (-0.1 - 0.1 + 0.1) / 3.0).abs() < 1e-12);
    assert!(pearson(&pairs).unwrap() > 0.99);
    assert!((pearson(&[(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)]).unwrap() + 1.0).abs() < 1e-12);
    assert_eq!(pearson(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]), None);
}

#[test]
fn counters_and_sums() {
    let c = [(0.0, 0.0), (0.5, 625_000.0), (1.0, 1_250_000.0), (1.5, 10.0)];
    assert_eq!(rate_from_counter(&c), vec![(0.5, 10.0), (1.0, 10.0)]);
    let a = [(0.0, 1.0), (0.1, 2.0)];
    let b = [(0.01, 5.0), (0.3, 7.0)];
    assert_eq!(sum_series(&[&a, &b], 0.05), vec![(0.0, 6.0), (0.1, 2.0)]);
}
