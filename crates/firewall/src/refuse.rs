//! `quic = "refuse"`: a rule's UDP flows to remote port 443 are rejected with ICMP port
//! unreachable, so that browsers and apps give up QUIC at once and fall back to TCP, where the
//! receive window controls them.
//!
//! The flow is classed as usual (first match wins, so an earlier rule that classes it keeps
//! it), is not queued to the daemon, and is rejected by its connmark: one rule per refusing config rule and LAN-host-sends
//! direction (`-i <lan>`, or this host's own packets in local mode), reached only by UDP to port
//! 443. A rejected first packet takes its unconfirmed conntrack entry (and mark) with it, so every
//! retry is classed and rejected anew. A LAN host's socket gets ECONNREFUSED from the ICMP error;
//! a local one (OUTPUT) sees its send fail with EPERM (measured in namespaces).
//!
//! * iptables: `REJECT` exists only in table `filter`, so the rules live in chain
//!   `SLIPSTREAM_REFUSE` there, jumped to from `filter FORWARD` (and `OUTPUT` in local mode),
//!   which run after `mangle` has classed the packet. The table is touched only by a config
//!   that refuses QUIC (or to remove what an earlier one installed).
//! * nftables: `reject` works in any chain of type `filter`, which Slipstream's hook chains are
//!   (at priority `mangle`): the lines come right after classification, before the queueing.

use crate::plan::{Direction, IpFamily, MAIN_CHAIN};
use crate::{CommandRunner, FirewallError, PlannedCommand};
use slipstream_config::{Config, QUIC_PORT};

/// The `filter` table chain holding the reject rules.
pub const REFUSE_CHAIN: &str = "SLIPSTREAM_REFUSE";

/// The rule numbers (1-based) of the rules refusing QUIC.
fn refusing_rules(config: &Config) -> impl Iterator<Item = u16> + '_ {
    config
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.refuses_quic())
        .map(|(i, _)| (i + 1) as u16)
}

/// The `-i <lan>` / `-m addrtype ...` matches of each direction where the LAN host sends: there
/// the destination port is the remote port.
fn sending(directions: &[Direction]) -> Vec<String> {
    directions
        .iter()
        .filter(|dir| dir.local_is_src)
        .map(|dir| {
            let mut m = String::new();
            if let Some((flag, name)) = &dir.iface {
                m += &format!(" {flag} {name}");
            }
            if let Some(a) = dir.addrtype {
                m += &format!(" -m addrtype {a}");
            }
            m
        })
        .collect()
}

/// Table `mangle`, chain `SLIPSTREAM`, before the queueing: the packets the filter rules will
/// reject return unqueued, so the daemon never sees a flow that cannot exist.
pub(crate) fn iptables_mangle_returns(config: &Config, directions: &[Direction]) -> Vec<String> {
    let d = &config.datapath;
    let mut out = Vec::new();
    for n in refusing_rules(config) {
        for m in sending(directions) {
            out.push(format!(
                "-A {MAIN_CHAIN}{m} -p udp -m udp --dport {QUIC_PORT} -m connmark --mark {:#x}/{:#x} -j RETURN",
                d.mark_for_rule(n),
                d.mark_mask
            ));
        }
    }
    out
}

/// Table `filter`: the hook jumps (`-I FORWARD 1 ...`) and the chain's rules; both empty unless
/// a rule refuses QUIC.
pub(crate) fn iptables_rules(
    config: &Config,
    family: IpFamily,
    directions: &[Direction],
) -> (Vec<String>, Vec<String>) {
    let d = &config.datapath;
    let mask = d.mark_mask;
    let reject = match family {
        IpFamily::V4 => "icmp-port-unreachable",
        IpFamily::V6 => "icmp6-port-unreachable",
    };
    let mut rules = Vec::new();
    for n in refusing_rules(config) {
        for m in sending(directions) {
            rules.push(format!(
                "-A {REFUSE_CHAIN}{m} -m connmark --mark {:#x}/{mask:#x} -j REJECT --reject-with {reject}",
                d.mark_for_rule(n)
            ));
        }
    }
    if rules.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let quic = format!("-p udp -m udp --dport {QUIC_PORT}");
    let mut hooks = Vec::new();
    if d.hook.forward() {
        hooks.push(format!("-I FORWARD 1 {quic} -j {REFUSE_CHAIN}"));
    }
    if d.hook.local() {
        hooks.push(format!("-I OUTPUT 1 ! -o lo {quic} -j {REFUSE_CHAIN}"));
    }
    (hooks, rules)
}

/// The `*filter` part of an `iptables-legacy-restore --noflush` input that turns what is
/// installed into `new`'s refuse rules. `installed`: the jumps to our chain as listed, `None` if
/// the chain does not exist. Empty when neither has anything (the table stays untouched).
pub(crate) fn filter_section(installed: Option<&[String]>, new: &crate::IptablesPlan) -> String {
    if new.refuse_rules.is_empty() && installed.is_none() {
        return String::new();
    }
    let new_hooks = new.refuse_hooks_as_listed();
    let old_hooks = installed.unwrap_or_default();
    let mut s = format!("*filter\n:{REFUSE_CHAIN} - [0:0]\n");
    for line in &new.refuse_rules {
        s += line;
        s.push('\n');
    }
    s += &crate::firewall::hook_changes(old_hooks, &new_hooks, &new.refuse_hooks);
    if new.refuse_rules.is_empty() {
        s += &format!("-X {REFUSE_CHAIN}\n");
    }
    s += "COMMIT\n";
    s
}

