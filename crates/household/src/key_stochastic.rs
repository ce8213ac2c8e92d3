//! PLACEHOLDER: being written (Key et al. Sec. 4). Replace this whole file.

use crate::budget::{BudgetController, BudgetStats, LinkRound};
use slipstream_control::Duration;

/// Parameters (Key et al. Sec. 5: unit u = 100 bytes, epsilon = epsilon' = 1 unit, delta = 0.1,
/// T = 0.2 s).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyStochasticConfig {
    /// The control interval T.
    pub interval: Duration,
}

impl Default for KeyStochasticConfig {
    fn default() -> Self {
        KeyStochasticConfig {
            interval: Duration::from_millis(200),
        }
    }
}

impl KeyStochasticConfig {
    pub fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct KeyStochastic {
    budget: u64,
}

impl KeyStochastic {
    pub fn new(_config: KeyStochasticConfig, initial: u64) -> Self {
        KeyStochastic { budget: initial }
    }
}

impl BudgetController for KeyStochastic {
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
