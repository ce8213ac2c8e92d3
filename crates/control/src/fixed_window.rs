//! A fixed receive-window clamp: the simplest controller, and the "fixed rwnd" alternative the lab
//! compares Slipstream against.

use crate::controller::{AckSample, Controller, ControllerMode, ControllerStats, FlowContext, WindowPolicy};
use crate::time::Instant;

/// Parameters of [`FixedWindow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindowConfig {
    /// The window every ACK of the flow advertises at most, in bytes.
    pub window_bytes: u32,
}

/// Clamps every ACK to one configured window.
#[derive(Clone, Debug)]
pub struct FixedWindow {
    window_bytes: u32,
}

impl FixedWindow {
    /// A clamp that always asks for the configured window.
    pub fn new(config: FixedWindowConfig) -> Self {
        FixedWindow {
            window_bytes: config.window_bytes,
        }
    }
}

impl Controller for FixedWindow {
    fn on_ack(&mut self, _now: Instant, _ctx: &FlowContext, _ack: &AckSample) -> Option<u32> {
        Some(self.window_bytes)
    }

    fn stats(&self) -> ControllerStats {
        ControllerStats {
            target_window: Some(self.window_bytes),
            ..ControllerStats::new(ControllerMode::Fixed, WindowPolicy::Fix)
        }
    }
}
