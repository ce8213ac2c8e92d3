//! Estimating a data sender's TSval clock rate.
//!
//! Vulture Alg. 1 needs the sending interval `psi` of two data segments as a time, but all the
//! router sees is their TSvals (RFC 7323), which tick at a rate the sender chose: Linux 1 kHz,
//! Linux with `tcp_usec_ts` 1 MHz, other stacks 10 Hz ... 1024 Hz. The engine feeds each data
//! segment's (router arrival time, TSval) into a [`TsClockEstimator`] and hands the result to the
//! controllers as [`TsClock`] (`FlowContext::sender_clock`).
//!
//! # Method
//! * The first sample is the origin. TSvals are unwrapped with 32-bit serial arithmetic into a
//!   tick count since the origin.
//! * Once the baseline (arrival − origin arrival) reaches 250 ms, the raw rate ticks / baseline
//!   is snapped to a known rate ([`KNOWN_RATES`]) within 30 % (ratio), otherwise the rounded raw
//!   rate is used. The estimate is refined at baselines of 2 s and 8 s with a 10 % tolerance; the
//!   latest estimate wins and the estimator then stops working (`observe` is a no-op).
//! * Queueing delay makes one sample pair's raw rate off by up to (delay change) / baseline:
//!   100 ms of queue at the 2 s step is 5 %, enough to read a 1 kHz clock as 1050 Hz, nearer to
//!   1024 Hz. So the snap considers first the known rates that *explain* the samples within a
//!   noise bound of 100 ms (the sender span `ticks / k` differs from the arrival span by at most
//!   100 ms plus two ticks) and takes the nearest of those; of the two near-twin pairs (1000/1024 Hz and
//!   250/256 Hz, 2.4 % apart) the common rate wins whenever it explains the samples too. Only if
//!   no known rate within tolerance explains the samples does the plain nearest one win. A 1024 Hz
//!   sender under heavy queueing may thus read as 1000 Hz at 2 s and be corrected at 8 s (where
//!   the bound is 1.25 %); either way the error is 2.4 %, 0.5 ms on Vulture's 20 ms PSI.
//! * A refinement whose raw rate fits no known rate within 10 % keeps the previous known-rate
//!   estimate if the raw rate is still within 30 % of it: a queue building up in slow start
//!   (370 ms of queue at the 2 s step reads 1 kHz as 816 Hz) must not replace a good estimate
//!   with a wrong off-list one. Only clocks off the list by more than that get the rounded raw rate.
//! * Before 250 ms there is no estimate. The 250 ms estimate is coarse under heavy jitter (80 ms
//!   of queueing on 250 ms is 30 %: it may fall back to the rounded raw rate); 2 s and 8 s fix it.
//!
//! # Unusable clocks
//! A TSval going backwards by more than 2^30 ticks (a reset or a random per-segment clock), or no
//! TSval progress at all over a baseline of 1 s or more (a stalled or constant clock), makes the
//! estimator give up for good: [`TsClockEstimator::clock`] stays `None` (and
//! [`TsClockEstimator::is_unusable`] turns true), so controllers that need the clock leave the
//! flow alone. Small backward steps (reordered segments) are ignored.

use crate::time::{wrapping_diff, Duration, Instant};

/// TSval rates senders are known to use, in Hz.
pub const KNOWN_RATES: [u32; 9] = [10, 100, 128, 250, 256, 500, 1000, 1024, 1_000_000];

/// A sender's TSval clock: how many TSval ticks make one second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TsClock {
    ticks_per_second: u32,
}

impl TsClock {
    /// A clock of `ticks_per_second` Hz (0 is taken as 1).
    pub const fn from_hz(ticks_per_second: u32) -> TsClock {
        TsClock {
            ticks_per_second: if ticks_per_second == 0 {
                1
            } else {
                ticks_per_second
            },
        }
    }
    /// The estimated TSval rate, ticks per second.
    pub const fn hz(&self) -> u32 {
        self.ticks_per_second
    }
    /// Converts a signed TSval difference into microseconds.
    pub fn ticks_to_micros(&self, ticks: i64) -> i64 {
        ticks.saturating_mul(1_000_000) / i64::from(self.ticks_per_second)
    }
    /// Converts a signed TSval difference into microseconds, rounded to nearest (ties away from
    /// zero) instead of truncated.
    pub fn ticks_to_micros_rounded(&self, ticks: i64) -> i64 {
        let hz = i128::from(self.ticks_per_second);
        let num = i128::from(ticks) * 1_000_000;
        let q = (num.abs() + hz / 2) / hz;
        let q = if num < 0 { -q } else { q };
        q.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }
}

