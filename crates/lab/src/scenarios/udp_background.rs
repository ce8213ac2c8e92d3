//! `quic`, `utp` and `udp-mix`: background bulk downloads over UDP (issue 24) beside a
//! best-effort TCP download. `quic`: a real QUIC transfer (`slipstream-quic`, quinn, CUBIC unless
//! `--cc`) from UDP port 443; `utp`: a BitTorrent leecher fetching from a seeder over uTP
//! (Transmission 3.00, TCP between the peers refused; the seeder's port 51413); `udp-mix`: LAN
//! host 1 runs the QUIC download and a TCP background download (6881), LAN host 2 the torrent and
//! another TCP background download (6882), to see whether household control shares between the
//! hosts whatever their flows' protocol. One server; the best-effort download (5201) runs on a
//! LAN host of its own. Phases: the background alone (the
//! torrent's first 20 s are a warm-up: the seeder unchokes a new peer at its next rechoke, up to
//! 10 s, then uTP ramps up), the background beside best effort, best effort alone; ping
//! throughout. Each phase is measured after its first third (at most 10 s).
//!
//! For the daemon alternatives, the rule over the background port says `protocol = "udp"`
//! (QUIC) or `"both"` (the torrent): written for these scenarios only, so a daemon without the
//! key still runs every other one.

use anyhow::Result;
use serde_json::json;
use slipstream_testbed::scenario::{host_ratio, per_host_totals};
use slipstream_testbed::torrent::SEED_PORT;

use super::{LabContext, ScenarioOptions};
use crate::alternatives::Alternative;
use crate::harness::{run_all, FlowKind, FlowSpec, Run, RunSetup, TorrentSetup, BE_PORT, BG_PORT};
use crate::result::{Metric, Role, RowSpec, RunResult, ScenarioReport, Table, Unit};

/// The QUIC server's UDP port (HTTPS's).
pub const QUIC_PORT: u16 = 443;
/// Unmeasured start of the torrent: the seeder's rechoke (10 s) and uTP's ramp (about 6 s),
/// measured on the testbed (crates/testbed/tests/torrent.rs).
pub const TORRENT_WARMUP_S: f64 = 20.0;

const BG_HOST: u8 = 1;

/// The phases, in order: `(name, what runs)`.
pub const PHASES: [(&str, &str); 3] = [
    ("bg-alone", "background alone"),
    ("together", "background beside a best-effort download"),
    ("be-alone", "best effort alone"),
];

/// The UDP background transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Background {
    Quic,
    Utp,
    /// Both, each beside a TCP background download, on two LAN hosts.
    Mix,
}

