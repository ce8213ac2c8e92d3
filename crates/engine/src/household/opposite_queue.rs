//! How much of a link's queue is the background's own, for the opposite link's round trips
//! ([`super::Link::queue_for_opposite`]).

use slipstream_control::Duration;

use super::Link;

impl Link {
    /// The background's part of the link's own queueing delay (its one-way samples' view,
    /// `LinkDelay::own_queue_delay`), to take off the opposite link's round trips; `None`
    /// without one-way samples or where best effort is not counted. Best effort's part is one
    /// the background yields to from either side: a best-effort download's ACKs cross the
    /// upload link, and an upload that took that queue off its round trips kept its own queue
    /// there (lab `both`: best effort's download kept 0.93-0.98, against 0.97-0.99 when the
    /// upload yielded to it). All or nothing at a tenth, as before, made the two directions of
    /// a household evening read each other's whole queues while a call was on (a call each way
    /// is a quarter of a 10 Mbit/s link): `docs/household.md`, "Both directions beside a call".
    pub(crate) fn queue_for_opposite(&self) -> Option<Duration> {
        Some(self.delay.own_queue_delay()?.mul_f64(self.background_part()?))
    }

    /// [`background_part`] of the link's last round; `None` where best effort is not counted.
    pub(crate) fn background_part(&self) -> Option<f64> {
        let best_effort = self.last.best_effort_bits_per_second?;
        Some(background_part(best_effort, self.last.goodput_bits_per_second))
    }

    /// Whether the link's queue is the background's own: best effort was counted last round and
    /// carried under [`OPPOSITE_BEST_EFFORT_SHARE`] of the link's traffic.
    pub(crate) fn queue_is_backgrounds(&self) -> bool {
        self.last
            .best_effort_bits_per_second
            .is_some_and(|best_effort| queue_is_backgrounds(best_effort, self.last.goodput_bits_per_second))
    }
}

/// A link's queue is the background's own while best effort carries under this share of the
/// link's traffic: then all of it is taken off the opposite link's round trips.
pub(super) const OPPOSITE_BEST_EFFORT_SHARE: f64 = 0.1;

/// The part of a link's queue the opposite link takes off its round trips, from what the link
/// carried last round: all of it while best effort carries under
/// [`OPPOSITE_BEST_EFFORT_SHARE`] of the traffic, else the background's share of the traffic (a
/// FIFO holds the link's traffic in the proportion it arrives).
pub(super) fn background_part(best_effort_bps: f64, background_bps: f64) -> f64 {
    if queue_is_backgrounds(best_effort_bps, background_bps) {
        1.0
    } else {
        background_bps / (best_effort_bps + background_bps)
    }
}

/// Whether a link's queue is the background's own: best effort carried under
/// [`OPPOSITE_BEST_EFFORT_SHARE`] of the link's traffic (or the link carried nothing).
pub(super) fn queue_is_backgrounds(best_effort_bps: f64, background_bps: f64) -> bool {
    best_effort_bps <= OPPOSITE_BEST_EFFORT_SHARE * (best_effort_bps + background_bps)
}
