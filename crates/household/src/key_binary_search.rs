//! PLACEHOLDER: being written (Key et al. Sec. 4). Replace this whole file.

use crate::budget::{BudgetController, BudgetStats, LinkRound};
use slipstream_control::Duration;

/// Parameters (Key et al. Sec. 5: unit u = 100 bytes, epsilon = epsilon' = 1 unit, delta = 0.1,
/// T = 0.2 s).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyBinarySearchConfig {
    /// The control interval T.
    pub interval: Duration,
}

impl Default for KeyBinarySearchConfig {
    fn default() -> Self {
        KeyBinarySearchConfig {
            interval: Duration::from_millis(200),
        }
    }
}

impl KeyBinarySearchConfig {
    pub fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct KeyBinarySearch {
    budget: u64,
}

impl KeyBinarySearch {
    pub fn new(_config: KeyBinarySearchConfig, initial: u64) -> Self {
        KeyBinarySearch { budget: initial }
    }
}

impl BudgetController for KeyBinarySearch {
    fn on_round(&mut self, _round: &LinkRound) -> u64 {
        self.budget
    }

    fn stats(&self) -> BudgetStats {
        BudgetStats {
            budget: self.budget,
            phase: "placeholder",
            estimate: None,
        }
    }
}
