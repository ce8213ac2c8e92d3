//! The nftables backend's ruleset: one `table inet slipstream`, replaced atomically with `nft -f -`
//! and removed by deleting the table.
//!
//! Unlike iptables, nftables lets each hook have its own classify chain, so the direction of a
//! packet (LAN host sending or receiving) follows from the hook and interface alone; no `addrtype`
//! matches are needed. Sets (`tcp dport { 6881-6999, 51413 }`) replace multiport chunking.
//!
//! As with iptables (see [`crate::plan`]), only packets with SYN set (`tcp flags & syn == syn`: the
//! SYN and the SYN-ACK) of unclassed flows jump to a classify chain, and MAC criteria
//! (`ether saddr`) are matched only on packets entering from the LAN (`iifname <lan>`).
//! With a UDP rule, a UDP flow's first packet (`ct state new`) jumps to the classify chain too
//! (whose lines then say their protocol), classed UDP packets jump to `enqueue`, and the
//! `reject` lines of `quic = "refuse"` sit between the two (see `refuse.rs`).
//!
//! Restoring the rule number into the packet mark is done with one rule per config rule
//! (`ct mark and M == V meta mark set meta mark and ~M or V`), because combining two non-constant
//! operands (`meta mark and ~M or ct mark and M`) needs a very recent kernel; the per-rule form
//! keeps the other mark bits intact like iptables' `--restore-mark --nfmask --ctmask`.
//!
//! Testing caveat: this kernel's nftables has no `queue` expression, so the generated text is only
//! checked with `nft -c` with the queue statements swapped for `accept` (see the integration
//! test); the rest of the ruleset is kernel-checked, the queue statements only by eye.

use crate::plan::NFT_TABLE;
use crate::refuse;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use slipstream_config::{Config, DatapathEngine, PortRange, Rule};
use slipstream_names::sets::{set_name, Family, SetKind};
use std::fmt::Write;

/// Text that deletes the table if present (declaring it first makes the delete never fail).
pub fn delete_transaction() -> String {
    format!("table inet {NFT_TABLE}\ndelete table inet {NFT_TABLE}\n")
}

/// Text that atomically replaces any existing table with `ruleset`.
pub(crate) fn replace_transaction(ruleset: &str) -> String {
    format!("{}{ruleset}", delete_transaction())
}

/// Text probing whether `nft` and the kernel support the queue statement (`nft -c -f -`).
pub const QUEUE_PROBE: &str =
    "table inet slipstream_probe {\n\tchain probe {\n\t\tqueue num 0 bypass\n\t}\n}\n";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fam {
    V4,
    V6,
}

/// One alternative of a rule's LAN host criterion.
enum HostSel {
    Nets(Vec<IpNet>),
    Set(String),
}

impl Fam {
    fn names(self) -> Family {
        match self {
            Fam::V4 => Family::V4,
            Fam::V6 => Family::V6,
        }
    }

    fn kw(self) -> &'static str {
        match self {
            Fam::V4 => "ip",
            Fam::V6 => "ip6",
        }
    }
}

struct NftDirection {
    /// `iifname "br-lan"` / `oifname { ... }`.
    iface: Option<String>,
    local_is_src: bool,
    /// Packets entering from a LAN interface: the only ones whose source MAC is the LAN host's.
    from_lan: bool,
}

fn set<T: ToString>(items: &[T]) -> String {
    if items.len() == 1 {
        items[0].to_string()
    } else {
        format!(
            "{{ {} }}",
            items.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
        )
    }
}

/// A port set; overlapping or adjacent ranges are merged (nft rejects overlapping set elements).
fn ports(p: &[PortRange]) -> String {
    let mut sorted = p.to_vec();
    sorted.sort();
    let mut merged: Vec<PortRange> = Vec::new();
    for r in sorted {
        match merged.last_mut() {
            Some(last) if u32::from(r.first) <= u32::from(last.last) + 1 => last.last = last.last.max(r.last),
            _ => merged.push(r),
        }
    }
    set(&merged.iter().map(|r| r.to_string()).collect::<Vec<_>>())
}

/// CIDRs of one family, overlaps merged (nft rejects overlapping set elements).
fn aggregate(f: Fam, nets: &[IpNet]) -> Vec<IpNet> {
    match f {
        Fam::V4 => {
            let v: Vec<_> = nets
                .iter()
                .filter_map(|n| if let IpNet::V4(n) = n { Some(*n) } else { None })
                .collect();
            Ipv4Net::aggregate(&v).into_iter().map(IpNet::V4).collect()
        }
        Fam::V6 => {
            let v: Vec<_> = nets
                .iter()
                .filter_map(|n| if let IpNet::V6(n) = n { Some(*n) } else { None })
                .collect();
            Ipv6Net::aggregate(&v).into_iter().map(IpNet::V6).collect()
        }
    }
}

fn ifname(name: &str) -> String {
    // iptables' "eth+" wildcard is nftables' "eth*".
    match name.strip_suffix('+') {
        Some(base) => format!("\"{base}*\""),
        None => format!("\"{name}\""),
    }
}

