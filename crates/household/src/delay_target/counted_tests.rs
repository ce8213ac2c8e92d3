//! The delay target where the router counts best effort's traffic (`counted.rs`): what best
//! effort leaves free, the aged recovery ceiling, stale bases, by hand.

use super::tests::{at, round};
use super::*;
use crate::budget::BestEffort;

/// Rounds of `c` 100 ms apart from 1.1 s on, with best effort counted (bytes, and a packet per
/// 1500 of them) and the flows' smoothed RTT the 100 ms path plus the queue:
/// `(budget, queue ms, delivered, best effort's bytes) -> (next budget, phase)`.
fn counted_rounds(c: &mut DelayTarget) -> impl FnMut(u64, u64, u64, u64) -> (u64, &'static str) + '_ {
    let mut t = 1_000;
    move |budget, queue, delivered, be| {
        t += 100;
        let mut r = at(t, round(budget, Some(queue), delivered, budget));
        r.base_rtt = Some(Duration::from_millis(100 + queue));
        r.best_effort = Some(BestEffort {
            bytes: be,
            packets: be / 1_500,
        });
        let next = c.on_round(&r);
        (next, c.stats().phase.as_str())
    }
}

#[test]
fn a_recovery_goes_no_further_than_the_links_rate_now() {
    // The background held 137.5 kB on a 10 Mbit/s link (1.25 MB/s, 100 ms base).
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    let mut step = counted_rounds(&mut c);
    assert_eq!(step(137_500, 10, 125_000, 0).1, "hold");
    // Best effort holds the link for a second; the ceiling is 85% of 137.5 kB (116875).
    let mut budget = 137_500;
    for _ in 0..12 {
        budget = step(budget, 60, 5_000, 120_000).0;
    }
    // Meanwhile the link's rate halved (peak hours): 62.5 kB per 100 ms round, best effort's
    // included, for ten seconds, so the 10 s maximum forgets the old rate.
    for _ in 0..110 {
        budget = step(budget, 60, 2_500, 60_000).0;
    }
    // Best effort leaves (the counters say so): back to the ceiling at once, which the link's
    // rate now bounds: 625 kB/s * (100 ms + 10 ms: best effort's last windows took most of the
    // link, no call) = 68750, not 85% of 137.5 kB.
    assert_eq!(step(budget, 0, 2_500, 0), (68_750, "recover"));
}

#[test]
fn best_effort_counted_takes_what_it_needs_and_gives_it_back() {
    // The background alone at its operating point on 10 Mbit/s, 100 ms (137.5 kB, 10 ms queue).
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    let mut step = counted_rounds(&mut c);
    assert_eq!(step(137_500, 10, 125_000, 0), (137_500, "hold"));
    // A download's slow start: 12.5 kB in a round (from nothing: it may double), then 25 and
    // 50 kB (doubling); the queue reads 2 ms. The link carried 1.25 MB/s; the budget is what
    // best effort's next round leaves free times (100 + 10) ms: (1.25 MB/s - 2 * 125 kB/s) *
    // 0.11 s = 110000, then (1.25 - 0.5) * 0.11 = 82500, then (1.25 - 1.0) * 0.11 = 27500.
    // (Its packets, 190 a second over the first 300 ms, would need a second such window for
    // the interactive target; the next takes most of the link, which no call does.)
    assert_eq!(step(137_500, 2, 112_500, 12_500), (110_000, "yield"));
    assert_eq!(step(110_000, 2, 100_000, 25_000), (82_500, "yield"));
    assert_eq!(step(82_500, 2, 75_000, 50_000), (27_500, "yield"));
    // Best effort fills the link (1.2 MB/s, still rising: it may double again) with 10 ms of
    // queue: nothing left, the engine's minimum.
    assert_eq!(step(27_500, 10, 5_000, 120_000), (2_896, "yield"));
    // It holds the link, steady: 50 kB/s left, 5500 bytes at 110 ms, and the queue at the
    // target: the budget holds.
    assert_eq!(step(2_896, 10, 2_896, 120_000), (2_896, "hold"));
    // It leaves: the counters say so, back to the operating point before it came at once. That
    // point ages to the rate the link carries: 1.25 MB/s * 110 ms = 137500.
    assert_eq!(step(2_896, 0, 2_896, 0), (137_500, "recover"));
}

/// Ten rounds of the background at its operating point on 10 Mbit/s, 100 ms (137.5 kB), round
/// `i` reading `queue(i)` ms with best effort counted at `be` bytes a round: whether the
/// controller took the bases for stale (the request stays until the engine takes it).
fn takes_bases_for_stale(queue: impl Fn(u32) -> u64, be: u64) -> bool {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    let mut step = counted_rounds(&mut c);
    let mut budget = step(137_500, 10, 125_000, 0).0;
    for i in 0..10 {
        budget = step(budget, queue(i), 125_000, be).0;
    }
    drop(step);
    c.take_stale_base()
}

#[test]
fn a_queue_nobody_explains_takes_the_bases_for_stale() {
    // The path got 15 ms longer: the queue reads 15 ms however far the budget is cut.
    assert!(takes_bases_for_stale(|_| 15, 0));
    // The background's own queue: it falls under the target once the budget is cut.
    assert!(!takes_bases_for_stale(|i| if i < 2 { 15 } else { 8 }, 0));
    // Best effort holds the queue (a fifth of the link): its, not a stale base.
    assert!(!takes_bases_for_stale(|_| 15, 25_000));
}

#[test]
fn a_stale_base_undoes_the_cuts_it_caused() {
    // The path got 30 ms longer under the background alone (10 Mbit/s, 100 ms): every round
    // reads 30 ms of "queue" while the budget is cut.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    let mut step = counted_rounds(&mut c);
    let before = step(137_500, 10, 125_000, 0).0;
    // The flows' smoothed RTT went from 110 to 130 ms: the longer path needs 20 ms * 1.25 MB/s
    // more in flight.
    let back = before + 25_000;
    let mut budget = before;
    let mut budgets = Vec::new();
    for _ in 0..8 {
        let (next, phase) = step(budget, 30, 100_000, 0);
        budgets.push((next, phase));
        budget = next;
        if next >= before {
            break;
        }
    }
    // Cut on the phantom queue first, then back to the budget it appeared at plus the longer
    // path's bytes, in a few rounds.
    assert!(budgets[0].0 < before, "{budgets:?}");
    assert_eq!(budgets.last(), Some(&(back, "hold")), "{budgets:?}");
    assert!(budgets.len() <= 5, "{budgets:?}");
    // The next round is the fresh-base slowdown's first, on the old bases: it keeps the budget.
    assert_eq!(step(back, 30, 100_000, 0), (back, "hold"));
    drop(step);
    assert!(c.take_stale_base());
}

#[test]
fn a_stale_base_goes_back_with_the_longer_paths_bytes() {
    // As above, and the flows' smoothed RTTs show the path 30 ms longer (100 -> 130 ms): back
    // to the budget before the phantom plus 30 ms of the link's rate (1.25 MB/s): +37500.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    let mut budget = 137_500;
    let mut t = 1_000;
    let mut step = |budget: u64, queue: u64, delivered: u64, rtt: u64| {
        t += 100;
        let mut r = at(t, round(budget, Some(queue), delivered, budget));
        r.best_effort = Some(BestEffort::default());
        r.base_rtt = Some(Duration::from_millis(rtt));
        c.on_round(&r)
    };
    assert_eq!(step(budget, 10, 125_000, 100), 137_500);
    let mut budgets = Vec::new();
    for _ in 0..8 {
        budget = step(budget, 30, 100_000, 130);
        budgets.push(budget);
        if budget > 137_500 {
            break;
        }
    }
    assert_eq!(budgets.last(), Some(&175_000), "{budgets:?}");
}

#[test]
fn a_budget_that_grew_into_its_queue_is_no_stale_base() {
    // Probing: the budget grew by half in two rounds, and its queue shows: the budget two rounds
    // back is below the one the queue appeared at, which is no cut.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    let mut step = counted_rounds(&mut c);
    let mut budget = 100_000;
    for _ in 0..2 {
        budget = step(budget, 0, 125_000, 0).0.max(budget * 5 / 4);
    }
    for _ in 0..2 {
        budget = step(budget, 12, 125_000, 0).0;
    }
    drop(step);
    assert!(!c.take_stale_base());
}

#[test]
fn a_policed_flows_queue_is_no_stale_base() {
    // A policed UDP flow follows the budget by a step per few rounds: its queue outlasts the
    // cuts, and they are no sign of a stale base.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    let mut budget = 137_500;
    for i in 0..10 {
        let mut r = at(1_100 + 100 * i, round(budget, Some(30), 100_000, budget));
        r.best_effort = Some(BestEffort::default());
        r.members_follow_budget = false;
        budget = c.on_round(&r);
    }
    assert!(!c.take_stale_base());
    assert!(budget < 137_500 / 2, "{budget}");
}

#[test]
fn counted_a_hold_nobody_confirms_restores_at_once() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    let counted = |ms: u64, budget: u64, be: u64| {
        let mut r = at(ms, round(budget, Some(2), 125_000, 137_500));
        r.best_effort = Some(BestEffort {
            bytes: be,
            packets: be / 1_500,
        });
        r
    };
    // Below the target: the budget grows to 142.5 kB.
    let start = c.on_round(&counted(1_000, 137_500, 0));
    assert_eq!(start, 142_500);
    // A SYN: six rounds at the floors; best effort fetches 30 kB a round at most (a web page's
    // object, a quarter of the link: never half of it).
    c.on_competitor(Instant::from_millis(1_050));
    let mut budget = start;
    for i in 1..=6 {
        budget = c.on_round(&counted(1_000 + 100 * i, budget, if i < 4 { 30_000 } else { 0 }));
        assert_eq!(budget, 2_896, "round {i} of the hold");
    }
    // Unconfirmed: back to 137.5 kB at once (best effort negligible now: nothing bounds it).
    assert_eq!(c.on_round(&counted(1_700, budget, 0)), start);
    assert_eq!(c.stats().phase.as_str(), "recover");
}

