//! Counters and snapshots the engine exposes; the metrics crate and `slipstream flows` read them.

use std::net::SocketAddr;

use slipstream_control::{ControllerStats, Duration};
use slipstream_household::{BudgetPhase, RoundTargets};
use slipstream_wire::ParseError;

/// Why a packet went back to the kernel unmodified. A closed set, for metric labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PassReason {
    /// The packet could not be parsed (see [`ParseError`]).
    Malformed,
    /// No rule number came with the packet (or an unknown one).
    Unclassified,
    /// The flow table is full and no flow was idle enough to evict.
    TableFull,
    /// A SYN, RST, FIN or a data segment: observed, never rewritten.
    Observed,
    /// The flow's handshake was not seen, so its window scale is unknown.
    NoHandshake,
    /// The flow negotiated no timestamps; its controller needs them.
    NoTimestamps,
    /// The controller has no target yet (e.g. still learning the sender's clock).
    NoTarget,
    /// The target is not below what the safety rules allow: nothing to lower.
    NotLowered,
    /// Only the headers were copied (data queue): the packet cannot be handed back modified.
    HeaderOnly,
    /// The kernel's checksum for this packet is not final (GSO/offload): not safe to patch.
    ChecksumNotReady,
    /// The flow's rule was removed by a config reload: the flow is released until it ends.
    RuleRemoved,
}

impl PassReason {
    /// Every reason, in the order metrics export them (each gets a series, zeros included).
    pub const ALL: [PassReason; 11] = [
        PassReason::Malformed,
        PassReason::Unclassified,
        PassReason::TableFull,
        PassReason::Observed,
        PassReason::NoHandshake,
        PassReason::NoTimestamps,
        PassReason::NoTarget,
        PassReason::NotLowered,
        PassReason::HeaderOnly,
        PassReason::ChecksumNotReady,
        PassReason::RuleRemoved,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            PassReason::Malformed => "malformed",
            PassReason::Unclassified => "unclassified",
            PassReason::TableFull => "table_full",
            PassReason::Observed => "observed",
            PassReason::NoHandshake => "no_handshake",
            PassReason::NoTimestamps => "no_timestamps",
            PassReason::NoTarget => "no_target",
            PassReason::NotLowered => "not_lowered",
            PassReason::HeaderOnly => "header_only",
            PassReason::ChecksumNotReady => "checksum_not_ready",
            PassReason::RuleRemoved => "rule_removed",
        }
    }

    fn index(self) -> usize {
        PassReason::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// Every parse error, in the order the counters keep them.
pub const PARSE_ERRORS: [ParseError; 8] = ParseError::ALL;

/// Monotonic counters of the engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// Packets handed to the engine.
    pub packets: u64,
    /// Packets forwarded with a lowered window.
    pub rewritten: u64,
    passed: [u64; PassReason::ALL.len()],
    malformed: [u64; PARSE_ERRORS.len()],
    /// Flows added to the table.
    pub flows_created: u64,
    /// Idle flows evicted to make room in a full table.
    pub flows_evicted: u64,
    /// Flows removed after their idle timeout.
    pub flows_expired: u64,
    /// Flows removed after FIN or RST.
    pub flows_closed: u64,
    /// Background flows that negotiated no TCP timestamps.
    pub flows_without_timestamps: u64,
    /// Flows first seen after their handshake (window scale unknown).
    pub flows_without_handshake: u64,
    /// Flows seen without their handshake whose window scales the shell found (conntrack).
    pub flows_recovered: u64,
    /// Flows replaced by a new connection on the same 4-tuple (a SYN with another ISN).
    pub flows_reopened: u64,
    /// Flow events dropped because the event queue was full (the queue is bounded).
    pub events_dropped: u64,
    /// Background UDP flows added to the UDP table.
    pub udp_flows_created: u64,
    /// Background UDP flows removed after their idle timeout.
    pub udp_flows_expired: u64,
    /// Packets of background UDP flows dropped by their policer (over their share).
    pub udp_dropped: u64,
    /// Packets of background UDP flows marked CE by their policer instead of dropped.
    pub udp_marked: u64,
    /// Packets of background UDP flows their shaper held for a while (over their rate).
    pub udp_delayed: u64,
    /// Delay probes answered and taken as samples of a link (`Engine::on_probe_sample`).
    pub probe_samples: u64,
}

