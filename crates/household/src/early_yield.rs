//! The early yield: when a flow that is not background traffic opens (its SYN crosses the
//! router), the household budget drops to the flows' floors before the newcomer's slow start
//! reaches the bottleneck, instead of after its queue shows.
//!
//! Why: yielding on the queue alone comes a few rounds late. Best effort's slow start then
//! overflows a queue the background still fills, the background's sender loses packets and cuts
//! its congestion window (CUBIC x0.7, RFC 9438 Sec. 4.6), and it regrows that window slowly
//! through the whole idle period that follows: measured in the lab's on-off run (T = 5 s), the
//! background used under half of the freed link. A SYN is one to two RTTs ahead of the
//! newcomer's first data and about five ahead of its slow start filling the link, time enough to
//! drain the background's part of the queue (one RTT). Any new connection is taken as a
//! competitor; QUIC opens none, so the queue-based yield stays the backstop.
//!
//! A false alarm (a short request, a connection that sends little) costs the background
//! [`HOLD_ROUNDS`] rounds at its floors and two to come back: if no queue above the target
//! showed by then, the controller recovers to where it was (from a quarter of it, doubling). If one
//! showed, the controller's own yield takes over with the same recovery armed for when best
//! effort leaves.

/// Rounds (about RTTs) the budget stays at the floors after a competitor's SYN unless a queue
/// shows: the newcomer's data arrives one to two RTTs after its SYN, its slow start fills the
/// link three to four after that (an initial window of 10 segments doubling to an 83-packet
/// BDP), and the queue reads above the target a round later (its samples waited in it). With
/// six, the lab's on-off run saw holds end just before the queue showed, and the background
/// came back into best effort's overflow.
pub const HOLD_ROUNDS: u32 = 10;
/// The early yield's budget is at most this fraction of the one in force: with many flows whose
/// floors alone exceed the BDP, still a deep cut (the allocator time-shares below the floors).
const DEPTH_DIVISOR: u64 = 8;

/// What the early yield decides for a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EarlyStep {
    /// Not yielding early: the controller decides as usual.
    Inactive,
    /// Hold the budget at this many bytes this round.
    Hold(u64),
    /// The hold ended without a queue: back to the budget before the SYN.
    Restore(u64),
    /// A queue above the target showed: best effort has arrived. The controller yields as
    /// usual; this was its operating point before the SYN (to recover to when best effort
    /// leaves).
    Queued {
        /// Budget in force when the SYN was seen.
        from: u64,
    },
}

/// The early yield's state (one per link controller).
#[derive(Clone, Copy, Debug, Default)]
pub struct EarlyYield {
    /// A competitor's SYN was seen since the last round.
    pending: bool,
    /// Rounds of hold left (0: not holding).
    hold: u32,
    /// Budget in force when the hold began.
    from: u64,
}

impl EarlyYield {
    /// A competitor's SYN crossed the router.
    pub fn on_competitor(&mut self) {
        self.pending = true;
    }

    /// Whether a competitor's SYN waits for the next round.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Whether a hold is under way.
    pub fn holding(&self) -> bool {
        self.hold > 0
    }

