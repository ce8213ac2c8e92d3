//! Pure rule generation: from a [`Config`] to the exact iptables-restore lines or nftables ruleset
//! text that [`crate::Firewall`] applies, and the commands that remove them.
//!
//! Nothing here runs a command, so the whole ruleset is unit-tested as text. The iptables lines are
//! written in the canonical form `iptables-legacy-save` prints them (match order, hex marks and
//! DSCP), so what is installed reads back identically.
//!
//! # Classification on the opening packets only
//!
//! Only packets with the SYN flag set (`-m tcp --tcp-flags SYN SYN`, nft `tcp flags & syn == syn`)
//! of flows without a class walk `SLIPSTREAM_CLASSIFY`: the SYN and the SYN-ACK. A flow is thus
//! classed by its opening packet in either direction (a LAN host that marks its packets LE or CS1,
//! a server that answers with LE, a SYN from a LAN host's MAC address, a port), and the class stays
//! in the conntrack mark for the whole flow. Every other packet of an unclassed flow (that is, all
//! of the household's ordinary traffic) costs one connmark test and never enters the classify
//! chain. Nothing is lost: a flow whose handshake the daemon did not see cannot be clamped anyway,
//! since its window scale is unknown.
//!
//! # UDP flows
//!
//! With a rule that covers UDP, UDP packets jump to `SLIPSTREAM` too. Its first rule returns every
//! packet of an unclassed UDP flow that is not its conntrack entry's first (`! --ctstate NEW`):
//! the household's ordinary UDP costs that one rule (two match tests) and is never queued. The
//! first packet of a new UDP flow, sent by either end, walks the classify chain, whose UDP lines
//! are the same cross product with `-p udp`; the packets of a classed UDP flow are queued by the
//! same rules as TCP's (with the eBPF datapath by UDP rules of their own, as the tc programs
//! handle TCP only). A UDP rule with MACs classes only the flows the LAN host opens.
//!
//! # MAC addresses
//!
//! `lan_macs` become `-m mac --mac-source` / nft `ether saddr`, which only mean something on
//! packets that *enter* from the LAN with the LAN host's Ethernet header: so they are only matched
//! in the from-LAN direction (`-i <lan>`); a MAC rule has no to-LAN lines. That is enough, because
//! classification happens on the SYN or the SYN-ACK, and the LAN host sends one of the two (the SYN
//! of a flow it opens, the SYN-ACK of one opened towards it). In the cross product of a rule's
//! criteria MACs are treated like host addresses. Config validation allows MACs only with
//! `hook = "forward"` (iptables rejects a MAC match in a chain reachable from OUTPUT).

use crate::nft;
use crate::refuse::{self, REFUSE_CHAIN};
use crate::sets::{self, HostAddrs, KeptEntries, KernelSet};
use crate::Backend;
use ipnet::IpNet;
use slipstream_config::{Config, Datapath, DatapathEngine, Hook, MacAddr, PortRange, Protocol, Rule};
use std::fmt;

/// The chain every hooked packet jumps to: classifies unclassed flows, restores the rule number
/// into the packet mark and queues packets of background flows.
pub const MAIN_CHAIN: &str = "SLIPSTREAM";
/// The chain with one block of rules per config rule; sets the connmark of a matching flow.
pub const CLASSIFY_CHAIN: &str = "SLIPSTREAM_CLASSIFY";
/// The nftables table holding everything of Slipstream's.
pub const NFT_TABLE: &str = "slipstream";
/// The built-in chains Slipstream may hook into (all in table `mangle`).
pub const HOOK_CHAINS: [&str; 3] = ["FORWARD", "OUTPUT", "INPUT"];
/// Most port slots in one `-m multiport` match (the kernel's XT_MULTI_PORTS); a range takes two.
pub const MULTIPORT_MAX_SLOTS: usize = 15;

/// IP family of an iptables ruleset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    /// IPv4: `iptables-legacy`.
    V4,
    /// IPv6: `ip6tables-legacy`.
    V6,
}

