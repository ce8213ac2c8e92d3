//! Slipstream's own firewall rules: pure generation plus one layer that applies and removes them.
//!
//! # Why the rules look the way they do
//!
//! The daemon only sees packets the kernel queues to it, so the firewall decides *which* packets
//! (background flows only) and *where* (two NFQUEUE queues):
//!
//! * **Classification in the kernel, once per flow, on its opening packets.** Only packets with
//!   SYN set (the SYN and the SYN-ACK) of unclassed flows walk `SLIPSTREAM_CLASSIFY`, which holds
//!   one block per config rule; the first block that matches stores the rule number (1-based,
//!   shifted into `datapath.mark_mask`) in the connection mark, where it stays for the whole flow.
//!   Every block ends with "return if classed", so a later rule never overwrites an earlier one
//!   (first match wins, as in the config). Flows that match nothing stay at 0 and never leave the
//!   kernel; their other packets skip the classify chain (the docs of `plan.rs` explain MAC
//!   criteria, and why classing on SYNs only loses nothing).
//! * **Flow offloading** (OpenWrt's fw4/fw3 flowtables) hides established flows from all of this;
//!   [`detect_flow_offload`] finds it and says how to turn it off.
//! * **The rule number travels with each packet.** `CONNMARK --restore-mark` copies the connmark
//!   bits into the packet mark, which NFQUEUE hands to the daemon (see [`rule_number_from_mark`]),
//!   so the daemon needs no conntrack lookups.
//! * **Two queues.** Handshakes and ACKs (short packets) go to `ack_queue` with a full copy, since
//!   the daemon rewrites their window; longer data packets go to `data_queue`, where the daemon
//!   copies only headers. `--queue-bypass` lets traffic flow if the daemon is not running.
//! * **The daemon owns its chains** (netavark / mullvad style): `SLIPSTREAM` and
//!   `SLIPSTREAM_CLASSIFY` in table `mangle` (or `table inet slipstream` for nftables), plus one
//!   jump from each hooked built-in chain. Nothing else is touched, so [`reset`] can delete
//!   everything by name.
//!
//! # Lifecycle
//!
//! [`Firewall::install`] takes over what a previous run left (a crash, `kill -9`, a restart)
//! without a moment without rules: per IP family one `iptables-legacy-restore --noflush` empties
//! and refills our chains and adds or deletes only the hook jumps that differ (the ones both have
//! stay, counters and all), or one `nft -f -` transaction replaces the table; the other
//! backend's leftovers are [`reset`]. Then it verifies the chains are in place; if any step
//! fails it undoes what it did. Installing twice is idempotent. While no daemon listens, the
//! rules pass packets on (`--queue-bypass`), so a killed daemon breaks no connection, and the
//! next one picks the rules up as they are: a SYN that arrives while it starts is still classed. [`Firewall::remove`] (and `Drop`, best-effort) lists the table
//! and deletes what is there, collecting every error instead of stopping at the first, and is fine
//! with chains that are already gone.
//!
//! Commands run through a [`CommandRunner`], which may carry a prefix like
//! `ip netns exec <ns>` so tests work in a throwaway network namespace.

mod nft;
mod offload;
mod plan;
mod runner;

pub use nft::{delete_transaction as nft_delete_transaction, QUEUE_PROBE as NFT_QUEUE_PROBE};
pub use offload::{
    blocking_findings, detect_flow_offload, detect_flow_offload_at, offload_findings, OffloadFinding,
    OffloadSource, FIREWALL_UCI_PATH, OFFLOAD_FIX,
};
pub use plan::{
    multiport_chunks, plan, IpFamily, IptablesPlan, PlannedCommand, RulePlan, CLASSIFY_CHAIN, HOOK_CHAINS,
    MAIN_CHAIN, MULTIPORT_MAX_SLOTS, NFT_TABLE,
};
pub use runner::CommandRunner;

use slipstream_config::{Config, FirewallBackend};
use std::fmt;

/// The tool the rules are installed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `iptables-legacy` and `ip6tables-legacy`, table `mangle`.
    IptablesLegacy,
    /// `nft`, `table inet slipstream`; needs the kernel's nft `queue` expression.
    Nftables,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::IptablesLegacy => "iptables-legacy",
            Backend::Nftables => "nftables",
        })
    }
}

