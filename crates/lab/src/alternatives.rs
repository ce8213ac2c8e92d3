//! What the lab compares Slipstream with, and how each alternative is set up on (and removed
//! from) the testbed's router namespace: `no-control`, `slipstream`, `slipstream-paper`,
//! `slipstream-ebpf`, `fixed-rwnd`, `htb-90` / `htb-95`, `household` and its budget
//! controllers `household-ledbat`, `household-key-bs`, `household-key-sa`, and
//! `household-police` (background UDP policed instead of shaped). What each runs, why
//! fixed-rwnd's default N is BDP / 2 and how the HTB tree is built: docs/lab/about.md.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use clap::ValueEnum;
use slipstream_testbed::daemon::Daemon;
use slipstream_testbed::{Ns, Testbed, ROUTER_LAN_IF};

use crate::scenarios::ScenarioOptions;

/// `--set fixed_window_bdp=F`: `fixed-rwnd`'s window in BDPs of the path.
pub const FIXED_WINDOW_BDP: &str = "fixed_window_bdp";

/// One alternative compared in a scenario; its command-line name (clap's [`ValueEnum`]) is its
/// label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, ValueEnum)]
pub enum Alternative {
    /// No daemon, no shaping.
    #[default]
    NoControl,
    /// `slipstreamd`, Vulture, Slipstream's variant (the default config).
    Slipstream,
    /// `slipstreamd`, Vulture with `variant = "paper"`.
    SlipstreamPaper,
    /// `slipstreamd`, Vulture (Slipstream's variant) on the tc eBPF datapath.
    SlipstreamEbpf,
    /// `slipstreamd` with a fixed window of BDP / 2.
    FixedRwnd,
    /// HTB shaping of the download on `br-lan` at 90 % of the bottleneck rate.
    #[value(name = "htb-90")]
    Htb90,
    /// The same at 95 %.
    #[value(name = "htb-95")]
    Htb95,
    /// `slipstreamd` with `controller = "household"` and the default `[household]` settings.
    Household,
    /// The same with `delay_target`'s `variant = "ledbat"` (RFC 6817's per-ACK rule, per round).
    HouseholdLedbat,
    /// The same with Key et al. Sec. 4.1, binary search (eq. 26-27).
    #[value(name = "household-key-bs")]
    HouseholdKeyBinarySearch,
    /// The same with Key et al. Sec. 4.2, stochastic approximation (eq. 31).
    #[value(name = "household-key-sa")]
    HouseholdKeyStochastic,
    /// Household control with background UDP flows policed (`household.udp = "police"`), the
    /// mechanism the shaper replaced.
    HouseholdPolice,
}

impl Alternative {
    /// The alternatives every scenario but household control's compares, in table order:
    /// household control first (the daemon's default controller), then the paper's (the others
    /// run only when named).
    pub const ALL: [Alternative; 7] = [
        Alternative::Household,
        Alternative::NoControl,
        Alternative::Slipstream,
        Alternative::SlipstreamPaper,
        Alternative::FixedRwnd,
        Alternative::Htb90,
        Alternative::Htb95,
    ];

    /// The command-line name ("no-control", "slipstream", "fixed-rwnd", "htb-90", ...); also the
    /// table column and [`crate::result::RunResult::alternative`].
    pub fn label(&self) -> String {
        self.to_possible_value().expect("no variant is skipped").get_name().to_string()
    }

    /// Whether `slipstreamd` runs for this alternative.
    pub fn uses_daemon(&self) -> bool {
        !matches!(self, Alternative::NoControl | Alternative::Htb90 | Alternative::Htb95)
    }

    /// Whether this is household control (`controller = "household"`), with any budget controller.
    fn is_household(&self) -> bool {
        self.household_budget().is_some()
    }

