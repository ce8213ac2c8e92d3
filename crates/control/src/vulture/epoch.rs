//! Vulture Alg. 2 (PIV analysis) and Alg. 3 (conservative or aggressive mode), in O(1) memory.
//!
//! This file exists to turn one RTT's worth of PIVs into the counts Alg. 4 decides on, without
//! storing the PIVs. The paper keeps a `pivQue` and walks it twice at the end of the RTT: once for
//! count, positive/negative/zero and `pivSum` (Alg. 2), then, depending on the mode, once to
//! classify each PIV as high/middle/low with the mode's thresholds (Alg. 3). Both walks only count,
//! so [`EpochAccumulator`] classifies every PIV under **both** modes' thresholds as it arrives; at
//! the end of the epoch the mode is picked exactly as Alg. 3 does and that mode's counts are used.
//! This is exactly equivalent to the two passes. Alg. 2's `negative` and `zero` counts are never
//! read by Alg. 3 or Alg. 4, so they are not kept.
//!
//! # Classification (PIVs already rounded to the jiffy, see `piv::round_piv`)
//! * conservative: high if `|piv| >= cHigh`; middle if `cLow <= |piv| < cHigh` (the paper's
//!   `piv == ±cLow` in integer jiffies, where cHigh = cLow + 1); low otherwise;
//! * aggressive: high if `|piv| >= aHigh`; low if `|piv| <= aLow`; middle otherwise.
//!
//! With PIVs rounded to multiples of the jiffy and thresholds that are multiples of it, these
//! continuous comparisons reproduce the paper's integer ones exactly.

use crate::controller::{ControllerMode, EpochSummary};
use crate::time::Duration;

/// Vulture's operating mode (Alg. 3), or warmup before the flow turned LBE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// The controller leaves the flow alone (no sender clock or no RTT yet).
    #[default]
    Warmup,
    /// `pivSum > 0 ∨ positive > pivCount/2`: spare bandwidth is used up, short queues only.
    Conservative,
    /// Otherwise: spare bandwidth left, longer queues tolerated.
    Aggressive,
}

impl From<Mode> for ControllerMode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Warmup => ControllerMode::Warmup,
            Mode::Conservative => ControllerMode::Conservative,
            Mode::Aggressive => ControllerMode::Aggressive,
        }
    }
}

/// The four Alg. 3 thresholds, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Thresholds {
    pub c_low: u32,
    pub c_high: u32,
    pub a_low: u32,
    pub a_high: u32,
    /// The paper counts a large negative PIV (the queue draining) as high, like a large positive
    /// one. Slipstream's variant counts it as middle: draining is not new congestion.
    pub draining_is_high: bool,
}

impl Thresholds {
    pub(crate) fn from_durations(
        c_low: Duration,
        c_high: Duration,
        a_low: Duration,
        a_high: Duration,
    ) -> Self {
        let us = |d: Duration| d.as_micros().min(u128::from(u32::MAX)) as u32;
        Thresholds {
            c_low: us(c_low),
            c_high: us(c_high),
            a_low: us(a_low),
            a_high: us(a_high),
            draining_is_high: true,
        }
    }
}

/// High/middle/low counts of one mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Classes {
    pub high: u32,
    pub middle: u32,
    pub low: u32,
}

/// What Alg. 2 and Alg. 3 found in one epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EpochOutcome {
    pub mode: Mode,
    /// The chosen mode's counts.
    pub classes: Classes,
    pub summary: EpochSummary,
}

/// Running Alg. 2/3 counts of the current epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EpochAccumulator {
    count: u32,
    positive: u32,
    sum: i64,
    conservative: Classes,
    aggressive: Classes,
}

impl EpochAccumulator {
    /// Adds one (rounded) PIV in microseconds.
    pub(crate) fn add(&mut self, piv: i64, t: &Thresholds) {
        self.count = self.count.saturating_add(1);
        if piv > 0 {
            self.positive = self.positive.saturating_add(1);
        }
        self.sum = self.sum.saturating_add(piv);
        let mag = piv.unsigned_abs();
        let draining_not_high = piv < 0 && !t.draining_is_high;
        let c = &mut self.conservative;
        if mag >= u64::from(t.c_high) && draining_not_high {
            c.middle = c.middle.saturating_add(1);
        } else if mag >= u64::from(t.c_high) {
            c.high = c.high.saturating_add(1);
        } else if mag >= u64::from(t.c_low) {
            c.middle = c.middle.saturating_add(1);
        } else {
            c.low = c.low.saturating_add(1);
        }
        let a = &mut self.aggressive;
        if mag > u64::from(t.a_low) && draining_not_high {
            a.middle = a.middle.saturating_add(1);
        } else if mag >= u64::from(t.a_high) {
            a.high = a.high.saturating_add(1);
        } else if mag <= u64::from(t.a_low) {
            a.low = a.low.saturating_add(1);
        } else {
            a.middle = a.middle.saturating_add(1);
        }
    }

