//! The validated configuration: what the daemon, the firewall and the CLI read.

use crate::values::{MacAddr, PortRange};
use crate::DatapathEngine;
use ipnet::IpNet;
use slipstream_control::ControllerConfig;
use slipstream_household::{HouseholdConfig, ShareSpec};
pub use slipstream_names::presets::Protocol;
pub use slipstream_names::DomainPattern;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Whether the daemon should run at all (default true). TOML: top-level `enabled = false`
    /// (before the first table); UCI: `option enabled '0'` in the `config slipstream` section.
    /// When false the daemon exits with status 0 and a message; the file is still fully validated.
    pub enabled: bool,
    /// Where and how packets are seen and rewritten (`[datapath]`).
    pub datapath: Datapath,
    /// The Prometheus listener (`[metrics]`).
    pub metrics: Metrics,
    /// Bounds on the flow table: its size and idle timeout (`[limits]`).
    pub limits: Limits,
    /// The daemon's local control socket.
    pub control: Control,
    /// Household control: the budget controller all `controller = "household"` flows of a link
    /// share, the coordinated slowdown, the time-sharing turn. TOML `[household]`, UCI
    /// `config household`.
    pub household: HouseholdConfig,
    /// Where the daemon sends its link-delay probes while the engine wants them (flows with
    /// nothing to time, such as QUIC). TOML `household.probe`, UCI `option probe` of
    /// `config household`; default [`ProbeTarget::Auto`].
    pub probe: ProbeTarget,
    /// Services and devices by name: the sets dnsmasq fills, the DHCP lease files. TOML
    /// `[names]`, UCI options of `config slipstream`.
    pub names: Names,
    /// The enabled rules: at least one when [`Config::enabled`]; names unique (disabled rules
    /// included); at most [`MAX_RULES`](crate::MAX_RULES). Numbered 1..=N in order; first match wins. Disabled rules
    /// (`enabled = false`) are validated like the others, then left out, so they take no number.
    pub rules: Vec<Rule>,
}

impl Config {
    /// Rule number `n` (1-based, as stored in the connmark), if it exists.
    pub fn rule_by_number(&self, n: u16) -> Option<&Rule> {
        (n as usize).checked_sub(1).and_then(|i| self.rules.get(i))
    }

    /// 1-based number of the first rule matching the flow, if any (userspace classification).
    pub fn classify(&self, local: IpAddr, local_port: u16, remote_port: u16, dscp: u8) -> Option<u16> {
        self.rules
            .iter()
            .position(|r| r.matches(local, local_port, remote_port, dscp))
            .map(|i| (i + 1) as u16)
    }
}

/// Where packets are intercepted and how they reach the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datapath {
    /// Interfaces facing the household (router mode): packets entering from one of them are sent
    /// by a LAN host, packets leaving through one are received by a LAN host. Default `["br-lan"]`.
    /// A trailing `+` is a wildcard (`"wlan+"`), as in iptables.
    pub lan_interfaces: Vec<String>,
    /// Which traffic is intercepted.
    pub hook: Hook,
    /// NFQUEUE number for handshakes and ACKs; full packet copy (default 8470).
    pub ack_queue: u16,
    /// NFQUEUE number for data packets (default 8471). Must differ from `ack_queue`.
    pub data_queue: u16,
    /// Kernel queue length per NFQUEUE (default 4096). Packets beyond it bypass the daemon.
    pub queue_max_len: u32,
    /// Bytes copied to userspace for data packets (default 65535: whole packets, so that in a flow
    /// with data both ways the receiver's data-carrying ACKs can be rewritten; at least 100 so an
    /// IPv6 header plus the largest TCP header fit; 128 copies only the headers).
    pub data_copy_bytes: u16,
    /// Packets of a background flow whose IP length is at most this go to the ACK queue, larger
    /// ones to the data queue (default 128). This is the IPv4 threshold; IPv6 uses it plus 20, the
    /// difference of the fixed headers, so the same TCP segments are split the same way.
    /// Small data segments that land in the ACK queue are fine: that queue copies whole packets.
    pub ack_max_len: u16,
    /// Which firewall to install Slipstream's rules with.
    pub firewall: FirewallBackend,
    /// Connmark/nfmark bits Slipstream owns (default `0x00ff_0000`); a contiguous run of at least
    /// 8 bits. The rule number is stored there, shifted to the mask's lowest bit.
    pub mark_mask: u32,
    /// Also handle IPv6 (default true).
    pub ipv6: bool,
    /// Which datapath carries packets to the engine (`datapath_engine.rs`).
    pub engine: DatapathEngine,
}

impl Datapath {
    /// `ack_max_len` for IPv6 packets (IPv6's fixed header is 20 bytes longer than IPv4's).
    pub fn ack_max_len_v6(&self) -> u32 {
        u32::from(self.ack_max_len) + 20
    }

    /// Position of the mask's lowest bit: the rule number is stored as `n << mark_shift()`.
    pub fn mark_shift(&self) -> u32 {
        self.mark_mask.trailing_zeros()
    }

