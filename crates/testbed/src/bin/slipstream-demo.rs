//! The demo: build the namespace testbed, run the real `slipstreamd` on its router with a config
//! (the shipped one by default), run a background and a best-effort download alone and beside
//! each other, and print what each got. Needs root; `scripts/demo.sh` does all set-up.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use slipstream_testbed::daemon::Daemon;
use slipstream_testbed::forward::forward_into_netns;
use slipstream_testbed::scenario::{background_vs_best_effort, trace_text, Params};
use slipstream_testbed::{netns_supported, unique_prefix, workspace_binary, Ns, Testbed, TopologySpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Shows Slipstream at work on a 10 Mbit/s, 100 ms access link built from network namespaces.
#[derive(Parser, Debug)]
struct Args {
    /// Daemon config to run with.
    #[arg(long, default_value = "config/slipstream.toml")]
    config: PathBuf,
    /// Bottleneck rate in Mbit/s.
    #[arg(long, default_value_t = 10.0)]
    rate_mbit: f64,
    /// One-way delay in ms each way (RTT = twice this).
    #[arg(long, default_value_t = 50.0)]
    one_way_delay_ms: f64,
    /// Sender congestion control (cubic, reno, bbr).
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// Uploads from the LAN client instead of downloads.
    #[arg(long)]
    upload: bool,
    /// Where the daemon's live page is forwarded to on this machine (the daemon itself listens
    /// on the router namespace's loopback); another free port if this one is taken.
    #[arg(long, default_value = "127.0.0.1:9617")]
    page: std::net::SocketAddr,
    /// Keep the testbed and the daemon (and so the live page) up this many seconds after the
    /// downloads; Ctrl-C ends it sooner.
    #[arg(long, default_value_t = 0)]
    linger: u64,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<()> {
    netns_supported().map_err(|why| anyhow::anyhow!("cannot build the testbed: {why}"))?;
    let config = slipstream_config::load(&args.config)?;
    let params = Params {
        congestion_control: args.cc.clone(),
        ..Params::default()
    };
    let rule_ports = format!("{}", params.background_port);
    println!(
        "Slipstream demo: server -- ISP ({} Mbit/s tbf, {} ms RTT) -- router (slipstreamd, {}) -- client",
        args.rate_mbit,
        2.0 * args.one_way_delay_ms,
        args.config.display()
    );
    println!(
        "background = {} server port {rule_ports} (a BitTorrent port), best effort = port {}",
        if args.upload { "upload to" } else { "download from" },
        params.best_effort_port
    );
    let spec = TopologySpec {
        rate_mbit: args.rate_mbit,
        one_way_delay_ms: args.one_way_delay_ms,
        ..TopologySpec::with_prefix(unique_prefix("ssdemo"))
    };
    let tb = Testbed::build(spec).context("building the testbed")?;
    println!("testbed up, ping RTT {:.1} ms", tb.check_rtt()?);
    // Conntrack counts bytes, as on OpenWrt (Debian's default is off): the live page's best
    // effort per LAN host.
    tb.run_in(
        Ns::Router,
        &["sysctl", "-qw", "net.netfilter.nf_conntrack_acct=1"],
    )?;
    let log = std::env::temp_dir().join(format!("slipstreamd-demo-{}.log", std::process::id()));
    let daemon = Daemon::start(
        &tb,
        &workspace_binary("slipstreamd", "SLIPSTREAMD_BIN"),
        &args.config,
        &config.metrics.listen.to_string(),
        &log,
    )?;
    let page = forward_into_netns(args.page, &tb.ns_name(Ns::Router), config.metrics.listen)
        .map(|addr| format!("http://{addr}/"));
    match &page {
        Ok(url) => {
            println!("live page: {url} (open it now: it follows both downloads and the background's yield)")
        }
        Err(e) => println!("no live page on this machine: {e:#}"),
    }
    let report = background_vs_best_effort(&tb, &daemon, &params, |line| println!("{line}"));
    if let (Ok(url), true) = (&page, args.linger > 0) {
        println!(
            "the live page stays up at {url} for {} s (Ctrl-C ends it)",
            args.linger
        );
        let stop = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, stop.clone())?;
        }
        let until = std::time::Instant::now() + std::time::Duration::from_secs(args.linger);
        while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    let status = daemon.stop()?;
    let report = report?;
    println!(
        "\nbackground flow as the daemon saw it, alone:\n{}",
        trace_text(&report.trace_alone)
    );
    println!(
        "background flow as the daemon saw it, best effort joining at {} s:\n{}",
        params.head_start_secs,
        trace_text(&report.trace_together)
    );
    println!("{}", report.to_text(args.rate_mbit));
    println!("slipstreamd exited with {status}; its log: {}", log.display());
    match page {
        Ok(url) => println!(
            "\nThe live page showed all this as it happened at {url}: the two downloads, the household \
             budget and the background stepping back when best effort arrived (a screenshot: \
             docs/img/live-page-demo.png). To look at it after the downloads too: scripts/demo.sh --linger 300"
        ),
        Err(_) => println!("\nThe daemon's live page (docs/live-page.md) was not reachable from this machine."),
    }
    Ok(())
}
