//! The `slipstreamd` control socket, as both ends see it.
//!
//! # Protocol
//!
//! A Unix stream socket (`[control] socket`, default `/var/run/slipstream.sock`, mode 0600). The
//! client sends one JSON request on one line and reads one JSON response line; then the daemon
//! closes the connection.
//!
//! ```text
//! -> {"cmd":"status"}
//! <- {"status":{"version":"0.1.0","pid":1234,...}}
//! -> {"cmd":"flows"}
//! <- {"flows":{"active":2,"max":4096,"flows":[{"rule":"bittorrent",...}]}}
//! <- {"error":"..."}                       (an unknown command, or the packet thread is gone)
//! ```
//!
//! Field names are stable (the CLI's `--json` prints them as they come); units are in the names
//! (`_bytes`, `_bps` = bits per second, `_ms`, `_unix` = seconds since the epoch). Fields that are
//! not known yet are `null`.
//!
//! [`query`] is a small blocking client; [`render_flows`] and [`render_status`] are the pure text
//! views of the `slipstream` CLI.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where the daemon listens unless the config says otherwise.
pub const DEFAULT_SOCKET: &str = "/var/run/slipstream.sock";

/// Longest request line the daemon reads.
pub const MAX_REQUEST_BYTES: usize = 4096;

/// A request: `{"cmd":"status"}` or `{"cmd":"flows"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// The daemon at a glance.
    Status,
    /// Every flow in the table.
    Flows,
}

/// A response: `{"status":{..}}`, `{"flows":{..}}` or `{"error":"message"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    /// The answer to `status`.
    Status(Box<Status>),
    /// The answer to `flows`.
    Flows(FlowList),
    /// Why the request was not answered.
    Error(String),
}

impl Request {
    /// Parses one request line (the daemon's side); the error is the message to send back.
    pub fn parse_line(line: &str) -> Result<Request, String> {
        serde_json::from_str(line.trim()).map_err(|e| {
            format!("bad request ({e}); expected {{\"cmd\":\"status\"}} or {{\"cmd\":\"flows\"}}")
        })
    }

    /// The request as the client sends it: one JSON line.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("a request serialises");
        s.push('\n');
        s
    }
}

impl Response {
    /// Parses the daemon's answer line (the client's side).
    pub fn parse_line(line: &str) -> Result<Response, serde_json::Error> {
        serde_json::from_str(line.trim())
    }

    /// The response as the daemon sends it: one JSON line (an encoding failure becomes an error line).
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_else(|e| {
            format!(
                "{{\"error\":\"cannot encode the response: {}\"}}",
                e.to_string().replace('"', "'")
            )
        });
        s.push('\n');
        s
    }
}

/// `{"cmd":"status"}`: the daemon at a glance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The daemon's version.
    pub version: String,
    /// The daemon's process id.
    pub pid: u32,
    /// Seconds since the daemon started.
    pub uptime_secs: u64,
    /// The config file the daemon reads (SIGHUP re-reads it).
    pub config_path: String,
    /// When the config in force was loaded (start or last successful reload).
    pub config_loaded_unix: u64,
    /// Successful reloads.
    pub reloads_ok: u64,
    /// Refused reloads.
    pub reloads_failed: u64,
    /// The last reload's error, if the last reload failed (the previous config stays in force).
    pub last_reload_error: Option<String>,
    /// Settings changed in the file that only take effect after a restart (their old values stay).
    pub restart_needed: Vec<String>,
    /// The configured rules in order (rule number = position + 1), then removed rules whose flows
    /// are still around (`removed: true`).
    pub rules: Vec<RuleStatus>,
    /// The firewall rules and the watchdog's view of them.
    pub firewall: FirewallStatus,
    /// NFQUEUE number of handshakes and ACKs.
    pub ack_queue: u16,
    /// NFQUEUE number of data packets.
    pub data_queue: u16,
    /// Packets handed to the engine since start.
    pub packets: u64,
    /// Packets forwarded with a lowered window.
    pub packets_rewritten: u64,
    /// Packets passed unmodified (any reason).
    pub packets_passed: u64,
    /// Flows in the table.
    pub flows_active: usize,
    /// Capacity of the table (`limits.max_flows`).
    pub flows_max: usize,
    /// Datapath (NFQUEUE receive/verdict) errors since start.
    pub datapath_errors: u64,
    /// Household control, one entry per access link while a rule uses it (empty otherwise, and
    /// from daemons that predate it).
    #[serde(default)]
    pub household: Vec<LinkStatus>,
}

