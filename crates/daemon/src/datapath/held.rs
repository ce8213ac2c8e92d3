//! Packets a shaper holds for a later verdict, in the order they are due: each background UDP
//! flow's shaper (in the engine) gives a packet over its rate a time to go on, and the datapath
//! keeps the packet's message until then.
//!
//! Bounded: a full store refuses the packet, which then goes on at once (fail open: a held
//! packet counts against NFQUEUE's `max_len`, and a full kernel queue would let every packet of
//! the queue pass unseen).

use std::collections::BTreeMap;

use slipstream_control::Instant;

pub(crate) struct HeldPackets<T> {
    /// By release time, then arrival (a flow's packets are due in the order they came).
    due: BTreeMap<(Instant, u64), T>,
    next_seq: u64,
    capacity: usize,
    /// Packets that found the store full and went on at once.
    overflowed: u64,
}

impl<T> HeldPackets<T> {
    pub(crate) fn new(capacity: usize) -> HeldPackets<T> {
        HeldPackets {
            due: BTreeMap::new(),
            next_seq: 0,
            capacity,
            overflowed: 0,
        }
    }

    /// Keeps `packet` until `until`; gives it back when the store is full.
    pub(crate) fn hold(&mut self, until: Instant, packet: T) -> Result<(), T> {
        if self.due.len() >= self.capacity {
            self.overflowed += 1;
            return Err(packet);
        }
        self.next_seq += 1;
        self.due.insert((until, self.next_seq), packet);
        Ok(())
    }

    /// The next packet due at `now`, if any.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<T> {
        let entry = self.due.first_entry()?;
        if entry.key().0 > now {
            return None;
        }
        Some(entry.remove())
    }

    /// When the next packet is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.due.keys().next().map(|(at, _)| *at)
    }

    /// Every packet, in the order they are due (at stop).
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        std::mem::take(&mut self.due).into_values()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.due.len()
    }

    pub(crate) fn overflowed(&self) -> u64 {
        self.overflowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slipstream_control::Duration;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn packets_go_when_due_in_due_order_and_in_arrival_order_at_the_same_time() {
        let mut held = HeldPackets::new(8);
        for (due, name) in [(30, "c"), (10, "a"), (30, "d"), (20, "b")] {
            assert!(held.hold(at(due), name).is_ok());
        }
        assert_eq!(held.next_due(), Some(at(10)));
        assert_eq!(held.pop_due(at(5)), None);
        let mut out = Vec::new();
        while let Some(p) = held.pop_due(at(30)) {
            out.push(p);
        }
        assert_eq!(out, ["a", "b", "c", "d"]);
        assert_eq!(held.next_due(), None);
    }

    #[test]
    fn a_full_store_gives_the_packet_back_and_counts_it() {
        let mut held = HeldPackets::new(2);
        assert!(held.hold(at(1), 1).is_ok() && held.hold(at(2), 2).is_ok());
        assert_eq!(held.hold(at(3), 3), Err(3));
        assert_eq!(held.overflowed(), 1);
        assert_eq!(held.drain().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(held.len(), 0);
    }
}
