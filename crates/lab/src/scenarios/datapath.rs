//! `datapath`: what queueing packets to user space costs on the router: plain kernel forwarding,
//! `nfq-accept` (Slipstream's queues and rules, every packet accepted unchanged), `slipstreamd`
//! with NFQUEUE and with its eBPF datapath, side by side in alternating rounds on a testbed with
//! no bottleneck and no delay element. Packets/s, CPU per million packets and a TCP probe's RTT
//! under fixed load; `--set cpu_rates=...` adds the daemon's CPU per Gbit/s by download rate
//! (`datapath/rates.rs`). The modes, load and measures: docs/lab/about.md, "What each
//! scenario measures".

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use slipstream_testbed::{Ns, Testbed, TopologySpec, ISP_DOWN_IF, ROUTER_LAN_IF, ROUTER_WAN_IF};

use crate::alternatives::{ActiveAlternative, AltEnv, Alternative};
use crate::result::{now_unix, Metric, Role, RunParams, RunResult, ScenarioReport, Series, Unit};
use crate::scenarios::{LabContext, ScenarioOptions, LAB_PREFIX};

mod cpu;
mod rates;
mod table;
use crate::web::probe::{quantile, tcp_rtt_probe};
use crate::web::{join, spawn_in, Server};
use cpu::MachineCpu;
use slipstream_testbed::daemon::process_cpu_seconds;
use table::table;

const NAME: &str = "datapath";
const LOAD_PORT: u16 = 6881;
const PROBE_PORT: u16 = 6882;
/// Rate of the download during the latency probe, Mbit/s.
const LOAD_MBIT: f64 = 20.0;
const MSS: &str = "536";

/// The ways of forwarding, in the order of even rounds (`kernel` first: ratios are taken to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Kernel,
    NfqAccept,
    Slipstreamd,
    SlipstreamdEbpf,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Kernel, Mode::NfqAccept, Mode::Slipstreamd, Mode::SlipstreamdEbpf];

    pub fn label(self) -> &'static str {
        match self {
            Mode::Kernel => "kernel",
            Mode::NfqAccept => "nfq-accept",
            Mode::Slipstreamd => "slipstreamd",
            Mode::SlipstreamdEbpf => "slipstreamd-ebpf",
        }
    }
}

