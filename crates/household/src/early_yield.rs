//! The early yield: when best effort is about to need the link, the household budget drops to
//! the flows' floors before the newcomer's slow start reaches the bottleneck, instead of after
//! its queue shows.
//!
//! Why: yielding on the queue alone comes a few rounds late. Best effort's slow start then
//! overflows a queue the background still fills, the background's sender loses packets and cuts
//! its congestion window (CUBIC x0.7, RFC 9438 Sec. 4.6), and it regrows that window slowly
//! through the whole idle period that follows: measured in the lab's on-off run (T = 5 s), the
//! background used under half of the freed link.
//!
//! The signal is a competitor's SYN (an unclassed flow opens): one to two RTTs ahead of the
//! newcomer's first data and about five ahead of its slow start filling the link. But a
//! household opens connections all the time (a browser several a second), and most carry
//! little: a SYN is believed only until it proves a false alarm. A hold that ends without a
//! queue above the target mutes SYNs for [`MUTE_FIRST`], doubling with each false alarm in a row
//! up to [`MUTE_MAX`] (TCP's RTO backoff, RFC 6298 Sec. 5.5); a hold that meets a queue unmutes
//! them. A SYN restarts a hold at most once ([`SYN_RESTARTS`]: a download's data connection
//! after its control connection), so a stream of SYNs cannot hold the background at its floors.
//! Where the router counts best effort's traffic (its WAN counters), the counters judge instead
//! of the queue: a hold lasts [`HOLD_ROUNDS_COUNTED`], best effort taking half of the link ends
//! it, and that counts as a confirmation only if best effort still takes half of the link
//! [`JUDGED_OVER`] later (a download; a web page's objects are a false alarm). Beside it the delay
//! target bounds the budget by what best effort leaves free (`DelayTarget::free_capacity`).
//!
//! If the queue rises above the target during a hold, the controller's own yield takes over with
//! the recovery armed to the operating point before the hold. If the hold ends without a queue
//! (a short request, a connection that sends little), the budget recovers to that point from a
//! quarter of it, doubling while the queue stays empty; where the router counts best effort, at
//! once, within what best effort leaves free. A SYN that a rule then classes as
//! background at its SYN-ACK is retracted: the background never yields to itself.

use slipstream_control::{Duration, Instant};

/// Rounds (about RTTs) the budget stays at the floors after a competitor's SYN unless a queue
/// shows: the newcomer's data arrives one to two RTTs after its SYN, its slow start fills the
/// link three to four after that (an initial window of 10 segments doubling to an 83-packet
/// BDP), and the queue reads above the target a round later (its samples waited in it). With
/// six, the lab's on-off run saw holds end just before the queue showed, and the background
/// came back into best effort's overflow.
pub const HOLD_ROUNDS: u32 = 10;
/// The hold where the router counts best effort: its rate shows a download's slow start two
/// rounds before the queue does (a round to build, a round for samples that waited in it), by
/// the fourth round after the SYN (10, 20, 40 segments: half an 83-packet BDP).
pub const HOLD_ROUNDS_COUNTED: u32 = 6;
/// The early yield's budget is at most this fraction of the one in force: with many flows whose
/// floors alone exceed the BDP, still a deep cut (the allocator time-shares below the floors).
const DEPTH_DIVISOR: u64 = 8;
/// How often a SYN may restart a hold: iperf3 and many download clients open a control
/// connection and, a few RTTs later, the data connection.
pub const SYN_RESTARTS: u32 = 1;
/// SYNs are ignored this long after a hold they started proved a false alarm.
pub const MUTE_FIRST: Duration = Duration::from_secs(4);
/// The longest mute (after repeated false alarms).
pub const MUTE_MAX: Duration = Duration::from_secs(64);
/// Where the router counts best effort, a hold its rate confirmed is judged over this long
/// after: a download keeps half of the link or more, a web page's objects are done well within
/// it (Key et al.'s largest, 1 MB, takes under a second at 10 Mbit/s after its slow start).
pub const JUDGED_OVER: Duration = Duration::from_secs(2);

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

