//! The delay target's geometric probe: how far the budget may grow in one round when the queue
//! has stayed well below the target.

use slipstream_control::Duration;

use super::{DelayTarget, BUSY_RATE_KNOWN, LOW_ROUNDS_TO_PROBE};
use crate::budget::LinkRound;
use crate::link_rate;

/// The overshoot's limit on the probe is lifted when the background delivers this many times
/// the rate of the round it was set in, with the queue low: a link that was full then cannot.
/// Above one round's noise in delivery (`OWN_QUEUE_SHARE` allows a fifth), over two rounds.
const OVERSHOOT_DISPROVED: f64 = 1.25;

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
            Some(o) if round.now.saturating_since(o.at) < link_rate::WINDOW => {
                grown.min((o.limit as f64).max(budget))
            }
            _ => grown,
        }
    }

    /// The overshoot's limit, once the background has delivered more than the link's rate it
    /// was set at: over this round and the one before (one round's delivery is noisy),
    /// [`OVERSHOOT_DISPROVED`] times the rate of the round the queue showed, with the queue low
    /// for [`LOW_ROUNDS_TO_PROBE`] rounds. Then the queue it was set on was a burst (a probe's
    /// raise reaches a window-limited sender as one burst at the next ACK, and at 10 Mbit/s /
    /// 300 ms a 1.5x probe from 57 kB read as 23 ms), not the link's operating point; held
    /// there, the budget grew by a segment a round for ten seconds (engine model: 23 s to fill
    /// the link). A link that was full cannot deliver more. (The busy rate's operating point
    /// needs no such test: it bounds the probe only while it is at least `BUSY_RATE_KNOWN` of
    /// the largest rate delivered.) Only where every member follows the budget through its
    /// window: beside a UDP flow (engine model `udp_model`) the lift let a QUIC host take 2.2
    /// times a uTP host's share.
    pub(super) fn lift_disproved_overshoot(&mut self, round: &LinkRound) {
        let Some(o) = self.overshoot else {
            return;
        };
        if self.low_rounds < LOW_ROUNDS_TO_PROBE || !round.members_follow_budget {
            return;
        }
        let (bytes, secs) = (
            round.delivered_bytes + self.previous.delivered,
            (round.interval + self.previous.interval).as_secs_f64(),
        );
        if secs > 0.0 && bytes as f64 / secs >= OVERSHOOT_DISPROVED * o.rate {
            self.overshoot = None;
        }
    }

    /// Whether the budget in force may build a standing queue: above the operating point
    /// `C * (path RTT + target)`, where C is the busy rate while it is known (as in
    /// [`DelayTarget::probe`]) and the path RTT the members' smallest round trips
    /// (`LinkRound::min_rtt`, which turns and queues do not lengthen). A queue read after a raise
    /// past it is not taken for the raise's burst: with 64 flows taking turns a 1.5x probe from
    /// just below the BDP took the budget to 1.5 BDP at once, and its queue stood (lab
    /// many-flows N = 64: with the burst allowance there, the ping added by the background
    /// alone was 24 ms against 12.5).
    pub(super) fn past_the_operating_point(&self, round: &LinkRound, target: Duration) -> bool {
        let busy_rate = self.busy_rate.estimate();
        let known = self
            .busy_at
            .is_some_and(|at| round.now.saturating_since(at) < link_rate::WINDOW)
            && busy_rate >= BUSY_RATE_KNOWN * self.link_rate.estimate();
        match round.min_rtt.or(round.base_rtt) {
            Some(rtt) if known => round.budget_in_force as f64 > busy_rate * (rtt + target).as_secs_f64(),
            _ => false,
        }
    }
}
