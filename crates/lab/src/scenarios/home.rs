//! `home`: a household's evening on one link (issue 22). Best effort: browsing (Key et al.
//! Sec. 5.3's web model, [`crate::web`]), a video call (UDP, 2.5 Mbit/s each way in 20 ms
//! frames) and a game (small UDP packets, 60 Hz down, 30 Hz up), both timed per datagram by
//! [`crate::web::owd`]. Background: a download over 8 connections from a LAN host without TCP
//! timestamps, a cloud-backup upload, and a two-way P2P transfer on the P2P port. First best
//! effort alone (the reference, "without background"), then best effort beside background under
//! each alternative: each best-effort class against its result without background (the issue's
//! criterion: within 5%), background by its share of the capacity best effort leaves free, and
//! TCP resets. Hosts, ports, timeline and metrics: [docs/lab/about.md](../../../../docs/lab/about.md#home).

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use slipstream_testbed::Ns;

use super::web::{web_goodput_mbit, web_metrics};
use super::{LabContext, ScenarioOptions};
use crate::alternatives::Alternative;
use crate::analysis::max_goodput_mbit;
use crate::harness::{run_all, FlowSpec, Run, RunSetup, BG_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Series, Table, Target, Unit};
use crate::web::owd::{self, Stream};
use crate::web::probe::quantile;
use crate::web::{self, join, spawn_in, ClientConfig};

const NAME: &str = "home";
/// Column label of the reference: best effort alone.
pub const WITHOUT_BG: &str = "no-background";
const TARGETS: &str = "issue 22 target";

/// LAN hosts: the browser, the call and the game, the downloader (no timestamps), the backup,
/// the P2P client.
const WEB_HOST: u8 = 1;
const RT_HOST: u8 = 2;
const DL_HOST: u8 = 3;
const BACKUP_HOST: u8 = 4;
const P2P_HOST: u8 = 5;
/// Server 1's object server; the background ports (all in the lab's background rule).
const WEB_PORT: u16 = 8080;
const P2P_PORT: u16 = BG_PORT;
const DL_PORT: u16 = BG_PORT + 1;
const BACKUP_PORT: u16 = BG_PORT + 2;

/// Background transfers: `(label, LAN host, server, server port, download, connections, row)`.
/// The P2P upload goes to server 2: one iperf3 server serves one test at a time.
type Transfer = (&'static str, u8, u8, u16, bool, u8, &'static str);
const BACKGROUND: [Transfer; 4] = [
    ("download", DL_HOST, 1, DL_PORT, true, 8, "download, 8 connections, no timestamps"),
    ("backup", BACKUP_HOST, 1, BACKUP_PORT, false, 1, "cloud backup upload"),
    ("p2p_down", P2P_HOST, 1, P2P_PORT, true, 1, "P2P download"),
    ("p2p_up", P2P_HOST, 2, P2P_PORT, false, 1, "P2P upload"),
];

/// Which of the background transfers run (`--set background=both|down|up`): all of them (the
/// evening), or one direction's, for a call's or a game's delay beside the background of one
/// link alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Directions {
    Both,
    Down,
    Up,
}

impl Directions {
    fn as_str(self) -> &'static str {
        match self {
            Directions::Both => "both",
            Directions::Down => "down",
            Directions::Up => "up",
        }
    }

    /// Whether the download (`true`) or the upload direction's transfers run.
    fn carries(self, download: bool) -> bool {
        match self {
            Directions::Both => true,
            Directions::Down => download,
            Directions::Up => !download,
        }
    }

    fn transfers(self) -> impl Iterator<Item = Transfer> {
        BACKGROUND.into_iter().filter(move |t| self.carries(t.4))
    }
}

impl std::str::FromStr for Directions {
    type Err = ();
    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        [Directions::Both, Directions::Down, Directions::Up].into_iter().find(|d| d.as_str() == s).ok_or(())
    }
}

/// A timed UDP stream between the call/game host and server 1.
struct Probe {
    name: &'static str,
    label: &'static str,
    down: bool,
    /// The receiver's port.
    port: u16,
    stream: Stream,
}

