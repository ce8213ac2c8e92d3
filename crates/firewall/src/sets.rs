//! The kernel address sets of rules by name (see `slipstream_names::sets`): which exist for a
//! config, and the commands that create, fill and destroy them.
//!
//! * iptables-legacy backend: ipsets (`hash:ip`), created before the rules that match them
//!   (`-m set --match-set <set> src|dst`) and destroyed after the rules are gone; the remote
//!   address sets carry a default timeout, so dnsmasq's entries expire unless answered again.
//! * nftables backend: named sets inside `table inet slipstream` (with `flags timeout` for the
//!   remote sets), declared in the ruleset itself, so they come and go with the table.
//!
//! Host sets (`lan_hostnames`) are filled by the daemon from the lease files, replaced in one
//! step: ipset `swap` with a filled temporary set, or one nft transaction that flushes and adds.

use crate::plan::{IpFamily, NFT_TABLE};
use crate::{CommandRunner, FirewallError, PlannedCommand};
use slipstream_config::{Config, Rule};
use slipstream_names::sets::{set_name, Family, SetKind, SET_PREFIX};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::net::IpAddr;

/// The addresses leased to each rule's `lan_hostnames`, by rule name.
pub type HostAddrs = BTreeMap<String, BTreeSet<IpAddr>>;

/// Entries of remote address sets carried over a table replacement (nftables reload): set name
/// to (address, seconds until it expires).
pub type KeptEntries = BTreeMap<String, Vec<(IpAddr, u64)>>;

/// One set a config needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSet {
    /// The set's name in the kernel (`ss_dst_games_4`).
    pub name: String,
    /// Address family of its entries.
    pub family: IpFamily,
    /// Remote addresses (from DNS answers) or LAN hosts (from leases).
    pub kind: SetKind,
    /// The rule it belongs to.
    pub rule: String,
    /// Default entry timeout (remote address sets), seconds.
    pub timeout_secs: Option<u64>,
}

fn fam(f: IpFamily) -> Family {
    match f {
        IpFamily::V4 => Family::V4,
        IpFamily::V6 => Family::V6,
    }
}

/// The remote address set of `rule` in `family`, if the rule has domains.
pub(crate) fn dst_set(rule: &Rule, family: IpFamily) -> Option<String> {
    (!rule.domains.is_empty()).then(|| set_name(&rule.name, SetKind::Dst, fam(family)))
}

/// The LAN host set of `rule` in `family`, if the rule has `lan_hostnames`.
pub(crate) fn host_set(rule: &Rule, family: IpFamily) -> Option<String> {
    (!rule.lan_hostnames.is_empty()).then(|| set_name(&rule.name, SetKind::Host, fam(family)))
}

/// Every set `config` needs, IPv4 then IPv6 (if enabled) per rule.
pub fn kernel_sets(config: &Config) -> Vec<KernelSet> {
    let families: &[IpFamily] = if config.datapath.ipv6 {
        &[IpFamily::V4, IpFamily::V6]
    } else {
        &[IpFamily::V4]
    };
    let timeout = config.names.set_timeout.as_secs().max(1);
    let mut out = Vec::new();
    for rule in &config.rules {
        for &family in families {
            if let Some(name) = dst_set(rule, family) {
                out.push(KernelSet {
                    name,
                    family,
                    kind: SetKind::Dst,
                    rule: rule.name.clone(),
                    timeout_secs: Some(timeout),
                });
            }
            if let Some(name) = host_set(rule, family) {
                out.push(KernelSet {
                    name,
                    family,
                    kind: SetKind::Host,
                    rule: rule.name.clone(),
                    timeout_secs: None,
                });
            }
        }
    }
    out
}

fn ipset_family(f: IpFamily) -> &'static str {
    match f {
        IpFamily::V4 => "inet",
        IpFamily::V6 => "inet6",
    }
}

