//! The delay-target budget controller: LEDBAT's rule (RFC 6817 Sec. 2.4.2; rLEDBAT, RFC 9840,
//! runs it at the receiver through the window, as Slipstream does at the router), applied once
//! per round to the household budget instead of per ACK to one flow's cwnd.
//!
//! `off_target = (TARGET - queuing_delay) / TARGET` as in RFC 6817. Two step rules:
//! * [`DelayTargetVariant::Ledbat`] — faithful: the per-ACK rule
//!   `cwnd += GAIN * off_target * bytes_newly_acked * MSS / cwnd`, summed over the round's
//!   acknowledged bytes (about `GAIN * off_target * MSS` per RTT), decrease capped at half per
//!   round. It needs about one RTT per MSS of BDP to fill a link: 86 RTTs for 10 Mbit/s at 100 ms.
//! * [`DelayTargetVariant::Proportional`] — Slipstream's default: the budget moves by
//!   `GAIN * (TARGET - queuing_delay) * C` per round, C the link's rate as the background
//!   measured it (`link_rate`: the largest round delivery rate of the last ten seconds). The
//!   queue is `(B - BDP) / C` with the background alone, so each round removes `GAIN` of the
//!   budget's distance from `BDP + TARGET * C` whatever the BDP: it converges in a few rounds at
//!   any rate and RTT, and beside best effort it yields the queue's bytes, not the background's
//!   small share of them. Well below the target (under a quarter of it for two rounds) the
//!   budget may grow geometrically, `max_growth` per round (LEDBAT++'s slow start with a delay
//!   exit), but not past the budget before the background's own last overshoot (TCP's
//!   ssthresh). A freed link is taken back quickly: after a long yield (five rounds above the
//!   target) the first round with an empty queue restarts the budget at half of the operating
//!   point before the yield (CUBIC's W_max) and the second at all of it; after a shorter yield
//!   that began with a best-effort SYN (see `early_yield`), the second round with an empty queue
//!   restarts it at a quarter and doubles it up to that point. Above
//!   twice the target the budget shrinks by `2 * TARGET / queuing_delay` per round (halving at
//!   four times it, as a loss would make a TCP sender do), because beside best effort the
//!   background's own rate R is too small for the proportional step to yield in time; and above
//!   the target for two rounds while delivering under 0.7 of the link's rate C, it shrinks to
//!   its share R / C (someone else holds the rest of the link and wants more). A round right
//!   after a cut whose queue is lower than the one cut on only measures: that queue is the old
//!   budget's, draining (one reduction per window of data, as TCP's).
//!
//! Where the router counts best effort's traffic (its WAN counters, `LinkRound::best_effort`),
//! the proportional rule also keeps the budget within what best effort leaves free (see
//! `DelayTarget::free_capacity`), goes straight back to the operating point before best effort
//! came once the counters say it left, keeps its recovery ceiling within the operating point at
//! the link's current rate, and lowers its target beside best effort's packets: every one of
//! them waits in the background's queue. Beside browsing the target is 3 ms; beside steady
//! packets (a call, a game; under browsing, told by its own flow: [`steady_flows`]) the step
//! aims at `interactive_target` (1 ms) under 3 ms thresholds (see `DelayTarget::targets`).
//!
//! Both grow only while the flows use what they have: the budget never exceeds twice the bytes
//! in flight plus the flows' floors, so a cwnd- or application-limited household does not build
//! a budget far above what is in force (which would then take many rounds to come down).
//!
//! # States
//! Each round of the proportional rule is one of these decisions, in this order (`BudgetPhase`):
//!
//! | state | when | budget |
//! |---|---|---|
//! | rebase (`rebasing`) | the round after a stale base was found (the fresh-base slowdown's first, still on the old bases) | unchanged |
//! | early yield (`early_yield`) | a best-effort SYN, no WAN counters | the floors, for a few rounds |
//! | settle (`Pending::Settle`) | the last round grew it by over a tenth, queue not above the target | unchanged: this round measured the old budget |
//! | burst (`Pending::Burst`) | one of the two rounds after such a raise, the queue above the target but no more than the raise's own burst explains | unchanged, once: the next round tells a standing queue |
//! | drain (`Pending::Drain`) | the round after a cut, the queue above the target but not grown; or the round after that, the queue below the last | unchanged: the cut is taking hold |
//! | recover (`Recover`) | a `Recovery` is armed and best effort has gone (the counters say so, or the queue stayed empty) | back to its ceiling: at once (counted), half then all (`Pace::Quick`), or a quarter then doubling (`Pace::Cautious`) |
//! | probe (`Probe`) | the queue under a quarter of the target for two rounds | up to `max_growth` times, bounded by `DelayTarget::probe` |
//! | hold (`Hold`) | near the target | the proportional step |
//! | yield (`Yield`) | above the target, or best effort's rate leaves less free | the step, `2T/q` above twice the target, the share `R/C`, the free capacity; at most halved |
//!
//! A stale base found in the round (`counted.rs`, `note_unexplained_queue`: a queue that cuts
//! did not explain, best effort counted and negligible) overrides recover, drain, probe, hold and
//! yield: the budget goes back to where it was when the phantom queue appeared.
//!
//! Every constant, what it is and where it comes from (a paper, or the lab trace that set it),
//! is in the table in `docs/household.md`, section "Constants".