    /// The round's decision. `in_force`: the budget of the round that ended; `queue_above_target`:
    /// its queueing delay exceeded the target; `floors`: the sum of the flows' floors; `min`: the
    /// smallest budget (two segments).
    pub fn on_round(&mut self, in_force: u64, queue_above_target: bool, floors: u64, min: u64) -> EarlyStep {
        let syn = std::mem::take(&mut self.pending);
        // The round of the SYN starts the hold whatever its queue: the background's own operating
        // point keeps the queue at the target, and one round reading it a little above (10.1 ms)
        // made the lab's on-off run miss the SYN in about one on period of five, where best
        // effort then kept 0.83-0.90 of the link instead of 0.98. If someone else already holds
        // a queue, the next round hands over to the controller's yield, from the floors.
        if queue_above_target && !(syn && self.hold == 0) {
            // Best effort has arrived (or someone was there before the SYN): the controller's
            // own yield is in charge.
            if self.hold == 0 {
                return EarlyStep::Inactive;
            }
            self.hold = 0;
            return EarlyStep::Queued { from: self.from };
        }
        if syn {
            if self.hold == 0 {
                self.from = in_force;
            }
            // A second SYN (iperf3's data connection after its control one, a browser's
            // parallel connections) restarts the hold.
            self.hold = HOLD_ROUNDS + 1;
        }
        if self.hold == 0 {
            return EarlyStep::Inactive;
        }
        self.hold -= 1;
        if self.hold == 0 {
            return EarlyStep::Restore(self.from);
        }
        EarlyStep::Hold(floors.min(self.from / DEPTH_DIVISOR).max(min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_at_the_floors_then_restores_without_a_queue() {
        let mut e = EarlyYield::default();
        assert_eq!(e.on_round(137_500, false, 2_896, 2_896), EarlyStep::Inactive);
        e.on_competitor();
        // One flow: its floor (2896) is below an eighth of 137500 (17187).
        for _ in 0..HOLD_ROUNDS {
            assert_eq!(e.on_round(137_500, false, 2_896, 2_896), EarlyStep::Hold(2_896));
            assert!(e.holding());
        }
        // Six rounds without a queue: a short request, long gone. Back to 137500 at once.
        assert_eq!(
            e.on_round(2_896, false, 2_896, 2_896),
            EarlyStep::Restore(137_500)
        );
        assert!(!e.holding());
        assert_eq!(e.on_round(137_500, false, 2_896, 2_896), EarlyStep::Inactive);
    }

    #[test]
    fn a_queue_hands_over_to_the_controller() {
        let mut e = EarlyYield::default();
        e.on_competitor();
        // 64 flows: floors 185344 exceed an eighth of 160000 (20000), which wins.
        assert_eq!(
            e.on_round(160_000, false, 185_344, 2_896),
            EarlyStep::Hold(20_000)
        );
        assert_eq!(e.on_round(20_000, false, 185_344, 2_896), EarlyStep::Hold(20_000));
        // Best effort's slow start reached the queue.
        assert_eq!(
            e.on_round(20_000, true, 185_344, 2_896),
            EarlyStep::Queued { from: 160_000 }
        );
        assert_eq!(e.on_round(20_000, true, 185_344, 2_896), EarlyStep::Inactive);
    }

    #[test]
    fn the_round_of_the_syn_holds_whatever_its_queue() {
        let mut e = EarlyYield::default();
        // The round that ended with the SYN measured the queue just above the target (the
        // background's own operating point): the hold starts all the same.
        e.on_competitor();
        assert_eq!(e.on_round(100_000, true, 2_896, 2_896), EarlyStep::Hold(2_896));
        assert!(e.holding());
        // The queue stays: someone else is there; the controller's yield takes over.
        assert_eq!(
            e.on_round(2_896, true, 2_896, 2_896),
            EarlyStep::Queued { from: 100_000 }
        );
        assert!(!e.holding());
    }

    #[test]
    fn a_second_syn_restarts_the_hold_from_the_first_operating_point() {
        let mut e = EarlyYield::default();
        e.on_competitor();
        assert_eq!(e.on_round(100_000, false, 2_896, 2_896), EarlyStep::Hold(2_896));
        assert_eq!(e.on_round(2_896, false, 2_896, 2_896), EarlyStep::Hold(2_896));
        e.on_competitor();
        for _ in 0..HOLD_ROUNDS {
            assert_eq!(e.on_round(2_896, false, 2_896, 2_896), EarlyStep::Hold(2_896));
        }
        assert_eq!(
            e.on_round(2_896, false, 2_896, 2_896),
            EarlyStep::Restore(100_000)
        );
    }

    #[test]
    fn never_below_the_minimum() {
        let mut e = EarlyYield::default();
        e.on_competitor();
        // 8000 / 8 = 1000 is below the two-segment minimum.
        assert_eq!(e.on_round(8_000, false, 2_896, 2_896), EarlyStep::Hold(2_896));
    }
}
