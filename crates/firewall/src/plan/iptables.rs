//! The iptables plan of one address family: the chains' rules and the hook jumps.

use super::*;

/// The rules and jumps of `config` for one address family (`iptables` or `ip6tables`).
pub(super) fn iptables_plan(config: &Config, family: IpFamily) -> IptablesPlan {
    let d = &config.datapath;
    let mask = d.mark_mask;
    let unclassed = format!("-m connmark --mark {}", mark(0, mask));
    let classed = format!("-m connmark ! --mark {}", mark(0, mask));
    let ack_max_len = match family {
        IpFamily::V4 => u32::from(d.ack_max_len),
        IpFamily::V6 => d.ack_max_len_v6(),
    };

    // With the eBPF datapath only handshakes have anything to do in the chain, so every other
    // packet stops at the jump (one match instead of the chain's three rules: the lab's datapath
    // scenario profiled ipt_do_table at about the tc program's own cost per packet).
    let tcp = if d.engine == DatapathEngine::Ebpf {
        "-p tcp -m tcp --tcp-flags SYN SYN"
    } else {
        "-p tcp"
    };
    let udp = udp_in_use(config);
    // UDP has no handshake and the tc programs leave it alone: with a UDP rule every UDP packet
    // enters the chain, whose first rule sends the household's ordinary UDP back at once.
    let protos: Vec<&str> = if udp { vec![tcp, "-p udp"] } else { vec![tcp] };
    let mut hook_rules = Vec::new();
    for proto in &protos {
        if d.hook.forward() {
            hook_rules.push(format!("-I FORWARD 1 {proto} -j {MAIN_CHAIN}"));
        }
        if d.hook.local() {
            // Loopback traffic is left alone: no access link to protect, and the daemon's own
            // connections (metrics) must never wait for the daemon.
            hook_rules.push(format!("-I OUTPUT 1 ! -o lo {proto} -j {MAIN_CHAIN}"));
            hook_rules.push(format!("-I INPUT 1 ! -i lo {proto} -j {MAIN_CHAIN}"));
        }
    }

    let mut main_rules = Vec::new();
    if udp {
        // The hot path of ordinary UDP (DNS, calls, games, best-effort QUIC): a packet of an
        // unclassed flow that is not its conntrack entry's first leaves here, never queued.
        // Then the first packet of a new flow, from either end, is classed (UDP has no SYN).
        main_rules.push(format!(
            "-A {MAIN_CHAIN} -p udp {unclassed} -m conntrack ! --ctstate NEW -j RETURN"
        ));
        main_rules.push(format!("-A {MAIN_CHAIN} -p udp {unclassed} -j {CLASSIFY_CHAIN}"));
    }
    main_rules.push(format!(
        "-A {MAIN_CHAIN} -p tcp -m tcp --tcp-flags SYN SYN {unclassed} -j {CLASSIFY_CHAIN}"
    ));
    if household_in_use(config) {
        // Still unclassed after the classify chain: the opening SYN of an ordinary flow, queued
        // (rate-limited) so that household control yields before its slow start arrives.
        main_rules.push(format!(
            "-A {MAIN_CHAIN} -p tcp -m tcp --tcp-flags SYN,ACK SYN {unclassed} -m limit --limit {COMPETITOR_SYNS_PER_SECOND}/sec -j NFQUEUE --queue-num {} --queue-bypass",
            d.ack_queue
        ));
    }
    let directions = iptables_directions(d);
    // UDP/443 of a rule refusing QUIC: not for the daemon, table filter rejects it.
    main_rules.extend(refuse::iptables_mangle_returns(config, &directions));
    main_rules.push(format!(
        "-A {MAIN_CHAIN} {classed} -j CONNMARK --restore-mark --nfmask {mask:#x} --ctmask {mask:#x}"
    ));
    if d.engine == DatapathEngine::Ebpf {
        // The tc programs see every other packet; only handshakes reach the daemon here.
        main_rules.push(format!(
            "-A {MAIN_CHAIN} -p tcp -m tcp --tcp-flags SYN SYN {classed} -j NFQUEUE --queue-num {} --queue-bypass",
            d.ack_queue
        ));
        if udp {
            // ... but not UDP: every packet of a classed UDP flow goes to the daemon, split by
            // length like TCP's with the NFQUEUE datapath.
            main_rules.push(format!(
                "-A {MAIN_CHAIN} -p udp {classed} -m length --length 0:{ack_max_len} -j NFQUEUE --queue-num {} --queue-bypass",
                d.ack_queue
            ));
            main_rules.push(format!(
                "-A {MAIN_CHAIN} -p udp {classed} -j NFQUEUE --queue-num {} --queue-bypass",
                d.data_queue
            ));
        }
    } else {
        main_rules.push(format!(
            "-A {MAIN_CHAIN} {classed} -m length --length 0:{ack_max_len} -j NFQUEUE --queue-num {} --queue-bypass",
            d.ack_queue
        ));
        main_rules.push(format!(
            "-A {MAIN_CHAIN} {classed} -j NFQUEUE --queue-num {} --queue-bypass",
            d.data_queue
        ));
    }

    let mut classify_rules = Vec::new();
    for (i, rule) in config.rules.iter().enumerate() {
        let value = d.mark_for_rule((i + 1) as u16);
        let block: Vec<String> = protocol_names(rule.protocol)
            .into_iter()
            .flat_map(|proto| classify_block(rule, proto, value, mask, family, &directions))
            .collect();
        if !block.is_empty() {
            classify_rules.extend(block);
            classify_rules.push(format!("-A {CLASSIFY_CHAIN} {classed} -j RETURN"));
        }
    }
    let (refuse_hooks, refuse_rules) = refuse::iptables_rules(config, family, &directions);
    IptablesPlan {
        family,
        hook_rules,
        main_rules,
        classify_rules,
        refuse_hooks,
        refuse_rules,
    }
}

