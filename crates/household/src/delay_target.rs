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
//!   `GAIN * (TARGET - queuing_delay) * R` per round, R the round's delivery rate. Near the
//!   operating point the queue is `(B - BDP) / C` and `R = C`, so each round removes `GAIN` of the
//!   budget's distance from `BDP + TARGET * C` whatever the BDP: it converges in a few rounds at
//!   any rate and RTT. Well below the target (less than half of it) the budget may also grow
//!   geometrically, `max_growth` per round (LEDBAT++'s slow start with a delay exit), so a freed
//!   link is taken back in a few RTTs; far above the target (more than four times it), the budget
//!   halves each round, as a loss would make a TCP sender do.
//!
//! Both grow only while the flows use what they have: the budget never exceeds twice the bytes
//! in flight plus the flows' floors, so a cwnd- or application-limited household does not build
//! a budget far above what is in force (which would then take many rounds to come down).

use crate::budget::{BudgetController, BudgetStats, LinkRound};
use slipstream_control::Duration;

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
    pub variant: DelayTargetVariant,
}

impl Default for DelayTargetConfig {
    fn default() -> Self {
        DelayTargetConfig {
            target: Duration::from_millis(10),
            gain: 0.5,
            max_growth: 1.5,
            variant: DelayTargetVariant::Proportional,
        }
    }
}

impl DelayTargetConfig {
    /// RFC 6817 as written (GAIN 1), with Slipstream's target.
    pub fn ledbat() -> Self {
        DelayTargetConfig {
            gain: 1.0,
            variant: DelayTargetVariant::Ledbat,
            ..DelayTargetConfig::default()
        }
    }

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
    phase: &'static str,
    /// Consecutive rounds with the queue below a quarter of the target.
    low_rounds: u32,
}

/// Rounds the queue must stay below a quarter of the target before the budget grows
/// geometrically: one low round is often just the trough after a cut, and growing then brings the
/// overshoot back one RTT later.
const LOW_ROUNDS_TO_PROBE: u32 = 2;

impl DelayTarget {
    pub fn new(config: DelayTargetConfig, initial: u64) -> Self {
        DelayTarget {
            config,
            budget: initial,
            phase: "start",
            low_rounds: 0,
        }
    }
}

impl BudgetController for DelayTarget {
    fn on_round(&mut self, round: &LinkRound) -> u64 {
        let Some(queue_delay) = round.queue_delay else {
            // No sample: nothing was measured (no data, or every flow held); keep the budget.
            self.phase = "idle";
            self.budget = round.budget_in_force;
            return self.budget;
        };
        let budget = round.budget_in_force.max(1) as f64;
        let target = self.config.target.as_secs_f64();
        let delay = queue_delay.as_secs_f64();
        let off_target = ((target - delay) / target).clamp(-1.0, 1.0);
        let mut next = match self.config.variant {
            DelayTargetVariant::Ledbat => {
                let step =
                    self.config.gain * off_target * f64::from(round.mss) * round.delivered_bytes as f64
                        / budget;
                budget + step
            }
            DelayTargetVariant::Proportional => {
                let step = self.config.gain * (target - delay) * round.delivery_rate();
                let mut next = budget + step;
                if delay < target / 4.0 {
                    self.low_rounds += 1;
                } else {
                    self.low_rounds = 0;
                }
                if self.low_rounds >= LOW_ROUNDS_TO_PROBE {
                    next = next.max(budget * self.config.max_growth);
                }
                // Far above the target someone else needs the link: yield at once, as a loss
                // would make a TCP sender do (best effort's slow start must not wait for us).
                if delay > 4.0 * target {
                    next = next.min(budget / 2.0);
                }
                next
            }
        };
        // At most halve per round (LEDBAT never cuts more than a loss would).
        next = next.max(budget / 2.0);
        self.phase = if delay > target {
            "yield"
        } else if self.low_rounds >= LOW_ROUNDS_TO_PROBE {
            "probe"
        } else {
            "hold"
        };
        let mut next = next.round() as u64;
        if next > round.budget_in_force {
            // Grow only into what the flows use (see the module docs).
            let usable = 2 * round.in_flight + round.floors;
            next = next.min(usable.max(round.budget_in_force));
        }
        self.budget = next;
        next
    }

