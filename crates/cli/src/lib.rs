//! `slipstream`: asks a running `slipstreamd` over its control socket what it is doing.
//!
//! ```text
//! slipstream status [--json] [--socket PATH]
//! slipstream flows  [--json] [--socket PATH] [--watch SECS]
//! slipstream presets [NAME]
//! ```
//!
//! Exit status: 0 on success, 1 if the daemon cannot be reached or answers with an error.
//!
//! A library, not a binary of its own: `slipstreamd` runs [`run`] when it is started under the
//! name `slipstream` (the package installs one file and a symlink; `crates/daemon/src/multicall.rs`).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod presets;

use clap::{Parser, Subcommand};
use slipstream_inspect::{query, render_flows, render_status, Request, Response, DEFAULT_SOCKET};

/// Shows what slipstreamd is doing: its status, and every background flow it controls.
#[derive(Parser, Debug)]
#[command(name = "slipstream", version, about)]
struct Cli {
    /// The daemon's control socket ([control] socket in its config).
    #[arg(long, global = true, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Print the daemon's JSON answer instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Version, uptime, config and reloads, rules, firewall, queues, counters and, with household
    /// control, each link's budget, shared queueing delay, base RTT, flows (held) and goodput.
    Status,
    /// Every controlled flow: LAN host, remote, class, controller, link, household allocation
    /// (HELD while waiting its turn), windows, PIVs, goodput, RTT.
    Flows {
        /// Refresh every SECS seconds until interrupted.
        #[arg(long, value_name = "SECS")]
        watch: Option<f64>,
    },
    /// The presets a rule can name (`preset = "steam"`), built in from crates/names/presets.toml; with
    /// a NAME, its DNS name patterns and sources. Needs no running daemon.
    Presets {
        /// One preset to show in full.
        name: Option<String>,
    },
}

/// Runs the CLI with `args` (the first is the program name, as in `std::env::args_os`) and
/// returns its exit status.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = Cli::parse_from(args);
    let (request, watch) = match cli.command {
        Command::Status => (Request::Status, None),
        Command::Flows { watch } => (Request::Flows, watch),
        Command::Presets { name } => return presets::show(name.as_deref()),
    };
    if let Some(secs) = watch {
        if !(secs.is_finite() && secs > 0.0) {
            eprintln!("error: --watch needs a positive number of seconds");
            return ExitCode::from(2);
        }
        loop {
            // Clear the screen and home the cursor, then draw.
            let (out, ok) = once(&cli.socket, &request, cli.json);
            print!("\x1b[H\x1b[2J{out}");
            let _ = std::io::stdout().flush();
            if !ok {
                return ExitCode::FAILURE;
            }
            std::thread::sleep(Duration::from_secs_f64(secs));
        }
    }
    let (out, ok) = once(&cli.socket, &request, cli.json);
    if ok {
        print!("{out}");
        ExitCode::SUCCESS
    } else {
        eprint!("{out}");
        ExitCode::FAILURE
    }
}

/// One exchange, rendered; false if it failed (the text is then the error).
fn once(socket: &std::path::Path, request: &Request, json: bool) -> (String, bool) {
    let response = match query(socket, request) {
        Ok(r) => r,
        Err(e) => return (format!("error: {e}\n"), false),
    };
    if let Response::Error(e) = &response {
        return (format!("error: slipstreamd: {e}\n"), false);
    }
    if json {
        let value = match &response {
            Response::Status(s) => serde_json::to_string_pretty(s),
            Response::Flows(f) => serde_json::to_string_pretty(f),
            Response::Error(_) => unreachable!("handled above"),
        };
        return match value {
            Ok(v) => (format!("{v}\n"), true),
            Err(e) => (format!("error: {e}\n"), false),
        };
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match response {
        Response::Status(s) => (render_status(&s, now), true),
        Response::Flows(f) => (render_flows(&f), true),
        Response::Error(_) => unreachable!("handled above"),
    }
}
