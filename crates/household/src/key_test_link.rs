//! What the tests of Key et al.'s two budget controllers share: a round of exactly T = 200 ms
//! (so rho = delivered / budget) and a fluid model of one access link to run them on.

use crate::budget::{BudgetController, LinkRound};
use slipstream_control::{Duration, Instant};

/// A round of exactly T = 200 ms with `budget` in force and `in_flight` bytes in flight.
pub(crate) fn round(budget: u64, delivered: u64, in_flight: u64) -> LinkRound {
    LinkRound {
        now: Instant::from_millis(1000),
        interval: Duration::from_millis(200),
        queue_delay: None,
        base_rtt: Some(Duration::from_millis(40)),
        delivered_bytes: delivered,
        budget_in_force: budget,
        in_flight,
        mss: 1448,
        active_flows: 1,
        floors: 2896,
        best_effort: None,
        steady_flow: false,
        members_follow_budget: true,
        min_rtt: None,
    }
}

/// Runs `rounds` rounds of `c` on a link of `rate` bytes/s and base RTT `rtt` seconds, of which
/// `free(n)` (a fraction) is left by the foreground in round n; the background is
/// window-limited, R = min(w / RTT, free * rate). Returns the budgets in force, starting from
/// `first`. The caller's clamp is modelled as a floor of two 1448-byte segments.
pub(crate) fn run_on_link(
    c: &mut impl BudgetController,
    first: u64,
    rounds: usize,
    (rate, rtt): (f64, f64),
    free: impl Fn(usize) -> f64,
) -> Vec<u64> {
    let mut budget = first;
    let mut out = Vec::with_capacity(rounds);
    for n in 0..rounds {
        let in_force = budget.max(2896);
        out.push(in_force);
        let delivered = ((in_force as f64 / rtt).min(free(n) * rate) * 0.2) as u64;
        budget = c.on_round(&round(in_force, delivered, in_force));
    }
    out
}
