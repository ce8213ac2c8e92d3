//! `slipstream-lab`: runs the lab's scenarios (see the crate docs and `--help`).
//!
//! ```text
//! slipstream-lab <alone|cbr|cwnd|onoff|fairness|udp-square|web|datapath|no-timestamps|many-flows|
//!                 weights|smoke|all|report|cleanup>
//!     [--alternatives no-control,slipstream,slipstream-paper,fixed-rwnd,htb-90,htb-95,household]
//!     [--scale 0.5] [--repeats N] [--out lab-results] [--cc cubic|reno|bbr]
//!     [--rate 10] [--rtt 100] [--up-delay MS] [--queue-packets N | --queue-bytes B]
//!     [--set key=value]...
//! ```
//!
//! SIGINT/SIGTERM: the running scenario stops at its next check and its `Drop`s tear the testbed
//! down; if that has not happened within 15 s, the handler removes this process's namespaces
//! itself and exits 130.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use slipstream_lab::scenarios::{self, LabContext, ScenarioOptions, LAB_PREFIX};
use slipstream_lab::Alternative;

#[derive(Parser, Debug)]
#[command(
    name = "slipstream-lab",
    about = "Slipstream's evaluation lab (network namespaces; needs root)"
)]
struct Args {
    /// alone | cbr | cwnd | onoff | fairness | udp-square | web | datapath | no-timestamps |
    /// many-flows | weights | smoke | all | report | cleanup
    command: String,
    /// Comma-separated alternatives, in table order. Default: every one but household
    /// (no-control,slipstream,slipstream-paper,fixed-rwnd,htb-90,htb-95); for no-timestamps,
    /// many-flows and weights no-control,htb-95,slipstream,household.
    #[arg(long)]
    alternatives: Option<String>,
    /// Multiplies every phase length (e.g. 0.1 for a quick look).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Runs per alternative.
    #[arg(long, default_value_t = 1)]
    repeats: u32,
    /// Results directory.
    #[arg(long, default_value = "lab-results")]
    out: PathBuf,
    /// Sender congestion control.
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// Bottleneck rate, Mbit/s.
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Base RTT, ms.
    #[arg(long, default_value_t = 100.0)]
    rtt: f64,
    /// One-way delay of the upload direction, ms (default: half the RTT; the download
    /// direction gets the rest of --rtt).
    #[arg(long)]
    up_delay: Option<f64>,
    /// Bottleneck queue in full-size (1514-byte) packets (default: one BDP).
    #[arg(long, conflicts_with = "queue_bytes")]
    queue_packets: Option<u64>,
    /// Bottleneck queue in bytes (default: one BDP).
    #[arg(long)]
    queue_bytes: Option<u64>,
    /// Scenario-specific options, key=value (repeatable).
    #[arg(long = "set")]
    set: Vec<String>,
}

/// SIGINT/SIGTERM: a thread waits for the first one (signal-hook's iterator; the lab is
/// synchronous, so no async runtime), sets `flag`, and tears down itself if the scenario has not
/// within 15 s.
fn install_signal_handlers(flag: Arc<AtomicBool>) -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        if signals.forever().next().is_none() {
            return;
        }
        flag.store(true, Ordering::SeqCst);
        eprintln!("\nslipstream-lab: interrupted, tearing down ...");
        // Give the scenario's Drops time to tear down; then do it here.
        std::thread::sleep(Duration::from_secs(15));
        let mine = format!("{LAB_PREFIX}{}x", std::process::id());
        let _ = slipstream_testbed::cleanup_stale(&mine);
        std::process::exit(130);
    });
    Ok(())
}

