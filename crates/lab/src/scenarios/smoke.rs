//! `smoke`: a < 60 s end-to-end check for CI: a short `alone` and a short `cbr` with
//! `no-control` and `slipstream` only (whatever `--alternatives` says), asserting that the
//! topology was built, every run measured non-empty goodput/RTT series, the daemon was scraped,
//! results were written, and nothing was left behind (each run's `finish` checks its namespaces).

use anyhow::{ensure, Result};

use super::{alone, cbr, LabContext, ScenarioOptions};
use crate::alternatives::Alternative;
use crate::result::ScenarioReport;

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let opts = ScenarioOptions {
        alternatives: vec![Alternative::NoControl, Alternative::Slipstream],
        repeats: 1,
        ..opts.clone()
    };
    let a = alone::run_with(ctx, &opts, "smoke", 8.0)?;
    let c = cbr::run_with(ctx, &opts, "smoke-cbr", 4.0)?;
    for r in a.runs.iter().chain(&c.runs) {
        for (name, flow) in [("goodput", "bg"), ("rtt", "ping"), ("cwnd", "bg")] {
            let n = r.series(name, flow).map_or(0, |s| s.points.len());
            ensure!(n > 0, "{} / {}: series {name} of {flow} is empty", r.scenario, r.alternative);
        }
        if r.alternative == "slipstream" {
            let n = r.series("rwnd", "bg").map_or(0, |s| s.points.len());
            ensure!(n > 0, "{}: no daemon rwnd samples of the background flow", r.scenario);
        }
    }
    let mut merged = a;
    merged.title = "smoke: short alone + short cbr, no-control and slipstream".into();
    for mut row in c.table.rows {
        row.metric = format!("cbr: {}", row.metric);
        merged.table.rows.push(row);
    }
    merged.runs.extend(c.runs);
    merged.notes.extend(c.notes);
    ctx.write_report(merged)
}