use crate::budget::{BudgetController, BudgetPhase, BudgetStats, LinkRound, RoundTargets};
use crate::early_yield::EarlyYield;
use crate::link_rate::LinkRate;
use pending::Pending;
use slipstream_control::{Duration, Instant};

use recovery::{Pace, Recovery};

/// Which step rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DelayTargetVariant {
    /// RFC 6817's per-ACK rule summed over the round.
    Ledbat,
    /// Proportional to the delivery rate, with a geometric probe below half the target.
    Proportional,
}

/// Parameters of [`DelayTarget`].
#[derive(Clone, Debug, PartialEq)]
pub struct DelayTargetConfig {
    /// Queueing delay the household's background traffic may add (RFC 6817's TARGET, which is at
    /// most 100 ms there; a home link wants far less).
    pub target: Duration,
    /// RFC 6817's GAIN (1 there); for the proportional rule, the fraction of the distance to the
    /// operating point removed per round (0 < gain <= 1).
    pub gain: f64,
    /// Proportional rule: largest growth factor per round below half the target (>= 1).
    pub max_growth: f64,
    /// Which step rule: proportional (default) or RFC 6817's per-ACK rule summed per round.
    pub variant: DelayTargetVariant,
    /// Proportional rule: drop to the floors when a best-effort flow opens (`early_yield`);
    /// RFC 6817 knows no such signal, so the `ledbat` variant never does.
    pub early_yield: bool,
    /// Proportional rule: the queue the step aims at while best effort sends packets steadily
    /// (a call, a game): the delay the background adds to each of their packets. `target` holds
    /// while the background is alone, where a few ms more keep a window-limited sender's link
    /// full.
    pub interactive_target: Duration,
}

impl Default for DelayTargetConfig {
    fn default() -> Self {
        DelayTargetConfig {
            target: Duration::from_millis(10),
            gain: 0.5,
            max_growth: 1.5,
            variant: DelayTargetVariant::Proportional,
            early_yield: true,
            interactive_target: Duration::from_millis(1),
        }
    }
}

impl DelayTargetConfig {
    /// RFC 6817 as written (GAIN 1), with Slipstream's target.
    pub fn ledbat() -> Self {
        DelayTargetConfig {
            gain: 1.0,
            variant: DelayTargetVariant::Ledbat,
            early_yield: false,
            ..DelayTargetConfig::default()
        }
    }

    /// Checks the ranges; the error names the field (config validation reports it).
    pub fn validate(&self) -> Result<(), String> {
        if self.target.is_zero() || self.target > Duration::from_secs(1) {
            return Err(format!(
                "target must be above 0 and at most 1s, not {:?}",
                self.target
            ));
        }
        if !(self.gain > 0.0 && self.gain <= 1.0) {
            return Err(format!("gain must be in (0, 1], not {}", self.gain));
        }
        if self.early_yield && self.variant != DelayTargetVariant::Proportional {
            return Err("early_yield is only for the proportional variant".into());
        }
        if self.interactive_target.is_zero() || self.interactive_target > self.target {
            return Err(format!(
                "interactive_target must be above 0 and at most target ({:?}), not {:?}",
                self.target, self.interactive_target
            ));
        }
        if !(1.0..=4.0).contains(&self.max_growth) {
            return Err(format!("max_growth must be 1 to 4, not {}", self.max_growth));
        }
        Ok(())
    }
}

