//! What the lab compares Slipstream with, and how each alternative is set up on (and removed
//! from) the testbed's router namespace.
//!
//! | label              | what runs on the router                                             |
//! |--------------------|---------------------------------------------------------------------|
//! | `no-control`       | nothing: background and best effort compete as plain TCP            |
//! | `slipstream`       | `slipstreamd`, rule on the background port(s), Vulture (our variant) |
//! | `slipstream-paper` | the same with `variant = "paper"` (Vulture exactly as Li & Welzl)   |
//! | `slipstream-ebpf`  | `slipstream` on the tc eBPF datapath (`datapath.engine = "ebpf"`)   |
//! | `fixed-rwnd[=N]`   | `slipstreamd` with `controller = { kind = "fixed_window", window_bytes = N }` |
//! | `htb-90`, `htb-95` | no daemon; HTB download shaping on `br-lan` egress at 90/95% of the bottleneck |
//! | `household`        | `slipstreamd`, `controller = "household"`: one budget per link for all background flows |
//! | `household-ledbat`, `household-key-bs`, `household-key-sa` | the same with the budget controller `delay_target` with `variant = "ledbat"` (RFC 6817), `key_binary_search` or `key_stochastic` (Key et al. Sec. 4) |
//!
//! A scenario may split the background ports over several rules ([`LabRule`]: the `weights`
//! scenario); their `weight` / `min_rate` / `priority` are written for `household` only, the one
//! controller that shares a budget (the config rejects them elsewhere).
//!
//! **fixed-rwnd's N.** Default N = BDP / 2 (62 500 bytes at 10 Mbit/s × 100 ms), i.e. a static
//! clamp that lets the background flow take at most half the link at the base RTT (and less when
//! a queue builds up, since its rate is N / RTT). That is the best a *static* window can do without
//! knowing the load: a larger N leaves best effort less room when both are active, a smaller one
//! wastes more of the idle link (at BDP / 2 the background flow alone reaches only ~50%). The
//! configuration guide's fixed-window example (docs/configuration.md: 65 535 bytes, "about 5.2 Mbit/s at 100 ms RTT") is the same
//! operating point. `fixed-rwnd=N` sets N explicitly.
//!
//! **HTB** is what OpenWrt users do today (qos-scripts / SQM without cake): shape the *download*
//! on the router's LAN-facing egress below the link rate, so the queue forms in the router where
//! it can be prioritised instead of at the ISP. Tree on `br-lan`:
//! `1: htb default 10` → `1:1` rate = ceil = S (S = percent × bottleneck rate) → `1:10` best
//! effort (rate S − S/20, ceil S, prio 0) and `1:20` background (rate S/20, ceil S, prio 7), each
//! with a `pfifo` leaf of the bottleneck's queue length in packets (this kernel has neither
//! fq_codel nor cake). u32 filters on the background ports' source port (downloads: the server's
//! port) send background to `1:20`. Both classes may borrow up to S; prio 0 gets spare tokens
//! first. The 5% assured rate of the background class mirrors qos-scripts' small "bulk" share.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};
use slipstream_testbed::daemon::Daemon;
use slipstream_testbed::{Ns, Testbed, ROUTER_LAN_IF};

use crate::scenarios::ScenarioOptions;

/// One alternative compared in a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alternative {
    /// No daemon, no shaping.
    NoControl,
    /// `slipstreamd`, Vulture, Slipstream's variant (the default config).
    Slipstream,
    /// `slipstreamd`, Vulture with `variant = "paper"`.
    SlipstreamPaper,
    /// `slipstreamd`, Vulture (Slipstream's variant) on the tc eBPF datapath.
    SlipstreamEbpf,
    /// `slipstreamd` with a fixed window; `None` = BDP / 2 (see the module docs).
    FixedRwnd(Option<u64>),
    /// HTB shaping of the download on `br-lan` at `percent` % of the bottleneck rate.
    HtbShaping {
        /// 90 or 95 (any 1-100 is accepted).
        percent: u8,
    },
    /// `slipstreamd` with `controller = "household"`: default `[household]` settings, or
    /// another budget controller.
    Household(HouseholdBudget),
}

/// The household budget controller an alternative runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HouseholdBudget {
    /// The default: `delay_target` with its proportional rule.
    Default,
    /// `delay_target` with `variant = "ledbat"` (RFC 6817's per-ACK rule, per round).
    Ledbat,
    /// Key et al. Sec. 4.1, binary search (eq. 26-27).
    KeyBinarySearch,
    /// Key et al. Sec. 4.2, stochastic approximation (eq. 31).
    KeyStochastic,
}

