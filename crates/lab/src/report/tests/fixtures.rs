//! Synthetic [`ScenarioReport`]s of every scenario kind, so the report code is exercised before
//! any real run exists.

use std::collections::BTreeMap;

use serde_json::json;

use crate::result::{
    Metric, Paper, Role, RowSpec, RunParams, RunResult, ScenarioReport, Series, Table, Target, Unit,
};

pub(super) const ALTS: [&str; 4] = ["no-control", "slipstream", "slipstream-paper", "htb-90"];
pub(super) const DUR: f64 = 180.0;
pub(super) const DT: f64 = 0.5;

pub(super) fn times() -> impl Iterator<Item = f64> {
    (0..(DUR / DT) as usize).map(|i| i as f64 * DT)
}

/// A little deterministic wobble, so lines look measured.
pub(super) fn wobble(t: f64, seed: f64) -> f64 {
    ((t * 1.7 + seed).sin() * 0.3 + (t * 0.31 + seed * 2.0).cos() * 0.2) * 0.5
}

pub(super) fn series(
    name: &str,
    unit: Unit,
    flow: &str,
    role: Role,
    f: impl Fn(f64) -> Option<f64>,
) -> Series {
    Series::new(name, unit, flow, role, "synthetic")
        .with_points(times().filter_map(|t| f(t).map(|v| (t, v))).collect())
}

pub(super) fn params(repeat: u32, extra: BTreeMap<String, serde_json::Value>) -> RunParams {
    RunParams {
        rate_mbit: 10.0,
        upload_rate_mbit: None,
        rtt_ms: 100.0,
        queue_bytes: 125_000,
        upload_queue_bytes: None,
        queue_packets: 83.0,
        measured_rtt_ms: Some(100.4 + repeat as f64 * 0.2),
        duration_s: DUR,
        cc: "cubic".into(),
        repeat,
        extra,
    }
}

pub(super) fn phases() -> BTreeMap<String, serde_json::Value> {
    let phases = json!([
        {"name": "before", "start_s": 0.0},
        {"name": "bg start", "start_s": 45.0},
        {"name": "bg stop", "start_s": 135.0},
    ]);
    BTreeMap::from([("phases".to_string(), phases)])
}

pub(super) fn active(t: f64) -> bool {
    (45.0..135.0).contains(&t)
}

/// How strongly an alternative yields (0 = plain TCP, 1 = ideal scavenger).
pub(super) fn yield_of(alt: &str) -> f64 {
    match alt {
        "no-control" => 0.0,
        "htb-90" => 0.7,
        "slipstream-paper" => 0.85,
        _ => 0.95,
    }
}

pub(super) fn run(
    scenario: &str,
    alt: &str,
    repeat: u32,
    extra: BTreeMap<String, serde_json::Value>,
) -> RunResult {
    RunResult {
        scenario: scenario.into(),
        alternative: alt.into(),
        started_unix: 1_700_000_000.0 + repeat as f64 * 200.0,
        params: params(repeat, extra),
        series: Vec::new(),
        metrics: Vec::new(),
        notes: Vec::new(),
        flow_spans: Vec::new(),
    }
}

pub(super) fn report(
    scenario: &str,
    title: &str,
    runs: Vec<RunResult>,
    rows: &[(&str, Unit, &str, Option<&str>)],
) -> ScenarioReport {
    let mut table = Table::new(ALTS.iter().map(|s| s.to_string()).collect());
    let refs: Vec<&RunResult> = runs.iter().collect();
    for (label, unit, key, paper) in rows {
        let (name, period) = match key.split_once('/') {
            Some((n, p)) => (n, Some(p)),
            None => (*key, None),
        };
        let spec = RowSpec::new(*label, *unit, name).paper(paper.map(paper_of));
        table.add_rows(
            &refs,
            [match period {
                Some(p) => spec.period(p),
                None => spec,
            }],
        );
    }
    ScenarioReport {
        scenario: scenario.into(),
        title: title.into(),
        started_unix: 1_700_000_000.0,
        runs,
        table,
        notes: vec!["synthetic data for tests".into()],
        ..Default::default()
    }
}

/// A paper figure as the scenarios give them: "≥ x", a number, or a note.
pub(super) fn paper_of(text: &str) -> Paper {
    let target = match text.strip_prefix("≥ ") {
        Some(v) => v.parse().ok().map(Target::at_least),
        None => text.parse().ok().map(Target::about),
    };
    Paper::new(text, target, "Vulture Sec. 0.4")
}

