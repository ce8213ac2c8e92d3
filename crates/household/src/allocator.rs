//! Splits a link's budget over its background flows (Mehra et al.'s Bandwidth Sharing System,
//! Sec. 3, done with windows at the router):
//!
//! 1. **Minimum rates** first: a rule's `min_rate` is shared equally by its flows and turned into
//!    a window with each flow's RTT (`rate * rtt`, at least the flow's floor). Reserved whatever
//!    the budget says (the user asked for it), so the budget in force may exceed the controller's.
//! 2. **Strict priority** between rules: the rest of the budget goes to the lowest priority number
//!    first, up to what its flows can use (their demand), then to the next.
//! 3. Within a priority, **equal shares per LAN host and weights per rule**: the unit of sharing is
//!    the group (LAN host, rule), of weight the rule's weight, so two hosts with 1 and 15 flows of
//!    one rule get equal shares, and rules of weights 1 and 3 get 1:3 wherever their flows are.
//!    A group's share is split equally over its flows. Both levels are max-min fair with demands
//!    (water-filling): what a flow cannot use goes to the others.
//! 4. **Floors and time-sharing.** A window below two segments cannot be advertised (the sender
//!    would stall on delayed ACKs, and the engine's safety floor forbids it), so a flow whose share
//!    is below its floor does not get it every round: flows take turns. Each such flow earns
//!    *credit* at its share every round; the flows with the most credit get the turns the
//!    remaining budget affords (a floor each), pay for them, and keep a turn at least `turn`; the
//!    others are *held*: their right edge stays where it is (it never moves left) and their window
//!    closes as their data is acknowledged. Over time every flow gets its share (deficit round
//!    robin, Shreedhar & Varghese 1996). A budget below one floor is a duty cycle: the flow with
//!    the most credit has a turn only once it has earned one, so a lone flow sends its floor for
//!    a fraction budget / floor of the time (on a small uplink its floor alone is a sixth of
//!    the link: 2 Mbit/s, 40 ms).

use std::cmp::Reverse;
use std::collections::HashMap;

use slipstream_control::{Duration, Instant};

use crate::share::ShareSpec;

/// What the allocator gives one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// Advertise at most this many bytes beyond the ACK (the safety rules still apply).
    Window(u32),
    /// Keep the right edge where it is: no new data until the flow's turn comes.
    Hold,
}

/// A flow as the allocator sees it. The caller keeps `credit` and `turn_since` per flow between
/// rounds (they are the time-sharing state).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowDemand {
    /// The LAN host's key (equal shares per host).
    pub host: u64,
    /// The rule's number (flows of one host and rule form a group).
    pub rule: u16,
    /// The rule's weight, minimum rate and priority.
    pub share: ShareSpec,
    /// The flow's RTT (turns a minimum rate into a window).
    pub rtt: Duration,
    /// The smallest window the flow may be given: two of its segments.
    pub floor: u32,
    /// The most the flow can use now (bytes; `u64::MAX` when it uses all it gets).
    pub demand: u64,
    /// Bytes the flow's advertised windows still let it send or have in flight (its right edge
    /// less the ACK): what a flow that loses its turn keeps using until its window closes.
    pub outstanding: u64,
    /// Time-sharing credit, bytes x rounds.
    pub credit: i64,
    /// When the flow's current turn started, if it has one.
    pub turn_since: Option<Instant>,
    /// When the flow last lost its turn (ties of credit go to the flow that waited longest).
    pub held_since: Option<Instant>,
}

/// Credit is bounded so a flow that waited long does not then hold the link for long.
const CREDIT_ROUNDS: i64 = 16;

/// The allocator's scratch space, kept between rounds: once its vectors have grown to the link's
/// flow count, a round allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct AllocScratch {
    /// Flows with a minimum rate, per rule.
    min_rate_flows: HashMap<u16, usize>,
    reserve: Vec<u64>,
    fair: Vec<u64>,
    /// (priority, host, rule, index) of every flow packed into one number (see `group_key`),
    /// sorted: a priority's flows, then each (host, rule) group's flows, are runs of it.
    keys: Vec<u128>,
    /// The flow indices of `keys`, in its order.
    order: Vec<usize>,
    /// One priority's groups: (start, end) in `order`, ordered by their first flow.
    groups: Vec<(usize, usize)>,
    group_demand: Vec<u64>,
    group_weight: Vec<f64>,
    group_share: Vec<u64>,
    member_demand: Vec<u64>,
    member_share: Vec<u64>,
    fill: FillScratch,
    target: Vec<u64>,
    /// The flows that take turns, with their place in the queue for turns (see below).
    turn_keys: Vec<(bool, Reverse<i64>, Option<Instant>, u32)>,
    sharing: Vec<usize>,
    granted: Vec<bool>,
}

