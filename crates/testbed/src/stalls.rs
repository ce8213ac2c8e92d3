//! Stalls on purpose: the delay element (`slipstream-delay --stall-every-ms --stall-ms`) stops
//! releasing packets for a fixed length at random moments (exponential gaps of a given mean),
//! so every packet due in a stall leaves at its end, in order.
//!
//! Why: jitter that no queue holds. A path has it (a far Wi-Fi's retries, a cable modem's
//! request-grant cycle, a busy server), and so does this shared machine when the hypervisor
//! takes the cores: the element then releases late and a delay-based controller reads the
//! lateness as the link's queue (docs/lab/about.md, the machine rows). The host's stalls come
//! and go with its neighbours; these are the same kind of delay, repeatable, for measuring how
//! much of the link a controller gives up to jitter. Pure: times in, decisions out.

use std::time::{Duration, Instant};

/// The stall schedule. Gaps come from a seeded generator, so one seed gives one schedule.
#[derive(Debug, Clone)]
pub struct Stalls {
    mean_gap: Duration,
    length: Duration,
    /// xorshift64* state (never zero).
    state: u64,
    /// When the next (or current) stall starts.
    next_start: Instant,
}

impl Stalls {
    /// Stalls of `length`, the gaps between them exponential with mean `mean_gap`, the first
    /// gap counted from `now`.
    pub fn new(mean_gap: Duration, length: Duration, seed: u64, now: Instant) -> Stalls {
        let mut s = Stalls {
            mean_gap,
            length,
            state: seed | 1,
            next_start: now,
        };
        s.next_start = now + s.gap();
        s
    }

    /// The end of the stall `now` falls in, if it falls in one. Moves on to the next stall once
    /// one has ended.
    pub fn stalled_until(&mut self, now: Instant) -> Option<Instant> {
        loop {
            if now < self.next_start {
                return None;
            }
            let end = self.next_start + self.length;
            if now < end {
                return Some(end);
            }
            self.next_start = end + self.gap();
        }
    }

    /// The next exponential gap (inverse transform of a uniform draw in (0, 1]).
    fn gap(&mut self) -> Duration {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let bits = self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        let uniform = (bits as f64 + 1.0) / (1u64 << 53) as f64;
        self.mean_gap.mul_f64(-uniform.ln())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_stall_holds_until_its_end_then_the_next_comes_later() {
        let t0 = Instant::now();
        let mut s = Stalls::new(ms(200), ms(5), 7, t0);
        let first = s.next_start;
        assert!(first > t0);
        assert_eq!(s.stalled_until(first - ms(1)), None);
        assert_eq!(s.stalled_until(first), Some(first + ms(5)));
        assert_eq!(s.stalled_until(first + ms(4)), Some(first + ms(5)));
        assert_eq!(s.stalled_until(first + ms(5)), None, "over at its end");
        assert!(s.next_start >= first + ms(5), "the next one starts after it");
    }

    #[test]
    fn gaps_average_the_mean_and_one_seed_gives_one_schedule() {
        let t0 = Instant::now();
        let starts = |seed| {
            let mut s = Stalls::new(ms(100), ms(2), seed, t0);
            (0..2000)
                .map(|_| {
                    let start = s.next_start;
                    assert_eq!(s.stalled_until(start), Some(start + ms(2)));
                    s.stalled_until(start + ms(2));
                    start
                })
                .collect::<Vec<_>>()
        };
        let a = starts(1);
        assert_eq!(a, starts(1));
        assert_ne!(a, starts(2));
        // 2000 gaps of mean 100 ms plus 1999 stalls of 2 ms: the mean gap within 10%.
        let span = a[1999] - a[0];
        let mean_gap = (span - ms(2) * 1999).as_secs_f64() / 1999.0;
        assert!((0.09..0.11).contains(&mean_gap), "{mean_gap}");
    }
}