/// `ipset restore` input creating every set (`-exist`: sets kept from a previous run or the
/// previous config stay, with their entries).
pub fn ipset_create_input(sets: &[KernelSet]) -> String {
    let mut s = String::new();
    for set in sets {
        let _ = write!(
            s,
            "create {} hash:ip family {}",
            set.name,
            ipset_family(set.family)
        );
        if let Some(t) = set.timeout_secs {
            let _ = write!(s, " timeout {t}");
        }
        s.push_str(" -exist\n");
    }
    s
}

fn addrs_of<'a>(set: &KernelSet, hosts: &'a HostAddrs) -> impl Iterator<Item = &'a IpAddr> + 'a {
    let v4 = set.family == IpFamily::V4;
    hosts
        .get(&set.rule)
        .into_iter()
        .flatten()
        .filter(move |a| a.is_ipv4() == v4)
}

/// `ipset restore` input replacing each host set's entries in one step: a temporary set is
/// filled and swapped in, so a host never drops out of the set while its address stays.
pub fn ipset_hosts_input(sets: &[KernelSet], hosts: &HostAddrs) -> String {
    let mut s = String::new();
    for set in sets.iter().filter(|s| s.kind == SetKind::Host) {
        let tmp = format!(
            "{SET_PREFIX}tmp{}",
            if set.family == IpFamily::V4 { "4" } else { "6" }
        );
        let _ = writeln!(
            s,
            "create {tmp} hash:ip family {} -exist",
            ipset_family(set.family)
        );
        let _ = writeln!(s, "flush {tmp}");
        for a in addrs_of(set, hosts) {
            let _ = writeln!(s, "add {tmp} {a} -exist");
        }
        let _ = writeln!(s, "swap {tmp} {}", set.name);
        let _ = writeln!(s, "destroy {tmp}");
    }
    s
}

/// The nft set declarations for the ruleset: host sets with their current elements, remote
/// sets with the entries `kept` from the table being replaced (each with the time it had left).
pub(crate) fn nft_declarations(sets: &[KernelSet], hosts: &HostAddrs, kept: &KeptEntries) -> String {
    let mut s = String::new();
    for set in sets {
        let ty = match set.family {
            IpFamily::V4 => "ipv4_addr",
            IpFamily::V6 => "ipv6_addr",
        };
        let _ = write!(s, "\tset {} {{\n\t\ttype {ty}\n", set.name);
        if let Some(t) = set.timeout_secs {
            let _ = write!(s, "\t\tflags timeout\n\t\ttimeout {t}s\n");
        }
        let mut elements: Vec<String> = addrs_of(set, hosts).map(ToString::to_string).collect();
        if let (Some(timeout), Some(entries)) = (set.timeout_secs, kept.get(&set.name)) {
            let v4 = set.family == IpFamily::V4;
            elements.extend(
                entries
                    .iter()
                    .filter(|(a, left)| a.is_ipv4() == v4 && *left >= 1)
                    .map(|(a, left)| format!("{a} expires {}s", (*left).min(timeout))),
            );
        }
        if !elements.is_empty() {
            let _ = writeln!(s, "\t\telements = {{ {} }}", elements.join(", "));
        }
        s.push_str("\t}\n\n");
    }
    s
}

/// The entries of the remote address sets in `sets` now in the kernel's table (`nft -j list set`),
/// for [`crate::plan_keeping`] to carry over a reload. Sets that cannot be listed are skipped: the
/// worst case is an empty set that dnsmasq refills at the next lookups.
pub fn nft_kept_entries(runner: &CommandRunner, sets: &[KernelSet]) -> KeptEntries {
    let mut kept = KeptEntries::new();
    for set in sets.iter().filter(|s| s.kind == SetKind::Dst) {
        let cmd = PlannedCommand::new("nft", &["-j", "list", "set", "inet", NFT_TABLE, &set.name]);
        match runner.run(&cmd) {
            Ok(json) => {
                kept.insert(set.name.clone(), parse_nft_set_json(&json));
            }
            Err(e) => tracing::debug!(error = %e, set = %set.name, "set not listed; its entries start over"),
        }
    }
    kept
}