/// The full `table inet slipstream { ... }` text for `config`; `set_declarations` declares the
/// rules' address sets (see `sets.rs`) at the top of the table.
pub(crate) fn ruleset(config: &Config, set_declarations: &str) -> String {
    let d = &config.datapath;
    let mask = d.mark_mask;
    let keep = !mask;
    let v4only = if d.ipv6 { "" } else { "meta nfproto ipv4 " };
    let mut s = String::new();
    let _ = writeln!(s, "table inet {NFT_TABLE} {{");
    s.push_str(set_declarations);

    let udp = crate::plan::udp_in_use(config);
    let lan = set(&d.lan_interfaces.iter().map(|n| ifname(n)).collect::<Vec<_>>());
    let mut hooks: Vec<(&str, &str, Vec<NftDirection>)> = Vec::new();
    if d.hook.forward() {
        hooks.push((
            "forward",
            "",
            vec![
                NftDirection {
                    iface: Some(format!("iifname {lan}")),
                    local_is_src: true,
                    from_lan: true,
                },
                NftDirection {
                    iface: Some(format!("oifname {lan}")),
                    local_is_src: false,
                    from_lan: false,
                },
            ],
        ));
    }
    if d.hook.local() {
        hooks.push((
            "output",
            "oifname != \"lo\" ",
            vec![NftDirection {
                iface: None,
                local_is_src: true,
                from_lan: false,
            }],
        ));
        hooks.push((
            "input",
            "iifname != \"lo\" ",
            vec![NftDirection {
                iface: None,
                local_is_src: false,
                from_lan: false,
            }],
        ));
    }

    for (hook, skip_lo, dirs) in &hooks {
        let _ = writeln!(s, "\tchain {hook} {{");
        let _ = writeln!(s, "\t\ttype filter hook {hook} priority mangle; policy accept;");
        let _ = writeln!(
            s,
            "\t\t{skip_lo}{v4only}meta l4proto tcp tcp flags & syn == syn ct mark and {mask:#x} == 0x0 jump classify_{hook}"
        );
        if udp {
            // UDP has no SYN: the first packet of the conntrack entry, from either end. Other
            // packets of the household's ordinary UDP fail `ct state new` here and the
            // `ct mark` test of the enqueue jump, and are never queued.
            let _ = writeln!(
                s,
                "\t\t{skip_lo}{v4only}meta l4proto udp ct state new ct mark and {mask:#x} == 0x0 jump classify_{hook}"
            );
        }
        if crate::plan::household_in_use(config) {
            // As with iptables (see `plan::household_in_use`): a best-effort flow's opening SYN.
            let _ = writeln!(
                s,
                "\t\t{skip_lo}{v4only}meta l4proto tcp tcp flags & (syn | ack) == syn ct mark and {mask:#x} == 0x0 limit rate {}/second queue num {} bypass",
                crate::plan::COMPETITOR_SYNS_PER_SECOND,
                d.ack_queue
            );
        }
        // quic = "refuse": after classification, before queueing (see `refuse.rs`).
        let sends: Vec<String> = dirs
            .iter()
            .filter(|dir| dir.local_is_src)
            .map(|dir| match &dir.iface {
                Some(i) => format!("{v4only}{i} "),
                None => format!("{skip_lo}{v4only}"),
            })
            .collect();
        for line in refuse::nft_lines(config, &sends) {
            let _ = writeln!(s, "\t\t{line}");
        }
        // eBPF datapath: only handshakes are queued, the rest need not enter `enqueue`.
        let syn = if d.engine == DatapathEngine::Ebpf {
            "tcp flags & syn == syn "
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "\t\t{skip_lo}{v4only}meta l4proto tcp {syn}ct mark and {mask:#x} != 0x0 jump enqueue"
        );
        if udp {
            let _ = writeln!(
                s,
                "\t\t{skip_lo}{v4only}meta l4proto udp ct mark and {mask:#x} != 0x0 jump enqueue"
            );
        }
        let _ = writeln!(s, "\t}}\n");
        let _ = writeln!(s, "\tchain classify_{hook} {{");
        for (i, rule) in config.rules.iter().enumerate() {
            let value = d.mark_for_rule((i + 1) as u16);
            let lines: Vec<String> = crate::plan::protocol_names(rule.protocol)
                .into_iter()
                .flat_map(|proto| rule_lines(rule, proto, dirs, d.ipv6, udp))
                .collect();
            if lines.is_empty() {
                continue;
            }
            let _ = writeln!(s, "\t\t# rule {} {:?}", i + 1, rule.name);
            for l in lines {
                let _ = writeln!(s, "\t\t{l}ct mark set ct mark and {keep:#x} or {value:#x}");
            }
            let _ = writeln!(s, "\t\tct mark and {mask:#x} != 0x0 return");
        }
        let _ = writeln!(s, "\t}}\n");
    }

    let _ = writeln!(s, "\tchain enqueue {{");
    for i in 0..config.rules.len() {
        let value = d.mark_for_rule((i + 1) as u16);
        let _ = writeln!(
            s,
            "\t\tct mark and {mask:#x} == {value:#x} meta mark set meta mark and {keep:#x} or {value:#x}"
        );
    }
    // The length split between the two queues, for every packet (NFQUEUE datapath) or UDP only.
    let split = |s: &mut String, only: &str| {
        let _ = writeln!(
            s,
            "\t\t{only}meta nfproto ipv4 meta length <= {} queue num {} bypass",
            d.ack_max_len, d.ack_queue
        );
        if d.ipv6 {
            let _ = writeln!(
                s,
                "\t\t{only}meta nfproto ipv6 meta length <= {} queue num {} bypass",
                d.ack_max_len_v6(),
                d.ack_queue
            );
        }
        let _ = writeln!(s, "\t\t{only}queue num {} bypass", d.data_queue);
    };
    if d.engine == DatapathEngine::Ebpf {
        // The tc programs see every other TCP packet; only handshakes reach the daemon here.
        let _ = writeln!(s, "\t\ttcp flags & syn == syn queue num {} bypass", d.ack_queue);
        if udp {
            // The tc programs leave UDP alone: all of a classed UDP flow comes here.
            split(&mut s, "meta l4proto udp ");
        }
    } else {
        split(&mut s, "");
    }
    let _ = writeln!(s, "\t}}");
    s.push_str("}\n");
    s
}