    /// The connmark value of rule `n` (1-based).
    pub fn mark_for_rule(&self, n: u16) -> u32 {
        u32::from(n) << self.mark_shift()
    }
}

impl Default for Datapath {
    fn default() -> Self {
        Datapath {
            lan_interfaces: vec!["br-lan".to_owned()],
            hook: Hook::Forward,
            ack_queue: 8470,
            data_queue: 8471,
            queue_max_len: 4096,
            data_copy_bytes: 65535,
            ack_max_len: 128,
            firewall: FirewallBackend::Auto,
            mark_mask: 0x00ff_0000,
            ipv6: true,
            engine: DatapathEngine::default(),
        }
    }
}

/// The reflector of the link-delay probes (ICMP echo requests): a host beyond the access link,
/// whose round-trip time is the link's base delay plus its queueing delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeTarget {
    /// The gateway of the default route, looked up again while probing (`"auto"`, default).
    #[default]
    Auto,
    /// No probes (`"off"`).
    Off,
    /// This address.
    Address(IpAddr),
}

impl std::fmt::Display for ProbeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeTarget::Auto => f.write_str("auto"),
            ProbeTarget::Off => f.write_str("off"),
            ProbeTarget::Address(ip) => write!(f, "{ip}"),
        }
    }
}

/// Which traffic is intercepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Hook {
    /// Router: traffic forwarded between the LAN interfaces and elsewhere (`"forward"`, default).
    #[default]
    Forward,
    /// End host: the machine's own traffic (`"local"`).
    Local,
    /// Both forwarded traffic and the router's own (`"both"`).
    Both,
}

impl Hook {
    /// Whether forwarded traffic is seen (`forward` or `both`).
    pub fn forward(self) -> bool {
        matches!(self, Hook::Forward | Hook::Both)
    }
    /// Whether the router's own traffic is seen (`local` or `both`).
    pub fn local(self) -> bool {
        matches!(self, Hook::Local | Hook::Both)
    }
}

/// Which firewall tool installs the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FirewallBackend {
    /// nftables if its `queue` statement works on this system, else iptables-legacy (`"auto"`).
    #[default]
    Auto,
    /// iptables-legacy / ip6tables-legacy (`"iptables"`).
    Iptables,
    /// nftables (`"nftables"`).
    Nftables,
}

/// The Prometheus endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    /// Address of the HTTP listener (default `127.0.0.1:9617`).
    pub listen: SocketAddr,
    /// How many flows get per-flow series (the busiest ones); default 32, at most 1000.
    pub top_flows: usize,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            listen: SocketAddr::from(([127, 0, 0, 1], 9617)),
            top_flows: 32,
        }
    }
}

/// The daemon's local control socket (TOML `[control]`, UCI `option control_socket`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// Path of the Unix socket the daemon listens on for local commands (default
    /// `/var/run/slipstream.sock`). Absolute, at most 107 bytes (the `sun_path` limit).
    pub socket: PathBuf,
}

/// Default of [`Control::socket`].
pub const DEFAULT_CONTROL_SOCKET: &str = "/var/run/slipstream.sock";

impl Default for Control {
    fn default() -> Self {
        Control {
            socket: PathBuf::from(DEFAULT_CONTROL_SOCKET),
        }
    }
}

/// Flow table limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most flows tracked at once (default 4096, 1..=1_000_000).
    pub max_flows: usize,
    /// A flow with no packets for this long is forgotten (default 120 s).
    pub idle_timeout: Duration,
    /// When the table is full, a new flow evicts the longest-idle flow only if that one has been
    /// idle at least this long (default 10 s); otherwise the new flow is not controlled.
    pub evict_idle_after: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_flows: 4096,
            idle_timeout: Duration::from_secs(120),
            evict_idle_after: Duration::from_secs(10),
        }
    }
}

/// Services and devices by name (TOML `[names]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// How long an address dnsmasq put in a rule's set stays there without being resolved
    /// again (default 1 h; 1 s to 7 days). Longer than DNS TTLs on purpose: a download keeps
    /// opening connections to addresses its client resolved long before.
    pub set_timeout: Duration,
    /// Where the daemon writes a dnsmasq snippet that fills the sets, for a dnsmasq configured
    /// by files (its `conf-dir`); `None` (`""`, the default): not written. On OpenWrt the init
    /// script adds the rules to dnsmasq as `dhcp` ipset sections instead (`--dnsmasq-uci`).
    pub dnsmasq_conf: Option<PathBuf>,
    /// DHCP lease files read for `lan_hostnames` (default `/tmp/dhcp.leases`, dnsmasq's, and
    /// `/tmp/hosts/odhcpd`, odhcpd's DHCPv6 leases); missing files count as empty.
    pub dhcp_leases: Vec<PathBuf>,
    /// How often the lease files are checked for changes (default 5 s, 100 ms to 10 min).
    pub lease_poll: Duration,
}

