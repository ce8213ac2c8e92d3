//! The `dhcp` UCI sections through which OpenWrt's dnsmasq fills the rules' sets.
//!
//! On OpenWrt the rules by domain reach dnsmasq as `config ipset` sections of `/etc/config/dhcp`,
//! the way OpenWrt's own packages and LuCI add them, rather than as a file in a dnsmasq
//! `conf-dir`:
//!
//! * dnsmasq's init script writes each section into every instance's generated config
//!   (`/var/etc/dnsmasq.conf.<section>`), which is what each instance reads and what its jail
//!   mounts, whatever the instance's `conf-dir` (shared `/tmp/dnsmasq.d` on 23.05, per instance
//!   `/tmp/dnsmasq.<section>.d` on 24.10);
//! * the init script drops a directive the installed dnsmasq was built without (`ipset` in
//!   dnsmasq-full by default, both in the plain `dnsmasq`), where a `conf-dir` file with an
//!   `nftset=` line stops the plain dnsmasq from starting at all (no DNS for the household);
//! * `/etc/config/dhcp` is on flash: at boot dnsmasq starts with the sections already there, so
//!   a boot where nothing changed restarts nothing (a file in `/tmp` is gone at every boot).
//!
//! The init script (`openwrt/files/slipstream.init`) applies [`uci_batch`] with `uci batch` when
//! its digest differs from the one it stored, and only then reloads dnsmasq.

use crate::sets::{set_name, Family, RuleDomains, SetKind, MAX_LINE};
use crate::DomainPattern;
use std::fmt::Write;

/// Prefix of the `dhcp` sections Slipstream owns: `slipstream_1`, `slipstream_2`, ... (numbered
/// from 1 without gaps, so the init script deletes them in order until one is missing).
pub const SECTION_PREFIX: &str = "slipstream_";

/// One `config ipset` section of `/etc/config/dhcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpsetSection {
    /// Section name (`slipstream_1`).
    pub id: String,
    /// The set filled (`list name`).
    pub set: String,
    /// The address family of the set (`option family`): stated, because dnsmasq's init would
    /// otherwise guess it from the name or ask nft, whose table does not exist yet at boot.
    pub family: Family,
    /// The nft table of the set (`option table`, family `inet`).
    pub table: String,
    /// The names whose answers go to the set (`list domain`).
    pub domains: Vec<String>,
}

impl IpsetSection {
    /// The two lines dnsmasq's init script writes for this section into each instance's config
    /// (`dnsmasq_ipset_add`: `--ipset=` and `--nftset=`, each dropped if dnsmasq lacks it).
    pub fn init_lines(&self) -> [String; 2] {
        let domains: String = self.domains.iter().map(|d| format!("/{d}")).collect();
        [
            format!("ipset={domains}/{}", self.set),
            format!("nftset={domains}/{}", self.nft_target()),
        ]
    }

    fn nft_target(&self) -> String {
        let fam = match self.family {
            Family::V4 => 4,
            Family::V6 => 6,
        };
        format!("{fam}#inet#{}#{}", self.table, self.set)
    }
}

/// The sections for `rules` (those with domains): per rule one section per family (IPv6 only
/// with `ipv6`), its names split over several sections where one line would pass dnsmasq's
/// line limit ([`MAX_LINE`]).
pub fn dhcp_ipset_sections(rules: &[RuleDomains], table: &str, ipv6: bool) -> Vec<IpsetSection> {
    let families: &[Family] = if ipv6 {
        &[Family::V4, Family::V6]
    } else {
        &[Family::V4]
    };
    let mut out: Vec<IpsetSection> = Vec::new();
    for rule in rules.iter().filter(|r| !r.domains.is_empty()) {
        for &family in families {
            let set = set_name(rule.rule, SetKind::Dst, family);
            for domains in chunks(rule.domains, table, &set) {
                out.push(IpsetSection {
                    id: format!("{SECTION_PREFIX}{}", out.len() + 1),
                    set: set.clone(),
                    family,
                    table: table.to_owned(),
                    domains,
                });
            }
        }
    }
    out
}