#[test]
fn what_a_link_carries_while_not_full_is_no_bound() {
    // A steady 6.5 Mbit/s best-effort download (82 kB a round) on a 10 Mbit/s link with an
    // empty queue; the background joins with the initial window. The link carried 96 kB a
    // round, but it was not full: the background grows into the spare capacity by the delay
    // rule (lab `cbr`: it swung between the initial window and its floor for seconds when that
    // carried rate bounded it). Its first round sees best effort from nothing, which may be a
    // slow start: the floor (82 kB doubled fills the link).
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 14_480);
    let mut step = counted_rounds(&mut c);
    assert_eq!(step(14_480, 0, 14_480, 82_000), (2_896, "yield"));
    let mut budget = 14_480;
    let mut budgets = Vec::new();
    for _ in 0..8 {
        // What it delivers: its budget per 110 ms, up to what the link leaves (43 kB a round).
        budget = step(budget, 0, (budget * 10 / 11).min(43_000), 82_000).0;
        budgets.push(budget);
    }
    assert!(budgets.iter().all(|&b| b >= 14_480), "{budgets:?}");
    assert!(budget > 40_000, "{budgets:?}");
    // Once the link fills (a queue of a quarter of the target and more), what it carries bounds
    // the budget: 1.25 MB/s carried, best effort 820 kB/s steady: (1.25 - 0.82) MB/s * 110 ms =
    // 47300.
    assert_eq!(step(60_000, 6, 43_000, 82_000), (47_300, "yield"));
}