/// A firewall command failed, or the result is not what was planned. The message says which
/// command, its stderr, and what to check.
#[derive(Debug, thiserror::Error)]
pub enum FirewallError {
    /// A program is missing.
    #[error("{program} not found: {hint}")]
    NotFound { program: String, hint: String },
    /// A command exited with an error.
    #[error("`{command}` failed ({status}): {stderr}; check: {hint}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
        hint: String,
    },
    /// A command could not be run at all.
    #[error("could not run `{command}`: {source}")]
    Io {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The commands succeeded but the rules are not what was planned.
    #[error("{backend} rules not in place after install: {what}; check whether another program rewrote the mangle table meanwhile")]
    Verify { backend: Backend, what: String },
    /// `firewall = "nftables"` was requested but nft cannot queue packets here.
    #[error(
        "nftables cannot queue packets on this system (`nft -c` rejected `queue num 0 bypass`: {stderr}); \
         check: modprobe nft_queue (OpenWrt: kmod-nft-queue), or set datapath.firewall = \"iptables\""
    )]
    NftQueueUnsupported { stderr: String },
    /// Several errors (teardown collects them all).
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Several(Vec<FirewallError>),
}

impl FirewallError {
    pub(crate) fn not_found(program: &str) -> Self {
        let hint = if program.contains("iptables") {
            "install iptables with the legacy tools (Debian/Ubuntu: iptables, which ships iptables-legacy; \
             OpenWrt 22.03+: iptables-zz-legacy and ip6tables-zz-legacy; OpenWrt 21.02: iptables, \
             ip6tables)"
        } else if program == "nft" {
            "install nftables, or set datapath.firewall = \"iptables\""
        } else if program == "ip" {
            "install iproute2 (ip)"
        } else {
            "install it or check PATH"
        };
        FirewallError::NotFound {
            program: program.to_owned(),
            hint: hint.to_owned(),
        }
    }

    pub(crate) fn failed(command: &str, status: String, stderr: String) -> Self {
        let hint = hint_for(&stderr);
        FirewallError::Failed {
            command: command.to_owned(),
            status,
            stderr,
            hint,
        }
    }

    /// Adds the offending input line to an `iptables-restore` / `nft -f` error ("line N").
    fn with_input_line(self, input: &str) -> Self {
        match self {
            FirewallError::Failed {
                command,
                status,
                mut stderr,
                hint: _,
            } => {
                if let Some(n) = failing_line(&stderr) {
                    if let Some(line) = input.lines().nth(n.saturating_sub(1)) {
                        stderr = format!("{stderr} [input line {n}: {line}]");
                    }
                }
                let hint = hint_for(&stderr);
                FirewallError::Failed {
                    command,
                    status,
                    stderr,
                    hint,
                }
            }
            other => other,
        }
    }

    fn combine(mut errors: Vec<FirewallError>) -> Option<FirewallError> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(FirewallError::Several(errors)),
        }
    }
}