/// The jumps to [`REFUSE_CHAIN`] in table `filter` as `iptables -S` lists them, or `None` if the
/// chain does not exist, or the table does not (then nothing of ours can be in it). Listing a
/// table makes the kernel set it up, with hooks every packet then passes, so a table not set up
/// in this namespace (not in `/proc/net/ip_tables_names`) is left alone.
pub(crate) fn installed_hooks(runner: &CommandRunner, family: IpFamily) -> Option<Vec<String>> {
    let names = match family {
        IpFamily::V4 => "/proc/net/ip_tables_names",
        IpFamily::V6 => "/proc/net/ip6_tables_names",
    };
    let tables = runner
        .run(&PlannedCommand::new("cat", &[names]))
        .unwrap_or_default();
    if !tables.lines().any(|t| t.trim() == "filter") {
        return None;
    }
    let listing = match runner.run(&PlannedCommand::new(
        family.program(),
        &["-w", "-t", "filter", "-S"],
    )) {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!(error = %e, "table filter not listed: no refuse rules there");
            return None;
        }
    };
    let mut ours = false;
    let mut hooks = Vec::new();
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["-N", chain] if *chain == REFUSE_CHAIN => ours = true,
            ["-A", chain, rest @ ..]
                if *chain != REFUSE_CHAIN
                    && rest
                        .windows(2)
                        .any(|w| (w[0] == "-j" || w[0] == "-g") && w[1] == REFUSE_CHAIN) =>
            {
                hooks.push(words.join(" "));
            }
            _ => {}
        }
    }
    ours.then_some(hooks)
}

/// Removes the jumps to [`REFUSE_CHAIN`] and the chain, if there. Returns every error met.
pub(crate) fn reset(runner: &CommandRunner, family: IpFamily) -> Vec<FirewallError> {
    let Some(hooks) = installed_hooks(runner, family) else {
        return Vec::new();
    };
    let p = family.program();
    let mut errors = Vec::new();
    for listed in hooks {
        let mut args = vec!["-w", "-t", "filter", "-D"];
        args.extend(listed.split_whitespace().skip(1));
        if let Err(e) = runner.run(&PlannedCommand::new(p, &args)) {
            errors.push(e);
        }
    }
    for op in ["-F", "-X"] {
        if let Err(e) = runner.run(&PlannedCommand::new(p, &["-w", "-t", "filter", op, REFUSE_CHAIN])) {
            errors.push(e);
        }
    }
    errors
}

/// The nft reject lines of one hook's chain (one per refusing rule and LAN-host-sends
/// direction), to follow the jump to its classify chain; `sends` are the match prefixes of the
/// directions where the LAN host sends (`iifname "br-lan" `, or `""` for this host's output).
pub(crate) fn nft_lines(config: &Config, sends: &[String]) -> Vec<String> {
    let d = &config.datapath;
    let mask = d.mark_mask;
    let mut out = Vec::new();
    for n in refusing_rules(config) {
        for prefix in sends {
            out.push(format!(
                "{prefix}meta l4proto udp udp dport {QUIC_PORT} ct mark and {mask:#x} == {:#x} reject",
                d.mark_for_rule(n)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{plan, Backend};

    fn v4(toml: &str) -> crate::IptablesPlan {
        let config = slipstream_config::parse(&format!("[datapath]\nipv6 = false\n{toml}"), "t").unwrap();
        plan(&config, Backend::IptablesLegacy).iptables.remove(0)
    }

    const REFUSING: &str =
        "[[rules]]\nname = \"r\"\nremote_ports = [443]\nprotocol = \"udp\"\nquic = \"refuse\"\n";
    const NOT_REFUSING: &str = "[[rules]]\nname = \"r\"\nremote_ports = [443]\nprotocol = \"udp\"\n";

    /// A config that never refused leaves table filter alone; taking over or replacing keeps a
    /// jump both have, and a config that stops refusing deletes the jump and the chain.
    #[test]
    fn filter_transitions() {
        let (on, off) = (v4(REFUSING), v4(NOT_REFUSING));
        assert_eq!(filter_section(None, &off), "");
        let jump = "-A FORWARD -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE".to_owned();
        let reject = "-A SLIPSTREAM_REFUSE -i br-lan -m connmark --mark 0x10000/0xff0000 -j REJECT --reject-with icmp-port-unreachable";
        assert_eq!(
            filter_section(None, &on),
            format!(
                "*filter\n:SLIPSTREAM_REFUSE - [0:0]\n{reject}\n-I FORWARD 1 -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE\nCOMMIT\n"
            )
        );
        assert_eq!(
            filter_section(Some(&[jump.clone(), jump.clone()]), &on),
            format!(
                "*filter\n:SLIPSTREAM_REFUSE - [0:0]\n{reject}\n-D FORWARD -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE\nCOMMIT\n"
            ),
            "the jump stays once, its duplicate goes"
        );
        assert_eq!(
            filter_section(Some(&[jump]), &off),
            "*filter\n:SLIPSTREAM_REFUSE - [0:0]\n-D FORWARD -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE\n-X SLIPSTREAM_REFUSE\nCOMMIT\n"
        );
    }
}
