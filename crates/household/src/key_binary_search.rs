//! Key et al. Sec. 4.1 as a household budget controller: binary search for the change point of
//! rho = R / w, the largest budget w (all background flows of the link together) whose rho stays
//! within epsilon of rho_hat, the no-interference value (eq. 24). One round is one control
//! interval T.
//!
//! From the paper:
//! * rho(n) = R(n) / w(n) and the EWMA rho_hat of eq. 25 (`rho_estimate`);
//! * a round is *not too large* when rho(n) > rho_hat(n-1) - epsilon (Sec. 4.1's text; Fig. 4
//!   writes the same test with >=);
//! * Fig. 4: from w_min = 1 unit the window doubles each round until a round is too large, whose
//!   window becomes w_max;
//! * Key et al. eq. 26 / eq. 27: w(n) = w_min + max(1, floor((w_max - w_min) / (1 + sqrt(c)))),
//!   which for c = 1 is eq. 26's floor((w_min + w_max) / 2) (used as is when the bracket is at
//!   most 1 wide, where eq. 27 would step outside it); then w_min = w(n) if not too large, else
//!   w_max = w(n);
//! * once w_max - w_min <= 1: not too large, w_max += 2; too large, w_max -= 1 and w_min = 1,
//!   which halves the window (Sec. 4.4);
//! * time-out: a round delivering no whole unit sets w_min = 1 and runs Fig. 4 again.
//!
//! Slipstream's adaptations:
//! * w(n) is the budget *in force* (the caller clamps what we return), R(n) is scaled to exactly
//!   T (`rho_estimate::round_rho`), and w_max never exceeds `max_budget_bytes`;
//! * the widening of a closed bracket starts at the paper's 2 units (tested at eq. 27's point,
//!   as the paper does) and doubles with each consecutive widening, each tested at the new w_max
//!   in the next round (back to 2 after any too-large round): +2 units per few rounds would need
//!   minutes to follow a household link whose free capacity grows by hundreds of kB of BDP; this
//!   way it takes about 2 log2(growth in units) rounds. Without growth the top fails at once and
//!   the search behaves as the paper's;
//! * rho_hat is anchored (`RhoEstimate::update_at`, unless `anchored_estimate` is off): eq. 25
//!   alone drifts down with the samples taken at the edge, and the search then climbs without end
//!   (`paper_estimate_runs_away` below);
//! * a time-out also forgets rho_hat: the flows after a pause may have other RTTs, and Fig. 4
//!   restarts from the smallest window, where the first sample is a clean rho_b;
//! * if the smallest window we can get (1 unit, or the caller's floor above it) is still too large
//!   for [`RESEED_ROUNDS`] rounds, rho_hat is stale (the paths' RTT grew by more than epsilon', which
//!   eq. 25 never takes in): it restarts from that round's rho and Fig. 4 runs again.

use crate::budget::{BudgetController, BudgetPhase, BudgetStats, LinkRound};
use crate::rho_estimate::{round_rho, RhoEstimate};
use slipstream_control::Duration;

/// Rounds the bottom window must read too large before rho_hat is taken as stale.
pub const RESEED_ROUNDS: u32 = 3;

/// The paper's widening of a closed bracket (units).
const WIDEN: u64 = 2;

/// Parameters (Key et al. Sec. 5: unit u = 100 bytes, epsilon = epsilon' = 1 unit, delta = 0.1,
/// T = 0.2 s).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyBinarySearchConfig {
    /// The control interval T (one round).
    pub interval: Duration,
    /// Key et al.'s unit u: the search's resolution, bytes.
    pub unit_bytes: u32,
    /// epsilon: how far rho may fall below rho_hat before the budget counts as too large
    /// (units of rho). It must stay below T / RTT, or nothing is ever too large.
    pub epsilon_units: f64,
    /// epsilon': samples further below rho_hat are left out of it (eq. 25).
    pub epsilon_prime_units: f64,
    /// EWMA weight of eq. 25.
    pub delta: f64,
    /// Eq. 27's cost ratio of overshooting to undershooting; 1 is eq. 26's halving.
    pub c: f64,
    /// Upper end of the search, bytes.
    pub max_budget_bytes: u64,
    /// rho_hat with the anchor guard (`rho_estimate`); false is eq. 25 as written.
    pub anchored_estimate: bool,
}