/// One access link under household control: the budget its background flows share.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkStatus {
    /// `download` or `upload`.
    pub link: String,
    /// Budget controller kind (`delay_target`, ...) and what it is doing (`probe`, `hold`, ...).
    pub controller: String,
    /// What the budget controller is doing (`probe`, `hold`, ...).
    pub phase: String,
    /// Bytes the link's household flows may have in flight.
    pub budget_bytes: u64,
    /// Bytes in flight at the end of the last round.
    pub in_flight_bytes: u64,
    /// The queueing delay the link's flows share (last round).
    pub queue_delay_ms: Option<f64>,
    /// The link's base (unloaded) round-trip time.
    pub base_rtt_ms: Option<f64>,
    /// Household flows on the link.
    pub flows: usize,
    /// Of those, the flows waiting for their turn.
    pub held_flows: usize,
    /// Delivery rate of the link's household flows over the last round, bits per second.
    pub goodput_bps: f64,
    /// Coordinated slowdowns so far.
    pub slowdowns: u64,
    /// Window updates the daemon sent for held flows.
    pub window_updates: u64,
}

/// One rule in `status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleStatus {
    /// The rule's name.
    pub name: String,
    /// Its controller kind.
    pub controller: String,
    /// The rule's flows in the table now.
    pub active_flows: usize,
    /// Flows the rule classed since start.
    pub flows_started: u64,
    /// Removed by a reload; listed while its flows are still around.
    pub removed: bool,
}

/// The daemon's firewall rules in `status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirewallStatus {
    /// `iptables-legacy` or `nftables`.
    pub backend: String,
    /// What the last check found (the watchdog checks every few seconds).
    pub installed: bool,
    /// When the last check ran.
    pub last_check_unix: Option<u64>,
    /// Times the watchdog found the rules missing and re-applied them.
    pub reapplied: u64,
    /// The last firewall error (check, re-apply or replace), if any.
    pub last_error: Option<String>,
}

/// `{"cmd":"flows"}`: every flow in the daemon's table (at most `max`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowList {
    /// Flows in the table.
    pub active: usize,
    /// Capacity of the table.
    pub max: usize,
    /// Busiest first (by goodput).
    pub flows: Vec<FlowInfo>,
}

/// One flow. `sender` / `receiver` are known once the bulk direction is (`null` before).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowInfo {
    /// Name of the rule that classed the flow.
    pub rule: String,
    /// The rule was removed by a reload: the flow is released (not clamped) until it ends.
    pub rule_removed: bool,
    /// The rule's controller (`household`, `vulture`, `fixed_window`).
    pub controller: String,
    /// Both endpoints (`addr:port`), in a fixed order.
    pub endpoints: [String; 2],
    /// Endpoint sending the bulk data.
    pub sender: Option<String>,
    /// Endpoint whose ACKs are clamped.
    pub receiver: Option<String>,
    /// Controller mode (empty without a controller).
    pub mode: String,
    /// The window policy (empty without a controller).
    pub policy: String,
    /// Window forwarded to the sender (after clamping).
    pub rwnd_bytes: Option<u32>,
    /// The window the host advertised.
    pub host_window_bytes: Option<u32>,
    /// The window the controller wants.
    pub target_window_bytes: Option<u32>,
    /// The controller's estimate of the sender's cwnd.
    pub cwnd_estimate_bytes: Option<u32>,
    /// Last analysis epoch of the controller.
    pub piv: Option<PivSummary>,
    /// Rate at which the flow's data is acknowledged, bits per second.
    pub goodput_bps: f64,
    /// Bytes acknowledged since the flow started.
    pub acked_bytes: u64,
    /// Round-trip time measured at the router.
    pub rtt_ms: Option<f64>,
    /// Why the flow is not clamped, if it is not (a pass reason: `no_timestamps`, ...).
    pub unclamped: Option<String>,
    /// The access link the flow loads (`download`, `upload`), once its bulk direction is known.
    #[serde(default)]
    pub link: Option<String>,
    /// Household control: the flow's share of its link's budget (`null` for other controllers).
    #[serde(default)]
    pub allocation_bytes: Option<u32>,
    /// Household control: the flow waits for its turn (its window is held).
    #[serde(default)]
    pub held: bool,
}

