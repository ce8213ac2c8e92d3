//! End to end, floods and overload (issue 12): a SYN flood from spoofed sources through the
//! router while a best-effort download runs, with `slipstreamd` classing the flooded port as
//! background (tests/configs/flood.toml: the shipped rules, `limits.max_flows = 4096`).
//!
//! Setup. The testbed (10 Mbit/s, one-BDP queue, 100 ms RTT) gets its flood namespace
//! (`TopologySpec::flood_source`): a WAN-side namespace wired straight to the router, unshaped and
//! undelayed, from which `slipstream-synflood` sends SYNs from 198.18.0.0/15 (a new 4-tuple each)
//! to the LAN host's port 6881, which the `bittorrent-incoming` rule classes as background. The
//! flood does not cross the access link on purpose: through the 10 Mbit/s tbf it could not exceed
//! ~20 000 SYNs/s and would take best effort's bandwidth itself, and through the delay element
//! it would be dropped by that element's queue, not by the router; straight in, it loads the
//! router and the daemon as hard as the generator can. The LAN host drops the flood's SYNs in its
//! own INPUT chain (so it sends no resets); that rule's counter is what arrived.
//!
//! Conntrack. Every flood SYN is a new conntrack entry in the router (SYN_SENT, 120 s), and the
//! daemon's classification needs conntrack (the connmark). `nf_conntrack_max` and
//! `nf_conntrack_buckets` are global on this kernel: read-only in a child namespace, writable only
//! in the host's (`nf_conntrack_count`, the timeouts such as `nf_conntrack_tcp_timeout_syn_sent`,
//! and the statistics of `conntrack -S` are per namespace). When the flood's SYNs would not fit
//! below the host's `nf_conntrack_max` with 16 Ki to spare, the test raises it (in the host
//! namespace, the only place it can be set) and restores the old value at the end; the timeouts
//! are left as they are. The router's `conntrack -S` must then show no drop, early drop or failed
//! insert.
//!
//! Phases, one best-effort download (iperf3 cubic, port 5201) across all of them:
//!
//! 1. quiet: no flood, best effort's reference goodput;
//! 2. bounded flood: `syns` SYNs at `rate` per second;
//! 3. overload: `overload_syns` SYNs as fast as the generator can send them;
//! 4. overload at twice what the daemon can serve: the same, with the daemon's CPU capped (cgroup
//!    `cpu.max` / `cpu.cfs_quota_us`, 10 ms periods) to a share that serves about a third of
//!    what phase 3 offered, at the CPU cost per packet phase 3 measured. The generator alone
//!    cannot offer twice what an uncapped daemon serves on the 2-core test VM: its SYNs cost the
//!    kernel more (conntrack, the rules, the queue, the bridge) than the daemon's verdicts. A
//!    machine without a cgroup CPU controller skips this phase.
//!
//! Asserted, for every flood phase:
//!
//! * (a) every SYN sent arrived at the LAN host (its counter equals the generator's count): the
//!   router lost none, the daemon overloaded or not; every one passed the NFQUEUE rules;
//! * (b) the daemon's flow table stayed at or below `max_flows` (`slipstream_flows_active`,
//!   sampled every second, and `slipstream_flows_max`), and every SYN the daemon handled either
//!   created a flow or was refused (`slipstream_packets_passed_total{reason="table_full"}`, which
//!   the bounded flood must raise);
//! * (c) the daemon's peak resident memory (VmHWM) stays below [`rss_bound_kib`]: its resident
//!   size before the flood plus `max_flows` x 4 KiB (about three times what a flow costs: 4096
//!   flows took 4.7 MiB) plus 8 MiB; and it grows by at most 2 MiB after the bounded flood, when
//!   the table is long full (memory follows the table, not the flood);
//! * (d) best-effort goodput during the bounded flood is at least [`BE_KEPT`] of its goodput in
//!   the quiet phase (the overload phases' are reported);
//! * (e) packets the kernel accepted without the daemon (fail-open) are reported: hits of the
//!   SLIPSTREAM chain's NFQUEUE rules (`iptables-legacy -t mangle -vnxL SLIPSTREAM`) minus
//!   packets the daemon handled (`slipstream_packets_total`), split into those the queue refused
//!   (hits minus the queue's `slipstream_nfqueue_packets_total`: queue at `queue_max_len`) and
//!   those the daemon's netlink socket had no room for (queued minus handled, which the socket's
//!   drop counter in /proc/net/netlink confirms); in phase 4 the offered rate must be at least
//!   twice the rate the daemon handled;
//! * (f) the daemon's CPU time (utime + stime) over each flood is reported.
//!
//! `syn_flood_100k` (CI): 100 000 SYNs at 5 000/s, then twice 70 000 as fast as possible (the
//! capped phase can take up to three tries, so up to 380 000 entries: `nf_conntrack_max` is
//! raised to 396 384 for the run), 53 s. `syn_flood_1m` (ignored): 1 000 000 SYNs at 20 000/s,
//! then twice 500 000 or more (`nf_conntrack_max` raised to 3 016 384 for the run), 131 s.
//! A CI run once had the capped phase retry and conntrack early-dropped 47 911 entries at the
//! default 262 144: the room is sized for every try now.
//!
//! Measured on the 2-core test VM (release build, a fuzzer busy on one core), `syn_flood_1m`:
//! every one of the 2 000 000 SYNs arrived, none dropped on the path or by conntrack. Bounded
//! flood (1 000 000 at 20 000/s): all handled by the daemon, none bypassed; 20 480 flows
//! created, 16 384 evicted (idle 10 s), 979 520 refused (`table_full`); 4096 flows active at
//! most; daemon CPU 9.05 s (9.1 us per SYN); best effort 9.56 Mbit/s, as without the flood.
//! Overload (54 900 SYNs/s offered, 1.26x what the daemon served): 20.6% bypassed. Capped at 16%
//! of a CPU (3.8x): 73.5% bypassed. Best effort 9.56 Mbit/s in both. The daemon's VmRSS: 5.1 MiB
//! before, 9.8 MiB with the table full (1.2 KiB per flow), the same after 2 000 000 SYNs (VmHWM
//! 9.8 MiB, bound 29.1 MiB). `syn_flood_100k`: the same picture (0 lost, 0 bypassed at 5 000/s,
//! 26.7% at 56 800/s, 76.6% at 4.3x; VmHWM 9.8 MiB; best effort 100%).
//!
//! Every packet that bypassed the daemon here did so because its netlink socket was full, never
//! because the queue reached `queue_max_len` (4096): the socket keeps the default receive buffer
//! (`net.core.rmem_default`, 212 992 bytes), which holds about 256 queued SYNs (at most 256
//! waiting were seen). The kernel numbers such packets (`slipstream_nfqueue_packets_total`) and
//! then accepts them (fail-open) without counting them as dropped, so
//! `slipstream_nfqueue_dropped_packets_total{reason="socket_full"}` stays 0; the socket's drop
//! counter (/proc/net/netlink) has them. With the buffer raised to 16 MiB (an experiment, not
//! this code) the overruns were 0 and the bypassed packets were all refused by a full queue.
//!
//! Needs root and the release binaries (`slipstreamd`, `slipstream-delay`,
//! `slipstream-synflood`; scripts/test.sh builds them and sets `SLIPSTREAMD_BIN`,
//! `SLIPSTREAM_DELAY_BIN`, `SLIPSTREAM_SYNFLOOD_BIN`): ignored by default, run with `--ignored`
//! (a machine without namespaces then fails).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use slipstream::{require_netns, start_daemon};
use slipstream_testbed::daemon::{metric_value, process_cpu_seconds, process_memory_kib, Daemon};
use slipstream_testbed::{
    cmd, unique_prefix, workspace_binary, Ns, Testbed, TopologySpec, FLOOD_IF, FLOOD_SOURCES, HOST_IF,
    ROUTER_FLOOD_IF,
};

