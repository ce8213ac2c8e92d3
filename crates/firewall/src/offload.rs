//! Detecting OpenWrt flow offloading, which hides established flows from Slipstream.
//!
//! With software flow offloading (fw4: `option flow_offloading '1'` in the `defaults` section of
//! `/etc/config/firewall`) fw4 declares `flowtable ft { hook ingress priority 0; devices = ...; }`
//! in `table inet fw4` and puts `meta l4proto { tcp, udp } flow offload @ft` (listed by nft as
//! `flow add @ft`) at the top of its `forward` chain. Once a TCP flow is established, that
//! statement adds it to the flowtable, and its later packets are forwarded from the ingress hook
//! straight to the output device: they skip the forward hook, so Slipstream's mangle rules and
//! queues never see them (`flow_offloading_hw` adds `flags offload` and moves them into the
//! switch / NIC). fw3 (iptables) does the same with a `-j FLOWOFFLOAD` rule in `FORWARD`.
//!
//! Slipstream cannot work around it from its own table: a verdict in one nftables table does not
//! stop another table's chains on the same hook, so fw4's `flow add` statement still runs for
//! every forwarded packet. The kernel's flow-offload expression skips only flows with a conntrack
//! helper, sequence-number adjustment (`IPS_SEQ_ADJUST`) or a NAT clash, IPsec packets and IPv4
//! packets with options (`nft_flow_offload_eval` in `net/netfilter/nft_flow_offload.c`): nothing a
//! ruleset could set for chosen flows without side effects. So the fix is to turn offloading off.
//!
//! The eBPF datapath (`datapath.engine = "ebpf"`) still sees software-offloaded flows: its tc
//! programs run on the LAN devices' ingress, before the flowtable's netdev ingress hook, and on
//! their egress, which the flowtable's transmit reaches through `dev_queue_xmit`; the handshakes
//! it learns flows from are never offloaded. Hardware offload takes flows off the CPU entirely
//! and stays refused ([`blocking_findings`]; kernel references in docs/flow-offload.md).
//!
//! The detection is pure ([`offload_findings`] on the texts) with a thin runner
//! ([`detect_flow_offload`]) that reads the files and runs the listing commands.

use crate::plan::PlannedCommand;
use crate::runner::CommandRunner;
use std::fmt;
use std::path::Path;

/// The fw4/fw3 UCI file that holds the offloading switches.
pub const FIREWALL_UCI_PATH: &str = "/etc/config/firewall";

/// What turns offloading off on OpenWrt (fw3 and fw4 alike).
pub const OFFLOAD_FIX: &str = "uci set firewall.@defaults[0].flow_offloading='0'; \
     uci set firewall.@defaults[0].flow_offloading_hw='0'; uci commit firewall; service firewall restart";

/// Where a finding was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadSource {
    /// `/etc/config/firewall`, a `defaults` section.
    FirewallUci,
    /// `nft list ruleset`.
    NftRuleset,
    /// `iptables-legacy-save` (fw3's `FLOWOFFLOAD` target).
    Iptables,
}

impl fmt::Display for OffloadSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OffloadSource::FirewallUci => FIREWALL_UCI_PATH,
            OffloadSource::NftRuleset => "nft list ruleset",
            OffloadSource::Iptables => "iptables-legacy-save",
        })
    }
}

/// One sign that established flows bypass netfilter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadFinding {
    /// Where the sign was found.
    pub source: OffloadSource,
    /// Hardware offloading (flows leave the CPU entirely), not only software.
    pub hardware: bool,
    /// What was found, e.g. `option flow_offloading '1' in config defaults (line 7)` or
    /// `table inet fw4, chain forward: meta l4proto { tcp, udp } flow add @ft`.
    pub what: String,
    /// What to do about it.
    pub fix: String,
}

