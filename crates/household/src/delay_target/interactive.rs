//! Which target applies: best effort's packets, counted by the router (its WAN counters), tell
//! a call or a game (steady packets) from browsing (bursts) from a link the background has to
//! itself. Every packet of a call or a game waits in the background's queue, so beside them the
//! background keeps the smallest queue; beside browsing, a small one; alone, the full target.

use slipstream_control::{Duration, Instant};

use crate::budget::{BestEffort, BestEffortPace};

/// Best effort sending at least this many packets per second on the link is someone's call,
/// game, browsing or download: every packet of theirs waits in the background's queue. A video
/// call sends 50 a second each way (20 ms frames), games 30-60; a ping every 100 ms (10 a
/// second) with a few keep-alives does not count.
pub(super) const INTERACTIVE_PACKETS_PER_SECOND: f64 = 25.0;
/// Best effort above this share of the link's rate is a bulk transfer, not a call or a game
/// (2.5 Mbit/s each way is a quarter of a 10 Mbit/s link): the background is at its floors
/// beside it anyway, and the queue left when it ends is no one's.
const INTERACTIVE_MAX_SHARE: f64 = 0.5;
/// Best effort's packets averaging under this many bytes on the wire are ACKs, not a call or a
/// game: the ACKs of a best-effort transfer the other way (a pure TCP ACK is 52-86 bytes with
/// timestamps, IPv4 or IPv6, and the link's 14-byte header; a call's audio frame, 100-250
/// bytes; the lab's game, 122 up and 202 down). A best-effort upload of 6 Mbit/s sends 500 a
/// second down the download link, as steady as a call, and read as one they held the
/// background download at the 1 ms aim while nobody called (lab `onoff`, 50 Mbit/s / 20 ms).
/// A call under such ACKs is still found by its own flow (`steady_flows.rs`).
const ACK_SIZED_BYTES: f64 = 90.0;
/// Best effort's packets are counted over windows of at least this long, however short the
/// rounds: at 50 Mbit/s / 20 ms a round lasts 22 ms, and one ping in each of two rounds read as
/// 45 packets a second (the lab's link run: the background alone at the interactive target, and
/// after a base RTT step it climbed by the 3 ms target's small steps for 1.4 s). A ping every
/// 100 ms and a keep-alive or two (16 a second in that run) stay below the threshold over 300 ms.
pub(super) const WINDOW: Duration = Duration::from_millis(300);
/// Best effort on the link for two windows in a row (one is a burst, or the tail of a download
/// as it ends) gets [`BROWSING_TARGET`]; for this many windows in a row, each within
/// [`STEADY_SPREAD`] of the others' packet rate, it is steady: a call or a game, which
/// gets `interactive_target`. 1.5 s: browsing's rate changes by more within that time (lab
/// `web`, 118 windows: never five in a row within the spread, twice four).
pub(super) const STEADY_WINDOWS: usize = 5;
/// The largest spread of packet rates over [`STEADY_WINDOWS`] windows that is steady: this
/// fraction of the largest, plus two packets a window (a 30 Hz game's count moves by one).
/// A call's rate moved by 5% in the lab; browsing's by factors.
const STEADY_SPREAD: f64 = 0.3;
/// The target while best effort is on the link but not steady (browsing), at most `target` and
/// at least `interactive_target`. Measured in lab `web` (10 Mbit/s, 100 ms): at 3 ms the
/// response time's median was 1.04-1.05 of browsing alone with the background taking 0.53-0.56
/// of what browsing left free; at 1 ms, 1.00-1.01 but 0.21-0.26.
pub(super) const BROWSING_TARGET: Duration = Duration::from_millis(3);
/// The browsing target is at most this share of the path's RTT: a page takes a few round
/// trips, each waiting once in the background's queue, so its response time grows by about the
/// queue's share of the RTT. 3 ms of the lab's 100 ms RTT; at 50 Mbit/s / 20 ms the 3 ms
/// target made the evening's web 25-35% slower (lab `home`).
pub(super) const BROWSING_SHARE_OF_RTT: f64 = 0.03;
/// A target stays this long after the last window that set it: a call's or a game's gaps (a
/// muted microphone, a loading screen) do not let the queue back up at once. Short: after a
/// download that ended, each second at a lower target costs the background part of the link
/// it could refill (lab `onoff`, 5 s: idle-period use 0.56).
const LINGER: Duration = Duration::from_secs(2);

