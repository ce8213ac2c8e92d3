//! `cwnd`: the daemon's cwnd estimate against the sender's real cwnd from `ss` (Vulture Sec.
//! 0.4.2, Figs. 11-12), one background download alone per congestion control (cubic, reno); only
//! alternatives that run the daemon run, and of those only the Vulture ones keep an estimate
//! (household and fixed-rwnd: rwnd and goodput only, said in the notes). Definitions:
//! docs/lab/about.md, "What each scenario measures".

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
        bail!("cwnd needs an alternative that runs the daemon (slipstream, slipstream-paper, fixed-rwnd, household)");
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
    // household and fixed-rwnd set windows without estimating the sender's cwnd.
    let has_estimate = |a: &String| {
        report.runs.iter().any(|r| &r.alternative == a && r.series("cwnd_estimate", "bg").is_some())
    };
    let without: Vec<String> = sub.alternative_labels().into_iter().filter(|a| !has_estimate(a)).collect();
    if !without.is_empty() {
        notes.push(format!(
            "{}: no cwnd estimate samples: household control sets each flow's share of one household budget, \
             fixed-rwnd a constant window, neither estimates the sender's cwnd; their estimate rows stay empty \
             (rwnd vs cwnd and goodput are measured)",
            without.join(", ")
        ));
    }
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
    let points = |name| r.series(name, "bg").map(|s| s.points.clone()).unwrap_or_default();
    let (real, est, flight, rwnd) =
        (points("cwnd"), points("cwnd_estimate"), points("inflight"), points("rwnd"));
    let goodput = analysis::mean(points("goodput").iter().map(|p| p.1));
    let mut m = Vec::new();
    let mut push =
        |name: &str, unit, v: Option<f64>| m.extend(v.map(|v| Metric::new(name, unit, v).flow("bg")));
    if !est.is_empty() {
        let pairs = analysis::pair_series(&est, &real, 0.1);
        push("cwnd_mare", Unit::Ratio, analysis::mean_abs_rel_error(&pairs));
        push("cwnd_bias", Unit::Ratio, analysis::mean_rel_bias(&pairs));
        push("cwnd_corr", Unit::Ratio, analysis::pearson(&pairs));
        push("cwnd_pairs", Unit::Count, Some(pairs.len() as f64));
        // Against the bytes in flight (a clamped sender's cwnd can exceed what it may send).
        let pairs = analysis::pair_series(&est, &flight, 0.1);
        push("inflight_mare", Unit::Ratio, analysis::mean_abs_rel_error(&pairs));
        push("inflight_corr", Unit::Ratio, analysis::pearson(&pairs));
    }
    if !rwnd.is_empty() {
        push("rwnd_corr", Unit::Ratio, analysis::pearson(&analysis::pair_series(&rwnd, &real, 0.1)));
    }
    push("bg_goodput", Unit::Mbps, goodput);
    r.metrics.extend(m);
    r
}
