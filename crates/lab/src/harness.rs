//! One run of a scenario: a fresh testbed, one alternative on its router, iperf3 flows started
//! at chosen times, and samplers every 100 ms, turned into a [`RunResult`].
//!
//! Samplers (all optional, see [`RunSetup`]):
//! * **goodput** per flow at the receiver: iperf3 `-J --interval 0.1` (downloads: the client's
//!   own series; uploads: the server's, via `--get-server-output`). Series `goodput`, each point
//!   at its interval's midpoint, on the run's clock: iperf3's intervals count from its test
//!   start, which comes ~0.5 s after the client is spawned (process start, control exchange,
//!   data connection), so a flow's t = 0 is taken from the server's `ss` samples, where its
//!   data connection first carries data (see `build_goodput_series`). Each flow's span (first
//!   to last interval) is kept in [`RunResult::flow_spans`];
//! * **best-effort RTT**: `ping -D -i 0.1` client → server (ICMP matches no background rule and no
//!   HTB background filter). Series `rtt` of flow `ping`;
//! * **sender state**: `ss -tinH` polled every 100 ms in the server namespace (one shell loop, not
//!   a process per sample). Per flow (socket on the flow's server port with the most bytes, i.e.
//!   the data connection rather than iperf3's control one): `cwnd` (bytes, cwnd × mss),
//!   `inflight` (bytes, unacked × mss: what a window clamp actually limits), `ss_rtt`
//!   (ms) and `ss_goodput` (Mbit/s from the byte counters; also what the progress line shows);
//! * **daemon**: its metrics scraped every 100 ms in the router namespace: `rwnd`,
//!   `cwnd_estimate` (bytes), `piv_sum` (s), `mode` (0 conservative, 1 aggressive),
//!   `daemon_rtt` (ms) of the flow whose server endpoint is the flow's port.
//!
//! Drop order makes an error anywhere (or Ctrl-C) clean: pollers are killed, the daemon is
//! killed, then the testbed is torn down (namespaces with everything in them).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use slipstream_testbed::iperf::{IperfResult, IperfRun};
use slipstream_testbed::{IperfEnds, Ns, Testbed, TopologySpec};

use crate::alternatives::{ActiveAlternative, AltEnv, Alternative, LabRule};
use crate::analysis;
use crate::measure::{self, BlockSplitter, DaemonFlow, SsSocket};
use crate::result::{now_unix, Role, RunParams, RunResult, Series, Unit};
use crate::scenarios::{status_line, LabContext, ScenarioOptions};

/// Transfer direction as seen from the LAN client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Server sends (iperf3 `-R`).
    Download,
    /// Client sends.
    Upload,
}

/// One iperf3 transfer.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    /// Label, unique per flow within the run ("be", "bg", "bg3"); repeated starts with the same
    /// label (on/off periods) append to the same series.
    pub label: String,
    /// Role.
    pub role: Role,
    /// Server port (an iperf3 server listens there; background ports must be in
    /// [`RunSetup::background_ports`]).
    pub port: u16,
    /// Direction.
    pub direction: Direction,
    /// Length in seconds (iperf3 takes whole seconds; rounded up, at least 1).
    pub seconds: f64,
    /// iperf3 `-b` (e.g. "6M"), written one segment at a time so the rate is constant at
    /// millisecond scale; `None` = as fast as TCP goes.
    pub bitrate: Option<String>,
    /// Which LAN host and which server the flow runs between (1-based; both must exist in the
    /// run's topology, see [`RunSetup::clients`] and [`RunSetup::servers`]).
    pub ends: IperfEnds,
}

impl FlowSpec {
    /// A bulk download.
    pub fn download(label: &str, role: Role, port: u16, seconds: f64) -> FlowSpec {
        FlowSpec {
            label: label.into(),
            role,
            port,
            direction: Direction::Download,
            seconds,
            bitrate: None,
            ends: IperfEnds::default(),
        }
    }

