//! Pure computations over measured series: means, Jain's fairness index, utilization, time to
//! reach a fraction of the link, error/correlation of the cwnd estimate. Unit-tested against
//! hand-computed cases.

/// Arithmetic mean; `None` for no values.
pub fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for v in values {
        sum += v;
        n += 1;
    }
    (n > 0).then(|| sum / n as f64)
}

/// Sample standard deviation (n - 1); `None` for fewer than two values.
pub fn std_dev(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = mean(values.iter().copied())?;
    let ss: f64 = values.iter().map(|v| (v - m) * (v - m)).sum();
    Some((ss / (values.len() - 1) as f64).sqrt())
}

/// Jain's fairness index `(Σx)² / (n · Σx²)` (Vulture Sec. 0.4.6); `None` for no flows or all
/// zero. The testbed's, which the end-to-end tests use too.
pub use slipstream_testbed::scenario::jain_index;

/// Mean of the values of `points` with `t0 <= t < t1`.
pub fn mean_between(points: &[(f64, f64)], t0: f64, t1: f64) -> Option<f64> {
    mean(
        points
            .iter()
            .filter(|(t, _)| *t >= t0 && *t < t1)
            .map(|(_, v)| *v),
    )
}

/// First time `t >= from` at which the moving average of `points` over `window_s` (the samples
/// in `(t - window_s, t]`) reaches `threshold`; `None` if never. With `window_s = 0` it is the
/// first single sample at or above the threshold.
pub fn time_to_reach(points: &[(f64, f64)], from: f64, threshold: f64, window_s: f64) -> Option<f64> {
    for (i, &(t, _)) in points.iter().enumerate() {
        if t < from {
            continue;
        }
        let vals: Vec<f64> = points[..=i]
            .iter()
            .rev()
            .take_while(|(tt, _)| *tt > t - window_s || *tt == t)
            .filter(|(tt, _)| *tt >= from)
            .map(|(_, v)| *v)
            .collect();
        if mean(vals).is_some_and(|m| m >= threshold) {
            return Some(t - from);
        }
    }
    None
}

/// Sums several goodput series sample-by-sample on the time grid of the first one: each other
/// series contributes its sample nearest in time (within `tolerance_s`), else 0.
pub fn sum_series(series: &[&[(f64, f64)]], tolerance_s: f64) -> Vec<(f64, f64)> {
    let Some(first) = series.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|&(t, v)| {
            let others: f64 = series[1..]
                .iter()
                .map(|s| nearest(s, t, tolerance_s).unwrap_or(0.0))
                .sum();
            (t, v + others)
        })
        .collect()
}

/// The value of the sample nearest to `t` within `tolerance_s`.
pub fn nearest(points: &[(f64, f64)], t: f64, tolerance_s: f64) -> Option<f64> {
    points
        .iter()
        .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
        .filter(|p| (p.0 - t).abs() <= tolerance_s)
        .map(|p| p.1)
}

/// Pairs `estimate` samples with the nearest `truth` sample (within `tolerance_s`) and returns
/// `(estimate, truth)` pairs; pairs with a non-positive truth are dropped.
pub fn pair_series(estimate: &[(f64, f64)], truth: &[(f64, f64)], tolerance_s: f64) -> Vec<(f64, f64)> {
    estimate
        .iter()
        .filter_map(|&(t, e)| nearest(truth, t, tolerance_s).map(|r| (e, r)))
        .filter(|&(_, r)| r > 0.0)
        .collect()
}

/// Mean absolute relative error `mean(|e - r| / r)` over `(estimate, truth)` pairs.
pub fn mean_abs_rel_error(pairs: &[(f64, f64)]) -> Option<f64> {
    mean(
        pairs
            .iter()
            .filter(|(_, r)| *r > 0.0)
            .map(|(e, r)| (e - r).abs() / r),
    )
}

/// Mean relative bias `mean((e - r) / r)` (negative = underestimate).
pub fn mean_rel_bias(pairs: &[(f64, f64)]) -> Option<f64> {
    mean(pairs.iter().filter(|(_, r)| *r > 0.0).map(|(e, r)| (e - r) / r))
}

/// Pearson correlation of `(x, y)` pairs; `None` with fewer than 3 pairs or zero variance.
pub fn pearson(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 3 {
        return None;
    }
    let mx = mean(pairs.iter().map(|p| p.0))?;
    let my = mean(pairs.iter().map(|p| p.1))?;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in pairs {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
    }
    if sxx <= 0.0 || syy <= 0.0 {
        return None;
    }
    Some(sxy / (sxx * syy).sqrt())
}

/// Goodput series (Mbit/s) from cumulative byte counter samples `(t, bytes)`: the rate between
/// consecutive samples, stamped at the later one. Counter resets (decreases) give no point.
pub fn rate_from_counter(samples: &[(f64, f64)]) -> Vec<(f64, f64)> {
    samples
        .windows(2)
        .filter_map(|w| {
            let ((t0, b0), (t1, b1)) = (w[0], w[1]);
            (t1 > t0 && b1 >= b0).then(|| (t1, (b1 - b0) * 8.0 / (t1 - t0) / 1e6))
        })
        .collect()
}

/// Maximum TCP goodput on a link of `rate_mbit` with 1500-byte MTU, Ethernet framing (1514 bytes
/// on the tbf) and TCP timestamps (1448 payload bytes per frame): `rate × 1448 / 1514`
/// (9.56 Mbit/s at 10 Mbit/s; the Vulture paper's path gave 9.41).
pub fn max_goodput_mbit(rate_mbit: f64) -> f64 {
    rate_mbit * 1448.0 / 1514.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_and_spread() {
        assert_eq!(mean([1.0, 2.0, 3.0]), Some(2.0));
        assert_eq!(mean(std::iter::empty()), None);
        assert_eq!(std_dev(&[1.0]), None);
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sample variance 32/7.
        let s = std_dev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert!((s - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn jain() {
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
        let pts: Vec<(f64, f64)> = (0..200)
            .map(|i| (i as f64 * 0.1, (i as f64 - 50.0).max(0.0)))
            .collect();
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
}
