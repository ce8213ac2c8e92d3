//! Vulture Alg. 4: rwnd moderation policy making.
//!
//! This file exists to turn an epoch's high/middle/low counts into the policy Alg. 5 applies per
//! ACK, and to keep `rwndThresh`, "the maximum rwnd value before rwnd is reduced last time".
//!
//! * `high > α·pivCount` → halve; `low > α·pivCount` → double if `rwnd < rwndThresh`, else
//!   increase; otherwise fix (Alg. 4, α = 7/8). An epoch without PIVs therefore decides fix.
//! * "On the detection of out of order or lost packets: policy = halve" (Alg. 4, last line).
//! * `rwndThresh` (initially `u32::MAX`) becomes the current rwnd whenever the policy *enters*
//!   halve from another policy, whichever of the two routes leads there: that rwnd is the maximum
//!   before the reduction. Staying in halve does not lower it further.

use super::epoch::Classes;
use crate::controller::WindowPolicy;

/// The rwnd moderation policy of Alg. 4, applied per ACK by Alg. 5.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// rwnd grows by the bytes each ACK acknowledges: doubles per RTT.
    Double,
    /// rwnd grows by one MSS per RTT.
    Increase,
    /// rwnd shrinks by the bytes each ACK acknowledges: halves per RTT.
    Halve,
    /// rwnd stays.
    #[default]
    Fix,
}

impl From<Policy> for WindowPolicy {
    fn from(policy: Policy) -> Self {
        match policy {
            Policy::Double => WindowPolicy::Double,
            Policy::Increase => WindowPolicy::Increase,
            Policy::Halve => WindowPolicy::Halve,
            Policy::Fix => WindowPolicy::Fix,
        }
    }
}

/// Alg. 4 on one epoch's counts (those of the mode Alg. 3 chose).
pub(crate) fn decide(classes: Classes, piv_count: u32, alpha: f64, rwnd: u32, rwnd_thresh: u32) -> Policy {
    let bar = alpha * f64::from(piv_count);
    if f64::from(classes.high) > bar {
        Policy::Halve
    } else if f64::from(classes.low) > bar {
        if rwnd < rwnd_thresh {
            Policy::Double
        } else {
            Policy::Increase
        }
    } else {
        Policy::Fix
    }
}

/// The current policy and `rwndThresh`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PolicyState {
    pub policy: Policy,
    pub rwnd_thresh: u32,
}

impl Default for PolicyState {
    fn default() -> Self {
        PolicyState {
            policy: Policy::Fix,
            rwnd_thresh: u32::MAX,
        }
    }
}

impl PolicyState {
    /// Switches to `new`; returns whether the policy changed. Entering halve records the current
    /// rwnd as `rwndThresh`.
    pub(crate) fn set(&mut self, new: Policy, rwnd: u32) -> bool {
        if new == self.policy {
            return false;
        }
        if new == Policy::Halve {
            self.rwnd_thresh = rwnd;
        }
        self.policy = new;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALPHA: f64 = 7.0 / 8.0;

    fn c(high: u32, middle: u32, low: u32) -> Classes {
        Classes { high, middle, low }
    }

    #[test]
    fn alpha_boundary() {
        // 7 of 8 high is not > 7/8·8 = 7: fix. 8 of 8: halve.
        assert_eq!(decide(c(7, 1, 0), 8, ALPHA, 10_000, u32::MAX), Policy::Fix);
        assert_eq!(decide(c(8, 0, 0), 8, ALPHA, 10_000, u32::MAX), Policy::Halve);
        // Same for low: 7 of 8 -> fix, 8 of 8 -> double.
        assert_eq!(decide(c(0, 1, 7), 8, ALPHA, 10_000, u32::MAX), Policy::Fix);
        assert_eq!(decide(c(0, 0, 8), 8, ALPHA, 10_000, u32::MAX), Policy::Double);
        // 15 of 16 > 14: halve.
        assert_eq!(decide(c(15, 1, 0), 16, ALPHA, 10_000, u32::MAX), Policy::Halve);
        // No PIVs: 0 > 0 is false twice: fix.
        assert_eq!(decide(c(0, 0, 0), 0, ALPHA, 10_000, u32::MAX), Policy::Fix);
    }

    #[test]
    fn double_below_thresh_increase_at_or_above() {
        assert_eq!(decide(c(0, 0, 8), 8, ALPHA, 9_999, 10_000), Policy::Double);
        assert_eq!(decide(c(0, 0, 8), 8, ALPHA, 10_000, 10_000), Policy::Increase);
        assert_eq!(decide(c(0, 0, 8), 8, ALPHA, 20_000, 10_000), Policy::Increase);
    }

    #[test]
    fn entering_halve_records_rwnd_thresh() {
        let mut s = PolicyState::default();
        assert_eq!(s.rwnd_thresh, u32::MAX);
        assert!(s.set(Policy::Double, 40_000));
        assert_eq!(s.rwnd_thresh, u32::MAX);
        assert!(s.set(Policy::Halve, 80_000));
        assert_eq!(s.rwnd_thresh, 80_000);
        // Staying in halve (rwnd now lower) keeps the maximum.
        assert!(!s.set(Policy::Halve, 50_000));
        assert_eq!(s.rwnd_thresh, 80_000);
        // Leaving and re-entering records again.
        assert!(s.set(Policy::Fix, 40_000));
        assert!(s.set(Policy::Halve, 45_000));
        assert_eq!(s.rwnd_thresh, 45_000);
        // Now double turns into increase at the threshold.
        assert_eq!(
            decide(c(0, 0, 1), 1, ALPHA, 45_000, s.rwnd_thresh),
            Policy::Increase
        );
    }
}