    /// A bulk upload.
    pub fn upload(label: &str, role: Role, port: u16, seconds: f64) -> FlowSpec {
        FlowSpec {
            direction: Direction::Upload,
            ..FlowSpec::download(label, role, port, seconds)
        }
    }

    /// Between LAN host `client` and server `server` (1-based numbers).
    pub fn between(mut self, client: u8, server: u8) -> FlowSpec {
        self.ends = IperfEnds { client, server };
        self
    }

    /// Rate-limited (`-b`).
    pub fn bitrate(mut self, b: &str) -> FlowSpec {
        self.bitrate = Some(b.into());
        self
    }
}

/// What one run needs.
#[derive(Debug, Clone)]
pub struct RunSetup {
    /// Scenario name.
    pub scenario: String,
    /// The alternative.
    pub alternative: Alternative,
    /// Its index among the invocation's runs and how many there are (for the progress line).
    pub index: usize,
    /// Number of runs of this invocation.
    pub count: usize,
    /// Repeat index.
    pub repeat: u32,
    /// Planned length, s.
    pub duration_s: f64,
    /// Server ports classed as background (daemon rule, HTB filter).
    pub background_ports: Vec<u16>,
    /// Every server port an iperf3 server must listen on (on every server).
    pub server_ports: Vec<u16>,
    /// Number of servers in the topology (default 1).
    pub servers: u8,
    /// Number of LAN hosts in the topology (default 1).
    pub clients: u8,
    /// LAN hosts without TCP timestamps (see [`TopologySpec::timestamps_off`]).
    pub timestamps_off: Vec<u8>,
    /// Rules splitting the background ports (see [`crate::alternatives::LabRule`]); empty = one.
    pub rules: Vec<LabRule>,
    /// Run `ping -i 0.1` throughout.
    pub ping: bool,
    /// Poll `ss` in the server namespace.
    pub ss: bool,
    /// Directory for daemon configs/logs.
    pub work_dir: PathBuf,
    /// Congestion control override (`None` = `opts.cc`).
    pub cc: Option<String>,
    /// Scenario-specific parameters for [`RunParams::extra`].
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl RunSetup {
    /// A setup with ping and ss sampling on, one background port, no extras.
    pub fn new(scenario: &str, alternative: Alternative, duration_s: f64, work_dir: PathBuf) -> RunSetup {
        RunSetup {
            scenario: scenario.into(),
            alternative,
            index: 0,
            count: 1,
            repeat: 0,
            duration_s,
            background_ports: vec![BG_PORT],
            server_ports: vec![BG_PORT],
            servers: 1,
            clients: 1,
            timestamps_off: Vec::new(),
            rules: Vec::new(),
            ping: true,
            ss: true,
            work_dir,
            cc: None,
            extra: BTreeMap::new(),
        }
    }

    /// Adds a scenario parameter.
    pub fn param(mut self, key: &str, value: impl Into<serde_json::Value>) -> RunSetup {
        self.extra.insert(key.into(), value.into());
        self
    }
}

/// Time from spawning an iperf3 client to its first data, assumed where it cannot be measured:
/// the control connection, parameter exchange and data connection take about 3 RTTs at 100 ms.
pub const IPERF_SETUP_GUESS_S: f64 = 0.3;

/// Period of the `ss` and daemon pollers: the loop's fork and exec overhead (~3 ms) comes on top,
/// so a sample is taken at least every 100 ms.
pub const POLL_INTERVAL_S: f64 = 0.095;

/// iperf3 write size of rate-limited (`-b`) flows: one full segment (1500-byte MTU, timestamps).
pub const CBR_WRITE_BYTES: &str = "1448";

/// Server port of the (first) background flow (a BitTorrent port); further background flows use
/// the following ports.
pub const BG_PORT: u16 = 6881;
/// Server port of the best-effort flow.
pub const BE_PORT: u16 = 5201;
/// Server port of the reverse-direction (upload) flow.
pub const REV_PORT: u16 = 5202;

/// Assembles a report (table from `rows`), writes result.json and table.md into
/// `<out>/<scenario>/<timestamp>/`, and returns it.
pub fn finish_report(
    ctx: &LabContext,
    dir: &std::path::Path,
    mut report: crate::result::ScenarioReport,
) -> Result<crate::result::ScenarioReport> {
    if report.started_unix == 0.0 {
        report.started_unix = report.runs.first().map_or(0.0, |r| r.started_unix);
    }
    ctx.write_report(dir, &report)?;
    Ok(report)
}

struct FlowRun {
    spec: FlowSpec,
    offset_s: f64,
    run: Option<IperfRun>,
    result: Option<IperfResult>,
}

#[derive(Default)]
struct Samples {
    ping: Vec<(f64, f64)>,
    ss: Vec<(f64, Vec<SsSocket>)>,
    daemon: Vec<(f64, Vec<DaemonFlow>)>,
}

struct Poller {
    child: Child,
    reader: Option<JoinHandle<()>>,
}

impl Poller {
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A run in progress. Fields drop in order: pollers, flows, alternative (daemon), testbed.
pub struct Run<'a> {
    pollers: Vec<Poller>,
    flows: Vec<FlowRun>,
    active: Option<ActiveAlternative>,
    tb: Option<Testbed>,
    ctx: &'a LabContext,
    opts: &'a ScenarioOptions,
    setup: RunSetup,
    samples: Arc<Mutex<Samples>>,
    t0: Instant,
    t0_unix: f64,
    result: RunResult,
}

impl<'a> Run<'a> {
    /// Builds the topology (checking the idle RTT), sets the alternative up, starts the iperf3
    /// servers and the samplers. t = 0 is the end of this call.
    pub fn start(ctx: &'a LabContext, opts: &'a ScenarioOptions, setup: RunSetup) -> Result<Run<'a>> {
        ctx.check_interrupted()?;
        let up = opts.upload_delay_ms();
        let spec = TopologySpec {
            rate_mbit: opts.rate_mbit,
            one_way_delay_ms: opts.rtt_ms - up,
            upload_delay_ms: Some(up),
            queue_bytes: Some(opts.effective_queue_bytes()),
            name_prefix: slipstream_testbed::unique_prefix(&ctx.prefix_base),
            delay_bin: Some(ctx.delay_bin.clone()),
            ipv6: false,
            servers: setup.servers,
            clients: setup.clients,
            timestamps_off: setup.timestamps_off.clone(),
            flood_source: false,
        };
        let tb = Testbed::build(spec).context("building the topology")?;
        let rtt = tb.assert_rtt_within(opts.rtt_tolerance_ms).with_context(|| {
            format!(
                "delay accuracy check (rate {} Mbit/s, RTT {} ms)",
                opts.rate_mbit, opts.rtt_ms
            )
        })?;
        let cc = setup.cc.clone().unwrap_or_else(|| opts.cc.clone());
        let params = RunParams {
            rate_mbit: opts.rate_mbit,
            rtt_ms: opts.rtt_ms,
            queue_bytes: opts.effective_queue_bytes(),
            queue_packets: opts.effective_queue_bytes() as f64 / slipstream_testbed::cmd::FRAME_BYTES as f64,
            measured_rtt_ms: Some(rtt),
            duration_s: setup.duration_s,
            cc,
            repeat: setup.repeat,
            extra: setup.extra.clone(),
        };
        let mut run = Run {
            pollers: Vec::new(),
            flows: Vec::new(),
            active: None,
            tb: Some(tb),
            ctx,
            opts,
            samples: Arc::new(Mutex::new(Samples::default())),
            t0: Instant::now(),
            t0_unix: now_unix(),
            result: RunResult {
                scenario: setup.scenario.clone(),
                alternative: setup.alternative.label(),
                started_unix: now_unix(),
                params,
                ..Default::default()
            },
            setup,
        };
        let env = AltEnv {
            daemon_bin: ctx.daemon_bin.clone(),
            work_dir: run.setup.work_dir.clone(),
            background_ports: run.setup.background_ports.clone(),
            rules: run.setup.rules.clone(),
            rate_mbit: opts.rate_mbit,
            bdp_bytes: opts.bdp_bytes(),
            queue_packets: opts.queue_packets(),
        };
        run.active = Some(run.setup.alternative.setup(run.tb(), &env)?);
        let mut ports = run.setup.server_ports.clone();
        ports.sort_unstable();
        ports.dedup();
        for n in 1..=run.setup.servers {
            for &p in &ports {
                run.tb().start_iperf_server_in(Ns::server(n), p)?;
            }
        }
        run.t0 = Instant::now();
        run.t0_unix = now_unix();
        run.result.started_unix = run.t0_unix;
        if run.setup.ping {
            run.start_ping()?;
        }
        if run.setup.ss {
            run.start_poller(Ns::Server, "ss -tinH", POLL_INTERVAL_S, |samples, t, text| {
                samples.ss.push((t, measure::parse_ss(text)));
            })?;
        }
        if run.setup.alternative.uses_daemon() {
            let url = format!("http://{}/metrics", crate::alternatives::METRICS_ADDR);
            run.start_poller(
                Ns::Router,
                &format!("curl -sf --max-time 1 {url}"),
                POLL_INTERVAL_S,
                |samples, t, text| {
                    samples.daemon.push((t, measure::parse_daemon_flows(text)));
                },
            )?;
        }
        Ok(run)
    }