impl Default for KeyBinarySearchConfig {
    fn default() -> Self {
        KeyBinarySearchConfig {
            interval: Duration::from_millis(200),
            unit_bytes: 100,
            epsilon_units: 1.0,
            epsilon_prime_units: 1.0,
            delta: 0.1,
            c: 1.0,
            max_budget_bytes: 64 << 20,
            anchored_estimate: true,
        }
    }
}

impl KeyBinarySearchConfig {
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
        if !(self.c > 0.0 && self.c <= 100.0) {
            return Err(format!("c must be above 0 and at most 100, not {}", self.c));
        }
        Ok(())
    }
}

/// The checks both Key controllers share.
pub(crate) fn validate_common(
    interval: Duration,
    unit_bytes: u32,
    epsilon: f64,
    epsilon_prime: f64,
    delta: f64,
    max_budget_bytes: u64,
) -> Result<(), String> {
    if interval < Duration::from_millis(50) || interval > Duration::from_secs(10) {
        return Err(format!("interval must be 50ms to 10s, not {interval:?}"));
    }
    if !(1..=65536).contains(&unit_bytes) {
        return Err(format!("unit_bytes must be 1 to 65536, not {unit_bytes}"));
    }
    if !(epsilon > 0.0 && epsilon <= 1000.0) {
        return Err(format!(
            "epsilon_units must be above 0 and at most 1000, not {epsilon}"
        ));
    }
    if !(epsilon_prime > 0.0 && epsilon_prime <= 1000.0) {
        return Err(format!(
            "epsilon_prime_units must be above 0 and at most 1000, not {epsilon_prime}"
        ));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(format!("delta must be in (0, 1), not {delta}"));
    }
    if max_budget_bytes < 4 * u64::from(unit_bytes) || max_budget_bytes > 1 << 30 {
        return Err(format!(
            "max_budget_bytes must be at least 4 units and at most 1 GiB, not {max_budget_bytes}"
        ));
    }
    Ok(())
}

/// The controller state. Windows are in units.
#[derive(Clone, Debug)]
pub struct KeyBinarySearch {
    config: KeyBinarySearchConfig,
    estimate: RhoEstimate,
    /// False while Fig. 4 looks for w_max.
    searching: bool,
    w_min: u64,
    w_max: u64,
    /// Next widening of a closed bracket.
    widen: u64,
    /// The window we asked for (units); `budget` is it in bytes.
    requested: u64,
    budget: u64,
    /// w_min when the bracket last closed.
    change_point: Option<u64>,
    /// Consecutive too-large rounds at the smallest window.
    bottom_rounds: u32,
    phase: BudgetPhase,
}

impl KeyBinarySearch {
    /// A search starting from `initial` bytes of budget.
    pub fn new(config: KeyBinarySearchConfig, initial: u64) -> Self {
        let unit = u64::from(config.unit_bytes.max(1));
        let requested = (initial / unit).max(1);
        KeyBinarySearch {
            estimate: RhoEstimate::new(config.delta, config.epsilon_prime_units),
            searching: false,
            w_min: 1,
            w_max: requested,
            widen: WIDEN,
            requested,
            budget: initial,
            change_point: None,
            bottom_rounds: 0,
            phase: BudgetPhase::Init,
            config,
        }
    }

    fn unit(&self) -> u64 {
        u64::from(self.config.unit_bytes.max(1))
    }

    fn max_units(&self) -> u64 {
        (self.config.max_budget_bytes / self.unit()).max(1)
    }

    /// Key et al. eq. 27 (eq. 26 when c = 1 or the bracket is at most 1 wide).
    fn next_window(&self) -> u64 {
        let width = self.w_max - self.w_min;
        if width <= 1 {
            return (self.w_min + self.w_max) / 2;
        }
        let step = (width as f64 / (1.0 + self.config.c.sqrt())).floor() as u64;
        self.w_min + step.max(1)
    }

