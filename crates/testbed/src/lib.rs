//! Network-namespace testbed for Slipstream's end-to-end tests and lab.
//!
//! Why it exists: Slipstream clamps the TCP receive window of background flows on a home router;
//! whether that works can only be judged on a path with a real bottleneck, a real RTT and real
//! TCP senders. [`Testbed`] builds such a path out of four network namespaces on one host and
//! tears it down again, also after a panic or a half-finished build:
//!
//! ```text
//!  server ──┐                                       ┌── client
//!  server2 ─┤ isp ──────────────── router ──────────┤── client2
//!  ...      │                                       │   ...
//!  eth0   isp-srv (bridge)  isp-rtr  wan0   br-lan (bridge)  eth0
//!  10.77.1.(1+n)  .1.1     10.77.2.1   .2.2  10.77.3.1    10.77.3.(1+n)   (+ fd77:N::/64 likewise)
//! ```
//!
//! * `server` (and `server2` ... with [`TopologySpec::servers`] > 1) runs iperf3 servers (the
//!   sender of downloads); servers hang off a bridge in `isp`, so they share its links.
//! * `isp` forwards and hosts the delay element (`slipstream-delay`, see its module docs),
//!   fed from `mangle FORWARD` via NFQUEUE in both directions (queue 1: downloads, entering on
//!   `isp-srv`; queue 2: uploads, entering on `isp-rtr`), each delayed by the one-way delay. The
//!   download bottleneck is a `tbf` on `isp-rtr` egress. `mangle FORWARD` runs before the egress
//!   qdisc, so packets are delayed first and then queue at the bottleneck, like at a DSLAM.
//! * `router` forwards between `wan0` and `br-lan` (named like OpenWrt's LAN bridge, so the default config applies as is); the upload bottleneck is a `tbf` on `wan0`
//!   egress. The daemon under test runs here (started by the caller with [`Testbed::spawn_in`] or
//!   [`Testbed::exec`]) and is configured with [`Testbed::router_lan_if`].
//! * `client` (and `client2` ... with [`TopologySpec::clients`] > 1) are the LAN hosts, the
//!   receivers of downloads, ports of the router's LAN bridge as on a home router.
//!
//! Interfaces are created directly inside their namespaces, so their names are fixed (and
//! short) while namespace names carry the per-test prefix: `<prefix>-srv`, `-srv2`, ..., `-isp`,
//! `-rtr`, `-cli`, `-cli2`, .... TSO/GSO/GRO are off on every veth (one packet = one frame, as in the Vulture
//! testbed), forwarding is on in `isp` and `router`, `tcp_no_metrics_save=1` in the end hosts,
//! and TCP buffer maxima are set to 8 MiB there (far above 10 Mbit/s × 100 ms + one BDP queue).
//! With [`TopologySpec::flood_source`], a WAN-side namespace `<prefix>-fld` is wired straight to
//! the router (`fld0` -- `wan1`, 10.77.4.0/24, neither shaped nor delayed) and the router routes
//! 198.18.0.0/15 (RFC 2544's benchmarking range) to it: floods from spoofed sources in that
//! range (`slipstream-synflood`) reach the router at full speed, past the 10 Mbit/s bottleneck and
//! the delay element, and anything answering them goes back into that namespace.
//! LAN hosts listed in [`TopologySpec::timestamps_off`] run TCP without timestamps (Windows'
//! default). The isp counts the TCP resets it forwards ([`Testbed::tcp_resets`]).
//!
//! **tbf parameters.** `rate` = [`TopologySpec::rate_mbit`]; `burst` = max(2 frames of 1514
//! bytes, 1 ms of tokens) (3028 bytes at 10 Mbit/s: a full frame always fits, and the shaper
//! never emits more than ~2.4 ms of line-rate burst, so the rate is honest at sub-RTT scales);
//! `limit` = [`TopologySpec::queue_bytes`], by default one BDP (rate × RTT, 125 000 bytes at
//! 10 Mbit/s and 100 ms).
//!
//! **Delay binary.** The library starts `slipstream-delay` from [`delay_binary`] (or
//! [`TopologySpec::delay_bin`]); callers outside this crate must have built it first:
//! `cargo build -p slipstream-testbed --bins`.
//!
//! Requires root, `ip`, `tc`, `ethtool`, `sysctl`, `iptables-legacy`/`ip6tables-legacy`,
//! `ping` and `iperf3`; see [`netns_supported`] for a skip check.

pub mod cmd;
pub mod daemon;
pub mod dnsmasq;
pub mod iperf;
pub mod scenario;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

pub use cmd::RttStats;
pub use iperf::{Interval, IperfResult, IperfRun};

/// Parameters of the topology. Both directions are shaped (tbf) at `rate_mbit` with the same
/// queue; the delay element delays each direction by its own one-way delay.
#[derive(Debug, Clone)]
pub struct TopologySpec {
    /// Access bottleneck rate in Mbit/s, both directions (default 10).
    pub rate_mbit: f64,
    /// One-way delay added in each direction by the delay element, ms (default 50, i.e. a
    /// 100 ms base RTT). 0 disables the delay element.
    pub one_way_delay_ms: f64,
    /// tbf queue limit in bytes for both bottlenecks; `None` = one BDP (see
    /// [`TopologySpec::effective_queue_bytes`]). [`TopologySpec::with_queue_packets`] sets it in
    /// full-size frames.
    pub queue_bytes: Option<u64>,
    /// Prefix of the namespace names; must be unique per concurrently running testbed (use
    /// [`unique_prefix`]). Namespaces are `<prefix>-srv`, `-isp`, `-rtr`, `-cli`.
    pub name_prefix: String,
    /// Path of `slipstream-delay`; `None` = [`delay_binary`].
    pub delay_bin: Option<PathBuf>,
    /// Also configure IPv6 (fd77:N::/64 per link) and delay IPv6 (default true).
    pub ipv6: bool,
    /// One-way delay of the upload direction (client → server), ms, if it differs from
    /// `one_way_delay_ms` (which then applies to downloads only). `None` = symmetric.
    pub upload_delay_ms: Option<f64>,
    /// Number of server namespaces (1-100, default 1), all behind the same bottleneck.
    pub servers: u8,
    /// Number of LAN hosts (1-100, default 1), all on the router's LAN bridge.
    pub clients: u8,
    /// LAN hosts (1-based numbers) with TCP timestamps off (`net.ipv4.tcp_timestamps=0` in their
    /// namespace; it covers IPv6 too), as on Windows: their flows carry no timestamps at all, so
    /// the daemon must do without them.
    pub timestamps_off: Vec<u8>,
    /// Adds the flood namespace [`Ns::Flood`] (see the crate docs; default false).
    pub flood_source: bool,
}