/// "Error occurred at line: 3" / "line 3 failed" / nft's "/dev/stdin:3:..." -> 3.
fn failing_line(stderr: &str) -> Option<usize> {
    let number_after = |marker: &str| {
        stderr.find(marker).and_then(|i| {
            let digits: String = stderr[i + marker.len()..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
    };
    number_after("Error occurred at line:")
        .or_else(|| number_after("line "))
        .or_else(|| number_after("stdin:"))
}

/// What to check, from a command's stderr.
fn hint_for(stderr: &str) -> String {
    let s = stderr.to_ascii_lowercase();
    if s.contains("permission denied") || s.contains("operation not permitted") || s.contains("must be root")
    {
        return "run as root (or with CAP_NET_ADMIN)".to_owned();
    }
    if s.contains("xtables lock") {
        return "another program holds the xtables lock; retry".to_owned();
    }
    if s.contains("table does not exist") || s.contains("can't initialize") {
        return "the mangle table is missing: modprobe iptable_mangle / ip6table_mangle \
                (OpenWrt: kmod-ipt-core, kmod-ip6tables), or set datapath.ipv6 = false if IPv6 is the problem"
            .to_owned();
    }
    let mut modules = Vec::new();
    for (word, module) in [
        (
            "nfqueue",
            "NFQUEUE target missing: modprobe xt_NFQUEUE (OpenWrt: kmod-ipt-nfqueue)",
        ),
        (
            "connmark",
            "connmark missing: modprobe xt_connmark (OpenWrt: kmod-ipt-conntrack-extra)",
        ),
        ("multiport", "multiport missing: modprobe xt_multiport"),
        (
            "dscp",
            "dscp match missing: modprobe xt_dscp (OpenWrt: kmod-ipt-ipopt)",
        ),
        (
            "length",
            "length match missing: modprobe xt_length (OpenWrt: kmod-ipt-ipopt)",
        ),
        ("addrtype", "addrtype match missing: modprobe xt_addrtype"),
        (
            "queue",
            "nft queue missing: modprobe nft_queue (OpenWrt: kmod-nft-queue)",
        ),
    ] {
        if s.contains(word) {
            modules.push(module);
        }
    }
    if !modules.is_empty() {
        return modules.join("; ");
    }
    "that the kernel has the modules Slipstream uses: xt_NFQUEUE, xt_connmark, xt_length, xt_multiport, \
     xt_dscp, xt_addrtype (OpenWrt: kmod-ipt-nfqueue, kmod-ipt-conntrack-extra, kmod-ipt-ipopt)"
        .to_owned()
}

/// The rule number stored in a packet or connection mark: 1-based, `None` if the field is 0.
pub fn rule_number_from_mark(mark: u32, mask: u32) -> Option<u16> {
    if mask == 0 {
        return None;
    }
    let n = (mark & mask) >> mask.trailing_zeros();
    u16::try_from(n).ok().filter(|&n| n != 0)
}

/// Picks the backend: `Iptables` / `Nftables` as requested (checking they are usable), `Auto`:
/// nftables if `nft -c` accepts a `queue num 0 bypass` statement, else iptables-legacy.
pub fn detect_backend(requested: FirewallBackend) -> Result<Backend, FirewallError> {
    detect_backend_with(&CommandRunner::host(), requested)
}

/// [`detect_backend`] with an explicit runner.
pub fn detect_backend_with(
    runner: &CommandRunner,
    requested: FirewallBackend,
) -> Result<Backend, FirewallError> {
    let nft_probe = || {
        runner
            .run(&PlannedCommand::new("nft", &["-c", "-f", "-"]).with_stdin(nft::QUEUE_PROBE.to_owned()))
            .map(|_| Backend::Nftables)
    };
    let iptables_probe = || {
        runner
            .run(&PlannedCommand::new("iptables-legacy", &["-V"]))
            .map(|_| Backend::IptablesLegacy)
    };
    match requested {
        FirewallBackend::Iptables => iptables_probe(),
        FirewallBackend::Nftables => nft_probe().map_err(|e| match e {
            FirewallError::Failed { stderr, .. } => FirewallError::NftQueueUnsupported { stderr },
            other => other,
        }),
        FirewallBackend::Auto => nft_probe().or_else(|nft_err| {
            tracing::info!(reason = %nft_err, "nftables cannot queue packets here; using iptables-legacy");
            iptables_probe()
        }),
    }
}

/// Removes everything Slipstream could have installed with `backend` (any hook, any earlier
/// config), and best-effort the other backend's leftovers too. Absent chains are fine. Returns every
/// error met; IPv6 errors are ignored if `config.datapath.ipv6` is false.
pub fn reset(backend: Backend, config: &Config) -> Vec<FirewallError> {
    reset_with(&CommandRunner::host(), backend, config)
}

/// [`reset`] with an explicit runner.
pub fn reset_with(runner: &CommandRunner, backend: Backend, config: &Config) -> Vec<FirewallError> {
    let errors = reset_backend(runner, backend, config.datapath.ipv6);
    let other = match backend {
        Backend::IptablesLegacy => Backend::Nftables,
        Backend::Nftables => Backend::IptablesLegacy,
    };
    for e in reset_backend(runner, other, config.datapath.ipv6) {
        tracing::debug!(error = %e, "clearing leftovers of the other firewall backend (ignored)");
    }
    errors
}

fn reset_backend(runner: &CommandRunner, backend: Backend, ipv6: bool) -> Vec<FirewallError> {
    match backend {
        Backend::IptablesLegacy => {
            let mut errors = reset_iptables_family(runner, IpFamily::V4);
            let v6 = reset_iptables_family(runner, IpFamily::V6);
            if ipv6 {
                errors.extend(v6);
            } else {
                for e in v6 {
                    tracing::debug!(error = %e, "IPv6 cleanup (ignored: ipv6 = false)");
                }
            }
            errors
        }
        Backend::Nftables => {
            let cmd = PlannedCommand::new("nft", &["-f", "-"]).with_stdin(nft::delete_transaction());
            runner.run(&cmd).err().into_iter().collect()
        }
    }
}

fn is_our_chain(name: &str) -> bool {
    name == MAIN_CHAIN || name == CLASSIFY_CHAIN
}

/// The jumps from other chains to ours as `iptables -S` lists them (`-A FORWARD ... -j
/// SLIPSTREAM`), or `None` if our chains are not installed in this family.
fn installed_hooks(runner: &CommandRunner, family: IpFamily) -> Result<Option<Vec<String>>, FirewallError> {
    let listing = runner.run(&PlannedCommand::new(
        family.program(),
        &["-w", "-t", "mangle", "-S"],
    ))?;
    let mut ours = false;
    let mut hooks = Vec::new();
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["-N", chain] if is_our_chain(chain) => ours = true,
            ["-A", chain, rest @ ..]
                if !is_our_chain(chain)
                    && rest
                        .windows(2)
                        .any(|w| (w[0] == "-j" || w[0] == "-g") && is_our_chain(w[1])) =>
            {
                hooks.push(words.join(" "));
            }
            _ => {}
        }
    }
    Ok(ours.then_some(hooks))
}

/// Lists table `mangle` and deletes every jump to our chains, then flushes and deletes the chains.
fn reset_iptables_family(runner: &CommandRunner, family: IpFamily) -> Vec<FirewallError> {
    let p = family.program();
    let listing = match runner.run(&PlannedCommand::new(p, &["-w", "-t", "mangle", "-S"])) {
        Ok(l) => l,
        Err(e) => return vec![e],
    };
    let mut errors = Vec::new();
    let mut chains = Vec::new();
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["-N", chain] if is_our_chain(chain) => chains.push(chain.to_string()),
            ["-A", chain, rest @ ..] if !is_our_chain(chain) => {
                let jumps_to_us = rest
                    .windows(2)
                    .any(|w| (w[0] == "-j" || w[0] == "-g") && is_our_chain(w[1]));
                if jumps_to_us {
                    let mut args = vec!["-w", "-t", "mangle", "-D", chain];
                    args.extend(rest);
                    if let Err(e) = runner.run(&PlannedCommand::new(p, &args)) {
                        errors.push(e);
                    }
                }
            }
            _ => {}
        }
    }
    // Flush both before deleting either: SLIPSTREAM references SLIPSTREAM_CLASSIFY.
    for op in ["-F", "-X"] {
        for chain in &chains {
            if let Err(e) = runner.run(&PlannedCommand::new(p, &["-w", "-t", "mangle", op, chain])) {
                errors.push(e);
            }
        }
    }
    errors
}