impl fmt::Display for OffloadFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} flow offloading is on ({}: {}): established flows bypass netfilter after their \
             handshake, so Slipstream cannot clamp background flows; fix: {}",
            if self.hardware { "hardware" } else { "software" },
            self.source,
            self.what,
            self.fix
        )
    }
}

/// Findings from the three texts, any of which may be absent (`None`): the content of
/// `/etc/config/firewall`, the output of `nft list ruleset`, and of `iptables-legacy-save`.
/// Empty if nothing offloads. Unparseable UCI text is skipped (fw4 would reject it too).
pub fn offload_findings(
    firewall_uci: Option<&str>,
    nft_ruleset: Option<&str>,
    iptables_save: Option<&str>,
) -> Vec<OffloadFinding> {
    let mut out = Vec::new();
    if let Some(text) = firewall_uci {
        out.extend(uci_findings(text));
    }
    if let Some(text) = nft_ruleset {
        out.extend(nft_findings(text));
    }
    if let Some(text) = iptables_save {
        out.extend(iptables_findings(text));
    }
    out
}

fn uci_findings(text: &str) -> Vec<OffloadFinding> {
    let Ok(sections) = slipstream_config::parse_sections(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in sections.iter().filter(|s| s.section_type == "defaults") {
        for (option, hardware) in [("flow_offloading", false), ("flow_offloading_hw", true)] {
            let Some(value) = s.option(option) else {
                continue;
            };
            if slipstream_config::uci::parse_bool(&value) != Some(true) {
                continue;
            }
            let line = s
                .entries
                .iter()
                .rev()
                .find(|e| e.name == option)
                .map_or(s.line, |e| e.line);
            out.push(OffloadFinding {
                source: OffloadSource::FirewallUci,
                hardware,
                what: format!(
                    "option {option} '{value}' in config defaults {} (line {line})",
                    s.label()
                ),
                fix: OFFLOAD_FIX.to_owned(),
            });
        }
    }
    out
}

/// Scans `nft list ruleset` output for `flow add @x` / `flow offload @x` statements, with the
/// table and chain they are in; `flags offload` on the named flowtable means hardware offload.
fn nft_findings(text: &str) -> Vec<OffloadFinding> {
    let mut table: Option<String> = None;
    let mut chain: Option<String> = None;
    // (table, flowtable name) with `flags offload`
    let mut hw_flowtables: Vec<(String, String)> = Vec::new();
    let mut flowtable: Option<String> = None;
    let mut statements: Vec<(String, String, String, String)> = Vec::new(); // table, chain, flowtable, line
    for raw in text.lines() {
        let line = raw.trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["table", family, name, "{"] => {
                table = Some(format!("{family} {name}"));
                chain = None;
                flowtable = None;
            }
            ["chain", name, "{"] => {
                chain = Some((*name).to_owned());
                flowtable = None;
            }
            ["flowtable", name, "{"] => {
                flowtable = Some((*name).to_owned());
                chain = None;
            }
            _ => {}
        }
        if let (Some(t), Some(ft)) = (&table, &flowtable) {
            if words.first() == Some(&"flags")
                && words.iter().any(|w| w.trim_end_matches([',', ';']) == "offload")
            {
                hw_flowtables.push((t.clone(), ft.clone()));
            }
        }
        for kw in ["flow add @", "flow offload @"] {
            if let Some(i) = line.find(kw) {
                let name: String = line[i + kw.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                    .collect();
                statements.push((
                    table.clone().unwrap_or_else(|| "?".into()),
                    chain.clone().unwrap_or_else(|| "?".into()),
                    name,
                    line.to_owned(),
                ));
            }
        }
    }
    statements
        .into_iter()
        .map(|(t, c, ft, line)| {
            let hardware = hw_flowtables.iter().any(|(ht, hf)| *ht == t && *hf == ft);
            let fix = if t == "inet fw4" {
                OFFLOAD_FIX.to_owned()
            } else {
                format!(
                    "this table is not fw4's: remove the `flow add @{ft}` rule from chain {c} of table {t} \
                     (or whatever creates it)"
                )
            };
            OffloadFinding {
                source: OffloadSource::NftRuleset,
                hardware,
                what: format!("table {t}, chain {c}: {line}"),
                fix,
            }
        })
        .collect()
}

/// fw3: `-A FORWARD ... -j FLOWOFFLOAD [--hw]` in the filter table.
fn iptables_findings(text: &str) -> Vec<OffloadFinding> {
    text.lines()
        .map(str::trim)
        .filter(|l| {
            l.starts_with("-A ")
                && l.split_whitespace()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| w == ["-j", "FLOWOFFLOAD"])
        })
        .map(|l| OffloadFinding {
            source: OffloadSource::Iptables,
            hardware: l.split_whitespace().any(|w| w == "--hw"),
            what: l.to_owned(),
            fix: OFFLOAD_FIX.to_owned(),
        })
        .collect()
}