/// One alternative of a rule's LAN host criterion: an address block or the rule's host set.
#[derive(Debug, Clone, PartialEq)]
enum HostSel {
    Net(IpNet),
    Set(String),
}

/// The rules of one config rule: the cross product direction x host (CIDR or host set) x MAC x
/// DSCP x local-port chunk x remote-port chunk for one protocol (`tcp`, `udp`), each setting the
/// connmark to the rule's value;
/// a rule with domains also needs the remote address in its set. A rule with MACs has lines
/// only in the from-LAN directions.
fn classify_block(
    rule: &Rule,
    proto: &str,
    value: u32,
    mask: u32,
    family: IpFamily,
    dirs: &[Direction],
) -> Vec<String> {
    let nets = dedup(&rule.lan_hosts);
    let mut family_hosts: Vec<HostSel> = nets
        .iter()
        .filter(|n| family.contains(n))
        .map(|n| HostSel::Net(*n))
        .collect();
    family_hosts.extend(sets::host_set(rule, family).map(HostSel::Set));
    if (!nets.is_empty() || !rule.lan_hostnames.is_empty()) && family_hosts.is_empty() {
        // Every CIDR is of the other family: the rule cannot match here.
        return Vec::new();
    }
    let hosts = any_or_each(family_hosts);
    let remote_set = sets::dst_set(rule, family);
    let has_macs = !rule.lan_macs.is_empty();
    let macs = any_or_each(dedup(&rule.lan_macs));
    let dscps = any_or_each(dedup(&rule.dscp));
    let local_chunks = any_or_each(multiport_chunks(&rule.local_ports));
    let remote_chunks = any_or_each(multiport_chunks(&rule.remote_ports));

    let mut out = Vec::new();
    for dir in dirs.iter().filter(|d| !has_macs || d.enters_from_lan()) {
        let (local_side, remote_side) = if dir.local_is_src {
            ("src", "dst")
        } else {
            ("dst", "src")
        };
        for host in &hosts {
            for mac in &macs {
                for dscp in &dscps {
                    for local in &local_chunks {
                        for remote in &remote_chunks {
                            let (src_ports, dst_ports) = if dir.local_is_src {
                                (local, remote)
                            } else {
                                (remote, local)
                            };
                            let mut r = format!("-A {CLASSIFY_CHAIN}");
                            if let Some(HostSel::Net(net)) = host {
                                r += &format!(" {} {net}", if dir.local_is_src { "-s" } else { "-d" });
                            }
                            if let Some((flag, name)) = &dir.iface {
                                r += &format!(" {flag} {name}");
                            }
                            r += &format!(" -p {proto}");
                            if let Some(a) = dir.addrtype {
                                r += &format!(" -m addrtype {a}");
                            }
                            if let Some(m) = mac {
                                r += &format!(" -m mac --mac-source {}", mac_text(m));
                            }
                            if let Some(p) = src_ports {
                                r += &format!(" -m multiport --sports {p}");
                            }
                            if let Some(p) = dst_ports {
                                r += &format!(" -m multiport --dports {p}");
                            }
                            if let Some(HostSel::Set(set)) = host {
                                r += &format!(" -m set --match-set {set} {local_side}");
                            }
                            if let Some(set) = &remote_set {
                                r += &format!(" -m set --match-set {set} {remote_side}");
                            }
                            if let Some(v) = dscp {
                                r += &format!(" -m dscp --dscp {v:#04x}");
                            }
                            r += &format!(" -j CONNMARK --set-xmark {}", mark(value, mask));
                            out.push(r);
                        }
                    }
                }
            }
        }
    }
    out
}

/// A MAC address as iptables-save prints it (lower case, colons: `MacAddr`'s Display).
fn mac_text(m: &MacAddr) -> String {
    m.to_string()
}
