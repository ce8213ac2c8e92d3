//! Round-trip time as the router sees it.
//!
//! A router in the middle of a connection sees two halves of every round trip:
//! - the far half, router -> data sender -> router: an ACK leaves with the receiver's TSval `T`
//!   and the first data segment echoing `T` in its TSecr comes back;
//! - the near half, router -> data receiver -> router: a data segment ending at sequence `S` is
//!   forwarded and the receiver's first ACK covering `S` comes back.
//!
//! Each half keeps one probe in flight (Karn-style: a new probe only after the previous one was
//! answered or given up) and an RFC 6298 style smoothed value; the RTT is their sum.
//!
//! Without timestamps (Windows clients) the far half is measured by *window release*: an ACK
//! forwarded at `t0` moves the advertised right edge from `E` onwards, and the first data segment
//! ending beyond `E` arrives at `t1`. No byte beyond `E` could have been sent before that ACK
//! reached the sender, so `t1 - t0` is an upper bound of the far half, and exact while the sender
//! is limited by the (clamped) window, which is the state Slipstream keeps background flows in.
//! Linux's receive-side `tcp_rcv_rtt_update` (`tcp_rcv_rtt_measure`) uses the same idea. Users
//! filter the samples (minimum, low percentiles); a single one is never acted on.

use slipstream_control::time::{seq_lt, wrapping_diff, Duration, Instant};

/// A probe older than this is abandoned (its answer was lost or never comes).
const PROBE_GIVE_UP: Duration = Duration::from_secs(3);

/// Probes in flight per half: several per RTT, so a round of household control has samples
/// from every flow (one probe per RTT gave one noisy sample per flow and round).
const PROBES: usize = 6;

/// Queueing delay is read from the smallest of this many latest samples of each half, so one
/// late packet (a delayed ACK, a burst, a scheduling hiccup) never reads as a standing queue.
/// With several probes per RTT this spans less than a round trip.
const RECENT: usize = 4;

/// One half of the round trip. Times are kept as `u32` microseconds (71 minutes is plenty for
/// an RTT) to keep the flow entry small.
#[derive(Clone, Copy, Debug, Default)]
struct HalfPath {
    /// (marker, when the probe was sent), oldest first: markers increase in serial arithmetic
    /// (TSvals, sequence numbers), so answers come in order.
    probes: [(u32, u32); PROBES],
    /// Probes in use, from `probes[0]`.
    len: u8,
    smoothed_us: Option<u32>,
    /// The latest samples, a ring written at `next_recent`; unfilled slots are `u32::MAX`.
    recent_us: [u32; RECENT],
    next_recent: u8,
    min_us: u32,
}

/// The engine's clock as wrapping `u32` microseconds (probes live for at most a few seconds).
fn clock_us(now: Instant) -> u32 {
    now.as_micros() as u32
}

impl HalfPath {
    /// Starts a probe for `marker` unless it does not advance past the newest one or all probes
    /// are out (then the oldest is kept: Karn-style, answers stay unambiguous).
    fn start(&mut self, marker: u32, now: Instant) {
        let t = clock_us(now);
        // Abandon probes that were never answered.
        while self.len > 0 && t.wrapping_sub(self.probes[0].1) > PROBE_GIVE_UP.as_micros() as u32 {
            self.pop_front();
        }
        let len = usize::from(self.len);
        if len > 0 && wrapping_diff(marker, self.probes[len - 1].0) <= 0 {
            return;
        }
        if len < PROBES {
            self.probes[len] = (marker, t);
            self.len += 1;
        }
    }

    fn pop_front(&mut self) -> (u32, u32) {
        let first = self.probes[0];
        self.probes.copy_within(1.., 0);
        self.len -= 1;
        first
    }