/// 5 datagrams of 1250 wire bytes every 20 ms: 2.5 Mbit/s.
const CALL: Stream = Stream { interval_s: 0.02, burst: 5, payload: 1250 - owd::OVERHEAD };
const PROBES: [Probe; 4] = [
    Probe { name: "call_down", label: "video call, down", down: true, port: 5400, stream: CALL },
    Probe { name: "call_up", label: "video call, up", down: false, port: 5401, stream: CALL },
    Probe {
        name: "game_down",
        label: "game, down (60 Hz)",
        down: true,
        port: 5402,
        stream: Stream { interval_s: 1.0 / 60.0, burst: 1, payload: 160 },
    },
    Probe {
        name: "game_up",
        label: "game, up (30 Hz)",
        down: false,
        port: 5403,
        stream: Stream { interval_s: 1.0 / 30.0, burst: 1, payload: 80 },
    },
];

/// The timeline: call and game from t = 0, the idle one-way delay measured until `idle`;
/// background from `idle`; browsing from `idle + warm` for `d`, the measured window.
#[derive(Clone, Copy, Debug)]
struct Times {
    idle: f64,
    warm: f64,
    d: f64,
}

impl Times {
    fn web(&self) -> f64 {
        self.idle + self.warm
    }
    fn end(&self) -> f64 {
        self.web() + self.d
    }
}

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let t = Times { idle: opts.scaled(5.0, 2.0), warm: opts.scaled(10.0, 8.0), d: opts.scaled(60.0, 20.0) };
    let sessions: u32 = opts.extra_or("sessions", 2)?;
    let directions: Directions = opts.extra_or("background", Directions::Both)?;
    let setup = |&background: &bool, alt| {
        let ports = vec![P2P_PORT, DL_PORT, BACKUP_PORT];
        RunSetup {
            servers: 2,
            clients: P2P_HOST,
            timestamps_off: vec![DL_HOST],
            server_ports: ports.clone(),
            background_ports: ports,
            ping: false,
            ..RunSetup::new(alt, t.end() + 2.0)
                .param("sessions", sessions)
                .param("idle_s", t.idle)
                .param("warmup_s", t.warm)
                .param("web_s", t.d)
                .param("background", background)
                .param("background_directions", directions.as_str())
        }
    };
    let body = |run: Run, &background: &bool| {
        let r = one_run(run, background, t, sessions, directions)?;
        let m = |name: &str| r.metric(name, None).unwrap_or(f64::NAN);
        let bg = if background {
            format!(", background {:.2} down / {:.2} up Mbit/s", m("bg_down_goodput"), m("bg_up_goodput"))
        } else {
            String::new()
        };
        ctx.progress.log(&format!(
            "[{NAME}] {}: web p95 {:.0} ms, call down p95 +{:.1} ms{bg}",
            r.alternative,
            m("web_rt_p95"),
            m("call_down_added_p95"),
        ));
        Ok(r)
    };
    let mut report = ScenarioReport::starting(NAME);
    let alone = ScenarioOptions { alternatives: vec![Alternative::NoControl], ..opts.clone() };
    run_all(ctx, &alone, &mut report, &[false], setup, body)?;
    run_all(ctx, opts, &mut report, &[true], setup, body)?;
    against_alone(&mut report.runs);
    let mut columns = vec![WITHOUT_BG.to_string()];
    columns.extend(opts.alternative_labels());
    report.title = format!(
        "home: a household's evening (browsing, video call, game beside a download, a backup and P2P), \
         {} Mbit/s, {} ms RTT, {} byte queue",
        opts.rate_label(),
        opts.rtt_ms,
        opts.effective_queue_bytes()
    );
    report.table = table(columns, &report.runs);
    report.notes = vec![
        format!(
            "Timeline per run: call and game from t = 0 (their idle one-way delay: the median over \
             [0.5, {:.0}) s), background from {:.0} s, browsing ({sessions} sessions, Key et al.'s web model) \
             measured over [{:.0}, {:.0}) s. Reference: the same without background, no-control.",
            t.idle,
            t.idle,
            t.web(),
            t.end()
        ),
        "Delay added = one-way delay quantile minus the idle median; loss = datagrams sent in the window \
         and not received within 2 s after it."
            .into(),
        "Free capacity per direction = TCP goodput ceiling − web goodput (down) − UDP wire rate received \
         (in goodput terms); ACKs are not counted."
            .into(),
        format!(
            "Background ports in the lab's one background rule: P2P {P2P_PORT} (download from server 1, \
             upload to server 2), download {DL_PORT}, backup {BACKUP_PORT}; TCP resets counted at the ISP \
             hop during the measured window (iperf3 ends after it)."
        ),
    ];
    ctx.write_report(report)
}