/// (address, seconds left) of each element in `nft -j list set` output.
fn parse_nft_set_json(json: &str) -> Vec<(IpAddr, u64)> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    let items = v["nftables"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|i| i["set"]["elem"].as_array())
        .flatten()
        .filter_map(|e| {
            let addr = e["elem"]["val"].as_str()?.parse().ok()?;
            Some((addr, e["elem"]["expires"].as_u64()?))
        })
        .collect()
}

/// How many entries each set holds now (`None`: could not be listed), for `slipstream status`.
pub fn set_entry_counts(
    runner: &CommandRunner,
    backend: crate::Backend,
    sets: &[KernelSet],
) -> Vec<Option<usize>> {
    sets.iter()
        .map(|set| match backend {
            crate::Backend::IptablesLegacy => runner
                .run(&PlannedCommand::new("ipset", &["list", "-t", &set.name]))
                .ok()
                .and_then(|out| {
                    out.lines()
                        .find_map(|l| l.strip_prefix("Number of entries:"))
                        .and_then(|n| n.trim().parse().ok())
                }),
            crate::Backend::Nftables => runner
                .run(&PlannedCommand::new(
                    "nft",
                    &["-j", "list", "set", "inet", NFT_TABLE, &set.name],
                ))
                .ok()
                .map(|json| parse_nft_set_json_count(&json)),
        })
        .collect()
}

/// Elements in `nft -j list set` output (with or without timeouts).
fn parse_nft_set_json_count(json: &str) -> usize {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| {
            v["nftables"]
                .as_array()?
                .iter()
                .find_map(|i| i["set"]["elem"].as_array().map(Vec::len))
        })
        .unwrap_or(0)
}

/// One `nft -f -` transaction replacing every host set's elements.
pub fn nft_hosts_transaction(sets: &[KernelSet], hosts: &HostAddrs) -> String {
    let mut s = String::new();
    for set in sets.iter().filter(|s| s.kind == SetKind::Host) {
        let _ = writeln!(s, "flush set inet {NFT_TABLE} {}", set.name);
        let elements: Vec<String> = addrs_of(set, hosts).map(ToString::to_string).collect();
        if !elements.is_empty() {
            let _ = writeln!(
                s,
                "add element inet {NFT_TABLE} {} {{ {} }}",
                set.name,
                elements.join(", ")
            );
        }
    }
    s
}

/// Destroys Slipstream's ipsets (names starting with `ss_`) other than `keep`. Sets still
/// referenced by a rule cannot be destroyed; that error is returned with the others.
pub(crate) fn destroy_ipsets_except(runner: &CommandRunner, keep: &[String]) -> Vec<FirewallError> {
    let listing = match runner.run(&PlannedCommand::new("ipset", &["list", "-n"])) {
        Ok(l) => l,
        Err(e) => return vec![e],
    };
    listing
        .lines()
        .map(str::trim)
        .filter(|n| n.starts_with(SET_PREFIX) && !keep.iter().any(|k| k == n))
        .filter_map(|n| runner.run(&PlannedCommand::new("ipset", &["destroy", n])).err())
        .collect()
}

impl crate::Firewall {
    /// Creates the plan's ipsets (iptables backend; nft sets live in the ruleset). At install
    /// (`take_over`), a set left by an earlier run with other parameters (a changed
    /// `set_timeout`) cannot be re-created in place: the old rules and sets are then cleared first.
    pub(crate) fn create_sets(&mut self, take_over: bool) -> Result<(), FirewallError> {
        let sets = self.plan.sets.clone();
        match self.create_sets_of(&sets) {
            Err(e) if take_over => {
                tracing::info!(error = %e, "ipsets of an earlier run differ; clearing them first");
                for e in crate::reset::reset_backend(&self.runner, self.backend, self.ipv6) {
                    tracing::debug!(error = %e, "clearing the earlier rules");
                }
                for e in destroy_ipsets_except(&self.runner, &[]) {
                    tracing::debug!(error = %e, "clearing the earlier ipsets");
                }
                self.create_sets_of(&sets)
            }
            other => other,
        }
    }