    /// A household alternative's `[household.budget]` table (empty for the default).
    fn household_budget(&self) -> Option<&'static str> {
        Some(match self {
            Alternative::Household | Alternative::HouseholdPolice => "",
            Alternative::HouseholdLedbat => "kind = \"delay_target\"\nvariant = \"ledbat\"\n",
            Alternative::HouseholdKeyBinarySearch => "kind = \"key_binary_search\"\n",
            Alternative::HouseholdKeyStochastic => "kind = \"key_stochastic\"\n",
            _ => return None,
        })
    }

    /// The fixed window used by `FixedRwnd`: `--set fixed_window_bdp=F` BDPs of the path, BDP / 2
    /// if not set (a sweep of F draws the trade a constant window makes, e.g. beside browsing).
    fn fixed_window_bytes(&self, opts: &ScenarioOptions) -> Result<Option<u64>> {
        if *self != Alternative::FixedRwnd {
            return Ok(None);
        }
        let fraction: f64 = opts.extra_or(FIXED_WINDOW_BDP, 0.5)?;
        ensure!(
            fraction > 0.0 && fraction.is_finite(),
            "--set {FIXED_WINDOW_BDP}={fraction}: a window is a positive number of BDPs"
        );
        Ok(Some(((opts.bdp_bytes() as f64 * fraction).round() as u64).max(1)))
    }

    /// The daemon's TOML config for this alternative, or `None` if it runs no daemon.
    pub fn daemon_config(&self, env: &AltEnv, control_socket: &Path) -> Option<String> {
        let controller = match self {
            Alternative::NoControl | Alternative::Htb90 | Alternative::Htb95 => return None,
            Alternative::Slipstream | Alternative::SlipstreamEbpf => {
                r#"{ kind = "vulture", variant = "slipstream" }"#.to_string()
            }
            Alternative::SlipstreamPaper => r#"{ kind = "vulture", variant = "paper" }"#.to_string(),
            Alternative::FixedRwnd => format!(
                r#"{{ kind = "fixed_window", window_bytes = {} }}"#,
                // An invalid `--set` is reported by `setup`, which asks first.
                self.fixed_window_bytes(&env.opts).ok().flatten()?
            ),
            _ => r#""household""#.to_string(),
        };
        let mut text = format!(
            "# slipstream-lab: alternative {label}\n\
             enabled = true\n\n\
             [datapath]\n\
             lan_interfaces = [\"{lan}\"]\n\
             hook = \"forward\"\n\
             engine = \"{engine}\"\n\n\
             [metrics]\n\
             listen = \"{metrics}\"\n\
             top_flows = 128\n\n\
             [control]\n\
             socket = \"{sock}\"\n",
            label = self.label(),
            engine = if *self == Alternative::SlipstreamEbpf { "ebpf" } else { "nfqueue" },
            lan = ROUTER_LAN_IF,
            metrics = METRICS_ADDR,
            sock = control_socket.display(),
        );
        for rule in &env.rules {
            let ports: Vec<String> = rule.ports.iter().map(u16::to_string).collect();
            text.push_str(&format!(
                "\n[[rules]]\nname = \"{}\"\nremote_ports = [{}]\ncontroller = {controller}\n",
                rule.name,
                ports.join(", ")
            ));
            if let Some(p) = env.protocol {
                text.push_str(&format!("protocol = \"{p}\"\n"));
            }
            if self.is_household() {
                for (key, value) in &rule.share {
                    text.push_str(&format!("{key} = {value}\n"));
                }
            }
        }
        if *self == Alternative::HouseholdPolice {
            text.push_str("\n[household]\nudp = \"police\"\n");
        }
        if let Some(budget) = self.household_budget().filter(|b| !b.is_empty()) {
            text.push_str(&format!("\n[household.budget]\n{budget}"));
        }
        Some(text)
    }

    /// The `tc -batch` script that installs this alternative's HTB tree on `dev` (see
    /// docs/lab/about.md), or `None` if it uses none.
    fn htb_script(&self, env: &AltEnv, dev: &str) -> Option<String> {
        let percent = match self {
            Alternative::Htb90 => 90.0,
            Alternative::Htb95 => 95.0,
            _ => return None,
        };
        let shaped = (env.opts.rate_mbit * 1e6 * percent / 100.0).round() as u64;
        let bg_rate = (shaped / 20).max(8_000);
        let be_rate = shaped.saturating_sub(bg_rate).max(8_000);
        let limit = env.opts.queue_packets().max(2);
        let class = |parent: &str, id: &str, rate: u64, extra: &str| {
            format!("class add dev {dev} parent {parent} classid {id} htb rate {rate}bit ceil {shaped}bit{extra}\n")
        };
        let mut script = format!("qdisc replace dev {dev} root handle 1: htb default 10\n");
        script += &class("1:", "1:1", shaped, "");
        script += &class("1:1", "1:10", be_rate, " prio 0 quantum 1514");
        script += &class("1:1", "1:20", bg_rate, " prio 7 quantum 1514");
        for leaf in [10, 20] {
            script += &format!("qdisc add dev {dev} parent 1:{leaf} handle {leaf}: pfifo limit {limit}\n");
        }
        for p in env.rules.iter().flat_map(|r| &r.ports) {
            for (proto, prio, m) in [("ip", 1, "ip"), ("ipv6", 2, "ip6")] {
                script += &format!(
                    "filter add dev {dev} parent 1: protocol {proto} prio {prio} u32 match {m} sport {p} 0xffff flowid 1:20\n"
                );
            }
        }
        Some(script)
    }

    /// Sets the alternative up on the router of `tb`; its daemon config, log, control socket
    /// and HTB script go to `env.work_dir`.
    pub fn setup(&self, tb: &Testbed, env: &AltEnv) -> Result<ActiveAlternative> {
        let mut active = ActiveAlternative::default();
        let stem = self.label();
        let window = self.fixed_window_bytes(&env.opts)?;
        let sock = env.work_dir.join(format!("{stem}.sock"));
        if let Some(text) = self.daemon_config(env, &sock) {
            let config_path = env.work_dir.join(format!("{stem}.toml"));
            std::fs::write(&config_path, &text)
                .with_context(|| format!("writing {}", config_path.display()))?;
            let log = env.work_dir.join(format!("{stem}-slipstreamd.log"));
            let daemon = Daemon::start(tb, &env.daemon_bin, &config_path, METRICS_ADDR, &log)
                .with_context(|| format!("starting slipstreamd for {}", self.label()))?;
            active.notes.extend(window.map(|w| format!("fixed window {w} bytes")));
            active.daemon = Some(daemon);
            active.control_socket = Some(sock);
            active.log_path = Some(log);
        }
        if let Some(script) = self.htb_script(env, ROUTER_LAN_IF) {
            let path = env.work_dir.join(format!("{stem}.tc"));
            std::fs::write(&path, script).with_context(|| format!("writing {}", path.display()))?;
            active.htb = true;
            tb.run_in(Ns::Router, &["tc".as_ref(), "-batch".as_ref(), path.as_os_str()])
                .context("installing the HTB tree")?;
        }
        Ok(active)
    }
}

