//! Slipstream's configuration: the TOML schema, the equivalent OpenWrt UCI schema, their defaults,
//! and validation whose messages name the file, the field and what is wrong.
//!
//! The TOML file has these parts (see `config/slipstream.toml` in the repository for a commented
//! example, and `docs/configuration.md` for every option): a top-level `enabled`, `[datapath]`
//! (where packets are intercepted and how they reach the daemon), `[metrics]`, `[limits]` (flow
//! table size and timeouts), `[control]` (the daemon's local control socket), `[household]` (the
//! budget all household-controlled flows of a link share) and one or more `[[rules]]` that class
//! TCP flows as background and name the controller that clamps their receive window.
//!
//! The same configuration can be written in OpenWrt's UCI syntax (`/etc/config/slipstream`, see
//! `openwrt/files/slipstream.config`): [`parse_uci`] reads it into the same raw structs the TOML
//! goes through and runs the same validation, so the two formats cannot drift; only the names in
//! the messages differ (`rule 'bittorrent' (line 12), option remote_port (line 14): ...`). [`load`]
//! picks the format from the file name and content.
//!
//! Parsing is two-stage: serde reads the text into loose "raw" structs (every table
//! `deny_unknown_fields`, so a typo is an error, not a silently ignored key), then [`parse`]
//! validates and converts them into [`Config`], reporting the first problem as
//! `"<file>: <field path>: <what is wrong>"`, e.g.
//! `config/slipstream.toml: rules[2].remote_ports[0]: port range 9000-80 is reversed`.
//! Syntax and type errors from toml keep its line and column.
//!
//! # Rule matching
//!
//! A flow is background if a rule matches it. Within a rule every *given* criterion must match
//! (AND); within one criterion's list any entry may match (OR); an omitted or empty list matches
//! anything. A rule with no criteria at all is rejected, since it would class every flow as
//! background. Rules are numbered 1..=N in file order and the first match wins; the number is what
//! the firewall stores in the connection mark (see [`Datapath::mark_mask`]).

mod controllers;
mod datapath_engine;
mod kinded;
mod raw;
pub mod uci;

pub use datapath_engine::DatapathEngine;
pub use uci::{parse_sections, parse_uci, UciEntry, UciSection, UciSyntaxError};

use ipnet::IpNet;
use raw::{IntOrString, RawConfig, RawRule};
use slipstream_control::{ControllerConfig, VultureConfig};
use slipstream_household::{HouseholdConfig, ShareSpec};

/// The queueing-delay guard of Slipstream's Vulture variant. Measured in the end-to-end testbed:
/// 10 ms keeps best effort at 98.6% beside a background download while the background flow alone
/// gets 92-94% of the link (20 ms let a slowly ramping best-effort flow lose more, see README).
pub const DEFAULT_QUEUE_DELAY_LIMIT: Duration = Duration::from_millis(10);

/// What `controller = "vulture"` means: Slipstream's variant (measured better than the paper's
/// rules in the end-to-end testbed; `variant = "paper"` selects the original).
pub fn default_vulture() -> VultureConfig {
    VultureConfig::slipstream(DEFAULT_QUEUE_DELAY_LIMIT)
}

/// The controller of a rule that names none; the one place that decides it (UCI controller
/// parameters without `option controller` belong to its kind too). Household control: measured
/// against Vulture in the namespace testbed it yields as much to a best-effort download
/// (97.5-98.6% kept, downloads and uploads), fills the idle link as well, and also controls
/// clients without TCP timestamps and many flows per host (docs/household.md).
pub fn default_controller() -> ControllerConfig {
    ControllerConfig::Household
}

/// Highest rule `priority` (lowest precedence): eight levels, numbered like tc's prio bands.
pub const MAX_PRIORITY: u8 = 7;

/// Smallest and largest non-zero `min_rate`, bits per second.
const MIN_RATE_BITS: (f64, f64) = (1e3, 100e9);