    pub(crate) fn create_sets_of(&self, sets: &[KernelSet]) -> Result<(), FirewallError> {
        if self.backend != crate::Backend::IptablesLegacy || sets.is_empty() {
            return Ok(());
        }
        let input = ipset_create_input(sets);
        let cmd = PlannedCommand::new("ipset", &["restore"]).with_stdin(input);
        self.runner.run(&cmd).map(|_| ())
    }

    /// After a replacement: ipsets no rule uses any more go (nft: went with the old table).
    pub(crate) fn after_replace(&mut self) {
        if self.backend != crate::Backend::IptablesLegacy {
            return;
        }
        let keep: Vec<String> = self.plan.sets.iter().map(|s| s.name.clone()).collect();
        for e in destroy_ipsets_except(&self.runner, &keep) {
            tracing::debug!(error = %e, "destroying ipsets of removed rules");
        }
        self.hosts
            .retain(|rule, _| self.plan.sets.iter().any(|s| &s.rule == rule));
        if let Err(e) = self.fill_host_sets() {
            tracing::warn!(error = %e, "filling the host sets after a reload");
        }
    }

    /// Destroys every ipset of Slipstream's (after the rules are gone).
    pub(crate) fn destroy_sets(&mut self) -> Vec<FirewallError> {
        if self.backend != crate::Backend::IptablesLegacy || self.plan.sets.is_empty() {
            return Vec::new();
        }
        destroy_ipsets_except(&self.runner, &[])
    }

    /// Puts the current host addresses into the host sets, each set replaced in one step.
    pub(crate) fn fill_host_sets(&self) -> Result<(), FirewallError> {
        if !self.plan.sets.iter().any(|s| s.kind == SetKind::Host) {
            return Ok(());
        }
        let cmd = match self.backend {
            crate::Backend::IptablesLegacy => PlannedCommand::new("ipset", &["restore"])
                .with_stdin(ipset_hosts_input(&self.plan.sets, &self.hosts)),
            crate::Backend::Nftables => PlannedCommand::new("nft", &["-f", "-"])
                .with_stdin(nft_hosts_transaction(&self.plan.sets, &self.hosts)),
        };
        let input = cmd.stdin.clone().unwrap_or_default();
        self.runner
            .run(&cmd)
            .map(|_| ())
            .map_err(|e| e.with_input_line(&input))
    }

    /// The addresses leased to each rule's `lan_hostnames` changed (or are known for the first
    /// time): the host sets are refilled, each in one step. Rules stay untouched. A no-op if
    /// nothing changed; returns whether the sets were written.
    pub fn set_hosts(&mut self, hosts: HostAddrs) -> Result<bool, FirewallError> {
        if hosts == self.hosts {
            return Ok(false);
        }
        self.hosts = hosts;
        if self.backend == crate::Backend::Nftables {
            // A later re-install (watchdog) writes the table with these elements.
            self.plan = crate::plan_with_hosts(&self.config, self.backend, &self.hosts);
        }
        self.fill_host_sets()?;
        Ok(true)
    }

