//! Household control, pure: the access link as one shared resource for every background flow of
//! every LAN host.
//!
//! * `link_delay` — one view of the link's base delay and queueing delay, shared by all flows,
//!   kept true by a coordinated slowdown of all background flows at once;
//! * `link_rate` — the link's rate as the background has seen it (a windowed maximum);
//! * `budget` — how much all background flows of a link may have in flight, decided once per
//!   round by one of the budget controllers (`delay_target`, `key_binary_search`,
//!   `key_stochastic`); `early_yield` drops it when a best-effort flow opens;
//! * `allocator` — splits the budget: strict priority between rules, minimum rates, then equal
//!   shares per LAN host and weights per rule, and time-sharing when the budget is below the sum
//!   of the flows' two-segment floors.
//!
//! Packets and time in, budgets and allocations out; no clock reads.

pub mod allocator;
pub mod budget;
pub mod delay_target;
pub mod early_yield;
pub mod key_binary_search;
pub mod key_stochastic;
#[cfg(test)]
mod key_test_link;
pub mod link_delay;
pub mod link_rate;
pub mod rho_estimate;
pub mod share;
#[cfg(test)]
mod slowdown_tests;

pub use allocator::{allocate, allocate_with, AllocScratch, Allocation, FlowDemand};
pub use budget::{
    AnyBudget, BestEffort, BestEffortPace, BudgetConfig, BudgetController, BudgetPhase, BudgetStats,
    LinkRound, RoundTargets,
};
pub use delay_target::{DelayTarget, DelayTargetConfig};
pub use key_binary_search::{KeyBinarySearch, KeyBinarySearchConfig};
pub use key_stochastic::{KeyStochastic, KeyStochasticConfig};
pub use link_delay::{FlowDelay, LinkDelay, Slowdown, SlowdownRound};
pub use share::ShareSpec;

use slipstream_control::Duration;

/// Household-wide settings (`[household]` in the config).
#[derive(Clone, Debug, PartialEq)]
pub struct HouseholdConfig {
    /// The budget controller each link runs.
    pub budget: BudgetConfig,
    /// How often every background flow of a link is slowed down at once so the link's base delay
    /// is measured on an empty queue (LEDBAT++ / RFC 9840's periodic slowdown, done once for the
    /// household); zero turns it off.
    pub slowdown_interval: Duration,
    /// When the budget is below the flows' floors, a flow keeps its turn (or waits) at least
    /// this long before the allocator rotates.
    pub turn: Duration,
    /// How a background UDP flow without a window to lower (QUIC) is held to its allocation.
    pub udp: UdpEnforcement,
}

/// How the router holds a background UDP flow that has no window to lower to its share: the
/// packets over `allocation / RTT` wait (a shaper) or are dropped (a policer); see
/// `docs/udp.md`. TOML `household.udp`, UCI `option udp`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UdpEnforcement {
    /// Over the rate, a packet waits at the router, up to one allocation of waiting bytes;
    /// beyond that it is dropped (or marked CE).
    #[default]
    Shape,
    /// Over the rate, a packet is dropped (or marked CE): no packet waits.
    Police,
}

impl UdpEnforcement {
    /// Each value and its name in the config.
    pub const ALL: [(UdpEnforcement, &'static str); 2] = [
        (UdpEnforcement::Shape, "shape"),
        (UdpEnforcement::Police, "police"),
    ];

    /// The name in the config.
    pub fn name(self) -> &'static str {
        match self {
            UdpEnforcement::Shape => "shape",
            UdpEnforcement::Police => "police",
        }
    }
}

impl Default for HouseholdConfig {
    fn default() -> Self {
        HouseholdConfig {
            budget: BudgetConfig::default(),
            slowdown_interval: Duration::from_secs(30),
            turn: Duration::from_millis(500),
            udp: UdpEnforcement::default(),
        }
    }
}

impl HouseholdConfig {
    /// Checks the values; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        self.budget.validate()?;
        if !self.slowdown_interval.is_zero() && self.slowdown_interval < Duration::from_secs(2) {
            return Err("slowdown_interval must be 0 (off) or at least 2s".into());
        }
        if self.turn < Duration::from_millis(50) || self.turn > Duration::from_secs(10) {
            return Err("turn must be 50ms to 10s".into());
        }
        Ok(())
    }
}