#[path = "flood/counters.rs"]
mod counters;
use counters::*;

#[path = "flood/limits.rs"]
mod limits;
use limits::*;

const BE_PORT: u16 = 5201;
/// The flooded port: `bittorrent-incoming` (local ports 6881-6999) classes it background.
const FLOOD_PORT: u16 = 6881;
/// The daemon's ACK queue (tests/configs/flood.toml), where SYNs go.
const ACK_QUEUE: &str = "8470";
/// The LAN host's chain its INPUT rule for the flood's SYNs jumps to (then DROP).
const FLOOD_CHAIN: &str = "ss-flood";
/// Best effort settles (slow start) before the quiet phase is measured.
const WARMUP_SECS: f64 = 4.0;
/// The quiet phase before the first flood, and the pause between floods.
const QUIET_SECS: f64 = 10.0;
const PAUSE_SECS: f64 = 2.0;
/// Tries of the capped overload phase: the generator slows beside a capped daemon, so the ratio
/// it reaches can fall short of twice; each try sends `overload_syns` more SYNs.
const CAPPED_TRIES: u64 = 3;
/// Goodput windows leave this much out at each end (iperf3's clock starts after its connect).
const EDGE_SECS: f64 = 0.5;
/// Best effort must keep this share of its quiet-phase goodput during the bounded flood.
const BE_KEPT: f64 = 0.93;
/// Per-flow allowance of the memory bound, the slack on top, and the growth allowed once the
/// table is full.
const PER_FLOW_KIB: u64 = 4;
const SLACK_KIB: u64 = 8 * 1024;
const GROWTH_KIB: u64 = 2 * 1024;
/// Phase 4 aims at an offered load this many times what the capped daemon can serve.
const CAP_OVERLOAD: f64 = 3.0;

