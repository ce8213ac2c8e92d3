//! Vulture Alg. 6: estimating the sender's congestion window from TSecr.
//!
//! This file exists to give Vulture a starting rwnd when the flow turns LBE (Sec. 0.3.5, Fig. 13:
//! rwnd := cwnd estimate), because the window the host advertises in BE mode can be far above
//! the sender's cwnd. It keeps an ack queue of (TSval, acknowledged bytes) of the ACKs as they are
//! forwarded, and matches each data segment's TSecr against its head:
//!
//! * `tsecr < head.tsval`: the segment was sent on an older ACK than any outstanding one: the
//!   sender grew its window: `estimate += len`;
//! * `tsecr == head.tsval`: the segment answers the head ACK: `head.len −= len`, dequeue when it
//!   reaches 0 (the layout copy's `else ackQue.head.len = ack.len` just stores the decrement);
//! * `tsecr > head.tsval`: the sender has moved past the head ACK without replacing all its bytes:
//!   `estimate −= head.len`, dequeue, and look at the next head.
//!
//! An empty queue means `estimate += len`. All comparisons use 32-bit serial arithmetic.
//!
//! # Robust reading of `ack.len == 0`
//! If a segment is longer than what is left of the head, the head is dequeued and the excess goes
//! on through the paper's `while` loop against the next head. With the merged queue below the next
//! head always has a later TSval (or there is none), so the excess is simply added to the
//! estimate — the same as `tsecr < head.tsval` for those bytes.
//!
//! # Bounded memory, and why merging is exact
//! Consecutive ACKs with the same TSval are merged into one entry whose length is the sum. A run
//! of same-TSval entries behaves like one: a segment with `tsecr` equal to their TSval consumes
//! bytes from the front of the run, entry after entry (with the excess carried on as above), so
//! only the run's remaining total matters and the run is exhausted exactly when that total
//! reaches 0; a segment with a larger `tsecr` removes every entry of the run, subtracting their
//! remaining lengths, i.e. the remaining total; a smaller `tsecr` does not touch the run. ACKs
//! acknowledging 0 bytes (duplicate ACKs, window updates) are not queued: a 0-byte entry would be
//! dequeued by the first segment that matches it with the whole segment carried on as excess,
//! exactly what happens without it. ACKs without a TSval cannot be matched and are not queued.
//!
//! The queue is a fixed ring of [`ACK_RING`] entries of (TSval low, TSval high, length). When it
//! is full, a new ACK is merged into the newest entry, widening its TSval range; a segment whose
//! TSecr lies within `[lo, hi]` matches that entry. This is the one approximation: segments sent
//! on ACKs of different TSvals inside the widened range are treated as answers to one ACK. The
//! estimate is a `u32` saturating at 0 and `u32::MAX`.

use crate::time::seq_lt;

/// Capacity of the ack queue of Alg. 6.
pub const ACK_RING: usize = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct AckEntry {
    lo: u32,
    hi: u32,
    len: u32,
}

/// Alg. 6 state for one flow.
#[derive(Clone, Debug, Default)]
pub(crate) struct CwndEstimator {
    ring: [AckEntry; ACK_RING],
    head: u8,
    len: u8,
    estimate: u32,
}

impl CwndEstimator {
    /// An ACK carrying `tsval` and acknowledging `acked` bytes is forwarded.
    pub(crate) fn on_ack(&mut self, tsval: u32, acked: u32) {
        if acked == 0 {
            return;
        }
        if self.len > 0 {
            let newest = self.newest_index();
            let e = &mut self.ring[newest];
            // Same TSval as the newest (or, impossible with a monotonic receiver clock, an older
            // one): merge.
            if !seq_lt(e.hi, tsval) {
                e.len = e.len.saturating_add(acked);
                return;
            }
            if usize::from(self.len) == ACK_RING {
                e.hi = tsval;
                e.len = e.len.saturating_add(acked);
                return;
            }
        }
        let tail = (usize::from(self.head) + usize::from(self.len)) % ACK_RING;
        self.ring[tail] = AckEntry {
            lo: tsval,
            hi: tsval,
            len: acked,
        };
        self.len += 1;
    }