impl IpFamily {
    /// `iptables-legacy` / `ip6tables-legacy`.
    pub fn program(self) -> &'static str {
        match self {
            IpFamily::V4 => "iptables-legacy",
            IpFamily::V6 => "ip6tables-legacy",
        }
    }

    /// `iptables-legacy-restore` / `ip6tables-legacy-restore`.
    pub fn restore_program(self) -> &'static str {
        match self {
            IpFamily::V4 => "iptables-legacy-restore",
            IpFamily::V6 => "ip6tables-legacy-restore",
        }
    }

    /// `iptables-legacy-save` / `ip6tables-legacy-save`.
    pub fn save_program(self) -> &'static str {
        match self {
            IpFamily::V4 => "iptables-legacy-save",
            IpFamily::V6 => "ip6tables-legacy-save",
        }
    }

    fn contains(self, net: &IpNet) -> bool {
        matches!(
            (self, net),
            (IpFamily::V4, IpNet::V4(_)) | (IpFamily::V6, IpNet::V6(_))
        )
    }
}

/// One command to run: program, arguments, optional standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCommand {
    /// The program, found on `PATH`.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Fed to its standard input (a whole ruleset for `*-restore` and `nft -f -`).
    pub stdin: Option<String>,
}

impl PlannedCommand {
    /// A command without standard input.
    pub fn new(program: &str, args: &[&str]) -> Self {
        PlannedCommand {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            stdin: None,
        }
    }

    /// The same command with `stdin` fed to it.
    pub fn with_stdin(mut self, stdin: String) -> Self {
        self.stdin = Some(stdin);
        self
    }
}

impl fmt::Display for PlannedCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.program)?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        if self.stdin.is_some() {
            write!(f, " < (generated ruleset)")?;
        }
        Ok(())
    }
}

/// The iptables-legacy rules of one IP family, as iptables-restore lines (without `*mangle` /
/// `COMMIT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IptablesPlan {
    /// The family these rules are for.
    pub family: IpFamily,
    /// `-I FORWARD 1 -p tcp -j SLIPSTREAM` etc.: the jumps from the built-in chains.
    pub hook_rules: Vec<String>,
    /// `-A SLIPSTREAM ...`.
    pub main_rules: Vec<String>,
    /// `-A SLIPSTREAM_CLASSIFY ...`.
    pub classify_rules: Vec<String>,
    /// Table `filter`: `-I FORWARD 1 -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE` etc., only
    /// when a rule says `quic = "refuse"` (see `refuse.rs`).
    pub refuse_hooks: Vec<String>,
    /// Table `filter`: `-A SLIPSTREAM_REFUSE ... -j REJECT ...`.
    pub refuse_rules: Vec<String>,
}

impl IptablesPlan {
    /// Input for `iptables-legacy-restore --noflush`: declares (and so empties) both chains, fills
    /// them and inserts the jumps, in one atomic table replacement (and, if a rule refuses QUIC,
    /// the same for table `filter`'s chain, see `refuse.rs`).
    pub fn restore_input(&self) -> String {
        self.mangle_input() + &refuse::filter_section(None, self)
    }

    /// The `*mangle` part of [`IptablesPlan::restore_input`].
    pub(crate) fn mangle_input(&self) -> String {
        let mut s = String::from("*mangle\n");
        s += &format!(":{MAIN_CHAIN} - [0:0]\n:{CLASSIFY_CHAIN} - [0:0]\n");
        for line in self
            .main_rules
            .iter()
            .chain(&self.classify_rules)
            .chain(&self.hook_rules)
        {
            s += line;
            s.push('\n');
        }
        s += "COMMIT\n";
        s
    }

    /// The hook rules as `iptables -S` prints them once installed (`-A FORWARD ...`).
    pub fn hook_rules_as_listed(&self) -> Vec<String> {
        as_listed(&self.hook_rules)
    }

    /// The `filter` table's hook rules as `iptables -t filter -S` prints them.
    pub fn refuse_hooks_as_listed(&self) -> Vec<String> {
        as_listed(&self.refuse_hooks)
    }

    /// Commands undoing exactly this plan (the live removal lists the table instead, see
    /// [`crate::reset`], so it also removes duplicates and leftovers of other configs).
    pub fn remove_commands(&self) -> Vec<PlannedCommand> {
        let p = self.family.program();
        let mut cmds: Vec<PlannedCommand> = self
            .hook_rules_as_listed()
            .iter()
            .map(|r| {
                let mut args = vec!["-w", "-t", "mangle", "-D"];
                args.extend(r.split_whitespace().skip(1));
                PlannedCommand::new(p, &args)
            })
            .collect();
        for op in ["-F", "-X"] {
            for chain in [MAIN_CHAIN, CLASSIFY_CHAIN] {
                cmds.push(PlannedCommand::new(p, &["-w", "-t", "mangle", op, chain]));
            }
        }
        if !self.refuse_rules.is_empty() {
            for r in self.refuse_hooks_as_listed() {
                let mut args = vec!["-w", "-t", "filter", "-D"];
                args.extend(r.split_whitespace().skip(1));
                cmds.push(PlannedCommand::new(p, &args));
            }
            for op in ["-F", "-X"] {
                cmds.push(PlannedCommand::new(p, &["-w", "-t", "filter", op, REFUSE_CHAIN]));
            }
        }
        cmds
    }
}

