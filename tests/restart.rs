//! End to end, restart without loss (issue 12): `kill -9` of `slipstreamd` while a background
//! and a best-effort download run through the router (which masquerades, as a home router
//! does), then a new daemon, again and again. Each cycle must:
//!
//! * break no connection: both iperf3 transfers run through every cycle and finish without
//!   error, and no TCP reset crosses the link while they run (the rules bypass the queue while
//!   no daemon listens);
//! * leave the rules as one set: the new daemon takes over the old one's rules (one jump from
//!   FORWARD, never two), and after the final SIGTERM nothing of Slipstream's is left;
//! * resume control within 2 s of the restart: the background flow, now seen mid-stream, gets
//!   its window scales from conntrack (`slipstream_flows_recovered_total`) and its ACKs are
//!   clamped again (`slipstream_rule_packets_rewritten_total` of its rule), measured from the
//!   new daemon's spawn by polling its metrics (published every 0.5 s, so an upper bound).
//!
//! `kill_and_restart_under_load` runs `SLIPSTREAM_SOAK_CYCLES` cycles (default 3, about 30 s);
//! `kill_and_restart_100_times` (ignored: about 7 minutes) runs 100. Testbed: 10 Mbit/s,
//! one-BDP queue, 100 ms RTT; household control (tests/configs/household.toml). Needs root and
//! the binaries built (scripts/test.sh builds them): ignored by default, run with `--ignored`
//! (a machine without namespaces then fails).
//!
//! Measured on the 2-core test VM (release build): 100 cycles in 415 s, 0 resets, 0 rules left,
//! one FORWARD jump after every take-over; metrics up 0.17 s (mean) after the spawn, control
//! back after mean 0.66 s, max 1.29 s. Best effort's share of the two downloads from 2 s after
//! each restart to the next kill: 97-98% over the first 3 cycles, 85% (min 71%) over 100. A
//! restart costs best effort the window the background flow's host advertised while no daemon
//! ran (the rules bypass the queue): that right edge cannot be taken back, so the background
//! sender may send up to it; with a restart every 4 s the receiver's autotuned window grew from
//! 86 KB to 870 KB (the forwarded window when control came back was 740-760 KB of it in the last
//! cycles). The new daemon also starts household control's link view and budget afresh; how
//! much each of the two costs is not measured apart.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use slipstream::{daemon_binary, require_netns};
use slipstream_testbed::daemon::{metric_value, Daemon};
use slipstream_testbed::{unique_prefix, IperfRun, Ns, Testbed, TopologySpec};

const BE_PORT: u16 = 5201;
const BG_PORT: u16 = 6881;
/// Transfers run this long before the first kill (household control settles).
const WARMUP_SECS: u64 = 8;
/// One cycle: kill, no daemon for `DOWN`, restart, control back, hold.
const PERIOD: Duration = Duration::from_secs(4);
const DOWN: Duration = Duration::from_millis(500);
/// Control must resume within this long after the restart.
const RESUME_WITHIN: Duration = Duration::from_secs(2);

/// tests/configs/household.toml with a control socket of its own, on the datapath `engine`.
fn config(dir: &Path, engine: &str) -> PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/configs/household.toml");
    let text = std::fs::read_to_string(&shipped)
        .expect("tests/configs/household.toml")
        .replace(
            "/tmp/slipstream-household-test.sock",
            &dir.join("control.sock").display().to_string(),
        )
        .replace("[datapath]\n", &format!("[datapath]\nengine = \"{engine}\"\n"));
    let path = dir.join("restart.toml");
    std::fs::write(&path, text).expect("write config");
    slipstream_config::load(&path).expect("config is valid");
    path
}

fn start_daemon(tb: &Testbed, config: &Path, log: &Path) -> Daemon {
    Daemon::start(tb, &daemon_binary(), config, "127.0.0.1:9617", log).expect("slipstreamd starts")
}

/// Jumps from FORWARD to Slipstream's chain in the router (one set of rules: exactly 1).
fn forward_jumps(tb: &Testbed) -> usize {
    tb.run_in(
        Ns::Router,
        &["iptables-legacy", "-w", "-t", "mangle", "-S", "FORWARD"],
    )
    .unwrap_or_default()
    .lines()
    .filter(|l| l.contains("-j SLIPSTREAM"))
    .count()
}

