//! The household budget: how many bytes all background flows of one access link (the downlink or
//! the uplink) may have in flight together. A [`BudgetController`] decides it once per round (about
//! one base RTT) from what the round measured; the allocator (`allocator`) splits it over hosts
//! and flows.
//!
//! Controllers (one algorithm per file):
//! * `delay_target` — a queueing-delay target at the router (LEDBAT, RFC 6817; rLEDBAT,
//!   RFC 9840), the default;
//! * `key_binary_search` — Key et al. Sec. 4, binary search for the change point of
//!   rho = R / w (Fig. 4, eq. 26-27);
//! * `key_stochastic` — Key et al. Sec. 4, stochastic approximation (eq. 31).

use slipstream_control::{Duration, Instant};

/// What one control round measured on one link. Every field is household-wide.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkRound {
    /// End of the round.
    pub now: Instant,
    /// Length of the round.
    pub interval: Duration,
    /// The shared queueing delay (filtered, see `link_delay`); `None` when no flow gave a sample
    /// in the round.
    pub queue_delay: Option<Duration>,
    /// The household's RTT on this link: the median of the flows' smoothed RTTs, once known.
    /// It includes the standing queue (see [`LinkRound::path_rtt`]); it follows a route change
    /// within a few round trips, which a minimum would not.
    pub base_rtt: Option<Duration>,
    /// Bytes the link's background flows had acknowledged during the round.
    pub delivered_bytes: u64,
    /// The budget that was in force during the round, in bytes.
    pub budget_in_force: u64,
    /// Bytes in flight of all the link's background flows at the end of the round (sent, seen at
    /// the router, not yet acknowledged).
    pub in_flight: u64,
    /// Largest MSS of the link's active flows (the unit of additive steps).
    pub mss: u32,
    /// Background flows with data in the round.
    pub active_flows: usize,
    /// Sum of the active flows' floors (two segments each): below this the allocator time-shares.
    pub floors: u64,
    /// Every member follows the budget within a round (through its window). A policed UDP flow
    /// follows it by at most one step per few rounds: its queue outlasts the budget's cuts, so
    /// a queue the cuts did not explain says nothing of the bases then.
    pub members_follow_budget: bool,
    /// The members' path RTT: the median of their smallest round trips (each half's minimum,
    /// engine `rtt`), which no queue lengthens; `None` where no member has one.
    pub min_rtt: Option<Duration>,
    /// What crossed the link in the round besides the background (the router's WAN counters less
    /// the background's own packets); `None` when the router cannot count it.
    pub best_effort: Option<BestEffort>,
    /// The router's connection tracker sees a best-effort UDP flow of the household sending
    /// steadily: a call or a game (`delay_target::steady_flows`; false without conntrack).
    pub steady_flow: bool,
}

/// Best effort's traffic on a link in one round: what the router's interface counters saw less
/// the background's own packets. The one direct sign that someone else needs the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BestEffort {
    /// Bytes on the wire (as the interface counts them).
    pub bytes: u64,
    /// Packets.
    pub packets: u64,
}

impl LinkRound {
    /// The RTT without the link's standing queue: [`LinkRound::base_rtt`] less the round's
    /// queueing delay. An operating point `rate * (RTT + target)` computed from the smoothed RTT
    /// counts the queue twice: the queue it allows raises the RTT it is computed from (lab `home`,
    /// a call beside the download: the budget sat at a cap that allowed 6 ms of queue for a
    /// 3 ms target). Nor is the smoothed RTT less the round's queue the path: the queue is a
    /// low quantile of the round's samples and the smoothed RTT lags, so at 50 Mbit/s / 20 ms
    /// it read 27-30 ms for a 20.4 ms path (lab `home`: a recovery to 1.5 BDP, 10 ms of queue
    /// each time). The members' smallest round trips ([`LinkRound::min_rtt`]) bound it where
    /// known. They never age: after a route got longer the path reads short, which only keeps
    /// the budget lower beside best effort. Only a bound: 48 uploads in the eBPF end-to-end test
    /// read a median minimum above the median smoothed RTT (cause not traced), and a recovery
    /// ceiling aged by it sent the budget to 1.5 MB on a 10 Mbit/s link.
    pub fn path_rtt(&self) -> Option<Duration> {
        let less_queue = self
            .base_rtt?
            .saturating_sub(self.queue_delay.unwrap_or(Duration::ZERO));
        Some(self.min_rtt.map_or(less_queue, |m| m.min(less_queue)))
    }

