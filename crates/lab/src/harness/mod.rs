//! One run of a scenario: a fresh testbed, one alternative on its router, iperf3 flows started
//! at chosen times, and samplers (one file each) every 100 ms, turned into a [`RunResult`].
//! Drop order makes an error anywhere (or Ctrl-C) clean: samplers are stopped, the daemon is
//! killed, then the testbed is torn down (namespaces with everything in them).

pub mod daemon;
pub mod goodput;
pub mod link;
mod machine;
pub mod ping;
mod poller;
mod spec;
pub mod ss;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, ensure, Context, Result};
use slipstream_testbed::iperf::{IperfResult, IperfRun};
use slipstream_testbed::torrent::{Peer, Swarm, TorrentRun};
use slipstream_testbed::{Ns, Testbed, TopologySpec};

pub use spec::{FlowKind, FlowSpec, RunSetup, TorrentSetup};

use crate::alternatives::{ActiveAlternative, AltEnv, Alternative};
use crate::result::{now_unix, Role, RunParams, RunResult, ScenarioReport, Unit};
use crate::scenarios::{LabContext, ScenarioOptions, LAB_PREFIX};

/// iperf3 write size of rate-limited (`-b`) flows: one full segment (1500-byte MTU, timestamps).
pub const CBR_WRITE_BYTES: &str = "1448";

/// Allowed deviation of the measured idle ping RTT from the set RTT before a run fails, ms.
const RTT_TOLERANCE_MS: f64 = 2.0;

/// Server port of the (first) background flow (a BitTorrent port); further background flows use
/// the following ports.
pub const BG_PORT: u16 = 6881;
/// Server port of the best-effort flow.
pub const BE_PORT: u16 = 5201;
/// Server port of the reverse-direction (upload) flow.
pub const REV_PORT: u16 = 5202;

/// A flow's transfer while it runs.
enum Transfer {
    /// iperf3 or `slipstream-quic` (a child process).
    Client(IperfRun),
    /// A leecher polled over RPC.
    Torrent(TorrentRun),
}

impl Transfer {
    /// Waits for the transfer's end and its result.
    fn wait(self) -> Result<IperfResult> {
        match self {
            Transfer::Client(r) => r.wait(),
            Transfer::Torrent(t) => Ok(t.finish()?.into_iperf()),
        }
    }
}

/// One started flow.
struct FlowRun {
    spec: FlowSpec,
    offset_s: f64,
    /// Where t = 0 of its series lies on the run's clock when known without `ss` (QUIC: the
    /// request, one RTT after the spawn; the torrent: its start); `None` for iperf3.
    series_start_s: Option<f64>,
    run: Option<Transfer>,
    result: Option<IperfResult>,
}

/// `slipstream-quic`: beside the running executable, or `$SLIPSTREAM_QUIC_BIN`.
fn quic_binary() -> PathBuf {
    slipstream_testbed::workspace_binary("slipstream-quic", "SLIPSTREAM_QUIC_BIN")
}

/// The QUIC sender's congestion control for the lab's `--cc`.
fn quic_cc(cc: &str) -> &'static str {
    match cc {
        "reno" => "newreno",
        "bbr" => "bbr",
        _ => "cubic",
    }
}

/// A run in progress. Fields drop in order: samplers, flows, alternative (daemon), testbed.
pub struct Run<'a> {
    ping: Option<ping::PingSampler>,
    ss: Option<poller::Periodic<Vec<ss::SsSocket>>>,
    links: Option<link::LinkSamplers>,
    /// The machine's CPU times when the run started (`machine`).
    cpu_at_start: Option<machine::CpuTimes>,
    daemon: Option<poller::Periodic<Vec<slipstream_inspect::FlowInfo>>>,
    flows: Vec<FlowRun>,
    /// The torrent's leechers not yet downloading, by LAN host.
    leechers: BTreeMap<u8, Peer>,
    swarm: Option<Swarm>,
    active: Option<ActiveAlternative>,
    tb: Option<Testbed>,
    ctx: &'a LabContext,
    opts: &'a ScenarioOptions,
    setup: RunSetup,
    t0: Instant,
    result: RunResult,
}