impl EngineCounters {
    /// Counts a packet passed unmodified, by why.
    pub fn count_pass(&mut self, reason: PassReason) {
        self.passed[reason.index()] += 1;
    }

    /// Counts a packet that did not parse, by error (it is passed too).
    pub fn count_malformed(&mut self, error: ParseError) {
        self.count_pass(PassReason::Malformed);
        if let Some(i) = PARSE_ERRORS.iter().position(|e| *e == error) {
            self.malformed[i] += 1;
        }
    }

    /// Packets passed unmodified for `reason`.
    pub fn passed(&self, reason: PassReason) -> u64 {
        self.passed[reason.index()]
    }

    /// Packets that did not parse with `error`.
    pub fn malformed(&self, error: ParseError) -> u64 {
        PARSE_ERRORS
            .iter()
            .position(|e| *e == error)
            .map(|i| self.malformed[i])
            .unwrap_or(0)
    }
}

/// Per-rule counters (monotonic) and gauges.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleSnapshot {
    /// The rule's name (the metric label).
    pub name: String,
    /// The controller kind (the metric label).
    pub controller: &'static str,
    /// The rule's flows in the table now.
    pub active_flows: usize,
    /// Flows the rule classed since start.
    pub flows_started: u64,
    /// Bytes acknowledged by the receivers of the rule's flows (background goodput).
    pub acked_bytes: u64,
    /// Packets of the rule's flows forwarded with a lowered window.
    pub rewritten: u64,
}

/// One flow as metrics and `slipstream flows` show it.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSnapshot {
    /// 1-based index into [`EngineSnapshot::rules`] of the rule that classed the flow (for a
    /// configured rule, its number).
    pub rule: u16,
    /// The endpoint that sends the bulk data (None until known).
    pub sender: Option<SocketAddr>,
    /// The endpoint whose ACKs are clamped.
    pub receiver: Option<SocketAddr>,
    /// The controller's view of itself; `None` while the flow has no controller (bulk direction
    /// not known yet, a controller that needs timestamps on a flow without, a removed rule).
    pub controller: Option<ControllerStats>,
    /// Round-trip time measured at the router, once measured.
    pub rtt: Option<Duration>,
    /// Rate at which the flow's data is acknowledged.
    pub goodput_bits_per_second: f64,
    /// Bytes acknowledged by the receiver since the flow started.
    pub acked_bytes: u64,
    /// Window the host last advertised, in bytes.
    pub host_window: Option<u32>,
    /// The window Slipstream last forwarded, in bytes.
    pub forwarded_window: Option<u32>,
    /// Why the flow is not clamped, if it is not.
    pub unclamped_reason: Option<PassReason>,
    /// Household control (`controller = "household"` flows): the flow's share of its link's
    /// budget in bytes, `None` before the first allocation or for other controllers.
    pub allocation: Option<u32>,
    /// The flow waits for its turn (time-sharing): its right edge is held.
    pub held: bool,
    /// Which access link the flow loads, once its bulk direction is known.
    pub link: Option<LinkDirection>,
    /// A UDP flow's transport and policer; `None` for TCP.
    pub udp: Option<UdpSnapshot>,
}

/// What a background UDP flow shows besides what every flow does (its goodput is the bulk data
/// the router forwarded, its allocation the bytes per RTT its policer lets through).
#[derive(Clone, Debug, PartialEq)]
pub struct UdpSnapshot {
    /// "utp" when its headers say so, else "udp" (QUIC and the rest are opaque).
    pub kind: &'static str,
    /// The policer's rate, `None` while the flow is not policed.
    pub policed_bits_per_second: Option<f64>,
    /// Packets the policer dropped.
    pub dropped_packets: u64,
    /// Their bytes (IP packets).
    pub dropped_bytes: u64,
    /// Packets the policer marked CE instead (ECN-capable transports).
    pub marked_packets: u64,
    /// Packets the shaper held for a while (over the rate, within its queue).
    pub delayed_packets: u64,
}

