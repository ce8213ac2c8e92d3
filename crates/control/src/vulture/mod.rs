//! Vulture (Li & Welzl 2017, ../shared/papers/vulture-li-welzl-2017.txt): placeholder.
use crate::controller::{AckSample, Controller, ControllerStats, DataSample, FlowContext};
use crate::time::Duration;

/// Vulture's parameters. Defaults are the paper's (Sec. 0.3; jiffy = 4 ms).
#[derive(Clone, Debug, PartialEq)]
pub struct VultureConfig {
    /// Alg. 1 PSI: minimum sender-side spacing of a packet pair (paper: 5 jiffies = 20 ms).
    pub psi: Duration,
    /// Resolution PIVs are rounded to before Alg. 2-3 (the paper's jiffy, 4 ms).
    pub piv_resolution: Duration,
    /// Alg. 3 cLow (1 jiffy = 4 ms).
    pub conservative_low: Duration,
    /// Alg. 3 cHigh (2 jiffies = 8 ms).
    pub conservative_high: Duration,
    /// Alg. 3 aLow (3 jiffies = 12 ms).
    pub aggressive_low: Duration,
    /// Alg. 3 aHigh (5 jiffies = 20 ms).
    pub aggressive_high: Duration,
    /// Alg. 4 alpha (7/8).
    pub alpha: f64,
}

impl Default for VultureConfig {
    fn default() -> Self {
        VultureConfig {
            psi: Duration::from_millis(20),
            piv_resolution: Duration::from_millis(4),
            conservative_low: Duration::from_millis(4),
            conservative_high: Duration::from_millis(8),
            aggressive_low: Duration::from_millis(12),
            aggressive_high: Duration::from_millis(20),
            alpha: 7.0 / 8.0,
        }
    }
}

/// The Vulture controller for one flow.
#[derive(Clone, Debug)]
pub struct Vulture {
    config: VultureConfig,
}

impl Vulture {
    pub fn new(config: VultureConfig) -> Self {
        Vulture { config }
    }
}

impl Controller for Vulture {
    fn on_data(&mut self, _ctx: &FlowContext, _data: &DataSample) {
        let _ = &self.config;
    }
    fn on_ack(&mut self, _ctx: &FlowContext, _ack: &AckSample) -> Option<u32> {
        None
    }
    fn stats(&self) -> ControllerStats {
        ControllerStats::default()
    }
}