/// The controller state.
#[derive(Clone, Debug)]
pub struct DelayTarget {
    config: DelayTargetConfig,
    budget: u64,
    phase: BudgetPhase,
    /// What the last round's decision leaves for this one (proportional rule).
    pending: Pending,
    /// The way back to the operating point before the last yield, while one is armed.
    recovery: Option<Recovery>,
    /// Consecutive rounds with the queue below a quarter of the target.
    low_rounds: u32,
    /// Consecutive rounds with the queue above the target, and when the run began.
    high_rounds: u32,
    high_since: Instant,
    /// The operating point when the current yield began.
    yield_from: u64,
    /// The round before this one (proportional rule's share test).
    previous: PreviousRound,
    /// The link's rate (proportional rule's C).
    link_rate: LinkRate,
    /// The largest delivery rate of rounds with a queue of at least half the target (the
    /// bottleneck was busy), and when the last such round ended: bounds the probe (see
    /// [`DelayTarget::probe`]).
    busy_rate: LinkRate,
    busy_at: Option<Instant>,
    /// The background's own overshoot: the smallest budget in force in the round the queue last
    /// rose above the target while the background delivered the link's rate, and in the two
    /// rounds before it (the queue shows about two rounds after the budget that built it); and
    /// when (see [`DelayTarget::probe`]).
    overshoot: Option<Overshoot>,
    /// The budgets in force in the two rounds before this one (`u64::MAX` before there were any).
    earlier_budgets: [u64; 2],
    /// This round only measured a raise's burst (`Pending::Burst`): it does not shift
    /// `earlier_budgets`.
    measured_only: bool,
    /// This round reads the burst of the raise (bytes) two rounds back (`Pending::Burst`).
    burst_read: Option<u64>,
    /// The yield to a best-effort flow's SYN (proportional rule, `early_yield`).
    early: EarlyYield,
    /// Best effort's packets over the last windows: which target applies.
    interactive: interactive::InteractiveWatch,
    /// This round's threshold and the queue its proportional step aims at (`DelayTarget::targets`).
    targets: RoundTargets,
    /// This round's aim is below its target: best effort sends steadily (a call, a game).
    beside_a_call: bool,
    /// The link's rate as background and best effort together used it (a windowed maximum of
    /// the rounds' delivery plus best effort's bytes, when the router counts them): what the
    /// link carries now, whoever sends. A recovery goes no further than its operating point.
    total_rate: LinkRate,
    /// Best effort's rate in the previous round (bytes/s), when the router counts it.
    best_effort_rate: Option<f64>,
    /// The last round's budget was cut to the capacity best effort leaves free.
    capped: bool,
    /// The budget in force when the current run of rounds above the target with best effort
    /// counted and negligible began, the run's rounds so far and the RTT before it (see
    /// `DelayTarget::note_unexplained_queue`); and whether the bases should be measured afresh.
    unexplained_from: Option<(u64, u32, Option<Duration>)>,
    /// The last round's `LinkRound::base_rtt` (the RTT before an unexplained queue's run).
    previous_rtt: Option<Duration>,
    stale_base: bool,
    /// A stale base was found: the next round (the fresh-base slowdown's first) still measured
    /// the old bases, and only keeps the budget.
    rebasing: bool,
}

/// The background's own overshoot (see [`DelayTarget::probe`]).
#[derive(Clone, Copy, Debug)]
struct Overshoot {
    /// The smallest budget in force in the round the queue showed and the two before.
    limit: u64,
    /// When the queue showed.
    at: Instant,
    /// What the background delivered in that round, bytes/s: the link's rate, if the queue
    /// stood.
    rate: f64,
}

/// What the share test keeps of the previous round.
#[derive(Clone, Copy, Debug, Default)]
struct PreviousRound {
    delivered: u64,
    interval: Duration,
    above_target: bool,
}

