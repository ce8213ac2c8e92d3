//! What goes into the engine and comes out of it: rules and limits, what the datapath knows
//! about a packet, verdicts, window updates, and what a reconfiguration did.

use slipstream_control::{ControllerConfig, Duration, Instant};
use slipstream_household::{HouseholdConfig, ShareSpec};

/// A classification rule as the engine needs it: the kernel matched it, the engine runs its
/// controller.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleSpec {
    /// The rule's name: flows keep their rule across a reload by it, and metrics label by it.
    pub name: String,
    /// The controller the rule's flows get.
    pub controller: ControllerConfig,
    /// The rule's claim on the household budget (used by `ControllerConfig::Household` flows).
    pub share: ShareSpec,
}

/// What the engine runs with; `Engine::reconfigure` swaps it without dropping flow state.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Rules, numbered from 1 in this order (the number the kernel puts in the packet mark).
    pub rules: Vec<RuleSpec>,
    /// Bound of the flow table: memory stays bounded whatever the traffic.
    pub max_flows: usize,
    /// A flow with no packet for this long is removed.
    pub idle_timeout: Duration,
    /// In a full table, a flow idle this long may be evicted for a new one.
    pub evict_idle_after: Duration,
    /// Household control: budget controller, slowdown, time-sharing turn.
    pub household: HouseholdConfig,
}

/// How much of the packet the datapath handed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketCopy {
    /// The whole packet: it may be rewritten.
    Full,
    /// Only the first bytes (headers): observe only.
    HeaderOnly,
}

/// What the datapath knows about a packet besides its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// 1-based number of the rule that classed the flow, from the packet mark.
    pub rule: Option<u16>,
    /// How much of the packet the datapath copied: only a whole copy may be rewritten.
    pub copy: PacketCopy,
    /// False when the kernel says the checksum is not final (GSO, checksum offload).
    pub checksum_ready: bool,
    /// The packet entered the router from a LAN interface (its sender is a LAN host); `None`
    /// when the datapath cannot tell (the engine then takes the flow's lower address as the host).
    pub from_lan: Option<bool>,
    /// When the kernel received the packet, on the engine's clock, if the datapath knows;
    /// measurements use it instead of the time the daemon read the packet.
    pub arrival: Option<Instant>,
}

/// A window update the daemon must send itself: a copy of a flow's last forwarded ACK with a
/// larger window (the flow's turn came while its receiver had nothing to acknowledge).
/// `packet` is a whole IPv4 or IPv6 packet with valid checksums, from the receiver to the sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowUpdate {
    /// The packet to send.
    pub packet: Vec<u8>,
    /// The right edge it advertises (its ACK plus its scaled window): a datapath that lowers
    /// windows in the kernel must not let a later ACK of the flow go left of it.
    pub right_edge: u32,
}

/// What the datapath does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accept the packet as it came.
    Accept,
    /// Accept the packet with the modified bytes (the window field was lowered, or a UDP
    /// packet was marked CE).
    AcceptModified,
    /// Drop the packet: a background UDP flow sent beyond its share (its policer).
    Drop,
    /// Accept the packet at `until`, not before (a background UDP flow over its rate waits in
    /// its shaper); `modified`: with the modified bytes (marked CE). A datapath that cannot
    /// hold a packet accepts it at once.
    Hold {
        /// When the packet may go on (the engine's clock).
        until: slipstream_control::Instant,
        /// Whether the packet was modified.
        modified: bool,
    },
}

/// What [`Engine::reconfigure`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReconfigureSummary {
    /// Flows in the table, all of which were kept.
    pub flows: usize,
    /// Flows whose rule was removed (or renamed), released by this reconfiguration.
    pub released: usize,
    /// Rules of the new config that were not in the old one (by name).
    pub rules_added: usize,
    /// Rules of the old config that are not in the new one (by name).
    pub rules_removed: usize,
}
