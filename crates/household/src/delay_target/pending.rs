//! What a round's decision leaves for the next ones: rounds that only measure, because what they
//! read is the doing of the controller's own last change (a raise's burst, a cut not yet taken
//! hold), not the link's state.

use slipstream_control::Duration;

use super::{DelayTarget, DelayTargetVariant};
use crate::budget::LinkRound;

/// Rounds after a cut that may still read the queue of the budget before it, while each reads
/// less than the last (one that held or grew is someone else's): the round's samples are of
/// data released a round trip earlier, and without timestamps a window-release sample arrives
/// a further queue's time later. One round
/// was too few at long round trips: after a cut from 1.35 BDP (engine model, 10 Mbit/s /
/// 300 ms: 139 ms of queue) the second round still read 59 ms while the link had already
/// drained, and halved the budget again, to a third of the BDP.
const DRAIN_ROUNDS: u8 = 2;

/// What the last round's decision leaves for this one: rounds that only measure (Vulture's
/// pause after a policy change, Sec. 0.3.3; TCP's one reduction per window of data).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Pending {
    /// This round decides.
    Nothing,
    /// The last round grew the budget by over a tenth, by this many bytes: this round measured
    /// data the old budget released, so it only measures unless the queue is above the target.
    Settle(u64),
    /// The round before last grew the budget by this many bytes: this round reads the queue of
    /// the raise's own burst (see [`Pending::burst_explains`]).
    Burst(u64),
    /// A recent round cut the budget, and the last round read this queueing delay: while the
    /// queue stays above the target but shrinks, the cut is taking hold, for this many more
    /// rounds ([`DRAIN_ROUNDS`] after a cut by over a tenth, one after a trim).
    Drain(Duration, u8),
}

impl Pending {
    /// Whether a round's queue may be a raise's own burst on top of the queue the target
    /// (`target`, seconds) allows:
    /// a window-limited sender releases a raise of `raise` bytes at once at the next ACK, and
    /// they queue for `raise / C` at the bottleneck. The round's delivery rate is at most C, so
    /// `target + raise / rate` bounds that queue from above. A probe's burst read as a standing
    /// queue set the probe's limits on it and cut the budget (engine model, 10 Mbit/s / 200 ms:
    /// a probe from 128 to 160 kB read 26 ms of queue each time, and the budget cycled between
    /// them for five seconds, 0.55 of the link). Only where every member follows the budget
    /// through its window (`LinkRound::members_follow_budget`, the caller's test): a UDP flow's
    /// shaper or policer releases no such burst, and its queue is its own excess. Nor past the
    /// operating point (`DelayTarget::past_the_operating_point`): there a queue can stand.
    pub(super) fn burst_explains(raise: u64, round: &LinkRound, target: f64) -> bool {
        let rate = round.delivery_rate();
        let queue = round.queue_delay.map_or(0.0, |q| q.as_secs_f64());
        rate > 0.0 && queue <= target + raise as f64 / rate
    }
}

impl DelayTarget {
    /// The rounds after a raise by over a tenth (`Pending::Settle`, `Pending::Burst`): `Some`
    /// with the budget in force when this round only measures.
    pub(super) fn measure_only_after_a_raise(
        &mut self,
        round: &LinkRound,
        target_duration: Duration,
        queue_above_target: bool,
    ) -> Option<u64> {
        let in_force = round.budget_in_force;
        match self.pending {
            Pending::Settle(raise) | Pending::Burst(raise)
                if queue_above_target
                    && round.members_follow_budget
                    && !self.past_the_operating_point(round, target_duration)
                    && Pending::burst_explains(raise, round, target_duration.as_secs_f64()) =>
            {
                // The raise's own burst, once: the next round tells a standing queue. Measured
                // only: nor does it count as a round in force for the overshoot's limit (the
                // smallest budget of the round the queue shows and the two before).
                self.pending = Pending::Nothing;
                self.measured_only = true;
                self.budget = in_force;
                return Some(in_force);
            }
            Pending::Settle(raise) => {
                self.pending = Pending::Burst(raise);
                // A queue above the target is never waited out: best effort may have just arrived,
                // and each round the background holds on costs it a round of its slow start.
                if !queue_above_target {
                    self.budget = in_force;
                    return Some(in_force);
                }
            }
            Pending::Burst(raise) => {
                self.pending = Pending::Nothing;
                self.burst_read = Some(raise);
            }
            _ => {}
        }
        None
    }

    /// Whether this round's queue, above the target, is still the last cut's (`Pending::Drain`):
    /// then it only measures.
    pub(super) fn cut_taking_hold(&mut self, delay: f64, target: f64, queue_delay: Duration) -> bool {
        let Pending::Drain(before, rounds) = std::mem::replace(&mut self.pending, Pending::Nothing) else {
            return false;
        };
        // While the queue shrinks the cut is taking hold; a queue that held or grew is someone
        // else's.
        let the_cuts = delay < before.as_secs_f64();
        if delay > target && the_cuts && rounds > 1 {
            self.pending = Pending::Drain(queue_delay, rounds - 1);
        }
        delay > target && the_cuts
    }

    /// What this round's decision (from `in_force` to `next`) leaves for the next one.
    pub(super) fn next_pending(
        &self,
        round: &LinkRound,
        next: u64,
        recovering: bool,
        above_target: bool,
        queue_delay: Duration,
    ) -> Pending {
        let in_force = round.budget_in_force;
        if self.config.variant == DelayTargetVariant::Proportional && above_target && next < in_force {
            // A trim (a tenth or less) shows within the round: one round, strictly shrinking.
            // So does any cut where a UDP flow is a member: its sender follows its rate by
            // steps, and no window holds back its data (engine model `udp_model`: with the
            // longer drain a QUIC host took 2.2 times a uTP host's share).
            let cut = next + in_force / 10 < in_force;
            let rounds = if cut && round.members_follow_budget {
                DRAIN_ROUNDS
            } else {
                1
            };
            Pending::Drain(queue_delay, rounds)
        } else if !recovering && in_force >= self.ceiling() && next > in_force + in_force / 10 {
            // No settling round while a recovery is pending either: it waits for an empty queue.
            Pending::Settle(next - in_force)
        } else {
            Pending::Nothing
        }
    }
}