/// Rounds the queue must stay below a quarter of the target before the budget grows
/// geometrically: one low round is often just the trough after a cut, and growing then brings the
/// overshoot back one RTT later.
const LOW_ROUNDS_TO_PROBE: u32 = 2;
/// The ceiling is this fraction of the budget in force when a yield began (CUBIC's W_max with
/// its fast-convergence factor, RFC 9438 Sec. 4.7): a ceiling that was itself an overshoot is not
/// reached again at once.
const CEILING_FRACTION: f64 = 0.85;
/// A yield arms the quick recovery only when the queue stayed above the target this many rounds:
/// best effort held the link, not a passing burst or the background's own oscillation (with
/// dozens of flows taking turns, brief yields are frequent, and doubling back after each made the
/// budget swing).
const HIGH_ROUNDS_TO_RECOVER: u32 = 5;
/// Above the target for two rounds, a background delivering less than this fraction of the
/// link's rate over them yields to that fraction (see [`DelayTarget::on_round`]).
const SHARE_TO_YIELD: f64 = 0.7;
/// A recovery starts from this fraction of the ceiling (when the budget is below it): doubling
/// from the floor took six rounds, most of a five-second idle period's first second. (From half
/// of it, the recovery after a coordinated slowdown overshot the background alone's operating
/// point in the lab's many-flows start and cost the phase's measurement 4%.)
const RECOVERY_START_DIVISOR: f64 = 4.0;
/// After best effort held the link (`held_long`), the first round with an empty queue recovers
/// to this fraction of the ceiling and the second to all of it. Best effort's queue drains within
/// a round of its last data; then doubling from a quarter took four rounds of the smoothed RTT
/// (about 0.2 s each at 10 Mbit/s / 100 ms with a 1-BDP queue), 0.8 s of each five-second idle
/// period in the lab's on-off run. Half first: one empty round can still be best effort's own
/// dip after a loss (a queue under 0.43 BDP empties after CUBIC's x0.7 cut), the second confirms.
const QUICK_START_DIVISOR: f64 = 2.0;
/// The quick recovery also needs the queue above the target for this long: best effort's own
/// start (a slow start that left early, growing a segment per RTT below the BDP) empties the
/// queue now and then in its first second, and at 50 Mbit/s / 20 ms five rounds last only
/// 100 ms (the lab's on-off run measured best effort's share of such on periods at 0.94 when the
/// quick recovery took them for its end).
const HELD_LONG: Duration = Duration::from_secs(1);
/// The rate measured with a queue bounds the probe only when it is at least this fraction of the
/// largest rate seen: a rate measured while best effort held most of the link is the background's
/// share, not the link's, and would stop the probe far below the link.
const BUSY_RATE_KNOWN: f64 = 0.9;
/// A background delivering at least this fraction of the link's rate in the round its queue rose
/// above the target built that queue itself (see [`DelayTarget::probe`]). One round, not two:
/// the round before is often the trough of the background's own oscillation (many flows taking
/// turns); 0.8, not 0.9: one round's delivery is that noisy.
const OWN_QUEUE_SHARE: f64 = 0.8;

impl DelayTarget {
    /// A controller starting from `initial` bytes of budget.
    pub fn new(config: DelayTargetConfig, initial: u64) -> Self {
        DelayTarget {
            config,
            budget: initial,
            phase: BudgetPhase::Start,
            pending: Pending::Nothing,
            recovery: None,
            low_rounds: 0,
            high_rounds: 0,
            high_since: Instant::from_millis(0),
            yield_from: 0,
            previous: PreviousRound::default(),
            link_rate: LinkRate::default(),
            busy_rate: LinkRate::default(),
            busy_at: None,
            overshoot: None,
            earlier_budgets: [u64::MAX; 2],
            measured_only: false,
            burst_read: None,
            early: EarlyYield::default(),
            interactive: interactive::InteractiveWatch::default(),
            targets: RoundTargets::default(),
            beside_a_call: false,
            total_rate: LinkRate::default(),
            best_effort_rate: None,
            capped: false,
            unexplained_from: None,
            previous_rtt: None,
            stale_base: false,
            rebasing: false,
        }
    }
}

impl DelayTarget {
    /// Whether the budget may grow geometrically: the queue has stayed under a quarter of the
    /// target. Not while the step aims below the target (beside a call): each 1.5x step is a
    /// burst the call's packets wait behind; the step adds a segment a round instead.
    fn probing(&self) -> bool {
        self.low_rounds >= LOW_ROUNDS_TO_PROBE && !self.beside_a_call
    }
}

impl BudgetController for DelayTarget {
    fn on_competitor(&mut self, _now: Instant) {
        if self.config.early_yield {
            self.early.on_competitor();
        }
    }