    /// A data segment of `len` payload bytes echoing `tsecr` arrived.
    pub(crate) fn on_data(&mut self, tsecr: u32, len: u32) {
        while self.len > 0 {
            let e = &mut self.ring[usize::from(self.head)];
            if seq_lt(tsecr, e.lo) {
                break;
            }
            if !seq_lt(e.hi, tsecr) {
                // tsecr within [lo, hi]: the segment answers this ACK.
                if len < e.len {
                    e.len -= len;
                    return;
                }
                let excess = len - e.len;
                self.pop();
                self.estimate = self.estimate.saturating_add(excess);
                return;
            }
            // tsecr beyond this ACK: its unanswered bytes leave the window.
            self.estimate = self.estimate.saturating_sub(e.len);
            self.pop();
        }
        // Older than the head, or empty queue.
        self.estimate = self.estimate.saturating_add(len);
    }

    pub(crate) fn estimate(&self) -> u32 {
        self.estimate
    }

    fn newest_index(&self) -> usize {
        (usize::from(self.head) + usize::from(self.len) + ACK_RING - 1) % ACK_RING
    }

    fn pop(&mut self) {
        self.head = ((usize::from(self.head) + 1) % ACK_RING) as u8;
        self.len -= 1;
    }

    #[cfg(test)]
    fn entries(&self) -> Vec<(u32, u32, u32)> {
        (0..usize::from(self.len))
            .map(|i| {
                let e = self.ring[(usize::from(self.head) + i) % ACK_RING];
                (e.lo, e.hi, e.len)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's Alg. 6 on an unbounded queue with one entry per ACK (the excess of a segment
    /// longer than the head carried on through the loop), as a reference for the merged ring.
    #[derive(Default)]
    struct Reference {
        q: std::collections::VecDeque<(u32, i64)>,
        est: i64,
    }

    impl Reference {
        fn on_ack(&mut self, tsval: u32, len: u32) {
            self.q.push_back((tsval, i64::from(len)));
        }
        fn on_data(&mut self, tsecr: u32, len: u32) {
            let mut rem = i64::from(len);
            loop {
                let Some(head) = self.q.front_mut() else {
                    self.est += rem;
                    return;
                };
                if seq_lt(tsecr, head.0) {
                    self.est += rem;
                    return;
                } else if tsecr == head.0 {
                    if rem < head.1 {
                        head.1 -= rem;
                        return;
                    }
                    rem -= head.1;
                    self.q.pop_front();
                    if rem == 0 {
                        return;
                    }
                } else {
                    // The estimate saturates at 0 at every step, like the u32 one.
                    self.est = (self.est - head.1).max(0);
                    self.q.pop_front();
                }
            }
        }
    }

    #[test]
    fn hand_computed_sequence() {
        let mut c = CwndEstimator::default();
        // Initial window: 3 segments of 1000 with an empty queue: estimate 3000.
        for _ in 0..3 {
            c.on_data(0, 1000);
        }
        assert_eq!(c.estimate(), 3000);
        // ACKs: tsval 10 acks 1000, tsval 10 acks 1000 (merged), tsval 11 acks 1000.
        c.on_ack(10, 1000);
        c.on_ack(10, 1000);
        c.on_ack(11, 1000);
        assert_eq!(c.entries(), vec![(10, 10, 2000), (11, 11, 1000)]);
        // Two segments answer tsval 10 exactly: no change, entry gone.
        c.on_data(10, 1000);
        assert_eq!(c.estimate(), 3000);
        c.on_data(10, 1000);
        assert_eq!(c.entries(), vec![(11, 11, 1000)]);
        // A third segment echoing tsval 10 is older than the head (11): growth.
        c.on_data(10, 1000);
        assert_eq!(c.estimate(), 4000);
        // ACK 12 acks 2000; then a segment echoing 12 skips ACK 11 (1000 unanswered): shrink.
        c.on_ack(12, 2000);
        c.on_data(12, 1000);
        assert_eq!(c.estimate(), 3000);
        assert_eq!(c.entries(), vec![(12, 12, 1000)]);
        // A segment longer than what is left of the head: dequeued, the excess counts as growth.
        c.on_data(12, 1500);
        assert_eq!(c.estimate(), 3500);
        assert!(c.entries().is_empty());
        // Zero-byte ACKs are not queued.
        c.on_ack(13, 0);
        assert!(c.entries().is_empty());
    }

    #[test]
    fn estimate_saturates_at_zero() {
        let mut c = CwndEstimator::default();
        c.on_ack(5, 10_000);
        c.on_data(6, 100);
        // 10_000 unanswered bytes subtracted from 0, then +100 for the segment on the empty queue.
        assert_eq!(c.estimate(), 100);
    }

    #[test]
    fn wrapping_tsvals() {
        let mut c = CwndEstimator::default();
        c.on_ack(u32::MAX, 1000);
        c.on_ack(0, 1000);
        c.on_data(u32::MAX, 1000);
        assert_eq!(c.entries(), vec![(0, 0, 1000)]);
        c.on_data(u32::MAX, 1000); // older than head 0: growth
        assert_eq!(c.estimate(), 1000);
        c.on_ack(1, 1000);
        c.on_data(1, 1000); // skips 0: -1000, then matches 1
        assert_eq!(c.estimate(), 0);
        assert!(c.entries().is_empty());
    }

    #[test]
    fn full_ring_widens_the_newest_entry() {
        let mut c = CwndEstimator::default();
        for t in 0..ACK_RING as u32 {
            c.on_ack(100 + t, 1000);
        }
        c.on_ack(200, 500);
        c.on_ack(201, 500);
        let e = c.entries();
        assert_eq!(e.len(), ACK_RING);
        assert_eq!(*e.last().unwrap(), (100 + ACK_RING as u32 - 1, 201, 2000));
        // Data answering every ACK in order drains the queue without changing the estimate.
        for t in 0..ACK_RING as u32 - 1 {
            c.on_data(100 + t, 1000);
        }
        c.on_data(200, 1000);
        c.on_data(150, 1000); // inside the widened range [123, 201]
        assert_eq!(c.estimate(), 0);
        assert!(c.entries().is_empty());
    }

    #[test]
    fn merged_ring_equals_the_papers_queue() {
        // Pseudo-random ACK/data sequences with monotonic receiver TSvals, few enough outstanding
        // distinct TSvals that the ring never widens: merged ring == one entry per ACK.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..200 {
            let mut c = CwndEstimator::default();
            let mut r = Reference::default();
            let mut tsval = u32::MAX - 20;
            let mut sent: Vec<u32> = vec![tsval];
            for _ in 0..300 {
                if rnd(2) == 0 {
                    if rnd(3) == 0 && c.len < (ACK_RING - 1) as u8 {
                        tsval = tsval.wrapping_add(1);
                    }
                    let len = [0, 500, 1000, 2000, 2896][rnd(5) as usize] as u32;
                    c.on_ack(tsval, len);
                    if len > 0 {
                        r.on_ack(tsval, len);
                    }
                    sent.push(tsval);
                } else {
                    let tsecr = sent[sent.len() - 1 - rnd(sent.len().min(6) as u64) as usize];
                    let len = [500, 1000, 1448, 3000][rnd(4) as usize] as u32;
                    c.on_data(tsecr, len);
                    r.on_data(tsecr, len);
                }
                assert_eq!(i64::from(c.estimate()), r.est);
            }
        }
    }
}
