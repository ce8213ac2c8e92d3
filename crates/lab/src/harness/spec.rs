//! What a run is made of: its flows ([`FlowSpec`]) and its setup ([`RunSetup`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use slipstream_testbed::IperfEnds;

use super::BG_PORT;
use crate::alternatives::{Alternative, LabRule};
use crate::result::Role;

/// One iperf3 transfer.
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
        }
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