    fn on_competitor_retracted(&mut self) {
        if self.config.early_yield {
            self.early.on_retracted();
        }
    }

    fn on_slowdown_round(&mut self, round: &LinkRound) -> u64 {
        // Skipped like any controller's, unless a best-effort SYN came during the slowdown: the
        // early yield needs no measurement and must not wait for the rounds after it.
        if self.early.pending() {
            return self.on_round(round);
        }
        round.budget_in_force
    }

    fn on_round(&mut self, round: &LinkRound) -> u64 {
        if let (Some(be), false) = (round.best_effort, round.interval.is_zero()) {
            let total = (round.delivered_bytes + be.bytes) as f64 / round.interval.as_secs_f64();
            self.total_rate.update(round.now, total);
        }
        self.targets = self.targets(round);
        let target_duration = self.targets.threshold;
        self.beside_a_call = self.targets.aim < target_duration;
        let queue_above_target = round.queue_delay.is_some_and(|q| q > target_duration);
        let decided = self.decide(round, target_duration, queue_above_target);
        let [_, one_back] = self.earlier_budgets;
        if std::mem::take(&mut self.measured_only) {
            return decided;
        }
        self.earlier_budgets = if self.rebasing {
            // The cuts on the phantom queue are undone: none of them may count again.
            [decided; 2]
        } else {
            [one_back, round.budget_in_force]
        };
        decided
    }

    fn take_stale_base(&mut self) -> bool {
        std::mem::take(&mut self.stale_base)
    }

    fn stats(&self) -> BudgetStats {
        BudgetStats {
            budget: self.budget,
            phase: self.phase,
            estimate: None,
            targets: (self.config.variant == DelayTargetVariant::Proportional).then_some(self.targets),
        }
    }
}