/// Baselines at which the estimate is (re)computed, with the snap tolerance used at each.
const STEPS: [(Duration, f64); 3] = [
    (Duration::from_millis(250), 0.30),
    (Duration::from_secs(2), 0.10),
    (Duration::from_secs(8), 0.10),
];
/// No TSval progress over this baseline means a stalled clock.
const STALL: Duration = Duration::from_secs(1);
/// A backward TSval step larger than this means a clock the estimator cannot use.
const MAX_BACKWARD: i32 = 1 << 30;
/// Queueing delay variation the estimate must tolerate on the arrival side.
const NOISE: Duration = Duration::from_millis(100);
/// Known rates 2.4 % apart, as (rare, common): when the samples fit both within the noise bound,
/// the common one wins (misreading one for the other costs Vulture 0.5 ms on a 20 ms PSI).
const TWINS: [(u32, u32); 2] = [(1024, 1000), (256, 250)];

/// Learns a sender's TSval rate from (arrival time, TSval) pairs. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct TsClockEstimator {
    /// Arrival of the first sample.
    origin: Instant,
    /// Unwrapped TSval progress since the first sample.
    ticks: u64,
    last_tsval: u32,
    /// Current estimate in Hz, 0 for none.
    estimate_hz: u32,
    /// Index into `STEPS` of the next step to run; `STEPS.len()` when done.
    next_step: u8,
    started: bool,
    unusable: bool,
}

impl TsClockEstimator {
    /// An estimator that has seen no samples yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one data segment's router arrival time and TSval.
    pub fn observe(&mut self, arrival: Instant, tsval: u32) {
        if self.unusable || usize::from(self.next_step) >= STEPS.len() {
            return;
        }
        if !self.started {
            *self = TsClockEstimator::new();
            self.started = true;
            self.origin = arrival;
            self.last_tsval = tsval;
            return;
        }
        let step = wrapping_diff(tsval, self.last_tsval);
        if step < -MAX_BACKWARD {
            self.unusable = true;
            self.estimate_hz = 0;
            return;
        }
        if step < 0 {
            // Reordered segment: its TSval adds nothing.
            return;
        }
        self.ticks += step as u64;
        self.last_tsval = tsval;
        let baseline = arrival.saturating_since(self.origin);
        if self.ticks == 0 && baseline >= STALL {
            self.unusable = true;
            self.estimate_hz = 0;
            return;
        }
        let (step_at, tolerance) = STEPS[usize::from(self.next_step)];
        if baseline >= step_at {
            self.run_step(baseline, tolerance);
            self.next_step += 1;
        }
    }

    /// The current estimate; `None` before a 250 ms baseline and for unusable clocks.
    pub fn clock(&self) -> Option<TsClock> {
        (self.estimate_hz != 0 && !self.unusable).then(|| TsClock::from_hz(self.estimate_hz))
    }

    /// The clock went backwards by more than 2^30 ticks or stalled: no estimate will ever come.
    pub fn is_unusable(&self) -> bool {
        self.unusable
    }

    /// All refinement steps are done (or the clock is unusable): `observe` no longer does anything,
    /// and the caller may stop feeding samples.
    pub fn is_final(&self) -> bool {
        self.unusable || usize::from(self.next_step) >= STEPS.len()
    }

