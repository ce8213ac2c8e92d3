//! The delay target's use of the router's count of best effort's traffic (its WAN counters,
//! `LinkRound::best_effort`): the capacity best effort leaves free, the recovery ceiling aged to
//! the link's current rate, and the interactive target while best effort sends steadily.

use super::interactive;
use super::{DelayTarget, DelayTargetVariant, Pending, PreviousRound};
use crate::budget::{BestEffortPace, BudgetPhase, LinkRound, RoundTargets};

/// Best effort below this share of the link's rate does not bound the budget (see
/// [`DelayTarget::free_capacity`]): the background alone keeps the operating point the delay
/// target finds, which with many flows taking turns exceeds the rate times the flows' RTT.
const BEST_EFFORT_NEGLIGIBLE: f64 = 0.02;
/// A queue above the target stands unexplained once the budget was cut by this fraction of its
/// bytes (see [`DelayTarget::note_unexplained_queue`]): the background's own queue, at most
/// twice the target while the proportional step cuts it, would then be under the target.
const UNEXPLAINED_CUT: f64 = 0.5;
/// Best effort growing by at most this factor from one round to the next is steady (congestion
/// avoidance adds a segment per RTT, a call or a stream sends at its rate), not a slow start
/// (doubling per RTT): see [`DelayTarget::free_capacity`].
const STEADY_GROWTH: f64 = 1.25;
/// Best effort at this share of the link's rate in a round during an early yield confirms it:
/// a download's slow start, not a web page's request (Key et al.'s objects of up to 1 MB still
/// confirm it; the hold then was no false alarm).
const BEST_EFFORT_BUSY: f64 = 0.5;

impl DelayTarget {
    /// The ceiling of a recovery, aged: no more than the operating point at the rate the link
    /// carries now, `total rate * (RTT + aim)`, when the router counts best effort's traffic.
    /// A ceiling kept from before the link's rate fell (DOCSIS at peak hours, LTE) would send
    /// several BDPs into the queue at once. The RTT is the members' smallest round trips
    /// ([`LinkRound::min_rtt`]) where known and below the smoothed RTT (see
    /// [`LinkRound::path_rtt`]): the smoothed RTT carries the queue, and at
    /// 50 Mbit/s / 20 ms a ceiling aged by it (27-30 ms) sent every recovery to 1.5 BDP, 10 ms
    /// of queue each time (lab `home`). Else the smoothed RTT, queue included: aged by the
    /// smoothed RTT less the round's queue, a noisy value, ceilings ratchet down on its lows
    /// (it changed how two hosts shared the link in the engine's UDP model, QUIC against uTP,
    /// 1.23 -> 1.36).
    pub(super) fn aged_ceiling(&mut self, round: &LinkRound) -> u64 {
        let rate = self.total_rate.estimate();
        let path = match (round.min_rtt, round.base_rtt) {
            (Some(min), Some(smoothed)) => Some(min.min(smoothed)),
            (min, smoothed) => min.or(smoothed),
        };
        if let (Some(base), true) = (path, rate > 0.0) {
            let operating_point = (rate * (base + self.targets.aim).as_secs_f64()) as u64;
            if let Some(recovery) = self.recovery.as_mut() {
                recovery.ceiling = recovery
                    .ceiling
                    .min(operating_point.max(2 * u64::from(round.mss)));
            }
        }
        self.ceiling()
    }

