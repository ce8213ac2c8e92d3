//! End to end, household control: the namespace testbed (10 Mbit/s, one-BDP queue, 100 ms RTT),
//! the real `slipstreamd` on the router with tests/configs/household.toml (the shipped rules, all
//! `controller = "household"`) and real iperf3 cubic downloads. Background flows share one budget
//! per access link, split equally over LAN hosts, and must yield to best effort:
//!
//! * `download_without_timestamps_yields`: a LAN host without TCP timestamps (Windows), which the
//!   Vulture controller leaves unclamped, is controlled too;
//! * `sixteen_background_flows_yield`: 16 background flows of two hosts (1 + 15) beside one
//!   best-effort download; without best effort, the two hosts get about the same;
//! * `uploads_behind_nat_take_turns`: 48 uploads through a masquerading router, more than the
//!   budget has floors for: held flows' window updates reach their LAN hosts.
//!
//! The last two also run on the tc eBPF datapath (`_ebpf`, `datapath.engine = "ebpf"`).
//!
//! Every flow must connect and no TCP reset may cross the link while the flows run. Needs root
//! and the binaries built (`cargo build --release --workspace --bins`; scripts/test.sh does).
//! Ignored by default, run with `--ignored` (a machine without namespaces then fails).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use slipstream::{require_netns, start_daemon};
use slipstream_testbed::daemon::{metric_value, Daemon};
use slipstream_testbed::scenario::{
    background_vs_best_effort, host_fair_jain, host_ratio, jain_index, per_host_totals, resets_during,
    settle, start_downloads, trace_text, wait_all, Params,
};
use slipstream_testbed::{unique_prefix, IperfEnds, Ns, Testbed, TopologySpec};

/// Server port of the best-effort download (no rule matches it).
const BE_PORT: u16 = 5201;
/// Server port of the first background download; the rule covers 6881-6999.
const BG_PORT: u16 = 6881;

/// A copy of tests/configs/household.toml with `datapath.engine = engine` and a control socket
/// of its own (the file's fixed path collides with a household test run from another checkout).
fn config_path(engine: &str) -> PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/configs/household.toml");
    let text = std::fs::read_to_string(&shipped).expect("read tests/configs/household.toml");
    let socket = "socket = \"/tmp/slipstream-household-test.sock\"";
    assert!(text.contains(socket) && text.contains("[datapath]\n"));
    let pid = std::process::id();
    let text = text
        .replace("[datapath]\n", &format!("[datapath]\nengine = \"{engine}\"\n"))
        .replace(
            socket,
            &format!("socket = \"/tmp/slipstream-household-{engine}-{pid}.sock\""),
        );
    let path = std::env::temp_dir().join(format!("slipstream-household-{engine}-{pid}.toml"));
    std::fs::write(&path, text).expect("write config");
    path
}

/// Builds the testbed (checking its RTT) and starts the daemon with the household config on
/// the `engine` datapath.
fn start(spec: TopologySpec, engine: &str) -> (Testbed, Daemon) {
    let path = config_path(engine);
    let config = slipstream_config::load(&path).expect("the household config is valid");
    let tb = Testbed::build(spec).expect("testbed");
    let rtt = tb.assert_rtt_within(2.0).expect("100 ms RTT within 2 ms");
    eprintln!("testbed ping RTT: {rtt:.2} ms; {engine} datapath");
    let log = std::env::temp_dir().join(format!("slipstreamd-household-{}.log", std::process::id()));
    let daemon = start_daemon(&tb, &path, &config, &log);
    (tb, daemon)
}

