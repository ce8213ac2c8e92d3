//! Pure computations over measured series: means, utilization, time to reach a fraction of the
//! link, error/correlation of the cwnd estimate (Jain's index is the testbed's, which the
//! end-to-end tests use too). Unit-tested against
//! hand-computed cases.

/// Arithmetic mean; `None` for no values.
pub fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.into_iter().fold((0.0, 0usize), |(sum, n), v| (sum + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// Smallest and largest of the finite `values`; `None` if there are none.
pub fn min_max(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let finite = values.into_iter().filter(|v| v.is_finite());
    finite.fold(None, |acc, v| Some(acc.map_or((v, v), |(lo, hi): (f64, f64)| (lo.min(v), hi.max(v)))))
}

/// Mean of the values of `points` with `t0 <= t < t1`.
pub fn mean_between(points: &[(f64, f64)], t0: f64, t1: f64) -> Option<f64> {
    mean(points.iter().filter(|(t, _)| *t >= t0 && *t < t1).map(|(_, v)| *v))
}

/// First time `t >= from` at which the moving average of `points` over `window_s` (the samples
/// in `(t - window_s, t]`) reaches `threshold`; `None` if never. With `window_s = 0` it is the
/// first single sample at or above the threshold.
pub fn time_to_reach(points: &[(f64, f64)], from: f64, threshold: f64, window_s: f64) -> Option<f64> {
    let after: Vec<(f64, f64)> = points.iter().copied().filter(|(t, _)| *t >= from).collect();
    let average =
        |t: f64| mean(after.iter().filter(|(u, _)| *u <= t && (*u > t - window_s || *u == t)).map(|p| p.1));
    after.iter().find(|(t, _)| average(*t).is_some_and(|m| m >= threshold)).map(|(t, _)| t - from)
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
            let others: f64 = series[1..].iter().map(|s| nearest(s, t, tolerance_s).unwrap_or(0.0)).sum();
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
    mean(pairs.iter().filter(|(_, r)| *r > 0.0).map(|(e, r)| (e - r).abs() / r))
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
#[path = "analysis_tests.rs"]
mod tests;