impl DelayTarget {
    /// One round's decision (see the module's table of states).
    fn decide(&mut self, round: &LinkRound, target_duration: Duration, queue_above_target: bool) -> u64 {
        self.burst_read = None;
        let in_force = round.budget_in_force;
        if std::mem::take(&mut self.rebasing) {
            self.phase = BudgetPhase::Hold;
            self.budget = in_force;
            return in_force;
        }
        // A best-effort SYN is the early warning: a download's slow start comes a few rounds
        // later, faster than any measurement. A household opens connections all the time, so
        // a SYN is believed until holds prove false alarms (see `early_yield`); where the router
        // counts best effort, its rate judges each hold (a download keeps half of the link).
        if self.config.early_yield {
            if let Some(budget) = self.early_step(round, queue_above_target) {
                return budget;
            }
        }
        if let Some(budget) = self.measure_only_after_a_raise(round, target_duration, queue_above_target) {
            return budget;
        }
        let Some(queue_delay) = round.queue_delay else {
            // No sample: nothing was measured (no data, or every flow held); keep the budget.
            self.phase = BudgetPhase::Idle;
            // Unless it is below one floor (a duty cycle on a small link, see the allocator)
            // and the counters say best effort has gone: one floor, so a flow sends every round
            // and the next round measures (a held flow measures nothing, and its next turn may
            // be eight rounds away).
            let floor = 2 * u64::from(round.mss);
            if in_force < floor && self.best_effort_gone(round) {
                self.budget = floor;
                return floor;
            }
            self.budget = in_force;
            return in_force;
        };
        let budget = in_force.max(1) as f64;
        let target = target_duration.as_secs_f64();
        let delay = queue_delay.as_secs_f64();
        let mut recovering = false;
        // What best effort leaves free, where the router counts it (proportional rule).
        let mut free = None;
        let mut next = match self.config.variant {
            DelayTargetVariant::Ledbat => {
                let off_target = ((target - delay) / target).clamp(-1.0, 1.0);
                let step =
                    self.config.gain * off_target * f64::from(round.mss) * round.delivered_bytes as f64
                        / budget;
                budget + step
            }
            DelayTargetVariant::Proportional => {
                let link_rate = self.link_rate.update(round.now, round.delivery_rate());
                free = self.free_capacity(round);
                if let Some(before) =
                    self.note_unexplained_queue(round, free.is_none(), (delay, target), link_rate)
                {
                    return self.rebase(before);
                }
                self.note_queue(round, delay, target, link_rate);
                let aim = self.targets.aim.as_secs_f64();
                let step = if self.beside_a_call {
                    // Beside a call the aim is about one packet's time on the link (1.2 ms at
                    // 10 Mbit/s), the samples' own spread: the proportional step would move by
                    // a fraction of a segment. Below it, a segment a round (TCP's congestion
                    // avoidance, RFC 5681 Sec. 3.1) finds the room without a probe's burst;
                    // above it, the excess queue's bytes go in one round (at GAIN 0.5 the
                    // segments won: the quartile sat at 1.5 ms for a 1 ms aim).
                    if delay < aim {
                        budget + (self.config.gain * (aim - delay) * link_rate).max(f64::from(round.mss))
                    } else {
                        budget - (delay - aim) * link_rate
                    }
                } else {
                    budget + self.config.gain * (target - delay) * link_rate
                };
                let left = round.best_effort.is_some() && free.is_none();
                let next = if let Some(to) = self.recover(round, target_duration, budget, left) {
                    recovering = true;
                    to.max(step)
                } else if self.probing() {
                    step.max(self.probe(budget, round, link_rate, target_duration))
                } else {
                    step
                };
                // The round after a cut sees the queue the old budget built (the sender learns of
                // the smaller window only from the ACKs that follow it): while that queue shrinks
                // the cut is taking hold, and cutting again on it cuts twice for one queue (TCP
                // reduces once per window of data, RFC 5681 Sec. 3.2, RFC 3168 Sec. 6.1.2).
                // Without timestamps this round also delivers less while the sender waits out
                // the smaller window, which the share test would read as a competitor: the
                // background alone went from 1.4 BDP to a quarter of it in three rounds. Where
                // samples lag (a long round trip without timestamps) the queue can still be
                // shrinking a round later: up to `DRAIN_ROUNDS` rounds, each below the last
                // (`pending.rs`). A queue that held or grew is someone else's too: yield on.
                if self.cut_taking_hold(delay, target, queue_delay) {
                    self.previous = PreviousRound::default();
                    self.phase = BudgetPhase::Yield;
                    self.budget = in_force;
                    return in_force;
                }
                self.yield_cuts(round, next, budget, delay, target, link_rate)
            }
        };
        // At most halve per round (LEDBAT never cuts more than a loss would).
        next = next.max(budget / 2.0);
        if free.is_some() && next < budget && !recovering && (delay > target || !self.beside_a_call) {
            // A cut while best effort is on the link (its burst's queue, its rate): the counters
            // will say when it is gone, and the background goes back to where it was then.
            // Not a trim towards the aim beside a call: the call stays, and going back to the
            // budget before the trim at the next low reading swung the budget by 4 ms of queue
            // every few rounds (lab `home`, call and download).
            self.arm_recovery(in_force, None);
        }
        // What best effort leaves free, measured: a cut below it is no halving of a guess.
        let capped = free.is_some_and(|cap| next > cap as f64);
        if let (true, Some(cap)) = (capped, free) {
            if !self.capped {
                // Best effort took part of the link: back to this point when it leaves.
                self.arm_recovery(in_force, Some(Pace::Quick));
            }
            next = cap as f64;
        }
        self.capped = capped;
        if recovering && next.round() as u64 >= self.ceiling() {
            // Reached (not merely aimed at: a cap to what best effort leaves free keeps it armed).
            self.recovery = None;
        }
        self.phase = if delay > target || (capped && next < budget) {
            BudgetPhase::Yield
        } else if recovering {
            BudgetPhase::Recover
        } else if self.probing() {
            BudgetPhase::Probe
        } else {
            BudgetPhase::Hold
        };
        let mut next = next.round() as u64;
        if next > in_force && !recovering {
            // Grow only into what the flows use (see the module docs). A recovery is exempt: the
            // flows were held below what they used before the yield, and the ceiling bounds it.
            let usable = 2 * round.in_flight + round.floors;
            next = next.min(usable.max(in_force));
        }
        self.pending = self.next_pending(round, next, recovering, delay > target, queue_delay);
        self.budget = next;
        next
    }
}

#[cfg(test)]
mod burst_tests;
mod counted;
#[cfg(test)]
mod counted_tests;
mod early;
mod interactive;
#[cfg(test)]
mod interactive_tests;
mod pending;
mod probe;
mod queue_history;
mod recovery;
pub mod steady_flows;
#[cfg(test)]
mod tests;
mod yields;
