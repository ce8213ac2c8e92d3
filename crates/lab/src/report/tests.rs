//! Report tests on synthetic [`ScenarioReport`]s of every scenario kind, so the report code is
//! exercised before any real run exists.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;

use super::plot::tests::{assert_svg, svg_texts};
use super::*;
use crate::report::summary;
use crate::result::{Metric, Paper, Role, RunParams, RunResult, Series, Table, Target, Unit};

const ALTS: [&str; 4] = ["no-control", "slipstream", "slipstream-paper", "htb-90"];
const DUR: f64 = 180.0;
const DT: f64 = 0.5;

fn times() -> impl Iterator<Item = f64> {
    (0..(DUR / DT) as usize).map(|i| i as f64 * DT)
}

/// A little deterministic wobble, so lines look measured.
fn wobble(t: f64, seed: f64) -> f64 {
    ((t * 1.7 + seed).sin() * 0.3 + (t * 0.31 + seed * 2.0).cos() * 0.2) * 0.5
}

fn series(name: &str, unit: Unit, flow: &str, role: Role, f: impl Fn(f64) -> Option<f64>) -> Series {
    Series::new(name, unit, flow, role, "synthetic")
        .with_points(times().filter_map(|t| f(t).map(|v| (t, v))).collect())
}

fn params(repeat: u32, extra: BTreeMap<String, serde_json::Value>) -> RunParams {
    RunParams {
        rate_mbit: 10.0,
        rtt_ms: 100.0,
        queue_bytes: 125_000,
        queue_packets: 83.0,
        measured_rtt_ms: Some(100.4 + repeat as f64 * 0.2),
        duration_s: DUR,
        cc: "cubic".into(),
        repeat,
        extra,
    }
}

fn phases() -> BTreeMap<String, serde_json::Value> {
    BTreeMap::from([
        ("bg_start_s".to_string(), json!(45.0)),
        ("bg_stop_s".to_string(), json!(135.0)),
    ])
}

fn active(t: f64) -> bool {
    (45.0..135.0).contains(&t)
}

/// How strongly an alternative yields (0 = plain TCP, 1 = ideal scavenger).
fn yield_of(alt: &str) -> f64 {
    match alt {
        "no-control" => 0.0,
        "htb-90" => 0.7,
        "slipstream-paper" => 0.85,
        _ => 0.95,
    }
}

fn run(scenario: &str, alt: &str, repeat: u32, extra: BTreeMap<String, serde_json::Value>) -> RunResult {
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

fn report(
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
        table.add_metric_row(label, *unit, &refs, name, period, paper.map(paper_of));
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
fn paper_of(text: &str) -> Paper {
    let target = match text.strip_prefix("≥ ") {
        Some(v) => v.parse().ok().map(Target::at_least),
        None => text.parse().ok().map(Target::about),
    };
    Paper::new(text, target, "Vulture Sec. 0.4")
}

/// cbr: a 6 Mbit/s best-effort flow, a background flow from 45 s to 135 s (Vulture Fig. 15).
fn cbr() -> ScenarioReport {
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
            r.series
                .push(series("goodput", Unit::Mbps, "be", Role::BestEffort, |t| {
                    Some(be(t))
                }));
            r.series
                .push(series("goodput", Unit::Mbps, "bg", Role::Background, |t| {
                    Some(bg(t))
                }));
            r.series
                .push(series("goodput", Unit::Mbps, "rev", Role::Reverse, |_| Some(6.0)));
            r.series
                .push(series("rtt", Unit::Ms, "ping", Role::Probe, move |t| {
                    Some(if active(t) {
                        104.0 + 60.0 * (1.0 - y) + 10.0 * wobble(t, 4.0)
                    } else {
                        104.0
                    })
                }));
            if alt.starts_with("slipstream") {
                r.series
                    .push(series("piv_sum", Unit::S, "bg", Role::Background, move |t| {
                        active(t).then(|| (0.004 + 0.003 * wobble(t, 5.0)).max(0.0))
                    }));
            }
            let k = repeat as f64 * 0.04;
            r.metrics
                .push(Metric::new("be_goodput", Unit::Mbps, 5.97 + k).period("before"));
            r.metrics
                .push(Metric::new("be_goodput", Unit::Mbps, 6.0 - 1.5 * (1.0 - y) + k).period("bg-active"));
            r.metrics.push(
                Metric::new("bg_goodput", Unit::Mbps, 3.4 * y + 5.0 * (1.0 - y) - k).period("bg-active"),
            );
            r.metrics
                .push(Metric::new("be_rtt", Unit::Ms, 104.0 + 60.0 * (1.0 - y) + k).period("bg-active"));
            r.metrics
                .push(Metric::new("utilization", Unit::Ratio, 0.83 * y + k).period("bg-active"));
            runs.push(r);
        }
    }
    report(
        "cbr",
        "CBR best effort + background flow (Vulture Sec. 0.4.3)",
        runs,
        &[
            (
                "BE goodput, background active",
                Unit::Mbps,
                "be_goodput/bg-active",
                Some("5.98"),
            ),
            (
                "BE goodput, before",
                Unit::Mbps,
                "be_goodput/before",
                Some("5.97"),
            ),
            (
                "BG goodput, background active",
                Unit::Mbps,
                "bg_goodput/bg-active",
                Some("2.84"),
            ),
            (
                "BE RTT, background active",
                Unit::Ms,
                "be_rtt/bg-active",
                Some("146"),
            ),
            (
                "Utilization of spare bandwidth",
                Unit::Ratio,
                "utilization/bg-active",
                Some("0.83"),
            ),
        ],
    )
}