impl HouseholdBudget {
    /// Every budget controller, in table order.
    pub const ALL: [HouseholdBudget; 4] = [
        HouseholdBudget::Default,
        HouseholdBudget::Ledbat,
        HouseholdBudget::KeyBinarySearch,
        HouseholdBudget::KeyStochastic,
    ];

    fn label(self) -> &'static str {
        match self {
            HouseholdBudget::Default => "household",
            HouseholdBudget::Ledbat => "household-ledbat",
            HouseholdBudget::KeyBinarySearch => "household-key-bs",
            HouseholdBudget::KeyStochastic => "household-key-sa",
        }
    }

    /// The `[household.budget]` table, or nothing for the default.
    fn config(self) -> &'static str {
        match self {
            HouseholdBudget::Default => "",
            HouseholdBudget::Ledbat => {
                "\n[household.budget]\nkind = \"delay_target\"\nvariant = \"ledbat\"\n"
            }
            HouseholdBudget::KeyBinarySearch => "\n[household.budget]\nkind = \"key_binary_search\"\n",
            HouseholdBudget::KeyStochastic => "\n[household.budget]\nkind = \"key_stochastic\"\n",
        }
    }
}

impl Alternative {
    /// Every alternative with its default parameters, in table order.
    pub const ALL: [Alternative; 7] = [
        Alternative::NoControl,
        Alternative::Slipstream,
        Alternative::SlipstreamPaper,
        Alternative::FixedRwnd(None),
        Alternative::HtbShaping { percent: 90 },
        Alternative::HtbShaping { percent: 95 },
        Alternative::Household(HouseholdBudget::Default),
    ];

    /// The command-line label ("no-control", "slipstream", "fixed-rwnd", "htb-90", ...); also the
    /// table column and [`crate::result::RunResult::alternative`].
    pub fn label(&self) -> String {
        match self {
            Alternative::NoControl => "no-control".into(),
            Alternative::Slipstream => "slipstream".into(),
            Alternative::SlipstreamPaper => "slipstream-paper".into(),
            Alternative::SlipstreamEbpf => "slipstream-ebpf".into(),
            Alternative::FixedRwnd(None) => "fixed-rwnd".into(),
            Alternative::FixedRwnd(Some(n)) => format!("fixed-rwnd={n}"),
            Alternative::HtbShaping { percent } => format!("htb-{percent}"),
            Alternative::Household(b) => b.label().into(),
        }
    }

    /// Whether `slipstreamd` runs for this alternative.
    pub fn uses_daemon(&self) -> bool {
        matches!(
            self,
            Alternative::Slipstream
                | Alternative::SlipstreamPaper
                | Alternative::SlipstreamEbpf
                | Alternative::FixedRwnd(_)
                | Alternative::Household(_)
        )
    }

    /// The fixed window used by `FixedRwnd` for a path with this BDP.
    pub fn fixed_window_bytes(&self, bdp_bytes: u64) -> Option<u64> {
        match self {
            Alternative::FixedRwnd(n) => Some(n.unwrap_or(bdp_bytes / 2).max(1)),
            _ => None,
        }
    }

