//! A token bucket: the rate a background UDP flow may send at, as a policer or as a shaper.
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
//!
//! As a **shaper** ([`TokenBucket::shape`], the default) the same bucket's debt is a queue: a
//! packet over the rate waits at the router until the tokens have grown back to cover it, up to
//! one bucket of waiting bytes (two in the grace after a drop), and only beyond that is it
//! dropped. A loss-based sender that overshoots then finds its excess waiting instead of lost,
//! and when it does lose a packet and halves its rate, the bytes waiting keep its share of the
//! link busy while it grows back: the buffer a Reno sender needs to lose no throughput at a
//! halving is one bandwidth-delay product of its rate (Villamizar and Song, "High performance
//! TCP in ANSNET", 1994), which is one allocation here. The wait is bounded (one round trip,
//! two in the grace), and per flow: best effort does not queue behind it.

use slipstream_control::{Duration, Instant};

/// The smallest depth: two full-size packets (a pair of back-to-back packets always passes).
pub(crate) const MIN_DEPTH: u64 = 2 * 1500;

/// What the shaper does with a packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Admission {
    /// Within the rate: on at once.
    Pass,
    /// Over the rate: on after this long (the queue ahead of it drains at the rate).
    Wait(Duration),
    /// Over the queue, ECN-capable: marked CE, and on after this long.
    MarkAndWait(Duration),
    /// Over the queue: dropped.
    Over,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TokenBucket {
    /// Bytes per second; `None`: not policing (no allocation yet).
    rate: Option<f64>,
    /// Bytes the bucket holds when full.
    depth: u64,
    /// Bytes the shaper lets wait before it drops (or marks) one: the depth, unless
    /// [`TokenBucket::set_with_queue`] said more.
    queue: u64,
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
        let rate = depth as f64 / rtt.as_secs_f64().max(1e-3);
        if self.rate.is_none() {
            self.tokens = depth as f64;
        }
        self.rate = Some(rate);
        self.depth = depth;
        self.queue = depth;
        self.rtt = rtt;
        self.tokens = self.tokens.min(depth as f64);
    }

    /// [`TokenBucket::set`], with room for `queue` bytes to wait in the shaper (when it is more
    /// than the depth): a short cut the sender is not meant to answer (a coordinated slowdown)
    /// is then a wait, not a loss.
    pub(crate) fn set_with_queue(&mut self, now: Instant, window: u64, rtt: Duration, queue: u64) {
        self.set(now, window, rtt);
        self.queue = self.queue.max(queue);
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

    /// Policing: whether a packet of `bytes` may pass now; takes its tokens if so (see the
    /// module docs).
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

    /// Shaping: whether a packet of `bytes` passes now, waits (how long), or is over even the
    /// queue (see the module docs). An ECN-capable packet over the queue is marked and waits
    /// instead of being dropped, up to the grace's two buckets.
    pub(crate) fn shape(&mut self, now: Instant, bytes: u32, ecn_capable: bool) -> Admission {
        let Some(rate) = self.rate else {
            return Admission::Pass;
        };
        self.refill(now);
        let bytes = f64::from(bytes);
        if self.tokens >= bytes {
            self.tokens -= bytes;
            return Admission::Pass;
        }
        let in_grace = self.grace_until.is_some_and(|t| now < t);
        let depth = self.queue as f64;
        let queue_limit = if in_grace { 2.0 * depth } else { depth };
        let after = self.tokens - bytes;
        let wait = |tokens: f64| Duration::from_secs_f64((-tokens).max(0.0) / rate);
        if after >= -queue_limit {
            self.tokens = after;
            return Admission::Wait(wait(after));
        }
        if !in_grace {
            self.grace_until = Some(now + self.rtt);
        }
        if ecn_capable && after >= -2.0 * depth {
            self.tokens = after;
            return Admission::MarkAndWait(wait(after));
        }
        Admission::Over
    }

    /// Bytes waiting in the shaper at `now` (zero for a policer, which never lets the tokens
    /// below zero but in its grace).
    pub(crate) fn backlog(&self, now: Instant) -> u64 {
        let (Some(rate), Some(then)) = (self.rate, self.updated) else {
            return 0;
        };
        let tokens = self.tokens + rate * now.saturating_since(then).as_secs_f64();
        (-tokens).max(0.0) as u64
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

    fn waits(a: Admission) -> Option<u64> {
        match a {
            Admission::Wait(d) | Admission::MarkAndWait(d) => Some(d.as_micros() as u64),
            _ => None,
        }
    }

    #[test]
    fn a_shaper_queues_one_bucket_over_the_rate_then_drops_once_and_grants_a_second() {
        // 15 kB per 100 ms: 150 kB/s, a packet of 1500 B every 10 ms.
        let mut b = TokenBucket::default();
        b.set(at(0), 15_000, Duration::from_millis(100));
        assert!((0..10).all(|_| b.shape(at(0), 1500, false) == Admission::Pass));
        // The next ten wait 10, 20, ... 100 ms: one bucket of queue.
        for i in 1..=10u64 {
            assert_eq!(waits(b.shape(at(0), 1500, false)), Some(i * 10_000));
        }
        assert_eq!(b.backlog(at(0)), 15_000);
        // The eleventh is over the queue: dropped, and a round trip of grace begins...
        assert_eq!(b.shape(at(0), 1500, false), Admission::Over);
        // ...in which the queue may reach two buckets (200 ms of waiting), no more.
        for i in 11..=20u64 {
            assert_eq!(waits(b.shape(at(0), 1500, false)), Some(i * 10_000));
        }
        assert_eq!(b.shape(at(0), 1500, false), Admission::Over);
        // Half a second later the queue has drained and 1500 B pass again.
        assert_eq!(b.backlog(at(500)), 0);
        assert_eq!(b.shape(at(500), 1500, false), Admission::Pass);
    }

    #[test]
    fn a_shaper_marks_an_ecn_sender_instead_of_dropping_it() {
        let mut b = TokenBucket::default();
        b.set(at(0), 15_000, Duration::from_millis(100));
        let admitted: Vec<_> = (0..30).map(|_| b.shape(at(0), 1500, true)).collect();
        assert_eq!(admitted[20], Admission::MarkAndWait(Duration::from_millis(110)));
        assert!(admitted[21..].iter().all(|a| matches!(a, Admission::Wait(_))));
        // Beyond two buckets even an ECN-capable packet is dropped.
        assert_eq!(b.shape(at(0), 1500, true), Admission::Over);
    }

    #[test]
    fn a_paced_sender_at_its_rate_never_waits_and_a_stopped_shaper_passes_all() {
        let mut b = TokenBucket::default();
        assert_eq!(b.shape(at(0), 1500, false), Admission::Pass);
        b.set(at(0), 30_000, Duration::from_millis(100));
        assert!((0..2000).all(|i| b.shape(at(i * 5), 1500, false) == Admission::Pass));
        b.stop();
        assert!((0..100).all(|_| b.shape(at(10_000), 1500, false) == Admission::Pass));
    }

    #[test]
    fn a_longer_queue_holds_a_slowdowns_excess_without_a_drop() {
        // Half of a 1500 B / 10 ms sender for two round trips of 100 ms: 15 kB wait at most.
        let mut b = TokenBucket::default();
        b.set_with_queue(at(0), 7_500, Duration::from_millis(100), 15_000);
        let admitted: Vec<_> = (0..20).map(|i| b.shape(at(i * 10), 1500, false)).collect();
        assert!(admitted.iter().all(|a| *a != Admission::Over), "{admitted:?}");
        // The next round's plain `set` brings the queue back to its depth.
        b.set(at(200), 7_500, Duration::from_millis(100));
        assert_eq!(b.shape(at(200), 1500, false), Admission::Over);
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
