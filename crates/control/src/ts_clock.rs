//! Estimating a sender's TSval clock rate (placeholder, to be implemented).
use crate::time::Instant;

/// A sender's TSval clock: how many TSval ticks make one second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TsClock {
    ticks_per_second: u32,
}

impl TsClock {
    pub fn from_hz(ticks_per_second: u32) -> TsClock {
        TsClock { ticks_per_second: ticks_per_second.max(1) }
    }
    pub fn hz(&self) -> u32 {
        self.ticks_per_second
    }
    /// Converts a signed TSval difference into microseconds.
    pub fn ticks_to_micros(&self, ticks: i64) -> i64 {
        ticks.saturating_mul(1_000_000) / i64::from(self.ticks_per_second)
    }
}

/// Learns a sender's TSval rate from (arrival time, TSval) pairs.
#[derive(Clone, Debug, Default)]
pub struct TsClockEstimator {}

impl TsClockEstimator {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn observe(&mut self, _arrival: Instant, _tsval: u32) {}
    pub fn clock(&self) -> Option<TsClock> {
        None
    }
}
