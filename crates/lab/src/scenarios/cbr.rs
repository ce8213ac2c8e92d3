//! `cbr`: a 6 Mbit/s best-effort download (iperf3 TCP `-b 6M`) and 6 Mbit/s of reverse traffic
//! (an upload, loading the ACK path) for the whole run; a background download joins for the
//! middle third (Vulture Sec. 0.4.3, Figs. 15-16; the paper ran 45/90/45 s, we run 30/30/30 s
//! by default, `--scale` shortens).
//!
//! Periods `before`, `bg-active`, `after` (thirds; the first 2 s of the run are skipped). Metrics:
//! * `be_goodput` per period (paper: 5.97 / 5.98 / 5.97 Mbit/s);
//! * `be_rtt` per period: ping RTT on the best-effort path (paper, BE flow RTT: 104 / 146 /
//!   104 ms); `be_srtt`: the best-effort sender's smoothed RTT from `ss` (closer to the paper's
//!   measure);
//! * `bg_goodput` (bg-active) and `spare_use` = bg goodput / (max goodput − BE goodput), the share
//!   of the capacity BE leaves that background uses (paper: 2.84 / (9.41 − 5.98) = 0.83).

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
    let mut m = Vec::new();
    let mut be_active = None;
    let periods = measured_periods(&r, third);
    for (p, a, b) in periods {
        if let Some(v) = r.series("goodput", "be").and_then(|s| s.mean_between(a, b)) {
            m.push(Metric::new("be_goodput", Unit::Mbps, v).period(p).flow("be"));
            if p == "bg-active" {
                be_active = Some(v);
            }
        }
        if let Some(v) = r.series("rtt", "ping").and_then(|s| s.mean_between(a, b)) {
            m.push(Metric::new("be_rtt", Unit::Ms, v).period(p));
        }
        if let Some(v) = r.series("ss_rtt", "be").and_then(|s| s.mean_between(a, b)) {
            m.push(Metric::new("be_srtt", Unit::Ms, v).period(p).flow("be"));
        }
        if let Some(v) = r.series("goodput", "rev").and_then(|s| s.mean_between(a, b)) {
            m.push(Metric::new("rev_goodput", Unit::Mbps, v).period(p).flow("rev"));
        }
    }
    let (_, a, b) = periods[1];
    if let Some(bg) = r.series("goodput", "bg").and_then(|s| s.mean_between(a, b)) {
        m.push(Metric::new("bg_goodput", Unit::Mbps, bg).period("bg-active").flow("bg"));
        if let Some(be) = be_active {
            let spare = (max - be).max(1e-9);
            m.push(Metric::new("spare_use", Unit::Ratio, bg / spare).period("bg-active"));
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
    Table::of(opts.alternative_labels(), runs, rows)
}
