//! The topology: its parameters ([`TopologySpec`]), its namespaces ([`Ns`]), interface names,
//! addresses and queue numbers.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Result};

use crate::cmd;

/// Parameters of the topology. Both directions are shaped (tbf) at `rate_mbit` with the same
/// queue; the delay element delays each direction by its own one-way delay.
#[derive(Debug, Clone)]
pub struct TopologySpec {
    /// Access bottleneck rate in Mbit/s, both directions (default 10), or the download's where
    /// `upload_rate_mbit` is set.
    pub rate_mbit: f64,
    /// The upload bottleneck's rate, Mbit/s, if it differs (an asymmetric link: DSL, cable,
    /// 20/2 Mbit/s). `None` = symmetric.
    pub upload_rate_mbit: Option<f64>,
    /// One-way delay added in each direction by the delay element, ms (default 50, i.e. a
    /// 100 ms base RTT). 0 disables the delay element.
    pub one_way_delay_ms: f64,
    /// tbf queue limit in bytes for both bottlenecks; `None` = one BDP of each direction's rate (see
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
    /// Stalls of the delay element on purpose, `(mean gap, length)` in ms (see
    /// [`crate::stalls`]): jitter that no queue holds. Default none.
    pub stalls_ms: Option<(f64, f64)>,
}

impl Default for TopologySpec {
    fn default() -> Self {
        TopologySpec {
            rate_mbit: 10.0,
            upload_rate_mbit: None,
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
            stalls_ms: None,
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

    pub(crate) fn delay_element_needed(&self) -> bool {
        self.one_way_delay_ms > 0.0 || self.upload_delay_ms() > 0.0
    }

    /// Bottleneck rate in bit/s.
    pub fn rate_bps(&self) -> u64 {
        (self.rate_mbit * 1e6).round() as u64
    }

    /// The upload bottleneck's rate in Mbit/s (`rate_mbit` where symmetric).
    pub fn upload_rate_mbit(&self) -> f64 {
        self.upload_rate_mbit.unwrap_or(self.rate_mbit)
    }

    /// The upload bottleneck's rate in bit/s.
    pub fn upload_rate_bps(&self) -> u64 {
        (self.upload_rate_mbit() * 1e6).round() as u64
    }

    /// Bandwidth-delay product in bytes (rate × base RTT), of the download direction.
    pub fn bdp_bytes(&self) -> u64 {
        self.bdp_bytes_at(self.rate_mbit)
    }

    /// Bandwidth-delay product in bytes at `rate_mbit` over the base RTT.
    fn bdp_bytes_at(&self, rate_mbit: f64) -> u64 {
        (rate_mbit * 1e6 / 8.0 * self.rtt_ms() / 1000.0).round() as u64
    }

    /// The download tbf's `limit`: `queue_bytes` or one BDP, at least two full frames.
    pub fn effective_queue_bytes(&self) -> u64 {
        self.queue_bytes
            .unwrap_or_else(|| self.bdp_bytes())
            .max(2 * cmd::FRAME_BYTES)
    }

    /// The upload tbf's `limit`: `queue_bytes` or one BDP at the upload rate, at least two full
    /// frames.
    pub fn effective_upload_queue_bytes(&self) -> u64 {
        self.queue_bytes
            .unwrap_or_else(|| self.bdp_bytes_at(self.upload_rate_mbit()))
            .max(2 * cmd::FRAME_BYTES)
    }

    /// The download tbf's `burst` (see the crate docs).
    pub fn tbf_burst_bytes(&self) -> u64 {
        cmd::tbf_burst_bytes(self.rate_bps())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !(self.rate_mbit.is_finite() && self.rate_mbit > 0.0) {
            bail!("rate_mbit must be positive, got {}", self.rate_mbit);
        }
        let up = self.upload_rate_mbit();
        if !(up.is_finite() && up > 0.0) {
            bail!("upload_rate_mbit must be positive, got {up}");
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

pub(crate) static PREFIX_COUNTER: AtomicU32 = AtomicU32::new(0);

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
pub(crate) const RST_CHAIN: &str = "ss-rst";

/// Link numbers (10.77.<n>.0/24, fd77:<n>::/64): servers-isp, router-isp, LAN.
pub(crate) const SERVER_LINK: u8 = 1;
pub(crate) const WAN_LINK: u8 = 2;
pub(crate) const LAN_LINK: u8 = 3;
pub(crate) const FLOOD_LINK: u8 = 4;

pub(crate) fn v4(link: u8, host: u8) -> String {
    format!("10.77.{link}.{host}")
}

pub(crate) fn v6(link: u8, host: u8) -> String {
    format!("fd77:{link}::{host}")
}

pub(crate) fn host_addr(link: u8, host: u8, v6_: bool) -> IpAddr {
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