/// Splits `budget` over `flows`; `out[i]` is `flows[i]`'s allocation. `turn` is the shortest
/// turn. Returns the bytes reserved for minimum rates (part of what was handed out).
///
/// [`allocate_with`] with scratch space of its own (allocates each call).
pub fn allocate(
    budget: u64,
    flows: &mut [FlowDemand],
    now: Instant,
    turn: Duration,
    out: &mut Vec<Allocation>,
) -> u64 {
    allocate_with(&mut AllocScratch::default(), budget, flows, now, turn, out)
}

/// [`allocate`] with the caller's scratch space. O(n log n) in the number of flows: one sort into
/// (priority, host, rule) runs, water-filling by sorted demands, and one sort of the flows that
/// take turns.
pub fn allocate_with(
    scratch: &mut AllocScratch,
    budget: u64,
    flows: &mut [FlowDemand],
    now: Instant,
    turn: Duration,
    out: &mut Vec<Allocation>,
) -> u64 {
    out.clear();
    let n = flows.len();
    if n == 0 {
        return 0;
    }
    let AllocScratch {
        min_rate_flows,
        reserve,
        fair,
        keys,
        order,
        groups,
        group_demand,
        group_weight,
        group_share,
        member_demand,
        member_share,
        fill,
        target,
        turn_keys,
        sharing,
        granted,
    } = scratch;
    // 1. Minimum rates.
    min_rate_flows.clear();
    for f in flows.iter() {
        if f.share.min_rate > 0 {
            *min_rate_flows.entry(f.rule).or_insert(0) += 1;
        }
    }
    reserve.clear();
    reserve.extend(flows.iter().map(|f| {
        if f.share.min_rate == 0 {
            return 0;
        }
        let count = min_rate_flows.get(&f.rule).copied().unwrap_or(1) as f64;
        let window = f.share.min_rate as f64 / count * f.rtt.as_secs_f64();
        (window.ceil() as u64).max(u64::from(f.floor))
    }));
    let reserved: u64 = reserve.iter().sum();
    let mut rest = budget.saturating_sub(reserved);

    // 2-3. Priorities, then water-filling over (host, rule) groups and within each group.
    fair.clear();
    fair.resize(n, 0);
    // Sorted as numbers, not as indices compared through `flows` (a cache miss per comparison).
    keys.clear();
    keys.extend(flows.iter().enumerate().map(|(i, f)| group_key(f, i)));
    keys.sort_unstable();
    order.clear();
    order.extend(keys.iter().map(|&k| k as u32 as usize));
    let demand = |i: usize| flows[i].demand.saturating_sub(reserve[i]);
    let mut start = 0;
    while start < n {
        let priority = keys[start] >> PRIORITY_SHIFT;
        let end = start + keys[start..].partition_point(|&k| k >> PRIORITY_SHIFT == priority);
        // The priority's groups, in the order of their first flow (water-filling hands rounding
        // leftovers to the first claimants).
        groups.clear();
        let mut g = start;
        while g < end {
            let group = keys[g] >> GROUP_SHIFT;
            let g_end = g + keys[g..end].partition_point(|&k| k >> GROUP_SHIFT == group);
            groups.push((g, g_end));
            g = g_end;
        }
        groups.sort_unstable_by_key(|&(g, _)| order[g]);
        group_demand.clear();
        group_demand.extend(groups.iter().map(|&(a, b)| {
            order[a..b]
                .iter()
                .map(|&i| demand(i))
                .fold(0u64, u64::saturating_add)
        }));
        group_weight.clear();
        group_weight.extend(
            groups
                .iter()
                .map(|&(a, _)| f64::from(flows[order[a]].share.weight)),
        );
        water_fill(rest, group_demand, |k| group_weight[k], group_share, fill);
        for (&(a, b), &share) in groups.iter().zip(group_share.iter()) {
            member_demand.clear();
            member_demand.extend(order[a..b].iter().map(|&i| demand(i)));
            water_fill(share, member_demand, |_| 1.0, member_share, fill);
            for (&i, &s) in order[a..b].iter().zip(member_share.iter()) {
                fair[i] = s;
            }
        }
        rest = rest.saturating_sub(group_share.iter().sum());
        start = end;
    }

    // 4. Floors and time-sharing.
    target.clear();
    target.extend((0..n).map(|i| reserve[i] + fair[i]));
    let floors: u64 = flows.iter().map(|f| u64::from(f.floor)).sum();
    let total = budget.max(reserved);
    out.resize(n, Allocation::Hold);
    if floors <= total {
        // Every flow has a window: credits stay as they are, so turns stay fair across rounds
        // that do and do not time-share.
        for i in 0..n {
            flows[i].turn_since.get_or_insert(now);
            out[i] = Allocation::Window(clamp_u32(target[i].max(u64::from(flows[i].floor))));
        }
        return reserved;
    }
    let mut left = total;
    turn_keys.clear();
    for i in 0..n {
        if target[i] >= u64::from(flows[i].floor) {
            out[i] = Allocation::Window(clamp_u32(target[i]));
            flows[i].turn_since.get_or_insert(now);
            left = left.saturating_sub(target[i]);
        } else {
            let f = &mut flows[i];
            let cap = i64::from(f.floor) * CREDIT_ROUNDS;
            f.credit = (f.credit + target[i] as i64).min(cap);
            // Flows within their shortest turn keep it; then the most credit first, then the
            // longest held, then the first (the index makes the sort stable).
            let keeps = f.turn_since.is_some_and(|t| now.saturating_since(t) < turn);
            turn_keys.push((!keeps, Reverse(f.credit), f.held_since, i as u32));
        }
    }
    turn_keys.sort_unstable();
    sharing.clear();
    sharing.extend(turn_keys.iter().map(|k| k.3 as usize));
    // Turns go in that order while floors fit. The first flow has a turn even when its floor
    // does not fit, if it has earned one (credit), and for that round only: a budget below one
    // floor is a duty cycle, the floor in a fraction budget / floor of the rounds. (Turns of
    // `turn` there ran up debts of seconds: a lone flow held through best effort's leaving.)
    granted.clear();
    granted.resize(sharing.len(), false);
    let mut used = 0u64;
    let first_earned = sharing.first().is_some_and(|&i| flows[i].credit >= 0);
    for (k, &i) in sharing.iter().enumerate() {
        let floor = u64::from(flows[i].floor);
        if used + floor <= left || (k == 0 && first_earned) {
            used += floor;
            granted[k] = true;
        }
    }
    // A flow whose turn ends keeps its window open until its data is acknowledged: new turns
    // start only as those windows close, or turns would overlap and hand out more than the
    // budget (the host with more flows would get more).
    let closing: u64 = sharing
        .iter()
        .zip(granted.iter())
        .filter(|(&i, &g)| !g && flows[i].turn_since.is_some())
        .map(|(&i, _)| flows[i].outstanding)
        .sum();
    let mut over = (used + closing).saturating_sub(left);
    for k in (1..sharing.len()).rev() {
        if over == 0 {
            break;
        }
        let i = sharing[k];
        if granted[k] && flows[i].turn_since.is_none() {
            granted[k] = false;
            over = over.saturating_sub(u64::from(flows[i].floor));
        }
    }
    for (k, &i) in sharing.iter().enumerate() {
        let f = &mut flows[i];
        if granted[k] {
            out[i] = Allocation::Window(f.floor);
            f.credit -= i64::from(f.floor);
            f.credit = f.credit.max(-i64::from(f.floor) * CREDIT_ROUNDS);
            f.turn_since.get_or_insert(now);
        } else {
            out[i] = Allocation::Hold;
            if f.turn_since.take().is_some() || f.held_since.is_none() {
                f.held_since = Some(now);
            }
        }
    }
    reserved
}

