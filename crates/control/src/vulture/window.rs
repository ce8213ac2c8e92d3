//! Vulture Alg. 5: applying the policy to rwnd, one outgoing ACK at a time.
//!
//! This file exists to move rwnd gradually rather than in one step (Sec. 0.3.4): under double
//! (halve) each ACK adds (subtracts) the bytes it acknowledges, so rwnd doubles (halves) over one
//! RTT without a burst; under increase rwnd grows by one MSS at most once per RTT; under fix it
//! stays. rwnd is kept within [2·MSS, [`MAX_RWND`]].

use super::policy::Policy;
use crate::time::{Duration, Instant};

/// Upper bound of rwnd: 1 GiB, the largest window TCP window scaling can express.
pub const MAX_RWND: u32 = 1 << 30;

/// rwnd and the time of its last "increase" step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Window {
    pub rwnd: u32,
    /// When "increase" last added an MSS; `None` if never.
    last_increase: Option<Instant>,
    /// Slipstream's bounded steps: the value double may grow to / halve may shrink to under the
    /// current decision (`None`: unbounded, the paper's Alg. 5).
    step_bound: Option<u32>,
}

/// Keeps a window within [2·MSS, `MAX_RWND`].
pub(crate) fn clamp(rwnd: u32, mss: u32) -> u32 {
    rwnd.min(MAX_RWND).max(mss.saturating_mul(2).min(MAX_RWND))
}

impl Window {
    pub(crate) fn new(rwnd: u32, mss: u32) -> Self {
        Window {
            rwnd: clamp(rwnd, mss),
            last_increase: None,
            step_bound: None,
        }
    }

    /// Bounds the policy just decided to one doubling or one halving of the current rwnd (the
    /// paper's stated intent, "at the end of the current RTT, rwnd will be doubled (or halved)",
    /// which its per-ACK rule overshoots when a decision stays in force for more than one RTT).
    pub(crate) fn bound_step(&mut self, policy: Policy) {
        self.step_bound = match policy {
            Policy::Double => Some(self.rwnd.saturating_mul(2)),
            Policy::Halve => Some(self.rwnd / 2),
            Policy::Increase | Policy::Fix => None,
        };
    }

    /// Bounds a halve decided by the queueing-delay guard to draining the measured queue:
    /// rwnd x base RTT / (base RTT + queueing delay), never below one halving. Returns the bound.
    pub(crate) fn bound_drain(&mut self, base_rtt: Duration, queue_delay: Duration) -> u32 {
        let base = base_rtt.as_micros() as u64;
        let total = (base + queue_delay.as_micros() as u64).max(1);
        let drained = ((u64::from(self.rwnd) * base / total) as u32).max(self.rwnd / 2);
        self.step_bound = Some(drained);
        drained
    }