    /// Delivery rate of the round in bytes per second (Key et al.'s R).
    pub fn delivery_rate(&self) -> f64 {
        let secs = self.interval.as_secs_f64();
        if secs <= 0.0 {
            0.0
        } else {
            self.delivered_bytes as f64 / secs
        }
    }
}

/// What a budget controller (or the link around it) is doing; `as_str` gives the metric label.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BudgetPhase {
    /// No round has decided yet.
    #[default]
    Start,
    /// The round measured nothing (no data, or every flow held): the budget stays.
    Idle,
    /// Delay target: near the target, proportional steps.
    Hold,
    /// Delay target: well below the target, geometric growth.
    Probe,
    /// Delay target: back to the operating point before a long yield, by doubling.
    Recover,
    /// Above the target (delay target) or a falling rate per window (Key et al.): shrinking.
    Yield,
    /// Key et al.: doubling until the window is too large (Fig. 4's initial phase).
    Init,
    /// Key et al.: binary search inside the bracket.
    Search,
    /// Key et al.: the bracket closed and the change point moved; searching again from below.
    Restart,
    /// Key et al.: following a known change point.
    Track,
    /// Key et al.: no delivery for too long; back to one unit.
    Timeout,
    /// Key et al.: the estimate was reseeded from the current measurement.
    Reseed,
    /// Key et al. (stochastic): growing.
    Grow,
    /// The link's coordinated slowdown holds every budget at its minimum.
    Slowdown,
}

impl BudgetPhase {
    /// The label in metrics and `slipstream status`.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPhase::Start => "start",
            BudgetPhase::Idle => "idle",
            BudgetPhase::Hold => "hold",
            BudgetPhase::Probe => "probe",
            BudgetPhase::Recover => "recover",
            BudgetPhase::Yield => "yield",
            BudgetPhase::Init => "init",
            BudgetPhase::Search => "search",
            BudgetPhase::Restart => "restart",
            BudgetPhase::Track => "track",
            BudgetPhase::Timeout => "timeout",
            BudgetPhase::Reseed => "reseed",
            BudgetPhase::Grow => "grow",
            BudgetPhase::Slowdown => "slowdown",
        }
    }
}

impl std::fmt::Display for BudgetPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A controller's view of itself, for metrics and `slipstream status`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BudgetStats {
    /// Current budget, bytes.
    pub budget: u64,
    /// What the controller is doing.
    pub phase: BudgetPhase,
    /// The controller's own estimate of the link's usable window (bytes), if it keeps one
    /// (Key et al.'s change point).
    pub estimate: Option<u64>,
    /// The queue the controller worked to in its last round, if it keeps a delay target.
    pub targets: Option<RoundTargets>,
}

/// The queue a delay-target controller worked to in a round, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundTargets {
    /// Above this queue the background yields.
    pub threshold: Duration,
    /// The queue the controller's step aims at: the threshold, or less beside a call or a game.
    pub aim: Duration,
    /// What the router's counts said of best effort on the link, which set both.
    pub pace: BestEffortPace,
}

/// What the router's counts say of best effort on one link (see `delay_target/interactive.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BestEffortPace {
    /// Nothing steady: the background has the link to itself (or shares it with a download,
    /// which its own queue and rate settle).
    #[default]
    Alone,
    /// Packets, but bursts: browsing.
    Browsing,
    /// The same packet rate window after window, or a flow that sends so under browsing: a call
    /// or a game.
    Steady,
}