    /// The testbed.
    pub fn tb(&self) -> &Testbed {
        self.tb.as_ref().expect("testbed present until finish")
    }

    /// The scenario options.
    pub fn opts(&self) -> &ScenarioOptions {
        self.opts
    }

    /// The alternative's state (daemon handle etc.).
    pub fn active(&self) -> Option<&ActiveAlternative> {
        self.active.as_ref()
    }

    /// Seconds since t = 0.
    pub fn t(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Adds a note to the result.
    pub fn note(&mut self, n: impl Into<String>) {
        self.result.notes.push(n.into());
    }

    /// The congestion control of this run.
    pub fn cc(&self) -> String {
        self.result.params.cc.clone()
    }

    fn start_ping(&mut self) -> Result<()> {
        let dst = self.tb().server_addr(false).to_string();
        let mut c = self
            .tb()
            .exec(Ns::Client, &["ping", "-D", "-n", "-i", "0.1", "-W", "1", &dst]);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().context("starting ping")?;
        let out = child.stdout.take().expect("piped");
        let samples = Arc::clone(&self.samples);
        let t0 = self.t0_unix;
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some((unix, rtt, _)) = measure::parse_ping_line(&line) {
                    samples
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .ping
                        .push((unix - t0, rtt));
                }
            }
        });
        self.pollers.push(Poller {
            child,
            reader: Some(reader),
        });
        Ok(())
    }

    fn start_poller(
        &mut self,
        ns: Ns,
        command: &str,
        interval_s: f64,
        handle: impl Fn(&mut Samples, f64, &str) + Send + 'static,
    ) -> Result<()> {
        let script = measure::poll_script(command, interval_s);
        let mut c = self.tb().exec(ns, &["sh", "-c", &script]);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c
            .spawn()
            .with_context(|| format!("starting poller `{command}`"))?;
        let out = child.stdout.take().expect("piped");
        let samples = Arc::clone(&self.samples);
        let t0 = self.t0_unix;
        let reader = std::thread::spawn(move || {
            let mut split = BlockSplitter::default();
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some((unix, text)) = split.push_line(&line) {
                    handle(
                        &mut samples.lock().unwrap_or_else(|e| e.into_inner()),
                        unix - t0,
                        &text,
                    );
                }
            }
        });
        self.pollers.push(Poller {
            child,
            reader: Some(reader),
        });
        Ok(())
    }

    /// Starts an iperf3 flow now.
    pub fn start_flow(&mut self, spec: FlowSpec) -> Result<()> {
        let secs = spec.seconds.ceil().max(1.0) as u32;
        let cc = self.cc();
        let mut extra: Vec<String> = vec!["--interval".into(), "0.1".into()];
        if let Some(b) = &spec.bitrate {
            // iperf3 writes 128 KB blocks by default: at 6 Mbit/s one burst every 170 ms, a
            // queue spike of ~100 ms at 10 Mbit/s (measured: ping 142 ms instead of 100 beside
            // a "6 Mbit/s" flow). One MSS per write makes its pacing timer (1 ms) send smoothly.
            extra.extend(["-b".into(), b.clone(), "-l".into(), CBR_WRITE_BYTES.into()]);
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let offset_s = self.t();
        let download = spec.direction == Direction::Download;
        let run = self
            .tb()
            .run_iperf(spec.ends, spec.port, secs, &cc, download, &extra)
            .with_context(|| format!("starting flow {}", spec.label))?;
        self.flows.push(FlowRun {
            spec,
            offset_s,
            run: Some(run),
            result: None,
        });
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
                    Err(e) => self.result.notes.push(format!(
                        "flow {} (port {}) failed: {e:#}",
                        f.spec.label, f.spec.port
                    )),
                }
            }
        }
        Ok(())
    }

    /// Current sender-side rate (Mbit/s) of everything on server `port`, from the last two ss
    /// samples.
    pub fn live_rate(&self, port: u16) -> Option<f64> {
        let s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let n = s.ss.len();
        if n < 2 {
            return None;
        }
        let sum = |v: &[SsSocket]| -> f64 {
            v.iter()
                .filter(|x| x.local_port == port)
                .map(|x| x.bytes() as f64)
                .sum()
        };
        let ((t0, a), (t1, b)) = (&s.ss[n - 2], &s.ss[n - 1]);
        let (ba, bb) = (sum(a), sum(b));
        (t1 > t0 && bb >= ba).then(|| ((bb - ba) * 8.0 / (t1 - t0) / 1e6).max(0.0))
    }

    /// Live rate of all running flows with `role`.
    pub fn live_role_rate(&self, role: Role) -> Option<f64> {
        let mut ports: Vec<u16> = self
            .flows
            .iter()
            .filter(|f| f.spec.role == role && f.run.is_some())
            .map(|f| f.spec.port)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        if ports.is_empty() {
            return None;
        }
        Some(ports.iter().filter_map(|p| self.live_rate(*p)).sum())
    }

    /// Sleeps until t = `t`, printing the progress line; errors on Ctrl-C.
    pub fn wait_until(&self, t: f64) -> Result<()> {
        loop {
            self.ctx.check_interrupted()?;
            let now = self.t();
            if now >= t {
                return Ok(());
            }
            let line = status_line(
                &self.setup.scenario,
                self.setup.index,
                self.setup.count,
                &self.setup.alternative.label(),
                now,
                self.setup.duration_s,
                &[
                    ("BE", self.live_role_rate(Role::BestEffort)),
                    ("BG", self.live_role_rate(Role::Background)),
                ],
            );
            self.ctx.progress.status(&line);
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
            self.result.metrics.push(crate::result::Metric::new(
                "flows_failed",
                Unit::Count,
                failed as f64,
            ));
        }
        for p in &mut self.pollers {
            p.stop();
        }
        self.pollers.clear();
        self.build_sampled_series();
        let tb = self.tb.take().expect("testbed present");
        if let Some(active) = self.active.take() {
            let notes = active.teardown(&tb)?;
            self.result.notes.extend(notes);
        }
        let prefix = tb.spec().name_prefix.clone();
        drop(tb);
        let left: Vec<String> = slipstream_testbed::list_netns()?
            .into_iter()
            .filter(|n| n.starts_with(&format!("{prefix}-")))
            .collect();
        if !left.is_empty() {
            bail!("namespaces left after teardown: {left:?}");
        }
        Ok(std::mem::take(&mut self.result))
    }

    /// Goodput series of every flow from its iperf3 intervals (stamped at interval midpoints),
    /// placed in time where the sender-side samples show the flow's data connection start (see
    /// [`measure::data_start`]); the spawn time plus [`IPERF_SETUP_GUESS_S`] where they cannot
    /// (no `ss` sampling, a flow to another server). Also records each flow's span.
    fn build_goodput_series(&mut self, ss: &[(f64, Vec<SsSocket>)]) {
        let mut guessed = 0;
        let down_delay_s = (self.opts.rtt_ms - self.opts.upload_delay_ms()) / 1000.0;
        for f in &self.flows {
            let Some(res) = &f.result else { continue };
            let first = res.intervals.iter().find(|iv| !iv.omitted && iv.end > iv.start);
            // Server side, the data socket's peer is the client's data connection. A download's
            // receiver (the client) sees its first data one downstream delay after the server
            // sent it; an upload's series is the receiving server's own.
            let measured = match (f.spec.ends.server, res.local_port, f.spec.direction) {
                (1, Some(peer), Direction::Download) => {
                    measure::data_start(ss, f.spec.port, peer, f.offset_s, |s| s.bytes_sent)
                        .map(|t| t + down_delay_s)
                }
                (1, Some(peer), Direction::Upload) => {
                    measure::data_start(ss, f.spec.port, peer, f.offset_s, |s| s.bytes_received)
                }
                _ => None,
            };
            let start = measured.unwrap_or_else(|| {
                guessed += 1;
                f.offset_s + IPERF_SETUP_GUESS_S
            });
            // Interval times are relative to iperf3's test start, when data starts flowing.
            let offset = start - first.map_or(0.0, |iv| iv.start);
            let pts = measure::iperf_goodput_series(res, offset);
            if let (Some(a), Some(b)) = (pts.first(), pts.last()) {
                let half =
                    |i: Option<&slipstream_testbed::Interval>| i.map_or(0.0, |iv| (iv.end - iv.start) / 2.0);
                let last = res
                    .intervals
                    .iter()
                    .rev()
                    .find(|iv| !iv.omitted && iv.end > iv.start);
                self.result.flow_spans.push(crate::result::FlowSpan {
                    flow: f.spec.label.clone(),
                    start_s: a.0 - half(first),
                    end_s: b.0 + half(last),
                });
            }
            match self
                .result
                .series
                .iter_mut()
                .find(|s| s.name == "goodput" && s.flow == f.spec.label)
            {
                Some(s) => s.points.extend(pts),
                None => self.result.series.push(
                    Series::new("goodput", Unit::Mbps, &f.spec.label, f.spec.role, "receiver")
                        .with_points(pts),
                ),
            }
        }
        if guessed > 0 {
            self.result.notes.push(format!(
                "{guessed} flow(s) placed in time at spawn + {IPERF_SETUP_GUESS_S} s (no sender-side samples)"
            ));
        }
    }

    fn build_sampled_series(&mut self) {
        let samples = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()));
        self.build_goodput_series(&samples.ss);
        if !samples.ping.is_empty() {
            self.result
                .series
                .push(Series::new("rtt", Unit::Ms, "ping", Role::Probe, "ping").with_points(samples.ping));
        }
        // One entry per flow label: its port and role.
        let mut flows: Vec<(String, Role, u16, Direction)> = Vec::new();
        for f in &self.flows {
            if !flows.iter().any(|x| x.0 == f.spec.label) {
                flows.push((f.spec.label.clone(), f.spec.role, f.spec.port, f.spec.direction));
            }
        }
        for (label, role, port, dir) in &flows {
            let (mut cwnd, mut rtt, mut counter, mut inflight) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (t, socks) in &samples.ss {
                let best = socks
                    .iter()
                    .filter(|s| s.local_port == *port)
                    .max_by_key(|s| s.bytes());
                if let Some(s) = best {
                    if let Some(c) = s.cwnd_bytes() {
                        cwnd.push((*t, c as f64));
                    }
                    if let (Some(u), Some(m)) = (s.unacked.or(Some(0)), s.mss) {
                        inflight.push((*t, (u * m) as f64));
                    }
                    if let Some(r) = s.rtt_ms {
                        rtt.push((*t, r));
                    }
                }
                let total: u64 = socks
                    .iter()
                    .filter(|s| s.local_port == *port)
                    .map(SsSocket::bytes)
                    .sum();
                counter.push((*t, total as f64));
            }
            let rate = analysis::rate_from_counter(&counter);
            if *dir == Direction::Upload {
                // The server socket of an upload is the receiver: its cwnd/rtt say nothing.
                cwnd.clear();
                rtt.clear();
                inflight.clear();
            }
            for (name, unit, pts) in [
                ("cwnd", Unit::Bytes, cwnd),
                ("ss_rtt", Unit::Ms, rtt),
                ("inflight", Unit::Bytes, inflight),
                ("ss_goodput", Unit::Mbps, rate),
            ] {
                if !pts.is_empty() {
                    self.result
                        .series
                        .push(Series::new(name, unit, label, *role, "server-ss").with_points(pts));
                }
            }
            let (mut rwnd, mut est, mut piv, mut mode, mut drtt) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (t, dflows) in &samples.daemon {
                let best = dflows
                    .iter()
                    .filter(|f| f.sender_port() == *port || f.receiver_port() == *port)
                    .max_by(|a, b| {
                        a.acked_bytes
                            .unwrap_or(0.0)
                            .total_cmp(&b.acked_bytes.unwrap_or(0.0))
                    });
                let Some(f) = best else { continue };
                let t = *t;
                rwnd.extend(f.rwnd_bytes.map(|v| (t, v)));
                est.extend(f.cwnd_estimate_bytes.map(|v| (t, v)));
                piv.extend(f.piv_sum_seconds.map(|v| (t, v)));
                mode.extend(f.mode_code().map(|v| (t, v)));
                drtt.extend(f.rtt_seconds.map(|v| (t, v * 1000.0)));
            }
            for (name, unit, pts) in [
                ("rwnd", Unit::Bytes, rwnd),
                ("cwnd_estimate", Unit::Bytes, est),
                ("piv_sum", Unit::S, piv),
                ("mode", Unit::Count, mode),
                ("daemon_rtt", Unit::Ms, drtt),
            ] {
                if !pts.is_empty() {
                    self.result
                        .series
                        .push(Series::new(name, unit, label, *role, "daemon").with_points(pts));
                }
            }
        }
    }
}

