//! The figures of a scenario, built from its [`ScenarioReport`] like the Vulture paper's
//! (Sec. 0.4, Figs. 11-20): goodput head to head with the background flow upside down, windows,
//! PIV sums and RTT, all over time. What the page gives as numbers is not drawn again: web response
//! times (overall and by object size) are in its table, the datapath's CPU by rate in its notes.
//!
//! Series are picked by name and role (see [`crate::result`]); an alternative without them has
//! no panel (the table says what it lacks), a figure without any panel is left out.

use std::collections::BTreeSet;

use anyhow::Result;

use super::plot::{
    self, alt_color, negate, render_figure, Figure, Line, LineKind, Marker, Panel, BE_COLOR, BG_COLOR,
    PAPER_COLOR,
};
use super::subcases::{groups, phase_markers};
use crate::result::{Role, RunResult, ScenarioReport, Series, Unit};

/// One rendered figure of a scenario.
#[derive(Debug, Clone)]
pub struct Plot {
    /// File name, e.g. `goodput.svg` or `goodput-flows-4.svg`.
    pub file: String,
    /// What it shows (used as the link text / alt text).
    pub title: String,
    pub svg: String,
    /// What was drawn (for tests of the plotted values).
    pub figure: Figure,
}

/// The alternatives of a report in table order, then any that only appear in runs.
pub fn alternatives(report: &ScenarioReport) -> Vec<String> {
    super::unique(report.table.columns.iter().chain(report.runs.iter().map(|r| &r.alternative)).cloned())
}

pub(super) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

fn series_named<'a>(run: &'a RunResult, name: &str) -> Vec<&'a Series> {
    run.series.iter().filter(|s| s.name == name && !s.points.is_empty()).collect()
}

fn scaled(points: &[(f64, f64)], factor: f64) -> Vec<(f64, f64)> {
    points.iter().map(|(t, v)| (*t, v * factor)).collect()
}

/// One figure over time per sub-case, one panel per alternative whose run for the case has data:
/// `fill` draws a run's panel (phase markers are added). A case without data has no figure.
/// Panels drawn upside down share one symmetric y range, so their flows compare at a glance.
fn time_figures(
    report: &ScenarioReport,
    (base, what, y_label): (&str, &str, &str),
    mut fill: impl FnMut(&RunResult, &mut Panel),
) -> Result<Vec<Plot>> {
    let alts = alternatives(report);
    let mut plots = Vec::new();
    for (subcase, runs) in groups(report) {
        let title = format!("{}: {what}", report.scenario);
        let (title, file) = match subcase.as_str() {
            "" => (title, format!("{base}.svg")),
            case => (format!("{title} ({case})"), format!("{base}-{}.svg", slug(case))),
        };
        let mut fig = Figure { title: title.clone(), ..Figure::default() };
        for (alt, run) in alts.iter().filter_map(|a| Some((a, *runs.get(a)?))) {
            let mut panel = Panel::new(alt.clone(), y_label);
            fill(run, &mut panel);
            if panel.lines.iter().any(|l| !l.points.is_empty()) {
                panel.vlines = phase_markers(run);
                fig.panels.push(panel);
            }
        }
        if !fig.panels.is_empty() {
            // From 0 to the end of the longest run: its planned duration or its last sample.
            let ends = runs.values().map(|r| r.params.duration_s);
            let last = fig.panels.iter().flat_map(|p| &p.lines).filter_map(|l| l.points.last());
            fig.x_range = Some((0.0, ends.chain(last.map(|p| p.0)).fold(0.0, f64::max)));
            let mirrored = fig.panels.iter().filter(|p| p.mirrored);
            let ys = mirrored.flat_map(|p| {
                p.lines.iter().flat_map(|l| &l.points).map(|p| p.1).chain(p.hlines.iter().map(|m| m.at))
            });
            let extent = ys.fold(0.0f64, |e, y| e.max(y.abs())) * 1.08;
            for p in fig.panels.iter_mut().filter(|p| p.mirrored && extent > 0.0) {
                p.y_range = Some((-extent, extent));
            }
            plots.push(Plot { file, title, svg: render_figure(&fig)?, figure: fig });
        }
    }
    Ok(plots)
}

/// At most this many background flows are drawn one by one; more are drawn as their total.
const MAX_BG_LINES: usize = 8;

/// A line per flow of `role` (y times `sign`), filled when it is the only one: the first in
/// colour `first`, the others in the alternatives' colours from `others` on.
fn flow_lines(flows: &[&Series], role: &str, (first, others): (usize, usize), sign: f64) -> Vec<Line> {
    let kind = if flows.len() == 1 { LineKind::Filled } else { LineKind::Solid };
    let color = |i: usize| if i == 0 { first } else { alt_color(others + i) };
    let points = |s: &Series| s.points.iter().map(|(t, v)| (*t, sign * v)).collect::<Vec<_>>();
    let line =
        |(i, s): (usize, &&Series)| Line::new(format!("{role} ({})", s.flow), &points(s), color(i), kind);
    flows.iter().enumerate().map(line).collect()
}

