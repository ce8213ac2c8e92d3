//! Tests of `scenarios::link`.

use super::*;

/// Samples every 0.1 s at interval midpoints over `[from, to)`, value `f(t)`.
fn series(from: f64, to: f64, f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    let n = ((to - from) * 10.0).round() as usize;
    (0..n).map(|i| from + 0.05 + i as f64 * 0.1).map(|t| (t, f(t))).collect()
}

#[test]
fn timeline() {
    let t = Times::of(&ScenarioOptions::default());
    assert_eq!(t.halved, 10.0);
    let at: Vec<f64> = Case::Rates.changes(&t).iter().map(|c| c.0).collect();
    assert_eq!(at, [t.warm, t.warm + 10.0, t.warm + 10.0 + t.restored]);
    assert_eq!(Case::Rates.duration(&t), t.warm + 10.0 + t.restored + t.doubled);
    for case in [Case::Halve { background: true }, Case::Rates, Case::Rtt] {
        let names: Vec<&str> = case.changes(&t).iter().map(|c| c.1).collect();
        assert_eq!(names, case.phase_names(), "{case:?}");
        let last = case.changes(&t).last().unwrap().0;
        assert!(case.duration(&t) - last >= 5.0, "{case:?}: time to measure after the last change");
    }
    assert_eq!(Case::Rtt.changes(&t)[0].2, Change::Rtt(RTT_STEP_MS));
    // A short scale keeps the halved period and enough of the others to measure.
    let short = Times::of(&ScenarioOptions { duration_scale: 0.2, ..Default::default() });
    assert_eq!((short.halved, short.warm, short.restored, short.doubled), (10.0, 8.0, 8.0, 8.0));
    // At --scale 1 the default alternatives take about 10 minutes: 13 runs, ~8 s each to set up.
    let runs = Case::Halve { background: false }.duration(&t)
        + 4.0
            * [Case::Halve { background: true }, Case::Rates, Case::Rtt]
                .map(|c| c.duration(&t))
                .iter()
                .sum::<f64>();
    assert!(runs + 13.0 * 8.0 <= 660.0, "{runs} s of runs");
}

#[test]
fn seconds_and_runs_under_a_threshold() {
    let points = series(10.0, 15.0, |t| if (11.0..13.0).contains(&t) { 5.0 } else { 9.0 });
    let s = per_second(&points, 10.0, 5);
    assert_eq!(s, [Some(9.0), Some(5.0), Some(5.0), Some(9.0), Some(9.0)]);
    assert_eq!(longest_run_below(&s, 8.6), 2);
    assert_eq!(longest_run_below(&s, 4.0), 0);
    assert_eq!(longest_run_below(&s, 10.0), 5);
    // A second without samples (nothing arrived) counts as under.
    assert_eq!(per_second(&points, 14.0, 2), [Some(9.0), None]);
    assert_eq!(longest_run_below(&[Some(9.0), None, Some(1.0), Some(9.0)], 8.6), 2);
}

#[test]
fn first_window_that_fills_or_settles() {
    // Goodput 4 until 23.0, then 9: the first 1 s window averaging >= 8.6 starts at 23.05.
    let g = series(20.0, 30.0, |t| if t < 23.0 { 4.0 } else { 9.0 });
    let fills = |v: &[f64]| analysis::mean(v.iter().copied()).is_some_and(|m| m >= 8.6);
    let t = first_window(&g, (20.0, 30.0), 1.0, 5, fills).unwrap();
    assert!((t - 3.05).abs() < 1e-9, "{t}");
    // Not within a period that ends too soon for a whole window.
    assert_eq!(first_window(&g, (20.0, 23.5), 1.0, 5, fills), None);
    // Already full at once: 0.05 s (the first sample's midpoint).
    assert!(first_window(&g, (25.0, 30.0), 1.0, 5, fills).unwrap() < 0.1);
    // Queueing delay after a fall: 60 ms, falling by 20 ms a second to 0; the median of a 0.5 s
    // window (its third sample) is at most 10 ms first in the window from 12.35 (9 ms at 12.55).
    let d = series(10.0, 20.0, |t| (60.0 - 20.0 * (t - 10.0)).max(0.0));
    let under = |v: &[f64]| quantile(v, 0.5) <= 10.0;
    let t = first_window(&d, (10.0, 20.0), 0.5, 3, under).unwrap();
    assert!((t - 2.35).abs() < 1e-9, "{t}");
    // Too few samples in a window: none.
    let sparse = [(10.0, 0.0), (10.6, 0.0)];
    assert_eq!(first_window(&sparse, (10.0, 20.0), 0.5, 3, under), None);
}