/// One run: see the module docs; web seeded with 1 + the repeat index.
fn one_run(
    mut run: Run,
    background: bool,
    t: Times,
    sessions: u32,
    directions: Directions,
) -> Result<RunResult> {
    let seed = 1 + u64::from(run.params().repeat);
    let server = web::Server::start(run.tb(), Ns::server(1), WEB_PORT)?;
    let epoch = Instant::now() - Duration::from_secs_f64(run.t());
    let (stop_s, listen_s) = (t.end() + 0.5, t.end() + 2.5);
    let mut probes = Vec::new();
    for p in &PROBES {
        let (server, host) = (Ns::server(1), Ns::client(RT_HOST));
        let (rx_ns, tx_ns) = if p.down { (host, server) } else { (server, host) };
        let port = p.port;
        let sock = join(spawn_in(run.tb(), rx_ns, move || Ok(UdpSocket::bind(("0.0.0.0", port))?)))?;
        let rx = std::thread::spawn(move || owd::receive(&sock, epoch, listen_s));
        let tb = run.tb();
        let dst = if p.down { tb.client_addr_of(RT_HOST, false) } else { tb.server_addr_of(1, false) };
        let stream = p.stream;
        let tx = spawn_in(tb, tx_ns, move || owd::send((dst, port).into(), stream, epoch, stop_s));
        probes.push((tx, rx));
    }
    run.wait_until(t.idle)?;
    if background {
        let secs = t.end() + 2.0 - run.t();
        for (label, host, srv, port, download, streams, _) in directions.transfers() {
            let spec = if download { FlowSpec::download } else { FlowSpec::upload };
            run.start_flow(spec(label, Role::Background, port, secs).between(host, srv).streams(streams))?;
        }
    }
    run.wait_until(t.web())?;
    let resets_before = run.tb().tcp_resets();
    let t_web = run.t();
    let server_addr = (run.tb().server_addr_of(1, false), WEB_PORT).into();
    let duration = Duration::from_secs_f64(t.d);
    let cfg = ClientConfig { server: server_addr, seed, sessions, duration, think_mean_s: 1.0 };
    let client = spawn_in(run.tb(), Ns::client(WEB_HOST), move || Ok(web::run_client(&cfg)));
    run.wait_until(t_web + t.d)?;
    let resets = run.tb().tcp_resets().and_then(|after| Ok(after.saturating_sub(resets_before?)));
    let records = join(client)?;
    let mut streams = Vec::new();
    for (tx, rx) in probes {
        streams.push((join(tx).context("probe sender")?, join(rx).context("probe receiver")?));
    }
    drop(server);
    let mut r = run.finish()?;
    r.params.extra.insert("seed".into(), seed.into());
    if !background {
        r.alternative = WITHOUT_BG.into();
    }
    let (a, b) = (t_web, t_web + t.d);
    let mut m = web_metrics(&records);
    let web_goodput = web_goodput_mbit(&records, t_web, a, b);
    m.push(Metric::new("web_goodput", Unit::Mbps, web_goodput).flow("web"));
    // UDP wire rate received per direction, Mbit/s.
    let (mut udp_down, mut udp_up) = (0.0, 0.0);
    for (p, (sent, got)) in PROBES.iter().zip(&streams) {
        let idle = quantile(&owd::stats(sent, got, 0.5, t.idle).delays_ms, 0.5);
        let s = owd::stats(sent, got, a, b);
        let name = |what: &str| format!("{}_{what}", p.name);
        for (q, what) in [(0.5, "added_p50"), (0.95, "added_p95"), (0.99, "added_p99")] {
            m.push(Metric::new(&name(what), Unit::Ms, quantile(&s.delays_ms, q) - idle).flow(p.name));
        }
        m.push(Metric::new(&name("owd_p95"), Unit::Ms, quantile(&s.delays_ms, 0.95)).flow(p.name));
        m.push(Metric::new(&name("idle_owd"), Unit::Ms, idle).flow(p.name));
        m.push(Metric::new(&name("loss"), Unit::Ratio, s.loss()).flow(p.name));
        m.push(Metric::new(&name("reordered"), Unit::Count, s.reordered as f64).flow(p.name));
        r.series.push(added_delay_series(p.name, got, idle));
        let wire = s.received as f64 * (p.stream.payload + owd::OVERHEAD) as f64 * 8.0 / (b - a) / 1e6;
        *(if p.down { &mut udp_down } else { &mut udp_up }) += wire;
    }
    if background {
        let goodput =
            |label: &str| r.series("goodput", label).and_then(|s| s.mean_between(a, b)).unwrap_or(0.0);
        let (mut down, mut up) = (0.0, 0.0);
        for (label, _, _, _, download, _, _) in directions.transfers() {
            let g = goodput(label);
            *(if download { &mut down } else { &mut up }) += g;
            m.push(Metric::new(&format!("{label}_goodput"), Unit::Mbps, g).flow(label));
        }
        // What best effort leaves of the TCP goodput ceiling, UDP frames counted as TCP's would be.
        let ceiling = max_goodput_mbit(r.params.rate_mbit);
        let as_goodput = 1448.0 / 1514.0;
        let free_down = ceiling - web_goodput - udp_down * as_goodput;
        let free_up = max_goodput_mbit(r.params.upload_rate()) - udp_up * as_goodput;
        if directions.carries(true) {
            m.push(Metric::new("bg_down_goodput", Unit::Mbps, down));
            m.push(Metric::new("bg_down_free_share", Unit::Ratio, down / free_down.max(1e-9)));
        }
        if directions.carries(false) {
            m.push(Metric::new("bg_up_goodput", Unit::Mbps, up));
            m.push(Metric::new("bg_up_free_share", Unit::Ratio, up / free_up.max(1e-9)));
        }
    }
    match resets {
        Ok(n) => m.push(Metric::new("tcp_resets", Unit::Count, n as f64)),
        Err(e) => r.notes.push(format!("TCP resets not counted: {e:#}")),
    }
    r.metrics.extend(m);
    Ok(r)
}

