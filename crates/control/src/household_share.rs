//! The per-flow end of household control: the flow's window is whatever the household allocator
//! gave it (see the `slipstream-household` crate), not a decision of its own. The engine writes
//! the allocation every round; this controller hands it out on each ACK.

use crate::controller::{AckSample, Controller, ControllerMode, ControllerStats, FlowContext, WindowPolicy};
use crate::time::Instant;

/// The flow's current share of the household budget.
#[derive(Clone, Copy, Debug, Default)]
pub struct HouseholdShare {
    /// Bytes the flow may have beyond each ACK; `None` until the first allocation (the flow is
    /// then left alone).
    window: Option<u32>,
    /// The flow waits for its turn: its right edge is held where it is.
    held: bool,
}

impl HouseholdShare {
    /// The allocator's decision for the flow (`held`: keep the right edge, no new window).
    pub fn set_allocation(&mut self, window: Option<u32>, held: bool) {
        self.window = window;
        self.held = held;
    }

    /// Whether the flow waits for its turn (its right edge is held, not moved).
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// The window the household allocator last gave the flow; `None` before the first allocation.
    pub fn window(&self) -> Option<u32> {
        self.window
    }

    /// The window the flow gets now: its allocation, or 0 while it is held.
    pub fn target(&self) -> Option<u32> {
        if self.held {
            Some(0)
        } else {
            self.window
        }
    }
}

impl Controller for HouseholdShare {
    fn on_ack(&mut self, _now: Instant, _ctx: &FlowContext, _ack: &AckSample) -> Option<u32> {
        self.target()
    }

    fn stats(&self) -> ControllerStats {
        let policy = if self.held {
            WindowPolicy::Hold
        } else {
            WindowPolicy::Share
        };
        ControllerStats {
            target_window: self.target(),
            ..ControllerStats::new(ControllerMode::Household, policy)
        }
    }
}