fn run_with_phases(alt: &str, case: &str, phases: &[(&str, f64)], repeat: u32) -> RunResult {
    let phases: Vec<serde_json::Value> =
        phases.iter().map(|(n, t)| json!({"name": n, "start_s": t})).collect();
    let mut r = RunResult { alternative: alt.into(), ..Default::default() };
    r.params.rate_mbit = 10.0;
    r.params.rtt_ms = 100.0;
    r.params.measured_rtt_ms = Some(100.0);
    r.params.repeat = repeat;
    r.params.extra.insert("case".into(), case.into());
    r.params.extra.insert("phases".into(), phases.into());
    r
}

fn goodput(flow: &str, role: Role, points: Vec<(f64, f64)>) -> crate::result::Series {
    crate::result::Series::new("goodput", Unit::Mbps, flow, role, "receiver").with_points(points)
}

#[test]
fn phases_by_name() {
    let r = run_with_phases("household", "rtt", &[("warm-up", 0.0), (STEPPED, 10.02)], 0);
    assert_eq!(phase_start(&r, STEPPED), Some(10.02));
    assert_eq!(phase_start(&r, BACK), None);
    // Without its phases a run gets no metrics, only a note.
    let r = with_metrics(r, Case::Rtt);
    assert!(r.metrics.is_empty() && r.notes.len() == 1, "{:?}", r.notes);
}

#[test]
fn best_effort_against_the_reference_of_the_same_repeat() {
    let phases = [(HALVED, 10.0), (RESTORED, 20.0)];
    let mut runs = Vec::new();
    for (alt, halved_be) in [(BE_ALONE, 4.0), ("household", 3.8)] {
        let mut r = run_with_phases(alt, "halve", &phases, 0);
        r.params.duration_s = 28.0;
        // Best effort: 8 before the fall; while halved 2 in its first second, then `halved_be`.
        let be = series(0.0, 28.0, |t| match t {
            t if (10.0..11.0).contains(&t) => 2.0,
            t if (11.0..20.0).contains(&t) => halved_be,
            _ => 8.0,
        });
        r.series.push(goodput("be", Role::BestEffort, be));
        runs.push(with_metrics(r, Case::Halve { background: alt != BE_ALONE }));
    }
    runs.push(run_with_phases("household", "halve", &phases, 1));
    against_alone(&mut runs);
    let m = |r: &RunResult, name: &str, period: &str| r.metric(name, Some(period)).unwrap();
    assert!((m(&runs[0], "be_fair", "s2") - 1.0).abs() < 1e-9);
    assert!((m(&runs[1], "be_fair", "s1") - 0.5).abs() < 1e-9, "2 of the 4 it gets alone");
    assert!((m(&runs[1], "be_fair", "s10") - 0.95).abs() < 1e-9);
    assert!((m(&runs[1], "be_fair_min", HALVED) - 0.95).abs() < 1e-9, "the first second left out");
    assert!((m(&runs[1], "be_fair", "before") - 1.0).abs() < 1e-9);
    assert_eq!(runs[1].metrics.iter().filter(|x| x.name == "be_fair").count(), 11);
    assert!(runs[2].metric("be_fair_min", Some(HALVED)).is_none(), "no reference in repeat 1");
}