    /// The host addresses last given to [`crate::Firewall::set_hosts`].
    pub fn hosts(&self) -> &HostAddrs {
        &self.hosts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nft_json_elements() {
        let json = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}}, {"set": {"family": "inet", "name": "s",
            "table": "slipstream", "type": "ipv4_addr", "flags": ["timeout"], "timeout": 60,
            "elem": [{"elem": {"val": "1.2.3.4", "expires": 19}}, {"elem": {"val": "1.2.3.5", "expires": 29}}]}}]}"#;
        let got = parse_nft_set_json(json);
        assert_eq!(
            got,
            [("1.2.3.4".parse().unwrap(), 19), ("1.2.3.5".parse().unwrap(), 29)]
        );
        assert!(parse_nft_set_json("not json").is_empty());
        assert_eq!(parse_nft_set_json_count(json), 2);
        let plain = r#"{"nftables": [{"set": {"name": "h", "elem": ["10.0.0.1", "10.0.0.2", "10.0.0.3"]}}]}"#;
        assert_eq!(parse_nft_set_json_count(plain), 3);
        assert!(parse_nft_set_json(r#"{"nftables": [{"set": {"name": "s"}}]}"#).is_empty());
    }

    fn config(text: &str) -> Config {
        slipstream_config::parse(text, "t.toml").unwrap()
    }

    #[test]
    fn sets_of_a_config() {
        let c = config(
            "[names]\nset_timeout = \"90s\"\n[[rules]]\nname = \"steam\"\npreset = \"steam\"\n\
             [[rules]]\nname = \"deck\"\nlan_hostnames = [\"deck\"]\n[[rules]]\nname = \"bt\"\nremote_ports = [1]\n",
        );
        let sets = kernel_sets(&c);
        let names: Vec<&str> = sets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "ss_dst_steam_4",
                "ss_dst_steam_6",
                "ss_host_deck_4",
                "ss_host_deck_6"
            ]
        );
        assert_eq!(
            ipset_create_input(&sets),
            "create ss_dst_steam_4 hash:ip family inet timeout 90 -exist\n\
             create ss_dst_steam_6 hash:ip family inet6 timeout 90 -exist\n\
             create ss_host_deck_4 hash:ip family inet -exist\n\
             create ss_host_deck_6 hash:ip family inet6 -exist\n"
        );
        let mut hosts = HostAddrs::new();
        hosts.insert(
            "deck".into(),
            ["192.168.1.20", "fd00::20", "192.168.1.21"]
                .iter()
                .map(|a| a.parse().unwrap())
                .collect(),
        );
        assert_eq!(
            ipset_hosts_input(&sets, &hosts),
            "create ss_tmp4 hash:ip family inet -exist\nflush ss_tmp4\n\
             add ss_tmp4 192.168.1.20 -exist\nadd ss_tmp4 192.168.1.21 -exist\n\
             swap ss_tmp4 ss_host_deck_4\ndestroy ss_tmp4\n\
             create ss_tmp6 hash:ip family inet6 -exist\nflush ss_tmp6\n\
             add ss_tmp6 fd00::20 -exist\nswap ss_tmp6 ss_host_deck_6\ndestroy ss_tmp6\n"
        );
        assert_eq!(
            nft_hosts_transaction(&sets, &hosts),
            "flush set inet slipstream ss_host_deck_4\n\
             add element inet slipstream ss_host_deck_4 { 192.168.1.20, 192.168.1.21 }\n\
             flush set inet slipstream ss_host_deck_6\n\
             add element inet slipstream ss_host_deck_6 { fd00::20 }\n"
        );
        let mut kept = KeptEntries::new();
        kept.insert(
            "ss_dst_steam_4".into(),
            vec![
                ("203.0.113.7".parse().unwrap(), 40),
                ("203.0.113.8".parse().unwrap(), 500),
                ("::1".parse().unwrap(), 9),
            ],
        );
        let decl = nft_declarations(&sets, &hosts, &kept);
        assert!(
            decl.contains(
                "\t\ttimeout 90s\n\t\telements = { 203.0.113.7 expires 40s, 203.0.113.8 expires 90s }\n"
            ),
            "{decl}"
        );
        let decl = nft_declarations(&sets, &hosts, &KeptEntries::new());
        assert!(decl.contains(
            "\tset ss_dst_steam_4 {\n\t\ttype ipv4_addr\n\t\tflags timeout\n\t\ttimeout 90s\n\t}\n"
        ));
        assert!(
            decl.contains("\tset ss_host_deck_6 {\n\t\ttype ipv6_addr\n\t\telements = { fd00::20 }\n\t}\n")
        );
    }
}