    /// The budget that fits in what best effort leaves free (proportional rule, when the router
    /// counts best effort's traffic): `(total rate - best effort's next rate) * (base RTT +
    /// target)`. Best effort's next rate is this round's times its growth from the round before,
    /// at most doubling (a slow start doubles per RTT, RFC 5681 Sec. 3.1): a download's slow
    /// start empties the background's part of the link a round ahead of filling it, a web page's
    /// burst takes what it needs for its few rounds, and the budget is back the round after it
    /// ends. A steady download that holds the link holds it: the background gets what is left.
    ///
    /// The total rate is what the link carried, which is its capacity only while it was full.
    /// In a round with the queue under a quarter of the target the link had room, so beside a
    /// steady best effort (growing by at most [`STEADY_GROWTH`] a round: not a slow start, which
    /// the bound is for) the capacity is taken as at least `max_growth` times what the link
    /// carried in the round (the probe's growth), unless the interactive target applies.
    /// Without that, beside a steady download on a link it does not fill (lab `cbr`: 6 Mbit/s
    /// on 10), the bound was best effort's rate plus the background's own: the background
    /// joining it was held to the few kB it had carried itself, swinging every round between
    /// that bound and its recovery ceiling (the initial window) for 3-6 s.
    pub(super) fn free_capacity(&mut self, round: &LinkRound) -> Option<u64> {
        let target = self.targets.aim;
        let be = round.best_effort?;
        let secs = round.interval.as_secs_f64();
        if secs <= 0.0 {
            return None;
        }
        let rate = be.bytes as f64 / secs;
        let growth = match self.best_effort_rate.replace(rate) {
            Some(before) if before > 0.0 => (rate / before).clamp(1.0, 2.0),
            _ if rate > 0.0 => 2.0,
            _ => 1.0,
        };
        let base = round.path_rtt()?;
        let mut total = self.total_rate.estimate();
        // Not while a call or a game is on the link (the interactive target): every packet of
        // theirs pays the queue a probe into unseen room builds (lab `home`, call and download:
        // call p95 added 8.2-9.5 ms with it, 7.5-8.0 without).
        let interactive = target < self.config.target;
        let carried = (round.delivered_bytes + be.bytes) as f64 / secs;
        if !interactive && growth <= STEADY_GROWTH && round.queue_delay.is_some_and(|q| q < target / 4) {
            total = total.max(carried * self.config.max_growth);
        } else if self.beside_a_call
            && growth <= STEADY_GROWTH
            && round.queue_delay.is_some_and(|q| q < target)
        {
            // Beside a call, below the aim: room for the segment a round the step adds
            // (see `DelayTarget::decide`), not for a probe. Without it, a call that was on the
            // link before the background came held it to what the link had carried (lab
            // `home`, call and download: 0.59 of the free capacity, the queue at 0.4 ms).
            total = total.max(carried + 2.0 * f64::from(round.mss) / secs);
        }
        if total <= 0.0 {
            return None;
        }
        // Beside a call, at least the call's rate: at 50 Mbit/s / 20 ms a round (22 ms) may
        // count none of its 20 ms frames, and reading it gone sent the budget back to its
        // ceiling, a queue of 4 ms every few rounds (lab `home`, calls up 4.2 ms at p95).
        let next_rate = match self.call_rate(round) {
            Some(call) => (rate * growth).max(call),
            None => rate * growth,
        };
        if next_rate < BEST_EFFORT_NEGLIGIBLE * total {
            // Pings, DNS, keep-alives: the background alone is the delay target's own business.
            return None;
        }
        let free = (total - next_rate).max(0.0);
        Some(((free * (base + target).as_secs_f64()) as u64).max(2 * u64::from(round.mss)))
    }

    /// The steady best effort's rate (bytes/s) while the step aims below the target: a call's
    /// or a game's (see `interactive.rs`).
    fn call_rate(&self, round: &LinkRound) -> Option<f64> {
        self.beside_a_call
            .then(|| self.interactive.steady_rate(round.now))
            .flatten()
    }

    /// Best effort's counted rate this round as a share of the link's total rate (None without
    /// counters, in an empty round, or before the link has a rate).
    fn best_effort_share(&self, round: &LinkRound) -> Option<f64> {
        let (Some(be), false) = (round.best_effort, round.interval.is_zero()) else {
            return None;
        };
        let total = self.total_rate.estimate();
        (total > 0.0).then(|| be.bytes as f64 / round.interval.as_secs_f64() / total)
    }

    /// Whether the counters say best effort is off the link: under `BEST_EFFORT_NEGLIGIBLE` of
    /// its rate in the round (false without counters).
    pub(super) fn best_effort_gone(&self, round: &LinkRound) -> bool {
        self.best_effort_share(round)
            .is_some_and(|share| share < BEST_EFFORT_NEGLIGIBLE)
    }

    /// Whether the router counted best effort taking at least half of the link's rate this
    /// round: a download in its slow start, which confirms the early yield to its SYN.
    pub(super) fn best_effort_busy(&self, round: &LinkRound) -> bool {
        self.best_effort_share(round)
            .is_some_and(|share| share >= BEST_EFFORT_BUSY)
    }