impl Default for TopologySpec {
    fn default() -> Self {
        TopologySpec {
            rate_mbit: 10.0,
            one_way_delay_ms: 50.0,
            queue_bytes: None,
            name_prefix: unique_prefix("ss"),
            delay_bin: None,
            ipv6: true,
            upload_delay_ms: None,
            servers: 1,
            clients: 1,
            timestamps_off: Vec::new(),
            flood_source: false,
        }
    }
}

impl TopologySpec {
    /// Default spec with the given namespace prefix.
    pub fn with_prefix(prefix: impl Into<String>) -> Self {
        TopologySpec {
            name_prefix: prefix.into(),
            ..Default::default()
        }
    }

    /// Sets the queue limit to `n` full-size (1514-byte) frames.
    pub fn with_queue_packets(mut self, n: u64) -> Self {
        self.queue_bytes = Some(n * cmd::FRAME_BYTES);
        self
    }

    /// Turns TCP timestamps off on LAN hosts `hosts` (see [`TopologySpec::timestamps_off`]).
    pub fn with_timestamps_off(mut self, hosts: impl IntoIterator<Item = u8>) -> Self {
        self.timestamps_off.extend(hosts);
        self
    }

    /// Base RTT in ms: download plus upload one-way delay (twice the one-way delay when
    /// symmetric).
    pub fn rtt_ms(&self) -> f64 {
        self.one_way_delay_ms + self.upload_delay_ms()
    }

    /// One-way delay of the upload direction, ms.
    pub fn upload_delay_ms(&self) -> f64 {
        self.upload_delay_ms.unwrap_or(self.one_way_delay_ms)
    }

    fn delay_element_needed(&self) -> bool {
        self.one_way_delay_ms > 0.0 || self.upload_delay_ms() > 0.0
    }

    /// Bottleneck rate in bit/s.
    pub fn rate_bps(&self) -> u64 {
        (self.rate_mbit * 1e6).round() as u64
    }

    /// Bandwidth-delay product in bytes (rate × base RTT).
    pub fn bdp_bytes(&self) -> u64 {
        (self.rate_mbit * 1e6 / 8.0 * self.rtt_ms() / 1000.0).round() as u64
    }

    /// The tbf `limit` used: `queue_bytes` or one BDP, at least two full frames.
    pub fn effective_queue_bytes(&self) -> u64 {
        self.queue_bytes
            .unwrap_or_else(|| self.bdp_bytes())
            .max(2 * cmd::FRAME_BYTES)
    }

    /// The tbf `burst` used (see the crate docs).
    pub fn tbf_burst_bytes(&self) -> u64 {
        cmd::tbf_burst_bytes(self.rate_bps())
    }

    fn validate(&self) -> Result<()> {
        if !(self.rate_mbit.is_finite() && self.rate_mbit > 0.0) {
            bail!("rate_mbit must be positive, got {}", self.rate_mbit);
        }
        if !(self.one_way_delay_ms.is_finite() && self.one_way_delay_ms >= 0.0) {
            bail!("one_way_delay_ms must be >= 0, got {}", self.one_way_delay_ms);
        }
        let up = self.upload_delay_ms();
        if !(up.is_finite() && up >= 0.0) {
            bail!("upload_delay_ms must be >= 0, got {up}");
        }
        for (what, n) in [("servers", self.servers), ("clients", self.clients)] {
            if !(1..=MAX_HOSTS).contains(&n) {
                bail!("{what} must be 1-{MAX_HOSTS}, got {n}");
            }
        }
        if let Some(n) = self
            .timestamps_off
            .iter()
            .find(|n| !(1..=self.clients).contains(*n))
        {
            bail!(
                "timestamps_off names LAN host {n}, but there are {} LAN hosts",
                self.clients
            );
        }
        let p = &self.name_prefix;
        if p.is_empty() || p.len() > 40 || !p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            bail!("name_prefix must be 1-40 chars of [A-Za-z0-9_], got {p:?}");
        }
        Ok(())
    }
}

static PREFIX_COUNTER: AtomicU32 = AtomicU32::new(0);

