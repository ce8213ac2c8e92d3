//! `both`: background in both directions at once (BitTorrent, a backup beside a game download),
//! each link judged on its own queue. One LAN host runs a background download and a background
//! upload together; another host's best effort comes first alone (a download, then an upload:
//! the references), then beside the two background flows (a download, then an upload). Cases
//! `--set timestamps=on,off` (default both): the background host with or without TCP
//! timestamps (without them, every delay the router measures for it is a round trip across both
//! links' queues). Targets: the household issue's "both directions" (best effort keeps ≥ 97%
//! in either direction; the background alone fills ≥ 90% of each direction). A direction's fill
//! is what its link delivered: a background download's ACKs share the uplink with the upload
//! (15% of a 2 Mbit/s uplink beside a 20 Mbit/s download), so the upload's goodput alone cannot
//! reach 0.9 of best effort's on an asymmetric link however well it is controlled.

use anyhow::{bail, Result};
use serde_json::json;

use super::phases::TARGETS;
use super::{LabContext, ScenarioOptions};
use crate::alternatives::Alternative;
use crate::harness::{link, run_all, FlowSpec, Run, RunSetup, BE_PORT, BG_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Table, Target, Unit};

/// Best effort keeps this share of what it gets alone, in either direction.
pub const BE_KEPT: f64 = 0.97;
/// The background alone fills this share of each direction: what the link delivered, against
/// what it delivered to best effort alone.
pub const FILL: f64 = 0.9;

const BG_HOST: u8 = 1;
const BE_HOST: u8 = 2;
/// The background upload's server port (the download's is [`BG_PORT`]).
const BG_UP_PORT: u16 = BG_PORT + 1;

/// The phases, in order: `(name, what runs)`.
const PHASES: [(&str, &str); 5] = [
    ("be-down-alone", "best effort download alone"),
    ("be-up-alone", "best effort upload alone"),
    ("bg-alone", "background download and upload alone"),
    ("be-down-beside", "best effort download beside both"),
    ("be-up-beside", "best effort upload beside both"),
];

/// One case: the background host's timestamps.
#[derive(Debug, Clone)]
struct Case {
    timestamps: bool,
    /// Length of each phase, s.
    phase: f64,
}

impl Case {
    fn name(&self) -> &'static str {
        if self.timestamps {
            "timestamps"
        } else {
            "no timestamps"
        }
    }

    /// The measured part of phase `i`: after its first third (at most 10 s).
    fn period(&self, i: usize) -> (f64, f64) {
        let start = i as f64 * self.phase;
        (start + (self.phase / 3.0).min(10.0), start + self.phase)
    }

    fn setup(&self, alt: Alternative) -> RunSetup {
        let p = self.phase;
        let phases: Vec<_> = PHASES
            .iter()
            .enumerate()
            .map(|(i, (_, what))| json!({"name": what, "start_s": i as f64 * p}))
            .collect();
        let mut s = RunSetup::new(alt, PHASES.len() as f64 * p)
            .param("case", self.name())
            .param("phase_s", p)
            .param("phases", json!(phases));
        s.clients = BE_HOST;
        if !self.timestamps {
            s.timestamps_off = vec![BG_HOST];
        }
        s.background_ports = vec![BG_PORT, BG_UP_PORT];
        s.server_ports = vec![BG_PORT, BG_UP_PORT, BE_PORT];
        s
    }
}

fn body(mut run: Run, c: &Case) -> Result<RunResult> {
    let p = c.phase;
    let be = |label, download: bool| {
        let spec = if download { FlowSpec::download } else { FlowSpec::upload };
        spec(label, Role::BestEffort, BE_PORT, p).between(BE_HOST, 1)
    };
    run.start_flow(be("be_down", true))?;
    run.wait_until(p)?;
    run.wait_flow("be_down")?;
    run.start_flow(be("be_up", false))?;
    run.wait_until(2.0 * p)?;
    run.wait_flow("be_up")?;
    run.start_flow(FlowSpec::download("bg_down", Role::Background, BG_PORT, 3.0 * p).between(BG_HOST, 1))?;
    run.start_flow(FlowSpec::upload("bg_up", Role::Background, BG_UP_PORT, 3.0 * p).between(BG_HOST, 1))?;
    run.wait_until(3.0 * p)?;
    run.start_flow(be("be_down", true))?;
    run.wait_until(4.0 * p)?;
    run.wait_flow("be_down")?;
    run.start_flow(be("be_up", false))?;
    run.wait_until(5.0 * p)?;
    run.finish()
}

