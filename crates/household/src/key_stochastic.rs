//! Key et al. Sec. 4.2 as a household budget controller: stochastic approximation (Robbins-Monro)
//! of the budget w* where rho = R / w has fallen epsilon below rho_hat, the no-interference value
//! (eq. 24). One round is one control interval T.
//!
//! From the paper: Key et al. eq. 31 with the fixed gain of Sec. 4.2/5,
//! `w(n) = w(n-1) + gamma * (epsilon + rho(n-1) - rho_hat(n-2))`, w in units, rho_hat the EWMA of
//! eq. 25 (`rho_estimate`), and w kept above 0. Each round moves the budget linearly, at most
//! gamma * epsilon units up: it settles without the binary search's oscillation but follows a
//! change slowly (Sec. 4.4), and its time to fill a link grows with the link's BDP in units.
//!
//! Slipstream's adaptations:
//! * w(n-1) is the budget *in force* (the caller clamps what we return), R is scaled to exactly T
//!   (`rho_estimate::round_rho`), w stays within [1 unit, `max_budget_bytes`];
//! * the first round, with no rho_hat yet, steps by gamma * epsilon (as on the plateau);
//! * rho_hat is anchored (`RhoEstimate::update_at`, unless `anchored_estimate` is off): with eq.
//!   25 alone the estimate follows rho down as w creeps up and w never stops growing
//!   (`paper_estimate_runs_away` below);
//! * a round with nothing delivered and nothing in flight (no background traffic) keeps the
//!   budget: eq. 31 would read rho = 0 and shrink it by rho_hat - epsilon each idle round;
//! * if the smallest budget we can get (1 unit, or the caller's floor) is still too large for
//!   `RESEED_ROUNDS` rounds, rho_hat is stale (the paths' RTT grew by more than epsilon') and
//!   restarts from that round's rho.

use crate::budget::{BudgetController, BudgetPhase, BudgetStats, LinkRound};
use crate::key_binary_search::{validate_common, RESEED_ROUNDS};
use crate::rho_estimate::{round_rho, RhoEstimate};
use slipstream_control::Duration;

/// Parameters (Key et al. Sec. 5: unit u = 100 bytes, epsilon = epsilon' = 1 unit, delta = 0.1,
/// T = 0.2 s, gamma = 1).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyStochasticConfig {
    /// The control interval T (one round).
    pub interval: Duration,
    /// Key et al.'s unit u, bytes: the budget moves by gamma * (epsilon + rho - rho_hat) units.
    pub unit_bytes: u32,
    /// epsilon: the target is rho = rho_hat - epsilon (units of rho). It must stay below
    /// T / RTT, or the budget only grows.
    pub epsilon_units: f64,
    /// epsilon': samples further below rho_hat are left out of it (eq. 25).
    pub epsilon_prime_units: f64,
    /// EWMA weight of eq. 25.
    pub delta: f64,
    /// The fixed gain gamma of eq. 31.
    pub gamma: f64,
    /// Largest budget, bytes.
    pub max_budget_bytes: u64,
    /// rho_hat with the anchor guard (`rho_estimate`); false is eq. 25 as written.
    pub anchored_estimate: bool,
}

impl Default for KeyStochasticConfig {
    fn default() -> Self {
        KeyStochasticConfig {
            interval: Duration::from_millis(200),
            unit_bytes: 100,
            epsilon_units: 1.0,
            epsilon_prime_units: 1.0,
            delta: 0.1,
            gamma: 1.0,
            max_budget_bytes: 64 << 20,
            anchored_estimate: true,
        }
    }
}

impl KeyStochasticConfig {
    /// Checks the values; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        validate_common(
            self.interval,
            self.unit_bytes,
            self.epsilon_units,
            self.epsilon_prime_units,
            self.delta,
            self.max_budget_bytes,
        )?;
        if !(self.gamma > 0.0 && self.gamma <= 100.0) {
            return Err(format!(
                "gamma must be above 0 and at most 100, not {}",
                self.gamma
            ));
        }
        Ok(())
    }
}

/// The controller state.
#[derive(Clone, Debug)]
pub struct KeyStochastic {
    config: KeyStochasticConfig,
    estimate: RhoEstimate,
    /// The budget we asked for, bytes.
    budget: u64,
    /// Consecutive too-large rounds at the smallest budget.
    bottom_rounds: u32,
    phase: BudgetPhase,
}

impl KeyStochastic {
    /// An approximation starting from `initial` bytes of budget.
    pub fn new(config: KeyStochasticConfig, initial: u64) -> Self {
        KeyStochastic {
            estimate: RhoEstimate::new(config.delta, config.epsilon_prime_units),
            budget: initial,
            bottom_rounds: 0,
            phase: BudgetPhase::Start,
            config,
        }
    }
}

