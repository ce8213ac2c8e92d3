//! What `no-timestamps`, `many-flows` and `weights` share: household control judged on one
//! testbed per run in three phases (best effort alone, background alone, together), each
//! measured after its first third (slow start, the controller settling), against the household
//! issue's targets. The metrics: docs/lab/about.md, "What each scenario measures".

use anyhow::{bail, Result};
use serde_json::json;
use slipstream_testbed::scenario::{host_fair_jain, host_ratio, per_host_totals};

use super::{LabContext, ScenarioOptions};
use crate::alternatives::{Alternative, LabRule};
use crate::harness::{link, run_all, FlowSpec, Run, RunSetup, BE_PORT, BG_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Table, Target, Unit};

/// Where the household issue's targets come from (the tables' reference column).
pub const TARGETS: &str = "household issue target";

/// One background download.
#[derive(Debug, Clone)]
pub struct BgFlow {
    /// Flow label ("bg3", "w1").
    pub label: String,
    /// LAN host (1-based).
    pub host: u8,
    /// Server port (must be one of the rules' ports).
    pub port: u16,
}

/// One sub-case: which background flows on which hosts, under which rules.
#[derive(Debug, Clone)]
pub struct Mix {
    /// Sub-case name, the prefix of its table rows ("N = 16, 4 hosts").
    pub case: String,
    pub flows: Vec<BgFlow>,
    /// LAN host of the best-effort download (a host of its own: another household member).
    pub be_host: u8,
    /// LAN hosts with TCP timestamps off.
    pub timestamps_off: Vec<u8>,
    /// Rules splitting the background ports (empty: one rule over all).
    pub rules: Vec<LabRule>,
    /// Length of each phase, s.
    pub phase: f64,
    /// Background flows `(a, b)` whose goodput ratio b / a alone is `weight_ratio` (`weights`).
    pub ratio: Option<(&'static str, &'static str)>,
    /// Table rows of this mix after the common ones.
    pub rows: Vec<RowDef>,
}