/// "-I CHAIN 1 rest" -> "-A CHAIN rest", as `iptables -S` lists an inserted rule.
fn as_listed(inserts: &[String]) -> Vec<String> {
    inserts
        .iter()
        .map(|r| {
            let mut words: Vec<&str> = r.split_whitespace().collect();
            words[0] = "-A";
            words.remove(2);
            words.join(" ")
        })
        .collect()
}

/// Everything Slipstream installs for one config and backend. Pure data; see the crate docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulePlan {
    /// The backend the plan is for.
    pub backend: Backend,
    /// iptables-legacy backend: IPv4, then IPv6 if enabled. Empty for nftables.
    pub iptables: Vec<IptablesPlan>,
    /// nftables backend: the `table inet slipstream { ... }` text. `None` for iptables.
    pub nft_ruleset: Option<String>,
    /// The address sets the rules match (rules by name). iptables: ipsets created before the
    /// rules; nftables: declared in the ruleset.
    pub sets: Vec<KernelSet>,
}

impl RulePlan {
    /// The commands that install the plan (after stale state is reset).
    pub fn apply_commands(&self) -> Vec<PlannedCommand> {
        let mut cmds: Vec<PlannedCommand> = self
            .iptables
            .iter()
            .map(|p| {
                PlannedCommand::new(p.family.restore_program(), &["-w", "--noflush"])
                    .with_stdin(p.restore_input())
            })
            .collect();
        if let Some(text) = &self.nft_ruleset {
            cmds.push(PlannedCommand::new("nft", &["-f", "-"]).with_stdin(nft::replace_transaction(text)));
        }
        cmds
    }

    /// The commands that remove exactly what the plan installs.
    pub fn remove_commands(&self) -> Vec<PlannedCommand> {
        let mut cmds: Vec<PlannedCommand> = self.iptables.iter().flat_map(|p| p.remove_commands()).collect();
        if self.nft_ruleset.is_some() {
            cmds.push(PlannedCommand::new(
                "nft",
                &["delete", "table", "inet", NFT_TABLE],
            ));
        }
        cmds
    }
}

impl fmt::Display for RulePlan {
    /// Human-readable: what would be applied (e.g. for a `--print-rules` option).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.iptables {
            writeln!(f, "# {} --noflush", p.family.restore_program())?;
            f.write_str(&p.restore_input())?;
        }
        if let Some(text) = &self.nft_ruleset {
            writeln!(f, "# nft -f -")?;
            f.write_str(text)?;
        }
        Ok(())
    }
}

/// Generates the rules for `config` and `backend`, with empty host sets. Pure.
pub fn plan(config: &Config, backend: Backend) -> RulePlan {
    plan_with_hosts(config, backend, &HostAddrs::new())
}

/// Generates the rules for `config` and `backend`; `hosts` fills the nft host sets (ipsets are
/// filled separately). Pure.
pub fn plan_with_hosts(config: &Config, backend: Backend, hosts: &HostAddrs) -> RulePlan {
    plan_keeping(config, backend, hosts, &KeptEntries::new())
}

/// [`plan_with_hosts`], with remote set entries carried over from the table being replaced
/// (nftables declares its sets in the ruleset, so a replacement would start them empty).
pub fn plan_keeping(config: &Config, backend: Backend, hosts: &HostAddrs, kept: &KeptEntries) -> RulePlan {
    let kernel_sets = sets::kernel_sets(config);
    match backend {
        Backend::IptablesLegacy => {
            let mut families = vec![IpFamily::V4];
            if config.datapath.ipv6 {
                families.push(IpFamily::V6);
            }
            RulePlan {
                backend,
                iptables: families.into_iter().map(|f| iptables_plan(config, f)).collect(),
                nft_ruleset: None,
                sets: kernel_sets,
            }
        }
        Backend::Nftables => RulePlan {
            backend,
            iptables: Vec::new(),
            nft_ruleset: Some(nft::ruleset(
                config,
                &sets::nft_declarations(&kernel_sets, hosts, kept),
            )),
            sets: kernel_sets,
        },
    }
}