    /// The daemon's TOML config for this alternative, or `None` if it runs no daemon.
    pub fn daemon_config(&self, env: &AltEnv, control_socket: &Path) -> Option<String> {
        let controller = match self {
            Alternative::Slipstream | Alternative::SlipstreamEbpf => {
                r#"{ kind = "vulture", variant = "slipstream" }"#.to_string()
            }
            Alternative::SlipstreamPaper => r#"{ kind = "vulture", variant = "paper" }"#.to_string(),
            Alternative::FixedRwnd(_) => format!(
                r#"{{ kind = "fixed_window", window_bytes = {} }}"#,
                self.fixed_window_bytes(env.bdp_bytes)?
            ),
            Alternative::Household(_) => r#""household""#.to_string(),
            _ => return None,
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
        for rule in env.rules() {
            let ports: Vec<String> = rule.ports.iter().map(u16::to_string).collect();
            text.push_str(&format!(
                "\n[[rules]]\nname = \"{}\"\nremote_ports = [{}]\ncontroller = {controller}\n",
                rule.name,
                ports.join(", ")
            ));
            if let Alternative::Household(_) = self {
                for (key, value) in &rule.share {
                    text.push_str(&format!("{key} = {value}\n"));
                }
            }
        }
        if let Alternative::Household(budget) = self {
            text.push_str(budget.config());
        }
        Some(text)
    }

    /// `tc` argument lists (without `-n <ns>`) that install this alternative's HTB tree on `dev`,
    /// or empty if it uses none.
    pub fn htb_commands(&self, env: &AltEnv, dev: &str) -> Vec<Vec<String>> {
        let Alternative::HtbShaping { percent } = self else {
            return Vec::new();
        };
        let shaped = (env.rate_mbit * 1e6 * f64::from(*percent) / 100.0).round() as u64;
        let bg_rate = (shaped / 20).max(8_000);
        let be_rate = shaped.saturating_sub(bg_rate).max(8_000);
        let limit = env.queue_packets.max(2);
        let words = |line: String| line.split_whitespace().map(str::to_string).collect::<Vec<String>>();
        let class = |parent: &str, id: &str, rate: u64, extra: &str| {
            words(format!(
                "class add dev {dev} parent {parent} classid {id} htb rate {rate}bit ceil {shaped}bit {extra}"
            ))
        };
        let mut cmds = vec![
            words(format!("qdisc replace dev {dev} root handle 1: htb default 10")),
            class("1:", "1:1", shaped, ""),
            class("1:1", "1:10", be_rate, "prio 0 quantum 1514"),
            class("1:1", "1:20", bg_rate, "prio 7 quantum 1514"),
            words(format!("qdisc add dev {dev} parent 1:10 handle 10: pfifo limit {limit}")),
            words(format!("qdisc add dev {dev} parent 1:20 handle 20: pfifo limit {limit}")),
        ];
        for p in &env.background_ports {
            for (proto, prio, m) in [("ip", 1, "ip"), ("ipv6", 2, "ip6")] {
                cmds.push(words(format!(
                    "filter add dev {dev} parent 1: protocol {proto} prio {prio} u32 match {m} sport {p} 0xffff flowid 1:20"
                )));
            }
        }
        cmds
    }

    /// Sets the alternative up on the router of `tb`.
    pub fn setup(&self, tb: &Testbed, env: &AltEnv) -> Result<ActiveAlternative> {
        let mut active = ActiveAlternative {
            daemon: None,
            htb_dev: None,
            control_socket: None,
            log_path: None,
            notes: Vec::new(),
        };
        if self.uses_daemon() {
            let n = SOCKET_COUNTER.fetch_add(1, Ordering::Relaxed);
            let sock = std::env::temp_dir().join(format!("slipstream-lab-{}-{n}.sock", std::process::id()));
            let text = self.daemon_config(env, &sock).expect("daemon alternative");
            let stem = self.label().replace('=', "-");
            let config_path = env.work_dir.join(format!("{stem}.toml"));
            std::fs::write(&config_path, &text)
                .with_context(|| format!("writing {}", config_path.display()))?;
            let log = env.work_dir.join(format!("{stem}-slipstreamd.log"));
            let daemon = Daemon::start(tb, &env.daemon_bin, &config_path, METRICS_ADDR, &log)
                .with_context(|| format!("starting slipstreamd for {}", self.label()))?;
            if let Some(w) = self.fixed_window_bytes(env.bdp_bytes) {
                active.notes.push(format!("fixed window {w} bytes"));
            }
            active.daemon = Some(daemon);
            active.control_socket = Some(sock);
            active.log_path = Some(log);
        }
        let htb = self.htb_commands(env, ROUTER_LAN_IF);
        if !htb.is_empty() {
            let ns = tb.ns_name(Ns::Router);
            active.htb_dev = Some(ROUTER_LAN_IF.to_string());
            for args in htb {
                let full: Vec<String> = ["-n".to_string(), ns.clone()].into_iter().chain(args).collect();
                slipstream_testbed::cmd::run("tc", &full).context("installing the HTB tree")?;
            }
        }
        Ok(active)
    }
}

static SOCKET_COUNTER: AtomicU32 = AtomicU32::new(0);

/// Where the daemon's metrics listen inside the router namespace.
pub const METRICS_ADDR: &str = "127.0.0.1:9617";

/// One background rule of the daemon's config: its server ports and its claim on the household
/// budget, as TOML key and value (`("weight", "3")`, `("min_rate", "\"2mbit\"")`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabRule {
    /// Rule name (the daemon's metrics carry it).
    pub name: String,
    /// Server ports of its flows.
    pub ports: Vec<u16>,
    /// `weight`, `min_rate`, `priority`: written for the household alternative only.
    pub share: Vec<(String, String)>,
}

