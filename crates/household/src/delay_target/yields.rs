//! The delay target's multiplicative yields above the target (proportional rule).

use super::{DelayTarget, PreviousRound, SHARE_TO_YIELD};
use crate::budget::LinkRound;

impl DelayTarget {
    /// The yields above the target (proportional rule), applied to `next`. Well above it someone
    /// else needs the link: the step moves by the background's own rate, which is small beside
    /// best effort's, so yield multiplicatively instead, by 2T/q (x0.5 at 4T, as a loss would
    /// make a TCP sender do: best effort's slow start must not wait for us). Above it for two
    /// rounds while the background delivers under [`SHARE_TO_YIELD`] of the link's rate C:
    /// someone else has taken part of the link and the queue says they want more; yield to the
    /// share still held, R / C. Best effort after an early slow-start exit (HyStart, on the queue
    /// the background keeps) grows by a segment per RTT and keeps the queue between T and 2T,
    /// where the step is a few kB per round: the background held a third of the link for
    /// seconds. The background alone fills the link (R = C) and is not cut by this. R is taken
    /// over this round and the one before, both above the target: C is a maximum, and one
    /// round's delivery alone is noisy enough (ACK bursts, many flows taking turns, window-release
    /// timing without timestamps) to read 0.7 C on a full link. With the WAN counters the free
    /// capacity measures best effort's part directly, and the share test is off.
    pub(super) fn yield_cuts(
        &mut self,
        round: &LinkRound,
        next: f64,
        budget: f64,
        delay: f64,
        target: f64,
        link_rate: f64,
    ) -> f64 {
        let mut next = next;
        if delay > 2.0 * target {
            next = next.min(budget * 2.0 * target / delay);
        }
        let two_rounds = (round.delivered_bytes + self.previous.delivered) as f64
            / (round.interval + self.previous.interval).as_secs_f64().max(1e-3);
        let share = two_rounds / link_rate;
        if delay > target
            && self.previous.above_target
            && share < SHARE_TO_YIELD
            && round.best_effort.is_none()
        {
            next = next.min(budget * share);
        }
        self.previous = PreviousRound {
            delivered: round.delivered_bytes,
            interval: round.interval,
            above_target: delay > target,
        };
        next
    }
}