/// The daemon's peak resident memory may not exceed this (see the module docs): `base` is its
/// resident size before the flood.
fn rss_bound_kib(base_kib: u64, max_flows: u64) -> u64 {
    base_kib + max_flows * PER_FLOW_KIB + SLACK_KIB
}

struct Plan {
    /// SYNs of the bounded flood and their rate per second.
    syns: u64,
    rate: u64,
    /// SYNs of each overload phase (as fast as possible).
    overload_syns: u64,
    /// How long the best-effort download allows for both overload phases.
    overload_budget_secs: f64,
}

fn synflood_binary() -> PathBuf {
    workspace_binary("slipstream-synflood", "SLIPSTREAM_SYNFLOOD_BIN")
}

/// tests/configs/flood.toml with a control socket of its own.
fn config(dir: &Path) -> (PathBuf, slipstream_config::Config) {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/configs/flood.toml");
    let text = std::fs::read_to_string(&shipped)
        .expect("tests/configs/flood.toml")
        .replace(
            "/tmp/slipstream-flood-test.sock",
            &dir.join("control.sock").display().to_string(),
        );
    let path = dir.join("flood.toml");
    std::fs::write(&path, text).expect("write config");
    let config = slipstream_config::load(&path).expect("config is valid");
    (path, config)
}

/// What a flood phase needs to know of the run.
struct Run<'a> {
    tb: &'a Testbed,
    daemon: &'a Daemon,
    pid: u32,
    /// The best-effort download's start.
    t0: Instant,
    /// Index of the next unused source tuple.
    next_source: u64,
}

impl Run<'_> {
    /// Sends `count` SYNs (new sources) at `rate` (0: as fast as possible), sampling the daemon
    /// every second meanwhile, then waits for its queue to drain.
    fn flood(&mut self, name: String, count: u64, rate: u64) -> Phase {
        let (tb, daemon, pid) = (self.tb, self.daemon, self.pid);
        let first = self.next_source;
        self.next_source += count;
        let before = read_counters(tb, daemon, pid);
        let peaks = Mutex::new(Peaks::default());
        let done = AtomicBool::new(false);
        let from = self.t0.elapsed().as_secs_f64();
        let (out, to) = std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    let m = daemon.scrape(tb).unwrap_or_default();
                    let (rss, _) = process_memory_kib(pid).unwrap_or_default();
                    let value =
                        |name: &str, labels: &[(&str, &str)]| metric_value(&m, name, labels).unwrap_or(0.0);
                    let mut p = peaks.lock().expect("peaks");
                    p.samples += 1;
                    p.flows_active = p.flows_active.max(value("slipstream_flows_active", &[]));
                    p.flows_max = p.flows_max.max(value("slipstream_flows_max", &[]));
                    p.waiting = p.waiting.max(value(
                        "slipstream_nfqueue_waiting_packets",
                        &[("queue", ACK_QUEUE)],
                    ));
                    p.rss_kib = p.rss_kib.max(rss);
                    drop(p);
                    std::thread::sleep(Duration::from_secs(1));
                }
            });
            let bin = synflood_binary();
            let out = tb.run_in(
                Ns::Flood,
                &[
                    bin.to_str().expect("utf-8 path"),
                    "--dst",
                    &tb.client_addr(false).to_string(),
                    "--port",
                    &FLOOD_PORT.to_string(),
                    "--count",
                    &count.to_string(),
                    "--rate",
                    &rate.to_string(),
                    "--first",
                    &first.to_string(),
                ],
            );
            let to = self.t0.elapsed().as_secs_f64();
            drain(tb, daemon);
            done.store(true, Ordering::Relaxed);
            (out, to)
        });
        let out = out.unwrap_or_else(|e| panic!("{name}: slipstream-synflood failed: {e:#}"));
        let field = |key: &str| -> f64 {
            out.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
                .unwrap_or_else(|| panic!("{key} in the generator's output {out:?}"))
        };
        let after = read_counters(tb, daemon, pid);
        let (rss_kib, hwm_kib) = process_memory_kib(pid).expect("daemon memory");
        let mut peaks = peaks.into_inner().expect("peaks");
        let m = daemon.scrape(tb).expect("metrics");
        let active = metric(&m, "slipstream_flows_active", &[]);
        peaks.flows_active = peaks.flows_active.max(active);
        peaks.flows_max = peaks.flows_max.max(metric(&m, "slipstream_flows_max", &[]));
        let phase = Phase {
            name,
            sent: field("sent") as u64,
            secs: field("elapsed_s"),
            from,
            to,
            d: after.delta(&before),
            peaks,
            active_after: active,
            rss_kib,
            hwm_kib,
            conntrack: conntrack_count(tb),
        };
        eprintln!("{}", phase.report());
        phase
    }
}