/// The match part (ending in a space) of each nft rule for one config rule in one hook, for one
/// protocol (`tcp`, `udp`); `say_proto`: name it (UDP enters the classify chains too).
fn rule_lines(rule: &Rule, proto: &str, dirs: &[NftDirection], ipv6: bool, say_proto: bool) -> Vec<String> {
    let fams: Vec<Fam> = if ipv6 {
        vec![Fam::V4, Fam::V6]
    } else {
        vec![Fam::V4]
    };
    // (family, LAN host alternative): family-specific only when a CIDR, a set or DSCP needs it.
    let mut variants: Vec<(Option<Fam>, Option<HostSel>)> = Vec::new();
    let by_host = !rule.lan_hosts.is_empty() || !rule.lan_hostnames.is_empty();
    if by_host || !rule.dscp.is_empty() || !rule.domains.is_empty() {
        for &f in &fams {
            if !rule.lan_hosts.is_empty() {
                let nets = aggregate(f, &rule.lan_hosts);
                if !nets.is_empty() {
                    variants.push((Some(f), Some(HostSel::Nets(nets))));
                }
            }
            if !rule.lan_hostnames.is_empty() {
                variants.push((
                    Some(f),
                    Some(HostSel::Set(set_name(&rule.name, SetKind::Host, f.names()))),
                ));
            }
            if !by_host {
                variants.push((Some(f), None));
            }
        }
    } else {
        variants.push((None, None));
    }

    let mut macs = rule.lan_macs.clone();
    macs.sort_unstable();
    macs.dedup();
    let mut out = Vec::new();
    // A MAC can only match packets entering from the LAN.
    for dir in dirs.iter().filter(|d| macs.is_empty() || d.from_lan) {
        for (fam, host) in &variants {
            let mut l = String::new();
            if let Some(i) = &dir.iface {
                l += i;
                l.push(' ');
            }
            if !macs.is_empty() {
                l += &format!("ether saddr {} ", set(&macs));
            }
            let (local_addr, remote_addr) = if dir.local_is_src {
                ("saddr", "daddr")
            } else {
                ("daddr", "saddr")
            };
            match (fam, host) {
                (Some(f), Some(HostSel::Nets(nets))) => {
                    l += &format!("{} {local_addr} {} ", f.kw(), set(nets))
                }
                (Some(f), Some(HostSel::Set(name))) => l += &format!("{} {local_addr} @{name} ", f.kw()),
                _ => {}
            }
            if let (Some(f), false) = (fam, rule.domains.is_empty()) {
                let name = set_name(&rule.name, SetKind::Dst, f.names());
                l += &format!("{} {remote_addr} @{name} ", f.kw());
            }
            let (sp, dp) = if dir.local_is_src {
                (&rule.local_ports, &rule.remote_ports)
            } else {
                (&rule.remote_ports, &rule.local_ports)
            };
            if say_proto {
                // Without UDP rules only TCP SYNs enter the classify chains.
                l += &format!("meta l4proto {proto} ");
            }
            if !sp.is_empty() {
                l += &format!("{proto} sport {} ", ports(sp));
            }
            if !dp.is_empty() {
                l += &format!("{proto} dport {} ", ports(dp));
            }
            if let (Some(f), false) = (fam, rule.dscp.is_empty()) {
                let mut v = rule.dscp.clone();
                v.sort_unstable();
                v.dedup();
                l += &format!("{} dscp {} ", f.kw(), set(&v));
            }
            out.push(l);
        }
    }
    out
}
