//! The smallest budget of a household link: one flow's floor (two segments), or on a small link
//! less, a duty cycle (see the allocator in `slipstream_household::allocator`).

/// One flow's floor, two of its segments: the smallest window the engine advertises.
pub(super) fn one_floor(mss: u32) -> u64 {
    2 * u64::from(mss)
}

/// The smallest budget's share of the link's bandwidth-delay product: at it, beside best effort
/// that fills a one-BDP queue, the background keeps under 1% of the link (best effort's 98%,
/// issue 22; at a 32nd best effort kept 0.981 in lab `no-timestamps --rtt 20`, at a 64th
/// 0.989). On a small link a flow's floor, two segments, is more: on a 2 Mbit/s uplink at 40 ms
/// (10 kB) it is 30%, and a best-effort upload beside a background one at its floor kept 0.70
/// of its rate (lab `both --rate 20 --up-rate 2 --rtt 40`). There the budget may fall below the
/// floors (a duty cycle, see the allocator).
const MIN_BUDGET_BDP_SHARE: f64 = 1.0 / 64.0;
/// The deepest duty cycle: the floors in this many turns (a lone flow at an eighth of its
/// floor, held at most seven rounds in eight); from eight flows on, one floor, as before (each
/// flow waits its turn among them).
const DUTY_CYCLE_TURNS: u64 = 8;

/// The smallest budget of a link with `flows` background flows of segment size `mss` and
/// bandwidth-delay product `bdp` (bytes, `None` where unknown): [`MIN_BUDGET_BDP_SHARE`] of the
/// BDP, at most one floor (two segments), at least the flows' floors in [`DUTY_CYCLE_TURNS`]
/// turns. On a 10 Mbit/s / 100 ms link that is two thirds of a floor: a flow is held one round
/// in three. (An eighth of a floor there held it up to 700 ms, longer than its sender's
/// retransmission timeout, and the background used 0.06-0.38 of lab `onoff`'s idle periods
/// against 0.41-0.62: probably the sender's restart after idleness, RFC 5681 Sec. 4.1.)
pub(super) fn min_budget(mss: u32, flows: usize, bdp: Option<f64>) -> u64 {
    let floor = one_floor(mss);
    let flows = (flows as u64).max(1);
    let deepest = (floor * flows / flows.max(DUTY_CYCLE_TURNS)).max(1);
    let share = bdp.map_or(floor, |bdp| (bdp * MIN_BUDGET_BDP_SHARE) as u64);
    share.clamp(deepest, floor)
}
