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
use clap::{Args, FromArgMatches, ValueEnum};
use slipstream_lab::scenarios::{self, LabContext, Scenario, ScenarioOptions, LAB_PREFIX};
use slipstream_lab::Alternative;

/// The command line: a subcommand per scenario (its help from [`scenarios::SCENARIOS`]) and
/// `all`, each with [`RunArgs`]; `report`; `cleanup`.
fn cli() -> clap::Command {
    let run = |name: &'static str, about: &'static str| {
        RunArgs::augment_args(clap::Command::new(name).about(about))
    };
    let report = "Publishes the latest run of each scenario under --out into docs/lab/ and renders \
                  docs/lab/README.md from the committed summaries";
    clap::Command::new("slipstream-lab")
        .about("Slipstream's evaluation lab (network namespaces; needs root)")
        .subcommand_required(true)
        .subcommands(scenarios::SCENARIOS.iter().map(|s| run(s.name, s.about)))
        .subcommand(run("all", "Every scenario but smoke, in the order above."))
        .subcommand(ReportArgs::augment_args(clap::Command::new("report").about(report)))
        .subcommand(
            clap::Command::new("cleanup")
                .about("Removes stale lab namespaces (any process's), their processes and control sockets."),
        )
}

/// `report`'s arguments.
#[derive(Args, Debug)]
struct ReportArgs {
    /// Results directory.
    #[arg(long, default_value = "lab-results")]
    out: PathBuf,
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
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    alternatives: Vec<Alternative>,
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

fn parse_key_value(kv: &str) -> Result<(String, String)> {
    let (k, v) = kv.split_once('=').context("expected key=value")?;
    Ok((k.trim().to_string(), v.trim().to_string()))
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

/// The options of a run of `chosen`: checks the numbers and that every `--set` key is one of
/// theirs.
fn options(a: &RunArgs, chosen: &[&Scenario]) -> Result<ScenarioOptions> {
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
    let mut valid: Vec<&str> = chosen.iter().flat_map(|s| s.set_keys).copied().collect();
    valid.sort_unstable();
    valid.dedup();
    let mut extra = BTreeMap::new();
    for (k, v) in &a.set {
        if !valid.contains(&k.as_str()) {
            let list = if valid.is_empty() { "none".to_string() } else { valid.join(", ") };
            let names: Vec<&str> = chosen.iter().map(|s| s.name).collect();
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
    if let Err(e) = real_main(&cli().get_matches()) {
        eprintln!("slipstream-lab: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main(matches: &clap::ArgMatches) -> Result<()> {
    let (name, sub) = matches.subcommand().expect("a subcommand is required");
    let chosen: Vec<&Scenario> = match name {
        "cleanup" => return cleanup(),
        "report" => {
            let out = ReportArgs::from_arg_matches(sub)?.out;
            let readme = slipstream_lab::report::gather(&out, std::path::Path::new("docs"))?;
            println!("wrote {}", readme.display());
            return Ok(());
        }
        "all" => scenarios::all().collect(),
        name => vec![scenarios::lookup(name).expect("every other subcommand is a scenario")],
    };
    let args = RunArgs::from_arg_matches(sub)?;
    let opts = options(&args, &chosen)?;
    let mut ctx = LabContext::new(&args.out);
    ctx.command_line = command_line();
    if let Err(why) = slipstream_testbed::netns_supported() {
        bail!("cannot build testbeds: {why}");
    }
    install_signal_handlers(Arc::clone(&ctx.interrupted))?;
    let mut failed = Vec::new();
    for scenario in chosen {
        let name = scenario.name;
        let alternatives = match args.alternatives.as_slice() {
            [] => scenarios::default_alternatives(scenario),
            given => given.to_vec(),
        };
        let opts = ScenarioOptions { alternatives, ..opts.clone() };
        match (scenario.run)(&ctx, &opts) {
            Ok(report) => {
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