impl BudgetController for KeyStochastic {
    fn on_round(&mut self, round: &LinkRound) -> u64 {
        if round.delivered_bytes == 0 && round.in_flight == 0 {
            self.phase = BudgetPhase::Idle;
            self.budget = round.budget_in_force;
            return self.budget;
        }
        let unit = f64::from(self.config.unit_bytes.max(1));
        let eps = self.config.epsilon_units;
        let w_prev = round.budget_in_force.max(1) as f64 / unit;
        let rho = round_rho(round, self.config.interval);
        // h(w(n-1)) + noise = epsilon + rho(n-1) - rho_hat(n-2).
        let mut h = self.estimate.value().map_or(eps, |previous| eps + rho - previous);

        let at_bottom =
            self.budget <= u64::from(self.config.unit_bytes) || round.budget_in_force > self.budget;
        if h < 0.0 && at_bottom {
            self.bottom_rounds += 1;
        } else {
            self.bottom_rounds = 0;
        }
        if self.bottom_rounds >= RESEED_ROUNDS {
            self.estimate.reseed(rho, w_prev);
            self.bottom_rounds = 0;
            h = eps;
            self.phase = BudgetPhase::Reseed;
        } else {
            if self.config.anchored_estimate {
                self.estimate.update_at(rho, w_prev);
            } else {
                self.estimate.update(rho);
            }
            self.phase = if h > 0.0 {
                BudgetPhase::Grow
            } else if h < 0.0 {
                BudgetPhase::Yield
            } else {
                BudgetPhase::Hold
            };
        }
        let max_units = (self.config.max_budget_bytes as f64 / unit).max(1.0);
        let w = (w_prev + self.config.gamma * h).clamp(1.0, max_units);
        self.budget = (w * unit).round() as u64;
        self.budget
    }

