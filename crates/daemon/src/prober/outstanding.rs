//! The probes sent and not yet answered: bounded, in the order sent. A probe unanswered for
//! [`LOST_AFTER`], or pushed out of a full table by a newer one, is lost; a reply that comes
//! later finds nothing and is ignored (it would be a sample of a queue long gone).

use std::collections::VecDeque;

use slipstream_control::{Duration, Instant};

/// How long a probe may wait for its reply: the engine takes no longer round trip as a
/// measurement of a queue (`MAX_PROBE_RTT` in `crates/engine/src/engine/probes.rs`).
pub(crate) const LOST_AFTER: Duration = Duration::from_secs(2);
/// Most probes waiting at once: [`LOST_AFTER`] at the engine's shortest interval (20 ms) is
/// 100, so only a faster engine would push unanswered probes out early.
pub(crate) const MAX_OUTSTANDING: usize = 128;

#[derive(Debug, Default)]
pub(crate) struct Outstanding {
    /// Sequence number, send time and (a timestamp request's) microseconds of the day it was
    /// sent of each waiting probe, oldest first.
    waiting: VecDeque<(u16, Instant, Option<i64>)>,
}

impl Outstanding {
    /// A probe sent at `sent` (`of_day`: a timestamp request's time of day); returns how many
    /// older probes this pushed out (lost).
    pub(crate) fn sent(&mut self, seq: u16, sent: Instant, of_day: Option<i64>) -> u64 {
        let mut lost = 0;
        // A sequence number wrapped round onto a probe still waiting: that one is long lost.
        if let Some(i) = self.waiting.iter().position(|(s, ..)| *s == seq) {
            self.waiting.remove(i);
            lost += 1;
        }
        while self.waiting.len() >= MAX_OUTSTANDING {
            self.waiting.pop_front();
            lost += 1;
        }
        self.waiting.push_back((seq, sent, of_day));
        lost
    }

    /// The send time (and time of day) of probe `seq`, answered now if `ours` accepts its time
    /// of day (`None`: not waiting, a duplicate or late reply, or not ours).
    pub(crate) fn answered(
        &mut self,
        seq: u16,
        ours: impl Fn(Option<i64>) -> bool,
    ) -> Option<(Instant, Option<i64>)> {
        let i = self
            .waiting
            .iter()
            .position(|&(s, _, of_day)| s == seq && ours(of_day))?;
        self.waiting.remove(i).map(|(_, sent, of_day)| (sent, of_day))
    }

    /// Removes the probes unanswered for [`LOST_AFTER`] at `now`; returns how many.
    pub(crate) fn expire(&mut self, now: Instant) -> u64 {
        let mut lost = 0;
        while self
            .waiting
            .front()
            .is_some_and(|(_, sent, _)| now.saturating_since(*sent) >= LOST_AFTER)
        {
            self.waiting.pop_front();
            lost += 1;
        }
        lost
    }

    /// Forgets every waiting probe (a new target); returns how many.
    pub(crate) fn clear(&mut self) -> u64 {
        let n = self.waiting.len() as u64;
        self.waiting.clear();
        n
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn a_reply_finds_its_probe_once() {
        let mut o = Outstanding::default();
        assert_eq!(o.sent(1, at(0), None), 0);
        assert_eq!(o.sent(2, at(100), Some(7)), 0);
        assert_eq!(
            o.answered(2, |d| d == Some(8)),
            None,
            "another request's time of day"
        );
        assert_eq!(
            o.answered(2, |d| d == Some(7)),
            Some((at(100), Some(7))),
            "out of order"
        );
        assert_eq!(o.answered(2, |_| true), None, "a duplicate");
        assert_eq!(o.answered(3, |_| true), None, "never sent");
        assert_eq!(o.answered(1, |_| true), Some((at(0), None)));
        assert!(o.is_empty());
    }

    #[test]
    fn unanswered_probes_are_lost_after_the_timeout() {
        let mut o = Outstanding::default();
        o.sent(1, at(0), None);
        o.sent(2, at(1000), None);
        assert_eq!(o.expire(at(1999)), 0);
        assert_eq!(o.expire(at(2000)), 1);
        assert_eq!(o.answered(1, |_| true), None, "a late reply is ignored");
        assert_eq!(o.expire(at(3000)), 1);
        assert!(o.is_empty());
    }

    #[test]
    fn the_table_is_bounded() {
        let mut o = Outstanding::default();
        for seq in 0..MAX_OUTSTANDING as u16 {
            assert_eq!(o.sent(seq, at(u64::from(seq)), None), 0);
        }
        assert_eq!(o.sent(1000, at(100), None), 1, "the oldest goes");
        assert_eq!(o.answered(0, |_| true), None);
        assert_eq!(o.answered(1, |_| true), Some((at(1), None)));
        // A sequence number that wrapped onto a waiting probe replaces it.
        assert_eq!(o.sent(5, at(200), None), 1);
        assert_eq!(o.answered(5, |_| true), Some((at(200), None)));
        assert_eq!(o.clear(), MAX_OUTSTANDING as u64 - 2);
        assert!(o.is_empty());
    }
}
