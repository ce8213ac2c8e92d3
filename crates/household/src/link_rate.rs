//! The access link's rate as the background traffic has seen it: the largest delivery rate of the
//! household's background flows over the last few seconds (BBR's windowed max filter of the
//! delivery rate, draft-cardwell-iccrg-bbr-congestion-control Sec. 4.5.2, with buckets).
//!
//! Beside best effort the background's own rate R is a small part of the link's C, while the
//! queue it must yield is measured in time: `q * C` bytes. The delay target steps by this estimate
//! instead of R, so it yields (and fills a gap) as fast beside best effort as alone.

use slipstream_control::{Duration, Instant};

/// How long a rate stays in the maximum: long enough to span a best-effort period, short enough
/// to follow a link that got slower (a rate above the link's cannot be measured, so an estimate
/// is never too high for long).
pub const WINDOW: Duration = Duration::from_secs(10);
const BUCKETS: usize = 4;

/// Windowed maximum in `BUCKETS` buckets of `WINDOW / BUCKETS`.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinkRate {
    /// (bucket start, max rate in bytes/s), newest last.
    buckets: [(Instant, f64); BUCKETS],
    filled: usize,
}

impl LinkRate {
    /// A round delivered at `rate` bytes/s; returns the link rate estimate (at least `rate`).
    pub fn update(&mut self, now: Instant, rate: f64) -> f64 {
        let span = WINDOW / BUCKETS as u32;
        match self.filled {
            0 => {
                self.buckets[0] = (now, rate);
                self.filled = 1;
            }
            n => {
                let newest = &mut self.buckets[n - 1];
                if now.saturating_since(newest.0) < span {
                    newest.1 = newest.1.max(rate);
                } else {
                    if n == BUCKETS {
                        self.buckets.rotate_left(1);
                        self.filled -= 1;
                    }
                    self.buckets[self.filled] = (now, rate);
                    self.filled += 1;
                }
            }
        }
        // Buckets older than the window leave.
        let fresh = self.buckets[..self.filled]
            .iter()
            .position(|(start, _)| now.saturating_since(*start) < WINDOW + span)
            .unwrap_or(self.filled);
        self.buckets.copy_within(fresh..self.filled, 0);
        self.filled -= fresh;
        self.estimate().max(rate)
    }

    /// The current estimate, bytes/s (0 before any round).
    pub fn estimate(&self) -> f64 {
        self.buckets[..self.filled]
            .iter()
            .map(|(_, r)| *r)
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_maximum_for_the_window_then_forgets_it() {
        let mut r = LinkRate::default();
        let t = Instant::from_millis;
        assert_eq!(r.update(t(0), 1000.0), 1000.0);
        // Best effort arrives: the background's own rate falls, the link's does not.
        assert_eq!(r.update(t(3000), 200.0), 1000.0);
        assert_eq!(r.update(t(9000), 100.0), 1000.0);
        // 12.5 s later the first bucket (0-2.5 s) has left the window.
        assert_eq!(r.update(t(12_500), 150.0), 200.0);
        assert_eq!(r.update(t(30_000), 50.0), 50.0);
        // A higher rate counts at once.
        assert_eq!(r.update(t(30_100), 5000.0), 5000.0);
    }
}
