//! [`Firewall`]: the installed rules, their check, in-place replace and removal.

use crate::plan_with_hosts;
use crate::refuse;
use crate::reset::{installed_hooks, reset_backend, reset_iptables_family};
use crate::sets::{self, HostAddrs};
use crate::{
    plan, Backend, CommandRunner, FirewallError, IpFamily, IptablesPlan, PlannedCommand, RulePlan,
    CLASSIFY_CHAIN, MAIN_CHAIN, NFT_TABLE, REFUSE_CHAIN,
};
use slipstream_config::Config;

/// Slipstream's installed rules. Removing is explicit ([`Firewall::remove`]) or on drop.
#[derive(Debug)]
pub struct Firewall {
    pub(crate) backend: Backend,
    pub(crate) runner: CommandRunner,
    pub(crate) plan: RulePlan,
    pub(crate) ipv6: bool,
    pub(crate) removed: bool,
    /// The config the plan is for, and the host set entries (nft re-plans with both).
    pub(crate) config: Config,
    pub(crate) hosts: HostAddrs,
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
            config: config.clone(),
            hosts: HostAddrs::new(),
        };
        let result = fw
            .create_sets(true)
            .and_then(|()| fw.take_over())
            // Host sets an earlier run left hold its addresses: empty until the leases say.
            .and_then(|()| fw.fill_host_sets())
            .and_then(|()| fw.verify());
        if let Err(e) = result {
            for undo in fw.remove_inner() {
                tracing::warn!(error = %undo, "undoing a failed firewall setup");
            }
            return Err(e);
        }
        tracing::info!(backend = %backend, "firewall rules installed");
        Ok(fw)
    }

    /// The backend the rules were installed with.
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
            let mangle = match installed_hooks(&self.runner, p.family) {
                Ok(Some(hooks)) => {
                    tracing::info!(family = ?p.family, jumps = hooks.len(), "taking over the rules of a previous run");
                    Self::hooks_replace_input(&hooks, p)
                }
                Ok(None) => p.mangle_input(),
                Err(e) => {
                    // Cannot list: start from a clean slate as before.
                    tracing::debug!(error = %e, "listing before install failed; resetting the family");
                    for e in reset_iptables_family(&self.runner, p.family) {
                        tracing::debug!(error = %e, "reset before install");
                    }
                    p.mangle_input()
                }
            };
            let filter = refuse::installed_hooks(&self.runner, p.family);
            let input = mangle + &refuse::filter_section(filter.as_deref(), p);
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
            let planned = p.hook_rules_as_listed();
            let chain_of = |l: &String| l.split_whitespace().nth(1).unwrap_or_default().to_owned();
            for chain in planned.iter().map(chain_of) {
                // One jump per protocol (TCP, and UDP when a rule covers it).
                let expected = planned.iter().filter(|l| chain_of(l) == chain).count();
                let n = count(&chain, &|l| l.trim_end().ends_with(&jump));
                if n != expected {
                    return Ok(Err(format!(
                        "{prog}: chain {chain} has {n} jumps to {MAIN_CHAIN}, expected {expected}"
                    )));
                }
            }
            if !p.refuse_rules.is_empty() {
                if let Err(what) = self.refuse_installed(p)? {
                    return Ok(Err(what));
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

    /// [`Firewall::installed`] for table `filter` (a rule refuses QUIC): our chain with the
    /// planned number of rules, and one of each planned jump to it.
    fn refuse_installed(&self, p: &IptablesPlan) -> Result<Result<(), String>, FirewallError> {
        let prog = p.family.program();
        let listing = self
            .runner
            .run(&PlannedCommand::new(prog, &["-w", "-t", "filter", "-S"]))?;
        let lines: Vec<&str> = listing.lines().map(str::trim_end).collect();
        if !lines.contains(&format!("-N {REFUSE_CHAIN}").as_str()) {
            return Ok(Err(format!("{prog}: chain {REFUSE_CHAIN} is missing")));
        }
        let prefix = format!("-A {REFUSE_CHAIN} ");
        let n = lines.iter().filter(|l| l.starts_with(&prefix)).count();
        if n != p.refuse_rules.len() {
            return Ok(Err(format!(
                "{prog}: chain {REFUSE_CHAIN} has {n} rules, expected {}",
                p.refuse_rules.len()
            )));
        }
        let jump = format!("-j {REFUSE_CHAIN}");
        for listed in p.refuse_hooks_as_listed() {
            let chain = listed.split_whitespace().nth(1).unwrap_or_default();
            let prefix = format!("-A {chain} ");
            let n = lines
                .iter()
                .filter(|l| l.starts_with(&prefix) && l.ends_with(&jump))
                .count();
            if n != 1 {
                return Ok(Err(format!(
                    "{prog}: filter chain {chain} has {n} jumps to {REFUSE_CHAIN}, expected 1"
                )));
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
        self.create_sets(false)?;
        self.apply()?;
        self.fill_host_sets()?;
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
        let new_plan = plan_with_hosts(config, self.backend, &self.hosts);
        let new_ipv6 = config.datapath.ipv6;
        // New sets exist before the rules that match them (ipset; nft declares them inline).
        self.create_sets_of(&new_plan.sets)?;
        match self.backend {
            Backend::Nftables => {
                // The table is replaced whole: carry the resolved addresses over, each with the
                // time it had left. The plan kept afterwards (for a watchdog re-install) has none.
                let kept = sets::nft_kept_entries(&self.runner, &self.plan.sets);
                let with_kept = plan::plan_keeping(config, self.backend, &self.hosts, &kept);
                for cmd in with_kept.apply_commands() {
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
        self.config = config.clone();
        self.after_replace();
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
        let old_refuse = (!old.refuse_rules.is_empty()).then(|| old.refuse_hooks_as_listed());
        Self::hooks_replace_input(&old.hook_rules_as_listed(), new)
            + &refuse::filter_section(old_refuse.as_deref(), new)
    }

    /// The `*mangle` part of [`Firewall::replace_input`] from the hook jumps installed now, as
    /// `iptables -S` lists them (`-A FORWARD -p tcp -j SLIPSTREAM`); a jump listed twice is
    /// deleted once more.
    fn hooks_replace_input(old_hooks: &[String], new: &IptablesPlan) -> String {
        let new_hooks = new.hook_rules_as_listed();
        let mut s = String::from("*mangle\n");
        s += &format!(":{MAIN_CHAIN} - [0:0]\n:{CLASSIFY_CHAIN} - [0:0]\n");
        for line in new.main_rules.iter().chain(&new.classify_rules) {
            s += line;
            s.push('\n');
        }
        s += &hook_changes(old_hooks, &new_hooks, &new.hook_rules);
        s += "COMMIT\n";
        s
    }

    /// Whether IPv6 rules are installed too.
    pub fn ipv6(&self) -> bool {
        self.ipv6
    }

    fn remove_inner(&mut self) -> Vec<FirewallError> {
        self.removed = true;
        let mut errors = reset_backend(&self.runner, self.backend, self.ipv6);
        errors.extend(self.destroy_sets());
        errors
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

/// The restore lines that turn the jumps `old` (as `-S` lists them) into `new_listed` (the same
/// jumps listed, `new_inserts` as restore inserts them): a jump that stays is kept (its counters,
/// and no moment without it), the others are deleted, the new ones inserted. A jump listed twice
/// (a crashed run's leftover) is deleted once.
pub(crate) fn hook_changes(old: &[String], new_listed: &[String], new_inserts: &[String]) -> String {
    let mut s = String::new();
    let mut kept: Vec<&String> = Vec::new();
    for listed in old {
        if new_listed.contains(listed) && !kept.contains(&listed) {
            kept.push(listed);
            continue;
        }
        // "-A FORWARD -p tcp -j SLIPSTREAM" -> "-D FORWARD -p tcp -j SLIPSTREAM"
        s += &format!("-D {}\n", listed.strip_prefix("-A ").unwrap_or(listed));
    }
    for (insert, listed) in new_inserts.iter().zip(new_listed) {
        if !old.contains(listed) {
            s += insert;
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taking_over_keeps_planned_jumps_and_deletes_the_rest() {
        let plan = IptablesPlan {
            family: IpFamily::V4,
            hook_rules: vec!["-I FORWARD 1 -p tcp -j SLIPSTREAM".into()],
            main_rules: vec!["-A SLIPSTREAM -j RETURN".into()],
            classify_rules: vec![],
            refuse_hooks: vec![],
            refuse_rules: vec![],
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
}