/// A table row of a mix: `(label, unit, metric, period, target)`; left out when no run has the
/// metric.
pub type RowDef = (&'static str, Unit, &'static str, &'static str, Option<Target>);

impl Mix {
    /// `n` background downloads on `hosts` LAN hosts, unevenly: host 1 runs one (a lone
    /// downloader), the others the rest round-robin, so a host-fair split differs from a flow-fair
    /// one. Ports from [`BG_PORT`] up; best effort on host `hosts + 1`.
    pub fn spread(case: &str, n: usize, hosts: u8, opts: &ScenarioOptions) -> Mix {
        let hosts = hosts.clamp(1, n.clamp(1, 99) as u8);
        let flows = (0..n)
            .map(|i| BgFlow {
                label: format!("bg{i}"),
                host: if i == 0 || hosts == 1 { 1 } else { 2 + ((i - 1) % usize::from(hosts - 1)) as u8 },
                port: BG_PORT + i as u16,
            })
            .collect();
        Mix {
            case: case.into(),
            flows,
            be_host: hosts + 1,
            timestamps_off: Vec::new(),
            rules: Vec::new(),
            phase: opts.scaled(30.0, 5.0),
            ratio: None,
            rows: Vec::new(),
        }
    }

    /// Run length, s.
    pub fn duration(&self) -> f64 {
        3.0 * self.phase
    }

    /// The measured part of each period `(name, from, to)`.
    pub fn periods(&self) -> [(&'static str, f64, f64); 3] {
        let (p, skip) = (self.phase, (self.phase / 3.0).min(10.0));
        [("be-alone", skip, p), ("bg-alone", p + skip, 2.0 * p), ("together", 2.0 * p + skip, 3.0 * p)]
    }

    /// LAN host of each background flow.
    pub fn hosts(&self) -> Vec<u8> {
        self.flows.iter().map(|f| f.host).collect()
    }

    fn setup(&self, alt: Alternative) -> RunSetup {
        let ports: Vec<u16> = self.flows.iter().map(|f| f.port).collect();
        let p = self.phase;
        let mut s =
            RunSetup::new(alt, self.duration()).param("case", self.case.as_str()).param("phase_s", p).param(
                "phases",
                json!([
                    {"name": "best effort alone", "start_s": 0.0},
                    {"name": "background alone", "start_s": p},
                    {"name": "together", "start_s": 2.0 * p},
                ]),
            );
        s.clients = self.hosts().into_iter().chain([self.be_host]).max().unwrap_or(1);
        s.timestamps_off.clone_from(&self.timestamps_off);
        s.rules.clone_from(&self.rules);
        s.server_ports = ports.iter().copied().chain([BE_PORT]).collect();
        s.background_ports = ports;
        s
    }
}

fn body(mut run: Run, m: &Mix) -> Result<RunResult> {
    let p = m.phase;
    let be = || FlowSpec::download("be", Role::BestEffort, BE_PORT, p).between(m.be_host, 1);
    run.start_flow(be())?;
    run.wait_until(p)?;
    run.wait_flow("be")?;
    for f in &m.flows {
        let spec = FlowSpec::download(&f.label, Role::Background, f.port, 2.0 * p);
        run.start_flow(spec.between(f.host, 1))?;
    }
    run.wait_until(2.0 * p)?;
    run.start_flow(be())?;
    run.wait_until(3.0 * p)?;
    run.finish()
}

/// Mean goodput of flow `label` over `[a, b)`; 0 for a flow without a series (it never connected).
fn goodput(r: &RunResult, label: &str, a: f64, b: f64) -> f64 {
    r.series("goodput", label).and_then(|s| s.mean_between(a, b)).unwrap_or(0.0)
}

/// Adds the metrics of docs/lab/about.md.
fn with_metrics(mut r: RunResult, m: &Mix) -> RunResult {
    let mut out = Vec::new();
    let ping = |a, b| r.series("rtt", "ping").and_then(|s| s.mean_between(a, b));
    let bg_of = |a, b| m.flows.iter().map(|f| goodput(&r, &f.label, a, b)).collect::<Vec<_>>();
    let mut be = Vec::new();
    for (period, a, b) in m.periods() {
        be.push(goodput(&r, "be", a, b));
        out.push(Metric::new("bg_goodput", Unit::Mbps, bg_of(a, b).iter().sum()).period(period));
        if period != "bg-alone" {
            out.push(Metric::new("be_goodput", Unit::Mbps, be[be.len() - 1]).period(period).flow("be"));
        }
        out.extend(ping(a, b).map(|v| Metric::new("be_rtt", Unit::Ms, v).period(period)));
        // What the download link delivered of its rate: a reference that did not fill it was the
        // testbed's shortfall (see `harness::link`).
        let used = link::use_between(&r, "download", r.params.rate_mbit, (a, b));
        out.extend(used.map(|u| Metric::new("link_use", Unit::Ratio, u).period(period)));
    }
    // Background alone: what each flow and host gets of the idle link, and the queue it builds.
    let (period, a, b) = m.periods()[1];
    let bg = bg_of(a, b);
    for (f, g) in m.flows.iter().zip(&bg) {
        out.push(Metric::new("bg_goodput", Unit::Mbps, *g).period(period).flow(&f.label));
    }
    if be[0] > 0.0 {
        out.push(Metric::new("bg_fill", Unit::Ratio, bg.iter().sum::<f64>() / be[0]).period(period));
        out.push(Metric::new("be_kept", Unit::Ratio, be[2] / be[0]).period("together"));
    }
    if let (Some(rtt), Some(base)) = (ping(a, b), r.params.measured_rtt_ms) {
        out.push(Metric::new("bg_delay", Unit::Ms, rtt - base).period(period));
    }
    // Rules of their own (weights, min rates) move the fair share away from host-fair.
    let host_fair = bg.len() > 1 && m.rules.is_empty();
    if let Some(j) = host_fair_jain(&bg, &m.hosts()).filter(|_| host_fair) {
        out.push(Metric::new("jain_index", Unit::Ratio, j).period(period));
    }
    if let Some(x) = host_ratio(&per_host_totals(&bg, &m.hosts())) {
        out.push(Metric::new("host_ratio", Unit::Ratio, x).period(period));
    }
    if let Some((x, y)) = m.ratio {
        let (gx, gy) = (goodput(&r, x, a, b), goodput(&r, y, a, b));
        if gx > 0.0 {
            out.push(Metric::new("weight_ratio", Unit::Ratio, gy / gx).period(period));
        }
    }
    r.metrics.extend(out);
    r
}

/// Rows a table gets for every mix.
const COMMON_ROWS: [RowDef; 7] = [
    ("BE kept beside BG", Unit::Ratio, "be_kept", "together", Some(Target::at_least(0.93))),
    ("BG alone / BE alone", Unit::Ratio, "bg_fill", "bg-alone", Some(Target::at_least(0.97))),
    ("ping added by BG alone", Unit::Ms, "bg_delay", "bg-alone", None),
    ("Jain's index (host-fair), BG alone", Unit::Ratio, "jain_index", "bg-alone", None),
    (
        "host share ratio (max/min), BG alone",
        Unit::Ratio,
        "host_ratio",
        "bg-alone",
        Some(Target::at_most(1.1)),
    ),
    ("download link delivered / its rate, BE alone", Unit::Ratio, "link_use", "be-alone", None),
    ("download link delivered / its rate, together", Unit::Ratio, "link_use", "together", None),
];

/// A row for `case`'s runs: `label` prefixed with the case, left out if no run has the metric.
fn add_row(
    table: &mut Table,
    case_runs: &[&RunResult],
    case: &str,
    (label, unit, name, period, target): RowDef,
) {
    if case_runs.iter().any(|r| r.metric(name, Some(period)).is_some()) {
        let target = target.map(|t| Paper::target(t, TARGETS));
        table.add_rows(
            case_runs,
            [RowSpec::new(format!("{case}: {label}"), unit, name).period(period).paper(target)],
        );
    }
}

/// Runs every alternative on every mix (a fresh testbed each), adds the metrics and writes the
/// report, titled `title` and the link's rate and RTT.
pub fn run_mixes(
    ctx: &LabContext,
    opts: &ScenarioOptions,
    scenario: &str,
    title: &str,
    mixes: &[Mix],
) -> Result<ScenarioReport> {
    let mut report = ScenarioReport::starting(scenario);
    run_all(ctx, opts, &mut report, mixes, Mix::setup, |run, m| Ok(with_metrics(body(run, m)?, m)))?;
    let mut table = Table::new(opts.alternative_labels());
    for m in mixes {
        let refs = report.runs_with("case", m.case.as_str());
        for row in COMMON_ROWS.iter().chain(&m.rows) {
            add_row(&mut table, &refs, &m.case, *row);
        }
        table.add_machine_rows(&refs, Some(&m.case));
        if refs.iter().any(|r| r.metric("flows_failed", None).is_some()) {
            let label = format!("{}: flows that could not connect", m.case);
            table.add_rows(&refs, [RowSpec::new(label, Unit::Count, "flows_failed")]);
        }
    }
    report.title = format!("{title} ({} Mbit/s, {} ms RTT)", opts.rate_label(), opts.rtt_ms);
    report.table = table;
    report.notes = vec![format!(
        "phases of {:.0} s: best effort alone, background alone, together; each measured after its \
         first third (at most 10 s); Jain's index relative to the host-fair share",
        mixes.first().map_or(0.0, |m| m.phase)
    )];
    ctx.write_report(report)
}

/// A comma-separated list of counts from `--set key=...` (default `default`), each 1-100.
pub fn counts(opts: &ScenarioOptions, key: &str, default: &str) -> Result<Vec<usize>> {
    let list: Vec<usize> = opts.list(key, default)?;
    if let Some(n) = list.iter().find(|n| !(1..=100).contains(*n)) {
        bail!("--set {key}: {n} is not a count from 1 to 100");
    }
    Ok(list)
}

#[cfg(test)]
#[path = "phases_tests.rs"]
mod tests;