    /// A queue above the target that nobody's traffic explains: the router counts best effort
    /// and it is negligible, so the background alone would have to hold the queue, yet the
    /// queue stayed above the target in every round while the budget in force two rounds ago
    /// (the queue shows that late) was already cut by half the queue's bytes (`delay * C`) from
    /// where it was when the run began: its own queue would have fallen below the target. The path most
    /// likely got longer (a route change, another cell): the bases are too low, and every flow
    /// reads the extra delay as a queue and yields for the two slowdown intervals it takes them
    /// to age out (lab `link`, RTT +30 ms: the background alone at 0.39 of the link for the 10 s
    /// the step lasted). The bases are then measured afresh (`take_stale_base`), and the cuts
    /// made on the phantom queue are undone: returns the budget in force when it appeared plus
    /// the added RTT's bytes, to go back to (the longer path needs more in flight, not less: in
    /// the engine model the background climbed back from a fifth of it through 4 s under 90% of
    /// the link; at 50 Mbit/s / 20 ms + 30 ms, from the budget before the step, it took 1.4 s of
    /// proportional steps to fill the longer path).
    pub(super) fn note_unexplained_queue(
        &mut self,
        round: &LinkRound,
        negligible: bool,
        (delay, target): (f64, f64),
        link_rate: f64,
    ) -> Option<u64> {
        let rtt_before = std::mem::replace(&mut self.previous_rtt, round.base_rtt);
        if !(round.best_effort.is_some() && round.members_follow_budget && negligible && delay > target) {
            self.unexplained_from = None;
            return None;
        }
        let (from, rounds, rtt_from) =
            self.unexplained_from
                .get_or_insert((round.budget_in_force, 0, rtt_before.or(round.base_rtt)));
        *rounds += 1;
        let [two_back, _] = self.earlier_budgets;
        // From the third round on, the budget two rounds back is one of the run's own: before,
        // it may be one from before the queue, below `from` because the budget grew (a probe
        // into a queue read as a cut, and a second fresh base right after the first).
        if *rounds >= 3 && from.saturating_sub(two_back) as f64 >= UNEXPLAINED_CUT * delay * link_rate {
            // The longer path needs its extra RTT's worth of bytes more in flight (the flows'
            // smoothed RTTs show it; at most twice the budget): back to where the budget was,
            // the link's rate times the added RTT above it.
            let added = match (round.base_rtt, *rtt_from) {
                (Some(now), Some(then)) => now.saturating_sub(then).as_secs_f64() * link_rate,
                _ => 0.0,
            };
            let back = *from + (added as u64).min(*from);
            self.unexplained_from = None;
            self.stale_base = true;
            return Some(back);
        }
        None
    }

    /// A stale base, not a queue: back to `before`, the budget in force when the phantom queue
    /// appeared, with nothing left armed by its cuts; the fresh-base slowdown that follows
    /// measures the longer path, and its first round (still on the old bases) keeps the budget.
    pub(super) fn rebase(&mut self, before: u64) -> u64 {
        self.recovery = None;
        self.pending = Pending::Nothing;
        self.previous = PreviousRound::default();
        self.rebasing = true;
        self.phase = BudgetPhase::Hold;
        self.budget = before;
        before
    }

    /// The targets for this round (proportional rule): the queue above which the background
    /// yields, and the queue its step aims at. Alone, both are `target`. Beside bursts
    /// (browsing), both are [`interactive::BROWSING_TARGET`], or
    /// [`interactive::BROWSING_SHARE_OF_RTT`] of the path's RTT ([`LinkRound::min_rtt`]) where
    /// that is known and less; at most `target`, at least `interactive_target`. Beside steady
    /// best effort (a call, a game), the step aims at [`DelayTargetConfig::interactive_target`]
    /// while the yields keep the browsing target's thresholds: at 1 ms, a queue of 2 ms (two
    /// packets at 10 Mbit/s, a call's own frame) halved the budget, five rounds above it armed a
    /// recovery, and a coordinated slowdown's restart cost the download half its window each
    /// time (lab `home`, call and download). See `interactive.rs`.
    pub(super) fn targets(&mut self, round: &LinkRound) -> RoundTargets {
        let target = self.config.target;
        let alone = RoundTargets {
            threshold: target,
            aim: target,
            pace: BestEffortPace::Alone,
        };
        if self.config.variant != DelayTargetVariant::Proportional {
            return alone;
        }
        if let Some(be) = round.best_effort {
            let total = self.total_rate.estimate();
            self.interactive
                .on_round(round.now, round.interval, be, total, round.steady_flow);
        }
        let interactive = self.config.interactive_target;
        let browsing = round
            .min_rtt
            .map_or(interactive::BROWSING_TARGET, |path| {
                path.mul_f64(interactive::BROWSING_SHARE_OF_RTT)
                    .min(interactive::BROWSING_TARGET)
            })
            .min(target)
            .max(interactive);
        let pace = self.interactive.pace(round.now);
        let (threshold, aim) = match pace {
            BestEffortPace::Steady => (browsing, interactive),
            BestEffortPace::Browsing => (browsing, browsing),
            BestEffortPace::Alone => return alone,
        };
        RoundTargets { threshold, aim, pace }
    }
}