/// The mode order of round `round`: forward on even rounds, reversed on odd ones.
pub fn round_order(round: u32) -> Vec<Mode> {
    let mut v = Mode::ALL.to_vec();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

/// Packets received by the router on its WAN and LAN sides (both directions of the download).
/// `ip netns exec` mounts the namespace's own sysfs.
fn router_packets(tb: &Testbed) -> Result<u64> {
    let path = |dev| format!("/sys/class/net/{dev}/statistics/rx_packets");
    let out = tb.run_in(Ns::Router, &["cat", &path(ROUTER_WAN_IF), &path(ROUTER_LAN_IF)])?;
    let counts: Vec<u64> = out.split_whitespace().map(str::parse).collect::<Result<_, _>>()?;
    Ok(counts.iter().sum())
}

/// A mode set up on the router.
enum Active {
    Kernel,
    /// `nfq-accept` and the file its stdout and stderr go to (`ready`, then a summary at exit).
    Nfq(Child, PathBuf),
    Daemon(ActiveAlternative),
}

struct Env<'a> {
    opts: &'a ScenarioOptions,
    tb: &'a Testbed,
    alt_env: AltEnv,
    nfq_bin: PathBuf,
    nfq_config: PathBuf,
    /// Length of each measurement (throughput and CPU; latency), s.
    measure_s: f64,
}

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let mut report = ScenarioReport::starting(NAME);
    let nfq_bin = ctx.daemon_bin.with_file_name("nfq-accept");
    if !nfq_bin.is_file() {
        bail!(
            "{} not found: build it first (cargo build --release -p slipstream-lab --bins)",
            nfq_bin.display()
        );
    }
    let work_dir = ctx.run_dir(NAME, report.started_unix)?;
    let spec = TopologySpec {
        rate_mbit: 10_000.0,
        one_way_delay_ms: 0.0,
        queue_bytes: Some(4_000_000),
        name_prefix: slipstream_testbed::unique_prefix(LAB_PREFIX),
        delay_bin: Some(ctx.delay_bin.clone()),
        ipv6: false,
        ..TopologySpec::default()
    };
    let tb = Testbed::build(spec).context("building the topology")?;
    for (ns, dev) in [(Ns::Isp, ISP_DOWN_IF), (Ns::Router, ROUTER_WAN_IF)] {
        tb.run_in(ns, &["tc", "qdisc", "del", "dev", dev, "root"]).context("removing the tbf shaper")?;
    }
    // As every home router does: conntrack and NAT on every packet, in every mode.
    tb.masquerade().context("masquerading on the router's WAN side")?;
    tb.start_iperf_server(LOAD_PORT)?;
    let _probe_server = Server::start(&tb, Ns::Server, PROBE_PORT)?;
    let alt_env = AltEnv::new(ctx.daemon_bin.clone(), opts, work_dir.clone(), vec![LOAD_PORT, PROBE_PORT]);
    let nfq_config = work_dir.join("nfq-accept.toml");
    let text = Alternative::Slipstream
        .daemon_config(&alt_env, &work_dir.join("nfq-accept.sock"))
        .expect("slipstream runs a daemon");
    std::fs::write(&nfq_config, text)?;
    let env = Env { opts, tb: &tb, alt_env, nfq_bin, nfq_config, measure_s: opts.scaled(10.0, 5.0) };
    let rounds = opts.repeats.max(2);
    let runs = &mut report.runs;
    for round in 0..rounds {
        let mut this_round = Vec::new();
        for (i, mode) in round_order(round).into_iter().enumerate() {
            ctx.check_interrupted()?;
            let r = measure(&env, mode, round, i)
                .with_context(|| format!("round {}/{rounds}, {}", round + 1, mode.label()))?;
            let m = |name, period| r.metric(name, Some(period)).unwrap_or(f64::NAN);
            ctx.progress.log(&format!(
                "[{NAME}] round {}/{rounds} {}: {:.0} packets/s, CPU {:.2} s (process) / {:.2} s (machine) per Mpkt, probe RTT median {:.0} us",
                round + 1,
                mode.label(),
                m("pps", "throughput"),
                m("process_cpu_per_mpkt", "throughput"),
                m("machine_busy_per_mpkt", "throughput"),
                m("probe_rtt_p50", "latency"),
            ));
            this_round.push(r);
        }
        add_ratios(&mut this_round);
        runs.extend(this_round);
    }
    let mut rate_notes = Vec::new();
    if opts.extra("cpu_rates").is_some() {
        runs.extend(rates::cpu_by_rate(&env, &opts.list("cpu_rates", "")?, &mut rate_notes)?);
    }
    let columns: Vec<String> = Mode::ALL.iter().map(|m| m.label().to_string()).collect();
    report.title =
        "Router datapath cost: kernel forwarding vs NFQUEUE accept-all vs slipstreamd (NFQUEUE, eBPF)".into();
    report.table = table(columns, &report.runs);
    report.notes = vec![
        format!(
            "No bottleneck, no delay element; load = iperf3 download with MSS {MSS} on port {LOAD_PORT} \
             ({0:.0} s unlimited for packets/s and CPU, {0:.0} s at {LOAD_MBIT} Mbit/s with a TCP probe for 64 bytes every \
             10 ms on port {PROBE_PORT} for latency); {rounds} rounds, mode order alternating.",
            env.measure_s
        ),
        "process CPU = utime+stime of nfq-accept / slipstreamd; machine CPU = /proc/stat deltas of both cores \
         (includes the iperf3 endpoints, equal work in every mode); all per million packets forwarded \
         (rx of wan0 + br-lan)."
            .into(),
        "--alternatives does not apply to this scenario.".into(),
        "The router masquerades its WAN side (conntrack and NAT on every packet, in every mode, kernel included)."
            .into(),
    ];
    report.notes.extend(rate_notes);
    ctx.write_report(report)
}