fn options(a: &Args) -> Result<ScenarioOptions> {
    if !(a.scale > 0.0 && a.scale.is_finite()) {
        bail!("--scale must be positive");
    }
    if !(a.rate > 0.0 && a.rate.is_finite()) {
        bail!("--rate must be positive");
    }
    if !(a.rtt >= 0.0 && a.rtt.is_finite()) {
        bail!("--rtt must be >= 0");
    }
    if let Some(up) = a.up_delay {
        if !(up >= 0.0 && up <= a.rtt) {
            bail!("--up-delay must be between 0 and --rtt ({} ms)", a.rtt);
        }
    }
    let mut extra = BTreeMap::new();
    for kv in &a.set {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--set {kv}: expected key=value"))?;
        extra.insert(k.to_string(), v.to_string());
    }
    Ok(ScenarioOptions {
        duration_scale: a.scale,
        repeats: a.repeats.max(1),
        alternatives: match &a.alternatives {
            Some(list) => Alternative::parse_list(list)?,
            None => scenarios::default_alternatives(""),
        },
        rate_mbit: a.rate,
        rtt_ms: a.rtt,
        up_delay_ms: a.up_delay,
        queue_bytes: a
            .queue_packets
            .map(|n| n * slipstream_testbed::cmd::FRAME_BYTES)
            .or(a.queue_bytes),
        cc: a.cc.clone(),
        extra,
        ..ScenarioOptions::default()
    })
}

/// Removes stale lab namespaces (any process's), their processes and stale control sockets.
fn cleanup() -> Result<()> {
    let removed = slipstream_testbed::cleanup_stale(LAB_PREFIX)?;
    for n in &removed {
        println!("removed namespace {n}");
    }
    let mut sockets = 0;
    if let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("slipstream-lab-") && name.ends_with(".sock") {
                let _ = std::fs::remove_file(e.path());
                sockets += 1;
            }
        }
    }
    println!(
        "cleanup: {} namespace(s), {sockets} stale socket(s) removed",
        removed.len()
    );
    Ok(())
}

/// `slipstream-lab report`: the latest run of each scenario → `docs/lab/` (plots, README).
fn run_report(ctx: &LabContext) -> Result<()> {
    let readme = slipstream_lab::report::gather(&ctx.out_dir, std::path::Path::new("docs"))?;
    println!("wrote {}", readme.display());
    Ok(())
}

/// This invocation as a shell line, program name shortened to `slipstream-lab`.
fn command_line() -> String {
    std::iter::once("slipstream-lab".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let args = Args::parse();
    if let Err(e) = real_main(args) {
        eprintln!("slipstream-lab: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main(args: Args) -> Result<()> {
    let mut ctx = LabContext::new(&args.out);
    ctx.command_line = command_line();
    match args.command.as_str() {
        "cleanup" => return cleanup(),
        "report" => return run_report(&ctx),
        _ => {}
    }
    let opts = options(&args)?;
    let names: Vec<&str> = match args.command.as_str() {
        "all" => scenarios::ALL.to_vec(),
        other => {
            if scenarios::lookup(other).is_none() {
                bail!("unknown command {other:?} (see --help)");
            }
            vec![other]
        }
    };
    if let Err(why) = slipstream_testbed::netns_supported() {
        bail!("cannot build testbeds: {why}");
    }
    install_signal_handlers(Arc::clone(&ctx.interrupted))?;
    let mut failed = Vec::new();
    for name in names {
        let run = scenarios::lookup(name).expect("checked");
        let opts = ScenarioOptions {
            alternatives: match args.alternatives {
                Some(_) => opts.alternatives.clone(),
                None => scenarios::default_alternatives(name),
            },
            ..opts.clone()
        };
        match run(&ctx, &opts) {
            Ok(report) => {
                // Every scenario writes its results; should one not have, do it here rather
                // than lose the run.
                let dir = ctx.run_dir(&report.scenario, report.started_unix)?;
                if !dir.join(slipstream_lab::report::RESULT_JSON).is_file() {
                    ctx.write_report(&dir, &report)?;
                }
                eprintln!();
                println!(
                    "{}",
                    slipstream_lab::report::markdown::table(&slipstream_lab::report::Summary::of(
                        &report,
                        &[],
                        ""
                    ))
                );
            }
            Err(e) => {
                eprintln!("\n[{name}] failed: {e:#}");
                failed.push(name);
                if ctx.interrupted.load(Ordering::SeqCst) {
                    break;
                }
            }
        }
    }
    if ctx.interrupted.load(Ordering::SeqCst) {
        std::process::exit(130);
    }
    if !failed.is_empty() {
        bail!("failed: {}", failed.join(", "));
    }
    Ok(())
}