/// A controller's last analysis epoch (Vulture Alg. 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PivSummary {
    /// Sum of the epoch's packet inter-arrival variations, milliseconds (signed).
    pub sum_ms: f64,
    /// Share of the epoch's variations that were positive.
    pub positive_ratio: f64,
    /// Variations measured in the epoch.
    pub count: u32,
}

/// Why a query failed.
#[derive(Debug)]
pub enum QueryError {
    /// No daemon at the socket (or no permission).
    Connect {
        /// The socket path tried.
        socket: String,
        /// What connect(2) said.
        source: std::io::Error,
    },
    /// The exchange broke off.
    Io(std::io::Error),
    /// The answer is not a response.
    BadResponse(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Connect { socket, source } => write!(
                f,
                "cannot connect to {socket}: {source} (is slipstreamd running? see [control] socket in its config, or pass --socket)"
            ),
            QueryError::Io(e) => write!(f, "talking to slipstreamd: {e}"),
            QueryError::BadResponse(s) => write!(f, "unexpected answer from slipstreamd: {s}"),
        }
    }
}

impl std::error::Error for QueryError {}

/// Sends `request` to the daemon at `socket` and returns its response (5 s timeout).
pub fn query(socket: &Path, request: &Request) -> Result<Response, QueryError> {
    let stream = UnixStream::connect(socket).map_err(|source| QueryError::Connect {
        socket: socket.display().to_string(),
        source,
    })?;
    let timeout = Some(Duration::from_secs(5));
    stream.set_read_timeout(timeout).map_err(QueryError::Io)?;
    stream.set_write_timeout(timeout).map_err(QueryError::Io)?;
    (&stream)
        .write_all(request.to_line().as_bytes())
        .map_err(QueryError::Io)?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .map_err(QueryError::Io)?;
    Response::parse_line(&line).map_err(|e| QueryError::BadResponse(format!("{e}: {:?}", line.trim())))
}

/// `1.5 kB`, `64.0 kB`, `1.20 MB` (decimal units).
pub fn fmt_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1000.0 {
        format!("{bytes} B")
    } else if b < 1e6 {
        format!("{:.1} kB", b / 1e3)
    } else if b < 1e9 {
        format!("{:.2} MB", b / 1e6)
    } else {
        format!("{:.2} GB", b / 1e9)
    }
}

/// Bits per second as `kbit/s` below 1 Mbit/s, else `Mbit/s`.
pub fn fmt_rate(bps: f64) -> String {
    if bps < 1e6 {
        format!("{:.0} kbit/s", bps / 1e3)
    } else {
        format!("{:.2} Mbit/s", bps / 1e6)
    }
}

/// Milliseconds with one decimal below 10 ms, none above.
pub fn fmt_ms(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// `1d 2h`, `3h 4m`, `5m 6s`, `7s`.
pub fn fmt_duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

fn opt_bytes(v: Option<u32>) -> String {
    v.map_or_else(|| "-".to_owned(), |b| fmt_bytes(u64::from(b)))
}

fn is_local(addr: &str) -> bool {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => {
            let o = a.octets();
            a.is_private() || a.is_loopback() || a.is_link_local() || (o[0] == 100 && (o[1] & 0xc0) == 64)
        }
        Ok(IpAddr::V6(a)) => {
            let s = a.segments()[0];
            a.is_loopback() || (s & 0xfe00) == 0xfc00 || (s & 0xffc0) == 0xfe80
        }
        Err(_) => false,
    }
}