impl BestEffortPace {
    /// The name metrics and `slipstream status` use.
    pub fn as_str(self) -> &'static str {
        match self {
            BestEffortPace::Alone => "alone",
            BestEffortPace::Browsing => "browsing",
            BestEffortPace::Steady => "steady",
        }
    }
}

/// A household budget controller.
pub trait BudgetController {
    /// One round ended: returns the budget for the next round, in bytes. The caller clamps it to
    /// `[min_budget, max_budget]`.
    fn on_round(&mut self, round: &LinkRound) -> u64;

    /// A round that measured the link's coordinated slowdown, not the budget in force (the
    /// controller's own, which the engine restored when the hold ended; see
    /// `link_delay::SlowdownRound::Resume`): its delivery and queue are the minimum budget's.
    /// Returns the budget for the next round. By default the round is skipped and the budget
    /// stays: a controller goes on from where it was before the slowdown, as if the slowdown's
    /// rounds had not happened.
    fn on_slowdown_round(&mut self, round: &LinkRound) -> u64 {
        round.budget_in_force
    }

    /// A flow that is not background traffic opened (its SYN crossed the router): best effort is
    /// about to start. The decision waits for the next round; most controllers ignore it.
    fn on_competitor(&mut self, _now: Instant) {}

    /// A flow whose SYN was taken for a competitor's turned out to be background (a rule classed
    /// it at its SYN-ACK): background traffic never makes the household yield to itself.
    fn on_competitor_retracted(&mut self) {}

    /// Whether the link's bases look stale: the controller read a queue that nobody's traffic
    /// can be building (see `DelayTarget`'s stale base). The engine then runs a coordinated
    /// slowdown at once that forgets the old bases (`link_delay::Slowdown::fresh_base`). Asked
    /// after each round; taking the request clears it.
    fn take_stale_base(&mut self) -> bool {
        false
    }

    /// Current state for metrics.
    fn stats(&self) -> BudgetStats;
}

/// Which budget controller a household link runs, with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum BudgetConfig {
    /// Queueing-delay target at the router (LEDBAT / rLEDBAT), the default.
    DelayTarget(crate::delay_target::DelayTargetConfig),
    /// Key et al. Sec. 4.1: binary search for the change point (eq. 26-27).
    KeyBinarySearch(crate::key_binary_search::KeyBinarySearchConfig),
    /// Key et al. Sec. 4.2: stochastic approximation (eq. 31).
    KeyStochastic(crate::key_stochastic::KeyStochasticConfig),
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig::DelayTarget(crate::delay_target::DelayTargetConfig::default())
    }
}

impl BudgetConfig {
    /// Builds the controller, starting from `initial` bytes.
    pub fn build(&self, initial: u64) -> AnyBudget {
        match self {
            BudgetConfig::DelayTarget(c) => {
                AnyBudget::DelayTarget(crate::delay_target::DelayTarget::new(c.clone(), initial))
            }
            BudgetConfig::KeyBinarySearch(c) => {
                AnyBudget::KeyBinarySearch(crate::key_binary_search::KeyBinarySearch::new(c.clone(), initial))
            }
            BudgetConfig::KeyStochastic(c) => {
                AnyBudget::KeyStochastic(crate::key_stochastic::KeyStochastic::new(c.clone(), initial))
            }
        }
    }