/// cbr: a 6 Mbit/s best-effort flow, a background flow from 45 s to 135 s (Vulture Fig. 15).
pub(super) fn cbr() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ALTS {
        for repeat in 0..2 {
            let y = yield_of(alt);
            let mut r = run("cbr", alt, repeat, phases());
            let bg = move |t: f64| {
                if active(t) {
                    (3.4 * y + 5.0 * (1.0 - y) + wobble(t, 1.0)).max(0.0)
                } else {
                    0.0
                }
            };
            let be = move |t: f64| {
                if active(t) {
                    6.0 - 1.5 * (1.0 - y) + wobble(t, 2.0)
                } else {
                    5.98 + wobble(t, 3.0)
                }
            };
            r.series.push(series("goodput", Unit::Mbps, "be", Role::BestEffort, |t| Some(be(t))));
            r.series.push(series("goodput", Unit::Mbps, "bg", Role::Background, |t| Some(bg(t))));
            r.series.push(series("goodput", Unit::Mbps, "rev", Role::Reverse, |_| Some(6.0)));
            r.series.push(series("rtt", Unit::Ms, "ping", Role::Probe, move |t| {
                Some(if active(t) { 104.0 + 60.0 * (1.0 - y) + 10.0 * wobble(t, 4.0) } else { 104.0 })
            }));
            if alt.starts_with("slipstream") {
                r.series.push(series("piv_sum", Unit::S, "bg", Role::Background, move |t| {
                    active(t).then(|| (0.004 + 0.003 * wobble(t, 5.0)).max(0.0))
                }));
            }
            let k = repeat as f64 * 0.04;
            r.metrics.push(Metric::new("be_goodput", Unit::Mbps, 5.97 + k).period("before"));
            r.metrics
                .push(Metric::new("be_goodput", Unit::Mbps, 6.0 - 1.5 * (1.0 - y) + k).period("bg-active"));
            r.metrics.push(
                Metric::new("bg_goodput", Unit::Mbps, 3.4 * y + 5.0 * (1.0 - y) - k).period("bg-active"),
            );
            r.metrics.push(Metric::new("be_rtt", Unit::Ms, 104.0 + 60.0 * (1.0 - y) + k).period("bg-active"));
            r.metrics.push(Metric::new("utilization", Unit::Ratio, 0.83 * y + k).period("bg-active"));
            runs.push(r);
        }
    }
    report(
        "cbr",
        "CBR best effort + background flow (Vulture Sec. 0.4.3)",
        runs,
        &[
            ("BE goodput, background active", Unit::Mbps, "be_goodput/bg-active", Some("5.98")),
            ("BE goodput, before", Unit::Mbps, "be_goodput/before", Some("5.97")),
            ("BG goodput, background active", Unit::Mbps, "bg_goodput/bg-active", Some("2.84")),
            ("BE RTT, background active", Unit::Ms, "be_rtt/bg-active", Some("146")),
            ("Utilization of spare bandwidth", Unit::Ratio, "utilization/bg-active", Some("0.83")),
        ],
    )
}

/// alone: one flow, background from 45 s to 135 s (Vulture Fig. 17).
pub(super) fn alone() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ALTS {
        let y = yield_of(alt);
        let mut r = run("alone", alt, 0, phases());
        r.series.push(series("goodput", Unit::Mbps, "bg", Role::Background, move |t| {
            let dip = if active(t) { 4.0 * y * (-(t - 45.0) / 8.0).exp() } else { 0.0 };
            Some((9.4 - dip + wobble(t, 1.0)).clamp(0.0, 9.56))
        }));
        r.metrics.push(Metric::new("utilization", Unit::Ratio, 0.9 + 0.09 * (1.0 - y)).period("stable"));
        r.metrics.push(Metric::new("utilization", Unit::Ratio, 0.93 - 0.2 * y).period("bg-active"));
        runs.push(r);
    }
    report(
        "alone",
        "One flow, BE then background then BE (Vulture Sec. 0.4.4)",
        runs,
        &[
            ("Utilization, stable background period", Unit::Ratio, "utilization/stable", Some("0.99")),
            ("Utilization, whole background period", Unit::Ratio, "utilization/bg-active", Some("0.93")),
        ],
    )
}