#[test]
fn beside_a_call_the_link_is_not_lifted() {
    // Best effort steady at 310 kB/s (a quarter of the link) on an empty queue, the background
    // at 40 kB. As a few large packets a round it is no call: the link's room lifts the bound and
    // the background grows. As a call (30 packets a round, the interactive target after two
    // 300 ms windows) the call would pay the queue a probe into unseen room builds: the bound
    // stays what the link carried, and the background grows no further than that.
    let run = |packets: u64| {
        let mut c = DelayTarget::new(DelayTargetConfig::default(), 40_000);
        let mut budget = 40_000;
        for i in 0..12 {
            let mut r = at(
                1_100 + 100 * i,
                round(budget, Some(0), (budget * 10 / 11).min(94_000), budget),
            );
            r.best_effort = Some(BestEffort {
                bytes: 31_000,
                packets,
            });
            budget = c.on_round(&r);
        }
        budget
    };
    let bulk = run(2);
    let call = run(30);
    assert!(bulk > 90_000, "{bulk}");
    assert!(call < 60_000, "{call}");
}

#[test]
fn a_recovery_ages_by_the_path_not_the_smoothed_rtt() {
    // The background held 235 kB (an overshoot) on a 10 Mbit/s link (1.25 MB/s), 100 ms path.
    // Best effort holds the link for 1.2 s (its queue 60 ms), then leaves; the smoothed RTT
    // still reads 130 ms in the round the counters see it gone.
    let recover_to = |min_rtt: Option<Duration>| {
        let mut c = DelayTarget::new(DelayTargetConfig::default(), 235_000);
        let mut t = 1_000;
        let mut step = |budget: u64, queue: u64, delivered: u64, be: u64, smoothed: u64| {
            t += 100;
            let mut r = at(t, round(budget, Some(queue), delivered, budget));
            r.base_rtt = Some(Duration::from_millis(smoothed));
            r.min_rtt = min_rtt;
            r.best_effort = Some(BestEffort {
                bytes: be,
                packets: be / 1_500,
            });
            (c.on_round(&r), c.stats().phase.as_str())
        };
        let mut budget = step(235_000, 10, 125_000, 0, 110).0;
        for _ in 0..12 {
            budget = step(budget, 60, 5_000, 120_000, 160).0;
        }
        step(budget, 0, 2_500, 0, 130)
    };
    // The ceiling (235 kB, armed when best effort's rate first capped the budget) ages to the
    // operating point at the link's rate: 1.25 MB/s * (100 ms path + 10 ms target).
    assert_eq!(recover_to(Some(Duration::from_millis(100))), (137_500, "recover"));
    // Without the members' smallest round trips, by the smoothed RTT: 1.25 MB/s * 140 ms.
    assert_eq!(recover_to(None), (175_000, "recover"));
}

#[test]
fn a_duty_cycle_ends_when_the_counters_say_best_effort_left() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 150_000);
    let counted = |ms: u64, budget: u64, queue: Option<u64>, best_effort: u64| {
        let mut r = at(ms, round(budget, queue, 5_000, budget));
        r.best_effort = Some(BestEffort {
            bytes: best_effort,
            packets: best_effort / 1500,
        });
        r
    };
    // Best effort fills the link (1.2 MB/s of 1.25).
    for ms in [1_000, 1_100, 1_200, 1_300, 1_400] {
        c.on_round(&counted(ms, 150_000, Some(50), 120_000));
    }
    // A budget below one floor (2896), a round in which the lone flow was held: nothing
    // measured, best effort still there: kept.
    assert_eq!(c.on_round(&counted(1_500, 400, None, 120_000)), 400);
    // Best effort gone (a ping's bytes): one floor, so the next round measures.
    assert_eq!(c.on_round(&counted(1_600, 400, None, 100)), 2896);
    // Without counters nothing is known: kept.
    assert_eq!(c.on_round(&at(1_700, round(400, None, 0, 400))), 400);
}
