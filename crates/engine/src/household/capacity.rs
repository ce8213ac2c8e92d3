//! A link's capacity as its WAN counters saw it, and whether a round filled it.
//!
//! Round trips alone cannot tell a link's queue from the opposite link's: without timestamps a
//! download's far half carries its ACKs up the upload link, an upload's near half its ACKs
//! down the download link, and two links of background each read the sum. The rates can: a
//! link that did not carry [`FULL_SHARE`] of its capacity holds no queue, so while the opposite
//! link is full, the sum is that link's queue, which its own controller holds near the target.
//! `run_round` takes up to the target of it off; more is this link's too.

use slipstream_control::{Duration, Instant};

/// A link is full while it carries at least this share of its [`Capacity`]: a queue builds only
/// on a link that is full.
pub(super) const FULL_SHARE: f64 = 0.9;

/// The largest rate a link's counters counted in a round (all its traffic, bytes/s), halving
/// every [`Capacity::HALF_LIFE`] since: a link that carries less than its capacity is not full.
/// Longer than the budget's 10 s link rate (`link_rate`), which is the background's own view:
/// a link the background alone never filled must remember best effort filling it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Capacity {
    /// (when it was measured, bytes/s).
    peak: Option<(Instant, f64)>,
    /// The rounds' rates, smoothed (bytes/s): one round's count moves by a tenth and more
    /// (lab `both`: a full upload read 0.84-0.98 of its peak round by round).
    smoothed: Option<f64>,
}

impl Capacity {
    pub(super) const HALF_LIFE: Duration = Duration::from_secs(60);
    /// The smoothed rate's gain per round.
    const GAIN: f64 = 0.25;

    /// The capacity at `now` (bytes/s), aged; `None` before any counted round.
    pub(super) fn rate(&self, now: Instant) -> Option<f64> {
        self.peak.map(|(at, peak)| {
            let halvings = now.saturating_since(at).as_secs_f64() / Self::HALF_LIFE.as_secs_f64();
            peak * 0.5f64.powf(halvings)
        })
    }

    /// A round carried `rate`: whether the link is full, its smoothed rate at least
    /// [`FULL_SHARE`] of its capacity.
    pub(super) fn is_full(&mut self, now: Instant, rate: f64) -> bool {
        let aged = self.rate(now).unwrap_or(0.0);
        let capacity = if rate >= aged {
            self.peak = Some((now, rate));
            rate
        } else {
            aged
        };
        let smoothed = self.smoothed.map_or(rate, |s| s + Self::GAIN * (rate - s));
        self.smoothed = Some(smoothed);
        smoothed >= FULL_SHARE * capacity
    }
}