/// cwnd: windows of the background flow (Vulture Figs. 11-13); the real cwnd only for some.
pub(super) fn cwnd() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ALTS {
        let mut r = run("cwnd", alt, 0, phases());
        let saw = |t: f64| 40_000.0 + 80_000.0 * ((t % 12.0) / 12.0);
        r.series.push(series("goodput", Unit::Mbps, "bg", Role::Background, |t| Some(9.3 + wobble(t, 1.0))));
        if alt != "htb-90" {
            r.series.push(series("cwnd", Unit::Bytes, "bg", Role::Background, move |t| Some(saw(t))));
        }
        if alt.starts_with("slipstream") {
            r.series.push(series("cwnd_estimate", Unit::Bytes, "bg", Role::Background, move |t| {
                Some(saw(t) * 0.92)
            }));
            r.series.push(series("rwnd", Unit::Bytes, "bg", Role::Background, move |t| {
                active(t).then_some(30_000.0 + 600.0 * (t - 45.0))
            }));
            r.metrics.push(Metric::new("cwnd_estimate_error", Unit::Ratio, 0.08));
            r.metrics.push(Metric::new("cwnd_estimate_correlation", Unit::Ratio, 0.97));
        }
        runs.push(r);
    }
    report(
        "cwnd",
        "Cwnd estimation (Vulture Sec. 0.4.2)",
        runs,
        &[
            (
                "Cwnd estimate correlation with cwnd",
                Unit::Ratio,
                "cwnd_estimate_correlation",
                Some("consistent (Fig. 11)"),
            ),
            ("Cwnd estimate mean abs. error", Unit::Ratio, "cwnd_estimate_error", None),
        ],
    )
}

/// onoff: sub-cases on/off period T (Vulture Table 1).
pub(super) fn onoff() -> ScenarioReport {
    let paper = [(1, 0.15, 0.89), (3, 0.2, 0.88), (5, 0.25, 0.86), (10, 0.33, 0.86), (30, 0.56, 0.77)];
    let mut runs = Vec::new();
    let mut rows: Vec<(String, Unit, String, Option<String>)> = Vec::new();
    for (t_s, util, share) in paper {
        for alt in ALTS {
            let y = yield_of(alt);
            let extra = BTreeMap::from([("on_off_T_s".to_string(), json!(t_s))]);
            let mut r = run("onoff", alt, 0, extra);
            let on = move |t: f64| ((t / t_s as f64) as u64) & 1 == 0;
            r.series.push(series("goodput", Unit::Mbps, "be", Role::BestEffort, move |t| {
                Some(if on(t) { 9.4 * (0.5 + 0.45 * y) } else { 0.0 })
            }));
            r.series.push(series("goodput", Unit::Mbps, "bg", Role::Background, move |t| {
                Some(if on(t) { 9.4 * (0.5 - 0.45 * y) } else { 9.0 * (0.3 + 0.5 * (t_s as f64 / 30.0)) })
            }));
            r.metrics.push(
                Metric::new(&format!("bg_util_T{t_s}"), Unit::Ratio, util * (1.0 + 0.3 * y)).period("off"),
            );
            r.metrics.push(
                Metric::new(&format!("be_share_T{t_s}"), Unit::Ratio, 0.5 + (share - 0.5) * y).period("on"),
            );
            runs.push(r);
        }
        rows.push((
            format!("LBE utilization, BE off, T = {t_s} s"),
            Unit::Ratio,
            format!("bg_util_T{t_s}/off"),
            Some(format!("{util:.2}")),
        ));
        rows.push((
            format!("BE share, BE on, T = {t_s} s"),
            Unit::Ratio,
            format!("be_share_T{t_s}/on"),
            Some(format!("{share:.2}")),
        ));
    }
    let rows: Vec<(&str, Unit, &str, Option<&str>)> =
        rows.iter().map(|(a, b, c, d)| (a.as_str(), *b, c.as_str(), d.as_deref())).collect();
    report("onoff", "On/off best effort + background (Vulture Sec. 0.4.4, Table 1)", runs, &rows)
}