/// Bins of one probe stream's arrivals: each bin's largest one-way delay added (over the idle
/// median), ms, binned by arrival time (s since the run's t = 0, the bin's end): what a call's jitter
/// buffer sees.
const OWD_BIN_S: f64 = 0.1;

/// The `owd_added` series of one probe stream (see [`OWD_BIN_S`]).
fn added_delay_series(name: &str, arrivals: &[owd::Arrival], idle_ms: f64) -> Series {
    let mut series = Series::new("owd_added", Unit::Ms, name, Role::Probe, "receiver");
    for a in arrivals {
        let bin_end = ((a.recv_s / OWD_BIN_S).floor() + 1.0) * OWD_BIN_S;
        let added = (a.recv_s - a.sent_s) * 1000.0 - idle_ms;
        match series.points.last_mut() {
            Some((t, v)) if (*t - bin_end).abs() < 1e-9 => *v = v.max(added),
            _ => series.points.push((bin_end, added)),
        }
    }
    series
}

/// The metrics each background run divides by the same repeat's run without background:
/// `<name>_vs_alone`.
fn kept_names() -> Vec<String> {
    let fixed = ["web_rt_p50", "web_rt_p95", "web_goodput"].map(String::from);
    fixed.into_iter().chain(PROBES.iter().map(|p| format!("{}_owd_p95", p.name))).collect()
}