/// A namespace prefix unique within this host at this moment: `<base><pid>x<n>`.
/// Pass the same `base` to [`cleanup_stale`] to remove leftovers of crashed runs (but only when
/// no other run with that base is active).
pub fn unique_prefix(base: &str) -> String {
    format!(
        "{base}{}x{}",
        std::process::id(),
        PREFIX_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The hosts of the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ns {
    /// The first server: iperf3 servers, sender of downloads.
    Server,
    /// Forwarder with the delay element and the download bottleneck.
    Isp,
    /// Home router: the daemon under test runs here; upload bottleneck on its WAN side.
    Router,
    /// The first LAN host, receiver of downloads.
    Client,
    /// Server number n >= 2 (see [`TopologySpec::servers`]); [`Ns::server`] builds it.
    ServerN(u8),
    /// LAN host number n >= 2 (see [`TopologySpec::clients`]); [`Ns::client`] builds it.
    ClientN(u8),
    /// WAN-side source of floods, linked straight to the router (with
    /// [`TopologySpec::flood_source`]).
    Flood,
}

/// Most servers or LAN hosts a topology may have (addresses are 10.77.{1,3}.(1 + n)).
pub const MAX_HOSTS: u8 = 100;

impl Ns {
    /// Server number `n` (1-based; 0 and 1 are the first server).
    pub fn server(n: u8) -> Ns {
        if n <= 1 {
            Ns::Server
        } else {
            Ns::ServerN(n)
        }
    }

    /// LAN host number `n` (1-based; 0 and 1 are the first host).
    pub fn client(n: u8) -> Ns {
        if n <= 1 {
            Ns::Client
        } else {
            Ns::ClientN(n)
        }
    }

    /// The host's number among the servers or clients (1 for the first and for isp/router).
    pub fn number(self) -> u8 {
        match self {
            Ns::ServerN(n) | Ns::ClientN(n) => n,
            _ => 1,
        }
    }

    /// Suffix of the namespace name: `srv`, `srv2`, ..., `isp`, `rtr`, `cli`, `cli2`, ....
    pub fn suffix(self) -> String {
        match self {
            Ns::Server => "srv".into(),
            Ns::Isp => "isp".into(),
            Ns::Router => "rtr".into(),
            Ns::Client => "cli".into(),
            Ns::Flood => "fld".into(),
            Ns::ServerN(n) => format!("srv{n}"),
            Ns::ClientN(n) => format!("cli{n}"),
        }
    }
}

/// Router LAN interface (towards the clients): a bridge, LAN host n's veth is its port `lan<n>`.
pub const ROUTER_LAN_IF: &str = "br-lan";
/// Router WAN interface (towards the isp); the upload bottleneck.
pub const ROUTER_WAN_IF: &str = "wan0";
/// Router interface towards the flood namespace (unshaped).
pub const ROUTER_FLOOD_IF: &str = "wan1";
/// The flood namespace's interface towards the router.
pub const FLOOD_IF: &str = "fld0";
/// Where floods come from: RFC 2544's benchmarking range, routed to the flood namespace.
pub const FLOOD_SOURCES: &str = "198.18.0.0/15";
/// Isp interface towards the router; the download bottleneck.
pub const ISP_DOWN_IF: &str = "isp-rtr";
/// Isp interface towards the servers (a bridge; server n's veth is its port `srvp<n>`).
pub const ISP_UP_IF: &str = "isp-srv";
/// End-host interface name (server and client).
pub const HOST_IF: &str = "eth0";
/// NFQUEUE queue number for the download direction (in the isp namespace).
pub const DOWNLOAD_QUEUE: u16 = 1;
/// NFQUEUE queue number for the upload direction (in the isp namespace).
pub const UPLOAD_QUEUE: u16 = 2;
/// The isp's (empty) chain every forwarded TCP RST jumps to; its counter is [`Testbed::tcp_resets`].
const RST_CHAIN: &str = "ss-rst";

/// Link numbers (10.77.<n>.0/24, fd77:<n>::/64): servers-isp, router-isp, LAN.
const SERVER_LINK: u8 = 1;
const WAN_LINK: u8 = 2;
const LAN_LINK: u8 = 3;
const FLOOD_LINK: u8 = 4;

fn v4(link: u8, host: u8) -> String {
    format!("10.77.{link}.{host}")
}

fn v6(link: u8, host: u8) -> String {
    format!("fd77:{link}::{host}")
}

fn host_addr(link: u8, host: u8, v6_: bool) -> IpAddr {
    (if v6_ { v6(link, host) } else { v4(link, host) })
        .parse()
        .expect("valid literal")
}

/// Which LAN host and which server an iperf3 flow runs between (1-based numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IperfEnds {
    /// LAN host number.
    pub client: u8,
    /// Server number.
    pub server: u8,
}

impl Default for IperfEnds {
    fn default() -> Self {
        IperfEnds { client: 1, server: 1 }
    }
}

struct Owned {
    label: String,
    child: Child,
}

/// A built topology. Dropping it tears everything down (see [`Testbed::teardown`]).
pub struct Testbed {
    spec: TopologySpec,
    /// Namespaces this testbed created (only these are deleted).
    created: Vec<String>,
    owned: Mutex<Vec<Owned>>,
}

impl Testbed {
    /// Builds the topology. On error everything created so far is removed again.
    pub fn build(spec: TopologySpec) -> Result<Testbed> {
        spec.validate()?;
        let mut tb = Testbed {
            spec,
            created: Vec::new(),
            owned: Mutex::new(Vec::new()),
        };
        // On `?` below, `tb` is dropped and Drop tears down what was made.
        tb.setup()
            .with_context(|| format!("building testbed {}", tb.spec.name_prefix))?;
        Ok(tb)
    }

    fn setup(&mut self) -> Result<()> {
        let delay_bin = self.spec.delay_bin.clone().unwrap_or_else(delay_binary);
        if self.spec.delay_element_needed() && !delay_bin.is_file() {
            bail!(
                "delay element {} not found; build it with `cargo build -p slipstream-testbed --bins` \
                 or set SLIPSTREAM_DELAY_BIN",
                delay_bin.display()
            );
        }
        let ipv6 = self.spec.ipv6;
        let existing = list_netns()?;
        for ns in self.namespaces() {
            let name = self.ns_name(ns);
            if existing.contains(&name) {
                bail!("namespace {name} already exists (stale run? see cleanup_stale)");
            }
            cmd::run("ip", &["netns", "add", &name])?;
            self.created.push(name.clone());
            cmd::run("ip", &["-n", &name, "link", "set", "lo", "up"])?;
        }
        // The router's WAN link to the isp, then a bridge on each side with one port per host.
        self.add_veth(Ns::Router, ROUTER_WAN_IF, Ns::Isp, ISP_DOWN_IF)?;
        self.add_address(Ns::Router, ROUTER_WAN_IF, WAN_LINK, 2)?;
        self.add_address(Ns::Isp, ISP_DOWN_IF, WAN_LINK, 1)?;
        for (side, bridge, link) in [
            (Ns::Isp, ISP_UP_IF, SERVER_LINK),
            (Ns::Router, ROUTER_LAN_IF, LAN_LINK),
        ] {
            let ns = self.ns_name(side);
            cmd::run("ip", &["-n", &ns, "link", "add", bridge, "type", "bridge"])?;
            // Best effort: a bridge may refuse some feature changes; its ports have them off.
            let _ = cmd::run_command(self.exec(
                side,
                &["ethtool", "-K", bridge, "tso", "off", "gso", "off", "gro", "off"],
            ));
            self.add_address(side, bridge, link, 1)?;
        }
        for n in 1..=self.spec.servers {
            let port = format!("srvp{n}");
            self.add_veth(Ns::server(n), HOST_IF, Ns::Isp, &port)?;
            self.enslave(Ns::Isp, &port, ISP_UP_IF)?;
            self.add_address(Ns::server(n), HOST_IF, SERVER_LINK, 1 + n)?;
        }
        for n in 1..=self.spec.clients {
            let port = format!("lan{n}");
            self.add_veth(Ns::client(n), HOST_IF, Ns::Router, &port)?;
            self.enslave(Ns::Router, &port, ROUTER_LAN_IF)?;
            self.add_address(Ns::client(n), HOST_IF, LAN_LINK, 1 + n)?;
        }
        if self.spec.flood_source {
            self.add_veth(Ns::Flood, FLOOD_IF, Ns::Router, ROUTER_FLOOD_IF)?;
            self.add_address(Ns::Flood, FLOOD_IF, FLOOD_LINK, 2)?;
            self.add_address(Ns::Router, ROUTER_FLOOD_IF, FLOOD_LINK, 1)?;
        }
        // Routing: end hosts and router default towards the isp side; isp knows the LAN.
        let mut routes = vec![
            (Ns::Router, "default".to_string(), v4(WAN_LINK, 1)),
            (Ns::Isp, format!("10.77.{LAN_LINK}.0/24"), v4(WAN_LINK, 2)),
        ];
        for n in 1..=self.spec.servers {
            routes.push((Ns::server(n), "default".into(), v4(SERVER_LINK, 1)));
        }
        for n in 1..=self.spec.clients {
            routes.push((Ns::client(n), "default".into(), v4(LAN_LINK, 1)));
        }
        if self.spec.flood_source {
            // The flood's sources live behind the flood link (so reverse-path filtering passes
            // them, and any answer goes back there); the flood namespace reaches the LAN via it.
            routes.push((Ns::Flood, "default".into(), v4(FLOOD_LINK, 1)));
            routes.push((Ns::Router, FLOOD_SOURCES.into(), v4(FLOOD_LINK, 2)));
        }
        if ipv6 {
            routes.push((Ns::Router, "default".into(), v6(WAN_LINK, 1)));
            routes.push((Ns::Isp, format!("fd77:{LAN_LINK}::/64"), v6(WAN_LINK, 2)));
            for n in 1..=self.spec.servers {
                routes.push((Ns::server(n), "default".into(), v6(SERVER_LINK, 1)));
            }
            for n in 1..=self.spec.clients {
                routes.push((Ns::client(n), "default".into(), v6(LAN_LINK, 1)));
            }
        }
        for (ns, dst, via) in routes {
            cmd::run(
                "ip",
                &["-n", &self.ns_name(ns), "route", "add", &dst, "via", &via],
            )?;
        }
        // Sysctls.
        for ns in [Ns::Isp, Ns::Router] {
            self.sysctl(ns, "net.ipv4.ip_forward", "1")?;
            if ipv6 {
                self.sysctl(ns, "net.ipv6.conf.all.forwarding", "1")?;
            }
        }
        for ns in self.end_hosts() {
            self.sysctl(ns, "net.ipv4.tcp_no_metrics_save", "1")?;
            self.sysctl(ns, "net.ipv4.tcp_rmem", "4096 131072 8388608")?;
            self.sysctl(ns, "net.ipv4.tcp_wmem", "4096 16384 8388608")?;
        }
        for &n in &self.spec.timestamps_off {
            self.sysctl(Ns::client(n), "net.ipv4.tcp_timestamps", "0")?;
        }
        // Bottlenecks.
        let (rate, burst, limit) = (
            self.spec.rate_bps(),
            self.spec.tbf_burst_bytes(),
            self.spec.effective_queue_bytes(),
        );
        for (ns, dev) in [(Ns::Isp, ISP_DOWN_IF), (Ns::Router, ROUTER_WAN_IF)] {
            cmd::run(
                "tc",
                &[
                    &["-n".to_string(), self.ns_name(ns)][..],
                    &cmd::tbf_args(dev, rate, burst, limit),
                ]
                .concat(),
            )?;
        }
        let isp = self.ns_name(Ns::Isp);
        let tools = self.iptables();
        // RST counter (see `tcp_resets`): an empty chain jumped to by every forwarded RST.
        let count_resets = format!("-A FORWARD -p tcp --tcp-flags RST RST -j {RST_CHAIN}");
        for tool in &tools {
            cmd::run_command(self.exec_named(&isp, &[tool, "-N", RST_CHAIN]))?;
            let args: Vec<&str> = std::iter::once(*tool).chain(count_resets.split(' ')).collect();
            cmd::run_command(self.exec_named(&isp, &args))?;
        }
        // Delay element, then the rules feeding it (NFQUEUE without a listener drops).
        if self.spec.delay_element_needed() {
            self.start_delay_element(&delay_bin)?;
            for tool in tools {
                for (dev, q) in [(ISP_UP_IF, DOWNLOAD_QUEUE), (ISP_DOWN_IF, UPLOAD_QUEUE)] {
                    let q = q.to_string();
                    let args = [
                        tool,
                        "-t",
                        "mangle",
                        "-A",
                        "FORWARD",
                        "-i",
                        dev,
                        "-j",
                        "NFQUEUE",
                        "--queue-num",
                        &q,
                    ];
                    cmd::run_command(self.exec_named(&isp, &args))?;
                }
            }
        }
        Ok(())
    }

    fn start_delay_element(&self, bin: &std::path::Path) -> Result<()> {
        let d = format!("{}", self.spec.one_way_delay_ms);
        let d2 = format!("{}", self.spec.upload_delay_ms());
        let (q1, q2) = (DOWNLOAD_QUEUE.to_string(), UPLOAD_QUEUE.to_string());
        let mut c = self.exec(Ns::Isp, &[bin.as_os_str()]);
        c.args([
            "--queue",
            &q1,
            "--delay-ms",
            &d,
            "--queue2",
            &q2,
            "--delay2-ms",
            &d2,
        ]);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = c.spawn().with_context(|| format!("spawning {}", bin.display()))?;
        let stdout = child.stdout.take().expect("piped");
        self.own("slipstream-delay", child);
        // Read the `ready` line on a thread (with a timeout here); the thread then keeps
        // draining stdout until the process exits.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next();
            let _ = tx.send(first.map(|l| l.unwrap_or_default()));
            for _ in lines {}
        });
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Some(line)) if line.trim() == "ready" => Ok(()),
            Ok(other) => bail!("slipstream-delay did not report ready (got {other:?}; see its stderr)"),
            Err(_) => bail!("slipstream-delay did not report ready within 5 s"),
        }
    }

    fn own(&self, label: &str, child: Child) -> u32 {
        let pid = child.id();
        self.owned.lock().unwrap_or_else(|e| e.into_inner()).push(Owned {
            label: label.into(),
            child,
        });
        pid
    }

    fn sysctl(&self, ns: Ns, key: &str, value: &str) -> Result<()> {
        cmd::run_command(self.exec(ns, &["sysctl", "-q", "-w", &format!("{key}={value}")]))?;
        Ok(())
    }

    /// A veth pair `a:if_a` -- `b:if_b`, both ends up, segmentation/receive offloads off (one
    /// packet = one frame).
    fn add_veth(&self, a: Ns, if_a: &str, b: Ns, if_b: &str) -> Result<()> {
        let (na, nb) = (self.ns_name(a), self.ns_name(b));
        cmd::run(
            "ip",
            &[
                "-n", &na, "link", "add", if_a, "type", "veth", "peer", "name", if_b, "netns", &nb,
            ],
        )?;
        for (ns, dev) in [(a, if_a), (b, if_b)] {
            cmd::run_command(self.exec(
                ns,
                &["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"],
            ))?;
            cmd::run("ip", &["-n", &self.ns_name(ns), "link", "set", dev, "up"])?;
        }
        Ok(())
    }

    /// Makes `port` a port of `bridge` (both in `ns`).
    fn enslave(&self, ns: Ns, port: &str, bridge: &str) -> Result<()> {
        let name = self.ns_name(ns);
        cmd::run("ip", &["-n", &name, "link", "set", port, "master", bridge])?;
        cmd::run("ip", &["-n", &name, "link", "set", bridge, "up"])?;
        Ok(())
    }

    /// Gives `dev` in `ns` host address `host` of link `link` (and its IPv6 twin), and sets it up.
    fn add_address(&self, ns: Ns, dev: &str, link: u8, host: u8) -> Result<()> {
        let name = self.ns_name(ns);
        let a4 = format!("{}/24", v4(link, host));
        cmd::run("ip", &["-n", &name, "addr", "add", &a4, "dev", dev])?;
        if self.spec.ipv6 {
            let a6 = format!("{}/64", v6(link, host));
            cmd::run(
                "ip",
                &["-n", &name, "-6", "addr", "add", &a6, "dev", dev, "nodad"],
            )?;
        }
        cmd::run("ip", &["-n", &name, "link", "set", dev, "up"])?;
        Ok(())
    }

    /// Every namespace of the topology, in creation order: servers, isp, router, LAN hosts.
    pub fn namespaces(&self) -> Vec<Ns> {
        let mut v: Vec<Ns> = (1..=self.spec.servers).map(Ns::server).collect();
        v.extend([Ns::Isp, Ns::Router]);
        v.extend((1..=self.spec.clients).map(Ns::client));
        if self.spec.flood_source {
            v.push(Ns::Flood);
        }
        v
    }

    /// The end hosts: servers and LAN hosts.
    pub fn end_hosts(&self) -> Vec<Ns> {
        self.namespaces()
            .into_iter()
            .filter(|n| !matches!(n, Ns::Isp | Ns::Router | Ns::Flood))
            .collect()
    }

    fn exec_named<S: AsRef<OsStr>>(&self, ns_name: &str, args: &[S]) -> Command {
        cmd::netns_exec(ns_name, args)
    }

    /// The spec this testbed was built from.
    pub fn spec(&self) -> &TopologySpec {
        &self.spec
    }

    /// Name of a namespace (`<prefix>-srv` etc.), e.g. for `ip netns exec`.
    pub fn ns_name(&self, ns: Ns) -> String {
        format!("{}-{}", self.spec.name_prefix, ns.suffix())
    }

    /// The router's LAN interface (towards the client), for the daemon's config.
    pub fn router_lan_if(&self) -> &'static str {
        ROUTER_LAN_IF
    }

    /// The router's WAN interface (towards the isp).
    pub fn router_wan_if(&self) -> &'static str {
        ROUTER_WAN_IF
    }

    /// Makes the router masquerade what leaves its WAN side, as a home router does: conntrack's
    /// original tuple then holds the LAN address, its reply tuple the router's WAN address.
    pub fn masquerade(&self) -> Result<()> {
        self.run_in(
            Ns::Router,
            &[
                "iptables-legacy",
                "-w",
                "-t",
                "nat",
                "-A",
                "POSTROUTING",
                "-o",
                ROUTER_WAN_IF,
                "-j",
                "MASQUERADE",
            ],
        )
        .map(|_| ())
    }

    /// Address of the first server (iperf3 target): 10.77.1.2, or fd77:1::2 with `v6`.
    pub fn server_addr(&self, v6_: bool) -> IpAddr {
        self.server_addr_of(1, v6_)
    }

    /// Address of server `n` (1-based): 10.77.1.(1 + n), or fd77:1::(1 + n) with `v6`.
    pub fn server_addr_of(&self, n: u8, v6_: bool) -> IpAddr {
        host_addr(SERVER_LINK, 1 + n.max(1), v6_)
    }

    /// Address of the first LAN host: 10.77.3.2, or fd77:3::2 with `v6`.
    pub fn client_addr(&self, v6_: bool) -> IpAddr {
        self.client_addr_of(1, v6_)
    }

    /// Address of LAN host `n` (1-based): 10.77.3.(1 + n), or fd77:3::(1 + n) with `v6`.
    pub fn client_addr_of(&self, n: u8, v6_: bool) -> IpAddr {
        host_addr(LAN_LINK, 1 + n.max(1), v6_)
    }

    /// The router's LAN address: 10.77.3.1, or fd77:3::1 with `v6`.
    pub fn router_lan_addr(&self, v6_: bool) -> IpAddr {
        host_addr(LAN_LINK, 1, v6_)
    }

    /// LAN prefixes (`10.77.3.0/24`, `fd77:3::/64`).
    pub fn lan_prefixes(&self) -> [&'static str; 2] {
        ["10.77.3.0/24", "fd77:3::/64"]
    }

    /// A [`Command`] running `args` inside namespace `ns` (`ip netns exec`); nothing is spawned.
    pub fn exec<S: AsRef<OsStr>>(&self, ns: Ns, args: &[S]) -> Command {
        cmd::netns_exec(&self.ns_name(ns), args)
    }

    /// Runs `args` in `ns` to completion; returns stdout, errors (with stderr) on failure.
    pub fn run_in<S: AsRef<OsStr>>(&self, ns: Ns, args: &[S]) -> Result<String> {
        cmd::run_command(self.exec(ns, args))
    }

    /// Spawns `args` in `ns` (stdin null, stdout/stderr inherited) and returns the child to the
    /// caller. The caller should stop it (e.g. SIGTERM + wait) before dropping the testbed;
    /// teardown SIGKILLs whatever still runs in the namespaces anyway.
    pub fn spawn_in<S: AsRef<OsStr>>(&self, ns: Ns, args: &[S]) -> Result<Child> {
        let mut c = self.exec(ns, args);
        c.stdin(Stdio::null());
        c.spawn()
            .with_context(|| format!("spawning `{}`", cmd::describe(&c)))
    }

    /// Like [`spawn_in`](Self::spawn_in) but the testbed owns the process: it gets SIGTERM (then
    /// SIGKILL after 2 s) at teardown. Stdout/stderr go to /dev/null. Returns the pid.
    pub fn spawn_owned<S: AsRef<OsStr>>(&self, ns: Ns, label: &str, args: &[S]) -> Result<u32> {
        let mut c = self.exec(ns, args);
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let child = c
            .spawn()
            .with_context(|| format!("spawning `{}`", cmd::describe(&c)))?;
        Ok(self.own(label, child))
    }

    /// TCP resets the isp forwarded so far, both directions (IPv4 and IPv6): refused or torn-down
    /// connections. iperf3 causes some itself at a download's end, see
    /// [`scenario::resets_during`].
    pub fn tcp_resets(&self) -> Result<u64> {
        let mut total = 0;
        for tool in self.iptables() {
            let out = self.run_in(Ns::Isp, &[tool, "-L", "FORWARD", "-v", "-n", "-x"])?;
            total += cmd::chain_jump_packets(&out, RST_CHAIN)
                .with_context(|| format!("no jump to {RST_CHAIN} in {tool} FORWARD:\n{out}"))?;
        }
        Ok(total)
    }

    /// The iptables tools of the address families in use.
    fn iptables(&self) -> Vec<&'static str> {
        let mut tools = vec!["iptables-legacy"];
        if self.spec.ipv6 {
            tools.push("ip6tables-legacy");
        }
        tools
    }

    /// Whether the delay element (if any) is still running.
    pub fn delay_element_alive(&self) -> bool {
        let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        owned
            .iter_mut()
            .filter(|o| o.label == "slipstream-delay")
            .all(|o| matches!(o.child.try_wait(), Ok(None)))
    }

    /// Pings the first server from the first LAN host (`count` pings every `interval_s`), after
    /// one warm-up ping.
    pub fn ping_stats(&self, count: u32, interval_s: f64) -> Result<RttStats> {
        self.ping_between(IperfEnds::default(), count, interval_s)
    }

    /// Pings server `ends.server` from LAN host `ends.client`, as [`ping_stats`](Self::ping_stats).
    pub fn ping_between(&self, ends: IperfEnds, count: u32, interval_s: f64) -> Result<RttStats> {
        let dst = self.server_addr_of(ends.server, false).to_string();
        let from = Ns::client(ends.client);
        // Warm-up: resolves neighbours on all three links so they do not inflate the sample.
        let _ = self.run_in(from, &["ping", "-c", "1", "-W", "2", &dst]);
        let (c, i) = (count.to_string(), format!("{interval_s}"));
        let out = self
            .run_in(from, &["ping", "-q", "-c", &c, "-i", &i, "-W", "2", &dst])
            .with_context(|| format!("ping {} -> {dst}", self.ns_name(from)))?;
        cmd::parse_ping_summary(&out)
    }

    /// Average client -> server ping RTT in ms (10 pings, 0.2 s apart).
    pub fn check_rtt(&self) -> Result<f64> {
        Ok(self.ping_stats(10, 0.2)?.avg)
    }

    /// Measures [`check_rtt`](Self::check_rtt) and fails unless it is within `tolerance_ms` of
    /// the spec's base RTT. Returns the measured RTT.
    pub fn assert_rtt_within(&self, tolerance_ms: f64) -> Result<f64> {
        let rtt = self.check_rtt()?;
        let want = self.spec.rtt_ms();
        if (rtt - want).abs() > tolerance_ms {
            bail!("ping RTT {rtt:.3} ms is not within {tolerance_ms} ms of {want} ms");
        }
        Ok(rtt)
    }

    /// Starts an iperf3 server on `port` in the (first) server namespace (owned; waits until
    /// listening).
    pub fn start_iperf_server(&self, port: u16) -> Result<()> {
        self.start_iperf_server_in(Ns::Server, port)
    }

    /// Starts an iperf3 server on `port` in namespace `ns` (owned; waits until listening).
    pub fn start_iperf_server_in(&self, ns: Ns, port: u16) -> Result<()> {
        let p = port.to_string();
        let pid = self.spawn_owned(
            ns,
            &format!("iperf3-server-{}-{port}", ns.suffix()),
            &["iperf3", "-s", "-p", &p],
        )?;
        let filter = format!("sport = :{port}");
        let listening = cmd::wait_until(Duration::from_secs(5), || {
            self.run_in(ns, &["ss", "-Hltn", &filter])
                .is_ok_and(|o| !o.trim().is_empty())
        });
        if !listening {
            bail!("iperf3 server (pid {pid}) not listening on port {port} after 5 s");
        }
        Ok(())
    }

    /// Starts a download (`iperf3 -R`: server sends, client receives) of `seconds` on `port` with
    /// congestion control `cc` (e.g. "cubic"; "" = system default), plus `extra` iperf3 args.
    /// Several may run concurrently (one server port each).
    pub fn run_download(&self, port: u16, seconds: u32, cc: &str, extra: &[&str]) -> Result<IperfRun> {
        self.run_iperf(IperfEnds::default(), port, seconds, cc, true, extra)
    }

    /// Starts an upload (client sends) — as [`run_download`](Self::run_download) without `-R`.
    pub fn run_upload(&self, port: u16, seconds: u32, cc: &str, extra: &[&str]) -> Result<IperfRun> {
        self.run_iperf(IperfEnds::default(), port, seconds, cc, false, extra)
    }

    /// Starts an iperf3 client on LAN host `ends.client` against server `ends.server` (its
    /// iperf3 server on `port` must run); `reverse` = download (`-R`).
    pub fn run_iperf(
        &self,
        ends: IperfEnds,
        port: u16,
        seconds: u32,
        cc: &str,
        reverse: bool,
        extra: &[&str],
    ) -> Result<IperfRun> {
        let server = self.server_addr_of(ends.server, false).to_string();
        let mut args = vec!["iperf3".to_string()];
        args.extend(iperf::client_args(&server, port, seconds, cc, reverse, extra));
        let mut c = self.exec(Ns::client(ends.client), &args);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let desc = cmd::describe(&c);
        let child = c.spawn().with_context(|| format!("spawning `{desc}`"))?;
        Ok(IperfRun::new(
            child,
            Duration::from_secs(u64::from(seconds) + 30),
            desc,
        ))
    }

    /// Tears everything down: SIGTERM to owned processes (SIGKILL after 2 s), SIGKILL to anything
    /// else still running in the namespaces, then deletes the namespaces (which deletes their
    /// veths, qdiscs and rules). Idempotent; called by `Drop`.
    pub fn teardown(&mut self) -> Result<()> {
        let mut owned = std::mem::take(&mut *self.owned.lock().unwrap_or_else(|e| e.into_inner()));
        for o in &owned {
            cmd::signal(o.child.id(), libc::SIGTERM);
        }
        for o in &mut owned {
            let exited = cmd::wait_until(Duration::from_secs(2), || !matches!(o.child.try_wait(), Ok(None)));
            if !exited {
                eprintln!(
                    "testbed: {} (pid {}) ignored SIGTERM, killing",
                    o.label,
                    o.child.id()
                );
                let _ = o.child.kill();
            }
            let _ = o.child.wait();
        }
        let mut errors = Vec::new();
        for name in std::mem::take(&mut self.created).into_iter().rev() {
            if let Err(e) = delete_netns(&name) {
                errors.push(format!("{e:#}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!("teardown: {}", errors.join("; ")))
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("testbed {}: {e:#}", self.spec.name_prefix);
        }
    }
}

/// Names of all named network namespaces (`ip netns list`).
pub fn list_netns() -> Result<Vec<String>> {
    let out = cmd::run("ip", &["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// SIGKILLs every process in namespace `name`, then deletes it.
fn delete_netns(name: &str) -> Result<()> {
    let pids = |n: &str| -> Vec<u32> {
        cmd::run("ip", &["netns", "pids", n])
            .map(|o| o.split_whitespace().filter_map(|p| p.parse().ok()).collect())
            .unwrap_or_default()
    };
    for pid in pids(name) {
        cmd::signal(pid, libc::SIGKILL);
    }
    cmd::wait_until(Duration::from_secs(2), || {
        pids(name).into_iter().all(|p| !cmd::pid_alive(p))
    });
    cmd::run("ip", &["netns", "del", name]).map(|_| ())
}

/// Removes every namespace whose name starts with `prefix` (processes inside are killed), e.g.
/// leftovers of a run that was SIGKILLed before its `Drop` ran. Returns the names removed.
/// Careful: this also removes namespaces of a *running* testbed with that prefix.
pub fn cleanup_stale(prefix: &str) -> Result<Vec<String>> {
    if prefix.is_empty() {
        bail!("cleanup_stale needs a non-empty prefix");
    }
    let mut removed = Vec::new();
    for name in list_netns()?.into_iter().filter(|n| n.starts_with(prefix)) {
        delete_netns(&name)?;
        removed.push(name);
    }
    Ok(removed)
}

/// Path of the `slipstream-delay` binary: `$SLIPSTREAM_DELAY_BIN` if set, else
/// `slipstream-delay` next to the current executable, or in its parent directory when the
/// executable lives in `target/<profile>/deps/` (test binaries). The caller must have built it:
/// `cargo build -p slipstream-testbed --bins` (same profile as the tests).
pub fn delay_binary() -> PathBuf {
    workspace_binary("slipstream-delay", "SLIPSTREAM_DELAY_BIN")
}

/// A binary of this workspace built beside the running executable (`target/<profile>/`, also
/// from `target/<profile>/deps/` where tests run), unless `env_var` names another path.
pub fn workspace_binary(name: &str, env_var: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env_var) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    binary_near(&exe, name)
}

fn binary_near(exe: &std::path::Path, name: &str) -> PathBuf {
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    dir.join(name)
}

/// Checks whether this process can build testbeds (root, `ip netns` usable, tools present).
/// Returns `Err(reason)` otherwise, for tests that skip themselves.
pub fn netns_supported() -> std::result::Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not running as root".into());
    }
    if let Err(e) = list_netns() {
        return Err(format!("`ip netns` unusable: {e:#}"));
    }
    for tool in ["tc", "ethtool", "sysctl", "iptables-legacy", "ping", "iperf3"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        if !found {
            return Err(format!("`{tool}` not found in PATH"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn spec_defaults() {
        let s = TopologySpec::with_prefix("t1");
        assert_eq!(s.rtt_ms(), 100.0);
        assert_eq!(s.rate_bps(), 10_000_000);
        assert_eq!(s.bdp_bytes(), 125_000);
        assert_eq!(s.effective_queue_bytes(), 125_000);
        assert_eq!(s.tbf_burst_bytes(), 3028);
        assert_eq!(s.clone().with_queue_packets(10).effective_queue_bytes(), 15_140);
        assert!(s.validate().is_ok());
        assert!(TopologySpec::with_prefix("bad-prefix").validate().is_err());
        let asym = TopologySpec {
            one_way_delay_ms: 30.0,
            upload_delay_ms: Some(20.0),
            ..s.clone()
        };
        assert_eq!(asym.rtt_ms(), 50.0);
        assert_eq!(asym.upload_delay_ms(), 20.0);
        assert!(TopologySpec {
            upload_delay_ms: Some(-1.0),
            ..s.clone()
        }
        .validate()
        .is_err());
        assert!(TopologySpec {
            clients: 2,
            ..s.clone()
        }
        .with_timestamps_off([2])
        .validate()
        .is_ok());
        assert!(s.clone().with_timestamps_off([2]).validate().is_err());
        assert!(TopologySpec { rate_mbit: 0.0, ..s }.validate().is_err());
    }

    #[test]
    fn prefixes_are_unique() {
        let (a, b) = (unique_prefix("ss"), unique_prefix("ss"));
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("ss{}x", std::process::id())));
    }

    #[test]
    fn delay_binary_location() {
        assert_eq!(
            binary_near(Path::new("/w/target/debug/deps/topology-abc"), "slipstream-delay"),
            Path::new("/w/target/debug/slipstream-delay")
        );
        assert_eq!(
            binary_near(Path::new("/w/target/release/slipstream-lab"), "slipstream-delay"),
            Path::new("/w/target/release/slipstream-delay")
        );
    }

    #[test]
    fn names_and_commands() {
        let tb = Testbed {
            spec: TopologySpec::with_prefix("ut9"),
            created: Vec::new(),
            owned: Mutex::new(Vec::new()),
        };
        assert_eq!(tb.ns_name(Ns::Router), "ut9-rtr");
        assert_eq!(tb.router_lan_if(), "br-lan");
        assert!(tb.router_lan_if().len() <= 15 && ISP_DOWN_IF.len() <= 15);
        assert_eq!(
            cmd::describe(&tb.exec(Ns::Client, &["true"])),
            "ip netns exec ut9-cli true"
        );
        assert_eq!(tb.server_addr(false).to_string(), "10.77.1.2");
        assert_eq!(tb.server_addr(true).to_string(), "fd77:1::2");
        assert_eq!(tb.client_addr(false).to_string(), "10.77.3.2");
        assert_eq!(tb.namespaces(), vec![Ns::Server, Ns::Isp, Ns::Router, Ns::Client]);
        drop(tb);
        let tb = Testbed {
            spec: TopologySpec {
                servers: 2,
                clients: 3,
                ..TopologySpec::with_prefix("ut8")
            },
            created: Vec::new(),
            owned: Mutex::new(Vec::new()),
        };
        assert_eq!(tb.ns_name(Ns::client(3)), "ut8-cli3");
        assert_eq!(tb.ns_name(Ns::client(1)), "ut8-cli");
        assert_eq!(tb.ns_name(Ns::server(2)), "ut8-srv2");
        assert_eq!(tb.server_addr_of(2, false).to_string(), "10.77.1.3");
        assert_eq!(tb.client_addr_of(3, true).to_string(), "fd77:3::4");
        assert_eq!(tb.end_hosts().len(), 5);
        assert_eq!(tb.namespaces().len(), 7);
        drop(tb);
        let tb = Testbed {
            spec: TopologySpec {
                flood_source: true,
                ..TopologySpec::with_prefix("ut6")
            },
            created: Vec::new(),
            owned: Mutex::new(Vec::new()),
        };
        assert_eq!(tb.ns_name(Ns::Flood), "ut6-fld");
        assert_eq!(tb.namespaces().last(), Some(&Ns::Flood));
        assert_eq!(tb.end_hosts(), vec![Ns::Server, Ns::Client]);
        assert!(TopologySpec {
            clients: 0,
            ..TopologySpec::with_prefix("ut7")
        }
        .validate()
        .is_err());
        drop(tb); // teardown with nothing created is a no-op
    }
}