/// The findings that stop the daemon from starting: with the NFQUEUE datapath every one; with
/// the eBPF datapath (`ebpf`) only hardware offload, since software-offloaded packets still
/// pass the tc hooks on the LAN devices.
pub fn blocking_findings(findings: &[OffloadFinding], ebpf: bool) -> Vec<&OffloadFinding> {
    findings.iter().filter(|f| !ebpf || f.hardware).collect()
}

/// Reads `/etc/config/firewall` (if present) and runs `nft list ruleset` and `iptables-legacy-save`
/// (if installed) through `runner`, and returns what [`offload_findings`] makes of them. Missing
/// files and programs, and failing commands, are skipped (logged at debug level).
pub fn detect_flow_offload(runner: &CommandRunner) -> Vec<OffloadFinding> {
    detect_flow_offload_at(runner, Path::new(FIREWALL_UCI_PATH))
}

/// [`detect_flow_offload`] with another path for the firewall UCI file (tests).
pub fn detect_flow_offload_at(runner: &CommandRunner, firewall_uci: &Path) -> Vec<OffloadFinding> {
    let uci = std::fs::read_to_string(firewall_uci)
        .map_err(|e| tracing::debug!(path = %firewall_uci.display(), error = %e, "no firewall UCI file"))
        .ok();
    let run = |program: &str, args: &[&str]| {
        runner
            .run(&PlannedCommand::new(program, args))
            .map_err(|e| tracing::debug!(error = %e, "offload check: command skipped"))
            .ok()
    };
    let nft = run("nft", &["list", "ruleset"]);
    let ipt = run("iptables-legacy-save", &["-t", "filter"]);
    offload_findings(uci.as_deref(), nft.as_deref(), ipt.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ebpf_datapath_is_stopped_only_by_hardware_offload() {
        let finding = |hardware| OffloadFinding {
            source: OffloadSource::FirewallUci,
            hardware,
            what: String::new(),
            fix: String::new(),
        };
        let both = [finding(false), finding(true)];
        assert_eq!(blocking_findings(&both, false).len(), 2);
        assert_eq!(blocking_findings(&both, true), [&both[1]]);
        assert!(blocking_findings(&both[..1], true).is_empty());
    }

    /// /etc/config/firewall as OpenWrt ships it, with software offloading switched on in LuCI.
    const FIREWALL_UCI: &str = "
config defaults
\toption syn_flood\t1
\toption input\t\tREJECT
\toption output\t\tACCEPT
\toption forward\t\tREJECT
\toption flow_offloading\t'1'
\toption flow_offloading_hw\t'0'

config zone
\toption name\t\tlan
\tlist   network\t\t'lan'
";

    /// `nft list ruleset` of fw4 with software and hardware offloading (abridged).
    const FW4_RULESET: &str = "table inet fw4 {
\tflowtable ft {
\t\thook ingress priority filter
\t\tdevices = { \"br-lan\", \"eth1\" }
\t\tflags offload
\t\tcounter
\t}

\tchain input {
\t\ttype filter hook input priority filter; policy drop;
\t\tiifname \"lo\" accept comment \"!fw4: Accept traffic from loopback\"
\t}

\tchain forward {
\t\ttype filter hook forward priority filter; policy drop;
\t\tmeta l4proto { tcp, udp } flow add @ft
\t\tct state established,related accept comment \"!fw4: Allow forwarded established and related flows\"
\t}
}
table inet slipstream {
\tchain forward {
\t\ttype filter hook forward priority mangle; policy accept;
\t}
}
";

    #[test]
    fn uci_switches() {
        let f = offload_findings(Some(FIREWALL_UCI), None, None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].source, OffloadSource::FirewallUci);
        assert!(!f[0].hardware);
        assert_eq!(
            f[0].what,
            "option flow_offloading '1' in config defaults @defaults[0] (line 7)"
        );
        let msg = f[0].to_string();
        assert!(
            msg.starts_with("software flow offloading is on (/etc/config/firewall: option flow_offloading"),
            "{msg}"
        );
        for step in [
            "uci set firewall.@defaults[0].flow_offloading='0'",
            "uci set firewall.@defaults[0].flow_offloading_hw='0'",
            "uci commit firewall",
            "service firewall restart",
        ] {
            assert!(msg.contains(step), "{msg}");
        }
        let hw = FIREWALL_UCI.replace("flow_offloading_hw\t'0'", "flow_offloading_hw\t'yes'");
        let f = offload_findings(Some(&hw), None, None);
        assert_eq!(f.len(), 2);
        assert!(f[1].hardware && f[1].what.contains("flow_offloading_hw 'yes'"));
        let off = FIREWALL_UCI.replace("flow_offloading\t'1'", "flow_offloading\t'0'");
        assert!(offload_findings(Some(&off), None, None).is_empty());
        assert!(offload_findings(Some("config defaults\n option x 'broken\n"), None, None).is_empty());
    }

    #[test]
    fn fw4_ruleset() {
        let f = offload_findings(None, Some(FW4_RULESET), None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].source, OffloadSource::NftRuleset);
        assert!(f[0].hardware, "flags offload");
        assert_eq!(
            f[0].what,
            "table inet fw4, chain forward: meta l4proto { tcp, udp } flow add @ft"
        );
        assert_eq!(f[0].fix, OFFLOAD_FIX);
        // software only; and the template's spelling `flow offload @ft`
        let sw = FW4_RULESET
            .replace("\t\tflags offload\n", "")
            .replace("flow add @ft", "flow offload @ft");
        let f = offload_findings(None, Some(&sw), None);
        assert_eq!(f.len(), 1);
        assert!(!f[0].hardware);
        // a flowtable without a `flow add` rule offloads nothing
        let unused = FW4_RULESET.replace("\t\tmeta l4proto { tcp, udp } flow add @ft\n", "");
        assert!(offload_findings(None, Some(&unused), None).is_empty());
        // someone else's table
        let other = FW4_RULESET.replace("table inet fw4", "table ip custom");
        let f = offload_findings(None, Some(&other), None);
        assert!(
            f[0].fix.contains("not fw4's") && f[0].fix.contains("table ip custom"),
            "{}",
            f[0]
        );
    }

    #[test]
    fn fw3_iptables() {
        let save = "*filter
:FORWARD DROP [0:0]
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment \"!fw3: Traffic offloading\" -j FLOWOFFLOAD --hw
-A FORWARD -j forwarding_rule
COMMIT
";
        let f = offload_findings(None, None, Some(save));
        assert_eq!(f.len(), 1);
        assert!(f[0].hardware);
        assert_eq!(f[0].source, OffloadSource::Iptables);
        assert!(offload_findings(None, None, Some("*filter\n-A FORWARD -j ACCEPT\nCOMMIT\n")).is_empty());
        assert!(offload_findings(None, None, None).is_empty());
    }
}
