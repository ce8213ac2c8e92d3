//! `slipstream-lab`: runs the lab's scenarios (see the crate docs and `--help`).
//!
//! ```text
//! slipstream-lab <alone|cbr|cwnd|onoff|fairness|udp-square|web|datapath|no-timestamps|many-flows|
//!                 weights|smoke|all> [--alternatives no-control,slipstream,...] [--scale 0.5]
//!     [--repeats N] [--out lab-results] [--cc cubic|reno|bbr] [--rate 10] [--rtt 100]
//!     [--up-delay MS] [--queue-packets N | --queue-bytes B] [--set key=value]...
//! slipstream-lab report [--out lab-results]
//! slipstream-lab cleanup
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
use clap::{Args, Parser, Subcommand, ValueEnum};
use slipstream_lab::scenarios::{self, LabContext, ScenarioOptions, LAB_PREFIX};
use slipstream_lab::Alternative;

#[derive(Parser, Debug)]
#[command(name = "slipstream-lab", about = "Slipstream's evaluation lab (network namespaces; needs root)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One background download alone (Vulture Sec. 0.4.4, Fig. 17).
    Alone(RunArgs),
    /// A 6 Mbit/s best-effort download, a background one joining for the middle third (Fig. 15).
    Cbr(RunArgs),
    /// The daemon's cwnd estimate against the sender's (Figs. 11-12).
    Cwnd(RunArgs),
    /// An on/off best-effort download beside a background one (Table 1).
    Onoff(RunArgs),
    /// N background flows with staggered starts (Table 2).
    Fairness(RunArgs),
    /// A UDP square wave beside a background flow (Key et al. Sec. 5.2).
    UdpSquare(RunArgs),
    /// Web browsing beside a background download (Key et al. Sec. 5.3).
    Web(RunArgs),
    /// What forwarding through NFQUEUE costs the router.
    Datapath(RunArgs),
    /// Household control: LAN hosts without TCP timestamps.
    NoTimestamps(RunArgs),
    /// Household control: many background flows of several hosts.
    ManyFlows(RunArgs),
    /// Household control: per-rule weights and minimum rates.
    Weights(RunArgs),
    /// A short alone and cbr (CI).
    Smoke(RunArgs),
    /// Every scenario but smoke, in the order above.
    All(RunArgs),
    /// Publishes the latest run of each scenario under --out into docs/lab/ and renders
    /// docs/lab/README.md from the committed summaries.
    Report {
        /// Results directory.
        #[arg(long, default_value = "lab-results")]
        out: PathBuf,
    },
    /// Removes stale lab namespaces (any process's), their processes and control sockets.
    Cleanup,
}

/// Sender congestion control.
#[derive(ValueEnum, Clone, Copy, Debug)]
enum Cc {
    Cubic,
    Reno,
    Bbr,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Comma-separated alternatives, in table order. Default: every one but household
    /// (no-control,slipstream,slipstream-paper,fixed-rwnd,htb-90,htb-95); for no-timestamps,
    /// many-flows and weights no-control,htb-95,slipstream,household.
    #[arg(long, value_parser = parse_alternatives)]
    alternatives: Option<Alternatives>,
    /// Multiplies every phase length (e.g. 0.1 for a quick look).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Runs per alternative.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Results directory.
    #[arg(long, default_value = "lab-results")]
    out: PathBuf,
    /// Sender congestion control.
    #[arg(long, value_enum, default_value_t = Cc::Cubic)]
    cc: Cc,
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
    /// Scenario-specific options, key=value (repeatable; unknown keys are errors).
    #[arg(long = "set", value_parser = parse_key_value)]
    set: Vec<(String, String)>,
}

/// A `--alternatives` list.
#[derive(Clone, Debug)]
struct Alternatives(Vec<Alternative>);

fn parse_alternatives(list: &str) -> Result<Alternatives> {
    Alternative::parse_list(list).map(Alternatives)
}

