//! What a run is made of: its flows ([`FlowSpec`]) and its setup ([`RunSetup`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use slipstream_testbed::IperfEnds;

use super::BG_PORT;
use crate::alternatives::{Alternative, LabRule};
use crate::result::Role;

/// What moves a flow's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowKind {
    /// iperf3 over TCP.
    #[default]
    Iperf,
    /// `slipstream-quic` (QUIC over UDP); its server listens on the port (see
    /// [`RunSetup::quic_ports`]).
    Quic,
    /// The run's uTP torrent (see [`RunSetup::torrent`]): the flow's LAN host leeches from the
    /// seeder; the port is the seeder's.
    Torrent,
}

/// One bulk transfer (iperf3 unless `kind` says otherwise).
#[derive(Debug, Clone)]
pub struct FlowSpec {
    /// Label, unique per flow within the run ("be", "bg", "bg3"); repeated starts with the same
    /// label (on/off periods) append to the same series.
    pub label: String,
    pub role: Role,
    /// Server port (an iperf3 server listens there; background ports must be in
    /// [`RunSetup::background_ports`]).
    pub port: u16,
    /// The server sends (iperf3 `-R`); otherwise the LAN client does.
    pub download: bool,
    /// Length in seconds (iperf3 takes whole seconds; rounded up, at least 1).
    pub seconds: f64,
    /// iperf3 `-b` (e.g. "6M"), written one segment at a time so the rate is constant at
    /// millisecond scale; `None` = as fast as TCP goes.
    pub bitrate: Option<String>,
    /// Which LAN host and which server the flow runs between (1-based; both must exist in the
    /// run's topology, see [`RunSetup::clients`] and [`RunSetup::servers`]).
    pub ends: IperfEnds,
    /// Parallel TCP connections (iperf3 `-P`; the goodput is their sum).
    pub streams: u8,
    /// iperf3, QUIC or the torrent.
    pub kind: FlowKind,
}

impl FlowSpec {
    /// A bulk download.
    pub fn download(label: &str, role: Role, port: u16, seconds: f64) -> FlowSpec {
        FlowSpec {
            label: label.into(),
            role,
            port,
            download: true,
            seconds,
            bitrate: None,
            ends: IperfEnds::default(),
            streams: 1,
            kind: FlowKind::Iperf,
        }
    }

    /// A QUIC bulk download (`slipstream-quic`) from the QUIC server on `port`.
    pub fn quic_download(label: &str, role: Role, port: u16, seconds: f64) -> FlowSpec {
        FlowSpec { kind: FlowKind::Quic, ..FlowSpec::download(label, role, port, seconds) }
    }

    /// The run's torrent, leeched for `seconds` (by LAN host 1 unless [`FlowSpec::between`]
    /// says another; the server is the seeder's).
    pub fn torrent(label: &str, role: Role, seconds: f64) -> FlowSpec {
        let port = slipstream_testbed::torrent::SEED_PORT;
        FlowSpec { kind: FlowKind::Torrent, ..FlowSpec::download(label, role, port, seconds) }
    }

    /// A bulk upload.
    pub fn upload(label: &str, role: Role, port: u16, seconds: f64) -> FlowSpec {
        FlowSpec { download: false, ..FlowSpec::download(label, role, port, seconds) }
    }

    /// Between LAN host `client` and server `server` (1-based numbers).
    pub fn between(mut self, client: u8, server: u8) -> FlowSpec {
        self.ends = IperfEnds { client, server };
        self
    }

    /// Over `n` parallel connections (`-P`).
    pub fn streams(mut self, n: u8) -> FlowSpec {
        self.streams = n.max(1);
        self
    }

    /// Rate-limited (`-b`).
    pub fn bitrate(mut self, b: &str) -> FlowSpec {
        self.bitrate = Some(b.into());
        self
    }
}

/// What one run needs.
#[derive(Debug, Clone, Default)]
pub struct RunSetup {
    pub scenario: String,
    pub alternative: Alternative,
    /// Its index among the invocation's `count` runs (for the progress line).
    pub index: usize,
    pub count: usize,
    pub repeat: u32,
    /// Planned length, s.
    pub duration_s: f64,
    /// Server ports classed as background (daemon rule, HTB filter).
    pub background_ports: Vec<u16>,
    /// Every server port an iperf3 server must listen on (on every server).
    pub server_ports: Vec<u16>,
    /// Number of servers in the topology (default 1).
    pub servers: u8,
    /// Number of LAN hosts in the topology (default 1).
    pub clients: u8,
    /// LAN hosts without TCP timestamps (see [`slipstream_testbed::TopologySpec::timestamps_off`]).
    pub timestamps_off: Vec<u8>,
    /// Rules splitting the background ports (see [`crate::alternatives::LabRule`]); empty = one.
    pub rules: Vec<LabRule>,
    /// Run `ping -i 0.1` throughout.
    pub ping: bool,
    /// Directory for daemon configs/logs.
    pub work_dir: PathBuf,
    /// Congestion control override (`None` = `opts.cc`).
    pub cc: Option<String>,
    /// Scenario-specific parameters for [`crate::result::RunParams::extra`].
    pub extra: BTreeMap<String, serde_json::Value>,
    /// UDP ports a `slipstream-quic` server listens on (on every server).
    pub quic_ports: Vec<u16>,
    /// A uTP torrent swarm for the run.
    pub torrent: Option<TorrentSetup>,
    /// The rules' `protocol` key in the daemon's config (`"udp"`, `"both"`); `None` leaves it
    /// out (TCP only), so a daemon without the key still runs every other scenario.
    pub protocol: Option<&'static str>,
}

/// A run's torrent swarm: tracker and seeder on `server`, leechers (started, not yet
/// downloading) on the LAN hosts `leechers`.
#[derive(Debug, Clone, Default)]
pub struct TorrentSetup {
    pub server: u8,
    pub leechers: Vec<u8>,
    /// Size of the shared file, bytes (more than the leechers can fetch in the run).
    pub file_bytes: u64,
}

impl RunSetup {
    /// A setup with ping sampling on, one background port, no extras ([`super::run_all`]
    /// fills in the scenario and the work directory).
    pub fn new(alternative: Alternative, duration_s: f64) -> RunSetup {
        RunSetup {
            alternative,
            count: 1,
            duration_s,
            background_ports: vec![BG_PORT],
            server_ports: vec![BG_PORT],
            servers: 1,
            clients: 1,
            ping: true,
            ..RunSetup::default()
        }
    }

    /// Adds a scenario parameter.
    pub fn param(mut self, key: &str, value: impl Into<serde_json::Value>) -> RunSetup {
        self.extra.insert(key.into(), value.into());
        self
    }
}