/// Adds `<name>_vs_alone` (this run / the run without background of the same repeat) for each
/// of [`kept_names`] to every background run, and each probe stream's `<probe>_bg_added_p95`:
/// its p95 one-way delay added (over each run's idle median) less the same without background,
/// the delay the background adds (a
/// call's own 20 ms frames queue behind each other, 2 ms at p95 at 10 Mbit/s, with or without
/// background; the "delay added ≤ 5 ms at the 95th percentile").
pub fn against_alone(runs: &mut [RunResult]) {
    let reference: Vec<RunResult> = runs.iter().filter(|r| r.alternative == WITHOUT_BG).cloned().collect();
    for r in runs.iter_mut().filter(|r| r.alternative != WITHOUT_BG) {
        let Some(base) = reference.iter().find(|b| b.params.repeat == r.params.repeat) else {
            continue;
        };
        for name in kept_names() {
            if let (Some(v), Some(b)) = (r.metric(&name, None), base.metric(&name, None)) {
                r.metrics.push(Metric::new(&format!("{name}_vs_alone"), Unit::Ratio, v / b));
            }
        }
        for p in &PROBES {
            let name = format!("{}_added_p95", p.name);
            if let (Some(v), Some(b)) = (r.metric(&name, None), base.metric(&name, None)) {
                let added = Metric::new(&format!("{}_bg_added_p95", p.name), Unit::Ms, v - b);
                r.metrics.push(added.flow(p.name));
            }
        }
    }
}

fn table(columns: Vec<String>, runs: &[RunResult]) -> Table {
    let target = |t| Paper::target(t, TARGETS);
    let (slower, less) = (Target::at_most(1.05), Target::at_least(0.95));
    let mut rows = vec![
        RowSpec::new("web: response time, median", Unit::Ms, "web_rt_p50"),
        RowSpec::new("web: response time, p95", Unit::Ms, "web_rt_p95"),
        RowSpec::new("web: median / without background", Unit::Ratio, "web_rt_p50_vs_alone")
            .paper(target(slower)),
        RowSpec::new("web: p95 / without background", Unit::Ratio, "web_rt_p95_vs_alone")
            .paper(target(slower)),
        RowSpec::new("web: goodput", Unit::Mbps, "web_goodput"),
        RowSpec::new("web: goodput / without background", Unit::Ratio, "web_goodput_vs_alone")
            .paper(target(less)),
        RowSpec::new("web: objects fetched", Unit::Count, "web_objects"),
        RowSpec::new("web: objects failed", Unit::Count, "web_failed"),
    ];
    for p in &PROBES {
        let row = |what: &str, unit, name: &str| {
            RowSpec::new(format!("{}: {what}", p.label), unit, format!("{}_{name}", p.name))
        };
        rows.extend([
            row("one-way delay added, p50", Unit::Ms, "added_p50"),
            row("one-way delay added, p95", Unit::Ms, "added_p95"),
            row("one-way delay added, p99", Unit::Ms, "added_p99"),
            row("p95 one-way delay / without background", Unit::Ratio, "owd_p95_vs_alone")
                .paper(target(slower)),
            row("p95 delay added less the same without background", Unit::Ms, "bg_added_p95")
                .paper(target(Target::at_most(5.0))),
            row("loss", Unit::Ratio, "loss"),
        ]);
    }
    for (label, .., what) in BACKGROUND {
        rows.push(RowSpec::new(format!("background: {what}"), Unit::Mbps, format!("{label}_goodput")));
    }
    rows.extend([
        RowSpec::new(
            "background download / capacity best effort leaves free",
            Unit::Ratio,
            "bg_down_free_share",
        ),
        RowSpec::new("background upload / capacity best effort leaves free", Unit::Ratio, "bg_up_free_share"),
        RowSpec::new("TCP resets while measured", Unit::Count, "tcp_resets")
            .paper(target(Target::at_most(0.0))),
    ]);
    if runs.iter().any(|r| r.metric("flows_failed", None).is_some()) {
        rows.push(RowSpec::new("iperf3 flows that failed", Unit::Count, "flows_failed"));
    }
    let mut table = Table::of(columns, runs, rows);
    table.add_machine_rows(&runs.iter().collect::<Vec<_>>(), None);
    table
}

#[cfg(test)]
#[path = "home_tests.rs"]
mod tests;
