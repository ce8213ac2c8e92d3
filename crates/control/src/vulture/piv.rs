//! Vulture Alg. 1: packet interval variation (PIV) measurement with the PSI filter.
//!
//! This file exists to turn the data segments of a flow into PIVs: for a pair of segments sent at
//! least PSI apart (by their TSvals), how much longer (positive) or shorter (negative) the pair
//! arrived apart at the router than it was sent apart. A growing bottleneck queue stretches the
//! pairs, a draining one compresses them (Vulture Sec. 0.3.2).
//!
//! # Alg. 1, as the pseudo-code says
//! On each data segment with timestamps: `psi = packet.tsval − head.tsval` (converted to time with
//! the sender's TSval clock); if `psi >= PSI`, emit `piv = pai − psi` with
//! `pai = packet.arrival − head.arrival`, and dequeue the head; the new segment itself is **not**
//! enqueued. Otherwise enqueue the new segment. Segments without timestamps are ignored.
//!
//! # Bounded queue
//! The paper's packet queue is unbounded; a flow entry must stay under 1 KiB, so it is a fixed
//! ring of [`PIV_RING`] entries of (TSval, arrival as `u32` microseconds, i.e. modulo 2^32 µs,
//! wrapping every ~71 minutes; differences are taken with wrapping arithmetic and are exact for
//! pairs under ~35 minutes apart). When the ring is full, a segment that does not pair with the
//! head is not recorded (counted in [`PivMeter::ring_drops`]). Every PIV produced is still exact —
//! its two segments' times are the real ones — only the sampling thins out at high packet rates
//! (the ring covers the first 16 segments of each PSI span instead of all of them). If the flow
//! goes silent for more than [`STALE_GAP`], the ring is cleared so a wrapped arrival difference
//! can never pair.

use crate::time::{wrapping_diff, Duration, Instant};
use crate::ts_clock::TsClock;

/// Capacity of the packet queue of Alg. 1.
pub const PIV_RING: usize = 16;

/// A silence after which queued segments are forgotten (well below the 2^31 µs wrap horizon).
pub(super) const STALE_GAP: Duration = Duration::from_secs(30 * 60);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct QueuedPacket {
    tsval: u32,
    /// Arrival in µs, modulo 2^32.
    arrival: u32,
}

/// Alg. 1 state for one flow: the packet queue as a fixed ring.
#[derive(Clone, Debug, Default)]
pub(crate) struct PivMeter {
    ring: [QueuedPacket; PIV_RING],
    head: u8,
    len: u8,
    /// Latest arrival seen, for the stale-queue check.
    last_arrival: Instant,
    ring_drops: u32,
}

impl PivMeter {
    /// Runs Alg. 1 for one data segment with timestamps. `psi_threshold` is PSI. Returns the PIV in
    /// microseconds (`pai − psi`, unrounded) if the segment paired with the queue head.
    pub(crate) fn on_packet(
        &mut self,
        arrival: Instant,
        tsval: u32,
        clock: TsClock,
        psi_threshold: Duration,
    ) -> Option<i64> {
        if self.len > 0 && arrival.saturating_since(self.last_arrival) >= STALE_GAP {
            self.len = 0;
        }
        self.last_arrival = self.last_arrival.max(arrival);
        // The low 32 bits of the arrival in µs: differences modulo 2^32 are exact.
        let arrival_rel = arrival.as_micros() as u32;
        if self.len > 0 {
            let head = self.ring[usize::from(self.head)];
            let psi = clock.ticks_to_micros(i64::from(wrapping_diff(tsval, head.tsval)));
            if psi >= psi_threshold.as_micros() as i64 {
                let pai = i64::from(arrival_rel.wrapping_sub(head.arrival) as i32);
                self.head = ((usize::from(self.head) + 1) % PIV_RING) as u8;
                self.len -= 1;
                return Some(pai - psi);
            }
        }
        if usize::from(self.len) == PIV_RING {
            self.ring_drops = self.ring_drops.saturating_add(1);
        } else {
            let tail = (usize::from(self.head) + usize::from(self.len)) % PIV_RING;
            self.ring[tail] = QueuedPacket {
                tsval,
                arrival: arrival_rel,
            };
            self.len += 1;
        }
        None
    }

    /// Segments that found the ring full and were not recorded.
    pub(crate) fn ring_drops(&self) -> u32 {
        self.ring_drops
    }

    #[cfg(test)]
    fn queued(&self) -> Vec<(u32, u32)> {
        (0..usize::from(self.len))
            .map(|i| {
                let p = self.ring[(usize::from(self.head) + i) % PIV_RING];
                (p.tsval, p.arrival)
            })
            .collect()
    }
}