/// A rate in bits per second with a unit, `"2mbit"`, `"500kbit"`, `"1.5gbit"`, `"64000bit"`
/// (SI multiples as tc reads them: k = 1000), or `"0"`, to bytes per second (rounded). tc's
/// `kbps`-style units (bytes per second there, bits elsewhere) are refused as ambiguous.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let bad = || format!("{text:?} is not a rate like \"2mbit\" or \"500kbit\" (bits per second)");
    let value: f64 = number.parse().map_err(|_| bad())?;
    let scale = match unit.trim() {
        "" if value == 0.0 => 1.0,
        "" => return Err(format!("{text:?} has no unit: write bits per second like \"2mbit\" or \"500kbit\"")),
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        u if u.ends_with("bps") || u.ends_with("b/s") || u.ends_with("bit/s") => {
            return Err(format!(
                "{text:?}: unit {u:?} is ambiguous (tc reads \"kbps\" as kilobytes per second); use bit, kbit, mbit or gbit"
            ))
        }
        _ => return Err(bad()),
    };
    let bits = value * scale;
    if bits != 0.0 && !(MIN_RATE_BITS.0..=MIN_RATE_BITS.1).contains(&bits) {
        return Err(format!("{text:?} must be 0 or 1kbit to 100gbit"));
    }
    Ok((bits / 8.0).round() as u64)
}
use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// Most rules a config may have: rule numbers must fit the connmark field with room to spare
/// (an 8-bit field holds 1..=255).
pub const MAX_RULES: usize = 250;

/// A configuration problem: which file, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {path}: {message}")]
pub struct ConfigError {
    origin: String,
    path: String,
    message: String,
}

impl ConfigError {
    fn new(origin: &str, path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            origin: origin.to_owned(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// The file (or other origin) the text came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The field path (`rules[2].remote_ports[0]`), or `line L, column C` for toml syntax/type
    /// errors, or `file` for I/O errors. For UCI files: the section and option with their lines
    /// (`rule 'bittorrent' (line 12), option remote_port (line 14)`), or `line L` for syntax errors.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Whether the daemon should run at all (default true). TOML: top-level `enabled = false`
    /// (before the first table); UCI: `option enabled '0'` in the `config slipstream` section.
    /// When false the daemon exits with status 0 and a message; the file is still fully validated.
    pub enabled: bool,
    pub datapath: Datapath,
    pub metrics: Metrics,
    pub limits: Limits,
    /// The daemon's local control socket.
    pub control: Control,
    /// Household control: the budget controller all `controller = "household"` flows of a link
    /// share, the coordinated slowdown, the time-sharing turn. TOML `[household]`, UCI
    /// `config household`.
    pub household: HouseholdConfig,
    /// The enabled rules: at least one when [`Config::enabled`]; names unique (disabled rules
    /// included); at most [`MAX_RULES`]. Numbered 1..=N in order; first match wins. Disabled rules
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
    pub fn forward(self) -> bool {
        matches!(self, Hook::Forward | Hook::Both)
    }
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
    /// The controller of the rule's flows.
    pub controller: ControllerConfig,
    /// The rule's claim on the household budget (`weight`, `min_rate`, `priority`); only
    /// household-controlled rules may set it, others keep the default.
    pub share: ShareSpec,
}

impl Rule {
    /// Whether a flow (or packet) with these properties matches the rule. Pure.
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
            && any_or_empty(&self.lan_hosts, |net| net.contains(&local))
    }
}

/// A 6-byte Ethernet (MAC) address. Parses `aa:bb:cc:dd:ee:ff` (also `-` separated, any case);
/// displays lowercase with colons, as iptables and nft print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for MacAddr {
    type Err = String;

    /// Six two-digit hex bytes separated by `:` (or `-`); group (multicast/broadcast) addresses are
    /// rejected, since no host sends from one.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a MAC address like \"aa:bb:cc:dd:ee:ff\"");
        let t = s.trim();
        let sep = if t.contains('-') { '-' } else { ':' };
        let parts: Vec<&str> = t.split(sep).collect();
        if parts.len() != 6 {
            return Err(bad());
        }
        let mut b = [0u8; 6];
        for (i, p) in parts.iter().enumerate() {
            if p.len() != 2 {
                return Err(bad());
            }
            b[i] = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if b[0] & 1 == 1 {
            return Err(format!(
                "{s:?} is a multicast or broadcast address; a LAN host sends from its own (unicast) address"
            ));
        }
        Ok(MacAddr(b))
    }
}

