//! Kernel address sets and the dnsmasq lines that fill them.
//!
//! Each rule with `domains` (or presets) owns two sets of *remote* addresses, one per IP family,
//! whose entries expire after the configured timeout unless dnsmasq answers the name again; each
//! rule with `lan_hostnames` owns two sets of *LAN host* addresses, which the daemon fills from
//! the lease files. Sets are named after the rule (not its number), so reordering rules keeps
//! what dnsmasq was told; names fit ipset's 31 characters.

use crate::DomainPattern;
use std::fmt::Write;

/// Prefix of every set Slipstream owns (a reset deletes exactly these).
pub const SET_PREFIX: &str = "ss_";

/// Which addresses a set holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetKind {
    /// Remote addresses dnsmasq resolved for a rule's domains.
    Dst,
    /// LAN host addresses leased to a rule's `lan_hostnames`.
    Host,
}

/// IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 addresses.
    V4,
    /// IPv6 addresses.
    V6,
}

/// Longest ipset name (IPSET_MAXNAMELEN 32, with the terminating NUL).
pub const MAX_SET_NAME: usize = 31;

/// The set of `kind` and `family` for the rule named `rule` (`ss_dst_steam_4`). Long rule names
/// are cut and get a hash of the full name, so two long names sharing a start stay apart. The
/// family is the last character, after a `_`: OpenWrt's dnsmasq init reads a set's family from
/// its name in that form (`dnsmasq_ipset_add`), where it would otherwise ask nft, whose table
/// does not exist yet when dnsmasq starts at boot.
pub fn set_name(rule: &str, kind: SetKind, family: Family) -> String {
    let prefix = format!(
        "{SET_PREFIX}{}_",
        match kind {
            SetKind::Dst => "dst",
            SetKind::Host => "host",
        }
    );
    let suffix = match family {
        Family::V4 => "_4",
        Family::V6 => "_6",
    };
    // Set names: letters, digits, '_' and '-' (nft identifiers allow no '.').
    let clean: String = rule
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let room = MAX_SET_NAME - prefix.len() - suffix.len();
    if clean.len() <= room && clean == rule {
        return format!("{prefix}{clean}{suffix}");
    }
    // FNV-1a of the full name: stable across versions and platforms.
    let hash = rule.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let keep = room - 7;
    format!(
        "{prefix}{}_{:06x}{suffix}",
        &clean[..clean.len().min(keep)],
        hash & 0xff_ffff
    )
}

/// How dnsmasq is told to fill the sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsmasqSets {
    /// `ipset=/<names>/<set4>,<set6>` (fw3 / iptables: kernel ipsets).
    Ipset,
    /// `nftset=/<names>/4#inet#<table>#<set4>,6#inet#<table>#<set6>` (fw4 / nftables).
    Nftset {
        /// The nft table holding the sets (`slipstream`, family `inet`).
        table: &'static str,
    },
}

/// One rule's part of the dnsmasq snippet.
pub struct RuleDomains<'a> {
    /// The rule's name (its sets are named after it).
    pub rule: &'a str,
    /// The rule's names, its presets' included.
    pub domains: &'a [DomainPattern],
}

/// Longest dnsmasq config line written: dnsmasq reads each line into a buffer of MAXDNAME (1025)
/// bytes and rejects a longer one ("bad option"; checked with `dnsmasq --test`), so long name
/// lists are split over several lines with the same sets.
pub const MAX_LINE: usize = 900;

