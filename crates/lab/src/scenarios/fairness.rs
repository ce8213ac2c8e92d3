//! `fairness`: N background downloads with staggered starts share the idle link (Vulture Sec.
//! 0.4.6, Table 2, Fig. 20): Jain's index of their goodputs. Shortened starts and window, and the
//! spread over LAN hosts: docs/lab/about.md, "What each scenario measures".

use anyhow::Result;

use super::{LabContext, ScenarioOptions};
use crate::harness::{run_all, FlowSpec, Run, RunSetup, BG_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Table, Unit};

/// Paper Table 2: N → Jain's index.
pub const PAPER_TABLE2: [(usize, f64); 5] = [(2, 0.96), (4, 0.99), (8, 0.98), (16, 0.99), (64, 0.99)];

/// One case.
#[derive(Debug, Clone, Copy)]
pub struct FairCase {
    pub flows: usize,
    /// Gap between starts, s.
    pub stagger: f64,
    /// Measurement window after the last start, s.
    pub measure: f64,
    /// LAN hosts the flows are spread over.
    pub hosts: u8,
}

impl FairCase {
    /// LAN host (1-based) of flow `i` (0-based).
    pub fn host_of(&self, i: usize) -> u8 {
        1 + (i % usize::from(self.hosts.max(1))) as u8
    }

    /// Start time of the last flow.
    pub fn last_start(&self) -> f64 {
        self.stagger * (self.flows.saturating_sub(1)) as f64
    }

    /// Run length.
    pub fn duration(&self) -> f64 {
        self.last_start() + self.measure
    }
}

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let flows = super::phases::counts(opts, "fairness_flows", "2,4,8,16,64")?;
    let list = flows.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let hosts: u8 = opts.extra_or("fairness_hosts", 4u8)?.clamp(1, 16);
    let cases: Vec<FairCase> = flows
        .into_iter()
        .map(|n| FairCase {
            flows: n,
            stagger: opts.scaled(20f64.min(60.0 / (n.max(2) - 1) as f64), 0.2),
            measure: opts.scaled(60.0, 5.0),
            hosts: hosts.min(n as u8),
        })
        .collect();
    let setup = |c: &FairCase, alt| {
        let ports: Vec<u16> = (0..c.flows as u16).map(|i| BG_PORT + i).collect();
        let s = RunSetup::new(alt, c.duration()).param("flows", c.flows).param("stagger_s", c.stagger);
        let s = s.param("hosts", c.hosts);
        RunSetup { clients: c.hosts, background_ports: ports.clone(), server_ports: ports, ping: false, ..s }
    };
    let mut report = ScenarioReport::starting("fairness");
    run_all(ctx, opts, &mut report, &cases, setup, body)?;
    let mut table = Table::new(opts.alternative_labels());
    for c in &cases {
        let n = c.flows;
        let refs = report.runs_with("flows", n);
        let paper = PAPER_TABLE2.iter().find(|p| p.0 == n).map(|p| Paper::about(p.1, 2, "Vulture Table 2"));
        let mut rows = vec![
            RowSpec::new(format!("N = {n}: Jain's index"), Unit::Ratio, "jain_index").paper(paper),
            RowSpec::new(format!("N = {n}: total BG goodput"), Unit::Mbps, "bg_total_goodput"),
        ];
        if refs.iter().any(|r| r.metric("flows_failed", None).is_some_and(|n| n > 0.0)) {
            let label = format!("N = {n}: flows that could not connect (count as 0 goodput)");
            rows.push(RowSpec::new(label, Unit::Count, "flows_failed"));
        }
        table.add_rows(&refs, rows);
    }
    report.title = format!("fairness: N = {list} background downloads, staggered starts");
    report.table = table;
    report.notes = vec![
        "stagger min(20, 60/(N−1)) s and a 60 s window after the last start (paper: 20 s, 3 min)".into(),
        format!("flows spread round-robin over min(N, {hosts}) LAN hosts, one server"),
    ];
    ctx.write_report(report)
}

fn body(mut run: Run, c: &FairCase) -> Result<RunResult> {
    for i in 0..c.flows {
        let at = c.stagger * i as f64;
        run.wait_until(at)?;
        let label = format!("bg{i}");
        run.start_flow(
            FlowSpec::download(&label, Role::Background, BG_PORT + i as u16, c.duration() - at)
                .between(c.host_of(i), 1),
        )?;
    }
    run.wait_until(c.duration())?;
    Ok(with_metrics(run.finish()?, c))
}

/// Adds Jain's index over the measurement window (from 1 s after the last start).
pub fn with_metrics(mut r: RunResult, c: &FairCase) -> RunResult {
    let (from, to) = (c.last_start() + 1.0, c.duration());
    let goodputs: Vec<f64> = (0..c.flows)
        .map(|i| r.series("goodput", &format!("bg{i}")).and_then(|s| s.mean_between(from, to)).unwrap_or(0.0))
        .collect();
    for (i, g) in goodputs.iter().enumerate() {
        r.metrics.push(Metric::new("bg_goodput", Unit::Mbps, *g).flow(&format!("bg{i}")).period("measure"));
    }
    if let Some(j) = slipstream_testbed::scenario::jain_index(&goodputs) {
        r.metrics.push(Metric::new("jain_index", Unit::Ratio, j));
    }
    r.metrics.push(Metric::new("bg_total_goodput", Unit::Mbps, goodputs.iter().sum()));
    r
}