/// Rounds a PIV (µs) to the nearest multiple of `resolution` (ties away from zero), the paper's
/// integer jiffies; a zero resolution means no rounding.
pub fn round_piv(piv_micros: i64, resolution: Duration) -> i64 {
    let res = resolution.as_micros() as i64;
    if res <= 0 {
        return piv_micros;
    }
    let magnitude = (piv_micros.unsigned_abs().saturating_add(res as u64 / 2) / res as u64) as i64 * res;
    if piv_micros < 0 {
        -magnitude
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KHZ: TsClock = TsClock::from_hz(1000);
    const PSI: Duration = Duration::from_millis(20);

    fn feed(m: &mut PivMeter, tsval: u32, arrival_ms: u64) -> Option<i64> {
        m.on_packet(Instant::from_millis(arrival_ms), tsval, KHZ, PSI)
    }

    #[test]
    fn alg1_hand_computed() {
        // (tsval, arrival ms) = (0,0), (10,10), (20,25), (25,31), (40,50), 1 kHz clock, PSI 20 ms.
        let mut m = PivMeter::default();
        assert_eq!(feed(&mut m, 0, 0), None); // queue [(0,0)]
        assert_eq!(feed(&mut m, 10, 10), None); // psi 10 < 20: queue [(0,0),(10,10)]
                                                // psi 20 >= 20 against (0,0): pai 25, piv +5 ms; head dequeued, (20,25) not enqueued.
        assert_eq!(feed(&mut m, 20, 25), Some(5_000));
        assert_eq!(m.queued(), vec![(10, 10_000)]);
        assert_eq!(feed(&mut m, 25, 31), None); // psi 15 against (10,10): enqueued
                                                // psi 30 against (10,10): pai 40, piv +10 ms.
        assert_eq!(feed(&mut m, 40, 50), Some(10_000));
        assert_eq!(m.queued(), vec![(25, 31_000)]);
        assert_eq!(m.ring_drops(), 0);
    }

    #[test]
    fn compressed_pair_gives_negative_piv() {
        let mut m = PivMeter::default();
        feed(&mut m, 100, 1000);
        assert_eq!(feed(&mut m, 130, 1012), Some(-18_000));
    }

    #[test]
    fn psi_uses_the_sender_clock_and_wraps() {
        // 100 Hz: 2 ticks = 20 ms; TSvals across 2^32.
        let clock = TsClock::from_hz(100);
        let mut m = PivMeter::default();
        assert_eq!(m.on_packet(Instant::from_millis(5), u32::MAX, clock, PSI), None);
        assert_eq!(m.on_packet(Instant::from_millis(15), 0, clock, PSI), None); // psi 10 ms
        assert_eq!(m.on_packet(Instant::from_millis(30), 1, clock, PSI), Some(5_000));
        // pai 25, psi 20
    }

    #[test]
    fn full_ring_drops_unpaired_packets_but_pivs_stay_exact() {
        let mut m = PivMeter::default();
        // 20 packets 1 ms apart: the first 16 fill the ring, 4 are dropped.
        for i in 0..20u32 {
            assert_eq!(feed(&mut m, i, u64::from(i)), None);
        }
        assert_eq!(m.ring_drops(), 4);
        assert_eq!(m.queued().len(), PIV_RING);
        // Packet at tsval 20 pairs with head 0; arrival 23 ms: piv +3 ms, exact.
        assert_eq!(feed(&mut m, 20, 23), Some(3_000));
        // The next pairs with tsval 1 (arrival 1 ms): psi 20, pai 24 -> +4 ms.
        assert_eq!(feed(&mut m, 21, 25), Some(4_000));
        // Packets 16..19 were never recorded: after 0..15 are consumed the queue is empty.
        for i in 2..16u32 {
            assert!(feed(&mut m, 20 + i, 30 + u64::from(i)).is_some());
        }
        assert!(m.queued().is_empty());
        assert_eq!(feed(&mut m, 36, 50), None);
        assert_eq!(m.queued(), vec![(36, 50_000)]);
    }

    #[test]
    fn long_silence_clears_the_queue() {
        let mut m = PivMeter::default();
        feed(&mut m, 0, 0);
        let late = STALE_GAP.as_millis() as u64 + 1;
        assert_eq!(feed(&mut m, 5_000_000, late), None);
        assert_eq!(m.queued(), vec![(5_000_000, (late * 1000) as u32)]);
    }

    #[test]
    fn rounding_to_the_jiffy() {
        let j = Duration::from_millis(4);
        assert_eq!(round_piv(5_900, j), 4_000);
        assert_eq!(round_piv(6_100, j), 8_000);
        assert_eq!(round_piv(-5_900, j), -4_000);
        assert_eq!(round_piv(-6_100, j), -8_000);
        assert_eq!(round_piv(1_999, j), 0);
        assert_eq!(round_piv(2_000, j), 4_000); // ties away from zero
        assert_eq!(round_piv(-2_000, j), -4_000);
        assert_eq!(round_piv(0, j), 0);
        assert_eq!(round_piv(5_900, Duration::ZERO), 5_900);
    }
}