    /// Alg. 5 for one ACK forwarded at `now` acknowledging `acked` bytes. "Increase" needs an RTT
    /// to know whether rwnd was already increased in this RTT; without one it does nothing.
    /// `in_use`, when given, is the window the sender uses (bytes per round): double and
    /// increase then grow rwnd only up to twice that (Slipstream's validated growth).
    pub(crate) fn on_ack(
        &mut self,
        policy: Policy,
        acked: u32,
        mss: u32,
        now: Instant,
        rtt: Option<Duration>,
        in_use: Option<u32>,
    ) {
        // Growth stops at twice the window in use (never shrinks rwnd by itself).
        let growth_cap = in_use.map_or(u32::MAX, |used| used.saturating_mul(2).max(self.rwnd));
        let rwnd = match policy {
            Policy::Double => {
                let grown = self.rwnd.saturating_add(acked);
                self.step_bound
                    .map_or(grown, |cap| grown.min(cap.max(self.rwnd)))
                    .min(growth_cap)
            }
            Policy::Halve => {
                let shrunk = self.rwnd.saturating_sub(acked);
                self.step_bound
                    .map_or(shrunk, |floor| shrunk.max(floor.min(self.rwnd)))
            }
            Policy::Increase => match rtt {
                Some(rtt) if self.last_increase.is_none_or(|t| now.saturating_since(t) >= rtt) => {
                    self.last_increase = Some(now);
                    self.rwnd.saturating_add(mss).min(growth_cap)
                }
                _ => self.rwnd,
            },
            Policy::Fix => self.rwnd,
        };
        self.rwnd = clamp(rwnd, mss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_bound_removes_the_measured_queue() {
        let t = Instant::ZERO;
        let mut w = Window::new(150_000, 1000);
        // 100 ms path, 20 ms of queue: 150000 x 100/120 = 125000.
        w.bound_drain(Duration::from_millis(100), Duration::from_millis(20));
        for _ in 0..100 {
            w.on_ack(Policy::Halve, 1000, 1000, t, None, None);
        }
        assert_eq!(w.rwnd, 125_000);
        // A queue longer than the path: no more than one halving.
        w.bound_drain(Duration::from_millis(100), Duration::from_millis(300));
        for _ in 0..100 {
            w.on_ack(Policy::Halve, 1000, 1000, t, None, None);
        }
        assert_eq!(w.rwnd, 62_500);
    }

    #[test]
    fn bounded_steps_stop_at_one_doubling_or_halving() {
        let t = Instant::ZERO;
        let mut w = Window::new(10_000, 1000);
        w.bound_step(Policy::Halve);
        for _ in 0..20 {
            w.on_ack(Policy::Halve, 1000, 1000, t, None, None);
        }
        assert_eq!(w.rwnd, 5_000, "halved once, not to the floor");
        w.bound_step(Policy::Double);
        for _ in 0..20 {
            w.on_ack(Policy::Double, 1000, 1000, t, None, None);
        }
        assert_eq!(w.rwnd, 10_000, "doubled once");
        w.bound_step(Policy::Fix);
        w.on_ack(Policy::Double, 1000, 1000, t, None, None);
        assert_eq!(w.rwnd, 11_000, "unbounded again once the bound is cleared");
    }

    const MSS: u32 = 1000;
    const RTT: Option<Duration> = Some(Duration::from_millis(100));

    #[test]
    fn double_then_halve_returns_to_the_start() {
        let mut w = Window::new(10_000, MSS);
        let acks = [1000, 2000, 500, 1500, 3000, 2000];
        for (i, &a) in acks.iter().enumerate() {
            w.on_ack(Policy::Double, a, MSS, Instant::from_millis(i as u64), RTT, None);
        }
        assert_eq!(w.rwnd, 20_000);
        for (i, &a) in acks.iter().enumerate() {
            w.on_ack(
                Policy::Halve,
                a,
                MSS,
                Instant::from_millis(10 + i as u64),
                RTT,
                None,
            );
        }
        assert_eq!(w.rwnd, 10_000);
    }

    #[test]
    fn increase_at_most_once_per_rtt() {
        let mut w = Window::new(10_000, MSS);
        w.on_ack(Policy::Increase, 3000, MSS, Instant::from_millis(0), RTT, None);
        assert_eq!(w.rwnd, 11_000);
        w.on_ack(Policy::Increase, 3000, MSS, Instant::from_millis(50), RTT, None);
        w.on_ack(Policy::Increase, 3000, MSS, Instant::from_millis(99), RTT, None);
        assert_eq!(w.rwnd, 11_000);
        w.on_ack(Policy::Increase, 3000, MSS, Instant::from_millis(100), RTT, None);
        assert_eq!(w.rwnd, 12_000);
        // Without an RTT nothing can be judged "once per RTT": no increase.
        w.on_ack(Policy::Increase, 3000, MSS, Instant::from_millis(500), None, None);
        assert_eq!(w.rwnd, 12_000);
    }

    #[test]
    fn validated_growth_stops_at_twice_the_window_in_use() {
        let mut w = Window::new(10_000, MSS);
        let used = Some(6_000);
        for i in 0..10 {
            w.on_ack(Policy::Double, 1000, MSS, Instant::from_millis(i), RTT, used);
        }
        assert_eq!(w.rwnd, 12_000, "grown up to 2 x 6000, then held");
        w.on_ack(Policy::Increase, 1000, MSS, Instant::from_millis(500), RTT, used);
        assert_eq!(w.rwnd, 12_000);
        // A window already above twice the use is not cut by growth decisions.
        w.on_ack(
            Policy::Double,
            1000,
            MSS,
            Instant::from_millis(501),
            RTT,
            Some(1000),
        );
        assert_eq!(w.rwnd, 12_000);
        // Halve and fix are not growth: unaffected.
        w.on_ack(Policy::Halve, 1000, MSS, Instant::from_millis(600), RTT, Some(0));
        assert_eq!(w.rwnd, 11_000);
        // Once the sender uses more, growth resumes.
        w.on_ack(
            Policy::Double,
            1000,
            MSS,
            Instant::from_millis(700),
            RTT,
            Some(11_000),
        );
        assert_eq!(w.rwnd, 12_000);
    }

    #[test]
    fn fix_keeps_and_bounds_hold() {
        let mut w = Window::new(10_000, MSS);
        w.on_ack(Policy::Fix, 5000, MSS, Instant::ZERO, RTT, None);
        assert_eq!(w.rwnd, 10_000);
        for _ in 0..20 {
            w.on_ack(Policy::Halve, 5000, MSS, Instant::ZERO, RTT, None);
        }
        assert_eq!(w.rwnd, 2 * MSS);
        let mut w = Window::new(MAX_RWND - 10, MSS);
        w.on_ack(Policy::Double, u32::MAX, MSS, Instant::ZERO, RTT, None);
        assert_eq!(w.rwnd, MAX_RWND);
        assert_eq!(Window::new(0, MSS).rwnd, 2 * MSS);
    }
}