/// Sets `mode` up and lets it settle; returns it with its user-space process (none for `kernel`).
fn setup_mode(env: &Env, mode: Mode) -> Result<(Active, Option<u32>)> {
    let active = match mode {
        Mode::Kernel => (Active::Kernel, None),
        Mode::NfqAccept => {
            let out = env.alt_env.work_dir.join("nfq-accept.out");
            let log = std::fs::File::create(&out)?;
            let mut c = env.tb.exec(
                Ns::Router,
                &[env.nfq_bin.as_os_str(), "--config".as_ref(), env.nfq_config.as_os_str()],
            );
            c.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
            let mut child = c.spawn().context("starting nfq-accept")?;
            let ready = || std::fs::read_to_string(&out).is_ok_and(|t| t.lines().any(|l| l == "ready"));
            if !slipstream_testbed::cmd::wait_until(Duration::from_secs(10), ready) {
                let _ = child.kill();
                let _ = child.wait();
                bail!("nfq-accept not ready within 10 s: {}", std::fs::read_to_string(&out)?.trim());
            }
            let pid = child.id();
            (Active::Nfq(child, out), Some(pid))
        }
        _ => {
            // Slipstream's own config, with the eBPF datapath for the eBPF mode.
            let ebpf = mode == Mode::SlipstreamdEbpf;
            let alt = if ebpf { Alternative::SlipstreamEbpf } else { Alternative::Slipstream };
            let a = alt.setup(env.tb, &env.alt_env)?;
            let daemon = a.daemon.as_ref().expect("slipstream runs a daemon");
            if ebpf && !daemon.log().contains("eBPF datapath: tc programs on") {
                bail!("slipstreamd did not start the eBPF datapath:\n{}", daemon.log());
            }
            let pid = daemon.pid().context("cannot find the slipstreamd process")?;
            (Active::Daemon(a), Some(pid))
        }
    };
    std::thread::sleep(Duration::from_millis(500));
    Ok(active)
}

fn teardown_mode(env: &Env, active: Active, notes: &mut Vec<String>) -> Result<()> {
    match active {
        Active::Kernel => {}
        Active::Nfq(mut child, out) => {
            slipstream_testbed::cmd::signal(child.id(), libc::SIGTERM);
            let status = child.wait()?;
            let text = std::fs::read_to_string(&out)?;
            if !status.success() {
                bail!("nfq-accept exited with {status}: {}", text.trim());
            }
            notes.extend(text.lines().last().map(String::from));
        }
        Active::Daemon(a) => {
            let log = a.log_path.clone();
            notes.extend(a.teardown(env.tb)?);
            // The eBPF datapath's totals, logged at exit.
            let log = log.and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
            notes.extend(d_log_line(&log, "eBPF datapath: "));
        }
    }
    Ok(())
}

