//! The lab's scenarios and what they share: the command table [`SCENARIOS`], a scenario's
//! command line [`ScenarioOptions`], and [`LabContext`]. Each scenario module's
//! `run(ctx, opts) -> Result<ScenarioReport>` runs every alternative (each `opts.repeats` times)
//! on a fresh testbed ([`crate::harness`]) and writes only through [`LabContext::write_report`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::alternatives::Alternative;
use crate::result::{timestamp_dirname, ScenarioReport};

pub mod alone;
pub mod both;
pub mod cbr;
pub mod cwnd;
pub mod fairness;
pub mod home;
pub mod link;
pub mod many_flows;
pub mod no_timestamps;
pub mod onoff;
pub mod phases;
pub mod smoke;
pub mod weights;

pub mod datapath;
pub mod udp_background;
pub mod udp_square;
pub mod web;

/// A scenario: its command name, what it runs (its `--help` line), its runner, the `--set` keys
/// it reads, and what it compares without `--alternatives`.
#[derive(Debug)]
pub struct Scenario {
    /// Command-line name, e.g. "udp-square".
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    pub run: fn(&LabContext, &ScenarioOptions) -> Result<ScenarioReport>,
    /// The `--set` keys it reads (any other is an error).
    pub set_keys: &'static [&'static str],
    /// The alternatives it compares unless `--alternatives` says otherwise.
    pub alternatives: &'static [Alternative],
}

const fn scenario(
    name: &'static str,
    run: fn(&LabContext, &ScenarioOptions) -> Result<ScenarioReport>,
    set_keys: &'static [&'static str],
    about: &'static str,
) -> Scenario {
    Scenario { name, about, run, set_keys, alternatives: PAPER_ALTERNATIVES }
}

impl Scenario {
    /// The same scenario, of household control: it compares [`HOUSEHOLD_ALTERNATIVES`].
    const fn household(self) -> Scenario {
        Scenario { alternatives: &HOUSEHOLD_ALTERNATIVES, ..self }
    }

    /// The same scenario, of UDP background (issue 24): it compares [`UDP_ALTERNATIVES`].
    const fn udp(self) -> Scenario {
        Scenario { alternatives: &UDP_ALTERNATIVES, ..self }
    }
}

/// Every scenario, in the order `all` runs them (and the page shows them); `smoke`, last, is
/// not part of `all`.
pub static SCENARIOS: [Scenario; 18] = [
    scenario("alone", alone::run, &[], "One background download alone (Vulture Sec. 0.4.4, Fig. 17)."),
    scenario(
        "cbr",
        cbr::run,
        &[],
        "A 6 Mbit/s best-effort download, a background one joining for the middle third (Fig. 15).",
    ),
    scenario("cwnd", cwnd::run, &[], "The daemon's cwnd estimate against the sender's (Figs. 11-12)."),
    scenario(
        "onoff",
        onoff::run,
        &["onoff_periods"],
        "An on/off best-effort download beside a background one (Table 1).",
    ),
    scenario(
        "fairness",
        fairness::run,
        &["fairness_flows", "fairness_hosts"],
        "N background flows with staggered starts (Table 2).",
    ),
    scenario(
        "udp-square",
        udp_square::run,
        &["periods"],
        "A UDP square wave beside a background flow (Key et al. Sec. 5.2).",
    ),
    scenario(
        "web",
        web::run,
        &["sessions"],
        "Web browsing beside a background download (Key et al. Sec. 5.3).",
    ),
    scenario(
        "home",
        home::run,
        &["sessions", "background"],
        "A household's evening: browsing, a call and a game beside a download, a backup and P2P.",
    ),
    scenario("datapath", datapath::run, &["cpu_rates"], "What forwarding through NFQUEUE costs the router."),
    scenario(
        "no-timestamps",
        no_timestamps::run,
        &["flows"],
        "Household control: LAN hosts without TCP timestamps.",
    )
    .household(),
    scenario(
        "many-flows",
        many_flows::run,
        &["flows"],
        "Household control: many background flows of several hosts.",
    )
    .household(),
    scenario("weights", weights::run, &[], "Household control: per-rule weights and minimum rates.")
        .household(),
    scenario(
        "link",
        link::run,
        &[],
        "Household control on a link that changes: the rate halves for 10 s, doubles; the base RTT steps.",
    )
    .household(),
    scenario(
        "both",
        both::run,
        &["timestamps"],
        "Household control: background downloading and uploading at once, beside best effort either way.",
    )
    .household(),
    scenario(
        "quic",
        udp_background::run_quic,
        &[],
        "A background QUIC download (UDP 443) beside a best-effort TCP download; ping.",
    )
    .udp(),
    scenario(
        "utp",
        udp_background::run_utp,
        &[],
        "A background uTP torrent (Transmission) beside a best-effort TCP download; ping.",
    )
    .udp(),
    scenario(
        "udp-mix",
        udp_background::run_mix,
        &[],
        "Two hosts' background: QUIC + TCP on one, a uTP torrent + TCP on the other; their shares.",
    )
    .udp(),
    scenario("smoke", smoke::run, &[], "A short alone and cbr (CI)."),
];