impl Default for Names {
    fn default() -> Self {
        Names {
            set_timeout: Duration::from_secs(3600),
            dnsmasq_conf: None,
            dhcp_leases: vec![
                PathBuf::from("/tmp/dhcp.leases"),
                PathBuf::from("/tmp/hosts/odhcpd"),
            ],
            lease_poll: Duration::from_secs(5),
        }
    }
}

/// One background class: which flows, and which controller clamps them.
///
/// All given criteria must match (AND); within a list any entry matches (OR); an empty list
/// matches anything; at least one criterion must be given. "Local" is the LAN host in router mode
/// (the machine itself in local mode), "remote" the far end.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Unique name, used in metrics and logs.
    pub name: String,
    /// The far end's ports (e.g. 443, 6881-6889); empty = any.
    pub remote_ports: Vec<PortRange>,
    /// The LAN host's ports; empty = any.
    pub local_ports: Vec<PortRange>,
    /// DSCP values 0..=63 (TOML accepts names: "LE" = 1, "CS1" = 8, ...); empty = any.
    pub dscp: Vec<u8>,
    /// LAN host CIDRs; empty = any.
    pub lan_hosts: Vec<IpNet>,
    /// LAN host MAC addresses (source MAC of packets the LAN host sends through the router);
    /// empty = any. Only router mode (`hook = "forward"`) can use them. The kernel matches them
    /// (iptables `-m mac --mac-source`, nft `ether saddr`) when it classes a flow;
    /// [`Rule::matches`] cannot, see there.
    pub lan_macs: Vec<MacAddr>,
    /// Remote DNS names: the rule's `domains` and its presets' (deduplicated, in order). The
    /// kernel matches the remote address against the rule's sets, which dnsmasq fills when it
    /// answers one of these names; [`Rule::matches`] cannot check them.
    pub domains: Vec<DomainPattern>,
    /// The presets named (`preset = "steam"`), for display; their domains are in `domains`.
    pub presets: Vec<String>,
    /// LAN hosts by the name they give in their DHCP lease (lower case). Together with
    /// `lan_hosts` these are the rule's LAN host criterion: an address or a named host (OR).
    /// Matched in the kernel through a set the daemon fills from the lease files.
    pub lan_hostnames: Vec<String>,
    /// Which flows the rule classes: TCP (the default), UDP or both. Set by `protocol`; if not
    /// set, TCP plus whatever the rule's presets serve over (a preset with UDP adds UDP).
    pub protocol: Protocol,
    /// What happens to the rule's UDP flows to remote port 443 (QUIC); only `Control` unless
    /// the rule covers UDP.
    pub quic: Quic,
    /// The controller of the rule's flows.
    pub controller: ControllerConfig,
    /// The rule's claim on the household budget (`weight`, `min_rate`, `priority`); only
    /// household-controlled rules may set it, others keep the default.
    pub share: ShareSpec,
}

/// What a rule does with its UDP flows to remote port 443: QUIC, mostly HTTP/3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quic {
    /// Classed and queued like the rule's other UDP flows (`"control"`, the default).
    #[default]
    Control,
    /// Rejected (ICMP port unreachable), so that browsers and apps fall back to TCP, where the
    /// receive window controls them (`"refuse"`).
    Refuse,
}

impl Quic {
    /// Every setting with its config name.
    pub const ALL: [(Quic, &'static str); 2] = [(Quic::Control, "control"), (Quic::Refuse, "refuse")];

    /// Its config name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(q, _)| *q == self)
            .map_or("control", |(_, n)| n)
    }
}

/// The remote port QUIC runs on (HTTP/3), which `quic = "refuse"` rejects.
pub const QUIC_PORT: u16 = 443;

impl Rule {
    /// Whether the rule rejects its UDP flows to remote port 443 (`quic = "refuse"`).
    pub fn refuses_quic(&self) -> bool {
        self.quic == Quic::Refuse && self.protocol.udp()
    }

    /// Whether a flow (or packet) with these properties matches the rule. Pure.
    ///
    /// The transport protocol is not checked: the kernel matches it.
    ///
    /// Names (`domains`, `lan_hostnames`) are not checked either: they are matched through
    /// kernel sets. A rule with `lan_hostnames` but no `lan_hosts` answers as if any host matched.
    ///
    /// The 5-tuple and DSCP carry no MAC address, so [`Rule::lan_macs`] is **not** checked here:
    /// for a rule with MACs this answers "would match if the MAC matches". MAC matching happens in
    /// the kernel, which stores the rule number in the flow's connmark; the daemon reads the rule
    /// from the mark, not from this function.
    pub fn matches(&self, local: IpAddr, local_port: u16, remote_port: u16, dscp: u8) -> bool {
        fn any_or_empty<T>(list: &[T], f: impl Fn(&T) -> bool) -> bool {
            list.is_empty() || list.iter().any(f)
        }
        any_or_empty(&self.remote_ports, |p| p.contains(remote_port))
            && any_or_empty(&self.local_ports, |p| p.contains(local_port))
            && any_or_empty(&self.dscp, |&d| d == dscp)
            && (!self.lan_hostnames.is_empty() || any_or_empty(&self.lan_hosts, |net| net.contains(&local)))
    }
}
