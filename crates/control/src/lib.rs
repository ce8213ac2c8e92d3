//! Receive-window controllers for Slipstream: pure state machines with samples and time in and
//! target windows out. No sockets, no clock reads; see `time` for how time enters.

pub mod controller;
pub mod fixed_window;
pub mod household_share;
pub mod time;
pub mod ts_clock;
pub mod vulture;

pub use controller::{
    AckSample, Controller, ControllerMode, ControllerStats, DataSample, EpochSummary, FlowContext,
    Timestamps, WindowPolicy,
};
pub use fixed_window::{FixedWindow, FixedWindowConfig};
pub use household_share::HouseholdShare;
pub use time::{Duration, Instant};
pub use ts_clock::{TsClock, TsClockEstimator};
pub use vulture::{Vulture, VultureConfig};

/// Which controller a rule asks for, with its parameters; the factory for [`AnyController`].
#[derive(Clone, Debug, PartialEq)]
pub enum ControllerConfig {
    /// Vulture (Li & Welzl): PIV-driven rwnd control.
    Vulture(VultureConfig),
    /// A constant clamp.
    FixedWindow(FixedWindowConfig),
    /// The flow's share of the household budget (the `[household]` settings decide the budget;
    /// the rule's weight, minimum rate and priority its share).
    Household,
}

impl ControllerConfig {
    /// A fresh controller for a new flow, as the rule's config asks.
    pub fn build(&self) -> AnyController {
        match self {
            ControllerConfig::Vulture(c) => AnyController::Vulture(Vulture::new(c.clone())),
            ControllerConfig::FixedWindow(c) => AnyController::FixedWindow(FixedWindow::new(*c)),
            ControllerConfig::Household => AnyController::Household(HouseholdShare::default()),
        }
    }

    /// Short name for metric labels.
    pub fn kind(&self) -> &'static str {
        match self {
            ControllerConfig::Vulture(_) => "vulture",
            ControllerConfig::FixedWindow(_) => "fixed_window",
            ControllerConfig::Household => "household",
        }
    }

    /// Whether the controller needs TCP timestamps on the flow to work at all.
    pub fn needs_timestamps(&self) -> bool {
        matches!(self, ControllerConfig::Vulture(_))
    }
}

/// Closed dispatch over the controllers (smoltcp's `AnyController` pattern): a rule's config picks
/// one of a known set, so an event is a `match` the compiler can inline rather than a vtable call.
// Storage: the engine boxes each flow's controller together with its sender clock and household
// state (`Option<Box<FlowControl>>` in `flow/mod.rs`, one allocation per controlled flow), so a
// flow-table entry stays small for the many flows that never get a controller (bulk direction not
// known yet, not clamped). Inside that box the enum takes Vulture's size (at most 536 bytes, see
// its size test) also for a FixedWindow or a household share: memory per controlled flow only.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum AnyController {
    /// Vulture's per-flow PIV control.
    Vulture(Vulture),
    /// A constant clamp.
    FixedWindow(FixedWindow),
    /// The flow's share of the household budget, set by the engine's allocator.
    Household(HouseholdShare),
}

impl Controller for AnyController {
    fn on_data(&mut self, now: Instant, ctx: &FlowContext, data: &DataSample) {
        match self {
            AnyController::Vulture(c) => c.on_data(now, ctx, data),
            AnyController::FixedWindow(c) => c.on_data(now, ctx, data),
            AnyController::Household(c) => c.on_data(now, ctx, data),
        }
    }

    fn on_ack(&mut self, now: Instant, ctx: &FlowContext, ack: &AckSample) -> Option<u32> {
        match self {
            AnyController::Vulture(c) => c.on_ack(now, ctx, ack),
            AnyController::FixedWindow(c) => c.on_ack(now, ctx, ack),
            AnyController::Household(c) => c.on_ack(now, ctx, ack),
        }
    }

    fn on_tick(&mut self, now: Instant, ctx: &FlowContext) {
        match self {
            AnyController::Vulture(c) => c.on_tick(now, ctx),
            AnyController::FixedWindow(c) => c.on_tick(now, ctx),
            AnyController::Household(c) => c.on_tick(now, ctx),
        }
    }

    fn stats(&self) -> ControllerStats {
        match self {
            AnyController::Vulture(c) => c.stats(),
            AnyController::FixedWindow(c) => c.stats(),
            AnyController::Household(c) => c.stats(),
        }
    }
}