/// The dnsmasq config snippet that fills every rule's sets (`conf-dir` / `/tmp/dnsmasq.d/`).
pub fn dnsmasq_conf(rules: &[RuleDomains], how: DnsmasqSets, ipv6: bool) -> String {
    let mut s = String::from(
        "# Written by slipstreamd: the addresses dnsmasq resolves for these names go to Slipstream's\n\
         # sets, and flows to them are classed as background. Do not edit; edit Slipstream's config.\n",
    );
    for r in rules.iter().filter(|r| !r.domains.is_empty()) {
        let v4 = set_name(r.rule, SetKind::Dst, Family::V4);
        let v6 = set_name(r.rule, SetKind::Dst, Family::V6);
        let targets = match how {
            DnsmasqSets::Ipset if ipv6 => format!("{v4},{v6}"),
            DnsmasqSets::Ipset => v4,
            DnsmasqSets::Nftset { table } if ipv6 => format!("4#inet#{table}#{v4},6#inet#{table}#{v6}"),
            DnsmasqSets::Nftset { table } => format!("4#inet#{table}#{v4}"),
        };
        let key = match how {
            DnsmasqSets::Ipset => "ipset",
            DnsmasqSets::Nftset { .. } => "nftset",
        };
        let _ = writeln!(s, "# rule {:?}", r.rule);
        // `key=/` + names each followed by `/` + targets; a name is at most 253 bytes, so one
        // always fits.
        let fixed = key.len() + 2 + targets.len();
        let mut line: Vec<String> = Vec::new();
        let mut len = fixed;
        for name in r.domains.iter().map(DomainPattern::dnsmasq) {
            if !line.is_empty() && len + name.len() + 1 > MAX_LINE {
                let _ = writeln!(s, "{key}=/{}/{targets}", line.join("/"));
                line.clear();
                len = fixed;
            }
            len += name.len() + 1;
            line.push(name);
        }
        if !line.is_empty() {
            let _ = writeln!(s, "{key}=/{}/{targets}", line.join("/"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// dnsmasq itself accepts the lines (`dnsmasq --test`).
    #[test]
    #[ignore = "needs dnsmasq (dnsmasq-base): scripts/test.sh runs it (--ignored)"]
    fn real_dnsmasq_accepts_the_lines() {
        let label = "b".repeat(63);
        let long: Vec<DomainPattern> = (0..40)
            .map(|i| format!("{label}.{label}.{label}.x{i}.example.com"))
            .chain(["steamcontent.com", "*.cs.steampowered.com", "*example.org"].map(String::from))
            .map(|p| p.parse().unwrap())
            .collect();
        let rules = [RuleDomains {
            rule: "a-rule-with-a-long-name-for-its-sets",
            domains: &long,
        }];
        for how in [DnsmasqSets::Ipset, DnsmasqSets::Nftset { table: "slipstream" }] {
            let path = std::env::temp_dir().join(format!("ss-dnsmasq-test-{}.conf", std::process::id()));
            std::fs::write(&path, dnsmasq_conf(&rules, how, true)).unwrap();
            let out = std::process::Command::new("dnsmasq")
                .arg("--test")
                .arg(format!("--conf-file={}", path.display()))
                .output();
            let _ = std::fs::remove_file(&path);
            match out {
                Err(e) => panic!("cannot run here: dnsmasq not runnable ({e})"),
                Ok(o) => assert!(
                    o.status.success(),
                    "{how:?}: {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
            }
        }
    }

    #[test]
    fn set_names_fit_and_stay_apart() {
        assert_eq!(set_name("steam", SetKind::Dst, Family::V4), "ss_dst_steam_4");
        assert_eq!(set_name("game.consoles", SetKind::Host, Family::V6), {
            let n = set_name("game.consoles", SetKind::Host, Family::V6);
            assert!(
                n.starts_with("ss_host_game_consoles_") && n.ends_with("_6"),
                "{n}"
            );
            n
        });
        let a = set_name("a-very-long-rule-name-for-downloads-1", SetKind::Host, Family::V4);
        let b = set_name("a-very-long-rule-name-for-downloads-2", SetKind::Host, Family::V4);
        assert!(a.len() <= MAX_SET_NAME && b.len() <= MAX_SET_NAME, "{a} {b}");
        assert_ne!(a, b);
        assert_eq!(
            a,
            set_name("a-very-long-rule-name-for-downloads-1", SetKind::Host, Family::V4)
        );
    }

    #[test]
    fn dnsmasq_lines() {
        let d: Vec<DomainPattern> = ["steamcontent.com", "*.cs.steampowered.com"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
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
        let ipset = dnsmasq_conf(&rules, DnsmasqSets::Ipset, true);
        assert!(
            ipset.contains("\nipset=/steamcontent.com/*.cs.steampowered.com/ss_dst_steam_4,ss_dst_steam_6\n")
        );
        assert!(!ipset.contains("bt"));
        let nft = dnsmasq_conf(&rules, DnsmasqSets::Nftset { table: "slipstream" }, false);
        assert!(nft
            .contains("\nnftset=/steamcontent.com/*.cs.steampowered.com/4#inet#slipstream#ss_dst_steam_4\n"));
        // Long names: every line within dnsmasq's buffer, every name on exactly one line.
        let label = "a".repeat(60);
        let many: Vec<DomainPattern> = (0..20)
            .map(|i| format!("{label}.{label}.{label}.example{i}.com").parse().unwrap())
            .collect();
        let m = [RuleDomains {
            rule: "m",
            domains: &many,
        }];
        let text = dnsmasq_conf(&m, DnsmasqSets::Nftset { table: "slipstream" }, true);
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("nftset=")).collect();
        assert!(lines.len() > 1);
        assert!(lines.iter().all(|l| l.len() < MAX_LINE), "{text}");
        for i in 0..20 {
            let name = format!(".example{i}.com/");
            assert_eq!(lines.iter().filter(|l| l.contains(&name)).count(), 1, "{name}");
        }
    }
}
