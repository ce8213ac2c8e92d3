//! What a rule asks of the household budget for its flows (Mehra et al.'s Bandwidth Sharing
//! System, Sec. 3: priorities, minimum rates, weights).

/// A rule's claim on the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareSpec {
    /// Relative weight of the rule's flows against other rules' flows of the same priority
    /// (Mehra et al. BWSS weights); 1..=1000, default 1.
    pub weight: u32,
    /// Rate the rule's flows keep together whatever the budget, bytes per second (0: none).
    /// Mehra et al.'s minimum rate, turned into a window with each flow's RTT.
    pub min_rate: u64,
    /// Strict priority: every rule of a lower number is served (up to what its flows use) before
    /// any rule of a higher number (Mehra et al. FCS priorities; numbered like tc's prio bands).
    pub priority: u8,
}

impl Default for ShareSpec {
    fn default() -> Self {
        ShareSpec {
            weight: 1,
            min_rate: 0,
            priority: 0,
        }
    }
}

impl ShareSpec {
    /// Largest weight accepted.
    pub const MAX_WEIGHT: u32 = 1000;

    /// Checks the values; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        if self.weight == 0 || self.weight > Self::MAX_WEIGHT {
            return Err(format!(
                "weight must be 1 to {}, not {}",
                Self::MAX_WEIGHT,
                self.weight
            ));
        }
        Ok(())
    }
}
