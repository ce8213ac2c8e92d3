//! The delay target's memory of the queue: runs of low and high rounds, the busy rate, and the
//! yield's bookkeeping (where it began, whether the background built the queue itself).

use super::{
    DelayTarget, Overshoot, Pending, CEILING_FRACTION, HELD_LONG, HIGH_ROUNDS_TO_RECOVER,
    LOW_ROUNDS_TO_PROBE, OWN_QUEUE_SHARE,
};
use crate::budget::LinkRound;
use crate::delay_target::recovery::Pace;

impl DelayTarget {
    /// The queue's history this round (proportional rule): the runs of low and high rounds, the
    /// busy rate, and the yield's bookkeeping (where it began, whether the background built the
    /// queue itself, whether best effort has held the link long enough to arm a recovery).
    pub(super) fn note_queue(&mut self, round: &LinkRound, delay: f64, target: f64, link_rate: f64) {
        if delay >= target / 2.0 {
            // A queue stands: the round's delivery rate is what the bottleneck gave us.
            self.busy_rate.update(round.now, round.delivery_rate());
            self.busy_at = Some(round.now);
        }
        let burst_read = self.burst_read.take();
        if delay < target / 4.0 {
            self.low_rounds += 1;
            self.lift_disproved_overshoot(round);
        } else if delay <= target
            && round.members_follow_budget
            && burst_read.is_some_and(|raise| Pending::burst_explains(raise, round, target))
        {
            // A raise's own burst under the target, not a standing queue: the next low round
            // may probe again. Reset, a probe waited two more rounds each time, and on a long
            // path every raise's burst read a few ms (engine model 20 Mbit/s / 200 ms: one 1.5x
            // step per four or five rounds, 8 s to the BDP). Only where every member follows
            // the budget through its window, as `Pending::burst_explains` (a UDP flow's
            // policer releases no burst: beside one the engine's UDP model gave a QUIC host
            // 2.75 times a uTP host's share).
            self.low_rounds = self.low_rounds.min(LOW_ROUNDS_TO_PROBE - 1);
        } else {
            self.low_rounds = 0;
        }
        if delay <= target {
            self.high_rounds = 0;
            return;
        }
        self.note_high_round(round, link_rate);
    }

    /// A round with the queue above the target: a yield begins or goes on.
    fn note_high_round(&mut self, round: &LinkRound, link_rate: f64) {
        let [two_back, one_back] = self.earlier_budgets;
        let in_force = round.budget_in_force;
        if self.high_rounds == 0 {
            // A yield begins: remember where the household was.
            self.yield_from = (in_force.max(1) as f64 * CEILING_FRACTION) as u64;
            self.high_since = round.now;
            if round.delivery_rate() >= OWN_QUEUE_SHARE * link_rate {
                // Delivering the link's rate, the background built this queue itself (unless it
                // lasts, see below): the probe stops short of the budget that built it.
                self.overshoot = Some(Overshoot {
                    limit: in_force.min(one_back).min(two_back),
                    at: round.now,
                    rate: round.delivery_rate(),
                });
            }
        }
        self.high_rounds += 1;
        if self.high_rounds == HIGH_ROUNDS_TO_RECOVER {
            // Someone else has held the link for a while: when they leave, the old operating
            // point is worth going back to quickly. Nor was the queue the background's own
            // overshoot.
            self.arm_recovery(self.yield_from, None);
            self.overshoot = None;
        }
        if self.high_rounds >= HIGH_ROUNDS_TO_RECOVER
            && round.now.saturating_since(self.high_since) >= HELD_LONG
        {
            if let Some(r) = self.recovery.as_mut() {
                r.pace = Pace::Quick;
            }
        }
    }
}
