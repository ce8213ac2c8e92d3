//! The allocator's tests: hand-computed splits, and the O(n log n) allocator against the
//! previous one as a reference.

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

/// Rounds out of `rounds` (100 ms apart, turns of at least 250 ms) in which a lone flow given
/// `budget` had a turn.
fn lone_flow_turns(budget: u64, rounds: u64) -> u64 {
    let mut flows = vec![flow(1, 1)];
    let mut out = Vec::new();
    (0..rounds)
        .filter(|&r| {
            let now = Instant::from_millis(r * 100);
            allocate(budget, &mut flows, now, Duration::from_millis(250), &mut out);
            out[0] != Allocation::Hold
        })
        .count() as u64
}

#[test]
fn a_lone_flow_below_its_floor_sends_a_fraction_of_the_time() {
    let floor = u64::from(flow(1, 1).floor);
    // A quarter of a floor: a quarter of the rounds, one at a time (not turns of 250 ms).
    let quarter = lone_flow_turns(floor / 4, 400);
    assert!((95..=105).contains(&quarter), "{quarter} of 400 rounds");
    // An eighth: an eighth.
    let eighth = lone_flow_turns(floor / 8, 400);
    assert!((47..=53).contains(&eighth), "{eighth} of 400 rounds");
    // A floor or more: every round.
    assert_eq!(lone_flow_turns(floor, 50), 50);
    // Nothing: its first round (credit starts even), then never again.
    assert_eq!(lone_flow_turns(0, 50), 1);
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
        // Turns go in that order while floors fit; the first one also, for a round, once it has
        // earned one.
        let mut granted: Vec<bool> = vec![false; sharing.len()];
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
            // Below one floor the turns are a duty cycle; from one floor up someone always sends.
            let smallest = flows.iter().map(|f| u64::from(f.floor)).min().unwrap_or(0);
            if budget.max(reserved) >= smallest {
                prop_assert!(out.iter().any(|a| *a != Allocation::Hold), "someone has a turn");
            }
        }
    }
}

#[test]
fn next_up_and_down_match_std() {
    let values = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        1e-310, // subnormal
        -1e-310,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        12_345.678,
    ];
    for x in values {
        assert_eq!(next_up(x).to_bits(), x.next_up().to_bits(), "next_up({x:e})");
        assert_eq!(
            next_down(x).to_bits(),
            x.next_down().to_bits(),
            "next_down({x:e})"
        );
    }
    assert!(next_up(f64::NAN).is_nan() && next_down(f64::NAN).is_nan());
}