/// Mean goodput of flow `label` over `(a, b)`; 0 for a flow without a series.
fn goodput(r: &RunResult, label: &str, (a, b): (f64, f64)) -> f64 {
    r.series("goodput", label).and_then(|s| s.mean_between(a, b)).unwrap_or(0.0)
}

/// Adds the metrics: goodputs per phase, best effort kept, the background's fill, ping added.
fn with_metrics(mut r: RunResult, c: &Case) -> RunResult {
    let mut m = Vec::new();
    let phase = |i: usize| PHASES[i].0;
    for (i, (name, _)) in PHASES.iter().enumerate() {
        let (a, b) = c.period(i);
        for label in ["be_down", "be_up", "bg_down", "bg_up"] {
            if let Some(g) = r.series("goodput", label).and_then(|s| s.mean_between(a, b)) {
                m.push(Metric::new(&format!("{label}_goodput"), Unit::Mbps, g).period(name).flow(label));
            }
        }
        if let Some(rtt) = r.series("rtt", "ping").and_then(|s| s.mean_between(a, b)) {
            m.push(Metric::new("ping_rtt", Unit::Ms, rtt).period(name));
        }
    }
    let (down_alone, up_alone) = (goodput(&r, "be_down", c.period(0)), goodput(&r, "be_up", c.period(1)));
    if down_alone > 0.0 {
        m.push(
            Metric::new("be_kept", Unit::Ratio, goodput(&r, "be_down", c.period(3)) / down_alone)
                .period(phase(3)),
        );
        let fill = goodput(&r, "bg_down", c.period(2)) / down_alone;
        m.push(Metric::new("bg_fill", Unit::Ratio, fill).period("download"));
    }
    if up_alone > 0.0 {
        m.push(
            Metric::new("be_kept", Unit::Ratio, goodput(&r, "be_up", c.period(4)) / up_alone)
                .period(phase(4)),
        );
        let fill = goodput(&r, "bg_up", c.period(2)) / up_alone;
        m.push(Metric::new("bg_fill", Unit::Ratio, fill).period("upload"));
    }
    // What each bottleneck delivered of its rate in best effort's phases (a reference phase that
    // did not fill its link was the testbed's shortfall, see `harness::link`) and in the
    // background's: the background's fill is the second against the first.
    let (down_rate, up_rate) = (r.params.rate_mbit, r.params.upload_rate());
    for (name, rate, [alone, beside]) in [("download", down_rate, [0, 3]), ("upload", up_rate, [1, 4])] {
        let uses = [alone, beside, 2].map(|i| (i, link::use_between(&r, name, rate, c.period(i))));
        for (i, used) in uses {
            if let Some(used) = used {
                m.push(Metric::new("link_use", Unit::Ratio, used).period(&format!("{name} {}", phase(i))));
            }
        }
        if let ((_, Some(be)), (_, Some(bg))) = (uses[0], uses[2]) {
            if be > 0.0 {
                m.push(Metric::new("bg_link_fill", Unit::Ratio, bg / be).period(name));
            }
        }
    }
    let ping = |i: usize| r.series("rtt", "ping").and_then(|s| s.mean_between(c.period(i).0, c.period(i).1));
    if let (Some(bg), Some(base)) = (ping(2), r.params.measured_rtt_ms) {
        m.push(Metric::new("bg_delay", Unit::Ms, bg - base).period(phase(2)));
    }
    r.metrics.extend(m);
    r
}

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let mut cases = Vec::new();
    for v in opts.list::<String>("timestamps", "on,off")? {
        let timestamps = match v.as_str() {
            "on" => true,
            "off" => false,
            other => bail!("--set timestamps: {other:?} is neither on nor off"),
        };
        cases.push(Case { timestamps, phase: opts.scaled(30.0, 5.0) });
    }
    let mut report = ScenarioReport::starting("both");
    run_all(ctx, opts, &mut report, &cases, Case::setup, |run, c| Ok(with_metrics(body(run, c)?, c)))?;
    let mut table = Table::new(opts.alternative_labels());
    let target = |t| Some(Paper::target(t, TARGETS));
    for c in &cases {
        let refs = report.runs_with("case", c.name());
        let n = c.name();
        let rows = [
            RowSpec::new(format!("{n}: BE download kept beside BG both ways"), Unit::Ratio, "be_kept")
                .period(PHASES[3].0)
                .paper(target(Target::at_least(BE_KEPT))),
            RowSpec::new(format!("{n}: BE upload kept beside BG both ways"), Unit::Ratio, "be_kept")
                .period(PHASES[4].0)
                .paper(target(Target::at_least(BE_KEPT))),
            RowSpec::new(
                format!("{n}: BG alone, download link delivered / BE alone's"),
                Unit::Ratio,
                "bg_link_fill",
            )
            .period("download")
            .paper(target(Target::at_least(FILL))),
            RowSpec::new(
                format!("{n}: BG alone, upload link delivered / BE alone's"),
                Unit::Ratio,
                "bg_link_fill",
            )
            .period("upload")
            .paper(target(Target::at_least(FILL))),
            RowSpec::new(format!("{n}: BG alone, download goodput / BE alone"), Unit::Ratio, "bg_fill")
                .period("download"),
            RowSpec::new(format!("{n}: BG alone, upload goodput / BE alone"), Unit::Ratio, "bg_fill")
                .period("upload"),
            RowSpec::new(format!("{n}: ping added by BG alone (both queues)"), Unit::Ms, "bg_delay")
                .period(PHASES[2].0),
            RowSpec::new(format!("{n}: BG download beside a BE download"), Unit::Mbps, "bg_down_goodput")
                .period(PHASES[3].0),
            RowSpec::new(format!("{n}: BG upload beside a BE upload"), Unit::Mbps, "bg_up_goodput")
                .period(PHASES[4].0),
        ];
        table.add_rows(&refs, rows);
        let link_rows = [
            ("download", 0, "download link delivered / its rate, BE download alone"),
            ("download", 3, "download link delivered / its rate, BE download beside"),
            ("download", 2, "download link delivered / its rate, BG alone"),
            ("upload", 1, "upload link delivered / its rate, BE upload alone"),
            ("upload", 4, "upload link delivered / its rate, BE upload beside"),
            ("upload", 2, "upload link delivered / its rate, BG alone"),
        ]
        .map(|(link, i, what)| {
            RowSpec::new(format!("{n}: {what}"), Unit::Ratio, "link_use")
                .period(&format!("{link} {}", PHASES[i].0))
        });
        table.add_rows(&refs, link_rows);
        table.add_machine_rows(&refs, Some(n));
        if refs.iter().any(|r| r.metric("flows_failed", None).is_some()) {
            table.add_rows(
                &refs,
                [RowSpec::new(format!("{n}: iperf3 flows that failed"), Unit::Count, "flows_failed")],
            );
        }
    }
    report.title = format!(
        "both: background downloading and uploading at once, beside best effort either way ({} Mbit/s, {} ms RTT)",
        opts.rate_label(), opts.rtt_ms
    );
    report.table = table;
    report.notes = vec![format!(
        "phases of {:.0} s: {}; each measured after its first third (at most 10 s); the background host \
         runs both background flows",
        cases.first().map_or(0.0, |c| c.phase),
        PHASES.iter().map(|(_, what)| *what).collect::<Vec<_>>().join(", ")
    )];
    ctx.write_report(report)
}

#[cfg(test)]
#[path = "both_tests.rs"]
mod tests;