/// Goodput over time, one panel per alternative: best effort up, background upside down, the
/// bottleneck rate as dashed lines at ±rate, one y range for all panels (Vulture Figs. 14, 15,
/// 17, 18, 20).
pub fn goodput_plots(report: &ScenarioReport) -> Result<Vec<Plot>> {
    let what = ("goodput", "goodput (best effort up, background upside down)", "goodput (Mbit/s)");
    let fill = |run: &RunResult, panel: &mut Panel| {
        panel.mirrored = true;
        let mut goodput = series_named(run, "goodput");
        goodput.extend(series_named(run, "udp_rate"));
        let be: Vec<&Series> = goodput.iter().copied().filter(|s| s.role == Role::BestEffort).collect();
        let bg: Vec<&Series> = goodput.iter().copied().filter(|s| s.role == Role::Background).collect();
        if be.is_empty() && bg.is_empty() {
            return;
        }
        panel.lines.extend(flow_lines(&be, "best effort", (BE_COLOR, 2), 1.0));
        if bg.len() > MAX_BG_LINES {
            let refs: Vec<&[(f64, f64)]> = bg.iter().map(|s| s.points.as_slice()).collect();
            let total = crate::analysis::sum_series(&refs, 0.06);
            let label = format!("background, {} flows together", bg.len());
            panel.lines.push(Line::new(label, &negate(&total), BG_COLOR, LineKind::Filled));
        } else {
            panel.lines.extend(flow_lines(&bg, "background", (BG_COLOR, 1), -1.0));
        }
        if let Some(a) = series_named(run, "available").into_iter().find(|s| s.role == Role::Link) {
            let line =
                Line::new("available to background", &negate(&a.points), PAPER_COLOR, LineKind::Dashed);
            panel.lines.push(line);
        }
        let rate = run.params.rate_mbit;
        if rate.is_finite() && rate > 0.0 {
            let label = Some(format!("link {} Mbit/s", plot::tick(rate)));
            panel.hlines.extend([Marker { at: rate, label }, Marker { at: -rate, label: None }]);
        }
    };
    time_figures(report, what, fill)
}

/// Windows over time, one panel per alternative: the advertised rwnd, the cwnd estimate (dashed)
/// and, when the sender was sampled, the real cwnd (Vulture Figs. 11-13).
pub fn window_plots(report: &ScenarioReport) -> Result<Vec<Plot>> {
    let wanted = [
        ("rwnd", "rwnd (advertised)", 3usize, LineKind::Solid),
        ("cwnd_estimate", "cwnd estimate", 2, LineKind::Dashed),
        ("cwnd", "cwnd (sender)", 0, LineKind::Solid),
    ];
    let fill = |run: &RunResult, panel: &mut Panel| {
        // The background flow's windows; other flows' only if no flow is background.
        let all: Vec<&Series> =
            run.series.iter().filter(|s| wanted.iter().any(|(n, ..)| s.name == *n)).collect();
        let bg: BTreeSet<&str> =
            all.iter().filter(|s| s.role == Role::Background).map(|s| s.flow.as_str()).collect();
        let flows = if bg.is_empty() { all.iter().map(|s| s.flow.as_str()).collect() } else { bg };
        let many = flows.len() > 1;
        for flow in flows.iter().take(4) {
            for (name, label, color, kind) in wanted {
                if let Some(s) = all.iter().find(|s| s.name == name && s.flow == *flow) {
                    let factor = if s.unit == Unit::Bytes { 1e-3 } else { 1.0 };
                    let label = if many { format!("{label}, {flow}") } else { label.to_string() };
                    panel.lines.push(Line::new(label, &scaled(&s.points, factor), color, kind));
                }
            }
        }
    };
    time_figures(report, ("windows", "rwnd and cwnd estimate", "window (kB)"), fill)
}

fn to_ms(unit: Unit) -> f64 {
    match unit {
        Unit::S => 1e3,
        Unit::Us => 1e-3,
        _ => 1.0,
    }
}

/// Series `name` over time in ms, one panel per alternative: of the flows whose role is
/// `preferred` where a run has them (else of all its flows), at most 8 per panel.
fn single_series_plots(
    report: &ScenarioReport,
    name: &str,
    what: (&str, &str, &str),
    preferred: fn(Role) -> bool,
) -> Result<Vec<Plot>> {
    let fill = |run: &RunResult, panel: &mut Panel| {
        let mut found = series_named(run, name);
        let preferred = |s: &&Series| preferred(s.role);
        if found.iter().any(preferred) {
            found.retain(preferred);
        }
        for (i, s) in found.iter().take(8).enumerate() {
            let color = if s.role == Role::Background { BG_COLOR } else { alt_color(i) };
            let label = format!("{} ({})", s.flow, s.role);
            panel.lines.push(Line::new(label, &scaled(&s.points, to_ms(s.unit)), color, LineKind::Solid));
        }
    };
    time_figures(report, what, fill)
}

/// Every figure of a scenario, in the order the report shows them.
pub fn scenario_plots(report: &ScenarioReport) -> Result<Vec<Plot>> {
    let mut plots = goodput_plots(report)?;
    plots.extend(window_plots(report)?);
    // PIV sums per epoch (the daemon's), Vulture Figs. 6, 7.
    let piv = ("piv", "PIV sum per epoch", "PIV sum (ms)");
    plots.extend(single_series_plots(report, "piv_sum", piv, |r| r == Role::Background)?);
    // RTT seen by best effort (ping probe or best-effort flow), Vulture Fig. 16.
    let rtt = ("rtt", "RTT seen by best effort", "RTT (ms)");
    plots.extend(single_series_plots(report, "rtt", rtt, |r| matches!(r, Role::Probe | Role::BestEffort))?);
    Ok(plots)
}