/// `0x0/0xff0000`-style mark/mask as iptables-save prints them.
fn mark(value: u32, mask: u32) -> String {
    format!("{value:#x}/{mask:#x}")
}

/// How a packet in one place relates to the rule's "local" (LAN host) and "remote" ends.
#[derive(Debug, Clone)]
pub(crate) struct Direction {
    /// `-i br-lan` / `-o br-lan` (router mode).
    pub iface: Option<(&'static str, String)>,
    /// `-m addrtype ...` arguments (local mode; and in "both" mode, keeping router directions off
    /// the router's own traffic).
    pub addrtype: Option<&'static str>,
    /// The LAN host is the packet's source (else its destination).
    pub local_is_src: bool,
}

impl Direction {
    /// Packets entering from a LAN interface: the only ones whose source MAC is the LAN host's.
    fn enters_from_lan(&self) -> bool {
        matches!(&self.iface, Some(("-i", _)))
    }
}

/// The directions a rule is matched in, for the hook setting (iptables: one shared classify chain).
fn iptables_directions(d: &Datapath) -> Vec<Direction> {
    let mut dirs = Vec::new();
    let both = d.hook == Hook::Both;
    if d.hook.forward() {
        for lan in &d.lan_interfaces {
            // From the LAN: the LAN host sends.
            dirs.push(Direction {
                iface: Some(("-i", lan.clone())),
                addrtype: both.then_some("! --dst-type LOCAL"),
                local_is_src: true,
            });
            // To the LAN: the LAN host receives.
            dirs.push(Direction {
                iface: Some(("-o", lan.clone())),
                addrtype: both.then_some("! --src-type LOCAL"),
                local_is_src: false,
            });
        }
    }
    if d.hook.local() {
        // OUTPUT: this host sends; INPUT: this host receives.
        dirs.push(Direction {
            iface: None,
            addrtype: Some("--src-type LOCAL"),
            local_is_src: true,
        });
        dirs.push(Direction {
            iface: None,
            addrtype: Some("--dst-type LOCAL"),
            local_is_src: false,
        });
    }
    dirs
}

/// Splits a port list into `multiport` argument strings of at most [`MULTIPORT_MAX_SLOTS`] slots
/// (a single port takes one slot, a range two).
pub fn multiport_chunks(ports: &[PortRange]) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut slots = 0;
    for p in ports {
        let (text, need) = if p.first == p.last {
            (p.first.to_string(), 1)
        } else {
            (format!("{}:{}", p.first, p.last), 2)
        };
        if slots + need > MULTIPORT_MAX_SLOTS {
            chunks.push(current.join(","));
            current.clear();
            slots = 0;
        }
        current.push(text);
        slots += need;
    }
    if !current.is_empty() {
        chunks.push(current.join(","));
    }
    chunks
}

fn dedup<T: PartialEq + Clone>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for i in items {
        if !out.contains(i) {
            out.push(i.clone());
        }
    }
    out
}

/// `[None]` for an empty list (no criterion), else every entry.
fn any_or_each<T: Clone>(items: Vec<T>) -> Vec<Option<T>> {
    if items.is_empty() {
        vec![None]
    } else {
        items.into_iter().map(Some).collect()
    }
}

/// Most opening SYNs of unclassed flows per second sent to the daemon (the rest pass the queue):
/// household control only needs to learn that someone starts a flow, and a SYN flood through
/// the router must not load the daemon.
pub(crate) const COMPETITOR_SYNS_PER_SECOND: u32 = 20;

/// Whether some rule hands its flows to household control: then the opening SYNs of unclassed
/// flows (best effort starting) are queued too, rate-limited (see
/// [`COMPETITOR_SYNS_PER_SECOND`]); the daemon passes them unchanged.
pub(crate) fn household_in_use(config: &Config) -> bool {
    config.rules.iter().any(|r| r.controller.kind() == "household")
}

/// Whether some rule covers UDP: only then do UDP packets enter Slipstream's chains at all, so a
/// config of TCP rules costs the household's UDP nothing.
pub(crate) fn udp_in_use(config: &Config) -> bool {
    config.rules.iter().any(|r| r.protocol.udp())
}

/// The transport protocols of a rule, as iptables / nft name them, TCP first.
pub(crate) fn protocol_names(p: Protocol) -> Vec<&'static str> {
    [(p.tcp(), "tcp"), (p.udp(), "udp")]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
}

mod iptables;
use iptables::iptables_plan;
