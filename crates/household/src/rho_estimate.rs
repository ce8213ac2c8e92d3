//! Key et al.'s estimate of rho_b, what one unit of window delivers per control interval while the
//! background traffic does not interfere (T / base RTT): the EWMA of Key et al. eq. 25, which
//! leaves out samples more than epsilon' below the estimate, as those come from windows past the
//! change point. Both Key controllers (`key_binary_search`, `key_stochastic`) compare each round's
//! rho against it.
//!
//! Eq. 25 as written ([`RhoEstimate::update`]) drifts down on a link whose rho falls smoothly
//! with the window (Theorem 1's fluid model): the controllers sit where rho = rho_hat - epsilon
//! (eq. 24), inside the epsilon' band, so every sample there pulls the estimate down; and a window
//! that grows a little per round lowers rho by less than epsilon' per round, so the estimate
//! follows it and the window never stops growing (the `drift` tests below, and the controllers'
//! `*_paper_estimate_runs_away` tests). [`RhoEstimate::update_at`] (Slipstream's adaptation, on
//! by default) adds a guard from Key et al.'s own model, rho non-increasing in the window
//! (Theorems 1-2): a sample below the estimate is taken in only if its window is no larger than
//! the *anchor*, the window of the latest sample at or above the estimate, where a lower rho can
//! only be noise. A sample more than epsilon' below at or under the anchor shows the plateau has
//! moved below it, so the anchor is dropped. The price: samples above the estimate always count,
//! so under noise it leans high (towards the plateau's upper values), which makes the controllers
//! more cautious, never less.

use crate::budget::LinkRound;
use slipstream_control::Duration;

/// Key et al.'s rho(n) = R(n) / w(n) for one round: R(n) is what the round delivered scaled to one
/// interval of exactly `interval` (T), so a round a little longer or shorter than T does not move
/// it, and w(n) the budget in force. The unit cancels: rho is T / RTT while the budget is
/// window-limited.
pub fn round_rho(round: &LinkRound, interval: Duration) -> f64 {
    round.delivery_rate() * interval.as_secs_f64() / round.budget_in_force.max(1) as f64
}

/// The estimate (eq. 25) and its anchor. Values are in Key et al.'s units: units of data per unit
/// of window per control interval.
#[derive(Clone, Debug, PartialEq)]
pub struct RhoEstimate {
    /// EWMA weight of a new sample (Key et al. Sec. 5: 0.1).
    delta: f64,
    /// epsilon': how far below the estimate a sample may be and still count (Sec. 5: 1).
    epsilon_prime: f64,
    /// rho_hat; `None` until the first sample (eq. 25 starts from rho_hat(1) = rho(1)).
    value: Option<f64>,
    /// Window (units) of the latest sample at or above the estimate; `update_at` only.
    anchor: Option<f64>,
}

impl RhoEstimate {
    /// An estimate with no samples yet; `delta` and `epsilon_prime` as in eq. 25.
    pub fn new(delta: f64, epsilon_prime: f64) -> Self {
        RhoEstimate {
            delta,
            epsilon_prime,
            value: None,
            anchor: None,
        }
    }

    /// rho_hat(n), or `None` before the first sample.
    pub fn value(&self) -> Option<f64> {
        self.value
    }

    /// The anchor window (units), if one is known.
    pub fn anchor(&self) -> Option<f64> {
        self.anchor
    }

    /// Key et al. eq. 25 exactly: returns whether the sample was taken in.
    pub fn update(&mut self, rho: f64) -> bool {
        match self.value {
            None => {
                self.value = Some(rho);
                true
            }
            Some(v) if rho >= v - self.epsilon_prime => {
                self.value = Some(self.mix(v, rho));
                true
            }
            Some(_) => false,
        }
    }

    /// Eq. 25 with the anchor guard (see the module docs); `window` is the window in force when
    /// `rho` was measured, in units. Returns whether the sample was taken in.
    pub fn update_at(&mut self, rho: f64, window: f64) -> bool {
        let Some(v) = self.value else {
            self.reseed(rho, window);
            return true;
        };
        let under_anchor = self.anchor.is_some_and(|a| window <= a);
        if rho >= v {
            self.value = Some(self.mix(v, rho));
            self.anchor = Some(window);
            true
        } else if rho >= v - self.epsilon_prime {
            if under_anchor {
                self.value = Some(self.mix(v, rho));
            }
            under_anchor
        } else {
            if under_anchor {
                self.anchor = None;
            }
            false
        }
    }