    fn ask(&mut self, units: u64, phase: BudgetPhase) -> u64 {
        self.requested = units.clamp(1, self.max_units());
        self.budget = self.requested * self.unit();
        self.phase = phase;
        self.budget
    }

    /// The closed bracket passed: w_max grows by `widen` (the paper's 2 units the first time, then
    /// twice the last). The first widening tests eq. 27's point as the paper does; later ones
    /// test the new w_max itself, so a freed link is found in O(log) rounds.
    fn widen_top(&mut self) -> u64 {
        let first = self.widen == WIDEN;
        let cap = self.max_units();
        self.w_max = (self.w_max.max(self.w_min) + self.widen).min(cap);
        self.widen = (2 * self.widen).min(cap);
        let next = if first { self.next_window() } else { self.w_max };
        self.ask(next, BudgetPhase::Track)
    }

    /// Fig. 4 from the top: w_min = 1, w_max unknown.
    fn restart_fig4(&mut self) {
        self.searching = false;
        self.w_min = 1;
        self.widen = WIDEN;
        self.bottom_rounds = 0;
    }
}

impl BudgetController for KeyBinarySearch {
    fn on_round(&mut self, round: &LinkRound) -> u64 {
        let unit = self.unit();
        let cap = self.max_units();
        if round.delivered_bytes < unit {
            // Time-out: not one unit delivered.
            self.estimate.reset();
            self.restart_fig4();
            return self.ask(1, BudgetPhase::Timeout);
        }
        let window = round.budget_in_force.max(1) as f64 / unit as f64;
        let w_n = (round.budget_in_force / unit).clamp(1, cap);
        let rho = round_rho(round, self.config.interval);
        let not_too_large = self
            .estimate
            .value()
            .is_none_or(|previous| rho > previous - self.config.epsilon_units);

        // At the smallest window we can get: our own 1 unit, or the caller clamped us up.
        let at_bottom = self.requested <= 1 || round.budget_in_force > self.budget;
        if !not_too_large && at_bottom {
            self.bottom_rounds += 1;
        } else {
            self.bottom_rounds = 0;
        }
        if self.bottom_rounds >= RESEED_ROUNDS {
            self.estimate.reseed(rho, window);
            self.restart_fig4();
            return self.ask(2 * w_n, BudgetPhase::Reseed);
        }
        if self.config.anchored_estimate {
            self.estimate.update_at(rho, window);
        } else {
            self.estimate.update(rho);
        }

        let phase = if !self.searching {
            // Fig. 4: double until too large.
            if not_too_large && w_n < cap {
                return self.ask(2 * w_n, BudgetPhase::Init);
            }
            self.searching = true;
            self.w_max = if not_too_large { cap } else { w_n };
            self.w_min = self.w_min.min(self.w_max);
            BudgetPhase::Search
        } else if self.w_max - self.w_min <= 1 {
            // The bracket had closed: widen when not too large, else halve.
            self.change_point = Some(self.w_min);
            if not_too_large {
                self.w_min = self.w_min.max(w_n);
                return self.widen_top();
            }
            self.w_max = self.w_max.saturating_sub(1).max(1);
            self.w_min = 1;
            self.widen = WIDEN;
            BudgetPhase::Restart
        } else {
            if not_too_large {
                self.w_min = w_n;
                self.w_max = self.w_max.max(w_n);
                if self.w_max - self.w_min <= 1 && self.widen > WIDEN {
                    // Closed again by a passing round while widening: widen at once rather
                    // than test w_min again.
                    self.change_point = Some(self.w_min);
                    return self.widen_top();
                }
            } else {
                self.w_max = w_n;
                self.widen = WIDEN;
                if self.w_min >= self.w_max {
                    // Too large at or below w_min: what was known good is no longer.
                    self.w_min = 1;
                }
            }
            BudgetPhase::Search
        };
        if self.w_max - self.w_min <= 1 {
            self.change_point = Some(self.w_min);
        }
        let next = self.next_window();
        self.ask(next, phase)
    }