/// One background flow: label, LAN host, kind, server port.
pub type BgFlow = (&'static str, u8, FlowKind, u16);

/// One run's timeline.
#[derive(Debug, Clone)]
pub struct Plan {
    pub bg: Background,
    /// Unmeasured lead of the background before its first phase, s.
    pub warmup: f64,
    /// Length of each phase, s.
    pub phase: f64,
}

impl Plan {
    pub fn new(bg: Background, opts: &ScenarioOptions) -> Plan {
        let warmup = if bg == Background::Quic { 0.0 } else { TORRENT_WARMUP_S };
        Plan { bg, warmup, phase: opts.scaled(30.0, 10.0) }
    }

    /// Start of phase `i`, s.
    pub fn start(&self, i: usize) -> f64 {
        self.warmup + i as f64 * self.phase
    }

    /// The measured part of phase `i`: after its first third (at most 10 s).
    pub fn period(&self, i: usize) -> (f64, f64) {
        let start = self.start(i);
        (start + (self.phase / 3.0).min(10.0), start + self.phase)
    }

    /// Run length, s.
    pub fn duration(&self) -> f64 {
        self.start(PHASES.len())
    }

    /// The background flows.
    pub fn bg_flows(&self) -> Vec<BgFlow> {
        match self.bg {
            Background::Quic => vec![("bg", BG_HOST, FlowKind::Quic, QUIC_PORT)],
            Background::Utp => vec![("bg", BG_HOST, FlowKind::Torrent, SEED_PORT)],
            Background::Mix => vec![
                ("quic", 1, FlowKind::Quic, QUIC_PORT),
                ("tcp1", 1, FlowKind::Iperf, BG_PORT),
                ("utp", 2, FlowKind::Torrent, SEED_PORT),
                ("tcp2", 2, FlowKind::Iperf, BG_PORT + 1),
            ],
        }
    }

    /// The background's server ports (the rule's remote ports).
    pub fn bg_ports(&self) -> Vec<u16> {
        self.bg_flows().iter().map(|f| f.3).collect()
    }

    /// The best-effort download's LAN host: one of its own.
    pub fn be_host(&self) -> u8 {
        self.bg_flows().iter().map(|f| f.1).max().unwrap_or(1) + 1
    }

    /// The torrent's file: more than the link carries while the background runs, plus 10%.
    pub fn file_bytes(&self, opts: &ScenarioOptions) -> u64 {
        let secs = self.start(2);
        (opts.rate_mbit * 1e6 / 8.0 * secs * 1.1) as u64 + (8 << 20)
    }

    fn setup(&self, alt: Alternative, opts: &ScenarioOptions) -> RunSetup {
        let phases: Vec<_> = PHASES
            .iter()
            .enumerate()
            .map(|(i, (_, what))| json!({"name": what, "start_s": self.start(i)}))
            .collect();
        let mut s = RunSetup::new(alt, self.duration())
            .param("phase_s", self.phase)
            .param("warmup_s", self.warmup)
            .param("phases", json!(phases));
        s.clients = self.be_host();
        s.background_ports = self.bg_ports();
        let flows = self.bg_flows();
        let tcp = flows.iter().filter(|f| f.2 == FlowKind::Iperf).map(|f| f.3);
        s.server_ports = tcp.chain([BE_PORT]).collect();
        s.quic_ports = flows.iter().filter(|f| f.2 == FlowKind::Quic).map(|f| f.3).collect();
        let leechers: Vec<u8> = flows.iter().filter(|f| f.2 == FlowKind::Torrent).map(|f| f.1).collect();
        if !leechers.is_empty() {
            s.torrent = Some(TorrentSetup { server: 1, leechers, file_bytes: self.file_bytes(opts) });
        }
        // QUIC alone is UDP only; a BitTorrent port rule covers both (as a household writes it).
        s.protocol = Some(if self.bg == Background::Quic { "udp" } else { "both" });
        s
    }
}

fn body(mut run: Run, p: &Plan) -> Result<RunResult> {
    let bg_secs = p.start(2);
    for (label, host, kind, port) in p.bg_flows() {
        let spec = match kind {
            FlowKind::Quic => FlowSpec::quic_download(label, Role::Background, port, bg_secs),
            FlowKind::Torrent => FlowSpec::torrent(label, Role::Background, bg_secs),
            FlowKind::Iperf => FlowSpec::download(label, Role::Background, port, bg_secs),
        };
        run.start_flow(spec.between(host, 1))?;
    }
    run.wait_until(p.start(1))?;
    let be = FlowSpec::download("be", Role::BestEffort, BE_PORT, 2.0 * p.phase);
    run.start_flow(be.between(p.be_host(), 1))?;
    run.wait_until(p.start(2))?;
    for (label, ..) in p.bg_flows() {
        run.wait_flow(label)?;
    }
    run.wait_until(p.duration())?;
    run.finish()
}

/// Mean goodput of flow `label` over `(a, b)`; 0 for a flow without a series.
fn goodput(r: &RunResult, label: &str, (a, b): (f64, f64)) -> f64 {
    r.series("goodput", label).and_then(|s| s.mean_between(a, b)).unwrap_or(0.0)
}

/// Adds the metrics: goodputs and ping per phase, best effort kept, the background's fill of
/// the link, the ping it adds.
pub fn with_metrics(mut r: RunResult, p: &Plan) -> RunResult {
    let mut m = Vec::new();
    let flows = p.bg_flows();
    let ping = |i: usize| r.series("rtt", "ping").and_then(|s| s.mean_between(p.period(i).0, p.period(i).1));
    let bg_total = |i: usize| flows.iter().map(|f| goodput(&r, f.0, p.period(i))).sum::<f64>();
    for (i, (name, _)) in PHASES.iter().enumerate() {
        for label in flows.iter().map(|f| f.0).chain(["be"]) {
            if let Some(g) =
                r.series("goodput", label).and_then(|s| s.mean_between(p.period(i).0, p.period(i).1))
            {
                m.push(Metric::new(&format!("{label}_goodput"), Unit::Mbps, g).period(name).flow(label));
            }
        }
        if flows.len() > 1 && i < 2 {
            m.push(Metric::new("bg_goodput", Unit::Mbps, bg_total(i)).period(name));
        }
        m.extend(ping(i).map(|v| Metric::new("ping_rtt", Unit::Ms, v).period(name)));
    }
    let be_alone = goodput(&r, "be", p.period(2));
    let bg_alone = bg_total(0);
    if be_alone > 0.0 {
        m.push(
            Metric::new("be_kept", Unit::Ratio, goodput(&r, "be", p.period(1)) / be_alone).period("together"),
        );
        m.push(Metric::new("bg_fill", Unit::Ratio, bg_alone / be_alone).period("bg-alone"));
    }
    m.push(Metric::new("bg_link_share", Unit::Ratio, bg_alone / r.params.rate_mbit).period("bg-alone"));
    if let Some(base) = r.params.measured_rtt_ms {
        // Best effort alone shows what its own TCP download adds (beside it, that is in too).
        for (i, name) in [(0, "bg-alone"), (1, "together"), (2, "be-alone")] {
            m.extend(ping(i).map(|v| Metric::new("ping_added", Unit::Ms, v - base).period(name)));
        }
    }
    // Hosts' shares of the background (max / min host total), alone and beside best effort.
    let hosts: Vec<u8> = flows.iter().map(|f| f.1).collect();
    if hosts.iter().any(|h| *h != hosts[0]) {
        for (i, name) in [(0, "bg-alone"), (1, "together")] {
            let per_flow: Vec<f64> = flows.iter().map(|f| goodput(&r, f.0, p.period(i))).collect();
            if let Some(x) = host_ratio(&per_host_totals(&per_flow, &hosts)) {
                m.push(Metric::new("host_ratio", Unit::Ratio, x).period(name));
            }
        }
    }
    r.metrics.extend(m);
    r
}

fn run_scenario(ctx: &LabContext, opts: &ScenarioOptions, bg: Background) -> Result<ScenarioReport> {
    let plan = Plan::new(bg, opts);
    let name = match bg {
        Background::Quic => "quic",
        Background::Utp => "utp",
        Background::Mix => "udp-mix",
    };
    let mut report = ScenarioReport::starting(name);
    let cases = [plan.clone()];
    run_all(
        ctx,
        opts,
        &mut report,
        &cases,
        |p, alt| p.setup(alt, opts),
        |run, p| Ok(with_metrics(body(run, p)?, p)),
    )?;
    let refs: Vec<&RunResult> = report.runs.iter().collect();
    let mut table = Table::new(opts.alternative_labels());
    let mut rows = vec![
        RowSpec::new("BE kept beside BG (goodput / alone)", Unit::Ratio, "be_kept").period("together"),
        RowSpec::new("BG alone / BE alone (TCP ceiling)", Unit::Ratio, "bg_fill").period("bg-alone"),
        RowSpec::new("BG alone / link rate", Unit::Ratio, "bg_link_share").period("bg-alone"),
        RowSpec::new("BG beside BE", Unit::Mbps, "bg_goodput").period("together"),
        RowSpec::new("ping added by BG alone", Unit::Ms, "ping_added").period("bg-alone"),
        RowSpec::new("ping added, BG beside BE", Unit::Ms, "ping_added").period("together"),
        RowSpec::new("ping added by BE alone", Unit::Ms, "ping_added").period("be-alone"),
    ];
    if bg == Background::Mix {
        rows.push(
            RowSpec::new("host share ratio (max/min), BG alone", Unit::Ratio, "host_ratio")
                .period("bg-alone"),
        );
        rows.push(
            RowSpec::new("host share ratio (max/min), BG beside BE", Unit::Ratio, "host_ratio")
                .period("together"),
        );
    }
    let kinds: Vec<FlowKind> = plan.bg_flows().iter().map(|f| f.2).collect();
    if kinds.contains(&FlowKind::Quic) {
        rows.push(RowSpec::new("QUIC loss rate (lost / sent packets)", Unit::Ratio, "quic_loss_rate"));
        rows.push(RowSpec::new("QUIC smoothed RTT at the end", Unit::Ms, "quic_srtt"));
    }
    if kinds.contains(&FlowKind::Torrent) {
        rows.push(RowSpec::new("leecher's peers over uTP", Unit::Count, "torrent_utp_peers"));
        rows.push(RowSpec::new("leecher's peers over TCP", Unit::Count, "torrent_tcp_peers"));
    }
    table.add_rows(&refs, rows);
    if refs.iter().any(|r| r.metric("flows_failed", None).is_some()) {
        table.add_rows(&refs, [RowSpec::new("flows that failed", Unit::Count, "flows_failed")]);
    }
    table.add_machine_rows(&refs, None);
    let what = match bg {
        Background::Quic => "a background QUIC download",
        Background::Utp => "a background uTP torrent",
        Background::Mix => "two hosts' background, QUIC + TCP and uTP + TCP,",
    };
    report.title = format!(
        "{name}: {what} beside a best-effort TCP download ({} Mbit/s, {} ms RTT)",
        opts.rate_mbit, opts.rtt_ms
    );
    report.table = table;
    let placed: Vec<String> = plan
        .bg_flows()
        .iter()
        .map(|(l, h, _, port)| format!("{l} on LAN host {h} (server port {port})"))
        .collect();
    report.notes = vec![format!(
        "{}phases of {:.0} s: {}; each measured after its first third (at most 10 s); background: {}; best \
         effort on LAN host {}",
        if plan.warmup > 0.0 { format!("{:.0} s of warm-up, then ", plan.warmup) } else { String::new() },
        plan.phase,
        PHASES.iter().map(|(_, what)| *what).collect::<Vec<_>>().join(", "),
        placed.join(", "),
        plan.be_host(),
    )];
    ctx.write_report(report)
}

/// Runs `quic`.
pub fn run_quic(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    run_scenario(ctx, opts, Background::Quic)
}

/// Runs `utp`.
pub fn run_utp(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    run_scenario(ctx, opts, Background::Utp)
}

/// Runs `udp-mix`.
pub fn run_mix(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    run_scenario(ctx, opts, Background::Mix)
}

#[cfg(test)]
#[path = "udp_background_tests.rs"]
mod tests;