    /// Alg. 3's mode choice on the epoch's counts.
    pub(crate) fn finish(&self) -> EpochOutcome {
        // `positive > pivCount/2` with C integer division is the same as 2·positive > pivCount.
        let conservative = self.sum > 0 || u64::from(self.positive) * 2 > u64::from(self.count);
        let (mode, classes) = if conservative {
            (Mode::Conservative, self.conservative)
        } else {
            (Mode::Aggressive, self.aggressive)
        };
        EpochOutcome {
            mode,
            classes,
            summary: EpochSummary {
                piv_count: self.count,
                positive: self.positive,
                piv_sum_micros: self.sum,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper() -> Thresholds {
        let ms = Duration::from_millis;
        Thresholds::from_durations(ms(4), ms(8), ms(12), ms(20))
    }

    fn run(pivs_ms: &[i64]) -> EpochOutcome {
        let t = paper();
        let mut acc = EpochAccumulator::default();
        for &p in pivs_ms {
            acc.add(p * 1000, &t);
        }
        acc.finish()
    }

    /// The paper's two passes over a stored queue, in integer jiffies, as a reference.
    fn two_pass_reference(pivs_jiffies: &[i64]) -> (Mode, Classes) {
        let count = pivs_jiffies.len() as i64;
        let positive = pivs_jiffies.iter().filter(|&&p| p > 0).count() as i64;
        let sum: i64 = pivs_jiffies.iter().sum();
        let (c_low, c_high, a_low, a_high) = (1, 2, 3, 5);
        let mut k = Classes::default();
        if sum > 0 || positive > count / 2 {
            for &p in pivs_jiffies {
                if p >= c_high || p <= -c_high {
                    k.high += 1;
                } else if p == -c_low || p == c_low {
                    k.middle += 1;
                } else {
                    k.low += 1;
                }
            }
            (Mode::Conservative, k)
        } else {
            for &p in pivs_jiffies {
                if p >= a_high || p <= -a_high {
                    k.high += 1;
                } else if p >= -a_low && p <= a_low {
                    k.low += 1;
                } else {
                    k.middle += 1;
                }
            }
            (Mode::Aggressive, k)
        }
    }

    #[test]
    fn positive_sum_is_conservative() {
        // [4, -4, 0, 8] ms: sum 8 > 0 -> conservative; high 1 (8), middle 2 (±4), low 1 (0).
        let o = run(&[4, -4, 0, 8]);
        assert_eq!(o.mode, Mode::Conservative);
        assert_eq!(
            o.classes,
            Classes {
                high: 1,
                middle: 2,
                low: 1
            }
        );
        assert_eq!(
            o.summary,
            EpochSummary {
                piv_count: 4,
                positive: 2,
                piv_sum_micros: 8_000
            }
        );
    }

    #[test]
    fn negative_sum_few_positives_is_aggressive() {
        // [-20, -16, -12, 4, 8, 0, 24] ms: sum -12, 3 of 7 positive -> aggressive.
        // aggressive: high |p| >= 20: -20, 24 -> 2; low |p| <= 12: -12, 4, 8, 0 -> 4; middle: -16 -> 1.
        let o = run(&[-20, -16, -12, 4, 8, 0, 24]);
        assert_eq!(o.mode, Mode::Aggressive);
        assert_eq!(
            o.classes,
            Classes {
                high: 2,
                middle: 1,
                low: 4
            }
        );
        assert_eq!(o.summary.piv_sum_micros, -12_000);
        assert_eq!(o.summary.positive, 3);
    }

    #[test]
    fn majority_positive_is_conservative_even_with_negative_sum() {
        // [4, 4, 4, -40]: sum -28 but 3 of 4 positive (3 > 4/2) -> conservative.
        let o = run(&[4, 4, 4, -40]);
        assert_eq!(o.mode, Mode::Conservative);
        assert_eq!(
            o.classes,
            Classes {
                high: 1,
                middle: 3,
                low: 0
            }
        );
        // Exactly half positive and negative sum: aggressive (2 > 4/2 is false).
        let o = run(&[4, 4, -4, -8]);
        assert_eq!(o.mode, Mode::Aggressive);
        assert_eq!(
            o.classes,
            Classes {
                high: 0,
                middle: 0,
                low: 4
            }
        );
    }

    #[test]
    fn empty_epoch_is_aggressive_with_no_counts() {
        let o = run(&[]);
        assert_eq!(o.mode, Mode::Aggressive);
        assert_eq!(o.classes, Classes::default());
        assert_eq!(o.summary.piv_count, 0);
    }

    #[test]
    fn matches_the_papers_two_passes_in_integer_jiffies() {
        // Every list of PIVs in -7..=7 jiffies of length up to 4, plus some longer mixes.
        let mut lists: Vec<Vec<i64>> = vec![vec![]];
        for _ in 0..3 {
            let mut next = Vec::new();
            for l in &lists {
                for p in -7..=7 {
                    let mut m = l.clone();
                    m.push(p);
                    next.push(m);
                }
            }
            lists.extend(next);
        }
        lists.push(vec![1, 1, 1, 1, 1, -9, 2, 0, 0, 3, -3, 5, -5, 4]);
        for l in lists {
            let t = paper();
            let mut acc = EpochAccumulator::default();
            for &p in &l {
                acc.add(p * 4_000, &t);
            }
            let o = acc.finish();
            assert_eq!((o.mode, o.classes), two_pass_reference(&l), "{l:?}");
        }
    }
}