    /// Short name for metric labels and `slipstream status`.
    pub fn kind(&self) -> &'static str {
        match self {
            BudgetConfig::DelayTarget(_) => "delay_target",
            BudgetConfig::KeyBinarySearch(_) => "key_binary_search",
            BudgetConfig::KeyStochastic(_) => "key_stochastic",
        }
    }

    /// The queueing delay the background may add: the delay target's, 10 ms for Key et al.'s
    /// controllers (which steer by rates, but the link's delay view needs a scale).
    pub fn delay_target(&self) -> Duration {
        match self {
            BudgetConfig::DelayTarget(c) => c.target,
            _ => Duration::from_millis(10),
        }
    }

    /// How long one round lasts: the controller's own control interval (Key et al.'s T), or
    /// about one base RTT for the delay target.
    pub fn round_length(&self, base_rtt: Option<Duration>) -> Duration {
        match self {
            BudgetConfig::DelayTarget(_) => base_rtt
                .unwrap_or(Duration::from_millis(100))
                .clamp(Duration::from_millis(10), Duration::from_millis(500)),
            BudgetConfig::KeyBinarySearch(c) => c.interval,
            BudgetConfig::KeyStochastic(c) => c.interval,
        }
    }

    /// Whether the controller steers by the shared queueing delay. Only those need the link's
    /// bases kept true by coordinated slowdowns, and wait a round after a change (Key et al.'s
    /// controllers have a control interval of their own and read only rates).
    pub fn uses_delay(&self) -> bool {
        matches!(self, BudgetConfig::DelayTarget(_))
    }

    /// Checks the parameters; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            BudgetConfig::DelayTarget(c) => c.validate(),
            BudgetConfig::KeyBinarySearch(c) => c.validate(),
            BudgetConfig::KeyStochastic(c) => c.validate(),
        }
    }
}

/// Closed dispatch over the budget controllers (one per link, so size does not matter).
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // two per daemon: boxing would buy nothing
pub enum AnyBudget {
    /// Keeps the shared queueing delay near a target (LEDBAT's rule per round).
    DelayTarget(crate::delay_target::DelayTarget),
    /// Key et al.'s binary search for the change point (Key et al. Sec. 4.1).
    KeyBinarySearch(crate::key_binary_search::KeyBinarySearch),
    /// Key et al.'s stochastic approximation of the change point (Key et al. Sec. 4.2).
    KeyStochastic(crate::key_stochastic::KeyStochastic),
}

impl BudgetController for AnyBudget {
    fn on_round(&mut self, round: &LinkRound) -> u64 {
        match self {
            AnyBudget::DelayTarget(c) => c.on_round(round),
            AnyBudget::KeyBinarySearch(c) => c.on_round(round),
            AnyBudget::KeyStochastic(c) => c.on_round(round),
        }
    }

    fn on_slowdown_round(&mut self, round: &LinkRound) -> u64 {
        match self {
            AnyBudget::DelayTarget(c) => c.on_slowdown_round(round),
            AnyBudget::KeyBinarySearch(c) => c.on_slowdown_round(round),
            AnyBudget::KeyStochastic(c) => c.on_slowdown_round(round),
        }
    }

    fn on_competitor(&mut self, now: Instant) {
        match self {
            AnyBudget::DelayTarget(c) => c.on_competitor(now),
            AnyBudget::KeyBinarySearch(c) => c.on_competitor(now),
            AnyBudget::KeyStochastic(c) => c.on_competitor(now),
        }
    }

    fn on_competitor_retracted(&mut self) {
        match self {
            AnyBudget::DelayTarget(c) => c.on_competitor_retracted(),
            AnyBudget::KeyBinarySearch(c) => c.on_competitor_retracted(),
            AnyBudget::KeyStochastic(c) => c.on_competitor_retracted(),
        }
    }

    fn take_stale_base(&mut self) -> bool {
        match self {
            AnyBudget::DelayTarget(c) => c.take_stale_base(),
            AnyBudget::KeyBinarySearch(c) => c.take_stale_base(),
            AnyBudget::KeyStochastic(c) => c.take_stale_base(),
        }
    }

    fn stats(&self) -> BudgetStats {
        match self {
            AnyBudget::DelayTarget(c) => c.stats(),
            AnyBudget::KeyBinarySearch(c) => c.stats(),
            AnyBudget::KeyStochastic(c) => c.stats(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_the_smallest_round_trip_where_known() {
        let ms = Duration::from_millis;
        let mut round = crate::key_test_link::round(100_000, 100_000, 100_000);
        round.base_rtt = Some(ms(29));
        round.queue_delay = Some(ms(2));
        assert_eq!(
            round.path_rtt(),
            Some(ms(27)),
            "the smoothed RTT less the round's queue"
        );
        round.min_rtt = Some(ms(20));
        assert_eq!(round.path_rtt(), Some(ms(20)));
    }
}