    fn run_step(&mut self, baseline: Duration, tolerance: f64) {
        let secs = baseline.as_secs_f64();
        let raw = self.ticks as f64 / secs;
        if raw < 0.5 {
            // No progress yet (a very slow clock): wait for the next step.
            return;
        }
        let ratio = |k: u32| {
            let r = raw / f64::from(k);
            if r >= 1.0 {
                r
            } else {
                1.0 / r
            }
        };
        // Rate k explains the samples if the sender span it implies differs from the arrival span
        // by no more than the queueing noise bound (plus two ticks of TSval quantization).
        let consistent = |k: u32| {
            let sender_span = self.ticks as f64 / f64::from(k);
            (sender_span - secs).abs() <= NOISE.as_secs_f64() + 2.0 / f64::from(k)
        };
        let nearest = |filter: &dyn Fn(u32) -> bool| {
            KNOWN_RATES
                .iter()
                .copied()
                .filter(|&k| ratio(k) <= 1.0 + tolerance && filter(k))
                .min_by(|&a, &b| ratio(a).total_cmp(&ratio(b)))
        };
        let chosen = match nearest(&consistent) {
            Some(k) => Some(
                TWINS
                    .iter()
                    .find(|&&(rare, common)| k == rare && consistent(common))
                    .map_or(k, |&(_, common)| common),
            ),
            None => nearest(&|_| true),
        };
        let previous = self.estimate_hz;
        self.estimate_hz = match chosen {
            Some(k) => k,
            // A refinement that fits no known rate, while the known rate found before is still
            // within the first step's tolerance, is queueing (a queue building up during slow
            // start stretches the arrival span) rather than a different clock: keep it.
            None if KNOWN_RATES.contains(&previous) && ratio(previous) <= 1.0 + STEPS[0].1 => previous,
            None => raw.round().min(f64::from(u32::MAX)) as u32,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic xorshift for jitter.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A sender sending one segment every `gap_us`, TSval = base + floor(send_time * hz); arrivals
    /// get FIFO-consistent queueing jitter of up to `jitter_us` (arrival never before the previous).
    struct Sender {
        hz: u64,
        base: u32,
        gap_us: u64,
        jitter_us: u64,
        rng: Rng,
        send_us: u64,
        last_arrival: u64,
    }

    impl Sender {
        fn new(hz: u64, base: u32, jitter_us: u64, seed: u64) -> Sender {
            Sender {
                hz,
                base,
                gap_us: 1000,
                jitter_us,
                rng: Rng(seed),
                send_us: 0,
                last_arrival: 0,
            }
        }
        /// Next (arrival, tsval).
        fn next(&mut self) -> (Instant, u32) {
            let tsval = self
                .base
                .wrapping_add((self.send_us as u128 * self.hz as u128 / 1_000_000) as u32);
            let j = if self.jitter_us == 0 {
                0
            } else {
                self.rng.below(self.jitter_us + 1)
            };
            let arrival = (self.send_us + 30_000 + j).max(self.last_arrival);
            self.last_arrival = arrival;
            self.send_us += self.gap_us;
            (Instant::from_micros(arrival), tsval)
        }
    }

    /// Runs the sender until the baseline (arrival − first arrival) reaches `until_ms`.
    fn run(est: &mut TsClockEstimator, s: &mut Sender, until_ms: u64) {
        loop {
            let (a, t) = s.next();
            est.observe(a, t);
            if a.as_micros() >= 30_000 + until_ms * 1000 {
                break;
            }
        }
    }

    fn check(hz: u32, jitter_ms: u64, seed: u64) {
        let mut s = Sender::new(u64::from(hz), 12345, jitter_ms * 1000, seed);
        let mut est = TsClockEstimator::new();
        run(&mut est, &mut s, 2_100);
        assert_eq!(
            est.clock(),
            Some(TsClock::from_hz(hz)),
            "{hz} Hz at 2 s, jitter {jitter_ms} ms"
        );
        run(&mut est, &mut s, 8_100);
        assert_eq!(
            est.clock(),
            Some(TsClock::from_hz(hz)),
            "{hz} Hz at 8 s, jitter {jitter_ms} ms"
        );
        assert!(est.is_final());
    }

    #[test]
    fn jittered_senders_are_identified_at_2s_and_8s() {
        for seed in 1..=20u64 {
            for hz in [1000, 1_000_000, 100, 250, 10, 128, 500] {
                check(hz, 80, seed * 7919);
            }
        }
    }

    #[test]
    fn twin_rates_are_told_apart_by_8s() {
        for seed in 1..=20u64 {
            for hz in [1024u32, 256] {
                let mut s = Sender::new(u64::from(hz), 99, 80_000, seed);
                let mut est = TsClockEstimator::new();
                run(&mut est, &mut s, 2_100);
                // At 2 s the common twin may still win (80 ms of queueing is 4 %).
                let twin = if hz == 1024 { 1000 } else { 250 };
                let at_2s = est.clock().unwrap().hz();
                assert!(at_2s == hz || at_2s == twin, "{hz} Hz read as {at_2s} at 2 s");
                run(&mut est, &mut s, 8_100);
                assert_eq!(est.clock(), Some(TsClock::from_hz(hz)), "{hz} Hz at 8 s");
            }
        }
    }

    #[test]
    fn first_estimate_at_250ms_is_close() {
        for seed in 1..=20u64 {
            for hz in [1000u32, 1_000_000, 100, 250] {
                let mut s = Sender::new(u64::from(hz), 7, 20_000, seed);
                let mut est = TsClockEstimator::new();
                run(&mut est, &mut s, 300);
                let got = est.clock().expect("estimate after 250 ms").hz();
                let ratio = f64::from(got) / f64::from(hz);
                assert!((0.95..=1.05).contains(&ratio), "{hz} Hz estimated as {got}");
            }
        }
        // Without jitter the first estimate is exact.
        for hz in [1000u32, 1_000_000, 100, 250, 10, 128, 500] {
            let mut s = Sender::new(u64::from(hz), 7, 0, 1);
            let mut est = TsClockEstimator::new();
            run(&mut est, &mut s, 300);
            assert_eq!(est.clock(), Some(TsClock::from_hz(hz)));
        }
    }

    #[test]
    fn none_before_250ms() {
        let mut s = Sender::new(1000, 0, 0, 1);
        let mut est = TsClockEstimator::new();
        run(&mut est, &mut s, 249);
        assert_eq!(est.clock(), None);
        run(&mut est, &mut s, 250);
        assert_eq!(est.clock(), Some(TsClock::from_hz(1000)));
    }

    #[test]
    fn wraparound_across_2_pow_32() {
        // 1 MHz wraps 2^32 after ~71 min; start 0.5 s before the wrap.
        let mut s = Sender::new(1_000_000, u32::MAX - 500_000, 80_000, 3);
        let mut est = TsClockEstimator::new();
        run(&mut est, &mut s, 8_100);
        assert_eq!(est.clock(), Some(TsClock::from_hz(1_000_000)));
        // 1 kHz starting just below the wrap.
        let mut s = Sender::new(1000, u32::MAX - 100, 80_000, 4);
        let mut est = TsClockEstimator::new();
        run(&mut est, &mut s, 2_100);
        assert_eq!(est.clock(), Some(TsClock::from_hz(1000)));
    }

    #[test]
    fn hundred_ms_of_queueing_noise_does_not_turn_1khz_into_1024hz_at_2s() {
        // Worst case for a two-point estimate: the origin sample sat 100 ms in a queue, the sample
        // at the 2 s step did not (raw rate 2.1 s of ticks / 2 s = 1050 Hz, nearest 1024 Hz).
        let mut est = TsClockEstimator::new();
        let mut rng = Rng(99);
        est.observe(Instant::from_micros(100_000), 0);
        let mut t_send = 1000u64;
        loop {
            let delay = if t_send > 1_900_000 { 0 } else { rng.below(100_001) };
            let arrival = t_send + delay;
            est.observe(Instant::from_micros(arrival), (t_send / 1000) as u32);
            if arrival >= 2_100_000 {
                break;
            }
            t_send += 1000;
        }
        assert_eq!(est.clock(), Some(TsClock::from_hz(1000)));
    }

    #[test]
    fn a_queue_building_up_does_not_replace_a_good_estimate() {
        // 1 kHz; no queue for the first 300 ms, then the queue grows by 20 % of the elapsed time
        // (370 ms at 2 s): raw 2 s rate ~830 Hz, off every known rate by more than 10 %.
        let mut est = TsClockEstimator::new();
        let mut t_send = 0u64;
        while t_send <= 2_200_000 {
            let queue = t_send.saturating_sub(300_000) / 5;
            est.observe(Instant::from_micros(t_send + queue), (t_send / 1000) as u32);
            t_send += 1000;
            if t_send == 301_000 {
                assert_eq!(est.clock(), Some(TsClock::from_hz(1000)));
            }
        }
        assert_eq!(est.clock(), Some(TsClock::from_hz(1000)));
    }

    #[test]
    fn off_list_rates_use_the_rounded_raw_rate() {
        let mut s = Sender::new(3000, 0, 0, 1);
        let mut est = TsClockEstimator::new();
        run(&mut est, &mut s, 8_100);
        assert_eq!(est.clock(), Some(TsClock::from_hz(3000)));
    }

    #[test]
    fn large_backward_step_makes_the_clock_unusable() {
        let mut est = TsClockEstimator::new();
        est.observe(Instant::from_millis(0), 2_000_000_000);
        est.observe(Instant::from_millis(10), 2_000_000_010);
        // A small backward step (reordering) is ignored.
        est.observe(Instant::from_millis(11), 2_000_000_005);
        assert!(!est.is_unusable());
        est.observe(
            Instant::from_millis(12),
            2_000_000_010u32.wrapping_sub((1 << 30) + 1),
        );
        assert!(est.is_unusable());
        for i in 0..2000u32 {
            est.observe(Instant::from_millis(20 + u64::from(i)), 2_000_000_020 + i);
        }
        assert_eq!(est.clock(), None);
    }

    #[test]
    fn stalled_clock_is_unusable() {
        let mut est = TsClockEstimator::new();
        for ms in 0..1500u64 {
            est.observe(Instant::from_millis(ms), 42);
        }
        assert!(est.is_unusable());
        assert_eq!(est.clock(), None);
    }

    #[test]
    fn ticks_to_micros_conversions() {
        let c = TsClock::from_hz(1024);
        assert_eq!(c.ticks_to_micros(1), 976);
        assert_eq!(c.ticks_to_micros_rounded(1), 977);
        assert_eq!(c.ticks_to_micros_rounded(-1), -977);
        assert_eq!(TsClock::from_hz(1000).ticks_to_micros_rounded(20), 20_000);
    }
}