/// An inclusive port range; a single port has `first == last`. TOML: `443` or `"6881-6889"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub fn single(port: u16) -> Self {
        PortRange {
            first: port,
            last: port,
        }
    }

    pub fn contains(&self, port: u16) -> bool {
        self.first <= port && port <= self.last
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for PortRange {
    type Err = String;

    /// `"443"` or `"6881-6889"`; port 0 and reversed ranges are errors.
    fn from_str(s: &str) -> Result<Self, String> {
        let port = |p: &str| -> Result<u16, String> {
            let p = p.trim();
            match p.parse::<u32>() {
                Ok(0) => Err("port 0 is not a valid port".to_owned()),
                Ok(n) if n <= 65535 => Ok(n as u16),
                Ok(n) => Err(format!("port {n} is out of range (1..=65535)")),
                Err(_) => Err(format!("{s:?} is not a port or a port range like \"6881-6889\"")),
            }
        };
        let range = match s.split_once('-') {
            Some((a, b)) => PortRange {
                first: port(a)?,
                last: port(b)?,
            },
            None => PortRange::single(port(s)?),
        };
        if range.first > range.last {
            return Err(format!("port range {}-{} is reversed", range.first, range.last));
        }
        Ok(range)
    }
}

/// DSCP names accepted in the config (case-insensitive), with their values.
pub const DSCP_NAMES: &[(&str, u8)] = &[
    ("CS0", 0),
    ("DF", 0),
    ("LE", 1),
    ("CS1", 8),
    ("AF11", 10),
    ("AF12", 12),
    ("AF13", 14),
    ("CS2", 16),
    ("AF21", 18),
    ("AF22", 20),
    ("AF23", 22),
    ("CS3", 24),
    ("AF31", 26),
    ("AF32", 28),
    ("AF33", 30),
    ("CS4", 32),
    ("AF41", 34),
    ("AF42", 36),
    ("AF43", 38),
    ("CS5", 40),
    ("VOICE-ADMIT", 44),
    ("EF", 46),
    ("CS6", 48),
    ("CS7", 56),
];

/// A DSCP name ("LE", "cs1") or decimal number ("8") to its value.
pub fn parse_dscp(s: &str) -> Option<u8> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u8>() {
        return (n <= 63).then_some(n);
    }
    DSCP_NAMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(s))
        .map(|&(_, v)| v)
}

/// The two syntaxes a config file may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `config/slipstream.toml` style.
    Toml,
    /// OpenWrt UCI (`/etc/config/slipstream`).
    Uci,
}

impl Format {
    /// The format of a file: `.toml` extension -> TOML; otherwise the content decides: if its first
    /// word outside comments is `config` or `package` it is UCI, else TOML.
    pub fn detect(path: &Path, text: &str) -> Format {
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("toml")) {
            return Format::Toml;
        }
        let first_word = text
            .lines()
            .map(str::trim_start)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .and_then(|l| l.split(|c: char| c.is_whitespace() || c == ';').next());
        match first_word {
            Some("config") | Some("package") => Format::Uci,
            _ => Format::Toml,
        }
    }
}

/// Reads, parses and validates a config file, TOML or UCI (see [`Format::detect`]). Messages name
/// the file as given.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(&origin, "file", format!("cannot read: {e}")))?;
    match Format::detect(path, &text) {
        Format::Toml => parse(&text, &origin),
        Format::Uci => parse_uci(&text, &origin),
    }
}

/// Parses and validates TOML config text; `origin` is the file name used in messages.
pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| toml_error(text, origin, &e))?;
    Validator {
        origin,
        format: Format::Toml,
    }
    .config(raw)
}