/// What an alternative needs to know about the run.
#[derive(Debug, Clone)]
pub struct AltEnv {
    /// `slipstreamd`.
    pub daemon_bin: PathBuf,
    /// Directory (existing) for the generated config and the daemon's log: the run directory.
    pub work_dir: PathBuf,
    /// Server ports of the background flows (rule `remote_ports`, HTB filters).
    pub background_ports: Vec<u16>,
    /// Rules splitting the background ports; empty = one rule `lab-background` over all of them.
    pub rules: Vec<LabRule>,
    /// Bottleneck rate, Mbit/s.
    pub rate_mbit: f64,
    /// Path BDP, bytes.
    pub bdp_bytes: u64,
    /// Bottleneck queue in packets (HTB leaf pfifo limit).
    pub queue_packets: u64,
}

impl AltEnv {
    /// `daemon_bin` on the path of `opts`, with one rule over `background_ports`.
    pub fn new(
        daemon_bin: PathBuf,
        opts: &ScenarioOptions,
        work_dir: PathBuf,
        background_ports: Vec<u16>,
    ) -> AltEnv {
        let (rate_mbit, bdp_bytes, queue_packets) = (opts.rate_mbit, opts.bdp_bytes(), opts.queue_packets());
        AltEnv {
            daemon_bin,
            work_dir,
            background_ports,
            rules: Vec::new(),
            rate_mbit,
            bdp_bytes,
            queue_packets,
        }
    }

    /// The background rules of the daemon's config: the scenario's, or one rule `lab-background`
    /// over all background ports.
    pub fn rules(&self) -> Vec<LabRule> {
        if !self.rules.is_empty() {
            return self.rules.clone();
        }
        vec![LabRule {
            name: "lab-background".into(),
            ports: self.background_ports.clone(),
            share: Vec::new(),
        }]
    }
}

/// An alternative set up on a testbed. [`teardown`](Self::teardown) removes it; dropping it
/// kills the daemon (the namespace's deletion removes the rest).
pub struct ActiveAlternative {
    /// The daemon, if one runs.
    pub daemon: Option<Daemon>,
    /// The device carrying the HTB tree, if any.
    pub htb_dev: Option<String>,
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
            if !status.success() {
                bail!("slipstreamd exited with {status}:\n{log}");
            }
            let rules = tb.run_in(Ns::Router, &["iptables-legacy-save", "-t", "mangle"]).unwrap_or_default();
            let nft = tb.run_in(Ns::Router, &["nft", "list", "ruleset"]).unwrap_or_default();
            if rules.contains("SLIPSTREAM") || nft.contains("slipstream") {
                bail!("slipstreamd left firewall rules behind");
            }
            let warnings = log.lines().filter(|l| l.contains("WARN")).count();
            if warnings > 0 {
                notes.push(format!("slipstreamd logged {warnings} warnings"));
            }
        }
        if let Some(dev) = self.htb_dev.take() {
            tb.run_in(Ns::Router, &["tc", "qdisc", "del", "dev", &dev, "root"])
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

impl FromStr for Alternative {
    type Err = anyhow::Error;

    /// A label as [`Alternative::label`] prints it: any alternative with its default parameters,
    /// `fixed-rwnd=BYTES` or `htb-PERCENT`.
    fn from_str(s: &str) -> Result<Alternative> {
        let s = s.trim();
        let named = Alternative::ALL.into_iter().chain([Alternative::SlipstreamEbpf]);
        let named = named.chain(HouseholdBudget::ALL.map(Alternative::Household));
        if let Some(a) = named.into_iter().find(|a| a.label() == s) {
            return Ok(a);
        }
        if let Some(n) = s.strip_prefix("fixed-rwnd=") {
            let n: u64 = n.parse().with_context(|| format!("bad window in {s:?}"))?;
            if n == 0 {
                bail!("fixed-rwnd window must be positive");
            }
            return Ok(Alternative::FixedRwnd(Some(n)));
        }
        if let Some(p) = s.strip_prefix("htb-") {
            let percent: u8 = p.parse().with_context(|| format!("bad percent in {s:?}"))?;
            if !(1..=100).contains(&percent) {
                bail!("htb percent must be 1-100, got {percent}");
            }
            return Ok(Alternative::HtbShaping { percent });
        }
        bail!(
            "unknown alternative {s:?} (known: no-control, slipstream, slipstream-paper, slipstream-ebpf, \
             fixed-rwnd[=BYTES], htb-90, htb-95, household, household-ledbat, household-key-bs, household-key-sa)"
        )
    }
}

#[cfg(test)]
mod tests;