/// The two access links a household has: background downloads share the downlink, uploads the
/// uplink, each with its own budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkDirection {
    /// The downlink: the LAN host receives the bulk data.
    Download,
    /// The uplink: the LAN host sends the bulk data.
    Upload,
}

impl LinkDirection {
    /// Both links, in the order metrics export them.
    pub const ALL: [LinkDirection; 2] = [LinkDirection::Download, LinkDirection::Upload];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkDirection::Download => "download",
            LinkDirection::Upload => "upload",
        }
    }

    /// 0 for download, 1 for upload: the index of per-link arrays.
    pub fn index(self) -> usize {
        match self {
            LinkDirection::Download => 0,
            LinkDirection::Upload => 1,
        }
    }
}

/// One access link as household control sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSnapshot {
    /// Which link.
    pub direction: LinkDirection,
    /// Budget controller kind ("delay_target", ...) and what it is doing.
    pub controller: &'static str,
    /// What the budget controller is doing.
    pub phase: BudgetPhase,
    /// The queue the budget controller worked to in its last round, and what best effort was
    /// doing (a delay-target controller's; `None` for the others and while the link is idle).
    pub targets: Option<RoundTargets>,
    /// Bytes all household-controlled background flows of the link may have in flight.
    pub budget_bytes: u64,
    /// The shared queueing delay of the last round.
    pub queue_delay: Option<Duration>,
    /// The link's base (unloaded) round-trip time.
    pub base_rtt: Option<Duration>,
    /// Household-controlled flows on the link.
    pub flows: usize,
    /// Of those, the flows waiting for their turn.
    pub held_flows: usize,
    /// Bytes in flight of those flows at the end of the last round.
    pub in_flight_bytes: u64,
    /// Their delivery rate over the last round.
    pub goodput_bits_per_second: f64,
    /// Best effort's rate on the link over the last round: the WAN counters less the
    /// background's packets (`None` when the router cannot count it).
    pub best_effort_bits_per_second: Option<f64>,
    /// Coordinated slowdowns run so far (monotonic).
    pub slowdowns: u64,
    /// Window updates the daemon was asked to send (monotonic).
    pub window_updates: u64,
}

impl LinkSnapshot {
    /// A link before its first round, under budget controller `controller`.
    pub fn idle(direction: LinkDirection, controller: &'static str) -> LinkSnapshot {
        LinkSnapshot {
            direction,
            controller,
            phase: BudgetPhase::Idle,
            targets: None,
            budget_bytes: 0,
            queue_delay: None,
            base_rtt: None,
            flows: 0,
            held_flows: 0,
            in_flight_bytes: 0,
            goodput_bits_per_second: 0.0,
            best_effort_bits_per_second: None,
            slowdowns: 0,
            window_updates: 0,
        }
    }
}

/// Everything the metrics endpoint renders, taken at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineSnapshot {
    /// Counters since start.
    pub counters: EngineCounters,
    /// Flows in the table.
    pub active_flows: usize,
    /// Capacity of the table (`max_flows`).
    pub max_flows: usize,
    /// The configured rules in config order, then removed rules that still have flows.
    pub rules: Vec<RuleSnapshot>,
    /// The busiest flows (by goodput), at most the requested number.
    pub flows: Vec<FlowSnapshot>,
    /// Household control, one entry per link (download, upload).
    pub links: Vec<LinkSnapshot>,
    /// Best-effort UDP flows the connection tracker saw sending steadily at the last dump (calls,
    /// games; see [`crate::Engine::on_steady_flows`]).
    pub steady_flows: usize,
}