    /// Starts again from one sample, as eq. 25 starts (rho_hat(1) = rho(1)).
    pub fn reseed(&mut self, rho: f64, window: f64) {
        self.value = Some(rho);
        self.anchor = Some(window);
    }

    /// Forgets everything; the next sample starts the estimate.
    pub fn reset(&mut self) {
        self.value = None;
        self.anchor = None;
    }

    fn mix(&self, v: f64, rho: f64) -> f64 {
        (1.0 - self.delta) * v + self.delta * rho
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn eq25_by_hand() {
        let mut e = RhoEstimate::new(0.1, 1.0);
        assert_eq!(e.value(), None);
        // rho_hat(1) = rho(1).
        assert!(e.update(5.0));
        assert!(close(e.value(), 5.0));
        // 4.5 >= 5 - 1: 0.9 * 5 + 0.1 * 4.5 = 4.95.
        assert!(e.update(4.5));
        assert!(close(e.value(), 4.95));
        // 3.9 < 4.95 - 1 = 3.95: left out.
        assert!(!e.update(3.9));
        assert!(close(e.value(), 4.95));
        // Exactly epsilon' below counts (eq. 25 says >=): 0.9 * 4.95 + 0.1 * 3.95 = 4.85.
        assert!(e.update(3.95));
        assert!(close(e.value(), 4.85));
        // Above always counts: 0.9 * 4.85 + 0.1 * 6 = 4.965.
        assert!(e.update(6.0));
        assert!(close(e.value(), 4.965));
    }

    #[test]
    fn anchor_by_hand() {
        let mut e = RhoEstimate::new(0.1, 1.0);
        // First sample: estimate 5, anchor at window 100.
        assert!(e.update_at(5.0, 100.0));
        assert_eq!(e.anchor(), Some(100.0));
        // 4.5 is in the band but at window 120 > 100: may be our own interference, left out.
        assert!(!e.update_at(4.5, 120.0));
        assert!(close(e.value(), 5.0));
        // The same at window 80 <= 100 can only be noise: 0.9 * 5 + 0.1 * 4.5 = 4.95.
        assert!(e.update_at(4.5, 80.0));
        assert!(close(e.value(), 4.95));
        assert_eq!(e.anchor(), Some(100.0));
        // At or above the estimate: taken in, anchor moves there. 0.9 * 4.95 + 0.1 * 5.2 = 4.975.
        assert!(e.update_at(5.2, 150.0));
        assert!(close(e.value(), 4.975));
        assert_eq!(e.anchor(), Some(150.0));
        // 3.0 < 4.975 - 1 at window 140 <= 150: the plateau no longer reaches 150, anchor dropped.
        assert!(!e.update_at(3.0, 140.0));
        assert_eq!(e.anchor(), None);
        // Without an anchor, a sample below the estimate never counts.
        assert!(!e.update_at(4.5, 50.0));
        assert!(close(e.value(), 4.975));
        // Reseed: start again from one sample.
        e.reseed(3.0, 40.0);
        assert!(close(e.value(), 3.0));
        assert_eq!(e.anchor(), Some(40.0));
        e.reset();
        assert_eq!(e.value(), None);
        assert_eq!(e.anchor(), None);
    }

    /// A window growing one unit per round past the change point, rho falling 0.05 per round
    /// (what eq. 31 does on a fluid link): eq. 25 follows rho down, the anchored estimate holds.
    #[test]
    fn drift_eq25_follows_a_slow_decline_anchor_holds() {
        let mut paper = RhoEstimate::new(0.1, 1.0);
        let mut anchored = RhoEstimate::new(0.1, 1.0);
        for i in 0..60u32 {
            let window = 100.0 + f64::from(i);
            let rho = if i < 10 {
                5.0
            } else {
                5.0 - 0.05 * f64::from(i - 9)
            };
            paper.update(rho);
            anchored.update_at(rho, window);
        }
        // rho is now 2.45; eq. 25 lags it by about 0.05 / 0.1 = 0.5.
        assert!(paper.value().unwrap() < 3.1, "{:?}", paper.value());
        assert!(close(anchored.value(), 5.0));
    }
}