    /// `reached` tells whether the answer covers a probe's marker; the newest covered probe
    /// gives the sample (older ones were answered late by the same packet), which is returned.
    fn answer(&mut self, now: Instant, reached: impl Fn(u32) -> bool) -> Option<Duration> {
        let mut newest = None;
        while self.len > 0 && reached(self.probes[0].0) {
            newest = Some(self.pop_front());
        }
        let (_, sent) = newest?;
        let sample = clock_us(now).wrapping_sub(sent);
        if sample > PROBE_GIVE_UP.as_micros() as u32 {
            return None;
        }
        self.record_recent(sample);
        self.smoothed_us = Some(match self.smoothed_us {
            None => {
                self.min_us = sample;
                sample
            }
            Some(s) => ((u64::from(s) * 7 + u64::from(sample)) / 8) as u32,
        });
        self.min_us = self.min_us.min(sample);
        Some(Duration::from_micros(u64::from(sample)))
    }

    fn record_recent(&mut self, sample: u32) {
        if self.smoothed_us.is_none() {
            self.recent_us = [u32::MAX; RECENT];
        }
        self.recent_us[usize::from(self.next_recent)] = sample;
        self.next_recent = ((usize::from(self.next_recent) + 1) % RECENT) as u8;
    }

    fn smoothed(&self) -> Option<Duration> {
        self.smoothed_us.map(|us| Duration::from_micros(u64::from(us)))
    }

    /// The excess of the smallest of the latest samples over the smallest one ever: a queue
    /// that stood through several samples, not one late packet.
    fn excess(&self) -> Option<Duration> {
        self.smoothed_us?;
        let recent = self.recent_us.iter().copied().min().unwrap_or(self.min_us);
        Some(Duration::from_micros(u64::from(
            recent.saturating_sub(self.min_us),
        )))
    }
}

/// Router-measured RTT of one flow.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RttEstimator {
    far: HalfPath,
    near: HalfPath,
    /// The far half's probe is a released right edge (no timestamps), not a TSval.
    far_by_release: bool,
}

impl RttEstimator {
    /// The data receiver's ACK with timestamp `tsval` and cumulative `ack` is forwarded; returns
    /// a new near-half sample if it answers one.
    pub(crate) fn on_ack_forwarded(
        &mut self,
        now: Instant,
        tsval: Option<u32>,
        ack: u32,
    ) -> Option<Duration> {
        if let Some(tsval) = tsval {
            self.far_by_release = false;
            self.far.start(tsval, now);
        }
        self.near.answer(now, |seq_end| !seq_lt(ack, seq_end))
    }

    /// The ACK forwarded now moved the advertised right edge beyond `previous_edge`: without
    /// timestamps, the far half is probed by the first data past that edge (see the module docs).
    pub(crate) fn on_window_released(&mut self, now: Instant, previous_edge: u32, has_timestamps: bool) {
        if !has_timestamps {
            self.far_by_release = true;
            self.far.start(previous_edge, now);
        }
    }

    /// A data segment ending at `seq_end` (exclusive) with TSecr `tsecr` arrives from the sender;
    /// returns a new far-half sample if it answers one.
    pub(crate) fn on_data_arrived(
        &mut self,
        now: Instant,
        tsecr: Option<u32>,
        seq_end: u32,
    ) -> Option<Duration> {
        let sample = match tsecr {
            Some(tsecr) if !self.far_by_release => {
                self.far.answer(now, |tsval| wrapping_diff(tsecr, tsval) >= 0)
            }
            _ if self.far_by_release => self.far.answer(now, |edge| seq_lt(edge, seq_end)),
            _ => None,
        };
        self.near.start(seq_end, now);
        sample
    }

    /// The handshake's samples of the two halves (the SYN or SYN-ACK that crossed to each end
    /// and the answer that came back), each half's first unless its data gave one already. An
    /// upload's near half is the one that crosses the access link: seeded, a flow has its round
    /// trip (and a base) from the start, not only the LAN half (0.2 ms) until its data's first
    /// ACK, which all of 48 uploads started together measured behind the queue their initial
    /// windows built.
    pub(crate) fn on_handshake(&mut self, far: Option<Duration>, near: Option<Duration>) {
        for (half, sample) in [(&mut self.far, far), (&mut self.near, near)] {
            let Some(sample) = sample else { continue };
            let us = sample.as_micros().min(u128::from(u32::MAX)) as u32;
            if half.smoothed_us.is_none() {
                half.record_recent(us);
                half.smoothed_us = Some(us);
                half.min_us = us;
            }
        }
    }