fn toml_error(text: &str, origin: &str, e: &toml::de::Error) -> ConfigError {
    let path = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}")
        }
        None => "toml".to_owned(),
    };
    ConfigError::new(origin, path, e.message().trim().to_owned())
}

/// Checks raw values and builds the [`Config`]; shared by the TOML and the UCI reader. Paths in
/// its errors are TOML field paths (`rules[2].remote_ports[0]`); the UCI reader translates them.
/// Field names inside messages go through [`Validator::name`], so they read right in both formats.
pub(crate) struct Validator<'a> {
    pub(crate) origin: &'a str,
    pub(crate) format: Format,
}

type VResult<T> = Result<T, ConfigError>;

impl Validator<'_> {
    fn err(&self, path: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.origin, path, message)
    }

    /// How a field is called in messages: the TOML path, or `option <uci name>`.
    fn name(&self, toml_path: &str) -> String {
        match self.format {
            Format::Toml => toml_path.to_owned(),
            Format::Uci => format!("option {}", uci::option_name(toml_path)),
        }
    }

    fn int<T: TryFrom<i64>>(&self, path: &str, v: Option<i64>, default: T, min: i64, max: i64) -> VResult<T> {
        match v {
            None => Ok(default),
            Some(n) if n < min || n > max => {
                Err(self.err(path, format!("{n} is out of range ({min}..={max})")))
            }
            Some(n) => T::try_from(n).map_err(|_| self.err(path, format!("{n} is out of range"))),
        }
    }

    fn duration(&self, path: &str, v: Option<&str>, default: Duration) -> VResult<Duration> {
        match v {
            None => Ok(default),
            Some(s) => humantime::parse_duration(s.trim()).map_err(|e| {
                self.err(
                    path,
                    format!("{s:?} is not a duration like \"120s\" or \"20ms\" ({e})"),
                )
            }),
        }
    }

    /// A `validate()` result of a library config: a message that starts with one of `fields` is
    /// reported at that field (`gain must be ...` -> `{path}.gain: must be ...`), others at `path`.
    fn checked(&self, path: &str, fields: &[&str], result: Result<(), String>) -> VResult<()> {
        result.map_err(|message| match message.split_once(' ') {
            Some((field, rest)) if fields.contains(&field) => self.err(format!("{path}.{field}"), rest),
            _ => self.err(path, message),
        })
    }

    fn opt_duration(
        &self,
        path: &str,
        field: &str,
        v: Option<String>,
        default: Duration,
    ) -> VResult<Duration> {
        self.duration(&format!("{path}.{field}"), v.as_deref(), default)
    }

    /// An integer parameter whose range the library's `validate()` checks; here only that it fits.
    fn param_int<T: TryFrom<i64>>(&self, path: &str, field: &str, v: Option<i64>, default: T) -> VResult<T> {
        self.int(&format!("{path}.{field}"), v, default, i64::MIN, i64::MAX)
    }

    pub(crate) fn config(&self, raw: RawConfig) -> VResult<Config> {
        let enabled = raw.enabled.unwrap_or(true);
        let datapath = self.datapath(raw.datapath)?;
        let metrics = self.metrics(raw.metrics)?;
        let limits = self.limits(raw.limits)?;
        let control = self.control(raw.control)?;
        let household = self.household(raw.household)?;
        let (rules_name, rule_name) = match self.format {
            Format::Toml => ("[[rules]] entry", "[[rules]] entry"),
            Format::Uci => ("`config rule` section", "`config rule` section"),
        };
        if raw.rules.is_empty() && enabled {
            return Err(self.err("rules", format!("at least one {rules_name} is required")));
        }
        let mut names = HashSet::new();
        let mut rules = Vec::with_capacity(raw.rules.len());
        let given = raw.rules.len();
        for (i, r) in raw.rules.into_iter().enumerate() {
            let rule_enabled = r.enabled.unwrap_or(true);
            let rule = self.rule(i, r, &datapath)?;
            if !names.insert(rule.name.clone()) {
                return Err(self.err(
                    format!("rules[{i}].name"),
                    format!("duplicate rule name {:?}", rule.name),
                ));
            }
            if rule_enabled {
                rules.push(rule);
            }
        }
        if rules.len() > MAX_RULES {
            return Err(self.err(
                "rules",
                format!(
                    "{} enabled rules given, at most {MAX_RULES} are allowed",
                    rules.len()
                ),
            ));
        }
        if rules.is_empty() && enabled {
            return Err(self.err(
                "rules",
                format!(
                    "all {given} rules are disabled; enable at least one {rule_name}, or disable \
                     Slipstream itself with {} = false",
                    self.name("enabled")
                ),
            ));
        }
        Ok(Config {
            enabled,
            datapath,
            metrics,
            limits,
            control,
            household,
            rules,
        })
    }

    fn household(&self, raw: raw::RawHousehold) -> VResult<HouseholdConfig> {
        let d = HouseholdConfig::default();
        let budget = match raw.budget {
            None => d.budget,
            Some(b) => b.validate(self, "household.budget")?,
        };
        let slowdown_interval = match raw.slowdown_interval.as_deref().map(str::trim) {
            Some("off") => Duration::ZERO,
            other => self.duration("household.slowdown_interval", other, d.slowdown_interval)?,
        };
        let turn = self.duration("household.turn", raw.turn.as_deref(), d.turn)?;
        let household = HouseholdConfig {
            budget,
            slowdown_interval,
            turn,
        };
        self.checked("household", &["slowdown_interval", "turn"], household.validate())?;
        Ok(household)
    }

    /// `weight`, `min_rate` and `priority` of a rule with controller `controller`.
    fn share(&self, p: &str, raw: &RawRule, controller: &ControllerConfig) -> VResult<ShareSpec> {
        let given = [
            ("weight", raw.weight.is_some()),
            ("min_rate", raw.min_rate.is_some()),
            ("priority", raw.priority.is_some()),
        ];
        if let Some((field, _)) = given.iter().find(|(_, set)| *set) {
            if *controller != ControllerConfig::Household {
                return Err(self.err(
                    format!("{p}.{field}"),
                    format!(
                        "only household flows share a budget; set {} (this rule's controller is {})",
                        match self.format {
                            Format::Toml => "controller = \"household\"",
                            Format::Uci => "option controller 'household'",
                        },
                        controller.kind()
                    ),
                ));
            }
        }
        let d = ShareSpec::default();
        let weight = match raw.weight {
            None => d.weight,
            Some(n) if (1..=i64::from(ShareSpec::MAX_WEIGHT)).contains(&n) => n as u32,
            Some(n) => {
                return Err(self.err(
                    format!("{p}.weight"),
                    format!("must be 1 to {}, not {n}", ShareSpec::MAX_WEIGHT),
                ))
            }
        };
        let priority = match raw.priority {
            None => d.priority,
            Some(n) if (0..=i64::from(MAX_PRIORITY)).contains(&n) => n as u8,
            Some(n) => {
                return Err(self.err(
                    format!("{p}.priority"),
                    format!("must be 0 to {MAX_PRIORITY} (0 is served first), not {n}"),
                ))
            }
        };
        let min_rate = match &raw.min_rate {
            None => d.min_rate,
            Some(IntOrString::Int(0)) => 0,
            Some(IntOrString::Int(n)) => {
                return Err(self.err(
                    format!("{p}.min_rate"),
                    format!(
                        "{n} has no unit: write bits per second as a string like \"2mbit\" or \"500kbit\""
                    ),
                ))
            }
            Some(IntOrString::Str(s)) => {
                parse_rate(s).map_err(|why| self.err(format!("{p}.min_rate"), why))?
            }
        };
        let share = ShareSpec {
            weight,
            min_rate,
            priority,
        };
        self.checked(p, &["weight", "min_rate", "priority"], share.validate())?;
        Ok(share)
    }

    fn control(&self, raw: raw::RawControl) -> VResult<Control> {
        let d = Control::default();
        let socket = match raw.socket {
            None => d.socket,
            Some(s) => {
                let p = PathBuf::from(s.trim());
                if !p.is_absolute() {
                    return Err(self.err(
                        "control.socket",
                        format!("{s:?} is not an absolute path like \"{DEFAULT_CONTROL_SOCKET}\""),
                    ));
                }
                if p.as_os_str().len() > 107 {
                    return Err(self.err(
                        "control.socket",
                        format!(
                            "{s:?} is {} bytes long; Unix socket paths are at most 107",
                            p.as_os_str().len()
                        ),
                    ));
                }
                p
            }
        };
        Ok(Control { socket })
    }

    fn datapath(&self, raw: raw::RawDatapath) -> VResult<Datapath> {
        let d = Datapath::default();
        let hook = match raw.hook.as_deref() {
            None => d.hook,
            Some("forward") => Hook::Forward,
            Some("local") => Hook::Local,
            Some("both") => Hook::Both,
            Some(other) => {
                return Err(self.err(
                    "datapath.hook",
                    format!("unknown hook {other:?}, expected \"forward\", \"local\" or \"both\""),
                ))
            }
        };
        let firewall = match raw.firewall.as_deref() {
            None => d.firewall,
            Some("auto") => FirewallBackend::Auto,
            Some("iptables") => FirewallBackend::Iptables,
            Some("nftables") => FirewallBackend::Nftables,
            Some(other) => {
                return Err(self.err(
                    "datapath.firewall",
                    format!("unknown firewall {other:?}, expected \"auto\", \"iptables\" or \"nftables\""),
                ))
            }
        };
        let lan_interfaces = raw.lan_interfaces.unwrap_or(d.lan_interfaces);
        for (i, name) in lan_interfaces.iter().enumerate() {
            if let Err(why) = check_interface_name(name) {
                return Err(self.err(format!("datapath.lan_interfaces[{i}]"), why));
            }
        }
        if hook.forward() && lan_interfaces.is_empty() {
            return Err(self.err(
                "datapath.lan_interfaces",
                "is empty, but router mode (hook \"forward\" or \"both\") needs the LAN interfaces",
            ));
        }
        let ack_queue: u16 = self.int("datapath.ack_queue", raw.ack_queue, d.ack_queue, 0, 65535)?;
        let data_queue: u16 = self.int("datapath.data_queue", raw.data_queue, d.data_queue, 0, 65535)?;
        if ack_queue == data_queue {
            return Err(self.err(
                "datapath.data_queue",
                format!(
                    "must differ from {} (both are {ack_queue})",
                    self.name("datapath.ack_queue")
                ),
            ));
        }
        let queue_max_len = self.int(
            "datapath.queue_max_len",
            raw.queue_max_len,
            d.queue_max_len,
            1,
            u32::MAX as i64,
        )?;
        let data_copy_bytes = self.int(
            "datapath.data_copy_bytes",
            raw.data_copy_bytes,
            d.data_copy_bytes,
            100,
            65535,
        )?;
        // 40 = the smallest IPv4+TCP packet; 65515 leaves room for the IPv6 +20.
        let ack_max_len = self.int("datapath.ack_max_len", raw.ack_max_len, d.ack_max_len, 40, 65515)?;
        let mark_mask: u32 = self.int(
            "datapath.mark_mask",
            raw.mark_mask,
            d.mark_mask,
            0,
            u32::MAX as i64,
        )?;
        if mark_mask.count_ones() < 8 || !is_contiguous(mark_mask) {
            return Err(self.err(
                "datapath.mark_mask",
                format!("{mark_mask:#010x} must be one contiguous run of at least 8 bits, like 0x00ff0000"),
            ));
        }
        Ok(Datapath {
            lan_interfaces,
            hook,
            ack_queue,
            data_queue,
            queue_max_len,
            data_copy_bytes,
            ack_max_len,
            firewall,
            mark_mask,
            ipv6: raw.ipv6.unwrap_or(d.ipv6),
            engine: DatapathEngine::parse(raw.engine.as_deref())
                .map_err(|e| self.err("datapath.engine", e))?,
        })
    }

    fn metrics(&self, raw: raw::RawMetrics) -> VResult<Metrics> {
        let d = Metrics::default();
        let listen = match raw.listen {
            None => d.listen,
            Some(s) => s.parse().map_err(|_| {
                self.err(
                    "metrics.listen",
                    format!("{s:?} is not an address like \"127.0.0.1:9617\""),
                )
            })?,
        };
        let top_flows = self.int("metrics.top_flows", raw.top_flows, d.top_flows, 0, 1000)?;
        Ok(Metrics { listen, top_flows })
    }

    fn limits(&self, raw: raw::RawLimits) -> VResult<Limits> {
        let d = Limits::default();
        let max_flows = self.int("limits.max_flows", raw.max_flows, d.max_flows, 1, 1_000_000)?;
        let idle_timeout =
            self.duration("limits.idle_timeout", raw.idle_timeout.as_deref(), d.idle_timeout)?;
        if idle_timeout.is_zero() {
            return Err(self.err("limits.idle_timeout", "must be greater than zero"));
        }
        let evict_idle_after = self.duration(
            "limits.evict_idle_after",
            raw.evict_idle_after.as_deref(),
            d.evict_idle_after,
        )?;
        if evict_idle_after > idle_timeout {
            return Err(self.err(
                "limits.evict_idle_after",
                format!(
                    "{} is longer than {} ({}); idle flows would expire first",
                    humantime::format_duration(evict_idle_after),
                    self.name("limits.idle_timeout"),
                    humantime::format_duration(idle_timeout)
                ),
            ));
        }
        Ok(Limits {
            max_flows,
            idle_timeout,
            evict_idle_after,
        })
    }

    fn rule(&self, i: usize, mut raw: RawRule, datapath: &Datapath) -> VResult<Rule> {
        let p = format!("rules[{i}]");
        let name = raw.name.trim().to_owned();
        if name.is_empty() {
            return Err(self.err(format!("{p}.name"), "must not be empty"));
        }
        if name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(self.err(
                format!("{p}.name"),
                format!("{name:?}: use at most 64 letters, digits, '-', '_' or '.'"),
            ));
        }
        let remote_ports = self.ports(&format!("{p}.remote_ports"), &raw.remote_ports)?;
        let local_ports = self.ports(&format!("{p}.local_ports"), &raw.local_ports)?;
        let mut dscp = Vec::new();
        for (j, v) in raw.dscp.iter().enumerate() {
            let path = format!("{p}.dscp[{j}]");
            let value = match v {
                IntOrString::Int(n) if (0..=63).contains(n) => *n as u8,
                IntOrString::Int(n) => {
                    return Err(self.err(path, format!("DSCP {n} is out of range (0..=63)")))
                }
                IntOrString::Str(s) => parse_dscp(s).ok_or_else(|| {
                    self.err(
                        path,
                        format!("{s:?} is not a DSCP value (0..=63) or name like \"LE\" or \"CS1\""),
                    )
                })?,
            };
            dscp.push(value);
        }
        let mut lan_hosts = Vec::new();
        for (j, s) in raw.lan_hosts.iter().enumerate() {
            let s = s.trim();
            // A bare address is a /32 or /128; host bits in a CIDR are dropped ("192.168.1.5/24"
            // means the 192.168.1.0/24 network, as iptables reads it).
            let net = IpNet::from_str(s)
                .or_else(|_| IpAddr::from_str(s).map(IpNet::from))
                .map_err(|_| {
                    self.err(
                        format!("{p}.lan_hosts[{j}]"),
                        format!("{s:?} is not an address or CIDR like \"192.168.1.20/32\""),
                    )
                })?;
            lan_hosts.push(net.trunc());
        }
        if !datapath.ipv6 && !lan_hosts.is_empty() && lan_hosts.iter().all(|n| matches!(n, IpNet::V6(_))) {
            return Err(self.err(
                format!("{p}.lan_hosts"),
                format!(
                    "all entries are IPv6 but {} is false, so the rule could never match",
                    self.name("datapath.ipv6")
                ),
            ));
        }
        let mut lan_macs = Vec::new();
        for (j, s) in raw.lan_macs.iter().enumerate() {
            let mac = s
                .parse::<MacAddr>()
                .map_err(|why| self.err(format!("{p}.lan_macs[{j}]"), why))?;
            lan_macs.push(mac);
        }
        if !lan_macs.is_empty() && datapath.hook != Hook::Forward {
            return Err(self.err(
                format!("{p}.lan_macs"),
                format!(
                    "MAC addresses can only be matched on packets a LAN host sends through the router; \
                     they need {} = \"forward\" (iptables also rejects a MAC match reachable from OUTPUT)",
                    self.name("datapath.hook")
                ),
            ));
        }
        if remote_ports.is_empty()
            && local_ports.is_empty()
            && dscp.is_empty()
            && lan_hosts.is_empty()
            && lan_macs.is_empty()
        {
            let criteria = ["remote_ports", "local_ports", "dscp", "lan_hosts", "lan_macs"]
                .map(|c| match self.format {
                    Format::Toml => c.to_owned(),
                    Format::Uci => uci::option_name(c),
                })
                .join(", ");
            return Err(self.err(
                p,
                format!(
                    "rule {name:?} has no criteria ({criteria}); it would class every flow as background"
                ),
            ));
        }
        let controller = match raw.controller.take() {
            None => default_controller(),
            Some(c) => c.validate(self, &format!("{p}.controller"))?,
        };
        let share = self.share(&p, &raw, &controller)?;
        Ok(Rule {
            name,
            remote_ports,
            local_ports,
            dscp,
            lan_hosts,
            lan_macs,
            controller,
            share,
        })
    }

    fn ports(&self, path: &str, raw: &[IntOrString]) -> VResult<Vec<PortRange>> {
        raw.iter()
            .enumerate()
            .map(|(j, v)| {
                let path = format!("{path}[{j}]");
                match v {
                    IntOrString::Int(0) => Err(self.err(path, "port 0 is not a valid port")),
                    IntOrString::Int(n) if (1..=65535).contains(n) => Ok(PortRange::single(*n as u16)),
                    IntOrString::Int(n) => {
                        Err(self.err(path, format!("port {n} is out of range (1..=65535)")))
                    }
                    IntOrString::Str(s) => s.parse::<PortRange>().map_err(|why| self.err(path, why)),
                }
            })
            .collect()
    }
}

