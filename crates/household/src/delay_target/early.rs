//! The delay target's part in the early yield to a best-effort SYN (`early_yield`).

use super::{
    DelayTarget, Pace, Pending, PreviousRound, CEILING_FRACTION, LOW_ROUNDS_TO_PROBE, RECOVERY_START_DIVISOR,
};

use crate::budget::{BudgetPhase, LinkRound};
use crate::early_yield::{EarlyRound, EarlyStep};

impl DelayTarget {
    /// The early yield's part of a round (see `early_yield`): `Some(budget)` when it decides.
    pub(super) fn early_step(&mut self, round: &LinkRound, queue_above_target: bool) -> Option<u64> {
        let early = EarlyRound {
            now: round.now,
            in_force: round.budget_in_force,
            queue_above_target,
            best_effort_busy: round.best_effort.map(|_| self.best_effort_busy(round)),
            floors: round.floors,
            min: 2 * u64::from(round.mss),
        };
        let (budget, phase) = match self.early.on_round(early) {
            EarlyStep::Inactive => return None,
            EarlyStep::Hold(budget) => (budget, BudgetPhase::Yield),
            // Nobody came: back towards the operating point before the SYN as after a long
            // yield (a quarter of it now, doubling while the queue stays empty), so that a
            // newcomer whose queue is late meets a quarter of the background, not all of it; as a
            // recovery, so that the engine lifts the demands the hold made small.
            EarlyStep::Restore(from) if round.best_effort.is_some() => {
                // Counted: best effort never took half of the link, so the budget goes back to
                // where the hold began at once, within what best effort leaves free (a web
                // page's objects go on after the hold; climbing from a quarter beside them,
                // where the queue is seldom empty, cost the background a third of its share of
                // the lab's web run). The rest waits for best effort to leave.
                let free = self.free_capacity(round);
                let budget = free.map_or(from, |cap| from.min(cap)).max(round.budget_in_force);
                if budget < from {
                    self.arm_recovery(from, Some(Pace::Quick));
                }
                (budget, BudgetPhase::Recover)
            }
            EarlyStep::Restore(from) => {
                // No queue showed: nobody is known to have held the link; the cautious way.
                self.arm_recovery((from as f64 * CEILING_FRACTION) as u64, Some(Pace::Cautious));
                let budget =
                    ((self.ceiling() as f64 / RECOVERY_START_DIVISOR) as u64).max(round.budget_in_force);
                self.pending = Pending::Nothing;
                self.low_rounds = LOW_ROUNDS_TO_PROBE;
                self.high_rounds = 0;
                self.previous = PreviousRound::default();
                self.phase = BudgetPhase::Recover;
                self.budget = budget;
                return Some(budget);
            }
            EarlyStep::Queued { from } => {
                // Best effort is here: the usual yield runs from the floors. When it leaves,
                // recover towards the operating point before the SYN (as after a long yield).
                self.arm_recovery((from as f64 * CEILING_FRACTION) as u64, None);
                return None;
            }
        };
        self.pending = Pending::Nothing;
        self.low_rounds = 0;
        self.high_rounds = 0;
        self.previous = PreviousRound::default();
        self.phase = phase;
        self.budget = budget;
        Some(budget)
    }
}
