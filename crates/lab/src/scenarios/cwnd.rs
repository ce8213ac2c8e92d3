//! `cwnd`: the daemon's cwnd estimate against the sender's real cwnd (Vulture Sec. 0.4.2,
//! Figs. 11-12; Fig. 13, the rwnd set to the estimate at a BE → LBE switch, is not reproduced), for cubic and reno.
//!
//! One background download alone for 60 s (`--scale` shortens) per congestion control (cases
//! `cubic`, `reno`). The real cwnd is
//! `cwnd × mss` from `ss -tin` on the server every 100 ms; the estimate is
//! `slipstream_flow_cwnd_estimate_bytes` scraped about every 100 ms; each estimate is paired with the
//! ss sample nearest in time (within 100 ms). Metrics: `cwnd_mare` (mean |est − real| / real),
//! `cwnd_bias` (mean (est − real) / real; negative = underestimate, which the paper expects since
//! lost bytes are not counted), `cwnd_corr` (Pearson correlation), and the same for the forwarded
//! `rwnd` against the real cwnd (`rwnd_corr`), and the estimate against the bytes in flight
//! (`inflight_mare`, `inflight_corr`: `unacked × mss` from ss; a rwnd-limited Linux sender's
//! cwnd can sit well above what it is allowed to send, which is what the estimate sees). Only alternatives that run the daemon have an
//! estimate; the others are skipped.

use anyhow::{bail, Result};

use super::{LabContext, ScenarioOptions};
use crate::analysis;
use crate::harness::{run_all, FlowSpec, Run, RunSetup, BG_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Table, Target, Unit};

/// The congestion controls compared, one case each.
const CCS: [&str; 2] = ["cubic", "reno"];

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let duration = opts.scaled(60.0, 8.0);
    let mut sub = opts.clone();
    sub.alternatives.retain(|a| a.uses_daemon());
    if sub.alternatives.is_empty() {
        bail!("cwnd needs an alternative that runs the daemon (slipstream, slipstream-paper, fixed-rwnd)");
    }
    let setup = |&cc: &&str, alt| RunSetup {
        ping: false,
        cc: Some(cc.into()),
        ..RunSetup::new(alt, duration).param("cc", cc)
    };
    let body = |mut run: Run, _: &&str| {
        run.start_flow(FlowSpec::download("bg", Role::Background, BG_PORT, duration))?;
        run.wait_until(duration)?;
        run.finish().map(with_metrics)
    };
    let mut report = ScenarioReport::starting("cwnd");
    run_all(ctx, &sub, &mut report, &CCS, setup, body)?;
    let src = "Vulture Sec. 0.4.2, Figs. 11-12";
    let mut table = Table::new(sub.alternative_labels());
    for cc in CCS {
        let rows = [
            ("cwnd estimate MARE", "cwnd_mare", Some(Paper::note("small underestimate (figure only)", src))),
            ("cwnd estimate bias", "cwnd_bias", Some(Paper::new("< 0", Some(Target::at_most(0.0)), src))),
            (
                "cwnd estimate correlation",
                "cwnd_corr",
                Some(Paper::new("≈1 (tracks changes)", Some(Target::about(1.0)), src)),
            ),
            ("estimate vs in-flight MARE", "inflight_mare", None),
            ("estimate vs in-flight correlation", "inflight_corr", None),
            ("rwnd vs cwnd correlation", "rwnd_corr", None),
            ("BG goodput", "bg_goodput", None),
        ];
        let rows = rows.map(|(label, name, paper)| {
            let unit = if name == "bg_goodput" { Unit::Mbps } else { Unit::Ratio };
            RowSpec::new(format!("{cc}: {label}"), unit, name).paper(paper)
        });
        table.add_rows(&report.runs_with("cc", cc), rows);
    }
    let mut notes = Vec::new();
    if sub.alternatives.len() < opts.alternatives.len() {
        notes.push("alternatives without the daemon were skipped (no estimate to compare)".into());
    }
    notes.push(
        "the paper switches one flow BE → LBE → BE; the daemon classes a flow at its SYN, so the flow is background throughout".into(),
    );
    report.title =
        format!("cwnd: daemon cwnd estimate vs sender cwnd (ss), {}, {duration:.0} s", CCS.join(","));
    report.table = table;
    report.notes = notes;
    ctx.write_report(report)
}

/// Adds the error/correlation metrics.
pub fn with_metrics(mut r: RunResult) -> RunResult {
    let real = r.series("cwnd", "bg").map(|s| s.points.clone()).unwrap_or_default();
    let mut m = Vec::new();
    if let Some(est) = r.series("cwnd_estimate", "bg") {
        let pairs = analysis::pair_series(&est.points, &real, 0.1);
        if let Some(v) = analysis::mean_abs_rel_error(&pairs) {
            m.push(Metric::new("cwnd_mare", Unit::Ratio, v).flow("bg"));
        }
        if let Some(v) = analysis::mean_rel_bias(&pairs) {
            m.push(Metric::new("cwnd_bias", Unit::Ratio, v).flow("bg"));
        }
        if let Some(v) = analysis::pearson(&pairs) {
            m.push(Metric::new("cwnd_corr", Unit::Ratio, v).flow("bg"));
        }
        m.push(Metric::new("cwnd_pairs", Unit::Count, pairs.len() as f64).flow("bg"));
        // Against the bytes in flight (a clamped sender's cwnd can exceed what it may send).
        let flight = r.series("inflight", "bg").map(|s| s.points.clone()).unwrap_or_default();
        let pairs = analysis::pair_series(&est.points, &flight, 0.1);
        if let Some(v) = analysis::mean_abs_rel_error(&pairs) {
            m.push(Metric::new("inflight_mare", Unit::Ratio, v).flow("bg"));
        }
        if let Some(v) = analysis::pearson(&pairs) {
            m.push(Metric::new("inflight_corr", Unit::Ratio, v).flow("bg"));
        }
    } else {
        r.notes.push("no cwnd estimate samples".into());
    }
    if let Some(rw) = r.series("rwnd", "bg") {
        let pairs = analysis::pair_series(&rw.points, &real, 0.1);
        if let Some(v) = analysis::pearson(&pairs) {
            m.push(Metric::new("rwnd_corr", Unit::Ratio, v).flow("bg"));
        }
    }
    if let Some(g) = r.series("goodput", "bg").and_then(|s| analysis::mean(s.points.iter().map(|p| p.1))) {
        m.push(Metric::new("bg_goodput", Unit::Mbps, g).flow("bg"));
    }
    r.metrics.extend(m);
    r
}