    /// Smoothed far and near halves.
    pub(crate) fn halves(&self) -> (Option<Duration>, Option<Duration>) {
        (self.far.smoothed(), self.near.smoothed())
    }

    /// Smoothed RTT (far + near half), once both halves have a sample.
    pub(crate) fn rtt(&self) -> Option<Duration> {
        Some(self.far.smoothed()? + self.near.smoothed()?)
    }

    /// The path without queues: the smallest samples of each half.
    /// (An all-time minimum: a route change to a longer path would read as queueing; flows
    /// are rarely long enough for that to matter, and the error only makes a controller more
    /// cautious.)
    pub(crate) fn base_rtt(&self) -> Option<Duration> {
        self.far.smoothed_us?;
        self.near.smoothed_us?;
        Some(Duration::from_micros(
            u64::from(self.far.min_us) + u64::from(self.near.min_us),
        ))
    }

    /// Queueing delay now: for each half, the smallest of its latest few samples over its
    /// smallest sample ever (a filtered value; one late sample does not move it).
    pub(crate) fn queue_delay(&self) -> Option<Duration> {
        Some(self.far.excess()? + self.near.excess()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    #[test]
    fn sums_far_and_near_halves() {
        let mut r = RttEstimator::default();
        // Data ending at 1000 passes the router at t=0; the receiver's ACK comes back 2 ms later.
        r.on_data_arrived(ms(0), Some(50), 1000);
        r.on_ack_forwarded(ms(2), Some(700), 1000);
        assert_eq!(r.rtt(), None, "far half not measured yet");
        // Data echoing TSval 700 arrives 100 ms after that ACK left.
        r.on_data_arrived(ms(102), Some(700), 2448);
        assert_eq!(r.rtt(), Some(Duration::from_millis(102)));
    }

    #[test]
    fn the_handshake_seeds_both_halves() {
        // An upload: the far half is the LAN host's (0.2 ms), the near half the server's.
        let mut r = RttEstimator::default();
        r.on_handshake(Some(Duration::from_micros(200)), Some(Duration::from_millis(100)));
        assert_eq!(r.rtt(), Some(Duration::from_micros(100_200)));
        // The first data, behind the queue the flows' initial windows built: the base stays
        // the handshake's.
        for i in 0..4 {
            let end = 1000 * (i + 1);
            r.on_data_arrived(ms(u64::from(i)), Some(50), end);
            r.on_ack_forwarded(ms(220 + u64::from(i)), Some(700), end);
        }
        assert_eq!(r.base_rtt(), Some(Duration::from_micros(100_200)));
        assert_eq!(r.queue_delay(), Some(Duration::from_millis(120)));
        // A half the data measured first keeps its own sample.
        let mut r = RttEstimator::default();
        r.on_data_arrived(ms(0), Some(50), 1000);
        r.on_ack_forwarded(ms(2), Some(700), 1000);
        r.on_handshake(Some(Duration::from_millis(100)), Some(Duration::from_millis(1)));
        assert_eq!(
            r.halves(),
            (Some(Duration::from_millis(100)), Some(Duration::from_millis(2)))
        );
    }

    #[test]
    fn several_probes_and_smoothing() {
        let mut r = RttEstimator::default();
        r.on_data_arrived(ms(0), None, 100);
        r.on_data_arrived(ms(5), None, 200); // a second probe
        r.on_ack_forwarded(ms(10), Some(1), 100); // answers probe 100 after 10 ms
        r.on_ack_forwarded(ms(11), Some(1), 150); // covers nothing new
        assert_eq!(r.near.len, 1);
        r.on_ack_forwarded(ms(11), Some(1), 200); // probe 200: 6 ms -> (10*7+6)/8 = 9.5 ms
        assert_eq!(r.near.smoothed_us, Some(9500));
        r.near.smoothed_us = Some(10_000);
        r.on_data_arrived(ms(110), Some(1), 300); // far: 100 ms
        assert_eq!(r.rtt(), Some(Duration::from_millis(110)));
        r.on_ack_forwarded(ms(128), Some(2), 300); // near sample: 18 ms -> (10*7+18)/8 = 11 ms
        r.on_data_arrived(ms(228), Some(2), 400); // far sample 100 again
        assert_eq!(r.rtt(), Some(Duration::from_millis(111)));
    }

    /// One round trip of the test path: data ending at `seq` passes at `t`, the receiver's ACK
    /// answers after `near` ms with TSval `ts`, and data echoing it arrives `far` ms later.
    fn round(r: &mut RttEstimator, t: u64, seq: u32, ts: u32, near: u64, far: u64) {
        r.on_data_arrived(ms(t), Some(ts - 1), seq);
        r.on_ack_forwarded(ms(t + near), Some(ts), seq);
        r.on_data_arrived(ms(t + near + far), Some(ts), seq + 100);
    }

    #[test]
    fn queue_delay_is_the_excess_over_the_minimum() {
        let mut r = RttEstimator::default();
        assert_eq!(r.queue_delay(), None);
        round(&mut r, 0, 100, 1, 2, 100);
        assert_eq!(r.queue_delay(), Some(Duration::ZERO));
        // A queue that stands: near 3 ms (+1), far 140 ms (+40), sample after sample.
        for i in 0..4 {
            round(
                &mut r,
                1000 * (i + 1),
                1000 * (i as u32 + 1),
                i as u32 + 2,
                3,
                140,
            );
        }
        assert_eq!(r.queue_delay(), Some(Duration::from_millis(41)));
        assert_eq!(r.base_rtt(), Some(Duration::from_millis(102)));
        // It drains: one sample at the base is enough to read no queue.
        round(&mut r, 9000, 9000, 9, 2, 100);
        assert_eq!(r.queue_delay(), Some(Duration::ZERO));
    }

    /// The delay guard must never act on one raw sample: a single late ACK and a single late
    /// data segment read as no queue (the latest samples alone read 28 + 50 ms here).
    #[test]
    fn one_late_sample_is_not_a_queue() {
        let mut r = RttEstimator::default();
        for i in 0..4u32 {
            round(&mut r, 1000 * u64::from(i), 1000 * (i + 1), i + 2, 2, 100);
        }
        round(&mut r, 5000, 6000, 7, 30, 150);
        assert_eq!(r.queue_delay(), Some(Duration::ZERO));
        assert_eq!(
            r.halves(),
            (
                Some(Duration::from_micros(106_250)),
                Some(Duration::from_micros(5_500))
            )
        );
    }

    #[test]
    fn far_half_by_window_release_without_timestamps() {
        let mut r = RttEstimator::default();
        // Data up to 10000 arrived; the receiver's ACK releases the window past edge 10000 at t=0.
        assert_eq!(r.on_data_arrived(ms(0), None, 10_000), None);
        r.on_window_released(ms(1), 10_000, false);
        // Data at or below the old edge answers nothing.
        assert_eq!(r.on_data_arrived(ms(50), None, 10_000), None);
        // The first segment past it, 80 ms after the release: far half 80 ms.
        assert_eq!(
            r.on_data_arrived(ms(81), None, 11_448),
            Some(Duration::from_millis(80))
        );
        assert_eq!(r.halves().0, Some(Duration::from_millis(80)));
    }

    #[test]
    fn stale_probe_is_replaced() {
        let mut r = RttEstimator::default();
        r.on_data_arrived(ms(0), None, 100);
        r.on_data_arrived(ms(5000), None, 200);
        r.on_ack_forwarded(ms(5004), None, 150); // does not cover 200
        r.on_ack_forwarded(ms(5007), None, 200);
        r.far.smoothed_us = Some(0);
        assert_eq!(
            r.rtt(),
            Some(Duration::from_millis(7)),
            "the probe of 100 was abandoned"
        );
    }
}