/// Which endpoint is the LAN host, which the remote one, and the direction of the bulk data
/// (`down`: towards the LAN host, `up`: from it, `?`: not known yet). The LAN host is the
/// endpoint with a private / unique-local address when exactly one has one, else the receiver
/// (the side whose ACKs are clamped, which is the LAN host of a download).
pub fn lan_and_remote(flow: &FlowInfo) -> (String, String, &'static str) {
    let [a, b] = &flow.endpoints;
    let (lan, remote) = match (is_local(a), is_local(b)) {
        (true, false) => (a.clone(), b.clone()),
        (false, true) => (b.clone(), a.clone()),
        _ => match (&flow.receiver, &flow.sender) {
            (Some(r), Some(s)) => (r.clone(), s.clone()),
            _ => (a.clone(), b.clone()),
        },
    };
    let dir = match (&flow.receiver, &flow.sender) {
        (Some(r), _) if *r == lan => "down",
        (_, Some(s)) if *s == lan => "up",
        _ => "?",
    };
    (lan, remote, dir)
}

/// Left-aligned text columns, right-aligned numeric ones, two spaces between.
fn table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let pad = widths[i].saturating_sub(cell.chars().count());
            if right[i] {
                l.push_str(&" ".repeat(pad));
                l.push_str(cell);
            } else {
                l.push_str(cell);
                l.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for row in rows {
        line(row.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// The `slipstream flows` table: one line per flow, busiest first, then a total line.
pub fn render_flows(list: &FlowList) -> String {
    const HEADER: [&str; 17] = [
        "LAN HOST",
        "REMOTE",
        "DIR",
        "CLASS",
        "CONTROLLER",
        "MODE/POLICY",
        "LINK",
        "ALLOC",
        "HELD",
        "RWND",
        "HOST WND",
        "CWND EST",
        "PIV SUM/POS/N",
        "GOODPUT",
        "RTT",
        "ACKED",
        "UNCLAMPED",
    ];
    const RIGHT: [bool; 17] = [
        false, false, false, false, false, false, false, true, false, true, true, true, true, true, true,
        true, false,
    ];
    let rows: Vec<Vec<String>> = list
        .flows
        .iter()
        .map(|f| {
            let (lan, remote, dir) = lan_and_remote(f);
            let class = if f.rule_removed {
                format!("{} (removed)", f.rule)
            } else {
                f.rule.clone()
            };
            let mode = if f.mode.is_empty() {
                "-".to_owned()
            } else {
                format!("{}/{}", f.mode, f.policy)
            };
            let piv = f.piv.map_or_else(
                || "-".to_owned(),
                |p| format!("{:+.1} ms/{:.0}%/{}", p.sum_ms, p.positive_ratio * 100.0, p.count),
            );
            vec![
                lan,
                remote,
                dir.to_owned(),
                class,
                f.controller.clone(),
                mode,
                f.link.clone().unwrap_or_else(|| "-".to_owned()),
                opt_bytes(f.allocation_bytes),
                if f.held { "HELD" } else { "-" }.to_owned(),
                opt_bytes(f.rwnd_bytes),
                opt_bytes(f.host_window_bytes),
                opt_bytes(f.cwnd_estimate_bytes),
                piv,
                fmt_rate(f.goodput_bps),
                f.rtt_ms.map_or_else(|| "-".to_owned(), fmt_ms),
                fmt_bytes(f.acked_bytes),
                f.unclamped.clone().unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    let mut out = if rows.is_empty() {
        String::from("no flows\n")
    } else {
        table(&HEADER, &RIGHT, &rows)
    };
    let total = list.flows.iter().fold(0.0, |sum, f| sum + f.goodput_bps);
    let _ = write!(
        out,
        "{} flows (table {}/{}), goodput {}",
        list.flows.len(),
        list.active,
        list.max,
        fmt_rate(total)
    );
    // Held flows move nothing until their turn: worth a count where the eye lands.
    let held = list.flows.iter().filter(|f| f.held).count();
    if held > 0 {
        let _ = write!(out, ", {held} held");
    }
    out.push('\n');
    out
}

/// The `slipstream status` text. `now_unix` turns timestamps into ages.
pub fn render_status(s: &Status, now_unix: u64) -> String {
    let ago = |t: u64| format!("{} ago", fmt_duration(now_unix.saturating_sub(t)));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "slipstreamd {} (pid {}), up {}",
        s.version,
        s.pid,
        fmt_duration(s.uptime_secs)
    );
    let _ = writeln!(
        out,
        "config      {} (loaded {}; reloads: {} ok, {} failed)",
        s.config_path,
        ago(s.config_loaded_unix),
        s.reloads_ok,
        s.reloads_failed
    );
    if let Some(e) = &s.last_reload_error {
        let _ = writeln!(out, "last reload FAILED, previous config still in force: {e}");
    }
    for r in &s.restart_needed {
        let _ = writeln!(out, "restart needed: {r}");
    }
    let fw = &s.firewall;
    let checked = fw
        .last_check_unix
        .map_or_else(|| "not checked yet".to_owned(), |t| format!("checked {}", ago(t)));
    let _ = writeln!(
        out,
        "firewall    {}, rules {} ({checked}), re-applied {} times",
        fw.backend,
        if fw.installed { "installed" } else { "MISSING" },
        fw.reapplied
    );
    if let Some(e) = &fw.last_error {
        let _ = writeln!(out, "firewall error: {e}");
    }
    let _ = writeln!(out, "queues      ack {}, data {}", s.ack_queue, s.data_queue);
    let _ = writeln!(
        out,
        "packets     {} handled, {} rewritten, {} passed; {} datapath errors",
        s.packets, s.packets_rewritten, s.packets_passed, s.datapath_errors
    );
    let _ = writeln!(
        out,
        "flows       {} active of {} max",
        s.flows_active, s.flows_max
    );
    out.push('\n');
    let rows: Vec<Vec<String>> = s
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                if r.removed {
                    "-".to_owned()
                } else {
                    (i + 1).to_string()
                },
                if r.removed {
                    format!("{} (removed)", r.name)
                } else {
                    r.name.clone()
                },
                r.controller.clone(),
                r.active_flows.to_string(),
                r.flows_started.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["#", "RULE", "CONTROLLER", "ACTIVE FLOWS", "STARTED"],
        &[true, false, false, true, true],
        &rows,
    ));
    if !s.household.is_empty() {
        out.push('\n');
        out.push_str(&render_household(&s.household));
    }
    out
}

/// The household block of `slipstream status`: one line per access link.
fn render_household(links: &[LinkStatus]) -> String {
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), fmt_ms);
    let rows: Vec<Vec<String>> = links
        .iter()
        .map(|l| {
            vec![
                l.link.clone(),
                format!("{}/{}", l.controller, l.phase),
                fmt_bytes(l.budget_bytes),
                fmt_bytes(l.in_flight_bytes),
                ms(l.queue_delay_ms),
                ms(l.base_rtt_ms),
                l.flows.to_string(),
                l.held_flows.to_string(),
                fmt_rate(l.goodput_bps),
                l.slowdowns.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "HOUSEHOLD",
            "CONTROLLER/PHASE",
            "BUDGET",
            "IN FLIGHT",
            "QUEUE DELAY",
            "BASE RTT",
            "FLOWS",
            "HELD",
            "GOODPUT",
            "SLOWDOWNS",
        ],
        &[false, false, true, true, true, true, true, true, true, true],
        &rows,
    )
}

#[cfg(test)]
mod tests;
