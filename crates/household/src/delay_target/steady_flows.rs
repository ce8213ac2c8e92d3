//! Best-effort UDP flows that send steadily, one by one: a call or a game under browsing.
//!
//! The WAN counters sum all best effort, and a call beside browsing varies by the pages'
//! factors: `interactive.rs` then reads browsing and aims at the browsing target, and the call
//! pays the background's queue (lab `home`, the full evening: 9-18 ms added at the call's p95).
//! The router's connection tracker counts each connection's packets (conntrack accounting,
//! on in OpenWrt): a UDP flow whose packet rate in one direction is steady window after window
//! (the same test as the counters' steady pace) is a call or a game, whatever browses beside it.
//! Pure: dumps of the flows' counters and their times in, a verdict out.

use std::collections::HashMap;

use slipstream_control::{Duration, Instant};

use super::interactive::{is_steady, INTERACTIVE_PACKETS_PER_SECOND, STEADY_WINDOWS, WINDOW};

/// One flow's packet count and recent packet rates, each direction.
#[derive(Clone, Copy, Debug, Default)]
struct Followed {
    packets: [u64; 2],
    /// Packet rates of the last windows in a row at or above the interactive rate, newest last.
    rates: [[f64; STEADY_WINDOWS]; 2],
    windows_in_a_row: [usize; 2],
    /// Seen in the latest dump (flows not seen have ended).
    seen: bool,
}

/// The flows followed between dumps.
#[derive(Debug, Default)]
pub struct SteadyFlows {
    flows: HashMap<u32, Followed>,
    dumped_at: Option<Instant>,
    steady: usize,
}

impl SteadyFlows {
    /// At most this many flows are followed; more UDP flows than this (DNS lookups each make
    /// one) are not looked at until some end. A household's calls and games are a handful.
    pub const MAX_FLOWS: usize = 4096;

    /// A new tracker, following nothing.
    pub fn new() -> SteadyFlows {
        SteadyFlows::default()
    }

    /// One dump at `now`: each flow's conntrack id and packets in its two directions, cumulative.
    /// Dumps closer than a window to the last one are not counted. Returns how many flows send
    /// steadily.
    pub fn on_dump(&mut self, now: Instant, flows: impl IntoIterator<Item = (u32, [u64; 2])>) -> usize {
        let interval = self
            .dumped_at
            .map_or(Duration::ZERO, |then| now.saturating_since(then));
        if self.dumped_at.is_some() && interval < WINDOW {
            return self.steady;
        }
        let secs = interval.as_secs_f64();
        self.dumped_at = Some(now);
        for (id, packets) in flows {
            let room = self.flows.len() < Self::MAX_FLOWS;
            match self.flows.get_mut(&id) {
                Some(flow) => flow.count(packets, secs),
                None if room => {
                    self.flows.insert(
                        id,
                        Followed {
                            packets,
                            seen: true,
                            ..Followed::default()
                        },
                    );
                }
                None => {}
            }
        }
        self.flows.retain(|_, flow| std::mem::take(&mut flow.seen));
        self.steady = self.flows.values().filter(|f| f.is_steady(secs)).count();
        self.steady
    }

    /// How many flows sent steadily at the last dump.
    pub fn steady(&self) -> usize {
        self.steady
    }
}

impl Followed {
    fn count(&mut self, packets: [u64; 2], secs: f64) {
        self.seen = true;
        let directions = self.rates.iter_mut().zip(&mut self.windows_in_a_row);
        for ((rates, in_a_row), (now, before)) in directions.zip(packets.iter().zip(self.packets)) {
            // A counter that went back is a new connection under a reused id: start over.
            let rate = now
                .checked_sub(before)
                .map(|sent| sent as f64 / secs.max(f64::MIN_POSITIVE));
            match rate {
                Some(rate) if rate >= INTERACTIVE_PACKETS_PER_SECOND => {
                    rates.rotate_left(1);
                    rates[STEADY_WINDOWS - 1] = rate;
                    *in_a_row += 1;
                }
                _ => *in_a_row = 0,
            }
        }
        self.packets = packets;
    }

    fn is_steady(&self, secs: f64) -> bool {
        self.rates
            .iter()
            .zip(self.windows_in_a_row)
            .any(|(rates, in_a_row)| in_a_row >= STEADY_WINDOWS && is_steady(rates, secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// A call: 50 packets a second each way, dumped every 300 ms.
    #[test]
    fn a_call_is_steady_after_five_windows_and_ends_with_its_flow() {
        let mut flows = SteadyFlows::new();
        let mut steady = Vec::new();
        for w in 0..=6u64 {
            let n = 15 * w;
            steady.push(flows.on_dump(at(300 * w), [(7, [n, n])]));
        }
        // The first dump only sees the flow; five windows of 15 packets make it steady.
        assert_eq!(steady, vec![0, 0, 0, 0, 0, 1, 1]);
        assert_eq!(flows.on_dump(at(2100), []), 0, "gone from the dump: ended");
    }

    /// A game: 60 packets a second down, 30 up; only one direction needs to be steady, and a
    /// count that moves by one packet a window is still steady.
    #[test]
    fn a_game_with_one_direction_steady() {
        let mut flows = SteadyFlows::new();
        let mut down = 0;
        let mut last = 0;
        for w in 0..=5u64 {
            down += if w % 2 == 0 { 18 } else { 19 };
            last = flows.on_dump(at(300 * w), [(9, [5 * w, down])]);
        }
        assert_eq!(last, 1);
    }

    /// Browsing over QUIC: one flow's packets come in bursts (a page, then nothing): never five
    /// windows in a row, nor within the spread.
    #[test]
    fn bursts_and_slow_flows_are_not_steady() {
        let mut flows = SteadyFlows::new();
        let per_window = [0u64, 120, 10, 200, 40, 90, 150, 30, 60, 100];
        let mut total = 0;
        for (w, n) in per_window.iter().enumerate() {
            total += n;
            assert_eq!(
                flows.on_dump(
                    at(300 * w as u64),
                    [(1, [total / 10, total]), (2, [w as u64, w as u64])]
                ),
                0
            );
        }
    }

    /// Dumps closer than a window are not counted; a counter that goes back starts over.
    #[test]
    fn early_dumps_and_reused_ids() {
        let mut flows = SteadyFlows::new();
        for w in 0..=5u64 {
            flows.on_dump(at(300 * w), [(3, [15 * w, 0])]);
            // 100 ms later: not a window.
            assert_eq!(
                flows.on_dump(at(300 * w + 100), [(3, [15 * w + 5, 0])]),
                usize::from(w == 5)
            );
        }
        assert_eq!(
            flows.on_dump(at(1800), [(3, [2, 0])]),
            0,
            "the id's counter went back"
        );
    }

    /// No more than `SteadyFlows::MAX_FLOWS` are followed.
    #[test]
    fn the_followed_flows_are_bounded() {
        let mut flows = SteadyFlows::new();
        flows.on_dump(
            at(0),
            (0..2 * SteadyFlows::MAX_FLOWS as u32).map(|id| (id, [0, 0])),
        );
        assert_eq!(flows.flows.len(), SteadyFlows::MAX_FLOWS);
    }
}