/// Runs `body` once per alternative × repeat × case on a fresh [`Run`], collecting results. A
/// failed run fails the scenario (its testbed is torn down by `Drop` first).
pub fn run_all<C>(
    ctx: &LabContext,
    opts: &ScenarioOptions,
    cases: &[C],
    mut setup: impl FnMut(&C, Alternative) -> RunSetup,
    mut body: impl FnMut(&mut Run, &C) -> Result<()>,
) -> Result<Vec<RunResult>> {
    let count = opts.alternatives.len() * opts.repeats.max(1) as usize * cases.len();
    let mut out = Vec::new();
    let mut index = 0;
    for case in cases {
        for repeat in 0..opts.repeats.max(1) {
            for alt in &opts.alternatives {
                let mut s = setup(case, *alt);
                s.index = index;
                s.count = count;
                s.repeat = repeat;
                index += 1;
                let mut run = Run::start(ctx, opts, s)
                    .with_context(|| format!("starting run {}/{count} ({alt})", index))?;
                body(&mut run, case).with_context(|| format!("run {}/{count} ({alt})", index))?;
                let r = run
                    .finish()
                    .with_context(|| format!("finishing run {index}/{count} ({alt})"))?;
                ctx.progress
                    .log(&format!("[{}] run {index}/{count} {alt} done", r.scenario));
                out.push(r);
            }
        }
    }
    Ok(out)
}
