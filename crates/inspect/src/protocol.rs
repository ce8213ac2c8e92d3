//! The messages: one JSON line each way, field names stable.

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
    /// The datapath in use: `nfqueue`, or `ebpf` (the tc program; NFQUEUE still takes the
    /// handshakes). Empty from daemons that predate it.
    #[serde(default)]
    pub datapath: String,
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
    /// The address sets of rules by name, with how many addresses each holds now (empty
    /// without such rules, and from daemons that predate them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub name_sets: Vec<NameSetStatus>,
    /// The link-delay probes (`household.probe`); `None` from daemons that predate them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeStatus>,
}

/// The link-delay prober in `status`: ICMP timestamp or echo requests to a reflector beyond the
/// access link, sent while the engine wants them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeStatus {
    /// Where probes go: `192.0.2.1 (gateway via wan)`, `off`, `none: no default gateway`, ...
    pub target: String,
    /// Probes sent since start.
    pub sent: u64,
    /// Of those, answered in time.
    pub answered: u64,
    /// Of those, lost (unanswered in time, or not sent).
    pub lost: u64,
    /// Round-trip time of the last answered probe.
    pub last_rtt_ms: Option<f64>,
}

/// One address set of a rule by name (`domains`/`preset`: remote addresses dnsmasq resolved;
/// `lan_hostnames`: LAN hosts from the DHCP leases).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameSetStatus {
    /// The rule's name.
    pub rule: String,
    /// Kernel set name (`ss_dst_games_4`).
    pub set: String,
    /// Entries now; `None` if the set could not be listed.
    pub entries: Option<usize>,
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
    /// The queue above which the background yields, last round: the delay target with the link
    /// to itself, less beside best effort (`null` for Key et al.'s controllers, while the link is
    /// idle, and from daemons that predate it).
    #[serde(default)]
    pub queue_target_ms: Option<f64>,
    /// The queue the budget steps towards: the target, or less beside a call or a game.
    #[serde(default)]
    pub queue_aim_ms: Option<f64>,
    /// What the router's counts say of best effort on the link, which sets the target: `alone`,
    /// `browsing` (bursts), `steady` (a call or a game).
    #[serde(default)]
    pub best_effort_pace: Option<String>,
    /// Household flows on the link.
    pub flows: usize,
    /// Of those, the flows waiting for their turn.
    pub held_flows: usize,
    /// Delivery rate of the link's household flows over the last round, bits per second.
    pub goodput_bps: f64,
    /// Best effort's rate on the link over the last round: what the WAN counters saw beyond the
    /// background's packets (`null` when the router cannot count it, and from daemons that
    /// predate it).
    #[serde(default)]
    pub best_effort_bps: Option<f64>,
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
    /// How the rule classes by name, if it does (`preset steam`, `host steam-deck`,
    /// `domains dl.example.com`): the flow's remote address was in the rule's set, filled by
    /// dnsmasq for one of those names, or its LAN host holds a lease under one of those names.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub matched_by: String,
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
    /// The transport: `tcp`, or for a UDP flow `udp` (QUIC and other opaque payloads) or `utp`
    /// (BitTorrent's uTP, its headers recognised).
    #[serde(default = "tcp")]
    pub protocol: String,
    /// A UDP flow's policer, which holds it to its share (UDP has no window to lower).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policer: Option<PolicerInfo>,
}

fn tcp() -> String {
    "tcp".to_owned()
}

/// A background UDP flow's policer: the rate it lets through and what it stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicerInfo {
    /// The rate in force, bits per second (`null` until the flow's first allocation).
    pub rate_bps: Option<f64>,
    /// Packets dropped over the rate.
    pub dropped_packets: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
    /// Packets marked CE instead (ECN-capable senders).
    pub marked_packets: u64,
    /// Packets the shaper held for a while (over the rate, within its queue); absent from a
    /// daemon before shaping.
    #[serde(default)]
    pub delayed_packets: u64,
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
