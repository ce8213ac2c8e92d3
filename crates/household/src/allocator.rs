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
//!    robin, Shreedhar & Varghese 1996).

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
    // Turns go in that order while floors fit (one flow always has a turn, so the link is never
    // idle for want of one).
    granted.clear();
    granted.resize(sharing.len(), false);
    let mut used = 0u64;
    for (k, &i) in sharing.iter().enumerate() {
        let floor = u64::from(flows[i].floor);
        if used + floor <= left || k == 0 {
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
        while p.next_down() * weight >= demand {
            p = p.next_down();
        }
    } else {
        while p * weight < demand {
            p = p.next_up();
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MSS: u32 = 1448;

    fn flow(host: u64, rule: u16) -> FlowDemand {
        FlowDemand {
            host,
            rule,
            share: ShareSpec::default(),
            rtt: Duration::from_millis(100),
            floor: 2 * MSS,
            demand: u64::MAX,
            outstanding: 0,
            credit: 0,
            turn_since: None,
            held_since: None,
        }
    }

    fn windows(out: &[Allocation]) -> Vec<u32> {
        out.iter()
            .map(|a| match a {
                Allocation::Window(w) => *w,
                Allocation::Hold => 0,
            })
            .collect()
    }

    fn run(budget: u64, flows: &mut [FlowDemand]) -> Vec<Allocation> {
        let mut out = Vec::new();
        allocate(budget, flows, Instant::ZERO, Duration::from_millis(500), &mut out);
        out
    }

    #[test]
    fn equal_per_host_then_per_flow() {
        // Host 1 has one flow, host 2 three: 120000 bytes -> 60000 per host.
        let mut flows = vec![flow(1, 1), flow(2, 1), flow(2, 1), flow(2, 1)];
        assert_eq!(
            windows(&run(120_000, &mut flows)),
            vec![60_000, 20_000, 20_000, 20_000]
        );
    }

    #[test]
    fn weights_between_rules() {
        // Rules of weight 1 and 3, on one host or on two: 1:3.
        let mut flows = vec![flow(1, 1), flow(1, 2)];
        flows[1].share.weight = 3;
        assert_eq!(windows(&run(100_000, &mut flows)), vec![25_000, 75_000]);
        let mut flows = vec![flow(1, 1), flow(2, 2)];
        flows[1].share.weight = 3;
        assert_eq!(windows(&run(100_000, &mut flows)), vec![25_000, 75_000]);
    }

    #[test]
    fn demand_left_unused_goes_to_others() {
        let mut flows = vec![flow(1, 1), flow(2, 1)];
        flows[0].demand = 10_000;
        assert_eq!(windows(&run(100_000, &mut flows)), vec![10_000, 90_000]);
    }

    #[test]
    fn strict_priority() {
        let mut flows = vec![flow(1, 1), flow(1, 2)];
        flows[1].share.priority = 1;
        // Priority 0 can use everything: priority 1 gets only its floor.
        assert_eq!(windows(&run(100_000, &mut flows)), vec![100_000, 2 * MSS]);
        // Priority 0 uses 30000: the rest goes to priority 1.
        flows[0].demand = 30_000;
        assert_eq!(windows(&run(100_000, &mut flows)), vec![30_000, 70_000]);
    }

    #[test]
    fn min_rate_is_reserved_whatever_the_budget() {
        // 2 Mbit/s = 250000 B/s at 100 ms: 25000 bytes, even with a budget of 10000.
        let mut flows = vec![flow(1, 1), flow(1, 2)];
        flows[0].share.min_rate = 250_000;
        let mut out = Vec::new();
        let reserved = allocate(
            10_000,
            &mut flows,
            Instant::ZERO,
            Duration::from_millis(500),
            &mut out,
        );
        assert_eq!(reserved, 25_000);
        assert_eq!(out[0], Allocation::Window(25_000));
        // The other flow takes its turn with the floor (budget below floors).
        assert_eq!(out[1], Allocation::Window(2 * MSS));
    }

    #[test]
    fn time_sharing_holds_and_rotates() {
        // 8 flows, budget for 2 floors: 2 turns at a time, and over 8 rounds (turn of one round)
        // every flow gets the same number of turns.
        let mut flows: Vec<FlowDemand> = (0..8).map(|h| flow(h, 1)).collect();
        let mut turns = [0u32; 8];
        let mut out = Vec::new();
        for round in 0..16u64 {
            let now = Instant::from_millis(round * 100);
            allocate(
                4 * u64::from(MSS),
                &mut flows,
                now,
                Duration::from_millis(100),
                &mut out,
            );
            let active: Vec<usize> = (0..8).filter(|&i| out[i] != Allocation::Hold).collect();
            assert_eq!(active.len(), 2, "round {round}: {out:?}");
            for i in active {
                turns[i] += 1;
            }
        }
        assert!(turns.iter().all(|&t| t == 4), "{turns:?}");
    }

    #[test]
    fn one_turn_even_below_one_floor() {
        let mut flows = vec![flow(1, 1), flow(2, 1)];
        let out = run(100, &mut flows);
        assert_eq!(out.iter().filter(|a| **a != Allocation::Hold).count(), 1);
    }

    /// The allocator as it was before it was made O(n log n) (linear group lookups, a water-fill
    /// that tests every open claimant at every step): the reference the fast one must match,
    /// byte for byte.
    mod reference {
        use super::super::{clamp_u32, Allocation, FlowDemand, CREDIT_ROUNDS};
        use slipstream_control::{Duration, Instant};

        pub(super) fn allocate(
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
            // 1. Minimum rates.
            let mut per_rule: Vec<(u16, usize)> = Vec::new();
            for f in flows.iter() {
                if f.share.min_rate > 0 {
                    match per_rule.iter_mut().find(|(r, _)| *r == f.rule) {
                        Some((_, c)) => *c += 1,
                        None => per_rule.push((f.rule, 1)),
                    }
                }
            }
            let reserve: Vec<u64> = flows
                .iter()
                .map(|f| {
                    if f.share.min_rate == 0 {
                        return 0;
                    }
                    let count = per_rule.iter().find(|(r, _)| *r == f.rule).map_or(1, |(_, c)| *c) as f64;
                    let window = f.share.min_rate as f64 / count * f.rtt.as_secs_f64();
                    (window.ceil() as u64).max(u64::from(f.floor))
                })
                .collect();
            let reserved: u64 = reserve.iter().sum();
            let mut rest = budget.saturating_sub(reserved);

            // 2-3. Priorities, then water-filling over (host, rule) groups and within each group.
            let mut fair = vec![0u64; n];
            let mut priorities: Vec<u8> = flows.iter().map(|f| f.share.priority).collect();
            priorities.sort_unstable();
            priorities.dedup();
            for priority in priorities {
                let members: Vec<usize> = (0..n).filter(|&i| flows[i].share.priority == priority).collect();
                let mut groups: Vec<(u64, u16, Vec<usize>)> = Vec::new();
                for &i in &members {
                    let (host, rule) = (flows[i].host, flows[i].rule);
                    match groups.iter_mut().find(|g| g.0 == host && g.1 == rule) {
                        Some(g) => g.2.push(i),
                        None => groups.push((host, rule, vec![i])),
                    }
                }
                let demand = |i: usize| flows[i].demand.saturating_sub(reserve[i]);
                let group_demand: Vec<u64> = groups
                    .iter()
                    .map(|g| g.2.iter().map(|&i| demand(i)).fold(0u64, u64::saturating_add))
                    .collect();
                let weights: Vec<f64> = groups
                    .iter()
                    .map(|g| f64::from(flows[g.2[0]].share.weight))
                    .collect();
                let group_share = water_fill(rest, &group_demand, &weights);
                for (g, share) in groups.iter().zip(&group_share) {
                    let demands: Vec<u64> = g.2.iter().map(|&i| demand(i)).collect();
                    let ones = vec![1.0; demands.len()];
                    for (&i, s) in g.2.iter().zip(water_fill(*share, &demands, &ones)) {
                        fair[i] = s;
                    }
                }
                rest = rest.saturating_sub(group_share.iter().sum());
            }

            // 4. Floors and time-sharing.
            let target: Vec<u64> = (0..n).map(|i| reserve[i] + fair[i]).collect();
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
            let mut sharing: Vec<usize> = Vec::new();
            for i in 0..n {
                if target[i] >= u64::from(flows[i].floor) {
                    out[i] = Allocation::Window(clamp_u32(target[i]));
                    flows[i].turn_since.get_or_insert(now);
                    left = left.saturating_sub(target[i]);
                } else {
                    let f = &mut flows[i];
                    let cap = i64::from(f.floor) * CREDIT_ROUNDS;
                    f.credit = (f.credit + target[i] as i64).min(cap);
                    sharing.push(i);
                }
            }
            // Flows within their shortest turn keep it; then the most credit first.
            sharing.sort_by_key(|&i| {
                let f = &flows[i];
                let keeps = f.turn_since.is_some_and(|t| now.saturating_since(t) < turn);
                (!keeps, std::cmp::Reverse(f.credit), f.held_since)
            });
            // Turns go in that order while floors fit (one flow always has a turn, so the link is never
            // idle for want of one).
            let mut granted: Vec<bool> = vec![false; sharing.len()];
            let mut used = 0u64;
            for (k, &i) in sharing.iter().enumerate() {
                let floor = u64::from(flows[i].floor);
                if used + floor <= left || k == 0 {
                    used += floor;
                    granted[k] = true;
                }
            }
            // A flow whose turn ends keeps its window open until its data is acknowledged: new turns
            // start only as those windows close, or turns would overlap and hand out more than the
            // budget (the host with more flows would get more).
            let closing: u64 = sharing
                .iter()
                .zip(&granted)
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

        pub(super) fn water_fill(amount: u64, demands: &[u64], weights: &[f64]) -> Vec<u64> {
            let n = demands.len();
            let mut share = vec![0u64; n];
            let mut open: Vec<usize> = (0..n).collect();
            let mut left = amount;
            while !open.is_empty() && left > 0 {
                let weight: f64 = open.iter().map(|&i| weights[i]).sum();
                let per_weight = left as f64 / weight;
                // Claimants whose remaining demand is below their fair part are satisfied first.
                let (done, rest): (Vec<usize>, Vec<usize>) = open
                    .iter()
                    .partition(|&&i| ((demands[i] - share[i]) as f64) <= per_weight * weights[i]);
                if done.is_empty() {
                    let mut handed = 0u64;
                    for &i in &rest {
                        let s = (per_weight * weights[i]).floor() as u64;
                        share[i] += s;
                        handed += s;
                    }
                    // Rounding leftovers go to the first claimants, a byte each.
                    let mut extra = left - handed.min(left);
                    for &i in &rest {
                        if extra == 0 {
                            break;
                        }
                        share[i] += 1;
                        extra -= 1;
                    }
                    break;
                }
                for &i in &done {
                    let give = demands[i] - share[i];
                    share[i] += give;
                    left -= give.min(left);
                }
                open = rest;
            }
            share
        }
    }

    /// A small deterministic generator (SplitMix64), so the comparisons below are the same every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        /// A demand: often one of few values (ties), sometimes none, huge or unlimited.
        fn demand(&mut self) -> u64 {
            match self.below(8) {
                0 => 0,
                1 => u64::MAX,
                2 => 1 << (40 + self.below(23)),
                3 | 4 => 1000 * (1 + self.below(4)),
                _ => self.below(200_000),
            }
        }
    }

    #[test]
    fn water_fill_matches_the_reference() {
        let mut rng = Rng(0x5eed_0001);
        let mut share = Vec::new();
        let mut scratch = FillScratch::default();
        for case in 0..20_000 {
            let n = 1 + rng.below(if case % 10 == 0 { 300 } else { 24 }) as usize;
            let demands: Vec<u64> = (0..n).map(|_| rng.demand()).collect();
            let weights: Vec<f64> = match rng.below(4) {
                0 => vec![1.0; n],
                // A zero weight cannot be configured, but the arithmetic must still agree.
                1 => (0..n).map(|_| rng.below(3) as f64).collect(),
                _ => (0..n).map(|_| (1 + rng.below(1000)) as f64).collect(),
            };
            let finite: u64 = demands.iter().filter(|&&d| d < 1 << 40).sum();
            let amount = match rng.below(4) {
                0 => rng.below(1000),
                1 => finite / (1 + rng.below(4)),
                2 => finite + rng.below(1 << 20),
                _ => rng.below(1 << 40),
            };
            water_fill(amount, &demands, |i| weights[i], &mut share, &mut scratch);
            let expected = reference::water_fill(amount, &demands, &weights);
            assert_eq!(
                share, expected,
                "case {case}: amount {amount} demands {demands:?} weights {weights:?}"
            );
        }
    }

    #[test]
    fn level_is_the_first_amount_per_weight_that_satisfies() {
        let mut rng = Rng(0x5eed_0003);
        let mut quotient_off = 0;
        for _ in 0..100_000 {
            let demand = rng.demand() as f64;
            let weight = (1 + rng.below(1000)) as f64;
            let p = level(demand, weight);
            assert!(p * weight >= demand, "{demand} / {weight}: {p}");
            assert!(p.next_down() * weight < demand, "{demand} / {weight}: {p}");
            quotient_off += usize::from(p != demand / weight);
        }
        // The plain quotient is not always it (so sorting by it could misplace a claimant).
        assert!(quotient_off > 0);
    }

    #[test]
    fn allocate_matches_the_reference() {
        let mut rng = Rng(0x5eed_0002);
        let mut scratch = AllocScratch::default();
        let (mut out, mut expected_out) = (Vec::new(), Vec::new());
        for case in 0..2_000 {
            let n = 1 + rng.below(if case % 10 == 0 { 400 } else { 40 }) as usize;
            let hosts = 1 + rng.below(12);
            let rules: Vec<ShareSpec> = (0..4)
                .map(|_| ShareSpec {
                    weight: 1 + rng.below(5) as u32,
                    min_rate: if rng.below(4) == 0 { rng.below(400_000) } else { 0 },
                    priority: rng.below(3) as u8,
                })
                .collect();
            let mut flows: Vec<FlowDemand> = (0..n)
                .map(|_| {
                    let rule = 1 + rng.below(4) as u16;
                    FlowDemand {
                        host: rng.below(hosts).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                        rule,
                        share: rules[usize::from(rule) - 1],
                        rtt: Duration::from_millis(5 + rng.below(200)),
                        floor: 2 * (536 + rng.below(1000) as u32),
                        demand: rng.demand(),
                        outstanding: rng.below(40_000),
                        credit: 0,
                        turn_since: None,
                        held_since: None,
                    }
                })
                .collect();
            let floors: u64 = flows.iter().map(|f| u64::from(f.floor)).sum();
            let budget = match rng.below(3) {
                0 => rng.below(floors),
                1 => floors + rng.below(4 * floors),
                _ => rng.below(1 << 30),
            };
            let turn = Duration::from_millis(50 + rng.below(500));
            let mut expected_flows = flows.clone();
            for round in 0..1 + rng.below(6) {
                let now = Instant::from_millis(round * (10 + rng.below(200)));
                // Demands change between rounds, as flows speed up and slow down.
                for (f, e) in flows.iter_mut().zip(&mut expected_flows) {
                    if rng.below(3) == 0 {
                        f.demand = rng.demand();
                        e.demand = f.demand;
                    }
                }
                let reserved = allocate_with(&mut scratch, budget, &mut flows, now, turn, &mut out);
                let expected = reference::allocate(budget, &mut expected_flows, now, turn, &mut expected_out);
                assert_eq!(reserved, expected, "case {case} round {round}: reserved");
                assert_eq!(out, expected_out, "case {case} round {round}: {flows:?}");
                assert_eq!(
                    flows, expected_flows,
                    "case {case} round {round}: time-sharing state"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn allocation_invariants(
            budget in 0u64..2_000_000,
            spec in proptest::collection::vec((0u64..4, 1u16..4, 1u32..5, 0u64..300_000, 0u8..2, any::<bool>()), 1..40),
            rounds in 1usize..6,
        ) {
            let mut flows: Vec<FlowDemand> = spec
                .iter()
                .map(|&(host, rule, weight, min_rate, priority, limited)| FlowDemand {
                    share: ShareSpec { weight, min_rate: if rule == 3 { min_rate } else { 0 }, priority },
                    demand: if limited { 20_000 } else { u64::MAX },
                    ..flow(host, rule)
                })
                .collect();
            let mut out = Vec::new();
            for r in 0..rounds {
                let now = Instant::from_millis(r as u64 * 100);
                let reserved = allocate(budget, &mut flows, now, Duration::from_millis(100), &mut out);
                prop_assert_eq!(out.len(), flows.len());
                let floors: u64 = flows.iter().map(|f| u64::from(f.floor)).sum();
                let total: u64 = windows(&out).iter().map(|&w| u64::from(w)).sum();
                // Never more than the budget (or the minimum rates), except that every flow with a
                // window gets at least its floor and one flow always has a turn.
                let limit = budget.max(reserved) + if floors > budget.max(reserved) { 2 * u64::from(MSS) } else { floors };
                prop_assert!(total <= limit, "total {} limit {}", total, limit);
                for (f, a) in flows.iter().zip(&out) {
                    if let Allocation::Window(w) = a {
                        prop_assert!(*w >= f.floor, "window {} below floor", w);
                    }
                }
                prop_assert!(out.iter().any(|a| *a != Allocation::Hold), "someone has a turn");
            }
        }
    }
}
