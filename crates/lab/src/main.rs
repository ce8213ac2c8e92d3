//! `slipstream-lab`: runs the lab's scenarios, `report` and `cleanup` (see `--help` and
//! docs/lab/about.md).
//!
//! SIGINT/SIGTERM: the running scenario stops at its next check and its `Drop`s tear the testbed
//! down; if that has not happened within 15 s, the handler removes this process's namespaces
//! itself and exits 130.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Result};
use clap::{Args, FromArgMatches};
use slipstream_lab::report::Publish;
use slipstream_lab::scenarios::{self, LabContext, Scenario, ScenarioOptions, LAB_PREFIX};

/// The command line: a subcommand per scenario (its help from [`scenarios::SCENARIOS`]) and
/// `all`, each with [`RunArgs`]; `report`; `cleanup`.
fn cli() -> clap::Command {
    let run = |name: &'static str, about: &'static str| {
        // The about line after the arguments: their doc comments would replace it.
        RunArgs::augment_args(clap::Command::new(name)).about(about)
    };
    let report = "Publishes the latest run of each scenario under --out into docs/lab/ and renders \
                  docs/lab/README.md from the committed summaries";
    clap::Command::new("slipstream-lab")
        .about("Slipstream's evaluation lab (network namespaces; needs root)")
        .subcommand_required(true)
        .subcommands(scenarios::SCENARIOS.iter().map(|s| run(s.name, s.about)))
        .subcommand(run("all", "Every scenario but smoke, in the order above."))
        .subcommand(ReportArgs::augment_args(clap::Command::new("report")).about(report))
        .subcommand(
            clap::Command::new("cleanup")
                .about("Removes stale lab namespaces (any process's) and their processes."),
        )
}

/// `report`'s arguments.
#[derive(Args, Debug)]
struct ReportArgs {
    /// Results directory.
    #[arg(long, default_value = "lab-results")]
    out: PathBuf,
    /// Keep the committed columns a run lacks beside its own (run only `--alternatives household`
    /// and the others stay on the page, "how measured" naming each column's run) and add its plots
    /// beside the committed ones.
    #[arg(long)]
    merge: bool,
}

/// A scenario's arguments: where results go (as for `report`), and its options.
#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    report: ReportArgs,
    #[command(flatten)]
    opts: ScenarioOptions,
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

/// Checks the numbers of `o` and that every `--set` key is one of `chosen`'s.
fn check(o: &ScenarioOptions, chosen: &[&Scenario]) -> Result<()> {
    ensure!(o.duration_scale > 0.0 && o.duration_scale.is_finite(), "--scale must be positive");
    if let Some(ms) = o.max_lateness_ms {
        ensure!(ms > 0.0 && ms.is_finite(), "--max-lateness must be positive");
    }
    ensure!(o.rate_mbit > 0.0 && o.rate_mbit.is_finite(), "--rate must be positive");
    if let Some(up) = o.upload_rate_mbit {
        ensure!(up > 0.0 && up.is_finite(), "--up-rate must be positive");
    }
    ensure!(o.rtt_ms >= 0.0 && o.rtt_ms.is_finite(), "--rtt must be >= 0");
    let mut valid: Vec<&str> = chosen.iter().flat_map(|s| s.set_keys).copied().collect();
    // The alternatives' own keys apply in every scenario.
    valid.push(slipstream_lab::alternatives::FIXED_WINDOW_BDP);
    valid.sort_unstable();
    valid.dedup();
    if let Some((k, _)) = o.set.iter().find(|(k, _)| !valid.contains(&k.as_str())) {
        let list = if valid.is_empty() { "none".to_string() } else { valid.join(", ") };
        let names: Vec<&str> = chosen.iter().map(|s| s.name).collect();
        bail!("--set {k}: unknown key for {} (valid: {list})", names.join(", "));
    }
    Ok(())
}

/// Removes stale lab namespaces (any process's) and their processes.
fn cleanup() -> Result<()> {
    let removed = slipstream_testbed::cleanup_stale(LAB_PREFIX)?;
    for n in &removed {
        println!("removed namespace {n}");
    }
    println!("cleanup: {} namespace(s) removed", removed.len());
    Ok(())
}

/// Errors print as one line with their causes (anyhow's `{:#}`; returning them from `main`
/// would print a backtrace where `RUST_BACKTRACE` is set).
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
            let args = ReportArgs::from_arg_matches(sub)?;
            let how = if args.merge { Publish::Merge } else { Publish::Replace };
            let readme = slipstream_lab::report::gather(&args.out, std::path::Path::new("docs"), how)?;
            println!("wrote {}", readme.display());
            return Ok(());
        }
        "all" => scenarios::all().collect(),
        name => vec![scenarios::lookup(name).expect("every other subcommand is a scenario")],
    };
    let args = RunArgs::from_arg_matches(sub)?;
    check(&args.opts, &chosen)?;
    let mut ctx = LabContext::new(&args.report.out);
    // This invocation as a shell line, program name shortened to `slipstream-lab`.
    let given: Vec<String> = std::env::args().skip(1).collect();
    ctx.command_line = format!("slipstream-lab {}", given.join(" "));
    if let Err(why) = slipstream_testbed::netns_supported() {
        bail!("cannot build testbeds: {why}");
    }
    install_signal_handlers(Arc::clone(&ctx.interrupted))?;
    let mut failed = Vec::new();
    for scenario in chosen {
        let name = scenario.name;
        let alternatives = match args.opts.alternatives.as_slice() {
            [] => scenario.alternatives.to_vec(),
            given => given.to_vec(),
        };
        let opts = ScenarioOptions { alternatives, ..args.opts.clone() };
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
    ensure!(failed.is_empty(), "failed: {}", failed.join(", "));
    Ok(())
}

#[cfg(test)]
#[path = "main_tests.rs"]
mod tests;