fn flood_test(plan: &Plan) {
    require_netns();
    let bin = synflood_binary();
    assert!(
        bin.is_file(),
        "{} not found: build it (cargo build --release --workspace --bins) or set SLIPSTREAM_SYNFLOOD_BIN",
        bin.display()
    );
    let dir = std::env::temp_dir().join(format!("slipstream-flood-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (config_path, config) = config(&dir);
    let max_flows = config.limits.max_flows as u64;
    let spec = TopologySpec {
        flood_source: true,
        ..TopologySpec::with_prefix(unique_prefix("ssfld"))
    };
    let started = Instant::now();
    let tb = Testbed::build(spec).expect("testbed");
    // The LAN host drops the flood's SYNs itself (no resets back), counting them.
    for args in [
        vec!["-N", FLOOD_CHAIN],
        vec!["-A", FLOOD_CHAIN, "-j", "DROP"],
        vec![
            "-I",
            "INPUT",
            "-s",
            FLOOD_SOURCES,
            "-p",
            "tcp",
            "--syn",
            "-j",
            FLOOD_CHAIN,
        ],
    ] {
        let mut cmdline = vec!["iptables-legacy", "-w"];
        cmdline.extend(args);
        tb.run_in(Ns::Client, &cmdline).expect("LAN host flood rule");
    }
    // The bounded flood, the overload and up to three tries of the capped overload.
    let conntrack_max = ConntrackMax::ensure(plan.syns + (1 + CAPPED_TRIES) * plan.overload_syns);
    tb.start_iperf_server(BE_PORT).expect("iperf3 server");
    let log = dir.join("slipstreamd.log");
    let daemon = start_daemon(&tb, &config_path, &config, &log);
    let pid = daemon.pid().expect("daemon running");
    std::thread::sleep(Duration::from_secs(1));
    let (base_rss, _) = process_memory_kib(pid).expect("daemon memory");
    let bound = rss_bound_kib(base_rss, max_flows);

    let bounded_secs = plan.syns as f64 / plan.rate as f64;
    let be_secs = WARMUP_SECS + QUIET_SECS + bounded_secs + 2.0 * PAUSE_SECS + plan.overload_budget_secs;
    let t0 = Instant::now();
    let be = tb
        .run_download(BE_PORT, be_secs.ceil() as u32, "cubic", &[])
        .expect("best-effort download");
    let mut run = Run {
        tb: &tb,
        daemon: &daemon,
        pid,
        t0,
        next_source: 0,
    };
    std::thread::sleep(Duration::from_secs_f64(WARMUP_SECS + QUIET_SECS));
    let quiet = (WARMUP_SECS, WARMUP_SECS + QUIET_SECS);
    let bounded = run.flood(
        format!("bounded flood, {} SYNs at {}/s", plan.syns, plan.rate),
        plan.syns,
        plan.rate,
    );
    std::thread::sleep(Duration::from_secs_f64(PAUSE_SECS));
    let overload = run.flood(
        format!("overload, {} SYNs as fast as possible", plan.overload_syns),
        plan.overload_syns,
        0,
    );
    std::thread::sleep(Duration::from_secs_f64(PAUSE_SECS));
    // Phase 4: a CPU share that serves a third of what phase 3 offered, at phase 3's cost per
    // packet (lower than at a bounded rate: the daemon handles packets in batches).
    let cost_s = overload.d.cpu_s / overload.d.handled.max(1.0);
    let mut share = (overload.offered_pps() * cost_s / CAP_OVERLOAD).clamp(0.02, 1.0);
    // The generator itself slows while the daemon is capped (they share two cores), so the
    // ratio reached can fall short: up to three tries, each cap lowered by the shortfall.
    let mut capped = None;
    for _ in 0..CAPPED_TRIES {
        // Without a CPU controller the overload phase cannot run: fail, not pass without it.
        let cap = CpuCap::apply(pid, share)
            .unwrap_or_else(|why| panic!("cannot cap the daemon's CPU for the overload phase: {why}"));
        let phase = run.flood(
            format!(
                "overload at {CAP_OVERLOAD}x capacity, {} SYNs as fast as possible, daemon capped at \
                 {:.0}% of a CPU ({:.1} us per packet in phase 3)",
                plan.overload_syns,
                100.0 * share,
                1e6 * cost_s
            ),
            plan.overload_syns,
            0,
        );
        drop(cap);
        let reached = phase.offered_pps() / phase.served_pps().max(1.0);
        capped = Some(phase);
        if reached >= 2.0 || share <= 0.02 {
            break;
        }
        share = (share * reached / CAP_OVERLOAD).clamp(0.02, 1.0);
        std::thread::sleep(Duration::from_secs_f64(PAUSE_SECS));
    }
    let be = be.wait();
    let metrics = daemon.scrape(&tb).unwrap_or_default();
    let (rss_end, hwm_end) = process_memory_kib(pid).expect("daemon memory");
    let ct = conntrack_drops(&tb);
    let conntrack_entries = conntrack_count(&tb);
    let daemon_log = daemon.log();
    let status = daemon.stop().expect("slipstreamd stops on SIGTERM");
    let rules = tb
        .run_in(Ns::Router, &["iptables-legacy-save", "-t", "mangle"])
        .unwrap_or_default();

    let be = be.expect("the best-effort download ran through every flood (iperf3 finished without error)");
    // Short phases (an overload lasts about a second) are taken whole.
    let window = |a: f64, b: f64| {
        let edge = if b - a > 4.0 * EDGE_SECS { EDGE_SECS } else { 0.0 };
        be.goodput_mbps_between(a + edge, b - edge)
    };
    let be_quiet = window(quiet.0, quiet.1).expect("best effort over the quiet phase");
    let be_flood = window(bounded.from, bounded.to).expect("best effort over the bounded flood");
    let mut phases = vec![&bounded, &overload];
    phases.extend(capped.as_ref());
    eprintln!("\nsummary ({} s so far):", started.elapsed().as_secs());
    eprintln!(
        "best effort: {be_quiet:.2} Mbit/s without a flood ({:.0}-{:.0} s); whole download {:.2} \
         Mbit/s",
        quiet.0, quiet.1, be.goodput_mbps
    );
    for p in &phases {
        let w = window(p.from, p.to);
        eprintln!(
            "  {:.1}-{:.1} s {}: best effort {} Mbit/s{}; flows active peak {:.0}; daemon CPU {:.2} s; \
             bypassed {:.0} of {} ({:.2}%); sent {} arrived {}",
            p.from,
            p.to,
            p.name.split(',').next().unwrap_or_default(),
            w.map_or("-".into(), |v| format!("{v:.2}")),
            w.map_or(String::new(), |v| format!(" = {:.1}%", 100.0 * v / be_quiet)),
            p.peaks.flows_active,
            p.d.cpu_s,
            p.bypassed(),
            p.d.hits,
            100.0 * p.bypassed() / (p.d.hits as f64).max(1.0),
            p.sent,
            p.d.arrived,
        );
    }
    eprintln!(
        "daemon memory: VmRSS {base_rss} KiB before the flood, {} KiB after the bounded flood \
         (HWM {}), {rss_end} KiB at the end (HWM {hwm_end}); bound {bound} KiB = {base_rss} + \
         {max_flows} flows x {PER_FLOW_KIB} KiB + {SLACK_KIB} KiB",
        bounded.rss_kib, bounded.hwm_kib
    );
    eprintln!(
        "router conntrack: drop {}, early_drop {}, insert_failed {} (conntrack -S); {} entries at \
         the end",
        ct.0, ct.1, ct.2, conntrack_entries
    );
    eprintln!(
        "final counters:\n{}",
        metrics
            .lines()
            .filter(|l| [
                "slipstream_packets_total",
                "slipstream_packets_passed",
                "slipstream_flows_",
                "slipstream_nfqueue"
            ]
            .iter()
            .any(|p| l.starts_with(p)))
            .filter(|l| !l.ends_with(" 0"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    assert!(
        status.success(),
        "slipstreamd exit status {status}:\n{daemon_log}"
    );
    assert!(
        !rules.contains("SLIPSTREAM"),
        "iptables rules left behind:\n{rules}"
    );
    for p in &phases {
        // (a) Nothing lost: every SYN sent crossed the router to the LAN host, classed.
        assert_eq!(
            p.d.arrived, p.sent,
            "{}: {} SYNs sent, {} arrived at the LAN host; path drops {:?}",
            p.name, p.sent, p.d.arrived, p.d.path_drops
        );
        assert_eq!(p.d.hits, p.sent, "{}: SYNs through the NFQUEUE rules", p.name);
        // (b) The table stays bounded; every handled SYN made a flow or was refused.
        assert_eq!(p.peaks.flows_max, max_flows as f64, "slipstream_flows_max");
        assert!(
            p.peaks.flows_active <= max_flows as f64,
            "{}: {} flows active, max_flows {max_flows}",
            p.name,
            p.peaks.flows_active
        );
        assert_eq!(
            p.d.created + p.d.table_full,
            p.d.handled,
            "{}: handled SYNs that neither created a flow nor were refused",
            p.name
        );
        assert!(
            p.d.handled <= p.d.hits as f64,
            "{}: handled more than queued",
            p.name
        );
    }
    assert_eq!(bounded.sent, plan.syns);
    assert!(
        bounded.d.table_full > 0.0,
        "the bounded flood never filled the table"
    );
    if let Some(p) = &capped {
        // (e) Offered load at least twice what the daemon served.
        assert!(
            p.offered_pps() >= 2.0 * p.served_pps(),
            "{}: offered {:.0}/s, served {:.0}/s: not twice",
            p.name,
            p.offered_pps(),
            p.served_pps()
        );
    }
    // (c) Memory bounded by the table, not the flood.
    assert!(
        hwm_end <= bound,
        "daemon VmHWM {hwm_end} KiB above the bound {bound} KiB"
    );
    assert!(
        hwm_end <= bounded.hwm_kib + GROWTH_KIB,
        "daemon VmHWM grew from {} KiB after the bounded flood to {hwm_end} KiB with the table full",
        bounded.hwm_kib
    );
    // Conntrack had room: the kernel dropped nothing for a full table.
    assert_eq!(ct, (0, 0, 0), "router conntrack drop/early_drop/insert_failed");
    // (d) Best effort kept its goodput during the bounded flood.
    assert!(
        be_flood >= BE_KEPT * be_quiet,
        "best effort {be_flood:.2} Mbit/s during the flood, {:.1}% of {be_quiet:.2} without",
        100.0 * be_flood / be_quiet
    );
    let _ = std::fs::remove_dir_all(&dir);
    // The namespaces (and their conntrack entries) go before nf_conntrack_max is put back.
    drop(tb);
    drop(conntrack_max);
    eprintln!("test took {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn syn_flood_100k() {
    flood_test(&Plan {
        syns: 100_000,
        rate: 5_000,
        overload_syns: 70_000,
        overload_budget_secs: 12.0,
    });
}

#[test]
#[ignore = "1 000 000 spoofed flows at 20 000/s, then twice 500 000 as fast as possible, about 2.5 minutes: cargo test --test flood -- --ignored syn_flood_1m"]
fn syn_flood_1m() {
    flood_test(&Plan {
        syns: 1_000_000,
        rate: 20_000,
        overload_syns: 500_000,
        overload_budget_secs: 60.0,
    });
}
