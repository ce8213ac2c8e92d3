//! Tests of `scenarios::udp_square`.

use super::*;

#[test]
fn period_sets() {
    let mut o = ScenarioOptions { duration_scale: 0.25, ..Default::default() };
    assert_eq!(periods(&o).unwrap(), vec![1.0, 5.0, 15.0]);
    assert_eq!(wave_seconds(&o, 1.0), 10.0);
    assert_eq!(wave_seconds(&o, 15.0), 60.0);
    o.duration_scale = 1.0;
    assert_eq!(periods(&o).unwrap(), vec![1.0, 5.0, 15.0, 50.0]);
    assert_eq!(wave_seconds(&o, 5.0), 40.0);
    o.duration_scale = 3.0;
    assert_eq!(periods(&o).unwrap().last(), Some(&150.0));
    o.set.push(("periods".into(), "2, 7.5".into()));
    assert_eq!(periods(&o).unwrap(), vec![2.0, 7.5]);
    o.set.push(("periods".into(), "0".into()));
    assert!(periods(&o).is_err());
    // Periods print without ".0" in metric names and labels.
    assert_eq!((7.5f64.to_string(), 50f64.to_string()), ("7.5".into(), "50".into()));
}

#[test]
fn usage_of_a_perfect_follower() {
    // 10 Mbit/s link, UDP 6.7 on in [0,1), off in [1,2), ... from t_udp = 5; the background
    // flow takes exactly what is left.
    let wave = SquareWave { rate_bps: 6.7e6, period_s: 1.0 };
    let (t_udp, d) = (5.0, 4.0);
    let udp_at = |t: f64| if wave.is_on(t - t_udp) { 6.7 } else { 0.0 };
    // Interval midpoints.
    let pts = |step: f64| -> Vec<f64> {
        (0..((d + 6.0) / step) as usize).map(|i| (i as f64 + 0.5) * step).collect()
    };
    let udp_wire: Vec<(f64, f64)> = pts(BIN_S).iter().map(|&t| (t, udp_at(t))).collect();
    let avail = available_series(&udp_wire, 10.0);
    let ceiling = analysis::max_goodput_mbit(10.0);
    let bg: Vec<(f64, f64)> = pts(0.1).iter().map(|&t| (t, ceiling * (1.0 - udp_at(t) / 10.0))).collect();
    let mean = |pts: &[(f64, f64)], on| wave_mean(pts, &wave, t_udp, d, on);
    let usage = |bg: &[(f64, f64)], on| mean(bg, on) / mean(&avail, on);
    for on in [None, Some(true), Some(false)] {
        assert!((usage(&bg, on) - 1.0).abs() < 1e-9, "{on:?}");
    }
    assert!((mean(&avail, None) - ceiling * (1.0 - 6.7 / 20.0)).abs() < 1e-6);
    assert!((mean(&udp_wire, Some(true)) - 6.7).abs() < 1e-9);
    assert_eq!(mean(&udp_wire, Some(false)), 0.0);
    assert!(wave_mean(&udp_wire, &wave, 100.0, d, None).is_nan(), "nothing inside the wave");
    // A flow at half of that everywhere uses half.
    let half: Vec<(f64, f64)> = bg.iter().map(|&(t, v)| (t, v / 2.0)).collect();
    assert!((usage(&half, None) - 0.5).abs() < 1e-9);
    // A flow that ignores the wave and keeps 3 Mbit/s: full in on periods, less in off.
    let flat: Vec<(f64, f64)> = bg.iter().map(|&(t, _)| (t, 3.0)).collect();
    assert!(usage(&flat, Some(true)) > 0.9 && usage(&flat, Some(false)) < 0.35);
}