    fn stats(&self) -> BudgetStats {
        BudgetStats {
            budget: self.budget,
            phase: self.phase,
            // The iterate is the estimate of w*.
            estimate: self.estimate.value().map(|_| self.budget),
            targets: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key_test_link::{round, run_on_link};

    fn step(c: &mut KeyStochastic, budget: u64, delivered: u64) -> (u64, &'static str) {
        let next = c.on_round(&round(budget, delivered, budget));
        (next, c.stats().phase.as_str())
    }

    #[test]
    fn eq31_by_hand() {
        let mut c = KeyStochastic::new(KeyStochasticConfig::default(), 5000);
        // rho = 5, no rho_hat yet: step epsilon = 1 unit. rho_hat = 5, anchor 50.
        assert_eq!(step(&mut c, 5000, 25000), (5100, "grow"));
        // rho = 5: 1 + 5 - 5 = 1 unit up; anchor 51.
        assert_eq!(step(&mut c, 5100, 25500), (5200, "grow"));
        // rho = 24000 / 6000 = 4: 1 + 4 - 5 = 0, the operating point of eq. 24. 4 is in the
        // epsilon' band but at window 60 > 51: left out, rho_hat stays 5.
        assert_eq!(step(&mut c, 6000, 24000), (6000, "hold"));
        assert_eq!(c.stats().estimate, Some(6000));
        // rho = 3: 1 + 3 - 5 = -1 unit.
        assert_eq!(step(&mut c, 8000, 24000), (7900, "yield"));
        // rho = 5 at 40 units: +1; anchor 40.
        assert_eq!(step(&mut c, 4000, 20000), (4100, "grow"));
        // rho = 4.75 at 38 <= 40 units: step 1 + 4.75 - 5 = 0.75 -> 38.75 units; then rho_hat
        // takes it in: 0.9 * 5 + 0.1 * 4.75 = 4.975.
        assert_eq!(step(&mut c, 3800, 18050), (3875, "grow"));
        // rho = 19900 / 4000 = 4.975 = rho_hat(n-2): step epsilon.
        assert_eq!(step(&mut c, 4000, 19900), (4100, "grow"));
    }

    #[test]
    fn gamma_scales_the_step() {
        let config = KeyStochasticConfig {
            gamma: 2.0,
            ..KeyStochasticConfig::default()
        };
        let mut c = KeyStochastic::new(config, 5000);
        // 50 + 2 * 1 = 52 units.
        assert_eq!(step(&mut c, 5000, 25000), (5200, "grow"));
        // rho = 3: 80 + 2 * (1 + 3 - 5) = 78 units.
        assert_eq!(step(&mut c, 8000, 24000), (7800, "yield"));
    }

    #[test]
    fn idle_keeps_the_budget() {
        let mut c = KeyStochastic::new(KeyStochasticConfig::default(), 5000);
        assert_eq!(step(&mut c, 5000, 25000), (5100, "grow"));
        assert_eq!(c.on_round(&round(42_000, 0, 0)), 42_000);
        assert_eq!(c.stats().phase.as_str(), "idle");
        // A stall (data in flight, nothing delivered) is not idle: rho = 0, 1 + 0 - 5 = -4.
        assert_eq!(c.on_round(&round(42_000, 0, 42_000)), 41_600);
    }

    #[test]
    fn stays_above_zero_and_reseeds_a_stale_estimate() {
        let mut c = KeyStochastic::new(KeyStochasticConfig::default(), 3000);
        // rho_hat = 5; 31 units.
        assert_eq!(step(&mut c, 3000, 15000), (3100, "grow"));
        // The paths' RTT doubles: rho = 2.5, 1 + 2.5 - 5 = -1.5 -> 29.5 units.
        assert_eq!(step(&mut c, 3100, 7750), (2950, "yield"));
        // The caller's floor holds 3000 in force: bottom rounds 1 and 2, 30 - 1.5 = 28.5 units.
        assert_eq!(step(&mut c, 3000, 7500), (2850, "yield"));
        assert_eq!(step(&mut c, 3000, 7500), (2850, "yield"));
        // Round 3: rho_hat = 2.5 and step epsilon.
        assert_eq!(step(&mut c, 3000, 7500), (3100, "reseed"));
        assert_eq!(step(&mut c, 3100, 7750), (3200, "grow"));
        // Never below one unit: rho = 0 at 2 units, 2 + (1 + 0 - 5) < 1.
        let mut c = KeyStochastic::new(KeyStochasticConfig::default(), 200);
        assert_eq!(step(&mut c, 200, 1000), (300, "grow"));
        assert_eq!(c.on_round(&round(200, 0, 200)), 100);
    }

    #[test]
    fn validate_names_the_bad_field() {
        assert_eq!(KeyStochasticConfig::default().validate(), Ok(()));
        let bad = |f: fn(&mut KeyStochasticConfig)| {
            let mut c = KeyStochasticConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.interval = Duration::from_secs(11)).starts_with("interval"));
        assert!(bad(|c| c.unit_bytes = 100_000).starts_with("unit_bytes"));
        assert!(bad(|c| c.epsilon_units = -1.0).starts_with("epsilon_units"));
        assert!(bad(|c| c.epsilon_prime_units = 0.0).starts_with("epsilon_prime_units"));
        assert!(bad(|c| c.delta = 0.0).starts_with("delta"));
        assert!(bad(|c| c.gamma = f64::INFINITY).starts_with("gamma"));
        assert!(bad(|c| c.max_budget_bytes = 0).starts_with("max_budget_bytes"));
    }

    /// Key et al.'s Sec. 5 link: 1.5 Mbit/s, base RTT 44 ms, so BDP 8250 bytes, rho_b = 4.545
    /// and eq. 24's w* = 0.2 * 187500 / 3.545 = 10577 bytes (3173 at 30% free). Eq. 31 moves at
    /// most one unit (100 bytes) up per round, so this stays a small link: the rounds it needs
    /// grow with the BDP.
    const LINK: (f64, f64) = (1.5e6 / 8.0, 0.044);

    #[test]
    fn simulated_link_follows_a_drop_and_a_return() {
        let mut c = KeyStochastic::new(KeyStochasticConfig::default(), 2896);
        let free = |n: usize| if (400..800).contains(&n) { 0.3 } else { 1.0 };
        let b = run_on_link(&mut c, 2896, 1200, LINK, free);
        let (bdp, wstar, wstar30) = (8250.0, 10_577.0, 3173.0);
        // Rounds after `from` until the budget stays within 2% of w* up to `to`.
        let settle = |from: usize, to: usize, wstar: f64| {
            (from..to)
                .rev()
                .find(|&n| (b[n] as f64 - wstar).abs() > 0.02 * wstar)
                .map_or(0, |n| n + 1 - from)
        };
        let first = |from: usize, ok: &dyn Fn(f64) -> bool| {
            (from..b.len()).find(|&n| ok(b[n] as f64)).unwrap() - from
        };
        let (start, drop, back) = (
            settle(0, 400, wstar),
            settle(400, 800, wstar30),
            settle(800, 1200, wstar),
        );
        let filled = first(0, &|w| w >= bdp);
        let yielded = first(400, &|w| w <= 1.05 * wstar30);
        let refilled = first(800, &|w| w >= bdp);
        eprintln!(
            "rounds to settle {start} (BDP in {filled}), after the drop {drop} (yields in {yielded}), \
             after the return {back} (BDP in {refilled})"
        );
        // On the plateau h = epsilon: one unit per round, 54 rounds from 2896 to 8250 and 51
        // from 3173; past the BDP h shrinks (by about rho / w = 3.4% of the distance per round).
        assert!(filled <= 55 && refilled <= 52, "{filled} {refilled}");
        assert!(start <= 130 && back <= 130, "{start} {back}");
        // Down: h = 1 + 0.3 * 187500 * 0.2 / w - 4.545, -2.5 units per round at first.
        assert!(yielded <= 60, "{yielded}");
        assert!(drop <= 90, "{drop}");
    }

    /// Eq. 25 as written on the same link: w creeps up one unit per round and rho_hat follows rho
    /// down, so the budget never settles.
    #[test]
    fn paper_estimate_runs_away() {
        let config = KeyStochasticConfig {
            anchored_estimate: false,
            ..KeyStochasticConfig::default()
        };
        let mut c = KeyStochastic::new(config, 2896);
        let b = run_on_link(&mut c, 2896, 400, LINK, |_| 1.0);
        assert!(b[399] as f64 > 2.0 * 10_577.0, "{}", b[399]);
    }
}