fn parse_key_value(kv: &str) -> Result<(String, String)> {
    let (k, v) = kv.split_once('=').context("expected key=value")?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

impl Command {
    /// The scenarios to run and their arguments (`None` for report and cleanup).
    fn scenarios(&self) -> Option<(Vec<&'static str>, &RunArgs)> {
        let (name, args) = match self {
            Command::Alone(a) => ("alone", a),
            Command::Cbr(a) => ("cbr", a),
            Command::Cwnd(a) => ("cwnd", a),
            Command::Onoff(a) => ("onoff", a),
            Command::Fairness(a) => ("fairness", a),
            Command::UdpSquare(a) => ("udp-square", a),
            Command::Web(a) => ("web", a),
            Command::Datapath(a) => ("datapath", a),
            Command::NoTimestamps(a) => ("no-timestamps", a),
            Command::ManyFlows(a) => ("many-flows", a),
            Command::Weights(a) => ("weights", a),
            Command::Smoke(a) => ("smoke", a),
            Command::All(a) => return Some((scenarios::ALL.to_vec(), a)),
            Command::Report { .. } | Command::Cleanup => return None,
        };
        Some((vec![name], args))
    }
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

/// The options of a run of `names`: checks the numbers and that every `--set` key is one of
/// theirs.
fn options(a: &RunArgs, names: &[&str]) -> Result<ScenarioOptions> {
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
    let mut valid: Vec<&str> = names.iter().flat_map(|n| scenarios::set_keys(n)).copied().collect();
    valid.sort_unstable();
    valid.dedup();
    let mut extra = BTreeMap::new();
    for (k, v) in &a.set {
        if !valid.contains(&k.as_str()) {
            let list = if valid.is_empty() { "none".to_string() } else { valid.join(", ") };
            bail!("--set {k}: unknown key for {} (valid: {list})", names.join(", "));
        }
        extra.insert(k.clone(), v.clone());
    }
    Ok(ScenarioOptions {
        duration_scale: a.scale,
        repeats: a.repeats,
        alternatives: Vec::new(),
        rate_mbit: a.rate,
        rtt_ms: a.rtt,
        up_delay_ms: a.up_delay,
        queue_bytes: a.queue_packets.map(|n| n * slipstream_testbed::cmd::FRAME_BYTES).or(a.queue_bytes),
        cc: a.cc.to_possible_value().expect("no skipped variants").get_name().to_string(),
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
    println!("cleanup: {} namespace(s), {sockets} stale socket(s) removed", removed.len());
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
    let cli = Cli::parse();
    if let Err(e) = real_main(cli.command) {
        eprintln!("slipstream-lab: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main(command: Command) -> Result<()> {
    let (names, args) = match &command {
        Command::Cleanup => return cleanup(),
        Command::Report { out } => {
            let readme = slipstream_lab::report::gather(out, std::path::Path::new("docs"))?;
            println!("wrote {}", readme.display());
            return Ok(());
        }
        other => other.scenarios().expect("a scenario command"),
    };
    let opts = options(args, &names)?;
    let mut ctx = LabContext::new(&args.out);
    ctx.command_line = command_line();
    if let Err(why) = slipstream_testbed::netns_supported() {
        bail!("cannot build testbeds: {why}");
    }
    install_signal_handlers(Arc::clone(&ctx.interrupted))?;
    let mut failed = Vec::new();
    for name in names {
        let run = scenarios::lookup(name).expect("every command names a scenario");
        let opts = ScenarioOptions {
            alternatives: args
                .alternatives
                .as_ref()
                .map(|a| a.0.clone())
                .unwrap_or_else(|| scenarios::default_alternatives(name)),
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
                let summary = slipstream_lab::report::Summary::of(&report, &[], "");
                println!("{}", slipstream_lab::report::markdown::table(&summary));
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

#[cfg(test)]
#[path = "main_tests.rs"]
mod tests;
