//! `onoff`: an on/off best-effort download (on and off T s each) beside a background download and
//! a 6 Mbit/s reverse upload (Vulture Sec. 0.4.4, Table 1, Figs. 18-19): background utilization
//! while BE is off, the shares while it is on. Definitions and how this differs from the paper:
//! docs/lab/about.md, "What each scenario measures".

use anyhow::Result;

use super::{LabContext, ScenarioOptions};
use crate::analysis::{self, max_goodput_mbit};
use crate::harness::{run_all, FlowSpec, Run, RunSetup, BE_PORT, BG_PORT, REV_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Table, Unit};

/// One case.
#[derive(Debug, Clone, Copy)]
pub struct OnOffCase {
    /// On (= off) duration T, s.
    pub period: f64,
    /// Run length, s.
    pub duration: f64,
}

/// Table 1 of the paper: T → (LBE util off, BE share on, LBE share on).
pub const PAPER_TABLE1: [(f64, f64, f64, f64); 5] = [
    (1.0, 0.15, 0.89, 0.11),
    (3.0, 0.20, 0.88, 0.12),
    (5.0, 0.25, 0.86, 0.14),
    (10.0, 0.33, 0.86, 0.14),
    (30.0, 0.56, 0.77, 0.23),
];

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let periods: Vec<f64> = opts.list("onoff_periods", "1,3,5,10,30")?;
    let list = periods.iter().map(f64::to_string).collect::<Vec<_>>().join(",");
    let cases: Vec<OnOffCase> = periods
        .into_iter()
        .map(|t| OnOffCase { period: t, duration: opts.scaled(60f64.max(4.0 * t), 4.0 * t) })
        .collect();
    let setup = |c: &OnOffCase, alt| RunSetup {
        server_ports: vec![BG_PORT, BE_PORT, REV_PORT],
        ..RunSetup::new(alt, c.duration).param("on_off_T_s", c.period)
    };
    let mut report = ScenarioReport::starting("onoff");
    run_all(ctx, opts, &mut report, &cases, setup, body)?;
    let mut table = Table::new(opts.alternative_labels());
    for c in &cases {
        let paper = PAPER_TABLE1.iter().find(|p| p.0 == c.period);
        let rows = [
            ("BE off: LBE BW util.", "lbe_util_off", "off", paper.map(|p| p.1)),
            ("BE on: BE BW share", "be_share_on", "on", paper.map(|p| p.2)),
            ("BE on: LBE BW share", "lbe_share_on", "on", paper.map(|p| p.3)),
        ];
        table.add_rows(
            &report.runs_with("on_off_T_s", c.period),
            rows.map(|(label, key, period, paper)| {
                let paper = paper.map(|v| Paper::about(v, 2, "Vulture Table 1"));
                RowSpec::new(format!("T = {} s: {label}", c.period), Unit::Ratio, key)
                    .period(period)
                    .paper(paper)
            }),
        );
    }
    report.title =
        format!("onoff: on/off BE download (T = {list} s) beside a background download, 6 Mbit/s reverse");
    table.add_machine_rows(&report.runs.iter().collect::<Vec<_>>(), None);
    report.table = table;
    report.notes = vec![
        "each BE on period is a new iperf3 connection (slow start each time); the paper's sender kept one"
            .into(),
        format!("B = {:.2} Mbit/s (max TCP goodput; paper: 9.41)", max_goodput_mbit(opts.rate_mbit)),
    ];
    ctx.write_report(report)
}

fn body(mut run: Run, c: &OnOffCase) -> Result<RunResult> {
    run.start_flow(FlowSpec::download("bg", Role::Background, BG_PORT, c.duration))?;
    run.start_flow(FlowSpec::upload("rev", Role::Reverse, REV_PORT, c.duration).bitrate("6M"))?;
    for (on, off) in on_windows(c.period, c.duration) {
        run.wait_until(on)?;
        run.start_flow(FlowSpec::download("be", Role::BestEffort, BE_PORT, c.period))?;
        run.wait_until(off)?;
        // The iperf3 server serves one test at a time: let this one end before the next.
        run.wait_flow("be")?;
    }
    run.wait_until(c.duration)?;
    Ok(with_metrics(run.finish()?, c))
}

/// `[from, to)` time windows.
pub type Windows = Vec<(f64, f64)>;

/// The nominal on windows of a case: `[2kT, 2kT + T)` within the run.
pub fn on_windows(period: f64, duration: f64) -> Windows {
    let starts = (0..).map(|k| 2.0 * f64::from(k) * period);
    starts.take_while(|s| s + period <= duration + 1e-6).map(|s| (s, s + period)).collect()
}

/// The off windows between on windows: from an on window's end to the next one's start (after
/// the last: until one period after it would have started again, within the run); a gap shorter
/// than half a period (the run ended) is none. On the measured spans of the BE connections (each
/// carries data a few RTTs after its spawn), on periods run a little longer and off periods a
/// little shorter than T, as in the paper.
pub fn off_windows(on: &[(f64, f64)], period: f64, duration: f64) -> Windows {
    let mut off = Windows::new();
    for (i, &(start, end)) in on.iter().enumerate() {
        let next = on.get(i + 1).map_or((start + 2.0 * period).min(duration), |n| n.0);
        if next - end >= period / 2.0 {
            off.push((end, next));
        }
    }
    off
}

/// Table 1's quantities from the goodput series over the given windows (per-period means,
/// averaged over periods; a missing BE sample in a window counts as 0).
pub fn table1(
    be: &[(f64, f64)],
    bg: &[(f64, f64)],
    on: &[(f64, f64)],
    off: &[(f64, f64)],
    b: f64,
) -> Option<(f64, f64, f64)> {
    let g_bg_off = analysis::mean(off.iter().filter_map(|(a, z)| analysis::mean_between(bg, *a, *z)))?;
    let g_bg_on = analysis::mean(on.iter().filter_map(|(a, z)| analysis::mean_between(bg, *a, *z)))?;
    let g_be_on = analysis::mean(on.iter().map(|(a, z)| analysis::mean_between(be, *a, *z).unwrap_or(0.0)))?;
    let total = g_be_on + g_bg_on;
    if total <= 0.0 {
        return None;
    }
    Some((g_bg_off / b, g_be_on / total, g_bg_on / total))
}

/// Adds the Table 1 metrics.
pub fn with_metrics(mut r: RunResult, &OnOffCase { period, duration }: &OnOffCase) -> RunResult {
    let b = max_goodput_mbit(r.params.rate_mbit);
    let be = r.series("goodput", "be").map(|s| s.points.clone()).unwrap_or_default();
    let bg = r.series("goodput", "bg").map(|s| s.points.clone()).unwrap_or_default();
    // The BE connections' measured spans; the nominal windows if none carried data.
    let spans = r.spans("be");
    let on = if spans.is_empty() { on_windows(period, duration) } else { spans };
    let off = off_windows(&on, period, duration);
    if let Some((u, sb, sl)) = table1(&be, &bg, &on, &off, b) {
        r.metrics.push(Metric::new("lbe_util_off", Unit::Ratio, u).period("off"));
        r.metrics.push(Metric::new("be_share_on", Unit::Ratio, sb).period("on"));
        r.metrics.push(Metric::new("lbe_share_on", Unit::Ratio, sl).period("on"));
    } else {
        r.notes.push("not enough samples for Table 1's quantities".into());
    }
    r
}

#[cfg(test)]
#[path = "onoff_tests.rs"]
mod tests;