/// What the early yield reads of a round.
#[derive(Clone, Copy, Debug)]
pub struct EarlyRound {
    /// End of the round.
    pub now: Instant,
    /// The budget of the round that ended.
    pub in_force: u64,
    /// Its queueing delay exceeded the target.
    pub queue_above_target: bool,
    /// Where the router counts best effort's traffic: whether it took at least half of the
    /// link's rate in the round (see [`JUDGED_OVER`]). `None` without counters.
    pub best_effort_busy: Option<bool>,
    /// The sum of the flows' floors.
    pub floors: u64,
    /// The smallest budget (two segments).
    pub min: u64,
}

impl EarlyRound {
    /// How long a SYN holds the budget (see [`HOLD_ROUNDS`], [`HOLD_ROUNDS_COUNTED`]).
    fn hold_rounds(&self) -> u32 {
        if self.best_effort_busy.is_some() {
            HOLD_ROUNDS_COUNTED
        } else {
            HOLD_ROUNDS
        }
    }
}

/// The early yield's state (one per link controller).
#[derive(Clone, Copy, Debug, Default)]
pub struct EarlyYield {
    /// Competitor SYNs seen since the last round (less those retracted).
    pending: u32,
    /// Rounds of hold left (0: not holding).
    hold: u32,
    /// Budget in force when the hold began.
    from: u64,
    /// SYNs behind the current hold that no rule has claimed as background since.
    syns_in_hold: u32,
    /// Restarts by a SYN the current hold has left.
    restarts_left: u32,
    /// The current hold met a queue: it was no false alarm.
    confirmed: bool,
    /// Every SYN behind the current hold was retracted: end it at the next round.
    retracted: bool,
    /// SYNs are ignored until then.
    muted_until: Option<Instant>,
    /// False alarms in a row.
    false_alarms: u32,
    /// A hold confirmed by best effort's counted rate is judged until then (see
    /// [`JUDGED_OVER`]); SYNs start no hold meanwhile.
    judging_until: Option<Instant>,
    /// Best effort took half of the link in the round before (while judging).
    busy_before: bool,
}

impl EarlyYield {
    /// A competitor's SYN crossed the router.
    pub fn on_competitor(&mut self) {
        self.pending = self.pending.saturating_add(1);
    }

    /// A SYN reported by [`EarlyYield::on_competitor`] belonged to a background flow.
    pub fn on_retracted(&mut self) {
        if self.pending > 0 {
            self.pending -= 1;
        } else if self.hold > 0 && !self.confirmed && self.syns_in_hold > 0 {
            self.syns_in_hold -= 1;
            self.retracted = self.syns_in_hold == 0;
        }
    }

    /// Whether a competitor's SYN waits for the next round.
    pub fn pending(&self) -> bool {
        self.pending > 0
    }

    /// Whether a hold is under way.
    pub fn holding(&self) -> bool {
        self.hold > 0
    }

    /// Whether SYNs are ignored now (the last holds they started were false alarms).
    pub fn muted(&self, now: Instant) -> bool {
        self.muted_until.is_some_and(|t| now < t)
    }

    fn confirm(&mut self) {
        self.confirmed = true;
        self.false_alarms = 0;
        self.muted_until = None;
    }

    /// Nobody who needed the link came: SYNs are believed less from now on.
    fn false_alarm(&mut self, now: Instant) {
        let mute = MUTE_FIRST
            .saturating_mul(1 << self.false_alarms.min(8))
            .min(MUTE_MAX);
        self.false_alarms += 1;
        self.muted_until = Some(now + mute);
    }

    /// A counted confirmation under judgement: a download if best effort still takes half of
    /// the link when the judgement ends (in its last round or the one before: a loss-based
    /// sender's cut), a web page's objects (a false alarm) if it has stopped by then. `true`
    /// while judging.
    fn judge(&mut self, r: &EarlyRound) -> bool {
        let Some(until) = self.judging_until else {
            return false;
        };
        let busy = r.best_effort_busy == Some(true);
        if r.now >= until {
            self.judging_until = None;
            if busy || self.busy_before {
                self.confirm();
            } else {
                self.false_alarm(r.now);
            }
        }
        self.busy_before = busy;
        true
    }