/// The names split so that each section's `nftset=` line (the longer of the two) fits.
fn chunks(domains: &[DomainPattern], table: &str, set: &str) -> Vec<Vec<String>> {
    // "nftset=" + the names each with its '/' + "/" + "4#inet#<table>#<set>"
    let fixed = "nftset=".len() + 1 + "4#inet##".len() + table.len() + set.len();
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut len = fixed;
    for name in domains.iter().map(DomainPattern::dnsmasq) {
        if !current.is_empty() && len + name.len() + 1 > MAX_LINE {
            out.push(std::mem::take(&mut current));
            len = fixed;
        }
        len += name.len() + 1;
        current.push(name);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The `uci batch` commands that create `sections` in the `dhcp` package (no commit). Values are
/// single-quoted: set names and domain patterns never hold a quote.
pub fn uci_batch(sections: &[IpsetSection]) -> String {
    let mut s = String::new();
    for sec in sections {
        let id = &sec.id;
        let fam = match sec.family {
            Family::V4 => 4,
            Family::V6 => 6,
        };
        let _ = writeln!(s, "set dhcp.{id}=ipset");
        let _ = writeln!(s, "add_list dhcp.{id}.name='{}'", sec.set);
        let _ = writeln!(s, "set dhcp.{id}.table='{}'", sec.table);
        let _ = writeln!(s, "set dhcp.{id}.table_family='inet'");
        let _ = writeln!(s, "set dhcp.{id}.family='{fam}'");
        for d in &sec.domains {
            let _ = writeln!(s, "add_list dhcp.{id}.domain='{d}'");
        }
    }
    s
}

/// What a `dnsmasq --version` says about the set directives it was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DnsmasqFeatures {
    /// `ipset=` (kernel ipsets, fw3).
    pub ipset: bool,
    /// `nftset=` (nftables sets, fw4).
    pub nftset: bool,
}

/// Reads the "Compile time options:" line of `dnsmasq --version` (`ipset` or `no-ipset`, `nftset`
/// or `no-nftset`); `None` if the output has no such line.
pub fn dnsmasq_features(version_output: &str) -> Option<DnsmasqFeatures> {
    let line = version_output
        .lines()
        .find_map(|l| l.trim().strip_prefix("Compile time options:"))?;
    let has = |word: &str| line.split_whitespace().any(|w| w == word);
    Some(DnsmasqFeatures {
        ipset: has("ipset"),
        nftset: has("nftset"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(list: &[&str]) -> Vec<DomainPattern> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn one_section_per_family_with_its_family_and_table() {
        let d = patterns(&["steamcontent.com", "*.cs.steampowered.com"]);
        let rules = [
            RuleDomains {
                rule: "steam",
                domains: &d,
            },
            RuleDomains {
                rule: "bt",
                domains: &[],
            },
        ];
        let secs = dhcp_ipset_sections(&rules, "slipstream", true);
        assert_eq!(secs.len(), 2);
        assert_eq!(secs[0].id, "slipstream_1");
        assert_eq!(secs[1].id, "slipstream_2");
        assert_eq!(
            secs[0].init_lines(),
            [
                "ipset=/steamcontent.com/*.cs.steampowered.com/ss_dst4_steam".to_string(),
                "nftset=/steamcontent.com/*.cs.steampowered.com/4#inet#slipstream#ss_dst4_steam".to_string()
            ]
        );
        assert!(secs[1].init_lines()[1].ends_with("/6#inet#slipstream#ss_dst6_steam"));
        let batch = uci_batch(&secs);
        assert!(batch.starts_with(
            "set dhcp.slipstream_1=ipset\nadd_list dhcp.slipstream_1.name='ss_dst4_steam'\n\
             set dhcp.slipstream_1.table='slipstream'\nset dhcp.slipstream_1.table_family='inet'\n\
             set dhcp.slipstream_1.family='4'\nadd_list dhcp.slipstream_1.domain='steamcontent.com'\n\
             add_list dhcp.slipstream_1.domain='*.cs.steampowered.com'\n"
        ));
        assert!(!batch.contains("commit"));
        assert_eq!(dhcp_ipset_sections(&rules, "slipstream", false).len(), 1);
        assert_eq!(
            uci_batch(&dhcp_ipset_sections(&rules[1..], "slipstream", true)),
            ""
        );
    }

    #[test]
    fn long_name_lists_are_split_within_dnsmasqs_line_limit() {
        let label = "a".repeat(60);
        let many: Vec<String> = (0..30)
            .map(|i| format!("{label}.{label}.{label}.example{i}.com"))
            .collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let d = patterns(&refs);
        let rules = [RuleDomains {
            rule: "a-rule-with-a-long-name-for-its-sets",
            domains: &d,
        }];
        let secs = dhcp_ipset_sections(&rules, "slipstream", true);
        assert!(secs.len() > 2, "{}", secs.len());
        for s in &secs {
            for line in s.init_lines() {
                assert!(line.len() <= MAX_LINE, "{} bytes: {line}", line.len());
            }
        }
        // Every name exactly once per family.
        for name in &many {
            let n = secs.iter().filter(|s| s.domains.contains(name)).count();
            assert_eq!(n, 2, "{name}");
        }
        let ids: Vec<&str> = secs.iter().map(|s| s.id.as_str()).collect();
        let expected: Vec<String> = (1..=secs.len()).map(|i| format!("slipstream_{i}")).collect();
        assert_eq!(ids, expected.iter().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn features_from_version_output() {
        let debian = "Dnsmasq version 2.90  Copyright (c) 2000-2024 Simon Kelley\n\
                      Compile time options: IPv6 GNU-getopt DBus no-UBus i18n IDN2 DHCP DHCPv6 no-Lua TFTP conntrack ipset nftset auth cryptohash DNSSEC loop-detect inotify dumpfile\n";
        assert_eq!(
            dnsmasq_features(debian),
            Some(DnsmasqFeatures {
                ipset: true,
                nftset: true
            })
        );
        let plain = "Dnsmasq version 2.90\nCompile time options: IPv6 GNU-getopt no-DBus UBus no-i18n no-IDN DHCP no-DHCPv6 no-Lua TFTP no-conntrack no-ipset no-nftset auth no-cryptohash no-DNSSEC no-ID loop-detect inotify dumpfile\n";
        assert_eq!(dnsmasq_features(plain), Some(DnsmasqFeatures::default()));
        assert_eq!(dnsmasq_features("sh: dnsmasq: not found"), None);
    }
}
