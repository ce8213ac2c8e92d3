//! A token bucket: the rate a background UDP flow may send at.
//!
//! A UDP flow has no window to lower, so its household allocation (bytes in flight, the same
//! currency as a TCP flow's window) becomes a rate, `allocation / RTT`, and the packets above it
//! are dropped (or CE-marked) at the router, which the sender's congestion control reads as
//! congestion (RFC 2475's policer; RFC 2697's single-rate token bucket without its colours).
//! The bucket holds one allocation: a sender that paces at its rate never loses a packet, one
//! that bursts a whole window at once does not either.
//!
//! Over the rate, one packet is dropped, and for a round trip after it the sender is let run
//! into debt (down to minus one bucket) instead of losing every packet over the rate: every
//! congestion control (Reno, Cubic, LEDBAT, BBR's loss bound) takes one loss per round trip as
//! the signal to slow down, and a burst of losses makes uTP (libutp) and QUIC stacks time out and
//! start over from one packet (lab utp: 40 drops in a second, 9.7 to 1.6 Mbit/s). A sender that
//! does not slow down runs out of debt within a bucket's worth of excess, and then loses
//! everything over the rate: the rate is enforced all the same.

use slipstream_control::{Duration, Instant};

/// The smallest depth: two full-size packets (a pair of back-to-back packets always passes).
pub(crate) const MIN_DEPTH: u64 = 2 * 1500;

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TokenBucket {
    /// Bytes per second; `None`: not policing (no allocation yet).
    rate: Option<f64>,
    /// Bytes the bucket holds when full.
    depth: u64,
    /// Bytes available now.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    updated: Option<Instant>,
    /// The round trip the rate was set for, and until when the last drop's grace runs.
    rtt: Duration,
    grace_until: Option<Instant>,
}

impl TokenBucket {
    /// A new rate and depth (each round). The tokens stay: a lower rate takes effect at once for
    /// what comes next, and a flow that was held does not get a burst beyond its new depth.
    pub(crate) fn set(&mut self, now: Instant, window: u64, rtt: Duration) {
        self.refill(now);
        let depth = window.max(MIN_DEPTH);
        let rate = window as f64 / rtt.as_secs_f64().max(1e-3);
        if self.rate.is_none() {
            self.tokens = depth as f64;
        }
        self.rate = Some(rate);
        self.depth = depth;
        self.rtt = rtt;
        self.tokens = self.tokens.min(depth as f64);
    }

    /// The flow's allocation is gone (its rule released it, or the household stopped it): every
    /// packet passes again.
    pub(crate) fn stop(&mut self) {
        *self = TokenBucket::default();
    }

    /// The rate in force, bytes per second.
    pub(crate) fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Whether a packet of `bytes` may pass now; takes its tokens if so (see the module docs).
    pub(crate) fn admit(&mut self, now: Instant, bytes: u32) -> bool {
        if self.rate.is_none() {
            return true;
        }
        self.refill(now);
        let bytes = f64::from(bytes);
        let in_grace = self.grace_until.is_some_and(|t| now < t);
        if self.tokens >= bytes || (in_grace && self.tokens - bytes >= -(self.depth as f64)) {
            self.tokens -= bytes;
            return true;
        }
        if !in_grace {
            self.grace_until = Some(now + self.rtt);
        }
        false
    }

    fn refill(&mut self, now: Instant) {
        if let (Some(rate), Some(then)) = (self.rate, self.updated) {
            let elapsed = now.saturating_since(then).as_secs_f64();
            self.tokens = (self.tokens + rate * elapsed).min(self.depth as f64);
        }
        self.updated = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn passes_everything_until_it_has_a_rate() {
        let mut b = TokenBucket::default();
        assert!((0..1000).all(|i| b.admit(at(i), 1500)));
    }

    #[test]
    fn holds_a_sender_that_does_not_slow_down_to_window_per_rtt() {
        // 30 kB per 100 ms = 300 kB/s. A sender at 1500 B every 2 ms (750 kB/s) for 10 s gets
        // the depth (30 kB), 300 kB/s × 10 s and the debt (30 kB) through: 3.06 of 7.5 MB.
        let mut b = TokenBucket::default();
        b.set(at(0), 30_000, Duration::from_millis(100));
        let passed: u64 = (0..5000)
            .filter(|i| b.admit(at(i * 2), 1500))
            .map(|_| 1500u64)
            .sum();
        assert!((3_000_000..=3_061_500).contains(&passed), "{passed}");
    }

    #[test]
    fn one_drop_then_a_round_trip_of_grace_within_one_bucket_of_debt() {
        let mut b = TokenBucket::default();
        b.set(at(0), 15_000, Duration::from_millis(100));
        // Ten packets empty the bucket; the eleventh is the one dropped.
        assert!((0..10).all(|_| b.admit(at(0), 1500)));
        assert!(!b.admit(at(0), 1500));
        // For the next 100 ms the sender may run up to 15 kB into debt, not more.
        assert!((0..10).all(|_| b.admit(at(1), 1500)));
        assert!(!b.admit(at(1), 1500), "the debt is bounded");
        // After the grace, the next packet over the rate is dropped and starts a new one.
        assert!(!b.admit(at(101), 1500));
        // Back under the rate: 150 kB/s repays the 15 kB debt in 100 ms, then passes again.
        assert!(!b.admit(at(150), 30_000));
        assert!(b.admit(at(230), 1500));
    }

    #[test]
    fn a_paced_sender_at_its_rate_loses_nothing_and_a_window_burst_passes() {
        let mut b = TokenBucket::default();
        b.set(at(0), 30_000, Duration::from_millis(100));
        // One window at once...
        assert!((0..20).all(|_| b.admit(at(0), 1500)));
        assert!(!b.admit(at(0), 1500));
        // ...then 1500 B every 5 ms (exactly 300 kB/s) from an empty bucket.
        assert!((1..2000).all(|i| b.admit(at(i * 5), 1500)));
    }

    #[test]
    fn a_lower_rate_applies_at_once_and_the_depth_bounds_the_burst() {
        let mut b = TokenBucket::default();
        b.set(at(0), 60_000, Duration::from_millis(100));
        b.set(at(1000), 6_000, Duration::from_millis(100));
        // The full 60 kB bucket is cut to the new 6 kB depth: four packets, not forty.
        let burst = (0..40).take_while(|_| b.admit(at(1000), 1500)).count();
        assert_eq!(burst, 4);
    }

    #[test]
    fn the_depth_is_never_below_two_packets() {
        let mut b = TokenBucket::default();
        b.set(at(0), 100, Duration::from_millis(100));
        assert!(b.admit(at(0), 1500) && b.admit(at(0), 1500));
        assert!(!b.admit(at(0), 1500));
        b.stop();
        assert!(b.admit(at(0), 1500) && b.rate().is_none());
    }
}
