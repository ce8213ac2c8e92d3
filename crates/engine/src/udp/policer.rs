//! A token bucket: the rate a background UDP flow may send at.
//!
//! A UDP flow has no window to lower, so its household allocation (bytes in flight, the same
//! currency as a TCP flow's window) becomes a rate, `allocation / RTT`, and the packets above it
//! are dropped (or CE-marked) at the router, which the sender's congestion control reads as
//! congestion (RFC 2475's policer; RFC 2697's single-rate token bucket without its colours).
//! The bucket holds one allocation: a sender that paces at its rate never loses a packet, one
//! that bursts a whole window at once does not either, and one that sends faster than its share
//! for longer than a round trip loses what exceeds it, once per round trip as a loss-based
//! sender backs off.

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

    /// Whether a packet of `bytes` may pass now; takes its tokens if so.
    pub(crate) fn admit(&mut self, now: Instant, bytes: u32) -> bool {
        if self.rate.is_none() {
            return true;
        }
        self.refill(now);
        let bytes = f64::from(bytes);
        if self.tokens >= bytes {
            self.tokens -= bytes;
            true
        } else {
            false
        }
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
    fn holds_a_sender_to_window_per_rtt() {
        // 30 kB per 100 ms = 300 kB/s. A sender at 1500 B every 2 ms (750 kB/s) for 10 s gets
        // the depth (30 kB) plus 300 kB/s × 10 s through: 3.03 MB of 7.5 MB.
        let mut b = TokenBucket::default();
        b.set(at(0), 30_000, Duration::from_millis(100));
        let passed: u64 = (0..5000)
            .filter(|i| b.admit(at(i * 2), 1500))
            .map(|_| 1500u64)
            .sum();
        assert!((3_000_000..=3_031_500).contains(&passed), "{passed}");
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
        // Refill at 60 kB/s: 1500 B per 25 ms.
        assert!(!b.admit(at(1010), 1500));
        assert!(b.admit(at(1025), 1500));
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