fn is_contiguous(mask: u32) -> bool {
    mask != 0 && (mask >> mask.trailing_zeros()).trailing_ones() == mask.count_ones()
}

/// Interface names as Linux and iptables take them: 1..=15 bytes of letters, digits, `-_.@`,
/// optionally ending in iptables' `+` wildcard.
fn check_interface_name(name: &str) -> Result<(), String> {
    let base = name.strip_suffix('+').unwrap_or(name);
    if name.is_empty() || name.len() > 15 {
        return Err(format!("{name:?}: interface names are 1 to 15 characters"));
    }
    if !base
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
    {
        return Err(format!(
            "{name:?}: interface names use letters, digits, '-', '_', '.', '@' (and a trailing '+' wildcard)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_masks() {
        assert!(is_contiguous(0x00ff_0000));
        assert!(is_contiguous(0xffff_ffff));
        assert!(is_contiguous(0x0000_00ff));
        assert!(!is_contiguous(0x00f0_f000));
        assert!(!is_contiguous(0));
    }

    #[test]
    fn dscp_names() {
        assert_eq!(parse_dscp("LE"), Some(1));
        assert_eq!(parse_dscp("cs1"), Some(8));
        assert_eq!(parse_dscp("EF"), Some(46));
        assert_eq!(parse_dscp("63"), Some(63));
        assert_eq!(parse_dscp("64"), None);
        assert_eq!(parse_dscp("XX"), None);
    }
}
