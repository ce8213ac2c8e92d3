//! The interface every rwnd controller implements, and what the engine tells it.
//!
//! A controller sees the data segments of one background flow as they arrive after the access
//! bottleneck and the ACKs its receiver sends back; for each ACK it names the window it wants the
//! sender to see. The engine applies that target safely (never above what the host offered, never
//! shrinking the right edge, never below two segments), so controllers need not care about wire
//! details.
//!
//! The shape follows quinn-proto's congestion `Controller` and `ControllerMetrics`:
//!
//! * **Events with the time passed in.** [`Controller::on_data`], [`Controller::on_ack`] and
//!   [`Controller::on_tick`] take `now`: the packet's time (the datapath's timestamp where it
//!   gives one) or the tick's. A controller reads no clock; tests step a virtual one. The samples
//!   carry no time of their own.
//! * **Default bodies.** Events a controller has no use for do nothing by default; only `on_ack`
//!   and `stats` must be written (the fixed clamp is just those two). Where quinn asks the
//!   controller for its `window()`, here `on_ack` returns it: a receive window reaches the sender
//!   only on an ACK, so that is where it is decided.
//! * **A timer.** `on_tick` runs from the engine's tick (every few hundred milliseconds, also
//!   while the flow sends nothing) for every controlled flow, for what is due at a time rather
//!   than on a packet. A window decided there is advertised with the flow's next ACK.
//! * **The flow's facts in one context.** [`FlowContext`], built by the engine for every event:
//!   segment size, router-measured RTT, base RTT and queueing delay, the sender's TSval clock,
//!   goodput and the household allocation. Controllers keep only state of their own.
//! * **Typed statistics.** [`ControllerStats`] holds numbers and the enums [`ControllerMode`] and
//!   [`WindowPolicy`]; label strings are made where they are shown (metrics, control socket) with
//!   `as_str`.
//!
//! Dispatch is closed, over the enum [`crate::AnyController`], as smoltcp does, rather than a
//! `Box<dyn Controller>` per flow as in quinn.

use std::fmt;

use crate::time::{Duration, Instant};
use crate::ts_clock::TsClock;

/// Facts about the flow that the engine tracks for every controller, passed with every event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowContext {
    /// The data sender's maximum segment size in bytes (from its SYN, else a safe default).
    pub mss: u32,
    /// Round-trip time measured at the router (router->sender->router plus router->receiver->router).
    pub rtt: Option<Duration>,
    /// The data sender's TSval clock, once the engine has estimated its rate.
    pub sender_clock: Option<TsClock>,
    /// Queueing delay on the path now: the latest router-measured RTT sample minus the smallest
    /// one seen in the flow.
    pub queue_delay: Option<Duration>,
    /// The smallest router-measured RTT of the flow: the path without queues.
    pub base_rtt: Option<Duration>,
    /// Goodput of the flow: bytes its receiver acknowledged, in bits per second over the last
    /// window of about a second; `None` until the first window is over.
    pub goodput_bits_per_second: Option<f64>,
    /// Household control: the window in bytes the household allocator gives the flow now (0 while
    /// the flow waits for its turn, its right edge held); `None` for a flow with no allocation.
    pub allocation: Option<u32>,
}

impl FlowContext {
    /// A flow of which only the sender's segment size is known yet.
    pub fn new(mss: u32) -> Self {
        FlowContext {
            mss,
            rtt: None,
            sender_clock: None,
            queue_delay: None,
            base_rtt: None,
            goodput_bits_per_second: None,
            allocation: None,
        }
    }
}

/// The TCP timestamp option of a segment (RFC 7323).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timestamps {
    /// The sender's timestamp value.
    pub tsval: u32,
    /// The timestamp echo reply (the latest TSval the sender saw from its peer).
    pub tsecr: u32,
}

/// A data segment of the controlled direction, observed after the bottleneck (its arrival time
/// is the `now` of [`Controller::on_data`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSample {
    /// TCP payload length in bytes (non-zero).
    pub payload_len: u32,
    /// The segment's timestamp option, if it has one.
    pub timestamps: Option<Timestamps>,
    /// The segment starts below the highest sequence number already seen: a retransmission or a
    /// reordering (Vulture Alg. 4 halves on either).
    pub out_of_order: bool,
}

/// An ACK of the data receiver, about to be forwarded towards the sender (the time it is
/// forwarded is the `now` of [`Controller::on_ack`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckSample {
    /// Bytes this ACK newly acknowledges (0 for a duplicate ACK or a window update).
    pub acked_bytes: u32,
    /// The receiver's TSval on this ACK, if it has the timestamp option.
    pub tsval: Option<u32>,
    /// The receiver reports a hole: SACK blocks above the cumulative ACK.
    pub reports_loss: bool,
}

/// A controller's view of itself, for metrics and `slipstream flows` (after quinn-proto's
/// `ControllerMetrics`: typed figures, labels made only where they are shown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerStats {
    /// The window the controller wants advertised, in bytes; `None` while it leaves the flow alone.
    pub target_window: Option<u32>,
    /// Estimated sender congestion window in bytes (Vulture Alg. 6), if the controller keeps one.
    pub cwnd_estimate: Option<u32>,
    /// What the controller is doing in the large.
    pub mode: ControllerMode,
    /// How it moves the window now.
    pub policy: WindowPolicy,
    /// Summary of the last completed analysis epoch (one RTT of PIVs).
    pub last_epoch: Option<EpochSummary>,
}