/// Scrapes the daemon's metrics one last time, stops it and checks it exited cleanly and took
/// its firewall rules along. Returns the metrics.
fn stop(tb: &Testbed, daemon: Daemon) -> String {
    let metrics = daemon.scrape(tb).unwrap_or_default();
    let log = daemon.log();
    let status = daemon.stop().expect("slipstreamd stops on SIGTERM");
    assert!(status.success(), "slipstreamd exit status {status}:\n{log}");
    let rules = tb
        .run_in(Ns::Router, &["iptables-legacy-save", "-t", "mangle"])
        .unwrap_or_default();
    assert!(!rules.contains("SLIPSTREAM"), "firewall rules left:\n{rules}");
    eprintln!(
        "final counters:\n{}",
        metrics
            .lines()
            .filter(|l| [
                "slipstream_packets",
                "slipstream_flows",
                "slipstream_rule_",
                "slipstream_household_"
            ]
            .iter()
            .any(|p| l.starts_with(p)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    metrics
}

/// Packets of household flows the daemon forwarded with a lowered window.
fn rewritten(metrics: &str) -> f64 {
    metric_value(
        metrics,
        "slipstream_rule_packets_rewritten_total",
        &[("controller", "household")],
    )
    .unwrap_or(0.0)
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn download_without_timestamps_yields() {
    require_netns();
    let spec = TopologySpec::with_prefix(unique_prefix("sshhts")).with_timestamps_off([1]);
    let (tb, daemon) = start(spec, "nfqueue");
    // The testbed's own test shows the effect (no timestamp option on the wire); here the switch.
    let ts = tb.run_in(Ns::Client, &["sysctl", "-n", "net.ipv4.tcp_timestamps"]);
    assert_eq!(ts.expect("sysctl").trim(), "0", "LAN host's TCP timestamps");
    let params = Params {
        alone_secs: 22,
        best_effort_secs: 20,
        head_start_secs: 8,
        measure_secs: 12.0,
        ..Params::default()
    };
    let report = background_vs_best_effort(&tb, &daemon, &params, |line| eprintln!("{line}"));
    let metrics = stop(&tb, daemon);
    let report = report.expect("scenario ran (every iperf3 flow connected and finished)");
    eprintln!("{}", report.to_text(tb.spec().rate_mbit));
    eprintln!(
        "rwnd trace, background alone:\n{}",
        trace_text(&report.trace_alone)
    );
    eprintln!(
        "rwnd trace, best effort joins at {} s:\n{}",
        params.head_start_secs,
        trace_text(&report.trace_together)
    );
    let filled = report.background_alone_mbps / report.best_effort_alone_mbps;
    eprintln!(
        "background alone fills {:.1}% of best effort alone; best effort keeps {:.1}%",
        100.0 * filled,
        100.0 * report.best_effort_kept()
    );

    // No packet went unclamped for want of timestamps (the Vulture controller's fate here).
    let passed = metric_value(
        &metrics,
        "slipstream_packets_passed_total",
        &[("reason", "no_timestamps")],
    );
    assert_eq!(passed, Some(0.0), "packets passed for lack of timestamps");
    assert_eq!(report.resets_while_running, 0, "TCP resets while the flows ran");
    // Alone, background uses the idle link (issue target 97% of best effort alone).
    assert!(
        filled >= 0.90,
        "background alone {:.2} Mbit/s is {:.1}% of best effort alone ({:.2} Mbit/s)",
        report.background_alone_mbps,
        100.0 * filled,
        report.best_effort_alone_mbps
    );
    assert!(
        report.best_effort_kept() >= 0.93,
        "best effort kept only {:.1}% ({:.2} of {:.2} Mbit/s)",
        100.0 * report.best_effort_kept(),
        report.best_effort_beside_background_mbps,
        report.best_effort_alone_mbps
    );
    assert!(rewritten(&metrics) > 0.0, "no household packet rewritten");
}

/// Phase lengths of `sixteen_background_flows_yield`, s.
const BE_SECS: u32 = 18;
const HEAD_START_SECS: u32 = 8;
const AFTER_SECS: u32 = 25;
/// Best effort is judged over its last this many seconds, background after best effort over
/// the last `BG_MEASURE_SECS` (the rest lets it take the link back).
const MEASURE_SECS: f64 = 12.0;
const BG_MEASURE_SECS: f64 = 15.0;

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn sixteen_background_flows_yield() {
    sixteen_background_flows("nfqueue");
}

/// The same with the tc eBPF datapath: the kernel lowers the windows, including each LAN host's
/// early clamp before its flow's direction is known.
#[test]
#[ignore = "needs root, network namespaces and BPF: scripts/test.sh runs it (--ignored)"]
fn sixteen_background_flows_yield_ebpf() {
    sixteen_background_flows("ebpf");
}

fn sixteen_background_flows(engine: &str) {
    require_netns();
    // Hosts 1 and 2 run background flows (1 and 15), host 3 the best-effort download.
    let spec = TopologySpec {
        clients: 3,
        ..TopologySpec::with_prefix(unique_prefix("sshh16"))
    };
    let (tb, daemon) = start(spec, engine);
    let hosts: Vec<u8> = std::iter::once(1).chain(std::iter::repeat_n(2, 15)).collect();
    let bg: Vec<(u8, u16)> = hosts.iter().zip(BG_PORT..).map(|(&h, port)| (h, port)).collect();
    for port in bg.iter().map(|f| f.1).chain([BE_PORT]) {
        tb.start_iperf_server(port).expect("iperf3 server");
    }
    let be_ends = IperfEnds { client: 3, server: 1 };
    let best_effort = || tb.run_iperf(be_ends, BE_PORT, BE_SECS, "cubic", true, &[]);
    let mut errors = Vec::new();
    let mut resets = 0;

    eprintln!("phase 1/2: best effort alone for {BE_SECS} s");
    let (be_alone, r) = std::thread::scope(|s| {
        let r = s.spawn(|| resets_during(&tb, f64::from(BE_SECS) - 1.0));
        (
            best_effort().and_then(|r| r.wait()),
            r.join().expect("reset counter"),
        )
    });
    resets += r.expect("reset counter");
    let be_alone = be_alone
        .map_err(|e| errors.push(format!("best effort alone: {e:#}")))
        .ok()
        .and_then(|r| r.goodput_mbps_last(MEASURE_SECS));

    settle();
    let bg_secs = HEAD_START_SECS + BE_SECS + AFTER_SECS;
    eprintln!(
        "phase 2/2: 16 background downloads for {bg_secs} s (host 1: 1, host 2: 15); best effort \
         beside them from {HEAD_START_SECS} s for {BE_SECS} s"
    );
    let started = Instant::now();
    let (be_beside, bg_results, r) = std::thread::scope(|s| {
        // Resets until best effort ends, then from 2 s after its end until the background ends.
        let until_be_end = s.spawn(|| resets_during(&tb, f64::from(HEAD_START_SECS + BE_SECS) - 1.0));
        let runs = start_downloads(&tb, &bg, bg_secs, "cubic").expect("spawning iperf3");
        std::thread::sleep(Duration::from_secs(u64::from(HEAD_START_SECS)));
        let be = best_effort().and_then(|r| r.wait());
        std::thread::sleep(Duration::from_secs(2));
        let left = f64::from(bg_secs) - 1.0 - started.elapsed().as_secs_f64();
        let after_be = resets_during(&tb, left);
        let (results, bg_errors) = wait_all(runs);
        errors.extend(bg_errors);
        let r = until_be_end
            .join()
            .expect("reset counter")
            .and_then(|a| Ok(a + after_be?));
        (be, results, r)
    });
    resets += r.expect("reset counter");
    let be_beside = be_beside
        .map_err(|e| errors.push(format!("best effort beside background: {e:#}")))
        .ok()
        .and_then(|r| r.goodput_mbps_last(MEASURE_SECS));
    let metrics = stop(&tb, daemon);

    // Background after best effort left, per flow (a failed flow counts as 0).
    let goodputs: Vec<f64> = bg_results
        .iter()
        .map(|r| {
            r.as_ref()
                .and_then(|r| r.goodput_mbps_last(BG_MEASURE_SECS))
                .unwrap_or(0.0)
        })
        .collect();
    let totals = per_host_totals(&goodputs, &hosts);
    let ratio = host_ratio(&totals);
    let fair = host_fair_jain(&goodputs, &hosts);
    eprintln!("best effort alone {be_alone:.2?} Mbit/s, beside 16 background flows {be_beside:.2?} Mbit/s");
    eprintln!(
        "background without best effort, last {BG_MEASURE_SECS} s: per host {totals:.2?} Mbit/s, \
         ratio {ratio:.3?}, total {:.2} Mbit/s",
        goodputs.iter().sum::<f64>()
    );
    eprintln!("per flow: {goodputs:.2?}");
    eprintln!(
        "Jain's index: host-fair {fair:.3?}, plain over 16 flows {:.3?}, among host 2's 15 {:.3?}",
        jain_index(&goodputs),
        jain_index(&goodputs[1..])
    );
    eprintln!(
        "connection failures: {} iperf3 errors, {resets} TCP resets",
        errors.len()
    );

    assert!(errors.is_empty(), "iperf3 errors: {errors:#?}");
    assert_eq!(resets, 0, "TCP resets while the flows ran");
    let (alone, beside) = (be_alone.expect("measured"), be_beside.expect("measured"));
    assert!(
        beside >= 0.90 * alone,
        "best effort kept only {:.1}% ({beside:.2} of {alone:.2} Mbit/s) beside 16 background flows",
        100.0 * beside / alone
    );
    // Equal per host (issue target: within 10%).
    let ratio = ratio.expect("both hosts got goodput");
    assert!(
        ratio <= 1.25,
        "host totals {totals:.2?} Mbit/s differ by {ratio:.2}x"
    );
    let fair = fair.expect("background goodput");
    assert!(fair >= 0.8, "host-fair Jain's index {fair:.3}");
    assert!(rewritten(&metrics) > 0.0, "no household packet rewritten");
}

/// Many uploads through a masquerading router (every home router NATs): 48 background uploads
/// of two LAN hosts, more flows than the budget has two-segment floors for, so household
/// control time-shares: held flows wait at their right edge and the daemon sends each one a
/// window update (a copy of the server's last ACK) when its turn comes. Each update must reach
/// its LAN host: no flow may stall, no connection break, and conntrack must not refuse the
/// update packets (`insert_failed`, `drop` in `conntrack -S`). Sent as IP packets through the
/// router's conntrack, the updates started stray entries that captured the hosts' own packets:
/// 813 resets and 5.68 Mbit/s in all (8.60 without NAT); as frames to the host's MAC, 0 and 8.09.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn uploads_behind_nat_take_turns() {
    uploads_behind_nat("nfqueue", 6.5);
}

/// The same with the tc eBPF datapath: the right edge of each window update the daemon sends
/// goes into the kernel's map, and the update itself (a frame to the LAN host) passes the
/// program untouched. Same bounds as NFQUEUE. Before two fixes (issue 11) the uploads reached
/// 5.3-6.9 Mbit/s where NFQUEUE's reached 7.5-8.4, and single uploads stalled for 25-30 s: every
/// update reached its host with a wrong checksum (copied from a CHECKSUM_PARTIAL packet) and
/// was dropped, and the program had kept the server's first windows at shift 0, so the engine
/// counted a window open that the kernel had closed and sent no update when the turn came.
#[test]
#[ignore = "needs root, network namespaces and BPF: scripts/test.sh runs it (--ignored)"]
fn uploads_behind_nat_take_turns_ebpf() {
    uploads_behind_nat("ebpf", 6.5);
}

/// `FLOWS` uploads of two LAN hosts behind NAT, time-shared; the total must reach `min_total`
/// Mbit/s of the 10 Mbit/s uplink.
fn uploads_behind_nat(engine: &str, min_total: f64) {
    const FLOWS: u16 = 48;
    const SECS: u32 = 30;
    require_netns();
    let spec = TopologySpec {
        clients: 2,
        ..TopologySpec::with_prefix(unique_prefix("sshup"))
    };
    let (tb, daemon) = start(spec, engine);
    tb.masquerade().expect("masquerade on the router's WAN side");
    let conntrack_stats = |tb: &Testbed| -> (u64, u64) {
        let out = tb.run_in(Ns::Router, &["conntrack", "-S"]).unwrap_or_default();
        let field = |name: &str| -> u64 {
            out.split_whitespace()
                .filter_map(|w| w.strip_prefix(name))
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        };
        (field("insert_failed="), field("drop="))
    };
    let before = conntrack_stats(&tb);
    let ports: Vec<u16> = (BG_PORT..BG_PORT + FLOWS).collect();
    for &port in &ports {
        tb.start_iperf_server(port).expect("iperf3 server");
    }
    let started = Instant::now();
    let (results, errors, resets) = std::thread::scope(|s| {
        let resets = s.spawn(|| resets_during(&tb, f64::from(SECS) - 1.0));
        let runs: Vec<_> = ports
            .iter()
            .enumerate()
            .map(|(i, &port)| {
                let client = 1 + (i % 2) as u8;
                tb.run_iperf(IperfEnds { client, server: 1 }, port, SECS, "cubic", false, &[])
                    .expect("spawning iperf3")
            })
            .collect();
        let (results, errors) = wait_all(runs);
        (results, errors, resets.join().expect("reset counter"))
    });
    let resets = resets.expect("reset counter");
    let after = conntrack_stats(&tb);
    let metrics = stop(&tb, daemon);
    let sent = metric_value(
        &metrics,
        "slipstream_household_window_updates_total",
        &[("link", "upload")],
    )
    .unwrap_or(0.0);
    let goodputs: Vec<f64> = results
        .iter()
        .map(|r| r.as_ref().and_then(|r| r.goodput_mbps_last(20.0)).unwrap_or(0.0))
        .collect();
    let slowest = goodputs.iter().cloned().fold(f64::INFINITY, f64::min);
    let stall = results
        .iter()
        .filter_map(|r| r.as_ref().map(|r| r.longest_stall_secs()))
        .fold(0.0, f64::max);
    eprintln!(
        "{FLOWS} uploads behind NAT for {:.0} s: total {:.2} Mbit/s, slowest flow {slowest:.3} Mbit/s, \
         longest stall {stall:.1} s, Jain {:.3?}; window updates {sent}; conntrack insert_failed {}, \
         drop {}; {} iperf3 errors, {resets} resets",
        started.elapsed().as_secs_f64(),
        goodputs.iter().sum::<f64>(),
        jain_index(&goodputs),
        after.0 - before.0,
        after.1 - before.1,
        errors.len(),
    );
    assert!(errors.is_empty(), "iperf3 errors: {errors:#?}");
    assert_eq!(resets, 0, "TCP resets while the flows ran");
    assert!(sent > 0.0, "flows took turns: window updates were sent");
    assert_eq!(after.0 - before.0, 0, "conntrack refused packets (insert_failed)");
    assert_eq!(after.1 - before.1, 0, "conntrack dropped packets");
    assert!(slowest > 0.0, "every upload moved data over the last 20 s");
    // Waiting for turns (mostly at the start, while the budget grows) took up to 8.5 s on either
    // datapath; a held flow whose window updates are lost waits for its sender's zero-window
    // probes, which back off exponentially: 25-30 s before the fixes of issue 11.
    assert!(stall <= 15.0, "an upload moved nothing for {stall:.1} s");
    let total: f64 = goodputs.iter().sum();
    assert!(
        total >= min_total,
        "the uploads filled {total:.2} of the 10 Mbit/s uplink, below {min_total} Mbit/s"
    );
}