fn measure(env: &Env, mode: Mode, round: u32, position: usize) -> Result<RunResult> {
    let tb = env.tb;
    let mut notes = Vec::new();
    let (active, pid) = setup_mode(env, mode)?;
    let t_start = now_unix();
    let cc = env.opts.cc.clone();

    // Throughput and CPU.
    let secs = env.measure_s.ceil() as u32;
    let counters = || -> Result<_> {
        let cpu = pid.and_then(|pid| process_cpu_seconds(pid).ok());
        Ok((router_packets(tb)?, cpu, MachineCpu::read(), Instant::now()))
    };
    let (p0, c0, m0, i0) = counters()?;
    let res = tb.run_download(LOAD_PORT, secs, &cc, &["-M", MSS])?.wait()?;
    let (p1, c1, m1, i1) = counters()?;
    let (packets, dt) = (p1.saturating_sub(p0) as f64, (i1 - i0).as_secs_f64());
    let per_m = |x: f64| x * 1e6 / packets.max(1.0);
    let proc_cpu = c0.zip(c1).map_or(0.0, |(a, b)| b - a);
    let machine = m0.zip(m1).map_or(MachineCpu::default(), |(a, b)| b.since(&a));

    // Latency under a fixed load.
    let load = format!("{LOAD_MBIT}M");
    let bg = tb.run_download(LOAD_PORT, secs + 2, &cc, &["-M", MSS, "-b", &load])?;
    std::thread::sleep(Duration::from_secs(1));
    let server = (tb.server_addr(false), PROBE_PORT).into();
    let probe =
        spawn_in(tb, Ns::Client, move || tcp_rtt_probe(server, 64, secs * 100, Duration::from_millis(10)));
    let rtts = join(probe).context("probe")?;
    let loaded = bg.wait()?;
    teardown_mode(env, active, &mut notes)?;

    let extra = BTreeMap::from([
        ("round".to_string(), serde_json::json!(round)),
        ("position_in_round".to_string(), serde_json::json!(position)),
        ("mss".to_string(), serde_json::json!(536)),
        ("load_mbit".to_string(), serde_json::json!(LOAD_MBIT)),
    ]);
    let rtt_us = |q: f64| quantile(&rtts, q) * 1e6;
    let probe_pts: Vec<(f64, f64)> =
        rtts.iter().enumerate().map(|(i, r)| (1.0 + i as f64 * 0.01, r * 1e6)).collect();
    Ok(RunResult {
        scenario: NAME.into(),
        alternative: mode.label().into(),
        started_unix: t_start,
        // No bottleneck and no delay: rate, RTT and queue stay 0.
        params: RunParams { duration_s: 2.0 * env.measure_s, cc, repeat: round, extra, ..Default::default() },
        series: vec![
            Series::new("probe_rtt", Unit::Us, "probe", Role::Probe, "TCP probe").with_points(probe_pts)
        ],
        metrics: vec![
            Metric::new("pps", Unit::PacketsPerS, packets / dt).period("throughput"),
            Metric::new("goodput", Unit::Mbps, res.goodput_mbps).period("throughput").flow("load"),
            Metric::new("packets", Unit::Packets, packets).period("throughput"),
            Metric::new("process_cpu_per_mpkt", Unit::S, per_m(proc_cpu)).period("throughput"),
            Metric::new("machine_busy_per_mpkt", Unit::S, per_m(machine.busy)).period("throughput"),
            Metric::new("machine_system_per_mpkt", Unit::S, per_m(machine.system)).period("throughput"),
            Metric::new("machine_softirq_per_mpkt", Unit::S, per_m(machine.softirq)).period("throughput"),
            Metric::new("machine_user_per_mpkt", Unit::S, per_m(machine.user)).period("throughput"),
            Metric::new("probe_rtt_p50", Unit::Us, rtt_us(0.5)).period("latency"),
            Metric::new("probe_rtt_p90", Unit::Us, rtt_us(0.9)).period("latency"),
            Metric::new("probe_rtt_p99", Unit::Us, rtt_us(0.99)).period("latency"),
            Metric::new("loaded_goodput", Unit::Mbps, loaded.goodput_mbps).period("latency").flow("load"),
        ],
        notes,
        ..Default::default()
    })
}

/// The daemon's last log line containing `needle`, from the needle on (its totals at exit).
fn d_log_line(log: &str, needle: &str) -> Option<String> {
    let line = log.lines().rev().find(|l| l.contains(needle) && l.contains("reported"))?;
    line.find(needle).map(|i| line[i..].to_string())
}

/// Adds `pps_ratio` and `probe_rtt_added_p50` (vs the round's kernel run) to each run, and
/// `process_cpu_vs_nfqueue` (process CPU per packet over the round's NFQUEUE `slipstreamd`'s).
pub fn add_ratios(round: &mut [RunResult]) {
    let cpu = ("process_cpu_per_mpkt", "throughput");
    relative(round, Mode::Slipstreamd, cpu, ("process_cpu_vs_nfqueue", Unit::Ratio), |v, base| v / base);
    relative(round, Mode::Kernel, ("pps", "throughput"), ("pps_ratio", Unit::Ratio), |v, k| v / k);
    relative(round, Mode::Kernel, ("probe_rtt_p50", "latency"), ("probe_rtt_added_p50", Unit::Us), |v, k| {
        v - k
    });
}

/// Adds metric `new` = `op(value, reference value)` of metric `name` in `period` to each run of
/// `round` that has it; the reference is the round's run of mode `reference`.
fn relative(
    round: &mut [RunResult],
    reference: Mode,
    (name, period): (&str, &str),
    (new, unit): (&str, Unit),
    op: fn(f64, f64) -> f64,
) {
    let of = |r: &RunResult| r.metric(name, Some(period));
    let Some(base) = round.iter().find(|r| r.alternative == reference.label()).and_then(of) else {
        return;
    };
    for r in round.iter_mut() {
        if let Some(v) = of(r) {
            r.metrics.push(Metric::new(new, unit, op(v, base)).period(period));
        }
    }
}

#[cfg(test)]
#[path = "datapath_tests.rs"]
mod tests;
