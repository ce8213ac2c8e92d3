//! `alone`: one background download on an idle link (Vulture Sec. 0.4.4, Fig. 17): utilization
//! over the run and its stable second half, time to 90% of the link, ping beside it. Definitions
//! and the paper's values: docs/lab/about.md, "What each scenario measures".

use anyhow::Result;

use super::{LabContext, ScenarioOptions};
use crate::analysis::{self, max_goodput_mbit};
use crate::harness::{run_all, FlowSpec, Run, RunSetup, BG_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Table, Target, Unit};

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    run_with(ctx, opts, "alone", opts.scaled(90.0, 6.0))
}

/// Runs `alone` for `duration` seconds (also used by `smoke`).
pub fn run_with(
    ctx: &LabContext,
    opts: &ScenarioOptions,
    name: &str,
    duration: f64,
) -> Result<ScenarioReport> {
    let mut report = ScenarioReport::starting(name);
    run_all(ctx, opts, &mut report, &[duration], |&d, alt| RunSetup::new(alt, d), body)?;
    report.title = format!(
        "{name}: one background download alone, {:.0} s, {} Mbit/s, {} ms RTT",
        duration, opts.rate_mbit, opts.rtt_ms
    );
    report.table = table(opts, &report.runs);
    report.notes = vec![format!(
        "utilization = goodput / {:.2} Mbit/s (max TCP goodput of the link; the paper's path gave 9.41); \
         stable = second half of the run",
        max_goodput_mbit(opts.rate_mbit)
    )];
    ctx.write_report(report)
}

fn body(mut run: Run, &duration: &f64) -> Result<RunResult> {
    run.start_flow(FlowSpec::download("bg", Role::Background, BG_PORT, duration))?;
    run.wait_until(duration)?;
    Ok(with_metrics(run.finish()?, duration))
}

/// Adds the scenario's metrics to a finished run.
pub fn with_metrics(mut r: RunResult, duration: f64) -> RunResult {
    let max = max_goodput_mbit(r.params.rate_mbit);
    let mut m = Vec::new();
    // The flow's data span (its goodput points sit at interval midpoints, inside it); none
    // when it carried no data, and then no point either.
    let (start, end) = r.spans("bg").first().copied().unwrap_or_default();
    let half = start + (end - start) / 2.0;
    let points = r.series("goodput", "bg").map(|s| s.points.clone()).unwrap_or_default();
    if let Some(g) = analysis::mean_between(&points, start, end) {
        m.push(Metric::new("bg_goodput", Unit::Mbps, g).flow("bg"));
        m.push(Metric::new("utilization", Unit::Ratio, g / max));
    }
    if let Some(g) = analysis::mean_between(&points, half, end) {
        m.push(Metric::new("bg_goodput", Unit::Mbps, g).flow("bg").period("stable"));
        m.push(Metric::new("utilization", Unit::Ratio, g / max).period("stable"));
    }
    match analysis::time_to_reach(&points, start, 0.9 * max, 1.0) {
        Some(tt) => m.push(Metric::new("time_to_90pct", Unit::S, tt)),
        None => r.notes.push(format!("never reached 90% of {max:.2} Mbit/s within {duration:.0} s")),
    }
    if let Some(v) = r.series("rtt", "ping").and_then(|p| p.mean_between(half, end)) {
        m.push(Metric::new("be_rtt", Unit::Ms, v).period("stable"));
    }
    r.metrics.extend(m);
    r
}

fn table(opts: &ScenarioOptions, runs: &[RunResult]) -> Table {
    let src = "Vulture Sec. 0.4.4, Fig. 17";
    let rows = [
        RowSpec::new("BG goodput, whole run", Unit::Mbps, "bg_goodput").paper(Paper::about(8.76, 2, src)),
        RowSpec::new("utilization, whole run", Unit::Ratio, "utilization").paper(Paper::about(0.93, 2, src)),
        RowSpec::new("utilization, stable (2nd half)", Unit::Ratio, "utilization")
            .period("stable")
            .paper(Paper::about(0.99, 2, src)),
        RowSpec::new("time to 90% of link", Unit::S, "time_to_90pct").paper(Paper::new(
            "≈20 (regained after the BE → LBE switch, not from a cold start)",
            Some(Target::about(20.0)),
            src,
        )),
        RowSpec::new("ping RTT beside BG, stable", Unit::Ms, "be_rtt").period("stable"),
    ];
    let mut table = Table::of(opts.alternative_labels(), runs, rows);
    table.add_machine_rows(&runs.iter().collect::<Vec<_>>(), None);
    table
}
