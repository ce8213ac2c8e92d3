//! How much of a link's queue is the background's own, for the opposite link's round trips
//! ([`super::Link::queue_for_opposite`]).

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