impl<'a> Run<'a> {
    /// Builds the topology (checking the idle RTT), sets the alternative up, starts the iperf3
    /// servers and the samplers. t = 0 is the end of this call. (On an error, what was set up
    /// drops in reverse order: samplers, alternative, testbed.)
    pub fn start(ctx: &'a LabContext, opts: &'a ScenarioOptions, setup: RunSetup) -> Result<Run<'a>> {
        ctx.check_interrupted()?;
        let spec = TopologySpec {
            rate_mbit: opts.rate_mbit,
            upload_rate_mbit: opts.upload_rate_mbit,
            one_way_delay_ms: opts.rtt_ms / 2.0,
            // Given: both directions; else one BDP of each direction's rate (the testbed's).
            queue_bytes: opts.queue_bytes.map(|_| opts.effective_queue_bytes()),
            name_prefix: slipstream_testbed::unique_prefix(LAB_PREFIX),
            delay_bin: Some(ctx.delay_bin.clone()),
            ipv6: false,
            servers: setup.servers,
            clients: setup.clients,
            timestamps_off: setup.timestamps_off.clone(),
            stalls_ms: opts.stalls_ms,
            ..TopologySpec::default()
        };
        let tb = Testbed::build(spec).context("building the topology")?;
        let rtt = tb.assert_rtt_within(RTT_TOLERANCE_MS).with_context(|| {
            format!("delay accuracy check (rate {} Mbit/s, RTT {} ms)", opts.rate_mbit, opts.rtt_ms)
        })?;
        let (dir, ports) = (setup.work_dir.clone(), setup.background_ports.clone());
        let mut env = AltEnv::new(ctx.daemon_bin.clone(), opts, dir, ports);
        if !setup.rules.is_empty() {
            env.rules.clone_from(&setup.rules);
        }
        env.protocol = setup.protocol;
        let active = setup.alternative.setup(&tb, &env)?;
        let ports: BTreeSet<u16> = setup.server_ports.iter().copied().collect();
        let cc = quic_cc(setup.cc.as_deref().unwrap_or(&opts.cc));
        for n in 1..=setup.servers {
            for &p in &ports {
                tb.start_iperf_server_in(Ns::server(n), p)?;
            }
            for &p in &setup.quic_ports {
                tb.start_quic_server_in(&quic_binary(), Ns::server(n), p, cc)?;
            }
        }
        let (mut swarm, mut leechers) = (None, BTreeMap::new());
        if let Some(t) = &setup.torrent {
            let dir = setup.work_dir.join(format!("{}-torrent", tb.spec().name_prefix));
            let s = tb.start_swarm(&dir, t.server, t.file_bytes).context("starting the torrent swarm")?;
            for &host in &t.leechers {
                leechers.insert(host, tb.start_leecher(&s, host)?);
            }
            swarm = Some(s);
        }
        let (t0, t0_unix) = (Instant::now(), now_unix());
        let ping_out = setup.work_dir.join(format!("{}-ping.txt", tb.spec().name_prefix));
        let ping = setup.ping.then(|| ping::PingSampler::start(&tb, ping_out, t0_unix)).transpose()?;
        let ss = Some(ss::start(&tb, t0_unix));
        let links = Some(link::start(&tb, t0_unix));
        let cpu_at_start = machine::CpuTimes::now();
        let daemon = active.control_socket.clone().map(|socket| daemon::start(socket, t0_unix));
        let params = RunParams {
            rate_mbit: opts.rate_mbit,
            upload_rate_mbit: opts.upload_rate_mbit,
            rtt_ms: opts.rtt_ms,
            queue_bytes: opts.effective_queue_bytes(),
            upload_queue_bytes: opts.upload_rate_mbit.map(|_| tb.spec().effective_upload_queue_bytes()),
            queue_packets: opts.effective_queue_bytes() as f64 / slipstream_testbed::cmd::FRAME_BYTES as f64,
            measured_rtt_ms: Some(rtt),
            duration_s: setup.duration_s,
            cc: setup.cc.clone().unwrap_or_else(|| opts.cc.clone()),
            repeat: setup.repeat,
            extra: setup.extra.clone(),
        };
        let (scenario, alternative) = (setup.scenario.clone(), setup.alternative.label());
        let mut result =
            RunResult { scenario, alternative, started_unix: t0_unix, params, ..Default::default() };
        if let Some((every, length)) = opts.stalls_ms {
            result.notes.push(format!(
                "the delay element stalled {length} ms at a time, {every} ms apart on average"
            ));
        }
        let flows = Vec::new();
        let active = Some(active);
        let tb = Some(tb);
        Ok(Run {
            ping,
            ss,
            links,
            cpu_at_start,
            daemon,
            flows,
            leechers,
            swarm,
            active,
            tb,
            ctx,
            opts,
            setup,
            t0,
            result,
        })
    }

    pub fn tb(&self) -> &Testbed {
        self.tb.as_ref().expect("testbed present until finish")
    }

    /// Seconds since t = 0.
    pub fn t(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// The parameters of this run.
    pub fn params(&self) -> &RunParams {
        &self.result.params
    }

    /// Starts an iperf3 flow now.
    pub fn start_flow(&mut self, spec: FlowSpec) -> Result<()> {
        let secs = spec.seconds.ceil().max(1.0) as u32;
        let cc = self.result.params.cc.clone();
        let mut extra: Vec<String> = vec!["--interval".into(), "0.1".into()];
        if let Some(b) = &spec.bitrate {
            // iperf3 writes 128 KB blocks by default: at 6 Mbit/s one burst every 170 ms, a
            // queue spike of ~100 ms at 10 Mbit/s (measured: ping 142 ms instead of 100 beside
            // a "6 Mbit/s" flow). One MSS per write makes its pacing timer (1 ms) send smoothly.
            extra.extend(["-b".into(), b.clone(), "-l".into(), CBR_WRITE_BYTES.into()]);
        }
        if spec.streams > 1 {
            extra.extend(["-P".into(), spec.streams.to_string()]);
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let offset_s = self.t();
        let started = match spec.kind {
            FlowKind::Iperf => self
                .tb()
                .run_iperf(spec.ends, spec.port, secs, &cc, spec.download, &extra)
                .map(|r| (Transfer::Client(r), None)),
            FlowKind::Quic => self
                .tb()
                .run_quic(&quic_binary(), spec.ends, spec.port, secs, spec.download)
                .map(|r| (Transfer::Client(r), Some(offset_s + self.opts.rtt_ms / 1000.0))),
            FlowKind::Torrent => {
                let swarm = self.swarm.as_ref().ok_or_else(|| anyhow!("the run has no torrent swarm"))?;
                let host = spec.ends.client;
                let leecher = self.leechers.remove(&host).ok_or_else(|| {
                    anyhow!("no idle leecher on LAN host {host} (one torrent flow per host)")
                })?;
                swarm.start_download(leecher, spec.seconds).map(|r| (Transfer::Torrent(r), Some(offset_s)))
            }
        };
        let (run, series_start_s) = started.with_context(|| format!("starting flow {}", spec.label))?;
        self.flows.push(FlowRun { spec, offset_s, series_start_s, run: Some(run), result: None });
        Ok(())
    }

    /// Waits for the flows with `label` that are still running to end, collecting their results
    /// (lets on/off scenarios reuse a server port). The goodput series are built at
    /// [`finish`](Self::finish), when the sender-side samples that place them in time are in.
    pub fn wait_flow(&mut self, label: &str) -> Result<()> {
        for f in self.flows.iter_mut().filter(|f| f.spec.label == label) {
            if let Some(r) = f.run.take() {
                match r.wait() {
                    Ok(res) => f.result = Some(res),
                    // A flow that could not even connect (a SYN starved behind 60 others in a
                    // low-priority class) is a measured outcome, not a broken run: it got no
                    // goodput. Recorded; the run fails only if no flow got through at all.
                    Err(e) => self
                        .result
                        .notes
                        .push(format!("flow {} (port {}) failed: {e:#}", f.spec.label, f.spec.port)),
                }
            }
        }
        Ok(())
    }

    /// Current sender-side rate (Mbit/s) of the running flows with `role` (`None` without such
    /// flows or before two samples).
    fn live_role_rate(&self, role: Role) -> Option<f64> {
        let ss = self.ss.as_ref()?;
        // `ss` sees TCP only: QUIC and the torrent have no live rate.
        let running = self
            .flows
            .iter()
            .filter(|f| f.spec.role == role && f.run.is_some() && f.spec.kind == FlowKind::Iperf);
        let ports: BTreeSet<u16> = running.map(|f| f.spec.port).collect();
        ss::live_rate(ss, &ports).filter(|_| !ports.is_empty())
    }

    /// The progress line at t = `now`, e.g.
    /// `[cbr] alternative 2/5 slipstream  t=34/90 s  BE 5.9 Mbit/s  BG 0.4 Mbit/s`.
    fn status_line(&self, now: f64) -> String {
        let RunSetup { scenario, index, count, alternative, duration_s, .. } = &self.setup;
        let mut s = format!(
            "[{scenario}] alternative {}/{count} {alternative}  t={now:.0}/{duration_s:.0} s",
            index + 1
        );
        for (label, role) in [("BE", Role::BestEffort), ("BG", Role::Background)] {
            match self.live_role_rate(role) {
                Some(v) => s.push_str(&format!("  {label} {:.1} Mbit/s", v.max(0.0) + 0.0)),
                None => s.push_str(&format!("  {label} -")),
            }
        }
        s
    }

    /// Sleeps until t = `t`, printing the progress line; errors on Ctrl-C.
    pub fn wait_until(&self, t: f64) -> Result<()> {
        loop {
            self.ctx.check_interrupted()?;
            let now = self.t();
            if now >= t {
                return Ok(());
            }
            self.ctx.progress.status(&self.status_line(now));
            std::thread::sleep(std::time::Duration::from_secs_f64((t - now).min(0.1)));
        }
    }

    /// Waits for every flow, stops the samplers, tears the alternative and the testbed down
    /// (checking nothing is left), and returns the result with all series.
    pub fn finish(mut self) -> Result<RunResult> {
        let labels: Vec<String> = self.flows.iter().map(|f| f.spec.label.clone()).collect();
        for l in labels {
            self.wait_flow(&l)?;
        }
        if !self.flows.is_empty() && self.flows.iter().all(|f| f.result.is_none()) {
            bail!("no flow of the run got through: {}", self.result.notes.join("; "));
        }
        let failed = self.flows.iter().filter(|f| f.result.is_none()).count();
        if failed > 0 {
            self.result.metrics.push(crate::result::Metric::new("flows_failed", Unit::Count, failed as f64));
        }
        self.collect_samples();
        self.add_udp_flow_metrics();
        let stolen = self.cpu_at_start.zip(machine::CpuTimes::now()).and_then(|(a, b)| b.stolen_since(&a));
        if let Some(share) = stolen {
            self.result.metrics.push(crate::result::Metric::new("cpu_stolen", Unit::Ratio, share));
        }
        let tb = self.tb.take().expect("testbed present");
        if let Some(active) = self.active.take() {
            let notes = active.teardown(&tb)?;
            self.result.notes.extend(notes);
        }
        self.add_delay_element_metrics(&tb);
        let prefix = tb.spec().name_prefix.clone();
        drop(tb);
        if self.setup.torrent.is_some() {
            // The shared file and the leechers' copies: hundreds of MB per run.
            let _ = std::fs::remove_dir_all(self.setup.work_dir.join(format!("{prefix}-torrent")));
        }
        let left: Vec<String> = slipstream_testbed::list_netns()?
            .into_iter()
            .filter(|n| n.starts_with(&format!("{prefix}-")))
            .collect();
        ensure!(left.is_empty(), "namespaces left after teardown: {left:?}");
        Ok(std::mem::take(&mut self.result))
    }

    /// The delay element's accuracy over the run (see `slipstream_testbed::delay_stats`): the
    /// mean lateness of its releases (`path_lateness`) and the share more than 1 ms late
    /// (`path_late_share`). A controller reads that lateness as queueing delay. A report the
    /// element could not give is a note, not a failed run.
    fn add_delay_element_metrics(&mut self, tb: &Testbed) {
        use crate::result::Metric;
        match tb.stop_delay_element() {
            Ok(Some(stats)) => {
                let late = stats.mean_lateness().map(|d| d.as_secs_f64() * 1e3);
                self.result.metrics.extend(late.map(|v| Metric::new("path_lateness", Unit::Ms, v)));
                let share = stats.late_share();
                self.result.metrics.extend(share.map(|v| Metric::new("path_late_share", Unit::Ratio, v)));
            }
            Ok(None) => {}
            Err(e) => self.result.notes.push(format!("the delay element's accuracy is unknown: {e:#}")),
        }
    }

    /// The QUIC flows' sender statistics (packets lost and sent, loss rate, smoothed RTT) and
    /// the torrent flows' peers (over uTP or not), as metrics of the flow.
    fn add_udp_flow_metrics(&mut self) {
        use crate::result::Metric;
        let mut m = Vec::new();
        for f in &self.flows {
            let (Some(r), label) = (&f.result, f.spec.label.as_str()) else { continue };
            let num = |p: &str| r.raw.pointer(p).and_then(serde_json::Value::as_f64);
            match f.spec.kind {
                FlowKind::Quic => {
                    if let (Some(lost), Some(sent)) = (num("/path/lost_packets"), num("/path/sent_packets")) {
                        m.push(Metric::new("quic_lost_packets", Unit::Packets, lost).flow(label));
                        m.push(Metric::new("quic_sent_packets", Unit::Packets, sent).flow(label));
                        if sent > 0.0 {
                            m.push(Metric::new("quic_loss_rate", Unit::Ratio, lost / sent).flow(label));
                        }
                    }
                    m.extend(num("/path/rtt_ms").map(|v| Metric::new("quic_srtt", Unit::Ms, v).flow(label)));
                }
                FlowKind::Torrent => {
                    let peers = r.raw.get("peers").and_then(serde_json::Value::as_array);
                    let utp = |want: bool| {
                        peers.map_or(0, |ps| ps.iter().filter(|p| p["utp"].as_bool() == Some(want)).count())
                    };
                    m.push(Metric::new("torrent_utp_peers", Unit::Count, utp(true) as f64).flow(label));
                    m.push(Metric::new("torrent_tcp_peers", Unit::Count, utp(false) as f64).flow(label));
                }
                FlowKind::Iperf => {}
            }
        }
        self.result.metrics.extend(m);
    }

    /// Stops the samplers and turns their samples into the result's series.
    fn collect_samples(&mut self) {
        let ss = self.ss.take().map(poller::Periodic::finish).unwrap_or_default();
        let daemon = self.daemon.take().map(poller::Periodic::finish).unwrap_or_default();
        let down_delay_s = self.opts.rtt_ms / 2.0 / 1000.0;
        goodput::add_goodput_series(&self.flows, &ss, down_delay_s, &mut self.result);
        self.result.series.extend(self.ping.take().and_then(ping::PingSampler::finish));
        self.result.series.extend(self.links.take().map(link::LinkSamplers::finish).unwrap_or_default());
        // One entry per flow label: its role, port and direction.
        let mut seen = BTreeSet::new();
        for f in self.flows.iter().filter(|f| seen.insert(&f.spec.label)) {
            let FlowSpec { label, role, port, download, .. } = &f.spec;
            let series = &mut self.result.series;
            series.extend(ss::flow_series(&ss, label, *role, *port, *download));
            series.extend(daemon::flow_series(&daemon, label, *role, *port));
        }
    }
}

/// Tries per run under `--max-lateness`.
const MAX_TRIES: u32 = 3;

/// The run's delay element's mean lateness (ms) if it is over `max`; `None` if within it, not
/// measured, or no maximum was asked.
fn too_late(r: &RunResult, max: Option<f64>) -> Option<f64> {
    let late = r.metric("path_lateness", None)?;
    (late > max?).then_some(late)
}

/// Runs `body` once per case × repeat × alternative (in that order) on a fresh [`Run`], which it
/// finishes (adding its metrics), and adds the results to `report`; the daemons' configs and logs
/// go to the report's run directory. A failed run fails the scenario (its testbed is torn down by
/// `Drop` first). Under `--max-lateness` a run the host delayed is run again ([`MAX_TRIES`] in
/// all; the last try is kept with a note).
pub fn run_all<C>(
    ctx: &LabContext,
    opts: &ScenarioOptions,
    report: &mut ScenarioReport,
    cases: &[C],
    mut setup: impl FnMut(&C, Alternative) -> RunSetup,
    mut body: impl FnMut(Run, &C) -> Result<RunResult>,
) -> Result<()> {
    let dir = ctx.run_dir(&report.scenario, report.started_unix)?;
    let count = opts.alternatives.len() * opts.repeats.max(1) as usize * cases.len();
    let mut index = 0;
    for case in cases {
        for repeat in 0..opts.repeats.max(1) {
            for alt in &opts.alternatives {
                let scenario = report.scenario.clone();
                let s =
                    RunSetup { scenario, work_dir: dir.clone(), index, count, repeat, ..setup(case, *alt) };
                index += 1;
                let mut tries = 1;
                let r = loop {
                    let run = Run::start(ctx, opts, s.clone())
                        .with_context(|| format!("starting run {}/{count} ({alt})", index))?;
                    let mut r = body(run, case).with_context(|| format!("run {}/{count} ({alt})", index))?;
                    let Some(late) = too_late(&r, opts.max_lateness_ms) else { break r };
                    let what =
                        format!("the delay element's mean lateness {late:.2} ms (try {tries}/{MAX_TRIES})");
                    if tries == MAX_TRIES {
                        r.notes.push(format!("{what}: over --max-lateness in every try, kept"));
                        break r;
                    }
                    ctx.progress.log(&format!("[{}] run {index}/{count} {alt}: {what}, again", r.scenario));
                    tries += 1;
                };
                ctx.progress.log(&format!("[{}] run {index}/{count} {alt} done", r.scenario));
                report.runs.push(r);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Metric;

    #[test]
    fn a_run_is_too_late_only_over_the_maximum_asked() {
        let run = |late: Option<f64>| RunResult {
            metrics: late.map(|v| Metric::new("path_lateness", Unit::Ms, v)).into_iter().collect(),
            ..Default::default()
        };
        assert_eq!(too_late(&run(Some(1.6)), Some(0.5)), Some(1.6));
        assert_eq!(too_late(&run(Some(0.3)), Some(0.5)), None);
        assert_eq!(too_late(&run(Some(0.5)), Some(0.5)), None, "at the maximum is within it");
        assert_eq!(too_late(&run(Some(5.0)), None), None, "no maximum asked");
        assert_eq!(too_late(&run(None), Some(0.5)), None, "not measured (no delay element)");
    }
}
