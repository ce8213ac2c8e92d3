//! `cbr`: a 6 Mbit/s best-effort download and a 6 Mbit/s reverse upload throughout, a background
//! download joining for the middle third (Vulture Sec. 0.4.3, Figs. 15-16): BE goodput and RTT
//! per third, and how much of the capacity BE leaves background uses. Definitions and the
//! paper's values: docs/lab/about.md, "What each scenario measures".

use anyhow::Result;

use super::{LabContext, ScenarioOptions};
use crate::analysis::max_goodput_mbit;
use crate::harness::{run_all, FlowSpec, Run, RunSetup, BE_PORT, BG_PORT, REV_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Table, Unit};

/// Best-effort rate, Mbit/s (as in the paper).
const BE_MBIT: f64 = 6.0;

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    run_with(ctx, opts, "cbr", opts.scaled(30.0, 4.0))
}

/// Runs `cbr` with thirds of `third` seconds (also used by `smoke`).
pub fn run_with(ctx: &LabContext, opts: &ScenarioOptions, name: &str, third: f64) -> Result<ScenarioReport> {
    let setup = |third: &f64, alt| RunSetup {
        server_ports: vec![BG_PORT, BE_PORT, REV_PORT],
        ..RunSetup::new(alt, 3.0 * third).param("be_mbit", BE_MBIT)
    };
    let mut report = ScenarioReport::starting(name);
    run_all(ctx, opts, &mut report, &[third], setup, body)?;
    report.title = format!(
        "{name}: {} Mbit/s BE download + reverse upload; background joins for the middle third ({:.0} s each)",
        BE_MBIT, third
    );
    report.table = table(opts, &report.runs);
    report.notes = vec![format!(
        "spare_use = BG goodput / ({:.2} − BE goodput) in bg-active; be_rtt from ping -i 0.1, be_srtt from ss",
        max_goodput_mbit(opts.rate_mbit)
    )];
    ctx.write_report(report)
}

fn body(mut run: Run, &third: &f64) -> Result<RunResult> {
    let total = 3.0 * third;
    let rate = format!("{BE_MBIT}M");
    run.start_flow(FlowSpec::download("be", Role::BestEffort, BE_PORT, total).bitrate(&rate))?;
    run.start_flow(FlowSpec::upload("rev", Role::Reverse, REV_PORT, total).bitrate(&rate))?;
    run.wait_until(third)?;
    run.start_flow(FlowSpec::download("bg", Role::Background, BG_PORT, third))?;
    run.wait_until(total)?;
    Ok(with_metrics(run.finish()?, third))
}

/// The three periods `(name, from, to)` of run `r`: `before` from 2 s (at most half a third) and
/// `after` up to the end. `bg-active` is when the background flow actually carried data (its
/// span: it starts a few RTTs after its spawn; the nominal middle third without one), so that the
/// BE and BG goodputs behind `spare_use` come from one window, as in Vulture Sec. 0.4.3's
/// R = 2.84 / (9.41 − 5.98).
pub fn measured_periods(r: &RunResult, third: f64) -> [(&'static str, f64, f64); 3] {
    let (a, b) = r.spans("bg").first().copied().unwrap_or((third, 2.0 * third));
    [("before", 2.0_f64.min(third / 2.0), a), ("bg-active", a, b), ("after", b, 3.0 * third)]
}

/// Adds the scenario's metrics.
pub fn with_metrics(mut r: RunResult, third: f64) -> RunResult {
    let max = max_goodput_mbit(r.params.rate_mbit);
    let periods = measured_periods(&r, third);
    let mean = |series, flow, (_, a, b): (&str, f64, f64)| r.series(series, flow)?.mean_between(a, b);
    // Per period: (metric, series, flow; "ping" is no flow of the run's).
    let per_period = [
        ("be_goodput", Unit::Mbps, "goodput", "be"),
        ("be_rtt", Unit::Ms, "rtt", "ping"),
        ("be_srtt", Unit::Ms, "ss_rtt", "be"),
        ("rev_goodput", Unit::Mbps, "goodput", "rev"),
    ];
    let mut m = Vec::new();
    for p in periods {
        for (name, unit, series, flow) in per_period {
            if let Some(v) = mean(series, flow, p) {
                let metric = Metric::new(name, unit, v).period(p.0);
                m.push(if flow == "ping" { metric } else { metric.flow(flow) });
            }
        }
    }
    if let Some(bg) = mean("goodput", "bg", periods[1]) {
        m.push(Metric::new("bg_goodput", Unit::Mbps, bg).period("bg-active").flow("bg"));
        if let Some(be) = mean("goodput", "be", periods[1]) {
            m.push(Metric::new("spare_use", Unit::Ratio, bg / (max - be).max(1e-9)).period("bg-active"));
        }
    }
    r.metrics.extend(m);
    r
}

fn table(opts: &ScenarioOptions, runs: &[RunResult]) -> Table {
    let (g, d) = ("Vulture Sec. 0.4.3, Fig. 15", "Vulture Sec. 0.4.3, Fig. 16");
    let rows = [
        ("BE goodput, before", Unit::Mbps, "be_goodput", "before", 5.97, 2, g),
        ("BE goodput, BG active", Unit::Mbps, "be_goodput", "bg-active", 5.98, 2, g),
        ("BE goodput, after", Unit::Mbps, "be_goodput", "after", 5.97, 2, g),
        ("BE RTT (ping), before", Unit::Ms, "be_rtt", "before", 104.0, 0, d),
        ("BE RTT (ping), BG active", Unit::Ms, "be_rtt", "bg-active", 146.0, 0, d),
        ("BE RTT (ping), after", Unit::Ms, "be_rtt", "after", 104.0, 0, d),
        ("BE sender sRTT, BG active", Unit::Ms, "be_srtt", "bg-active", 146.0, 0, d),
        ("BG goodput, BG active", Unit::Mbps, "bg_goodput", "bg-active", 2.84, 2, g),
        ("BG use of spare capacity", Unit::Ratio, "spare_use", "bg-active", 0.83, 2, g),
    ];
    let rows = rows.map(|(label, unit, name, period, v, decimals, src)| {
        RowSpec::new(label, unit, name).period(period).paper(Paper::about(v, decimals, src))
    });
    let mut table = Table::of(opts.alternative_labels(), runs, rows);
    table.add_machine_rows(&runs.iter().collect::<Vec<_>>(), None);
    table
}
