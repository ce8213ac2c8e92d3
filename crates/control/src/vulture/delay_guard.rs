//! Slipstream's addition to Vulture, not in the paper: a queueing-delay guard on Alg. 4.
//!
//! Why it exists: PIVs see a queue that *changes*, not one that *stands*. A greedy best-effort
//! flow (Cubic) keeps the bottleneck queue full; between two background packets 20 ms apart the
//! queue length then hardly varies, the PIVs are small, and Alg. 4 keeps doubling or increasing
//! the background window. Measured in the end-to-end testbed (10 Mbit/s, 100 ms RTT, one-BDP
//! queue), the paper's rules left a background download about 1 Mbit/s beside a greedy Cubic
//! download, which kept 89.8% of its goodput alone. The router measures the flow's RTT anyway;
//! the latest sample's excess over the smallest one is the standing queue, which PIVs miss.
//!
//! The guard only ever makes Alg. 4's decision more cautious, at each epoch end: with a queueing
//! delay above the limit the policy is halve; otherwise Alg. 4's decision stands. With bounded
//! steps, a halve the guard asked for goes only as far as draining the measured queue
//! (rwnd x base RTT / (base RTT + queueing delay), at most one halving), and that drained window
//! becomes rwndThresh, so growth from there is Alg. 4's "increase" (one MSS per RTT), not
//! "double": a background flow alone settles near the path's BDP instead of swinging between
//! half and twice it, and a best-effort flow that adds queue keeps pushing it down. (A first
//! version only stopped growth between one and two times the limit; beside a best-effort flow
//! still ramping up, the queue then sat between the two for many seconds while the background
//! flow kept its window, and best effort kept only 81% in one of five runs.)
//!
//! `queue_delay_limit = None` turns it off (the paper's Vulture, kept for comparison).

use super::policy::Policy;
use crate::time::Duration;

/// Applies the guard to the policy Alg. 4 decided.
pub(crate) fn guard(decided: Policy, queue_delay: Option<Duration>, limit: Option<Duration>) -> Policy {
    let (Some(delay), Some(limit)) = (queue_delay, limit) else {
        return decided;
    };
    if delay > limit {
        Policy::Halve
    } else {
        decided
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Option<Duration> = Some(Duration::from_millis(20));

    fn ms(v: u64) -> Option<Duration> {
        Some(Duration::from_millis(v))
    }

    #[test]
    fn off_or_unmeasured_leaves_the_decision() {
        for p in [Policy::Double, Policy::Increase, Policy::Halve, Policy::Fix] {
            assert_eq!(guard(p, ms(500), None), p);
            assert_eq!(guard(p, None, LIMIT), p);
            assert_eq!(guard(p, ms(20), LIMIT), p, "at the limit nothing changes");
        }
    }

    #[test]
    fn a_standing_queue_halves() {
        for p in [Policy::Double, Policy::Increase, Policy::Fix] {
            assert_eq!(guard(p, ms(21), LIMIT), Policy::Halve);
            assert_eq!(guard(p, ms(70), LIMIT), Policy::Halve);
            assert_eq!(guard(p, ms(19), LIMIT), p);
        }
    }

    #[test]
    fn never_less_cautious() {
        // Halve stays halve at any delay.
        for d in [0, 10, 25, 100] {
            assert_eq!(guard(Policy::Halve, ms(d), LIMIT), Policy::Halve);
        }
    }
}