/// fairness: N background flows with staggered starts (Vulture Table 2, Fig. 20).
pub(super) fn fairness() -> ScenarioReport {
    let mut runs = Vec::new();
    let mut rows: Vec<(String, String, Option<String>)> = Vec::new();
    for (n, paper) in [(2usize, 0.96), (4, 0.99), (16, 0.99)] {
        for alt in ALTS {
            let extra = BTreeMap::from([("flows".to_string(), json!(n))]);
            let mut r = run("fairness", alt, 0, extra);
            for i in 0..n {
                let start = i as f64 * 20.0 * 4.0 / n as f64;
                r.series.push(series("goodput", Unit::Mbps, &format!("bg{i}"), Role::Background, move |t| {
                    let active = (0..n).filter(|j| t >= *j as f64 * 80.0 / n as f64).count().max(1);
                    Some(if t >= start { 9.4 / active as f64 + wobble(t, i as f64) * 0.5 } else { 0.0 })
                }));
            }
            r.metrics.push(Metric::new(
                &format!("jain_{n}"),
                Unit::Ratio,
                paper - 0.05 * (1.0 - yield_of(alt)),
            ));
            runs.push(r);
        }
        rows.push((format!("Jain's index, {n} flows"), format!("jain_{n}"), Some(format!("{paper:.2}"))));
    }
    let rows: Vec<(&str, Unit, &str, Option<&str>)> =
        rows.iter().map(|(a, c, d)| (a.as_str(), Unit::Ratio, c.as_str(), d.as_deref())).collect();
    report("fairness", "Fairness among background flows (Vulture Sec. 0.4.6)", runs, &rows)
}

/// udp-square: a UDP best-effort square wave and a background flow; one alternative lacks data.
pub(super) fn udp_square() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ALTS {
        let y = yield_of(alt);
        let mut r = run("udp-square", alt, 0, BTreeMap::new());
        if alt != "htb-90" {
            let on = |t: f64| ((t / 10.0) as u64) & 1 == 0;
            r.series.push(series("udp_rate", Unit::Mbps, "udp", Role::BestEffort, move |t| {
                Some(if on(t) { 8.0 } else { 0.0 })
            }));
            r.series.push(series("available", Unit::Mbps, "link", Role::Link, move |t| {
                Some(if on(t) { 1.4 } else { 9.4 })
            }));
            r.series.push(series("goodput", Unit::Mbps, "bg", Role::Background, move |t| {
                Some(if on(t) { (1.4 + 3.0 * (1.0 - y)).min(9.4) } else { 9.0 })
            }));
            r.metrics.push(Metric::new("udp_loss", Unit::Ratio, 0.02 + 0.2 * (1.0 - y)).period("on"));
            r.metrics.push(Metric::new("time_to_yield", Unit::S, 0.3 + 5.0 * (1.0 - y)));
        } else {
            r.notes.push("iperf3 UDP server failed to start".into());
        }
        runs.push(r);
    }
    report(
        "udp-square",
        "UDP square wave vs background flow",
        runs,
        &[
            ("UDP loss, UDP on", Unit::Ratio, "udp_loss/on", None),
            ("Time to yield", Unit::S, "time_to_yield", Some("3")),
        ],
    )
}

/// web: per-request response times (a CDF) and normalized response time per size bucket.
pub(super) fn web() -> ScenarioReport {
    let buckets = ["10 kB", "100 kB", "1 MB"];
    let mut runs = Vec::new();
    for alt in ALTS {
        let y = yield_of(alt);
        let mut r = run("web", alt, 0, BTreeMap::new());
        r.series.push(series("web_response", Unit::Ms, "web", Role::BestEffort, move |t| {
            Some(210.0 + 40.0 * wobble(t, 1.0).abs() * 10.0 + 300.0 * (1.0 - y) * ((t * 3.1).sin() + 1.0))
        }));
        r.series.push(series("goodput", Unit::Mbps, "bg", Role::Background, |t| Some(8.0 + wobble(t, 2.0))));
        let by_size: Vec<(f64, f64)> =
            [1e3, 1e4, 1e5, 1e6].iter().map(|x| (*x, 200.0 + x / 2e3 * (2.0 - y))).collect();
        r.series.push(
            Series::new("web_rt_by_size", Unit::Ms, "web", Role::BestEffort, "client")
                .over("object size bytes")
                .with_points(by_size),
        );
        for (i, _) in buckets.iter().enumerate() {
            r.metrics.push(Metric::new(
                &format!("norm_rt_{i}"),
                Unit::Ratio,
                1.0 + (1.0 - y) * (1.5 - i as f64 * 0.4),
            ));
        }
        runs.push(r);
    }
    let rows: Vec<(String, String)> = buckets
        .iter()
        .enumerate()
        .map(|(i, b)| (format!("Normalized response time, {b}"), format!("norm_rt_{i}")))
        .collect();
    let rows: Vec<(&str, Unit, &str, Option<&str>)> =
        rows.iter().map(|(a, k)| (a.as_str(), Unit::Ratio, k.as_str(), None)).collect();
    report("web", "Web browsing next to a background download", runs, &rows)
}