/// Where the daemon's metrics listen inside the router namespace.
const METRICS_ADDR: &str = "127.0.0.1:9617";

/// One background rule of the daemon's config: its server ports and its claim on the household
/// budget, as TOML key and value (`("weight", "3")`, `("min_rate", "\"2mbit\"")`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabRule {
    /// Rule name (the daemon's metrics carry it).
    pub name: String,
    /// Server ports of its flows.
    pub ports: Vec<u16>,
    /// `weight`, `min_rate`, `priority`: written for the household alternatives only.
    pub share: Vec<(String, String)>,
}

/// What an alternative needs to know about the run.
#[derive(Debug, Clone)]
pub struct AltEnv {
    /// `slipstreamd`.
    pub daemon_bin: PathBuf,
    /// Directory (existing) for the generated config and the daemon's log: the run directory.
    pub work_dir: PathBuf,
    /// The background rules (their ports are also the HTB filters'); [`AltEnv::new`] makes one.
    pub rules: Vec<LabRule>,
    /// The bottleneck: rate, BDP and queue.
    pub opts: ScenarioOptions,
    /// Every rule's `protocol` (issue 24: `"udp"`, `"both"`); `None` leaves the key out (TCP),
    /// so scenarios without UDP background also run a daemon that lacks the key.
    pub protocol: Option<&'static str>,
}

impl AltEnv {
    /// `daemon_bin` on the path of `opts`, with one rule `lab-background` over `background_ports`.
    pub fn new(
        daemon_bin: PathBuf,
        opts: &ScenarioOptions,
        work_dir: PathBuf,
        background_ports: Vec<u16>,
    ) -> AltEnv {
        let rule = LabRule { name: "lab-background".into(), ports: background_ports, share: Vec::new() };
        AltEnv { daemon_bin, work_dir, rules: vec![rule], opts: opts.clone(), protocol: None }
    }
}

/// An alternative set up on a testbed. [`teardown`](Self::teardown) removes it; dropping it
/// kills the daemon (the namespace's deletion removes the rest).
#[derive(Default)]
pub struct ActiveAlternative {
    /// The daemon, if one runs.
    pub daemon: Option<Daemon>,
    /// Whether the HTB tree is on `br-lan`.
    htb: bool,
    /// The daemon's control socket.
    pub control_socket: Option<PathBuf>,
    /// The daemon's log.
    pub log_path: Option<PathBuf>,
    /// Notes for the run result.
    pub notes: Vec<String>,
}

impl ActiveAlternative {
    /// Stops the daemon (checking it exits cleanly and removed its rules) and removes the HTB
    /// tree. Returns notes.
    pub fn teardown(mut self, tb: &Testbed) -> Result<Vec<String>> {
        let mut notes = std::mem::take(&mut self.notes);
        if let Some(d) = self.daemon.take() {
            let log = d.log();
            let status = d.stop()?;
            ensure!(status.success(), "slipstreamd exited with {status}:\n{log}");
            let rules = tb.run_in(Ns::Router, &["iptables-legacy-save", "-t", "mangle"]).unwrap_or_default();
            let nft = tb.run_in(Ns::Router, &["nft", "list", "ruleset"]).unwrap_or_default();
            let left = rules.contains("SLIPSTREAM") || nft.contains("slipstream");
            ensure!(!left, "slipstreamd left firewall rules behind");
            let warnings = log.lines().filter(|l| l.contains("WARN")).count();
            if warnings > 0 {
                notes.push(format!("slipstreamd logged {warnings} warnings"));
            }
        }
        if self.htb {
            tb.run_in(Ns::Router, &["tc", "qdisc", "del", "dev", ROUTER_LAN_IF, "root"])
                .context("removing the HTB tree")?;
        }
        Ok(notes)
    }
}

impl fmt::Display for Alternative {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

#[cfg(test)]
mod tests;