impl ControllerStats {
    /// A controller in `mode` with `policy` and no figures yet.
    pub fn new(mode: ControllerMode, policy: WindowPolicy) -> Self {
        ControllerStats {
            target_window: None,
            cwnd_estimate: None,
            mode,
            policy,
            last_epoch: None,
        }
    }
}

/// A controller's operating mode. [`ControllerMode::as_str`] is the `mode` label of
/// `slipstream_flow_mode` and what `slipstream flows` shows; dashboards match on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControllerMode {
    /// Vulture before the flow turned LBE: it leaves the flow alone (no sender clock or RTT yet).
    Warmup,
    /// Vulture Alg. 3: spare bandwidth is used up, short queues only.
    Conservative,
    /// Vulture Alg. 3: spare bandwidth left, longer queues tolerated.
    Aggressive,
    /// The flow's share of the household budget.
    Household,
    /// A constant clamp.
    Fixed,
}

impl ControllerMode {
    /// Every mode, in the order metrics export them (each gets a series, zeros included).
    pub const ALL: [ControllerMode; 5] = [
        ControllerMode::Warmup,
        ControllerMode::Conservative,
        ControllerMode::Aggressive,
        ControllerMode::Household,
        ControllerMode::Fixed,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ControllerMode::Warmup => "warmup",
            ControllerMode::Conservative => "conservative",
            ControllerMode::Aggressive => "aggressive",
            ControllerMode::Household => "household",
            ControllerMode::Fixed => "fixed",
        }
    }
}

impl fmt::Display for ControllerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a controller moves the window. [`WindowPolicy::as_str`] is the `policy` label of
/// `slipstream_flow_mode` and what `slipstream flows` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowPolicy {
    /// Vulture Alg. 4-5: the window grows by the bytes each ACK acknowledges (doubles per RTT).
    Double,
    /// Vulture: the window grows by one MSS per RTT.
    Increase,
    /// Vulture: the window shrinks by the bytes each ACK acknowledges (halves per RTT).
    Halve,
    /// The window stays (Vulture's fix, and the fixed clamp).
    Fix,
    /// Household: the window is the flow's allocation.
    Share,
    /// Household: the flow waits for its turn, its right edge held.
    Hold,
}

impl WindowPolicy {
    /// Every policy, in the order metrics export them (each gets a series, zeros included).
    pub const ALL: [WindowPolicy; 6] = [
        WindowPolicy::Double,
        WindowPolicy::Increase,
        WindowPolicy::Halve,
        WindowPolicy::Fix,
        WindowPolicy::Share,
        WindowPolicy::Hold,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            WindowPolicy::Double => "double",
            WindowPolicy::Increase => "increase",
            WindowPolicy::Halve => "halve",
            WindowPolicy::Fix => "fix",
            WindowPolicy::Share => "share",
            WindowPolicy::Hold => "hold",
        }
    }
}

impl fmt::Display for WindowPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// PIVs gathered over one epoch (Vulture Alg. 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpochSummary {
    /// Number of PIVs in the epoch.
    pub piv_count: u32,
    /// Number of positive PIVs.
    pub positive: u32,
    /// Sum of all PIVs, in microseconds (signed).
    pub piv_sum_micros: i64,
}

impl EpochSummary {
    /// Fraction of PIVs that were positive, 0 when there were none.
    pub fn positive_fraction(&self) -> f64 {
        if self.piv_count == 0 {
            0.0
        } else {
            f64::from(self.positive) / f64::from(self.piv_count)
        }
    }
}

/// A receive-window controller for one flow.
///
/// Every event carries the time it happened as `now` (the packet's time, from the datapath's
/// timestamp where it gives one); a controller never reads a clock. Only [`Controller::on_ack`]
/// decides something and [`Controller::stats`] reports it, so both have no default; the other
/// events default to doing nothing, and a controller implements those it needs.
pub trait Controller {
    /// A data segment of the flow arrived at the router at `now`.
    fn on_data(&mut self, now: Instant, ctx: &FlowContext, data: &DataSample) {
        let _ = (now, ctx, data);
    }

    /// The receiver's ACK is about to be forwarded at `now`. Returns the window in bytes the
    /// controller wants the sender to see, or `None` to leave this ACK's window as the host set it.
    fn on_ack(&mut self, now: Instant, ctx: &FlowContext, ack: &AckSample) -> Option<u32>;

    /// The engine's timer: called for every controlled flow on each engine tick (the daemon ticks
    /// every 250 ms, also while the flow sends nothing), for decisions that are due at a time
    /// rather than on a packet. A window decided here takes effect on the flow's next ACK.
    fn on_tick(&mut self, now: Instant, ctx: &FlowContext) {
        let _ = (now, ctx);
    }

    /// Current state for metrics.
    fn stats(&self) -> ControllerStats;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The label values are an interface (Grafana dashboard, lab, `slipstream flows`): these
    /// strings must not change.
    #[test]
    fn labels_are_stable() {
        let modes: Vec<_> = ControllerMode::ALL.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            modes,
            ["warmup", "conservative", "aggressive", "household", "fixed"]
        );
        let policies: Vec<_> = WindowPolicy::ALL.iter().map(|p| p.to_string()).collect();
        assert_eq!(policies, ["double", "increase", "halve", "fix", "share", "hold"]);
    }
}