/// home: background goodput over time, best effort by its metrics against the run without
/// background.
pub(super) fn home() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ALTS {
        let y = yield_of(alt);
        let mut r = run("home", alt, 0, BTreeMap::new());
        r.series.push(series("goodput", Unit::Mbps, "download", Role::Background, move |t| {
            Some(4.0 * y + wobble(t, 3.0))
        }));
        r.metrics.push(Metric::new("web_rt_p95_vs_alone", Unit::Ratio, 2.0 - y));
        runs.push(r);
    }
    let rows = [("web: p95 / without background", Unit::Ratio, "web_rt_p95_vs_alone", Some("≤ 1.05"))];
    report("home", "A household's evening (synthetic)", runs, &rows)
}

/// datapath: no time series at all, only per-packet costs.
pub(super) fn datapath() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ["slipstream", "no-control"] {
        let mut r = run("datapath", alt, 0, BTreeMap::new());
        // Like the real scenario: no bottleneck, no delay element.
        r.params.rate_mbit = 0.0;
        r.params.rtt_ms = 0.0;
        r.params.measured_rtt_ms = None;
        r.metrics.push(Metric::new("latency_p99", Unit::Us, if alt == "slipstream" { 38.0 } else { 4.0 }));
        r.metrics.push(Metric::new(
            "max_pps",
            Unit::Count,
            if alt == "slipstream" { 240_000.0 } else { 900_000.0 },
        ));
        runs.push(r);
    }
    let mut rep = report(
        "datapath",
        "Datapath cost per packet",
        runs,
        &[
            ("Added latency, p99", Unit::Us, "latency_p99", None),
            ("Packets per second", Unit::Count, "max_pps", None),
        ],
    );
    rep.table.columns = vec!["slipstream".into(), "no-control".into()];
    let rows = [
        RowSpec::new("Added latency, p99", Unit::Us, "latency_p99"),
        RowSpec::new("Packets per second", Unit::Count, "max_pps"),
    ];
    rep.table = Table::of(rep.table.columns.clone(), &rep.runs, rows);
    rep
}

/// A household scenario (no-timestamps, many-flows, weights): best effort alone, background
/// alone, both, a third of the run each.
pub(super) fn household(scenario: &str) -> ScenarioReport {
    let third = DUR / 3.0;
    let mut runs = Vec::new();
    for alt in ALTS {
        let y = yield_of(alt);
        let mut r = run(scenario, alt, 0, BTreeMap::from([("case".into(), json!("N = 2"))]));
        let be =
            move |t: f64| (t < third || t >= 2.0 * third).then_some(9.5 * if t < third { 1.0 } else { y });
        let bg = move |t: f64| (t >= third).then_some(9.4 * if t < 2.0 * third { 1.0 } else { 1.0 - y });
        r.series.push(series("goodput", Unit::Mbps, "be", Role::BestEffort, be));
        r.series.push(series("goodput", Unit::Mbps, "bg0", Role::Background, bg));
        r.metrics.push(Metric::new("be_kept", Unit::Ratio, y).period("together"));
        runs.push(r);
    }
    let row = ("N = 2: BE kept beside BG", Unit::Ratio, "be_kept/together", Some("≥ 0.93"));
    report(scenario, "household control (synthetic)", runs, &[row])
}

pub(super) fn all_kinds() -> Vec<ScenarioReport> {
    let mut kinds =
        vec![alone(), cbr(), cwnd(), onoff(), fairness(), udp_square(), web(), home(), datapath()];
    kinds.extend(
        crate::scenarios::SCENARIOS
            .iter()
            .filter(|s| {
                s.alternatives == crate::scenarios::HOUSEHOLD_ALTERNATIVES
                    || s.alternatives == crate::scenarios::UDP_ALTERNATIVES
            })
            .map(|s| household(s.name)),
    );
    kinds
}