/// Where `group_key` puts the rule and the priority.
const GROUP_SHIFT: u32 = 32;
const PRIORITY_SHIFT: u32 = 112;

/// Flow `i`'s (priority, host, rule, index) as one number that sorts as the tuple does: priority
/// in bits 112-119, host 48-111, rule 32-47, index 0-31. Flows of one (priority, host, rule)
/// share `key >> GROUP_SHIFT`.
fn group_key(f: &FlowDemand, i: usize) -> u128 {
    u128::from(f.share.priority) << PRIORITY_SHIFT
        | u128::from(f.host) << 48
        | u128::from(f.rule) << GROUP_SHIFT
        | u128::from(i as u32)
}

fn clamp_u32(v: u64) -> u32 {
    v.min(u64::from(u32::MAX)) as u32
}

/// Water-filling's scratch space.
#[derive(Clone, Debug, Default)]
struct FillScratch {
    /// (level, claimant), by level.
    by_level: Vec<(f64, usize)>,
    open: Vec<bool>,
}

/// Weighted max-min split of `amount` over claimants with `demands` and weights `weight(i)`
/// (whole numbers, so their sums are exact), into `share`.
///
/// In steps: with `per_weight` the amount left over the open claimants' weight, every claimant
/// whose demand is at most `per_weight * weight` (as f64 arithmetic evaluates it) is satisfied,
/// and the step repeats with what is left; when no claimant is satisfied, each open one gets
/// `per_weight * weight` (floored) and the rounding leftovers go to the first open claimants, a
/// byte each. The claimants satisfied at a given `per_weight` are those whose level (the
/// smallest `per_weight` that satisfies them) is at most it, so one sort by level finds each
/// step's claimants at the front of the open ones: O(n log n) in all, where testing every open
/// claimant at every step was O(n^2).
fn water_fill(
    amount: u64,
    demands: &[u64],
    weight: impl Fn(usize) -> f64,
    share: &mut Vec<u64>,
    scratch: &mut FillScratch,
) {
    let n = demands.len();
    share.clear();
    share.resize(n, 0);
    if n == 0 || amount == 0 {
        return;
    }
    let by_level = &mut scratch.by_level;
    by_level.clear();
    by_level.extend((0..n).map(|i| (level(demands[i] as f64, weight(i)), i)));
    by_level.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let mut open_weight: f64 = (0..n).map(&weight).sum();
    let mut left = amount;
    let mut next = 0;
    while next < n && left > 0 {
        let per_weight = left as f64 / open_weight;
        let step = next;
        // With no open weight `per_weight` is infinite and `per_weight * 0` NaN: nobody is
        // satisfied.
        if open_weight > 0.0 {
            while next < n && by_level[next].0 <= per_weight {
                let i = by_level[next].1;
                share[i] = demands[i];
                left -= demands[i].min(left);
                open_weight -= weight(i);
                next += 1;
            }
        }
        if next == step {
            let open = &mut scratch.open;
            open.clear();
            open.resize(n, false);
            for &(_, i) in &by_level[next..] {
                open[i] = true;
            }
            let mut handed = 0u64;
            for i in (0..n).filter(|&i| open[i]) {
                let s = (per_weight * weight(i)).floor() as u64;
                share[i] += s;
                handed += s;
            }
            // Rounding leftovers go to the first claimants, a byte each.
            let mut extra = left - handed.min(left);
            for i in (0..n).filter(|&i| open[i]) {
                if extra == 0 {
                    break;
                }
                share[i] += 1;
                extra -= 1;
            }
            break;
        }
    }
}

/// The smallest `p` with `demand <= p * weight` in f64 arithmetic (`p * weight` rounded grows
/// with `p`, so every `p` from this one up satisfies it and none below does).
fn level(demand: f64, weight: f64) -> f64 {
    if weight <= 0.0 {
        return if demand <= 0.0 { 0.0 } else { f64::INFINITY };
    }
    let mut p = demand / weight;
    if p * weight >= demand {
        while next_down(p) * weight >= demand {
            p = next_down(p);
        }
    } else {
        while p * weight < demand {
            p = next_up(p);
        }
    }
    p
}

/// The least f64 above `x` (`f64::next_up`, which needs Rust 1.86: this keeps the router build
/// at Rust 1.85, what OpenWrt 23.05's packages feed has).
fn next_up(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f64::from_bits(1); // the least positive subnormal, from 0.0 and -0.0 alike
    }
    let bits = x.to_bits();
    f64::from_bits(if x > 0.0 { bits + 1 } else { bits - 1 })
}

/// The greatest f64 below `x` (`f64::next_down`, Rust 1.86).
fn next_down(x: f64) -> f64 {
    -next_up(-x)
}

#[cfg(test)]
mod tests;
