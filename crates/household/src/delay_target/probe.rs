//! The delay target's geometric probe: how far the budget may grow in one round when the queue
//! has stayed well below the target.

use slipstream_control::Duration;

use super::{DelayTarget, BUSY_RATE_KNOWN};
use crate::budget::LinkRound;
use crate::link_rate;

impl DelayTarget {
    /// The geometric probe from `budget` (proportional rule): `max_growth` times it, but not past
    /// the operating point `C * (base RTT + TARGET)` once the link's rate C is known, that is
    /// measured in a round with a queue (with the background alone the link was full then) at
    /// least [`BUSY_RATE_KNOWN`] of the largest rate seen, within the last [`link_rate::WINDOW`].
    /// Without timestamps the queue a probe builds shows about two rounds after it (the sender
    /// needs a round to use the window, the window-release samples another), so a probe from
    /// just below the operating point went on to 1.4 BDP and the cut that followed took 40% of
    /// the budget (lab no-timestamps: the background alone at 0.83 of the link in one run of six).
    /// A budget at or above the operating point grows by the proportional step alone.
    ///
    /// Nor past the last budget before the background alone last built a queue above the
    /// target, for [`link_rate::WINDOW`] after it (TCP's slow-start threshold after a loss,
    /// RFC 5681 Sec. 3.1): above it, the proportional step. With dozens of flows
    /// taking turns the operating point is not `C * (base RTT + TARGET)` (turns, delayed ACKs of
    /// two-segment windows and window updates make the flows' RTT longer), and each 1.5x probe
    /// from just below it gave turns to all flows at once: the queue went from empty to a full
    /// buffer in two rounds, the cut halved the budget, and the cycle repeated every second (lab
    /// many-flows N = 64: ping 20 ms above the base with the queue empty half the time).
    pub(super) fn probe(&self, budget: f64, round: &LinkRound, link_rate: f64, target: Duration) -> f64 {
        let grown = budget * self.config.max_growth;
        let busy_rate = self.busy_rate.estimate();
        let known = self
            .busy_at
            .is_some_and(|at| round.now.saturating_since(at) < link_rate::WINDOW)
            && busy_rate >= BUSY_RATE_KNOWN * link_rate;
        let grown = match round.base_rtt {
            Some(base) if known => {
                let operating_point = busy_rate * (base + target).as_secs_f64();
                grown.min(operating_point.max(budget))
            }
            _ => grown,
        };
        match self.overshoot {
            Some((limit, at)) if round.now.saturating_since(at) < link_rate::WINDOW => {
                grown.min((limit as f64).max(budget))
            }
            _ => grown,
        }
    }
}
