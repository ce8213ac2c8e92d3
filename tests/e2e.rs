//! End to end, on real Linux TCP: a namespace testbed (server - ISP with a 10 Mbit/s tbf
//! bottleneck of one BDP and 100 ms RTT from the delay element - router - LAN client), the real
//! `slipstreamd` on the router with the shipped config/slipstream.toml, and real iperf3 cubic
//! transfers. The background transfer (port 6881, a BitTorrent port the default rules class as
//! background) must use most of an idle link, and must leave a best-effort transfer (port 5201)
//! at least 90% of the goodput it gets alone, while the daemon clamps its window. Downloads and
//! uploads alike: the ACKs of whichever side receives the bulk data are clamped.
//!
//! Needs root and the binaries built (`cargo build --workspace --bins`; scripts/test.sh does).

use std::path::Path;

use slipstream::start_daemon;
use slipstream_testbed::scenario::{background_vs_best_effort, trace_text, Params};
use slipstream_testbed::{netns_supported, Ns, Testbed, TopologySpec};

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn background_download_yields_to_best_effort() {
    yields_to_best_effort(false, "nfqueue");
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn background_upload_yields_to_best_effort() {
    yields_to_best_effort(true, "nfqueue");
}

/// The same bounds with the tc eBPF datapath (`datapath.engine = "ebpf"`): the kernel reports
/// packets and lowers the windows, NFQUEUE carries only the handshakes.
#[test]
#[ignore = "needs root, network namespaces and BPF: scripts/test.sh runs it (--ignored)"]
fn background_download_yields_to_best_effort_ebpf() {
    yields_to_best_effort(false, "ebpf");
}

#[test]
#[ignore = "needs root, network namespaces and BPF: scripts/test.sh runs it (--ignored)"]
fn background_upload_yields_to_best_effort_ebpf() {
    yields_to_best_effort(true, "ebpf");
}

/// The shipped config with `datapath.engine` set to `engine`, written next to the test's log.
fn shipped_config_with_engine(engine: &str) -> std::path::PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/slipstream.toml");
    let text = std::fs::read_to_string(&shipped).expect("read the shipped config");
    let line = "engine = \"nfqueue\"";
    assert!(text.contains(line), "the shipped config sets {line}");
    let path = std::env::temp_dir().join(format!("slipstream-e2e-{engine}-{}.toml", std::process::id()));
    // Its own control socket, so that runs beside another daemon (another checkout) do not collide.
    let socket = format!("/tmp/slipstream-e2e-{engine}-{}.sock", std::process::id());
    let text = text.replace(line, &format!("engine = \"{engine}\"")).replace(
        "socket = \"/var/run/slipstream.sock\"",
        &format!("socket = \"{socket}\""),
    );
    std::fs::write(&path, text).expect("write config");
    path
}

fn yields_to_best_effort(upload: bool, engine: &str) {
    if let Err(why) = netns_supported() {
        panic!("cannot run here: {why}");
    }
    let config_path = shipped_config_with_engine(engine);
    let config = slipstream_config::load(&config_path).expect("the shipped config is valid");

    let tb = Testbed::build(TopologySpec::with_prefix(slipstream_testbed::unique_prefix(
        "sse2e",
    )))
    .expect("testbed");
    let rtt = tb
        .assert_rtt_within(2.0)
        .expect("delay element gives 100 ms RTT within 2 ms");
    eprintln!("testbed ping RTT: {rtt:.2} ms");

    let log = std::env::temp_dir().join(format!("slipstreamd-e2e-{}.log", std::process::id()));
    let daemon = start_daemon(&tb, &config_path, &config, &log);
    let params = Params {
        upload,
        ..Params::default()
    };
    eprintln!(
        "== background {} beside best effort, {engine} datapath",
        if upload { "upload" } else { "download" }
    );
    let report = background_vs_best_effort(&tb, &daemon, &params, |line| eprintln!("{line}"));
    let final_metrics = daemon.scrape(&tb).unwrap_or_default();
    let status = daemon.stop().expect("slipstreamd stops on SIGTERM");
    let report = report.expect("scenario ran");
    eprintln!("{}", report.to_text(tb.spec().rate_mbit));
    eprintln!(
        "rwnd trace, background alone:\n{}",
        trace_text(&report.trace_alone)
    );
    eprintln!(
        "rwnd trace, best effort joins at 10 s:\n{}",
        trace_text(&report.trace_together)
    );
    eprintln!(
        "final counters:\n{}",
        final_metrics
            .lines()
            .filter(|l| l.starts_with("slipstream_packets") || l.starts_with("slipstream_flows"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    assert!(
        status.success(),
        "slipstreamd exit status {status}:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let rules = tb
        .run_in(Ns::Router, &["iptables-legacy-save", "-t", "mangle"])
        .unwrap_or_default();
    assert!(
        !rules.contains("SLIPSTREAM"),
        "firewall rules removed at stop:\n{rules}"
    );

    // A background flow alone gets most of the link (the goodput ceiling is 9.56 Mbit/s).
    assert!(
        report.background_alone_mbps >= 7.0,
        "background alone: {:.2} Mbit/s",
        report.background_alone_mbps
    );
    // The best-effort flow keeps at least 90% of what it gets alone (measured: 98.6% for
    // downloads). Uploads get a little more slack: the router sees upload data before its own
    // uplink queue, so their PIVs carry no queueing signal and only the queueing-delay guard holds
    // the background flow back (measured: 96-98%).
    let must_keep = if upload { 0.85 } else { 0.9 };
    assert!(
        report.best_effort_kept() >= must_keep,
        "best effort kept only {:.1}% ({:.2} of {:.2} Mbit/s)",
        100.0 * report.best_effort_kept(),
        report.best_effort_beside_background_mbps,
        report.best_effort_alone_mbps
    );
    // Alone, the background flow fills the link without filling its queue: the controller's
    // queueing-delay guard (10 ms in the shipped config) keeps pings within 25 ms of the base
    // RTT, where a plain cubic flow would fill the one-BDP buffer (+70-100 ms; measured here:
    // +10 ms).
    assert!(
        report.ping_background_alone_ms <= rtt + 25.0,
        "ping beside the background flow alone {:.1} ms, base RTT {rtt:.1} ms",
        report.ping_background_alone_ms
    );
    // ... and beside best effort it adds hardly any delay: pings through the bottleneck queue
    // take at most 25 ms more than beside the best-effort flow alone (the Vulture paper reports
    // +40% for its LBE flow). Medians, since the best-effort cubic flow's own sawtooth moves a
    // 12 s average by up to 20 ms from run to run.
    assert!(
        report.ping_beside_background_ms <= report.ping_best_effort_alone_ms + 25.0,
        "ping beside background {:.1} ms vs {:.1} ms with best effort alone",
        report.ping_beside_background_ms,
        report.ping_best_effort_alone_ms
    );
    // The daemon clamped the background flow: its rwnd fell while best effort ran.
    assert!(
        report.rwnd_beside_best_effort.count > 0,
        "rwnd samples beside best effort"
    );
    assert!(
        report.rwnd_beside_best_effort.median < 0.5 * report.rwnd_alone.median,
        "rwnd beside best effort (median {:.0} B) did not fall below half of alone (median {:.0} B)",
        report.rwnd_beside_best_effort.median,
        report.rwnd_alone.median
    );
}
