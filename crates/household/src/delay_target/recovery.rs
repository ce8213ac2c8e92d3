//! The delay target's recovery: the way back to the operating point before a yield once best
//! effort has gone, armed while it held the link.

use slipstream_control::Duration;

use super::{DelayTarget, LOW_ROUNDS_TO_PROBE, QUICK_START_DIVISOR, RECOVERY_START_DIVISOR};
use crate::budget::LinkRound;

/// The way back to the operating point before a yield (proportional rule).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Recovery {
    /// The operating point to go back to, in bytes of budget.
    pub(super) ceiling: u64,
    /// How fast, once best effort has gone.
    pub(super) pace: Pace,
}

/// How a recovery climbs to its ceiling when the queue empties.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Pace {
    /// Nobody is known to have held the link (a brief yield, a SYN without a queue): two rounds
    /// with an empty queue, then from a quarter of the ceiling, doubling (TCP's slow start up to
    /// ssthresh).
    Cautious,
    /// Best effort held the link (the queue above the target for [`HIGH_ROUNDS_TO_RECOVER`](super::HIGH_ROUNDS_TO_RECOVER)
    /// rounds and [`HELD_LONG`](super::HELD_LONG), or the counters capped the budget): its queue emptying says it
    /// left; half of the ceiling at once, all of it the next round.
    Quick,
}

impl DelayTarget {
    /// Arms a recovery to at least `ceiling` (only ever raised: a second yield that starts from
    /// the floor must not lower it); `pace` replaces the pace when given.
    pub(super) fn arm_recovery(&mut self, ceiling: u64, pace: Option<Pace>) {
        let armed = match self.recovery {
            Some(r) => Recovery {
                ceiling: r.ceiling.max(ceiling),
                pace: pace.unwrap_or(r.pace),
            },
            None if ceiling > 0 => Recovery {
                ceiling,
                pace: pace.unwrap_or(Pace::Cautious),
            },
            None => return,
        };
        self.recovery = Some(armed);
    }

    /// The ceiling of the armed recovery, 0 when there is none.
    pub(super) fn ceiling(&self) -> u64 {
        self.recovery.map_or(0, |r| r.ceiling)
    }

    /// The recovery's step, when one is armed, the budget is below its ceiling and best effort
    /// has gone: `Some(next)`. The counters say so at once (a web page's burst costs the
    /// background the rounds it lasts, not four more; while best effort stays, a dip of its rate,
    /// such as a loss-based sender's cut, is no room to take). Without them an empty queue says
    /// so: after a quick-paced yield one round of it, half of the ceiling, then all of it (two
    /// RTTs); else two rounds (one is often best effort's own dip after a loss), then from a
    /// quarter of the ceiling, doubling each round (about four RTTs).
    pub(super) fn recover(
        &mut self,
        round: &LinkRound,
        target: Duration,
        budget: f64,
        left: bool,
    ) -> Option<f64> {
        let ceiling = self.aged_ceiling(round);
        let recovery = self.recovery?;
        let in_force = round.budget_in_force;
        if in_force >= ceiling {
            return None;
        }
        let delay = round.queue_delay?;
        let ceiling = ceiling as f64;
        let next = if left && delay <= target {
            ceiling
        } else if self.beside_a_call {
            // Beside a call (the step aims below the target) a low reading is the call's own
            // gap, not best effort leaving: it stays. Going back to the ceiling then swung the
            // budget between a queue above the target and the ceiling every few rounds (lab
            // `home`, call and download: a quarter of the rounds recovered).
            return None;
        } else {
            let start = match (recovery.pace, self.low_rounds) {
                (Pace::Quick, 1) => ceiling / QUICK_START_DIVISOR,
                (Pace::Quick, n) if n > 1 => ceiling,
                (Pace::Cautious, n) if n >= LOW_ROUNDS_TO_PROBE => ceiling / RECOVERY_START_DIVISOR,
                _ => return None,
            };
            (budget * 2.0).max(start).min(ceiling)
        };
        Some(next)
    }
}