/// Packet rates (a second) over [`STEADY_WINDOWS`] windows of `window_secs` are steady: within
/// [`STEADY_SPREAD`] of the largest, plus two packets a window.
pub(super) fn is_steady(rates: &[f64; STEADY_WINDOWS], window_secs: f64) -> bool {
    let (low, high) = rates
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &r| (l.min(r), h.max(r)));
    high - low <= STEADY_SPREAD * high + 2.0 / window_secs
}

/// Best effort's packets in windows of at least [`WINDOW`], and the targets they set.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct InteractiveWatch {
    packets: u64,
    bytes: u64,
    length: Duration,
    /// Packet rates of the last windows in a row with best effort on the link, newest last.
    rates: [f64; STEADY_WINDOWS],
    /// Their byte rates (bytes/s), likewise.
    byte_rates: [f64; STEADY_WINDOWS],
    windows_in_a_row: usize,
    browsing_until: Option<Instant>,
    steady_until: Option<Instant>,
}

impl InteractiveWatch {
    /// Counts one round's best effort; `total_rate` is the link's rate (bytes/s) as everyone
    /// used it; `steady_flow`: the router's connection tracker sees a best-effort UDP flow
    /// sending steadily (a call, a game: [`super::steady_flows`]).
    pub(super) fn on_round(
        &mut self,
        now: Instant,
        interval: Duration,
        be: BestEffort,
        total_rate: f64,
        steady_flow: bool,
    ) {
        self.packets += be.packets;
        self.bytes += be.bytes;
        self.length += interval;
        if self.length < WINDOW {
            return;
        }
        let secs = self.length.as_secs_f64();
        let rate = self.packets as f64 / secs;
        let byte_rate = self.bytes as f64 / secs;
        let acks = byte_rate < ACK_SIZED_BYTES * rate && !steady_flow;
        let on_link = rate >= INTERACTIVE_PACKETS_PER_SECOND
            && byte_rate <= INTERACTIVE_MAX_SHARE * total_rate
            && !acks;
        (self.packets, self.bytes, self.length) = (0, 0, Duration::ZERO);
        if !on_link {
            self.windows_in_a_row = 0;
            return;
        }
        self.rates.rotate_left(1);
        self.rates[STEADY_WINDOWS - 1] = rate;
        self.byte_rates.rotate_left(1);
        self.byte_rates[STEADY_WINDOWS - 1] = byte_rate;
        self.windows_in_a_row += 1;
        if self.windows_in_a_row >= 2 {
            self.browsing_until = Some(now + LINGER);
            // A call under browsing: the sum varies by the pages' factors, the call's own flow
            // does not (`steady_flows.rs`).
            if steady_flow {
                self.steady_until = Some(now + LINGER);
            }
        }
        if self.windows_in_a_row >= STEADY_WINDOWS && is_steady(&self.rates, secs) {
            self.steady_until = Some(now + LINGER);
        }
    }

    /// The steady sender's rate (bytes/s) while best effort is steady: the least of the last
    /// windows' (a web page's burst in one of them is not the call's).
    pub(super) fn steady_rate(&self, now: Instant) -> Option<f64> {
        (self.pace(now) == BestEffortPace::Steady)
            .then(|| self.byte_rates.iter().copied().fold(f64::MAX, f64::min))
    }

    /// What best effort is doing now.
    pub(super) fn pace(&self, now: Instant) -> BestEffortPace {
        let within = |until: Option<Instant>| until.is_some_and(|t| now < t);
        if within(self.steady_until) {
            BestEffortPace::Steady
        } else if within(self.browsing_until) {
            BestEffortPace::Browsing
        } else {
            BestEffortPace::Alone
        }
    }
}