/// alone: one flow, background from 45 s to 135 s (Vulture Fig. 17).
fn alone() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ALTS {
        let y = yield_of(alt);
        let mut r = run("alone", alt, 0, phases());
        r.series
            .push(series("goodput", Unit::Mbps, "bg", Role::Background, move |t| {
                let dip = if active(t) {
                    4.0 * y * (-(t - 45.0) / 8.0).exp()
                } else {
                    0.0
                };
                Some((9.4 - dip + wobble(t, 1.0)).clamp(0.0, 9.56))
            }));
        r.metrics
            .push(Metric::new("utilization", Unit::Ratio, 0.9 + 0.09 * (1.0 - y)).period("stable"));
        r.metrics
            .push(Metric::new("utilization", Unit::Ratio, 0.93 - 0.2 * y).period("bg-active"));
        runs.push(r);
    }
    report(
        "alone",
        "One flow, BE then background then BE (Vulture Sec. 0.4.4)",
        runs,
        &[
            (
                "Utilization, stable background period",
                Unit::Ratio,
                "utilization/stable",
                Some("0.99"),
            ),
            (
                "Utilization, whole background period",
                Unit::Ratio,
                "utilization/bg-active",
                Some("0.93"),
            ),
        ],
    )
}

/// cwnd: windows of the background flow (Vulture Figs. 11-13); the real cwnd only for some.
fn cwnd() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ALTS {
        let mut r = run("cwnd", alt, 0, phases());
        let saw = |t: f64| 40_000.0 + 80_000.0 * ((t % 12.0) / 12.0);
        r.series
            .push(series("goodput", Unit::Mbps, "bg", Role::Background, |t| {
                Some(9.3 + wobble(t, 1.0))
            }));
        if alt != "htb-90" {
            r.series
                .push(series("cwnd", Unit::Bytes, "bg", Role::Background, move |t| {
                    Some(saw(t))
                }));
        }
        if alt.starts_with("slipstream") {
            r.series.push(series(
                "cwnd_estimate",
                Unit::Bytes,
                "bg",
                Role::Background,
                move |t| Some(saw(t) * 0.92),
            ));
            r.series
                .push(series("rwnd", Unit::Bytes, "bg", Role::Background, move |t| {
                    active(t).then_some(30_000.0 + 600.0 * (t - 45.0))
                }));
            r.metrics
                .push(Metric::new("cwnd_estimate_error", Unit::Ratio, 0.08));
            r.metrics
                .push(Metric::new("cwnd_estimate_correlation", Unit::Ratio, 0.97));
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
            (
                "Cwnd estimate mean abs. error",
                Unit::Ratio,
                "cwnd_estimate_error",
                None,
            ),
        ],
    )
}