    /// The round's decision.
    pub fn on_round(&mut self, r: EarlyRound) -> EarlyStep {
        let syns = std::mem::take(&mut self.pending);
        if self.hold == 0 && self.judge(&r) {
            return EarlyStep::Inactive;
        }
        let syn = syns > 0 && !self.muted(r.now);
        if std::mem::take(&mut self.retracted) && self.hold > 0 {
            // The SYNs behind the hold were background's own: back at once, no false alarm.
            self.hold = 0;
            return EarlyStep::Restore(self.from);
        }
        if self.hold == 0 {
            // The round of the signal starts the hold whatever its queue: the background's own
            // operating point keeps the queue at the target, and one round reading it a little
            // above (10.1 ms) made the lab's on-off run miss the SYN in about one on period of
            // five. If someone else already holds a queue, the next round hands over to the
            // controller's yield, from the floors.
            if !syn {
                return EarlyStep::Inactive;
            }
            self.from = r.in_force;
            self.syns_in_hold = syns;
            self.restarts_left = SYN_RESTARTS;
            self.confirmed = false;
            self.hold = r.hold_rounds() + 1;
        } else if r.queue_above_target || r.best_effort_busy == Some(true) {
            // Best effort has arrived: the controller's own yield is in charge. Where the router
            // counts it, whether it came to stay is judged over the next rounds (a web page's
            // objects fill a queue too); else the queue confirms the SYN.
            self.hold = 0;
            if r.best_effort_busy.is_some() {
                self.confirmed = true;
                self.judging_until = Some(r.now + JUDGED_OVER);
                self.busy_before = false;
            } else {
                self.confirm();
            }
            return EarlyStep::Queued { from: self.from };
        } else if syn && self.restarts_left > 0 {
            self.restarts_left -= 1;
            self.syns_in_hold += syns;
            self.hold = r.hold_rounds() + 1;
        }
        self.hold -= 1;
        if self.hold == 0 {
            if !self.confirmed {
                self.false_alarm(r.now);
            }
            return EarlyStep::Restore(self.from);
        }
        EarlyStep::Hold(r.floors.min(self.from / DEPTH_DIVISOR).max(r.min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round of 100 ms on a 1.25 MB/s link (10 Mbit/s), ending at `ms`.
    fn round(ms: u64, in_force: u64, queue: bool, floors: u64) -> EarlyRound {
        EarlyRound {
            now: Instant::from_millis(ms),
            in_force,
            queue_above_target: queue,
            best_effort_busy: None,
            floors,
            min: 2_896,
        }
    }

    #[test]
    fn holds_at_the_floors_then_restores_without_a_queue_and_mutes_syns() {
        let mut e = EarlyYield::default();
        assert_eq!(e.on_round(round(0, 137_500, false, 2_896)), EarlyStep::Inactive);
        e.on_competitor();
        // One flow: its floor (2896) is below an eighth of 137500 (17187).
        for i in 1..=HOLD_ROUNDS {
            let step = e.on_round(round(100 * u64::from(i), 137_500, false, 2_896));
            assert_eq!(step, EarlyStep::Hold(2_896));
            assert!(e.holding());
        }
        // No queue: a short request, long gone. Back to 137500.
        assert_eq!(
            e.on_round(round(1_100, 2_896, false, 2_896)),
            EarlyStep::Restore(137_500)
        );
        assert!(!e.holding());
        // A false alarm: SYNs are ignored for 4 s (until 5.1 s).
        assert!(e.muted(Instant::from_millis(5_000)));
        assert!(!e.muted(Instant::from_millis(5_100)));
        e.on_competitor();
        assert_eq!(
            e.on_round(round(1_200, 137_500, false, 2_896)),
            EarlyStep::Inactive
        );
    }

    #[test]
    fn the_mute_doubles_with_each_false_alarm_and_a_queue_lifts_it() {
        let mut e = EarlyYield::default();
        let mut t = 0;
        let hold_from_syn = |e: &mut EarlyYield, t: &mut u64, queue_at_end: bool| {
            e.on_competitor();
            let mut last = EarlyStep::Inactive;
            for i in 0..=HOLD_ROUNDS {
                *t += 100;
                last = e.on_round(round(*t, 100_000, queue_at_end && i == 3, 2_896));
                if !e.holding() {
                    break;
                }
            }
            last
        };
        assert_eq!(hold_from_syn(&mut e, &mut t, false), EarlyStep::Restore(100_000));
        // Muted 4 s from 1.1 s.
        assert!(e.muted(Instant::from_millis(t + 3_900)));
        t += 4_000;
        assert_eq!(hold_from_syn(&mut e, &mut t, false), EarlyStep::Restore(100_000));
        // Second false alarm in a row: 8 s.
        assert!(e.muted(Instant::from_millis(t + 7_900)));
        assert!(!e.muted(Instant::from_millis(t + 8_000)));
        t += 8_000;
        // This one meets a queue: best effort came. SYNs are believed again.
        assert_eq!(
            hold_from_syn(&mut e, &mut t, true),
            EarlyStep::Queued { from: 100_000 }
        );
        assert!(!e.muted(Instant::from_millis(t)));
        assert_eq!(hold_from_syn(&mut e, &mut t, false), EarlyStep::Restore(100_000));
        assert!(e.muted(Instant::from_millis(t + 3_900)));
        assert!(!e.muted(Instant::from_millis(t + 4_000)));
    }

    #[test]
    fn browsing_does_not_hold_the_background_at_its_floors() {
        // A connection every 250 ms for 60 s, rounds of 100 ms, objects of 60 kB that build no
        // queue above the target.
        let mut e = EarlyYield::default();
        let mut held = 0;
        for round_no in 1..=600u64 {
            let ms = round_no * 100;
            if ms % 250 < 100 {
                e.on_competitor();
            }
            let step = e.on_round(round(ms, 137_500, false, 2_896));
            held += u32::from(matches!(step, EarlyStep::Hold(_)));
        }
        // Holds at 0.1 s, then after mutes of 4, 8, 16 and 32 s: five holds of ten rounds
        // (a SYN restarts each once: 20 rounds), 100 of 600.
        assert!(held <= 100, "held {held} of 600 rounds");
        // Without the mute, every SYN restarted the hold: 599 of 600.
    }

    #[test]
    fn a_queue_hands_over_to_the_controller() {
        let mut e = EarlyYield::default();
        e.on_competitor();
        // 64 flows: floors 185344 exceed an eighth of 160000 (20000), which wins.
        assert_eq!(
            e.on_round(round(100, 160_000, false, 185_344)),
            EarlyStep::Hold(20_000)
        );
        assert_eq!(
            e.on_round(round(200, 20_000, false, 185_344)),
            EarlyStep::Hold(20_000)
        );
        // Best effort's slow start reached the queue.
        assert_eq!(
            e.on_round(round(300, 20_000, true, 185_344)),
            EarlyStep::Queued { from: 160_000 }
        );
        assert_eq!(e.on_round(round(400, 20_000, true, 185_344)), EarlyStep::Inactive);
    }

    #[test]
    fn the_round_of_the_syn_holds_whatever_its_queue() {
        let mut e = EarlyYield::default();
        // The round that ended with the SYN measured the queue just above the target (the
        // background's own operating point): the hold starts all the same.
        e.on_competitor();
        assert_eq!(
            e.on_round(round(100, 100_000, true, 2_896)),
            EarlyStep::Hold(2_896)
        );
        assert!(e.holding());
        // The queue stays: someone else is there; the controller's yield takes over.
        assert_eq!(
            e.on_round(round(200, 2_896, true, 2_896)),
            EarlyStep::Queued { from: 100_000 }
        );
        assert!(!e.holding());
    }

    #[test]
    fn a_second_syn_restarts_the_hold_once() {
        let mut e = EarlyYield::default();
        e.on_competitor();
        assert_eq!(
            e.on_round(round(100, 100_000, false, 2_896)),
            EarlyStep::Hold(2_896)
        );
        assert_eq!(
            e.on_round(round(200, 2_896, false, 2_896)),
            EarlyStep::Hold(2_896)
        );
        // iperf3's data connection after its control connection: ten more rounds.
        e.on_competitor();
        let mut t = 200;
        for _ in 0..HOLD_ROUNDS - 1 {
            t += 100;
            assert_eq!(e.on_round(round(t, 2_896, false, 2_896)), EarlyStep::Hold(2_896));
        }
        // A third SYN does not restart it.
        e.on_competitor();
        t += 100;
        assert_eq!(e.on_round(round(t, 2_896, false, 2_896)), EarlyStep::Hold(2_896));
        t += 100;
        assert_eq!(
            e.on_round(round(t, 2_896, false, 2_896)),
            EarlyStep::Restore(100_000)
        );
    }

    #[test]
    fn a_retracted_syn_ends_its_hold_without_muting() {
        let mut e = EarlyYield::default();
        // Retracted before the round: nothing happens.
        e.on_competitor();
        e.on_retracted();
        assert_eq!(e.on_round(round(100, 100_000, false, 2_896)), EarlyStep::Inactive);
        // Retracted after the hold began (the SYN-ACK came a round later): back at once.
        e.on_competitor();
        assert_eq!(
            e.on_round(round(200, 100_000, false, 2_896)),
            EarlyStep::Hold(2_896)
        );
        e.on_retracted();
        assert_eq!(
            e.on_round(round(300, 2_896, false, 2_896)),
            EarlyStep::Restore(100_000)
        );
        assert!(!e.muted(Instant::from_millis(400)));
    }

    /// A round as [`round`] where the router counts best effort: `busy` when it took half of
    /// the link.
    fn counted(ms: u64, in_force: u64, busy: bool) -> EarlyRound {
        EarlyRound {
            best_effort_busy: Some(busy),
            ..round(ms, in_force, false, 2_896)
        }
    }

    #[test]
    fn counted_a_download_that_stays_confirms_its_syn() {
        let mut e = EarlyYield::default();
        e.on_competitor();
        assert_eq!(e.on_round(counted(100, 137_500, false)), EarlyStep::Hold(2_896));
        assert_eq!(e.on_round(counted(200, 2_896, false)), EarlyStep::Hold(2_896));
        // Its slow start takes half of the link: the controller's yield is in charge.
        assert_eq!(
            e.on_round(counted(300, 2_896, true)),
            EarlyStep::Queued { from: 137_500 }
        );
        // Judged over 2 s: a SYN meanwhile starts no hold; one round under half (a loss) is
        // no verdict.
        e.on_competitor();
        assert_eq!(e.on_round(counted(400, 2_896, true)), EarlyStep::Inactive);
        assert_eq!(e.on_round(counted(1_000, 2_896, false)), EarlyStep::Inactive);
        assert_eq!(e.on_round(counted(2_200, 2_896, true)), EarlyStep::Inactive);
        // Still half of the link at 2.3 s: a download. SYNs are believed on.
        assert_eq!(e.on_round(counted(2_300, 2_896, true)), EarlyStep::Inactive);
        assert!(!e.muted(Instant::from_millis(2_400)));
        e.on_competitor();
        assert_eq!(e.on_round(counted(2_400, 2_896, true)), EarlyStep::Hold(2_896));
    }

    #[test]
    fn counted_a_web_page_that_ends_is_a_false_alarm() {
        let mut e = EarlyYield::default();
        e.on_competitor();
        assert_eq!(e.on_round(counted(100, 137_500, false)), EarlyStep::Hold(2_896));
        // A large object takes half of the link for a round...
        assert_eq!(
            e.on_round(counted(200, 2_896, true)),
            EarlyStep::Queued { from: 137_500 }
        );
        // ...and is done long before the judgement: a false alarm, SYNs muted 4 s.
        assert_eq!(e.on_round(counted(2_100, 137_500, false)), EarlyStep::Inactive);
        assert_eq!(e.on_round(counted(2_200, 137_500, false)), EarlyStep::Inactive);
        assert!(e.muted(Instant::from_millis(6_100)));
        assert!(!e.muted(Instant::from_millis(6_200)));
    }

    #[test]
    fn counted_the_hold_is_shorter() {
        let mut e = EarlyYield::default();
        e.on_competitor();
        for i in 1..=u64::from(HOLD_ROUNDS_COUNTED) {
            assert_eq!(
                e.on_round(counted(100 * i, 137_500, false)),
                EarlyStep::Hold(2_896)
            );
        }
        assert_eq!(
            e.on_round(counted(700, 2_896, false)),
            EarlyStep::Restore(137_500)
        );
        assert!(e.muted(Instant::from_millis(4_600)));
    }

    #[test]
    fn never_below_the_minimum() {
        let mut e = EarlyYield::default();
        e.on_competitor();
        // 8000 / 8 = 1000 is below the two-segment minimum.
        assert_eq!(
            e.on_round(round(100, 8_000, false, 2_896)),
            EarlyStep::Hold(2_896)
        );
    }
}