/// What one restart measured.
#[derive(Debug)]
struct Cycle {
    /// From the spawn of the new daemon to its metrics answering.
    started: Duration,
    /// From the spawn to the background flow's window clamped again.
    resumed: Option<Duration>,
    /// The background flow's forwarded / host window when control was seen back, bytes.
    window: Option<(f64, f64)>,
}

/// Polls the new daemon's metrics until the background flow is recovered and clamped.
fn wait_for_control(tb: &Testbed, daemon: &Daemon, spawned: Instant, sender: &str) -> Cycle {
    let mut cycle = Cycle {
        started: spawned.elapsed(),
        resumed: None,
        window: None,
    };
    let deadline = spawned + RESUME_WITHIN + Duration::from_secs(3);
    while Instant::now() < deadline {
        let m = daemon.scrape(tb).unwrap_or_default();
        let recovered = metric_value(&m, "slipstream_flows_recovered_total", &[]).unwrap_or(0.0);
        let rewritten = metric_value(
            &m,
            "slipstream_rule_packets_rewritten_total",
            &[("rule", "bittorrent")],
        )
        .unwrap_or(0.0);
        if recovered >= 1.0 && rewritten > 0.0 {
            cycle.resumed = Some(spawned.elapsed());
            let flow = [("sender", sender)];
            cycle.window = metric_value(&m, "slipstream_flow_rwnd_bytes", &flow).zip(metric_value(
                &m,
                "slipstream_flow_host_window_bytes",
                &flow,
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    cycle
}

/// A testbed whose router masquerades, as a home router does (conntrack's original tuple has
/// the LAN address, its reply tuple the router's WAN address; the daemon, at the forward hook,
/// sees the LAN side), with iperf3 servers on both ports; its work dir, config and daemon log.
fn masquerading_testbed(prefix: &str, engine: &str) -> (PathBuf, PathBuf, PathBuf, Testbed) {
    let dir = std::env::temp_dir().join(format!("slipstream-{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = config(&dir, engine);
    let log = dir.join("slipstreamd.log");
    let tb = Testbed::build(TopologySpec::with_prefix(unique_prefix(prefix))).expect("testbed");
    tb.masquerade().expect("masquerade on the router's WAN side");
    tb.start_iperf_server(BG_PORT).expect("iperf3 server");
    tb.start_iperf_server(BE_PORT).expect("iperf3 server");
    (dir, config, log, tb)
}

/// Starts the background and the best-effort download for `secs` and lets them settle for
/// `WARMUP_SECS`; returns when they started, their runs, and the reset counter then.
fn start_both_downloads(tb: &Testbed, secs: u32) -> (Instant, IperfRun, IperfRun, u64) {
    let t0 = Instant::now();
    let bg = tb
        .run_download(BG_PORT, secs, "cubic", &[])
        .expect("background download");
    let be = tb
        .run_download(BE_PORT, secs, "cubic", &[])
        .expect("best-effort download");
    std::thread::sleep(Duration::from_secs(WARMUP_SECS));
    let resets_before = tb.tcp_resets().expect("reset counter");
    (t0, bg, be, resets_before)
}

fn soak(cycles: u32) {
    require_netns();
    let (dir, config, log, tb) = masquerading_testbed("ssrst", "nfqueue");
    let sender = format!("{}:{BG_PORT}", tb.server_addr(false));

    let mut daemon = start_daemon(&tb, &config, &log);
    let secs = WARMUP_SECS + u64::from(cycles) * PERIOD.as_secs() + 4;
    let secs = u32::try_from(secs).expect("duration");
    let (t0, bg, be, resets_before) = start_both_downloads(&tb, secs);

    let mut results = Vec::new();
    // (restart, next kill) in seconds since the transfers started, for goodput windows.
    let mut windows = Vec::new();
    for n in 0..cycles {
        let cycle_start = Instant::now();
        let status = daemon.kill().expect("kill -9");
        assert!(!status.success(), "killed: {status}");
        assert_eq!(
            forward_jumps(&tb),
            1,
            "the killed daemon's rules stay (they bypass the queue)"
        );
        std::thread::sleep(DOWN);
        let spawned = Instant::now();
        daemon = start_daemon(&tb, &config, &log);
        let cycle = wait_for_control(&tb, &daemon, spawned, &sender);
        let jumps = forward_jumps(&tb);
        eprintln!(
            "cycle {:3}: metrics up after {:.2} s, control back after {}, window {}",
            n + 1,
            cycle.started.as_secs_f64(),
            cycle
                .resumed
                .map_or("never".to_string(), |d| format!("{:.2} s", d.as_secs_f64())),
            cycle.window.map_or("?".to_string(), |(rwnd, host)| format!(
                "{:.0} of the host's {:.0} bytes",
                rwnd, host
            )),
        );
        assert_eq!(jumps, 1, "cycle {}: one set of rules after the take-over", n + 1);
        if cycle.resumed.is_none_or(|d| d > RESUME_WITHIN) {
            panic!(
                "cycle {}: control did not resume within {RESUME_WITHIN:?}: {cycle:?}\n{}",
                n + 1,
                daemon.log()
            );
        }
        results.push(cycle);
        let hold = PERIOD.saturating_sub(cycle_start.elapsed());
        let restart_at = (spawned - t0).as_secs_f64();
        std::thread::sleep(hold);
        windows.push((
            restart_at + RESUME_WITHIN.as_secs_f64(),
            (Instant::now() - t0).as_secs_f64(),
        ));
    }
    let resets = tb.tcp_resets().expect("reset counter") - resets_before;
    let (bg, be) = (bg.wait(), be.wait());
    let metrics = daemon.scrape(&tb).unwrap_or_default();
    let status = daemon.stop().expect("slipstreamd stops on SIGTERM");
    assert!(status.success(), "slipstreamd exit status {status}");
    let rules = tb
        .run_in(Ns::Router, &["iptables-legacy-save", "-t", "mangle"])
        .unwrap_or_default();
    let nft = tb
        .run_in(Ns::Router, &["nft", "list", "tables"])
        .unwrap_or_default();

    let bg = bg.expect("the background download survived every kill -9 (iperf3 finished without error)");
    let be = be.expect("the best-effort download survived every kill -9 (iperf3 finished without error)");
    let mut be_share = Vec::new();
    let mut be_mbps = Vec::new();
    for &(from, to) in &windows {
        if let (Some(b), Some(g)) = (
            be.goodput_mbps_between(from, to),
            bg.goodput_mbps_between(from, to),
        ) {
            be_mbps.push(b);
            be_share.push(b / (b + g));
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let resumed: Vec<f64> = results
        .iter()
        .filter_map(|c| c.resumed.map(|d| d.as_secs_f64()))
        .collect();
    let max = resumed.iter().cloned().fold(0.0, f64::max);
    eprintln!(
        "{cycles} kill -9 / restart cycles: control back after mean {:.2} s, max {max:.2} s (from spawn; \
         metrics published every 0.5 s); metrics up after mean {:.2} s",
        mean(&resumed),
        mean(
            &results
                .iter()
                .map(|c| c.started.as_secs_f64())
                .collect::<Vec<_>>()
        ),
    );
    eprintln!(
        "from 2 s after each restart to the next kill: best effort {:.2} Mbit/s, {:.0}% of the two \
         downloads (min {:.0}%); whole run: background {:.2}, best effort {:.2} Mbit/s; {resets} resets",
        mean(&be_mbps),
        100.0 * mean(&be_share),
        100.0 * be_share.iter().cloned().fold(1.0, f64::min),
        bg.goodput_mbps,
        be.goodput_mbps,
    );
    eprintln!(
        "last daemon: {}",
        metrics
            .lines()
            .filter(|l| l.starts_with("slipstream_flows_"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert_eq!(resets, 0, "TCP resets crossed the link during the cycles");
    assert!(
        !rules.contains("SLIPSTREAM"),
        "iptables rules left behind:\n{rules}"
    );
    assert!(!nft.contains("slipstream"), "nftables table left behind:\n{nft}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn kill_and_restart_under_load() {
    let cycles = std::env::var("SLIPSTREAM_SOAK_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    soak(cycles);
}

#[test]
#[ignore = "soak of 100 kill -9 / restart cycles, about 8 minutes: cargo test --test restart -- --ignored kill_and_restart_100_times"]
fn kill_and_restart_100_times() {
    soak(100);
}

/// The lab's restart case (issue 12): best effort beside a background download keeps at least
/// 95% of its goodput alone after one `kill -9` and restart of the daemon (household control).
/// Side by side in one run: best effort alone, then both downloads; the daemon is killed after
/// the transfers settled and started again after the respawn-like pause `DOWN`; best effort's
/// goodput from 2 s after the restart to the end (15 s) is compared with its goodput alone.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn one_restart_keeps_best_effort() {
    one_restart("nfqueue");
}

/// The same on the eBPF datapath: the tc programs learn a flow from its handshake, which the
/// new daemon never saw; it puts the classed flows conntrack knows into the programs' map at
/// start (with their window scales), and the engine recovers them from their reports.
#[test]
#[ignore = "needs root, network namespaces and BPF: scripts/test.sh runs it (--ignored)"]
fn one_restart_keeps_best_effort_ebpf() {
    one_restart("ebpf");
}

fn one_restart(engine: &str) {
    const ALONE_SECS: u32 = 10;
    const AFTER_SECS: u64 = 15;
    require_netns();
    let (dir, config, log, tb) = masquerading_testbed("ss1rs", engine);
    let mut daemon = start_daemon(&tb, &config, &log);
    let alone = tb
        .run_download(BE_PORT, ALONE_SECS, "cubic", &[])
        .expect("best effort alone")
        .wait()
        .expect("best effort alone finished");
    let alone_mbps = alone
        .goodput_mbps_last(f64::from(ALONE_SECS) - 2.0)
        .expect("goodput alone");
    let secs = u32::try_from(WARMUP_SECS + AFTER_SECS + 2).expect("duration");
    let (t0, bg, be, resets_before) = start_both_downloads(&tb, secs);
    daemon.kill().expect("kill -9");
    std::thread::sleep(DOWN);
    let spawned = Instant::now();
    daemon = start_daemon(&tb, &config, &log);
    let sender = format!("{}:{BG_PORT}", tb.server_addr(false));
    let cycle = wait_for_control(&tb, &daemon, spawned, &sender);
    let restart_at = (spawned - t0).as_secs_f64();
    // Resets are counted while the transfers run: iperf3 resets its own connections at the end.
    let end = t0 + Duration::from_secs(u64::from(secs)) - Duration::from_millis(700);
    std::thread::sleep(end.saturating_duration_since(Instant::now()));
    let resets = tb.tcp_resets().expect("reset counter") - resets_before;
    let (bg, be) = (bg.wait(), be.wait());
    let status = daemon.stop().expect("slipstreamd stops on SIGTERM");
    let bg = bg.expect("the background download survived the kill -9");
    let be = be.expect("the best-effort download survived the kill -9");
    let from = restart_at + RESUME_WITHIN.as_secs_f64();
    let to = be.run_end().expect("best effort ran");
    let be_after = be
        .goodput_mbps_between(from, to)
        .expect("best effort after the restart");
    let bg_after = bg.goodput_mbps_between(from, to).unwrap_or(0.0);
    let before = be.goodput_mbps_between(WARMUP_SECS as f64 - 4.0, WARMUP_SECS as f64 - 0.5);
    let kept = be_after / alone_mbps;
    eprintln!(
        "one restart ({engine}): best effort alone {alone_mbps:.2} Mbit/s; beside the background before the kill {}, \
         from 2 s after the restart to the end ({:.1} s) {be_after:.2} Mbit/s = {:.1}% of alone \
         (background {bg_after:.2}); control back after {}; {resets} resets",
        before.map_or("?".to_string(), |b| format!("{b:.2}")),
        to - from,
        100.0 * kept,
        cycle
            .resumed
            .map_or("never".to_string(), |d| format!("{:.2} s", d.as_secs_f64())),
    );
    assert!(status.success(), "slipstreamd exit status {status}");
    assert_eq!(resets, 0, "TCP resets crossed the link");
    assert!(
        cycle.resumed.is_some_and(|d| d <= RESUME_WITHIN),
        "control back within 2 s: {cycle:?}"
    );
    assert!(
        kept >= 0.95,
        "best effort kept {:.1}% of its goodput alone after a restart",
        100.0 * kept
    );
    let _ = std::fs::remove_dir_all(&dir);
}