/// The scenarios `all` runs: every one but `smoke`, in order.
pub fn all() -> impl Iterator<Item = &'static Scenario> {
    SCENARIOS.iter().filter(|s| s.name != "smoke")
}

/// The scenario named `name` (command-line spelling, e.g. "udp-square").
pub fn lookup(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// What household control is compared with (itself first, as everywhere): nothing, the
/// shaping OpenWrt users do today, and Slipstream's per-flow Vulture.
pub const HOUSEHOLD_ALTERNATIVES: [Alternative; 4] =
    [Alternative::Household, Alternative::NoControl, Alternative::Htb95, Alternative::Slipstream];

/// What the UDP background scenarios compare: household control (its rule classes the UDP
/// flows) and nothing. The others clamp TCP windows or shape by port only.
pub const UDP_ALTERNATIVES: [Alternative; 2] = [Alternative::Household, Alternative::NoControl];

/// What the other scenarios compare: [`Alternative::ALL`], household control first.
const PAPER_ALTERNATIVES: &[Alternative] = &Alternative::ALL;

/// Options common to all scenarios: a scenario's command line (these docs are its `--help`).
#[derive(Debug, Clone, clap::Args)]
pub struct ScenarioOptions {
    /// Multiplies every phase length (1 = the documented durations, 60-120 s; e.g. 0.1 for a
    /// quick look).
    #[arg(long = "scale", default_value_t = 1.0)]
    pub duration_scale: f64,
    /// Runs per alternative.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
    /// Comma-separated alternatives, in run (and table column) order. Default:
    /// household,no-control,slipstream,slipstream-paper,fixed-rwnd,htb-90,htb-95; for
    /// no-timestamps, many-flows, weights and link household,no-control,htb-95,slipstream.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub alternatives: Vec<Alternative>,
    /// Bottleneck rate, Mbit/s (both directions, or the download's with `--up-rate`).
    #[arg(long = "rate", default_value_t = 10.0)]
    pub rate_mbit: f64,
    /// The upload bottleneck's rate, Mbit/s, for an asymmetric link (DSL, cable: `--rate 20
    /// --up-rate 2`); its queue is one BDP at this rate unless `--queue-bytes` is given.
    #[arg(long = "up-rate")]
    pub upload_rate_mbit: Option<f64>,
    /// Base RTT, ms.
    #[arg(long = "rtt", default_value_t = 100.0)]
    pub rtt_ms: f64,
    /// Bottleneck queue in bytes (default: one BDP, 83 full frames at 10 Mbit/s and 100 ms;
    /// Vulture Sec. 0.4.1 used a pfifo of 86 packets).
    #[arg(long)]
    pub queue_bytes: Option<u64>,
    /// Sender congestion control of the TCP flows.
    #[arg(long, default_value = "cubic", value_parser = ["cubic", "reno", "bbr"])]
    pub cc: String,
    /// Scenario-specific options, key=value (repeatable; unknown keys are errors).
    #[arg(long = "set", value_parser = parse_key_value)]
    pub set: Vec<(String, String)>,
    /// Runs again (at most twice more) a run whose delay element released packets later than
    /// this on average, ms: the host set its delays, and a delay-based controller read them as
    /// queue (docs/lab/about.md, the machine rows). Off by default.
    #[arg(long = "max-lateness")]
    pub max_lateness_ms: Option<f64>,
    /// Jitter that no queue holds, `EVERY_MS:LENGTH_MS`: the delay element stops releasing
    /// packets for LENGTH_MS at random moments, EVERY_MS apart on average, both directions (a
    /// far Wi-Fi's retries, a busy host; `slipstream_testbed::stalls`). Off by default.
    #[arg(long = "stalls", value_parser = parse_stalls)]
    pub stalls_ms: Option<(f64, f64)>,
}

fn parse_stalls(text: &str) -> Result<(f64, f64)> {
    let (every, length) = text.split_once(':').context("expected EVERY_MS:LENGTH_MS")?;
    let ms = |what: &str, v: &str| -> Result<f64> {
        let ms: f64 = v.trim().parse().with_context(|| format!("{what} {v:?} is not a number"))?;
        ensure!(ms.is_finite() && ms > 0.0, "{what} must be a positive number of ms, got {ms}");
        Ok(ms)
    };
    let (every, length) = (ms("EVERY_MS", every)?, ms("LENGTH_MS", length)?);
    ensure!(length < every, "stalls of {length} ms every {every} ms would hold the path most of the time");
    Ok((every, length))
}

fn parse_key_value(kv: &str) -> Result<(String, String)> {
    let (k, v) = kv.split_once('=').context("expected key=value")?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

impl Default for ScenarioOptions {
    /// The command line's defaults.
    fn default() -> Self {
        #[derive(clap::Parser)]
        struct Line {
            #[command(flatten)]
            opts: ScenarioOptions,
        }
        <Line as clap::Parser>::parse_from(["slipstream-lab"]).opts
    }
}

impl ScenarioOptions {
    /// `secs × duration_scale`, at least `min` seconds.
    pub fn scaled(&self, secs: f64, min: f64) -> f64 {
        (secs * self.duration_scale).max(min)
    }

    /// The link's rate for titles: "10" when symmetric, "20/2" (download/upload) when not.
    pub fn rate_label(&self) -> String {
        match self.upload_rate_mbit {
            Some(up) if up != self.rate_mbit => format!("{}/{up}", self.rate_mbit),
            _ => self.rate_mbit.to_string(),
        }
    }

    /// Bandwidth-delay product in bytes.
    pub fn bdp_bytes(&self) -> u64 {
        (self.rate_mbit * 1e6 / 8.0 * self.rtt_ms / 1000.0).round() as u64
    }

    /// The queue limit used, bytes.
    pub fn effective_queue_bytes(&self) -> u64 {
        let bytes = self.queue_bytes.unwrap_or_else(|| self.bdp_bytes());
        bytes.max(2 * slipstream_testbed::cmd::FRAME_BYTES)
    }

    /// The queue limit in full-size frames (rounded up).
    pub fn queue_packets(&self) -> u64 {
        self.effective_queue_bytes().div_ceil(slipstream_testbed::cmd::FRAME_BYTES)
    }

    /// Labels of the alternatives, in order.
    pub fn alternative_labels(&self) -> Vec<String> {
        self.alternatives.iter().map(Alternative::label).collect()
    }

    /// The `--set` option `key` (the last one given).
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.set.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The comma-separated `--set` list `key` (or `default`), each entry parsed; an entry that
    /// does not parse is an error.
    pub fn list<T: std::str::FromStr>(&self, key: &str, default: &str) -> Result<Vec<T>> {
        let list = self.extra(key).unwrap_or(default);
        let parse =
            |v: &str| v.trim().parse().map_err(|_| anyhow::anyhow!("--set {key}={list}: bad entry {v:?}"));
        list.split(',').map(parse).collect()
    }

    /// The `--set` option `key` parsed, or `default` when not given; a value that does not
    /// parse is an error.
    pub fn extra_or<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T> {
        match self.extra(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| anyhow::anyhow!("--set {key}={v}: not a valid value")),
        }
    }
}

/// Where things are and how to report progress.
#[derive(Debug)]
pub struct LabContext {
    /// `slipstreamd`.
    pub daemon_bin: PathBuf,
    /// `slipstream-delay`.
    pub delay_bin: PathBuf,
    /// Root of the results (`--out`, default `lab-results`).
    pub out_dir: PathBuf,
    pub progress: Progress,
    /// Set by the SIGINT/SIGTERM handler: scenarios stop at the next check.
    pub interrupted: Arc<AtomicBool>,
    /// The command line that started the lab (recorded in each report, to rerun it).
    pub command_line: String,
}

/// The namespace-name prefix base of every testbed the lab builds (`slipstream-lab cleanup`
/// removes namespaces starting with it).
pub const LAB_PREFIX: &str = "sslab";

impl LabContext {
    /// Binaries beside the running executable (or `$SLIPSTREAMD_BIN`, `$SLIPSTREAM_DELAY_BIN`),
    /// results under `out_dir`.
    pub fn new(out_dir: impl Into<PathBuf>) -> LabContext {
        LabContext {
            daemon_bin: slipstream_testbed::workspace_binary("slipstreamd", "SLIPSTREAMD_BIN"),
            delay_bin: slipstream_testbed::delay_binary(),
            out_dir: out_dir.into(),
            progress: Progress::default(),
            interrupted: Arc::new(AtomicBool::new(false)),
            command_line: String::new(),
        }
    }

    /// Fails if the run was interrupted (Ctrl-C).
    pub fn check_interrupted(&self) -> Result<()> {
        ensure!(!self.interrupted.load(Ordering::SeqCst), "interrupted");
        Ok(())
    }

    /// `<out>/<scenario>/<timestamp>` for a report started at `started_unix` (created).
    pub fn run_dir(&self, scenario: &str, started_unix: f64) -> Result<PathBuf> {
        let dir = self.out_dir.join(scenario).join(timestamp_dirname(started_unix));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(dir)
    }

    /// Writes `result.json`, `table.md` and the plots into the report's [`run_dir`](Self::run_dir)
    /// (the one its runs wrote their logs to); returns the report.
    pub fn write_report(&self, mut report: ScenarioReport) -> Result<ScenarioReport> {
        if report.command.is_empty() {
            report.command.clone_from(&self.command_line);
        }
        let dir = self.run_dir(&report.scenario, report.started_unix)?;
        crate::report::write_scenario_outputs(&dir, &report)?;
        self.progress.log(&format!("[{}] wrote {}", report.scenario, dir.join("result.json").display()));
        Ok(report)
    }
}

/// Progress output on stderr: [`status`](Self::status) lines overwrite each other on a
/// terminal (and are rate-limited to one per 5 s otherwise); [`log`](Self::log) lines stay.
#[derive(Debug)]
pub struct Progress {
    /// What starts a line: on a terminal, a return and erase-line over the status line.
    clear: &'static str,
    last: Mutex<Option<Instant>>,
}

impl Default for Progress {
    fn default() -> Self {
        let clear = if std::io::stderr().is_terminal() { "\r\x1b[K" } else { "" };
        Progress { clear, last: Mutex::new(None) }
    }
}

impl Progress {
    /// A persistent line.
    pub fn log(&self, line: &str) {
        eprintln!("{}{line}", self.clear);
    }

    /// A transient status line such as
    /// `[cbr] alternative 2/5 slipstream  t=34/90 s  BE 5.9 Mbit/s  BG 0.4 Mbit/s`.
    pub fn status(&self, line: &str) {
        let tty = !self.clear.is_empty();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let every = if tty { Duration::from_millis(200) } else { Duration::from_secs(5) };
        if last.is_some_and(|l| l.elapsed() < every) {
            return;
        }
        *last = Some(Instant::now());
        eprint!("{}{line}{}", self.clear, if tty { "" } else { "\n" });
    }
}

#[cfg(test)]
mod tests;