/// onoff: sub-cases on/off period T (Vulture Table 1).
fn onoff() -> ScenarioReport {
    let paper = [
        (1, 0.15, 0.89),
        (3, 0.2, 0.88),
        (5, 0.25, 0.86),
        (10, 0.33, 0.86),
        (30, 0.56, 0.77),
    ];
    let mut runs = Vec::new();
    let mut rows: Vec<(String, Unit, String, Option<String>)> = Vec::new();
    for (t_s, util, share) in paper {
        for alt in ALTS {
            let y = yield_of(alt);
            let extra = BTreeMap::from([("on_off_T_s".to_string(), json!(t_s))]);
            let mut r = run("onoff", alt, 0, extra);
            let on = move |t: f64| ((t / t_s as f64) as u64) & 1 == 0;
            r.series
                .push(series("goodput", Unit::Mbps, "be", Role::BestEffort, move |t| {
                    Some(if on(t) { 9.4 * (0.5 + 0.45 * y) } else { 0.0 })
                }));
            r.series
                .push(series("goodput", Unit::Mbps, "bg", Role::Background, move |t| {
                    Some(if on(t) {
                        9.4 * (0.5 - 0.45 * y)
                    } else {
                        9.0 * (0.3 + 0.5 * (t_s as f64 / 30.0))
                    })
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
    let rows: Vec<(&str, Unit, &str, Option<&str>)> = rows
        .iter()
        .map(|(a, b, c, d)| (a.as_str(), *b, c.as_str(), d.as_deref()))
        .collect();
    report(
        "onoff",
        "On/off best effort + background (Vulture Sec. 0.4.4, Table 1)",
        runs,
        &rows,
    )
}

/// fairness: N background flows with staggered starts (Vulture Table 2, Fig. 20).
fn fairness() -> ScenarioReport {
    let mut runs = Vec::new();
    let mut rows: Vec<(String, String, Option<String>)> = Vec::new();
    for (n, paper) in [(2usize, 0.96), (4, 0.99), (16, 0.99)] {
        for alt in ALTS {
            let extra = BTreeMap::from([("flows".to_string(), json!(n))]);
            let mut r = run("fairness", alt, 0, extra);
            for i in 0..n {
                let start = i as f64 * 20.0 * 4.0 / n as f64;
                r.series.push(series(
                    "goodput",
                    Unit::Mbps,
                    &format!("bg{i}"),
                    Role::Background,
                    move |t| {
                        let active = (0..n).filter(|j| t >= *j as f64 * 80.0 / n as f64).count().max(1);
                        Some(if t >= start {
                            9.4 / active as f64 + wobble(t, i as f64) * 0.5
                        } else {
                            0.0
                        })
                    },
                ));
            }
            r.metrics.push(Metric::new(
                &format!("jain_{n}"),
                Unit::Ratio,
                paper - 0.05 * (1.0 - yield_of(alt)),
            ));
            runs.push(r);
        }
        rows.push((
            format!("Jain's index, {n} flows"),
            format!("jain_{n}"),
            Some(format!("{paper:.2}")),
        ));
    }
    let rows: Vec<(&str, Unit, &str, Option<&str>)> = rows
        .iter()
        .map(|(a, c, d)| (a.as_str(), Unit::Ratio, c.as_str(), d.as_deref()))
        .collect();
    report(
        "fairness",
        "Fairness among background flows (Vulture Sec. 0.4.6)",
        runs,
        &rows,
    )
}

/// udp-square: a UDP best-effort square wave and a background flow; one alternative lacks data.
fn udp_square() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ALTS {
        let y = yield_of(alt);
        let mut r = run("udp-square", alt, 0, BTreeMap::new());
        if alt != "htb-90" {
            let on = |t: f64| ((t / 10.0) as u64) & 1 == 0;
            r.series.push(series(
                "udp_rate",
                Unit::Mbps,
                "udp",
                Role::BestEffort,
                move |t| Some(if on(t) { 8.0 } else { 0.0 }),
            ));
            r.series
                .push(series("available", Unit::Mbps, "link", Role::Link, move |t| {
                    Some(if on(t) { 1.4 } else { 9.4 })
                }));
            r.series
                .push(series("goodput", Unit::Mbps, "bg", Role::Background, move |t| {
                    Some(if on(t) {
                        (1.4 + 3.0 * (1.0 - y)).min(9.4)
                    } else {
                        9.0
                    })
                }));
            r.metrics
                .push(Metric::new("udp_loss", Unit::Percent, 2.0 + 20.0 * (1.0 - y)).period("on"));
            r.metrics
                .push(Metric::new("time_to_yield", Unit::S, 0.3 + 5.0 * (1.0 - y)));
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
            ("UDP loss, UDP on", Unit::Percent, "udp_loss/on", None),
            ("Time to yield", Unit::S, "time_to_yield", Some("3")),
        ],
    )
}

/// web: per-request response times (a CDF) and normalized response time per size bucket.
fn web() -> ScenarioReport {
    let buckets = ["10 kB", "100 kB", "1 MB"];
    let mut runs = Vec::new();
    for alt in ALTS {
        let y = yield_of(alt);
        let mut r = run("web", alt, 0, BTreeMap::new());
        r.series.push(series(
            "web_response",
            Unit::Ms,
            "web",
            Role::BestEffort,
            move |t| {
                Some(210.0 + 40.0 * wobble(t, 1.0).abs() * 10.0 + 300.0 * (1.0 - y) * ((t * 3.1).sin() + 1.0))
            },
        ));
        r.series
            .push(series("goodput", Unit::Mbps, "bg", Role::Background, |t| {
                Some(8.0 + wobble(t, 2.0))
            }));
        let by_size: Vec<(f64, f64)> = [1e3, 1e4, 1e5, 1e6]
            .iter()
            .map(|x| (*x, 200.0 + x / 2e3 * (2.0 - y)))
            .collect();
        r.series.push(
            Series::new(
                "web_rt_by_size",
                Unit::Ms,
                "web",
                Role::BestEffort,
                "client; x = object size bytes",
            )
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
    let rows: Vec<(&str, Unit, &str, Option<&str>)> = rows
        .iter()
        .map(|(a, k)| (a.as_str(), Unit::Ratio, k.as_str(), None))
        .collect();
    report("web", "Web browsing next to a background download", runs, &rows)
}

/// datapath: no time series at all, only per-packet costs.
fn datapath() -> ScenarioReport {
    let mut runs = Vec::new();
    for alt in ["slipstream", "no-control"] {
        let mut r = run("datapath", alt, 0, BTreeMap::new());
        // Like the real scenario: no bottleneck, no delay element.
        r.params.rate_mbit = 0.0;
        r.params.rtt_ms = 0.0;
        r.params.measured_rtt_ms = None;
        r.metrics.push(Metric::new(
            "latency_p99",
            Unit::Us,
            if alt == "slipstream" { 38.0 } else { 4.0 },
        ));
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
    let refs: Vec<&RunResult> = rep.runs.iter().collect();
    let mut t = Table::new(rep.table.columns.clone());
    t.add_metric_row("Added latency, p99", Unit::Us, &refs, "latency_p99", None, None);
    t.add_metric_row("Packets per second", Unit::Count, &refs, "max_pps", None, None);
    rep.table = t;
    rep
}

/// A household scenario (no-timestamps, many-flows, weights): best effort alone, background
/// alone, both, a third of the run each.
fn household(scenario: &str) -> ScenarioReport {
    let third = DUR / 3.0;
    let mut runs = Vec::new();
    for alt in ALTS {
        let y = yield_of(alt);
        let mut r = run(
            scenario,
            alt,
            0,
            BTreeMap::from([("case".into(), json!("N = 2"))]),
        );
        let be =
            move |t: f64| (t < third || t >= 2.0 * third).then_some(9.5 * if t < third { 1.0 } else { y });
        let bg = move |t: f64| (t >= third).then_some(9.4 * if t < 2.0 * third { 1.0 } else { 1.0 - y });
        r.series
            .push(series("goodput", Unit::Mbps, "be", Role::BestEffort, be));
        r.series
            .push(series("goodput", Unit::Mbps, "bg0", Role::Background, bg));
        r.metrics
            .push(Metric::new("be_kept", Unit::Ratio, y).period("together"));
        runs.push(r);
    }
    let row = (
        "N = 2: BE kept beside BG",
        Unit::Ratio,
        "be_kept/together",
        Some("≥ 0.93"),
    );
    report(scenario, "household control (synthetic)", runs, &[row])
}

fn all_kinds() -> Vec<ScenarioReport> {
    let mut kinds = vec![
        alone(),
        cbr(),
        cwnd(),
        onoff(),
        fairness(),
        udp_square(),
        web(),
        datapath(),
    ];
    kinds.extend(crate::scenarios::HOUSEHOLD.map(household));
    kinds
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("slipstream-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn plot<'a>(plots: &'a [Plot], file: &str) -> &'a Plot {
    plots.iter().find(|p| p.file == file).unwrap_or_else(|| {
        panic!(
            "no {file} in {:?}",
            plots.iter().map(|p| &p.file).collect::<Vec<_>>()
        )
    })
}

fn assert_texts(svg: &str, needles: &[&str]) {
    let texts = svg_texts(svg);
    for n in needles {
        assert!(
            texts.iter().any(|t| t.contains(n)),
            "no text containing {n:?} in {texts:?}"
        );
    }
}

#[test]
fn every_kind_renders_well_formed_plots() {
    for rep in all_kinds() {
        let plots = scenario_plots(&rep).unwrap();
        assert!(!plots.is_empty(), "{}: no plots", rep.scenario);
        for p in &plots {
            assert!(p.file.ends_with(".svg") && !p.file.contains('/'), "{}", p.file);
            assert_svg(&p.svg);
            assert_texts(&p.svg, &[&rep.scenario]);
        }
        let mut files: Vec<&str> = plots.iter().map(|p| p.file.as_str()).collect();
        files.sort();
        files.dedup();
        assert_eq!(files.len(), plots.len(), "{}: duplicate file names", rep.scenario);
    }
}

#[test]
fn goodput_is_head_to_head_per_alternative() {
    let plots = scenario_plots(&cbr()).unwrap();
    let g = plot(&plots, "goodput.svg");
    assert_texts(
        &g.svg,
        &[
            "goodput (Mbit/s)",
            "time (s)",
            "best effort (be)",
            "background (bg)",
            "link 10 Mbit/s",
            "bg start",
        ],
    );
    assert_texts(&g.svg, &ALTS);
    // Background drawn upside down, ticks printed as magnitudes.
    assert!(svg_texts(&g.svg).iter().all(|t| !t.starts_with('-')));
    // The reverse flow is not drawn.
    assert!(!svg_texts(&g.svg).iter().any(|t| t.contains("rev")));
    assert_texts(&plot(&plots, "rtt.svg").svg, &["RTT (ms)", "ping (probe)"]);
    let piv = plot(&plots, "piv.svg");
    assert_texts(&piv.svg, &["PIV sum (ms)", "no-control: no piv_sum series"]);
    assert_texts(
        &plot(&plots, "summary-mbit-s.svg").svg,
        &["paper", "BE goodput, before", "BE goodput, background active"],
    );
}

#[test]
fn windows_and_missing_series() {
    let plots = scenario_plots(&cwnd()).unwrap();
    let w = plot(&plots, "windows.svg");
    assert_texts(
        &w.svg,
        &[
            "window (kB)",
            "rwnd (advertised)",
            "cwnd estimate",
            "cwnd (sender)",
            "htb-90: no window series",
        ],
    );
    // No PIV series anywhere: no PIV plot.
    assert!(plots.iter().all(|p| p.file != "piv.svg"));
    let u = scenario_plots(&udp_square()).unwrap();
    assert_texts(
        &plot(&u, "goodput.svg").svg,
        &[
            "htb-90: no best-effort or background goodput series",
            "available to background",
            "best effort (udp)",
        ],
    );
}

#[test]
fn subcases_get_one_goodput_plot_each() {
    let plots = scenario_plots(&onoff()).unwrap();
    for t in [1, 3, 5, 10, 30] {
        let p = plot(&plots, &format!("goodput-on-off-t-s-{t}.svg"));
        assert_texts(&p.svg, &[&format!("on_off_T_s={t}")]);
    }
    let f = scenario_plots(&fairness()).unwrap();
    assert_texts(&plot(&f, "goodput-flows-4.svg").svg, &["background (bg3)"]);
    assert_texts(
        &plot(&f, "goodput-flows-16.svg").svg,
        &["background, 16 flows together"],
    );
    let bars = plot(&f, "summary-ratios.svg");
    assert_texts(&bars.svg, &["Jain's index, 2 flows", "paper", "slipstream"]);
}

#[test]
fn web_gets_a_cdf() {
    let plots = scenario_plots(&web()).unwrap();
    let c = plot(&plots, "cdf-web-response.svg");
    let xy = plot(&plots, "xy-web-rt-by-size.svg");
    assert_texts(
        &xy.svg,
        &["object size bytes", "web rt by size (ms)", "1k", "1M", "htb-90"],
    );
    assert!(plots.iter().all(|p| !p.file.starts_with("cdf-web-rt")));
    assert_texts(
        &c.svg,
        &["fraction of samples", "web response (ms)", "slipstream (n = 360)"],
    );
}

#[test]
fn empty_report_does_not_panic() {
    let rep = ScenarioReport {
        scenario: "empty".into(),
        ..Default::default()
    };
    assert!(scenario_plots(&rep).unwrap().is_empty());
    let md = scenario_markdown(&Summary::of(&rep, &[], ""));
    assert!(md.contains("No summary rows"), "{md}");
    assert!(md.contains("How measured: –"), "{md}");
}

#[test]
fn markdown_table_with_repeats_and_paper() {
    let rep = Summary::of(&cbr(), &scenario_plots(&cbr()).unwrap(), "");
    let md = scenario_markdown(&rep);
    assert!(md.starts_with("# CBR best effort"), "{md}");
    assert!(
        md.contains("| metric | unit | no-control | slipstream | slipstream-paper | htb-90 | paper |"),
        "{md}"
    );
    // Mean and min–max over the two repeats, Mbit/s with 2 decimals.
    assert!(
        md.contains("| BE goodput, before | Mbit/s | 5.99 (5.97–6.01) |"),
        "{md}"
    );
    assert!(md.contains("| 5.98 (Vulture Sec. 0.4) |"), "{md}");
    // ms without decimals above 100.
    assert!(
        md.contains("| BE RTT, background active | ms | 164 (164–164) |"),
        "{md}"
    );
    assert!(md.contains("How measured: 2023-11-14 22:13 UTC; bottleneck 10 Mbit/s, RTT 100 ms (measured 100.4–100.6 ms), queue 125000 bytes (83 packets); 180 s per run, 2 repeat(s) per alternative; kernel –; sender cc cubic."), "{md}");
    assert!(
        md.contains("![cbr: goodput (best effort up, background upside down)](goodput.svg)"),
        "{md}"
    );
    assert!(md.contains("Cells: mean over repeats (min–max)."));
    // Slipstream's BG goodput (3.23 + 0.02) is above the paper's 2.84: better, not listed;
    // slipstream-paper's BE goodput (5.78) is worse than 5.98 by 3%: within tolerance.
    let diffs = markdown::differences(&rep);
    assert!(
        diffs.iter().all(|d| d.metric != "BG goodput, background active"),
        "{diffs:?}"
    );
    // Utilization 0.81 vs 0.83 for slipstream: within 0.02; 0.73 for slipstream-paper: worse.
    assert!(
        diffs.iter().any(|d| d.metric == "Utilization of spare bandwidth"
            && d.alternative == "slipstream-paper"
            && d.verdict == "worse (lower)"),
        "{diffs:?}"
    );
    assert!(md.contains("## Not reached / differs from paper"), "{md}");
    let u = scenario_markdown(&Summary::of(&udp_square(), &[], ""));
    assert!(
        u.contains("| UDP loss, UDP on | % | 22.0 | 3.0 | 5.0 | – | – |"),
        "{u}"
    );
    assert!(u.contains("- htb-90: iperf3 UDP server failed to start"), "{u}");
}

#[test]
fn min_max_per_subcase() {
    // Two repeats per flow count, the same metric key in every sub-case (as the fairness
    // scenario records it): min–max must come from the row's own sub-case.
    let mut runs = Vec::new();
    for (n, vals) in [(2, [0.90, 0.94]), (4, [0.97, 0.99])] {
        for (repeat, v) in vals.iter().enumerate() {
            let mut r = run(
                "fairness",
                "slipstream",
                repeat as u32,
                BTreeMap::from([("flows".to_string(), json!(n))]),
            );
            r.metrics.push(Metric::new("jain_index", Unit::Ratio, *v));
            runs.push(r);
        }
    }
    let mut table = Table::new(vec!["slipstream".into()]);
    for n in [2, 4] {
        let refs: Vec<&RunResult> = runs
            .iter()
            .filter(|r| r.params.extra["flows"] == json!(n))
            .collect();
        table.add_metric_row(
            &format!("N = {n}: Jain's index"),
            Unit::Ratio,
            &refs,
            "jain_index",
            None,
            None,
        );
    }
    let rep = ScenarioReport {
        scenario: "fairness".into(),
        runs,
        table,
        ..Default::default()
    };
    let md = markdown::table(&Summary::of(&rep, &[], ""));
    assert!(
        md.contains("| N = 2: Jain's index | ratio | 0.920 (0.900–0.940) | – |"),
        "{md}"
    );
    assert!(
        md.contains("| N = 4: Jain's index | ratio | 0.980 (0.970–0.990) | – |"),
        "{md}"
    );
    assert_eq!(summary::repeats(&rep), 2);
}

#[test]
fn differences_cover_missing_and_direction() {
    let mut rep = Summary::of(&alone(), &[], "");
    let cell = |mean| {
        Some(summary::Cell {
            mean,
            range: None,
            sd: None,
        })
    };
    rep.rows.push(summary::SummaryRow {
        metric: "Time to 90% of the link".into(),
        unit: Unit::S,
        cells: vec![cell(1.0), cell(30.0), None, cell(2.0)],
        paper: Some(Paper::about(20.0, 0, "Vulture Sec. 0.4.5")),
    });
    let d = markdown::differences(&rep);
    assert!(
        d.iter().any(|d| d.metric.starts_with("Time to 90%")
            && d.alternative == "slipstream"
            && d.verdict == "worse (higher)"),
        "{d:?}"
    );
    assert!(
        d.iter()
            .any(|d| d.alternative == "slipstream-paper" && d.verdict == "not measured"),
        "{d:?}"
    );
    assert!(d.iter().all(|d| d.alternative.starts_with("slipstream")));
}

#[test]
fn write_outputs_into_run_dir() {
    let dir = temp_dir("outputs");
    let rep = cbr();
    let written = write_scenario_outputs(&dir.join("cbr/20231114T221320Z"), &rep).unwrap();
    assert!(
        written[0].ends_with("result.json") && written[1].ends_with("table.md"),
        "{written:?}"
    );
    let back = ScenarioReport::from_json(&std::fs::read_to_string(&written[0]).unwrap()).unwrap();
    assert_eq!(back.runs.len(), rep.runs.len());
    if let Some(k) = running_kernel() {
        assert_eq!(back.runs[0].params.extra.get("kernel"), Some(&json!(k)));
        let md = std::fs::read_to_string(&written[1]).unwrap();
        assert!(md.contains(&format!("kernel {k}")), "{md}");
    }
    for f in ["goodput.svg", "rtt.svg", "piv.svg"] {
        let svg = std::fs::read_to_string(dir.join("cbr/20231114T221320Z").join(f)).unwrap();
        assert_svg(&svg);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gather_takes_latest_run_of_each_scenario() {
    let root = temp_dir("gather");
    let results = root.join("lab-results");
    let docs = root.join("docs");
    // An older cbr run that must not be used.
    let mut old = cbr();
    old.title = "OLD RUN".into();
    write_scenario_outputs(&results.join("cbr/20200101T000000Z"), &old).unwrap();
    for rep in all_kinds() {
        write_scenario_outputs(&results.join(&rep.scenario).join("20231114T221320Z"), &rep).unwrap();
    }
    // A broken result and a directory without one.
    std::fs::create_dir_all(results.join("broken/20231114T221320Z")).unwrap();
    std::fs::write(results.join("broken/20231114T221320Z/result.json"), "{not json").unwrap();
    std::fs::create_dir_all(results.join("nothing/20231114T221320Z")).unwrap();
    // A stale plot in docs.
    std::fs::create_dir_all(docs.join("lab/cbr")).unwrap();
    std::fs::write(docs.join("lab/cbr/stale.svg"), "<svg></svg>").unwrap();

    let readme = gather(&results, &docs).unwrap();
    assert_eq!(readme, docs.join("lab/README.md"));
    let page = std::fs::read_to_string(&readme).unwrap();
    assert!(page.starts_with("# Slipstream lab results"), "{page}");
    assert!(!page.contains("OLD RUN"));
    for section in [
        "## Testbed",
        "## Headline",
        "## Not reached / differs from paper",
        "## Runs that could not be reported",
    ] {
        assert!(page.contains(section), "no {section}");
    }
    assert!(page.contains("broken: "), "{page}");
    assert!(
        page.contains("- **datapath**: 2023-11-14 22:13 UTC; no bottleneck, no delay element;"),
        "{page}"
    );
    assert!(
        page.contains("- **cbr**: 2023-11-14 22:13 UTC; bottleneck 10 Mbit/s, RTT 100 ms"),
        "{page}"
    );
    assert!(!page.contains("nothing"), "{page}");
    // Scenarios in lab order, each with its table and plots.
    assert_sections_in_lab_order(&page);
    assert!(
        page.contains("| [cbr](#cbr) | BE goodput, background active | Mbit/s |"),
        "{page}"
    );
    assert!(
        page.contains("| [datapath](#datapath) | Added latency, p99 | us | 4.0 | 38.0 | – | – | – |"),
        "{page}"
    );
    assert!(
        page.contains("| alone | Utilization, whole background period | slipstream | 0.740 | 0.93 (Vulture Sec. 0.4) | worse (lower) |"),
        "{page}"
    );
    assert!(!page.contains("| cwnd | Cwnd estimate correlation"), "{page}");
    assert!(
        page.contains("![cbr: goodput (best effort up, background upside down)](cbr/goodput.svg)"),
        "{page}"
    );
    assert!(!docs.join("lab/cbr/stale.svg").exists());
    for (dir, file) in [
        ("cbr", "goodput.svg"),
        ("cwnd", "windows.svg"),
        ("fairness", "summary-ratios.svg"),
        ("web", "cdf-web-response.svg"),
    ] {
        let svg = std::fs::read_to_string(docs.join("lab").join(dir).join(file)).unwrap();
        assert_svg(&svg);
    }
    assert_linked_svgs_exist(&page, &docs);
    let _ = std::fs::remove_dir_all(&root);
}

/// Every SVG image `page` links exists under `<docs>/lab`.
fn assert_linked_svgs_exist(page: &str, docs: &std::path::Path) {
    let links = page.split("](").skip(1).filter_map(|s| s.split_once(')'));
    for (link, _) in links.filter(|(l, _)| l.ends_with(".svg")) {
        assert!(docs.join("lab").join(link).is_file(), "missing {link}");
    }
}

/// Every scenario of the lab has a section on `page`, in the lab's order.
fn assert_sections_in_lab_order(page: &str) {
    let pos = |s: &str| {
        page.find(&format!("<a id=\"{s}\">"))
            .unwrap_or_else(|| panic!("no section {s}"))
    };
    for w in crate::scenarios::ALL.windows(2) {
        assert!(pos(w[0]) < pos(w[1]), "{w:?} out of order");
    }
}

#[test]
fn gather_keeps_committed_summaries_of_scenarios_without_a_run() {
    let root = temp_dir("gather-keep");
    let docs = root.join("docs");
    let first = root.join("first");
    for rep in all_kinds() {
        write_scenario_outputs(&first.join(&rep.scenario).join("20231114T221320Z"), &rep).unwrap();
    }
    let before = std::fs::read_to_string(gather(&first, &docs).unwrap()).unwrap();
    // The committed summaries alone rebuild the same page.
    let none = root.join("none");
    let rebuilt = std::fs::read_to_string(gather(&none, &docs).unwrap()).unwrap();
    assert_eq!(rebuilt, before);
    // A fresh results directory with only a new cbr run: every other scenario stays.
    let second = root.join("second");
    let mut fresh = cbr();
    fresh.title = "NEW CBR RUN".into();
    write_scenario_outputs(&second.join("cbr/20241114T221320Z"), &fresh).unwrap();
    let page = std::fs::read_to_string(gather(&second, &docs).unwrap()).unwrap();
    assert!(page.contains("NEW CBR RUN"), "{page}");
    assert_sections_in_lab_order(&page);
    for line in before
        .lines()
        .filter(|l| l.starts_with("| [alone](#alone) |") || l.starts_with("| alone |"))
    {
        assert!(page.contains(line), "lost {line}");
    }
    let datapath_row = "| [datapath](#datapath) | Added latency, p99 | us | 4.0 | 38.0 | – | – | – |";
    assert!(page.contains(datapath_row), "{page}");
    assert_linked_svgs_exist(&page, &docs);
    // An older run does not replace a committed later one.
    write_scenario_outputs(&second.join("cbr/20001114T221320Z"), &cbr()).unwrap();
    std::fs::remove_dir_all(second.join("cbr/20241114T221320Z")).unwrap();
    let again = std::fs::read_to_string(gather(&second, &docs).unwrap()).unwrap();
    assert_eq!(again, page);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn gather_without_results_or_summaries_says_so() {
    let root = temp_dir("gather-none");
    let page = std::fs::read_to_string(gather(&root.join("nope"), &root.join("docs")).unwrap()).unwrap();
    assert!(page.contains("_No runs found._"), "{page}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Writes every plot of every synthetic kind under `$SLIPSTREAM_REPORT_DUMP` (default: a temporary
/// directory) for looking at them: `cargo test -p slipstream-lab dump -- --ignored`.
#[test]
#[ignore = "writes plots for a person to look at; checks nothing the other tests do not"]
fn dump_synthetic_reports() {
    let dir = std::env::var("SLIPSTREAM_REPORT_DUMP")
        .map(PathBuf::from)
        .unwrap_or_else(|_| temp_dir("dump"));
    eprintln!("writing under {}", dir.display());
    for rep in all_kinds() {
        let run_dir = dir.join("results").join(&rep.scenario).join("20231114T221320Z");
        write_scenario_outputs(&run_dir, &rep).unwrap();
    }
    gather(&dir.join("results"), &dir.join("docs")).unwrap();
}

#[test]
fn subcases_are_named_by_their_independent_keys() {
    let case = |flows: u64, hosts: u64, stagger: f64, cc: &str| {
        let mut e = BTreeMap::new();
        e.insert("flows".to_string(), json!(flows));
        e.insert("hosts".to_string(), json!(hosts));
        e.insert("stagger_s".to_string(), json!(stagger));
        e.insert("cc".to_string(), json!(cc));
        run("fairness", "slipstream", 0, e)
    };
    // hosts and stagger follow from flows: one key names the sub-case.
    let mut r = ScenarioReport {
        scenario: "fairness".into(),
        runs: vec![case(2, 2, 20.0, "cubic"), case(8, 4, 60.0 / 7.0, "cubic")],
        ..Default::default()
    };
    assert_eq!(subcases::subcase_keys(&r), vec!["flows".to_string()]);
    assert_eq!(
        subcases::subcase_label(&r.runs[1], &subcases::subcase_keys(&r)),
        "flows=8"
    );
    // A second independent dimension stays.
    r.runs.push(case(2, 2, 20.0, "reno"));
    assert_eq!(
        subcases::subcase_keys(&r),
        vec!["cc".to_string(), "flows".to_string()]
    );
}
