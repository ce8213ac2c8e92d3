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

/// Prefix of the `dhcp` sections Slipstream owns: `slipstream_1`, `slipstream_2`, ... (the init
/// script deletes every `slipstream_<number>` before adding the new ones).
pub const SECTION_PREFIX: &str = "slipstream_";

/// One `config ipset` section of `/etc/config/dhcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpsetSection {
    /// Section name (`slipstream_1`).
    pub id: String,
    /// The sets filled (`list name`): the rule's IPv4 set, and its IPv6 set with IPv6. Both in
    /// one section, so in one dnsmasq line: of several lines for the same name dnsmasq applies
    /// only one (`domain_find_sets`: the longest domain, one entry on a tie; with a v4 line and
    /// a v6 line for a name, dnsmasq 2.90 filled only the v4 set). Their family is not stated (`option family` is one per section): dnsmasq's init reads it from the
    /// names' `_4` / `_6` ends ([`set_name`]).
    pub sets: Vec<String>,
    /// The nft table of the sets (`option table`, family `inet`).
    pub table: String,
    /// The names whose answers go to the sets (`list domain`).
    pub domains: Vec<String>,
}

impl IpsetSection {
    /// The two lines dnsmasq's init script writes for this section into each instance's config
    /// (`dnsmasq_ipset_add`: `--ipset=` and `--nftset=`, each dropped if dnsmasq lacks it).
    pub fn init_lines(&self) -> [String; 2] {
        let domains: String = self.domains.iter().map(|d| format!("/{d}")).collect();
        [
            format!("ipset={domains}/{}", self.sets.join(",")),
            format!("nftset={domains}/{}", nft_targets(&self.table, &self.sets)),
        ]
    }
}

/// `4#inet#<table>#<set>,...`, the family from each name's end.
fn nft_targets(table: &str, sets: &[String]) -> String {
    sets.iter()
        .map(|set| {
            let fam = if set.ends_with("_6") { 6 } else { 4 };
            format!("{fam}#inet#{table}#{set}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The sections for `rules` (those with domains): per rule one section, its names split over
/// several sections where one line would pass dnsmasq's line limit ([`MAX_LINE`]).
pub fn dhcp_ipset_sections(rules: &[RuleDomains], table: &str, ipv6: bool) -> Vec<IpsetSection> {
    let mut out: Vec<IpsetSection> = Vec::new();
    for rule in rules.iter().filter(|r| !r.domains.is_empty()) {
        let mut sets = vec![set_name(rule.rule, SetKind::Dst, Family::V4)];
        if ipv6 {
            sets.push(set_name(rule.rule, SetKind::Dst, Family::V6));
        }
        for domains in chunks(rule.domains, nft_targets(table, &sets).len()) {
            out.push(IpsetSection {
                id: format!("{SECTION_PREFIX}{}", out.len() + 1),
                sets: sets.clone(),
                table: table.to_owned(),
                domains,
            });
        }
    }
    out
}

/// The names split so that each section's `nftset=` line (the longer of the two) fits.
fn chunks(domains: &[DomainPattern], targets_len: usize) -> Vec<Vec<String>> {
    // "nftset=" + the names each with its '/' + "/" + the targets
    let fixed = "nftset=".len() + 1 + targets_len;
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
        let _ = writeln!(s, "set dhcp.{id}=ipset");
        for set in &sec.sets {
            let _ = writeln!(s, "add_list dhcp.{id}.name='{set}'");
        }
        let _ = writeln!(s, "set dhcp.{id}.table='{}'", sec.table);
        let _ = writeln!(s, "set dhcp.{id}.table_family='inet'");
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
    fn one_section_per_rule_with_both_sets_and_the_table() {
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
        assert_eq!(secs.len(), 1);
        assert_eq!(secs[0].id, "slipstream_1");
        assert_eq!(
            secs[0].init_lines(),
            [
                "ipset=/steamcontent.com/*.cs.steampowered.com/ss_dst_steam_4,ss_dst_steam_6".to_string(),
                "nftset=/steamcontent.com/*.cs.steampowered.com/4#inet#slipstream#ss_dst_steam_4,6#inet#slipstream#ss_dst_steam_6"
                    .to_string()
            ]
        );
        let batch = uci_batch(&secs);
        assert_eq!(
            batch,
            "set dhcp.slipstream_1=ipset\n\
             add_list dhcp.slipstream_1.name='ss_dst_steam_4'\n\
             add_list dhcp.slipstream_1.name='ss_dst_steam_6'\n\
             set dhcp.slipstream_1.table='slipstream'\n\
             set dhcp.slipstream_1.table_family='inet'\n\
             add_list dhcp.slipstream_1.domain='steamcontent.com'\n\
             add_list dhcp.slipstream_1.domain='*.cs.steampowered.com'\n"
        );
        let v4 = dhcp_ipset_sections(&rules, "slipstream", false);
        assert_eq!(v4[0].sets, ["ss_dst_steam_4"]);
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
        assert!(secs.len() > 1, "{}", secs.len());
        for s in &secs {
            for line in s.init_lines() {
                assert!(line.len() <= MAX_LINE, "{} bytes: {line}", line.len());
            }
        }
        // Every name in exactly one section (of several dnsmasq lines for a name only one applies).
        for name in &many {
            let n = secs.iter().filter(|s| s.domains.contains(name)).count();
            assert_eq!(n, 1, "{name}");
        }
        let ids: Vec<&str> = secs.iter().map(|s| s.id.as_str()).collect();
        let expected: Vec<String> = (1..=secs.len()).map(|i| format!("slipstream_{i}")).collect();
        assert_eq!(ids, expected.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// dnsmasq accepts the longest lines the init writes for split sections (`dnsmasq --test`).
    #[test]
    #[ignore = "needs dnsmasq (dnsmasq-base): scripts/test.sh runs it (--ignored)"]
    fn real_dnsmasq_accepts_the_init_lines() {
        let label = "b".repeat(63);
        let long: Vec<String> = (0..40)
            .map(|i| format!("{label}.{label}.{label}.x{i}.example.com"))
            .collect();
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        let d = patterns(&refs);
        let rules = [RuleDomains {
            rule: "a-rule-with-a-long-name-for-its-sets",
            domains: &d,
        }];
        let lines: Vec<String> = dhcp_ipset_sections(&rules, "slipstream", true)
            .iter()
            .flat_map(IpsetSection::init_lines)
            .collect();
        let path = std::env::temp_dir().join(format!("ss-uci-test-{}.conf", std::process::id()));
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let out = std::process::Command::new("dnsmasq")
            .arg("--test")
            .arg(format!("--conf-file={}", path.display()))
            .output();
        let _ = std::fs::remove_file(&path);
        match out {
            Err(e) => panic!("cannot run here: dnsmasq not runnable ({e})"),
            Ok(o) => assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr)),
        }
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