    fn stats(&self) -> BudgetStats {
        BudgetStats {
            budget: self.budget,
            phase: self.phase,
            estimate: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slipstream_control::Instant;

    fn round(budget: u64, queue_ms: Option<u64>, delivered: u64, in_flight: u64) -> LinkRound {
        LinkRound {
            now: Instant::from_millis(1000),
            interval: Duration::from_millis(100),
            queue_delay: queue_ms.map(Duration::from_millis),
            base_rtt: Some(Duration::from_millis(100)),
            delivered_bytes: delivered,
            budget_in_force: budget,
            in_flight,
            mss: 1448,
            active_flows: 1,
            floors: 2896,
        }
    }

    #[test]
    fn proportional_step_by_hand() {
        let mut c = DelayTarget::new(DelayTargetConfig::default(), 150_000);
        // q = 6 ms (above half the 10 ms target, below it): step = 0.5 * 4 ms * 1.25 MB/s = 2500.
        assert_eq!(c.on_round(&round(150_000, Some(6), 125_000, 150_000)), 152_500);
        assert_eq!(c.stats().phase, "hold");
        // q = 15 ms: step = 0.5 * -5 ms * 1.25 MB/s = -3125.
        assert_eq!(c.on_round(&round(150_000, Some(15), 125_000, 150_000)), 146_875);
        assert_eq!(c.stats().phase, "yield");
        // q = 30 ms: step = 0.5 * -20 ms * 1.25 MB/s = -12500.
        assert_eq!(c.on_round(&round(150_000, Some(30), 125_000, 150_000)), 137_500);
        // q = 50 ms, above four times the target: halve.
        assert_eq!(c.on_round(&round(150_000, Some(50), 125_000, 150_000)), 75_000);
        // q = 500 ms: the step would go below zero; at most halve.
        assert_eq!(c.on_round(&round(150_000, Some(500), 125_000, 150_000)), 75_000);
    }

    #[test]
    fn probes_geometrically_well_below_target() {
        let mut c = DelayTarget::new(DelayTargetConfig::default(), 10_000);
        // q = 0: step = 0.5 * 10 ms * 100 kB/s = 500; the first low round grows by that only.
        assert_eq!(c.on_round(&round(10_000, Some(0), 10_000, 10_000)), 10_500);
        assert_eq!(c.stats().phase, "hold");
        // The second: growth 1.5x wins: 15750.
        assert_eq!(c.on_round(&round(10_500, Some(0), 10_000, 10_500)), 15_750);
        assert_eq!(c.stats().phase, "probe");
    }

    #[test]
    fn grows_only_into_what_is_used() {
        let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
        // The flows have only 20 kB in flight: the budget may not exceed 2 * 20k + floors.
        assert_eq!(c.on_round(&round(100_000, Some(0), 20_000, 20_000)), 100_000);
        let mut c = DelayTarget::new(DelayTargetConfig::default(), 30_000);
        c.on_round(&round(30_000, Some(0), 20_000, 30_000));
        assert_eq!(c.on_round(&round(30_000, Some(0), 20_000, 20_000)), 42_896);
    }

    #[test]
    fn ledbat_step_by_hand() {
        let mut c = DelayTarget::new(DelayTargetConfig::ledbat(), 100_000);
        // off_target = (10 - 5) / 10 = 0.5; step = 1 * 0.5 * 1448 * 100000 / 100000 = 724.
        assert_eq!(c.on_round(&round(100_000, Some(5), 100_000, 100_000)), 100_724);
        // off_target clamps at -1: step = -1448.
        assert_eq!(c.on_round(&round(100_000, Some(80), 100_000, 100_000)), 98_552);
    }

    #[test]
    fn keeps_budget_without_samples() {
        let mut c = DelayTarget::new(DelayTargetConfig::default(), 42_000);
        assert_eq!(c.on_round(&round(42_000, None, 0, 0)), 42_000);
        assert_eq!(c.stats().phase, "idle");
    }
}