/// Slipstream's installed rules. Removing is explicit ([`Firewall::remove`]) or on drop.
#[derive(Debug)]
pub struct Firewall {
    backend: Backend,
    runner: CommandRunner,
    plan: RulePlan,
    ipv6: bool,
    removed: bool,
}

impl Firewall {
    /// Resets stale state, applies the rules for `config` on the host, verifies them. On failure
    /// nothing of Slipstream's is left installed.
    pub fn install(config: &Config, backend: Backend) -> Result<Firewall, FirewallError> {
        Self::install_with(config, backend, CommandRunner::host())
    }

    /// [`Firewall::install`] with an explicit runner (e.g. [`CommandRunner::in_netns`]).
    pub fn install_with(
        config: &Config,
        backend: Backend,
        runner: CommandRunner,
    ) -> Result<Firewall, FirewallError> {
        let other = match backend {
            Backend::IptablesLegacy => Backend::Nftables,
            Backend::Nftables => Backend::IptablesLegacy,
        };
        for e in reset_backend(&runner, other, config.datapath.ipv6) {
            tracing::debug!(error = %e, "clearing leftovers of the other firewall backend (ignored)");
        }
        let mut fw = Firewall {
            backend,
            runner,
            plan: plan(config, backend),
            ipv6: config.datapath.ipv6,
            removed: false,
        };
        let result = fw.take_over().and_then(|()| fw.verify());
        if let Err(e) = result {
            for undo in fw.remove_inner() {
                tracing::warn!(error = %undo, "undoing a failed firewall setup");
            }
            return Err(e);
        }
        tracing::info!(backend = %backend, "firewall rules installed");
        Ok(fw)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// What was installed.
    pub fn plan(&self) -> &RulePlan {
        &self.plan
    }

    /// Installs the plan over whatever a previous run left of this backend's rules, in one
    /// transaction per IP family (nftables: the table replaced; iptables: see
    /// [`Firewall::replace_input`], with the hook jumps found installed as the old ones). A
    /// family no longer planned (IPv6 turned off) is reset.
    fn take_over(&self) -> Result<(), FirewallError> {
        if self.backend == Backend::Nftables {
            return self.apply();
        }
        for p in &self.plan.iptables {
            let input = match installed_hooks(&self.runner, p.family) {
                Ok(Some(hooks)) => {
                    tracing::info!(family = ?p.family, jumps = hooks.len(), "taking over the rules of a previous run");
                    Self::hooks_replace_input(&hooks, p)
                }
                Ok(None) => p.restore_input(),
                Err(e) => {
                    // Cannot list: start from a clean slate as before.
                    tracing::debug!(error = %e, "listing before install failed; resetting the family");
                    for e in reset_iptables_family(&self.runner, p.family) {
                        tracing::debug!(error = %e, "reset before install");
                    }
                    p.restore_input()
                }
            };
            let cmd = PlannedCommand::new(p.family.restore_program(), &["-w", "--noflush"])
                .with_stdin(input.clone());
            self.runner.run(&cmd).map_err(|e| e.with_input_line(&input))?;
        }
        for family in [IpFamily::V4, IpFamily::V6] {
            if !self.plan.iptables.iter().any(|p| p.family == family) {
                for e in reset_iptables_family(&self.runner, family) {
                    tracing::debug!(error = %e, "clearing a family not planned (ignored)");
                }
            }
        }
        Ok(())
    }

    fn apply(&self) -> Result<(), FirewallError> {
        for cmd in self.plan.apply_commands() {
            let input = cmd.stdin.clone().unwrap_or_default();
            self.runner.run(&cmd).map_err(|e| e.with_input_line(&input))?;
        }
        Ok(())
    }

    fn verify(&self) -> Result<(), FirewallError> {
        self.installed()?.map_err(|what| FirewallError::Verify {
            backend: self.backend,
            what,
        })
    }

    /// Lists what is installed (one listing per IP family, or one `nft list tables`): `Ok(Ok(()))`
    /// if the planned chains hold the planned number of rules and every hooked chain has exactly
    /// one jump to ours, `Ok(Err(what is missing))` if not, `Err` if the listing itself failed.
    /// Counts, not text, are compared, so a firewall tool that prints rules slightly differently
    /// cannot make the watchdog re-apply forever.
    fn installed(&self) -> Result<Result<(), String>, FirewallError> {
        for p in &self.plan.iptables {
            let prog = p.family.program();
            let listing = self
                .runner
                .run(&PlannedCommand::new(prog, &["-w", "-t", "mangle", "-S"]))?;
            let count = |chain: &str, pred: &dyn Fn(&str) -> bool| {
                let prefix = format!("-A {chain} ");
                listing
                    .lines()
                    .filter(|l| l.starts_with(&prefix) && pred(l))
                    .count()
            };
            for chain in [MAIN_CHAIN, CLASSIFY_CHAIN] {
                if !listing.lines().any(|l| l.trim_end() == format!("-N {chain}")) {
                    return Ok(Err(format!("{prog}: chain {chain} is missing")));
                }
            }
            for (chain, expected) in [
                (MAIN_CHAIN, p.main_rules.len()),
                (CLASSIFY_CHAIN, p.classify_rules.len()),
            ] {
                let n = count(chain, &|_| true);
                if n != expected {
                    return Ok(Err(format!(
                        "{prog}: chain {chain} has {n} rules, expected {expected}"
                    )));
                }
            }
            let jump = format!("-j {MAIN_CHAIN}");
            for listed in p.hook_rules_as_listed() {
                let chain = listed.split_whitespace().nth(1).unwrap_or_default();
                let n = count(chain, &|l| l.trim_end().ends_with(&jump));
                if n != 1 {
                    return Ok(Err(format!(
                        "{prog}: chain {chain} has {n} jumps to {MAIN_CHAIN}, expected 1"
                    )));
                }
            }
        }
        if self.plan.nft_ruleset.is_some() {
            let tables = self
                .runner
                .run(&PlannedCommand::new("nft", &["list", "tables"]))?;
            if !tables
                .lines()
                .any(|l| l.trim() == format!("table inet {NFT_TABLE}"))
            {
                return Ok(Err(format!("table inet {NFT_TABLE} is missing")));
            }
            let out = self
                .runner
                .run(&PlannedCommand::new("nft", &["list", "table", "inet", NFT_TABLE]))?;
            if !out.contains("chain enqueue") {
                return Ok(Err(format!("table inet {NFT_TABLE} has no chain enqueue")));
            }
        }
        Ok(Ok(()))
    }

    /// Whether the rules are still installed as planned (a firewall reload on OpenWrt, or an
    /// admin's `iptables -t mangle -F`, may have removed them). `Err` only if listing failed.
    pub fn check(&self) -> Result<bool, FirewallError> {
        Ok(self.installed()?.is_ok())
    }

    /// The watchdog's step: if the rules are not all in place, removes what is left of them and
    /// installs them again (then verifies). Returns whether it re-applied. While rules are
    /// missing, traffic simply flows unclassified; re-applying cannot make that worse.
    pub fn ensure_installed(&mut self) -> Result<bool, FirewallError> {
        match self.installed()? {
            Ok(()) => Ok(false),
            Err(what) => {
                tracing::warn!(backend = %self.backend, missing = %what, "firewall rules missing; re-applying");
                self.reinstall()?;
                Ok(true)
            }
        }
    }

    /// Reset, apply the current plan, verify.
    fn reinstall(&mut self) -> Result<(), FirewallError> {
        for e in reset_backend(&self.runner, self.backend, self.ipv6) {
            tracing::debug!(error = %e, "clearing what was left of the rules before re-applying");
        }
        self.removed = false;
        self.apply()?;
        self.verify()
    }

    /// Replaces the installed rules with those for `config` (a config reload) without a moment
    /// without rules: nftables swaps the whole table in one transaction; iptables-legacy replaces
    /// each family's chains, and adds or deletes hook jumps, in one `iptables-legacy-restore
    /// --noflush` (a table replacement in the kernel). The backend stays the one chosen at start.
    ///
    /// If the replacement fails the old rules stay in force (the transaction is all or nothing;
    /// with IPv6 a family already replaced is put back) and the error is returned. If the old
    /// rules were not in place to begin with (removed behind the daemon's back), the new ones are
    /// installed from scratch.
    pub fn replace(&mut self, config: &Config) -> Result<(), FirewallError> {
        let new_plan = plan(config, self.backend);
        let new_ipv6 = config.datapath.ipv6;
        match self.backend {
            Backend::Nftables => {
                for cmd in new_plan.apply_commands() {
                    let input = cmd.stdin.clone().unwrap_or_default();
                    if let Err(e) = self.runner.run(&cmd).map_err(|e| e.with_input_line(&input)) {
                        return self.replace_failed(e, new_plan, new_ipv6);
                    }
                }
            }
            Backend::IptablesLegacy => {
                let mut done: Vec<(&IptablesPlan, Option<&IptablesPlan>)> = Vec::new();
                for new in &new_plan.iptables {
                    let old = self.plan.iptables.iter().find(|p| p.family == new.family);
                    if old.is_none() {
                        // A family newly enabled: clear leftovers so the jumps are not doubled.
                        for e in reset_iptables_family(&self.runner, new.family) {
                            tracing::debug!(error = %e, "clearing leftovers before adding a family");
                        }
                    }
                    let cmd = PlannedCommand::new(new.family.restore_program(), &["-w", "--noflush"])
                        .with_stdin(Self::replace_input(old, new));
                    let input = cmd.stdin.clone().unwrap_or_default();
                    if let Err(e) = self.runner.run(&cmd).map_err(|e| e.with_input_line(&input)) {
                        for (new, old) in done {
                            let back = match old {
                                Some(old) => {
                                    PlannedCommand::new(new.family.restore_program(), &["-w", "--noflush"])
                                        .with_stdin(Self::replace_input(Some(new), old))
                                }
                                None => continue,
                            };
                            if let Err(undo) = self.runner.run(&back) {
                                tracing::warn!(error = %undo, "putting back the old rules of a family");
                            }
                        }
                        return self.replace_failed(e, new_plan, new_ipv6);
                    }
                    done.push((new, old));
                }
                for old in &self.plan.iptables {
                    if !new_plan.iptables.iter().any(|p| p.family == old.family) {
                        for e in reset_iptables_family(&self.runner, old.family) {
                            tracing::warn!(error = %e, "removing the rules of a family no longer enabled");
                        }
                    }
                }
            }
        }
        self.plan = new_plan;
        self.ipv6 = new_ipv6;
        self.removed = false;
        if let Err(e) = self.verify() {
            // Something (not the transaction) was missing already, e.g. a hook jump flushed
            // behind the daemon's back: install the new rules from scratch.
            tracing::warn!(error = %e, "rules incomplete after the replacement; re-applying them");
            self.reinstall()?;
        }
        tracing::info!(backend = %self.backend, "firewall rules replaced");
        Ok(())
    }

    /// A failed replacement: keep the old rules if they are in place; if they were not, install
    /// the new plan from scratch (nothing to preserve).
    fn replace_failed(
        &mut self,
        error: FirewallError,
        new_plan: RulePlan,
        new_ipv6: bool,
    ) -> Result<(), FirewallError> {
        if self.check().unwrap_or(true) {
            return Err(error);
        }
        tracing::warn!(error = %error, "old rules were not in place; installing the new ones afresh");
        let old = std::mem::replace(&mut self.plan, new_plan);
        let old_ipv6 = std::mem::replace(&mut self.ipv6, new_ipv6);
        if let Err(e) = self.reinstall() {
            self.plan = old;
            self.ipv6 = old_ipv6;
            let _ = self.reinstall();
            return Err(e);
        }
        Ok(())
    }

    /// `iptables-legacy-restore --noflush` input turning `old`'s rules into `new`'s in one step:
    /// declaring our chains empties them, they are refilled, and hook jumps that differ are deleted or
    /// inserted (the ones both have stay untouched, so no packet misses the jump).
    fn replace_input(old: Option<&IptablesPlan>, new: &IptablesPlan) -> String {
        let Some(old) = old else {
            return new.restore_input();
        };
        Self::hooks_replace_input(&old.hook_rules_as_listed(), new)
    }

    /// [`Firewall::replace_input`] from the hook jumps installed now, as `iptables -S` lists
    /// them (`-A FORWARD -p tcp -j SLIPSTREAM`); a jump listed twice is deleted once more.
    fn hooks_replace_input(old_hooks: &[String], new: &IptablesPlan) -> String {
        let new_hooks = new.hook_rules_as_listed();
        let mut s = String::from("*mangle\n");
        s += &format!(":{MAIN_CHAIN} - [0:0]\n:{CLASSIFY_CHAIN} - [0:0]\n");
        for line in new.main_rules.iter().chain(&new.classify_rules) {
            s += line;
            s.push('\n');
        }
        let mut kept: Vec<&String> = Vec::new();
        for listed in old_hooks {
            if new_hooks.contains(listed) && !kept.contains(&listed) {
                kept.push(listed);
                continue;
            }
            // "-A FORWARD -p tcp -j SLIPSTREAM" -> "-D FORWARD -p tcp -j SLIPSTREAM"
            s += &format!("-D {}\n", listed.strip_prefix("-A ").unwrap_or(listed));
        }
        for (insert, listed) in new.hook_rules.iter().zip(&new_hooks) {
            if !old_hooks.contains(listed) {
                s += insert;
                s.push('\n');
            }
        }
        s += "COMMIT\n";
        s
    }

    /// Whether IPv6 rules are installed too.
    pub fn ipv6(&self) -> bool {
        self.ipv6
    }

    fn remove_inner(&mut self) -> Vec<FirewallError> {
        self.removed = true;
        reset_backend(&self.runner, self.backend, self.ipv6)
    }

    /// Removes the rules; tries everything and reports every error.
    pub fn remove(mut self) -> Result<(), FirewallError> {
        let errors = self.remove_inner();
        match FirewallError::combine(errors) {
            None => {
                tracing::info!(backend = %self.backend, "firewall rules removed");
                Ok(())
            }
            Some(e) => Err(e),
        }
    }
}

impl Drop for Firewall {
    fn drop(&mut self) {
        if !self.removed {
            for e in self.remove_inner() {
                tracing::warn!(error = %e, "removing firewall rules on drop");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mark_to_rule_number() {
        assert_eq!(rule_number_from_mark(0, 0x00ff_0000), None);
        assert_eq!(rule_number_from_mark(0x0001_0000, 0x00ff_0000), Some(1));
        assert_eq!(rule_number_from_mark(0xab03_1234, 0x00ff_0000), Some(3));
        assert_eq!(rule_number_from_mark(0x00fa_0000, 0x00ff_0000), Some(250));
        assert_eq!(rule_number_from_mark(0x0000_0002, 0x0000_00ff), Some(2));
        assert_eq!(
            rule_number_from_mark(0xffff_0000, 0xffff_ffff),
            None,
            "does not fit u16"
        );
        assert_eq!(rule_number_from_mark(5, 0), None);
    }

    #[test]
    fn taking_over_keeps_planned_jumps_and_deletes_the_rest() {
        let plan = IptablesPlan {
            family: IpFamily::V4,
            hook_rules: vec!["-I FORWARD 1 -p tcp -j SLIPSTREAM".into()],
            main_rules: vec!["-A SLIPSTREAM -j RETURN".into()],
            classify_rules: vec![],
        };
        let forward = "-A FORWARD -p tcp -j SLIPSTREAM".to_string();
        let output = "-A OUTPUT ! -o lo -p tcp -j SLIPSTREAM".to_string();
        let input = Firewall::hooks_replace_input(&[forward.clone(), forward.clone(), output], &plan);
        assert_eq!(
            input,
            "*mangle\n:SLIPSTREAM - [0:0]\n:SLIPSTREAM_CLASSIFY - [0:0]\n-A SLIPSTREAM -j RETURN\n\
             -D FORWARD -p tcp -j SLIPSTREAM\n-D OUTPUT ! -o lo -p tcp -j SLIPSTREAM\nCOMMIT\n",
            "the FORWARD jump stays (once), the duplicate and OUTPUT go, nothing is inserted"
        );
        let fresh = Firewall::hooks_replace_input(&[], &plan);
        assert!(fresh.contains("-I FORWARD 1 -p tcp -j SLIPSTREAM\n"), "{fresh}");
    }

    #[test]
    fn failing_line_parsing() {
        assert_eq!(
            failing_line("iptables-restore v1.8.9 (legacy): x\nError occurred at line: 3\nTry"),
            Some(3)
        );
        assert_eq!(failing_line("iptables-restore: line 12 failed"), Some(12));
        assert_eq!(
            failing_line("/dev/stdin:7:2-6: Error: Could not process rule"),
            Some(7)
        );
        assert_eq!(failing_line("nothing"), None);
    }

    #[test]
    fn hints() {
        assert!(hint_for("Couldn't load target `NFQUEUE'").contains("xt_NFQUEUE"));
        assert!(hint_for("Permission denied (you must be root)").contains("root"));
        assert!(
            hint_for("can't initialize ip6tables table `mangle': Table does not exist")
                .contains("ip6table_mangle")
        );
        let e = FirewallError::not_found("iptables-legacy");
        assert!(
            e.to_string()
                .starts_with("iptables-legacy not found: install iptables"),
            "{e}"
        );
        let e = FirewallError::failed(
            "iptables-legacy-restore -w --noflush",
            "exit status: 2".into(),
            "x".into(),
        )
        .with_input_line("a\nb\nc\n");
        assert!(
            e.to_string()
                .contains("`iptables-legacy-restore -w --noflush` failed (exit status: 2)"),
            "{e}"
        );
    }
}