    fn stats(&self) -> BudgetStats {
        BudgetStats {
            budget: self.budget,
            phase: self.phase,
            estimate: self.change_point.map(|w| w * self.unit()),
            targets: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key_test_link::{round, run_on_link};

    /// (budget in force, delivered) -> (next budget, phase).
    fn step(c: &mut KeyBinarySearch, budget: u64, delivered: u64) -> (u64, &'static str) {
        let next = c.on_round(&round(budget, delivered, budget));
        (next, c.stats().phase.as_str())
    }

    #[test]
    fn search_by_hand() {
        // A link with 180 kB/s free and a base RTT of 40 ms (rho_b = 0.2 / 0.04 = 5): up to
        // 7200 bytes deliver budget * 5 per round, above that 36000. Key's target (eq. 24) is
        // rho = 5 - 1 = 4, i.e. 36000 / 4 = 9000 bytes, which the strict test counts too large.
        let mut c = KeyBinarySearch::new(KeyBinarySearchConfig::default(), 3000);
        // Fig. 4. No estimate yet: not too large, rho_hat = 5; double 30 -> 60 units.
        assert_eq!(step(&mut c, 3000, 15000), (6000, "init"));
        // rho = 5 > 5 - 1: double again.
        assert_eq!(step(&mut c, 6000, 30000), (12000, "init"));
        // rho = 36000 / 12000 = 3 <= 4: too large, w_max = 120, w_min = 1;
        // eq. 26: floor((1 + 120) / 2) = 60.
        assert_eq!(step(&mut c, 12000, 36000), (6000, "search"));
        assert_eq!(c.stats().estimate, None);
        // rho = 5: w_min = 60; floor((60 + 120) / 2) = 90.
        assert_eq!(step(&mut c, 6000, 30000), (9000, "search"));
        // rho = 4, not > 4: too large, w_max = 90; 75.
        assert_eq!(step(&mut c, 9000, 36000), (7500, "search"));
        // rho = 4.8: w_min = 75; 75 + floor(15 / 2) = 82.
        assert_eq!(step(&mut c, 7500, 36000), (8200, "search"));
        // rho = 4.39: w_min = 82; 82 + 4 = 86.
        assert_eq!(step(&mut c, 8200, 36000), (8600, "search"));
        // rho = 4.19: w_min = 86; 86 + 2 = 88.
        assert_eq!(step(&mut c, 8600, 36000), (8800, "search"));
        // rho = 4.09: w_min = 88; 88 + 1 = 89.
        assert_eq!(step(&mut c, 8800, 36000), (8900, "search"));
        // rho = 4.04: w_min = 89, the bracket [89, 90] has closed: change point 8900;
        // eq. 26: floor((89 + 90) / 2) = 89.
        assert_eq!(step(&mut c, 8900, 36000), (8900, "search"));
        assert_eq!(c.stats().estimate, Some(8900));
        // Closed and not too large: w_max = 90 + 2 = 92; 89 + max(1, floor(3 / 2)) = 90.
        assert_eq!(step(&mut c, 8900, 36000), (9000, "track"));
        // Too large again: w_max = 90, the widening goes back to 2; 89.
        assert_eq!(step(&mut c, 9000, 36000), (8900, "search"));
        // Cross traffic takes 70%: 54 kB/s free, rho = 10800 / 8900 = 1.21, too large in a
        // closed bracket: w_max = 90 - 1 = 89, w_min = 1; floor((1 + 89) / 2) = 45: halved.
        assert_eq!(step(&mut c, 8900, 10800), (4500, "restart"));
        // rho = 10800 / 4500 = 2.4: too large, w_max = 45; 1 + 22 = 23.
        assert_eq!(step(&mut c, 4500, 10800), (2300, "search"));
        // rho = 10800 / 2300 = 4.7 > 4 (2300 is past the new BDP, 2160, but within epsilon):
        // w_min = 23; 23 + floor(22 / 2) = 34.
        assert_eq!(step(&mut c, 2300, 10800), (3400, "search"));
    }

    #[test]
    fn eq27_divides_one_to_sqrt_c() {
        let config = KeyBinarySearchConfig {
            c: 4.0,
            ..KeyBinarySearchConfig::default()
        };
        let mut c = KeyBinarySearch::new(config, 3000);
        assert_eq!(step(&mut c, 3000, 15000), (6000, "init"));
        assert_eq!(step(&mut c, 6000, 30000), (12000, "init"));
        // Bracket [1, 120]: 1 + max(1, floor(119 / (1 + 2))) = 1 + 39 = 40.
        assert_eq!(step(&mut c, 12000, 36000), (4000, "search"));
        // rho = 5: w_min = 40; 40 + floor(80 / 3) = 66.
        assert_eq!(step(&mut c, 4000, 20000), (6600, "search"));
    }

    #[test]
    fn widening_doubles_while_the_top_keeps_passing() {
        let mut c = KeyBinarySearch::new(KeyBinarySearchConfig::default(), 3000);
        assert_eq!(step(&mut c, 3000, 15000), (6000, "init"));
        // Too large at 60: bracket [1, 60]; 30.
        assert_eq!(step(&mut c, 6000, 18000), (3000, "search"));
        // From here every window delivers rho = 5 (the link was freed).
        let mut seen = Vec::new();
        let mut budget = 3000;
        for _ in 0..15 {
            let (next, phase) = step(&mut c, budget, budget * 5);
            seen.push((next / 100, phase));
            budget = next;
        }
        let expected = [
            // [30, 60] bisects: 45, 52, 56, 58, 59, and [59, 60] closes (eq. 26 tests 59 again).
            (45, "search"),
            (52, "search"),
            (56, "search"),
            (58, "search"),
            (59, "search"),
            (59, "search"),
            // Closed and passing: w_max = 60 + 2 = 62, eq. 27 on [59, 62]: 59 + 1 = 60.
            (60, "track"),
            // [60, 62]: 61.
            (61, "search"),
            // [61, 62] closes while widening: w_max = 62 + 4 = 66, tested at once.
            (66, "track"),
            // Each passing top widens by twice the last step: 66 + 8, 74 + 16, 90 + 32, ...
            (74, "track"),
            (90, "track"),
            (122, "track"),
            (186, "track"),
            (314, "track"),
            (570, "track"),
        ];
        assert_eq!(seen, expected);
        // The top fails (rho = 3): back to bisecting [314, 570] with the widening reset.
        assert_eq!(step(&mut c, 57000, 171_000), (44200, "search"));
        assert_eq!(c.widen, WIDEN);
    }

    #[test]
    fn timeout_restarts_fig4_and_forgets_the_estimate() {
        let mut c = KeyBinarySearch::new(KeyBinarySearchConfig::default(), 3000);
        assert_eq!(step(&mut c, 3000, 15000), (6000, "init"));
        // Less than one unit delivered: w_min = 1, ask for 1 unit (the caller clamps it).
        assert_eq!(step(&mut c, 6000, 99), (100, "timeout"));
        // The caller's floor held 2896 in force; rho = 2 seeds a fresh estimate (the old 5 is
        // gone, else this would be too large) and Fig. 4 doubles: 2 * 28 units.
        assert_eq!(step(&mut c, 2896, 5792), (5600, "init"));
    }

    #[test]
    fn stale_estimate_is_reseeded_at_the_bottom() {
        let mut c = KeyBinarySearch::new(KeyBinarySearchConfig::default(), 3000);
        // rho_hat = 5.
        assert_eq!(step(&mut c, 3000, 15000), (6000, "init"));
        // The paths' RTT doubles: rho = 2.5 at every window, too large (2.5 <= 4) and more than
        // epsilon' below rho_hat, so eq. 25 never takes it in. Bracket [1, 60]: 30.
        assert_eq!(step(&mut c, 6000, 15000), (3000, "search"));
        // 30 is what we asked: not yet the bottom. w_max = 30; 1 + 14 = 15.
        assert_eq!(step(&mut c, 3000, 7500), (1500, "search"));
        // The caller's floor keeps 3000 in force: bottom, rounds 1 and 2.
        assert_eq!(step(&mut c, 3000, 7500), (1500, "search"));
        assert_eq!(step(&mut c, 3000, 7500), (1500, "search"));
        // Round 3: rho_hat = 2.5, Fig. 4 again from 30 units.
        assert_eq!(step(&mut c, 3000, 7500), (6000, "reseed"));
        // rho = 2.5 > 2.5 - 1 now: double.
        assert_eq!(step(&mut c, 6000, 15000), (12000, "init"));
    }

    #[test]
    fn validate_names_the_bad_field() {
        assert_eq!(KeyBinarySearchConfig::default().validate(), Ok(()));
        let bad = |f: fn(&mut KeyBinarySearchConfig)| {
            let mut c = KeyBinarySearchConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.interval = Duration::from_millis(10)).starts_with("interval"));
        assert!(bad(|c| c.unit_bytes = 0).starts_with("unit_bytes"));
        assert!(bad(|c| c.epsilon_units = 0.0).starts_with("epsilon_units"));
        assert!(bad(|c| c.epsilon_prime_units = f64::NAN).starts_with("epsilon_prime_units"));
        assert!(bad(|c| c.delta = 1.0).starts_with("delta"));
        assert!(bad(|c| c.c = 0.0).starts_with("c must"));
        assert!(bad(|c| c.max_budget_bytes = 300).starts_with("max_budget_bytes"));
    }

    /// A 50 Mbit/s link (bytes/s), base RTT 20 ms.
    const LINK: (f64, f64) = (50e6 / 8.0, 0.02);

    /// A 50 Mbit/s link, base RTT 20 ms: BDP 125 kB, rho_b = 10, so eq. 24's w* is 10/9 of the
    /// free BDP (138.9 kB when all free). Free capacity drops to 30% (w* 41.7 kB) at round 300 and
    /// comes back at 600.
    #[test]
    fn simulated_link_follows_a_drop_and_a_return() {
        let mut c = KeyBinarySearch::new(KeyBinarySearchConfig::default(), 2896);
        let free = |n: usize| if (300..600).contains(&n) { 0.3 } else { 1.0 };
        let b = run_on_link(&mut c, 2896, 900, LINK, free);
        let (bdp, bdp30) = (125_000.0, 37_500.0);
        let (wstar, wstar30) = (bdp * 10.0 / 9.0, bdp30 * 10.0 / 9.0);
        // Rounds after `from` until the budget stays within [lo, hi] up to `to`.
        let settle = |from: usize, to: usize, lo: f64, hi: f64| {
            (from..to)
                .rev()
                .find(|&n| !(lo..=hi).contains(&(b[n] as f64)))
                .map_or(0, |n| n + 1 - from)
        };
        // Within [free BDP, w* + 1 unit]: it uses the free capacity and interferes no more than
        // eq. 24 allows.
        let start = settle(0, 300, bdp, wstar + 100.0);
        let drop = settle(300, 600, bdp30, wstar30 + 100.0);
        let back = settle(600, 900, bdp, wstar + 100.0);
        // How soon it stops taking more than eq. 24 allows after the drop.
        let yielded = (300..600).find(|&n| b[n] as f64 <= wstar30 + 100.0).unwrap() - 300;
        eprintln!(
            "rounds to settle {start}, after the drop {drop} (yields in {yielded}), after the return {back}"
        );
        // Fig. 4: 6 doublings from 2896 past 139 kB, then bisecting [1, 1792] in about 11.
        assert!(start <= 20, "start {start}");
        // Halving from w* (2 rounds), then bisecting [347, 694] in about 9.
        assert!(yielded <= 2, "yielded {yielded}");
        assert!(drop <= 15, "drop {drop}");
        // Widening from 417 units: +2, then tops at +4, +8, ..., +512, about 2 log2(970) rounds.
        assert!(back <= 25, "back {back}");
        // The change point: 1388 units is the largest with rho = 1.25e6 / w > 10 - 1.
        assert_eq!(c.stats().estimate, Some(138_800));
    }

    /// Eq. 25 as written on the same link: rho_hat follows the samples taken at the edge down and
    /// the search climbs far past w*.
    #[test]
    fn paper_estimate_runs_away() {
        let config = KeyBinarySearchConfig {
            anchored_estimate: false,
            ..KeyBinarySearchConfig::default()
        };
        let mut c = KeyBinarySearch::new(config, 2896);
        let b = run_on_link(&mut c, 2896, 300, LINK, |_| 1.0);
        assert!(b[299] as f64 > 2.0 * 138_889.0, "{}", b[299]);
    }
}