#[test]
fn background_alone_through_rate_changes() {
    let mut r =
        run_with_phases("household", "rates", &[(HALVED, 10.0), (RESTORED, 20.0), (DOUBLED, 32.0)], 0);
    r.params.duration_s = 44.0;
    let link = |f: f64| max_goodput_mbit(10.0 * f);
    // Full before and while halved; after the rise 0.3 of the link until 22 s, then full: the
    // 1 s moving average reaches 90% once at most one slow sample is in it (22.85 s, or 22.95
    // if the sample a second before counts); never the doubled link.
    let bg = series(0.0, 44.0, |t| match t {
        t if t < 10.0 => link(1.0),
        t if t < 20.0 => link(0.5),
        t if t < 22.0 => 0.3 * link(1.0),
        _ => link(1.0),
    });
    r.series.push(goodput("bg", Role::Background, bg));
    // Ping: 5 ms of queue; after the fall 85 ms falling 40 ms a second to 0, but for one ping
    // under the target between two spikes (at 10.55 s).
    let ping = series(0.0, 44.0, |t| {
        let queue = match t {
            t if t < 10.0 => 5.0,
            t if (10.5..10.6).contains(&t) => 0.0,
            t => (85.0 - 40.0 * (t - 10.0)).max(0.0),
        };
        100.0 + queue
    });
    r.series.push(crate::result::Series::new("rtt", Unit::Ms, "ping", Role::Probe, "ping").with_points(ping));
    let r = with_metrics(r, Case::Rates);
    let m = |name: &str, period: &str| r.metric(name, Some(period)).unwrap();
    assert!((m("delay_median", "before") - 5.0).abs() < 1e-6);
    assert!((m("delay_peak", HALVED) - 83.0).abs() < 1e-6);
    // Under 10 ms from 11.875 s: the first ping 11.95 (its window's median too).
    assert!((m("delay_settle", HALVED) - 1.95).abs() < 1e-6, "{}", m("delay_settle", HALVED));
    assert!((m("bg_util", HALVED) - 1.0).abs() < 1e-9);
    assert!((2.84..2.96).contains(&m("fill_time", RESTORED)), "{}", m("fill_time", RESTORED));
    // Never filled the doubled link: recorded as the period's length, with a note.
    assert_eq!(m("fill_time", DOUBLED), 12.0);
    assert!(r.notes.iter().any(|n| n.contains("doubled")), "{:?}", r.notes);
    assert!((m("bg_util", DOUBLED) - 0.5).abs() < 1e-9);
}

#[test]
fn false_yield_after_the_rtt_step() {
    let mut r = run_with_phases("household", "rtt", &[(STEPPED, 10.0), (BACK, 40.0)], 0);
    r.params.duration_s = 48.0;
    let full = max_goodput_mbit(10.0);
    // Yields to half the link for 4 s after the step, fills again; one slow second after it.
    let bg = series(0.0, 48.0, |t| match t {
        t if (10.0..14.0).contains(&t) => full / 2.0,
        t if (20.0..21.0).contains(&t) => 0.8 * full,
        _ => full,
    });
    r.series.push(goodput("bg", Role::Background, bg));
    let r = with_metrics(r, Case::Rtt);
    let m = |name: &str, period: &str| r.metric(name, Some(period)).unwrap();
    assert_eq!(m("false_yield", STEPPED), 4.0);
    assert_eq!(m("false_yield", BACK), 0.0);
    assert!((m("bg_util", "before") - 1.0).abs() < 1e-9);
    assert!((m("bg_util", STEPPED) - (1.0 - 2.0 / 30.0 - 0.2 / 30.0)).abs() < 1e-9);
}

#[test]
fn table_rows_and_targets() {
    let t = table(vec![BE_ALONE.into(), "household".into()], &ScenarioReport::default());
    let row = |label: &str| t.rows.iter().find(|r| r.metric == label).unwrap_or_else(|| panic!("{label}"));
    // The rows the page's headline names (report/page.rs), with the targets.
    let targets = [
        ("rate halved 10 s, BE beside BG: BE / alone, min over seconds 2-10", "≥ 0.95"),
        ("BG alone, rate halved: time until the queueing delay is under 10 ms", "≤ 2"),
        ("BG alone, rate restored: time to 90% of the link", "≤ 5"),
        ("BG alone, rate doubled: time to 90% of the new rate", "≤ 5"),
        ("BG alone, base RTT +30 ms: longest run under 90% of the link (false yield)", "≤ 2"),
    ];
    for (label, shown) in targets {
        assert_eq!(row(label).paper.as_ref().map(|p| p.shown.as_str()), Some(shown), "{label}");
    }
    let seconds = t.rows.iter().filter(|r| r.metric.contains("at the halved rate, second")).count();
    assert_eq!(seconds, 10);
}
