//! Slipstream's pure per-packet engine: a bounded flow table, per-flow TCP tracking, controller
//! dispatch and safe window clamping. Packets and time in, verdicts out; no sockets, no clock.
//!
//! Data flows one way: packet bytes -> `slipstream_wire` view -> [`Engine::handle_packet`]
//! (flow + controller) -> verdict and rewrite -> back to the datapath. Metrics read
//! [`Engine::snapshot`].

mod api;
mod engine;
mod flow;
mod flow_key;
mod flow_table;
mod goodput;
mod household;
mod rtt;
mod stats;
mod tcp_state;
mod udp;
pub mod window_clamp;

pub use api::{EngineConfig, PacketCopy, PacketMeta, ReconfigureSummary, RuleSpec, Verdict, WindowUpdate};
pub use engine::probes::OneWayDelays;
pub use engine::Engine;
pub use flow::{FlowEvent, KernelClamp};
pub use flow_key::{FlowKey, Side};
pub use flow_table::CLOSE_LINGER;
pub use household::LinkCounters;
pub use slipstream_household::delay_target::steady_flows::SteadyFlows;
pub use slipstream_household::{
    BestEffortPace, BudgetPhase, HouseholdConfig, RoundTargets, ShareSpec, UdpEnforcement,
};
pub use stats::{
    EngineCounters, EngineSnapshot, FlowSnapshot, LinkDirection, LinkSnapshot, PassReason, RuleSnapshot,
    UdpSnapshot, PARSE_ERRORS,
};
