//! The delay-target controller's tests: hand-computed rounds.

use super::*;
use crate::budget::BestEffort;
use slipstream_control::Instant;

pub(super) fn round(budget: u64, queue_ms: Option<u64>, delivered: u64, in_flight: u64) -> LinkRound {
    LinkRound {
        now: Instant::from_millis(1000),
        interval: Duration::from_millis(100),
        queue_delay: queue_ms.map(Duration::from_millis),
        base_rtt: Some(Duration::from_millis(100)),
        delivered_bytes: delivered,
        budget_in_force: budget,
        in_flight,
        mss: 1448,
        active_flows: 1,
        floors: 2896,
        best_effort: None,
        steady_flow: false,
        members_follow_budget: true,
        min_rtt: None,
    }
}

/// `r` at `ms` milliseconds.
pub(super) fn at(ms: u64, mut r: LinkRound) -> LinkRound {
    r.now = Instant::from_millis(ms);
    r
}

/// Rounds of `c` `every_ms` apart from 1 s on (0: all at 1 s), each with delivered = in flight
/// = the budget in force: `(budget, queue ms) -> (next budget, phase)`.
pub(super) fn rounds_every(
    c: &mut DelayTarget,
    every_ms: u64,
) -> impl FnMut(u64, u64) -> (u64, &'static str) + '_ {
    let mut t = 1000;
    move |budget, queue| {
        t += every_ms;
        let next = c.on_round(&at(t, round(budget, Some(queue), budget, budget)));
        (next, c.stats().phase.as_str())
    }
}

#[test]
fn proportional_step_by_hand() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 150_000);
    // q = 6 ms (above half the 10 ms target, below it): step = 0.5 * 4 ms * 1.25 MB/s = 2500.
    assert_eq!(c.on_round(&round(150_000, Some(6), 125_000, 150_000)), 152_500);
    assert_eq!(c.stats().phase.as_str(), "hold");
    // q = 15 ms: step = 0.5 * -5 ms * 1.25 MB/s = -3125.
    assert_eq!(c.on_round(&round(150_000, Some(15), 125_000, 150_000)), 146_875);
    assert_eq!(c.stats().phase.as_str(), "yield");
    // q = 30 ms, above twice the target: step = 0.5 * -20 ms * 1.25 MB/s = -12500, but
    // the multiplicative yield, 150000 * 20 / 30 = 100000, is larger.
    assert_eq!(c.on_round(&round(150_000, Some(30), 125_000, 150_000)), 100_000);
    // q = 50 ms, above four times the target: halve.
    assert_eq!(c.on_round(&round(150_000, Some(50), 125_000, 150_000)), 75_000);
    // q = 500 ms: the step would go below zero; at most halve.
    assert_eq!(c.on_round(&round(150_000, Some(500), 125_000, 150_000)), 75_000);
}

#[test]
fn probes_geometrically_well_below_target() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 10_000);
    // q = 0: step = 0.5 * 10 ms * 100 kB/s = 500; the first low round grows by that only.
    assert_eq!(c.on_round(&round(10_000, Some(0), 10_000, 10_000)), 10_500);
    assert_eq!(c.stats().phase.as_str(), "hold");
    // The second: growth 1.5x wins: 15750.
    assert_eq!(c.on_round(&round(10_500, Some(0), 10_000, 10_500)), 15_750);
    assert_eq!(c.stats().phase.as_str(), "probe");
}

#[test]
fn a_freed_link_is_taken_back_quickly_after_a_long_yield() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    // (budget in force, queue ms, delivered = in flight) -> next budget, phase; one round
    // every 300 ms (rounds last an RTT that the queue lengthens; delivered per 100 ms interval).
    let mut step = rounds_every(&mut c, 300);
    // At 100 kB (1 MB/s, the link's rate C) the queue sits at the target.
    assert_eq!(step(100_000, 10), (100_000, "hold"));
    // Best effort arrives: 50 ms. Step 0.5 * -40 ms * C = -20000, but 2T/q = 0.4 is larger,
    // capped at halving.
    assert_eq!(step(100_000, 50), (50_000, "yield"));
    assert_eq!(step(50_000, 50), (25_000, "yield"));
    // The queue shrinks after that cut (30 ms): it is taking hold, this round only measures.
    assert_eq!(step(10_000, 30), (10_000, "yield"));
    // C is still the link's 1 MB/s although the background delivers only 100 kB/s: the
    // step, -10000, and 2T/q = 2/3 are both below halving (the queue held: no second round
    // of the drain).
    assert_eq!(step(10_000, 30), (5_000, "yield"));
    // The fifth round above the target, 1.2 s after the first: best effort holds the link,
    // recovery is armed.
    assert_eq!(step(10_000, 30), (5_000, "yield"));
    // Best effort leaves. Its queue held five rounds and a second, so the first low round recovers to half
    // the ceiling (85% of the 100 kB before the yield: 42500), which beats the proportional
    // step (5000 + 0.5 * 10 ms * C = 10000) and doubling (10000).
    assert_eq!(step(5_000, 0), (42_500, "recover"));
    // The second, to the ceiling, no settling rounds.
    assert_eq!(step(42_500, 0), (85_000, "recover"));
    // At the ceiling: the cautious probe, 1.5x (127500), but not past the operating point
    // C * (base + T) = 1 MB/s * 110 ms (C measured in the first round, at the target), then a
    // settling round.
    assert_eq!(step(85_000, 0), (110_000, "probe"));
    assert_eq!(step(110_000, 0), (110_000, "probe"));
}

#[test]
fn the_probe_stops_at_the_operating_point_once_the_link_rate_is_known() {
    // 10 Mbit/s (C = 1.25 MB/s), 100 ms: the operating point is C * (100 + 10 ms) = 137500.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 80_000);
    let mut step = rounds_every(&mut c, 100);
    // Before any round with a queue the rate is unknown: a link found by probing, 1.5x.
    // The first low round: the proportional step, 0.5 * 10 ms * 0.8 MB/s = 4000.
    assert_eq!(step(80_000, 0), (84_000, "hold"));
    assert_eq!(step(84_000, 0), (126_000, "probe"));
    // The link is full and the queue at the target: delivered 125 kB per 100 ms.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    c.on_round(&at(1100, round(137_500, Some(10), 125_000, 137_500)));
    // A cut leaves 95 kB; two empty rounds: the second probes, 1.5x = 142500, stopped at
    // 137500.
    c.on_round(&at(1200, round(95_000, Some(0), 95_000, 95_000)));
    assert_eq!(
        c.on_round(&at(1300, round(95_000, Some(0), 95_000, 95_000))),
        137_500
    );
    // From 120 kB the probe would reach 180 kB, 1.44 BDP (the lab's overshoot): it stops at
    // the operating point.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    c.on_round(&at(1100, round(137_500, Some(10), 125_000, 137_500)));
    c.on_round(&at(1200, round(120_000, Some(0), 120_000, 120_000)));
    assert_eq!(
        c.on_round(&at(1300, round(120_000, Some(0), 120_000, 120_000))),
        137_500
    );
    // A settling round, then above it the proportional step alone: 140000 + 0.5 * 10 ms * C.
    assert_eq!(
        c.on_round(&at(1400, round(140_000, Some(0), 125_000, 140_000))),
        140_000
    );
    assert_eq!(
        c.on_round(&at(1500, round(140_000, Some(0), 125_000, 140_000))),
        146_250
    );
    // Ten seconds without a queue: the rate is no longer known, the probe is free again.
    assert_eq!(
        c.on_round(&at(11_200, round(90_000, Some(0), 90_000, 90_000))),
        135_000
    );
}

#[test]
fn a_rate_measured_beside_best_effort_does_not_bound_the_probe() {
    // The only rounds with a queue were beside best effort (the background delivered 20 kB per
    // 100 ms of a 125 kB link); the link's rate C came from rounds without a queue.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    c.on_round(&at(1100, round(100_000, Some(0), 125_000, 100_000)));
    c.on_round(&at(1200, round(20_000, Some(12), 20_000, 20_000)));
    c.on_round(&at(1300, round(20_000, Some(0), 20_000, 20_000)));
    // (A settling round after the step up to 26250.) 0.2 MB/s * 110 ms = 22 kB would stop
    // the probe; 1.5x instead.
    assert_eq!(
        c.on_round(&at(1400, round(40_000, Some(0), 40_000, 40_000))),
        40_000
    );
    assert_eq!(
        c.on_round(&at(1500, round(40_000, Some(0), 40_000, 40_000))),
        60_000
    );
}

#[test]
fn a_second_yield_from_the_floor_keeps_the_ceiling() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    let mut step = rounds_every(&mut c, 300);
    assert_eq!(step(100_000, 10), (100_000, "hold"));
    // Five rounds above the target, the first from 100 kB, arm the recovery to 85 kB.
    step(100_000, 30);
    for _ in 0..4 {
        step(10_000, 30);
    }
    // One round at the target mid-busy-period, then five more above it from the floor.
    assert_eq!(step(5_000, 10), (5_000, "hold"));
    for _ in 0..5 {
        step(2_896, 30);
    }
    // Best effort leaves: the recovery still goes to half of 85 kB, then all of it.
    assert_eq!(step(2_896, 0), (42_500, "recover"));
    assert_eq!(step(42_500, 0), (85_000, "recover"));
}

#[test]
fn a_dip_of_best_effort_undoes_the_quick_recovery_in_one_round() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    let mut step = rounds_every(&mut c, 300);
    // C = 1 MB/s (100 kB per 100 ms interval); five rounds above the target from 100 kB over
    // 1.2 s arm the quick recovery to 85 kB.
    assert_eq!(step(100_000, 10), (100_000, "hold"));
    step(100_000, 30);
    for _ in 0..4 {
        step(10_000, 30);
    }
    // One empty round (best effort's dip after a loss, not its end): half of 85 kB.
    assert_eq!(step(2_896, 0), (42_500, "recover"));
    // Its queue is back at 50 ms: step 42500 - 0.5 * 40 ms * C = 22500, 2T/q gives 17000,
    // capped at halving: 21250.
    assert_eq!(step(42_500, 50), (21_250, "yield"));
    // The ceiling is kept: when the queue empties again, half of it once more.
    assert_eq!(step(21_250, 0), (42_500, "recover"));
}

#[test]
fn a_brief_yield_is_followed_by_the_cautious_probe() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    // The background alone: the link stays full (1 MB/s), whatever its budget.
    let mut step = |budget: u64, queue: u64| {
        let next = c.on_round(&round(budget, Some(queue), 100_000, budget));
        (next, c.stats().phase.as_str())
    };
    assert_eq!(step(100_000, 10), (100_000, "hold"));
    // Two rounds above the target (the background's own overshoot, a burst): no recovery.
    assert_eq!(step(100_000, 50), (50_000, "yield"));
    // The round after the cut: the queue shrinks, the cut is taking hold; no second cut.
    assert_eq!(step(50_000, 30), (50_000, "yield"));
    // The queue held: yield on, 2T/q.
    assert_eq!(step(50_000, 30), (33_333, "yield"));
    // Low: +5000, a settling round, then 1.5x (not doubling towards the 85 kB before).
    assert_eq!(step(33_333, 0), (38_333, "hold"));
    assert_eq!(step(38_333, 0), (38_333, "hold"));
    assert_eq!(step(38_333, 0), (57_500, "probe"));
}

#[test]
fn a_settling_round_does_not_wait_out_a_queue_above_the_target() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    // Two low rounds: +5000 (0.5 * 10 ms * 1 MB/s), then 1.5x, which arms a settling round.
    assert_eq!(c.on_round(&round(100_000, Some(0), 100_000, 100_000)), 105_000);
    assert_eq!(c.on_round(&round(105_000, Some(0), 100_000, 105_000)), 157_500);
    // Best effort arrives during the settling round: q = 30 ms. No more than the raise's own
    // burst on top of the target (10 ms + 52.5 kB / 1 MB/s = 62.5 ms): measured, once.
    assert_eq!(c.on_round(&round(157_500, Some(30), 100_000, 157_500)), 157_500);
    // The next round still reads it: a standing queue, yielded to by 2T/q.
    assert_eq!(c.on_round(&round(157_500, Some(30), 100_000, 157_500)), 105_000);
    assert_eq!(c.stats().phase.as_str(), "yield");
    // A queue the burst does not explain (80 ms) yields at once: halved.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    c.on_round(&round(100_000, Some(0), 100_000, 100_000));
    c.on_round(&round(105_000, Some(0), 100_000, 105_000));
    assert_eq!(c.on_round(&round(157_500, Some(80), 100_000, 157_500)), 78_750);
    // Without a queue, the settling round only measures.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    c.on_round(&round(100_000, Some(0), 100_000, 100_000));
    c.on_round(&round(105_000, Some(0), 100_000, 105_000));
    assert_eq!(c.on_round(&round(157_500, Some(5), 100_000, 157_500)), 157_500);
}

#[test]
fn yields_to_its_share_when_someone_else_takes_the_link() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    // Alone: 100 kB per 100 ms round, so the link's rate C is 1 MB/s.
    assert_eq!(c.on_round(&round(100_000, Some(10), 100_000, 100_000)), 100_000);
    // Best effort took half of the link and keeps the queue at 15 ms. The first round
    // only takes the proportional step, 0.5 * -5 ms * C = -2500.
    assert_eq!(c.on_round(&round(100_000, Some(15), 50_000, 100_000)), 97_500);
    // The second: R / C over both rounds, 0.5, wins.
    assert_eq!(c.on_round(&round(100_000, Some(15), 50_000, 100_000)), 50_000);
    // A burst of 110 kB raises C to 1.1 MB/s; over two rounds R is 800 kB/s, 0.73 C: noise,
    // only the proportional step, 0.5 * -5 ms * 1.1 MB/s = -2750.
    assert_eq!(c.on_round(&round(100_000, Some(15), 110_000, 100_000)), 97_250);
    // Below the target, never (the step is 0.5 * 2 ms * 1.1 MB/s).
    assert_eq!(c.on_round(&round(100_000, Some(8), 50_000, 100_000)), 101_100);
    assert_eq!(c.on_round(&round(100_000, Some(8), 50_000, 100_000)), 101_100);
}

#[test]
fn an_overshoot_alone_is_cut_once_not_once_per_stale_round() {
    // The background alone without timestamps (lab no-timestamps, 10 Mbit/s, 100 ms, a 1-BDP
    // queue of 125 kB; C = 1.25 MB/s): a probe took the budget to 176 kB, 51 kB over the BDP,
    // and the queue reads 40 ms. 2T/q = 0.5: 88 kB.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 176_000);
    let alone = |budget: u64, queue: u64, delivered: u64| round(budget, Some(queue), delivered, budget);
    assert_eq!(c.on_round(&alone(176_000, 40, 125_000)), 88_000);
    // The next round still sees that queue, draining (38 ms), and delivers 30 kB while the
    // sender waits out the smaller window. Before, it cut again by 2T/q (to 46316), and the
    // round after, with 15 ms of the same queue left, yielded to the two rounds' share
    // (0.4 C), at most halving: 23 kB, a fifth of the BDP (measured in the lab: 176 -> 88 ->
    // 44 -> 30 kB, and the background alone at 0.72-0.8 of the link).
    assert_eq!(c.on_round(&alone(88_000, 38, 30_000)), 88_000);
    assert_eq!(c.stats().phase.as_str(), "yield");
    // The round after, 15 ms, still below the last: the cut is still taking hold (where
    // samples lag, at long round trips, this round can still read much of the old queue).
    assert_eq!(c.on_round(&alone(88_000, 15, 70_000)), 88_000);
    // Still 15 ms: a queue that held is no longer the cut's. It takes the proportional step,
    // 0.5 * -5 ms * C = -3125, not the share test (the drain rounds do not count for it).
    assert_eq!(c.on_round(&alone(88_000, 15, 70_000)), 84_875);
    // The queue is gone: the proportional step, 0.5 * 10 ms * C = +6250.
    assert_eq!(c.on_round(&alone(84_875, 0, 84_875)), 91_125);
}

#[test]
fn grows_only_into_what_is_used() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    // The flows have only 20 kB in flight: the budget may not exceed 2 * 20k + floors.
    assert_eq!(c.on_round(&round(100_000, Some(0), 20_000, 20_000)), 100_000);
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 30_000);
    c.on_round(&round(30_000, Some(0), 20_000, 30_000));
    assert_eq!(c.on_round(&round(30_000, Some(0), 20_000, 20_000)), 42_896);
}

#[test]
fn a_best_effort_syn_drops_the_budget_before_the_queue_shows() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    assert_eq!(rounds_every(&mut c, 0)(137_500, 10), (137_500, "hold"));
    c.on_competitor(Instant::from_millis(1000));
    let mut step = rounds_every(&mut c, 0);
    // The next round drops to the one flow's floor (2896, below 137500 / 8), the queue
    // still at the target, and holds it while the queue stays low.
    assert_eq!(step(137_500, 10), (2_896, "yield"));
    assert_eq!(step(2_896, 0), (2_896, "yield"));
    // Best effort's slow start reaches the queue: the usual yield (at most halving, 2896
    // is the engine's minimum anyway), and the recovery is armed to 85% of 137500.
    assert_eq!(step(2_896, 50), (1_448, "yield"));
    // Best effort leaves: one low round (+ 0.5 * 10 ms * C, C = 1.375 MB/s, capped at twice
    // the 2896 in flight plus the floor: 8688), then a quarter of the ceiling 116875,
    // doubling.
    assert_eq!(step(2_896, 0), (8_688, "hold"));
    assert_eq!(step(8_688, 0), (29_219, "recover"));
    assert_eq!(step(29_219, 0), (58_438, "recover"));
    assert_eq!(step(58_438, 0), (116_875, "recover"));
}

#[test]
fn a_syn_without_a_queue_recovers_to_the_operating_point() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    c.on_competitor(Instant::from_millis(1000));
    let mut step = rounds_every(&mut c, 0);
    for _ in 0..crate::early_yield::HOLD_ROUNDS {
        assert_eq!(step(100_000, 2).1, "yield");
    }
    // No queue showed: a quarter of 85% of 100 kB, then (the queue still empty) doubling.
    assert_eq!(step(2_896, 0), (21_250, "recover"));
    assert_eq!(step(21_250, 0), (42_500, "recover"));
    assert_eq!(step(42_500, 0), (85_000, "recover"));
}

#[test]
fn ledbat_ignores_syns() {
    let mut c = DelayTarget::new(DelayTargetConfig::ledbat(), 100_000);
    c.on_competitor(Instant::from_millis(1000));
    assert_eq!(c.on_round(&round(100_000, Some(5), 100_000, 100_000)), 100_724);
}

#[test]
fn ledbat_step_by_hand() {
    let mut c = DelayTarget::new(DelayTargetConfig::ledbat(), 100_000);
    // off_target = (10 - 5) / 10 = 0.5; step = 1 * 0.5 * 1448 * 100000 / 100000 = 724.
    assert_eq!(c.on_round(&round(100_000, Some(5), 100_000, 100_000)), 100_724);
    // off_target clamps at -1: step = -1448.
    assert_eq!(c.on_round(&round(100_000, Some(80), 100_000, 100_000)), 98_552);
}

#[test]
fn keeps_budget_without_samples() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 42_000);
    assert_eq!(c.on_round(&round(42_000, None, 0, 0)), 42_000);
    assert_eq!(c.stats().phase.as_str(), "idle");
}

#[test]
fn a_short_yield_recovers_the_cautious_way() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    // Rounds of 20 ms (50 Mbit/s, 20 ms): five rounds above the target last 80 ms, best
    // effort's start rather than its whole on period.
    let mut step = rounds_every(&mut c, 20);
    assert_eq!(step(100_000, 10), (100_000, "hold"));
    step(100_000, 30);
    for _ in 0..4 {
        step(10_000, 30);
    }
    // C = 1 MB/s (100 kB per 100 ms interval). First empty round: only the proportional step,
    // 5000 + 0.5 * 10 ms * C = 10000; the second: a quarter of 85 kB; then doubling.
    assert_eq!(step(5_000, 0), (10_000, "hold"));
    assert_eq!(step(10_000, 0), (21_250, "recover"));
    assert_eq!(step(21_250, 0), (42_500, "recover"));
}

#[test]
fn a_syn_is_taken_when_the_queue_reads_just_above_the_target() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 137_500);
    assert_eq!(c.on_round(&round(137_500, Some(10), 137_500, 137_500)), 137_500);
    c.on_competitor(Instant::from_millis(1000));
    // The background at its operating point: 11 ms this round. The hold starts at the floor.
    assert_eq!(c.on_round(&round(137_500, Some(11), 137_500, 137_500)), 2_896);
    assert_eq!(c.stats().phase.as_str(), "yield");
}

#[test]
fn the_probe_stops_short_of_the_backgrounds_own_overshoot() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    // The background alone: it delivers all it may send (delivered = in flight = budget, per
    // 100 ms interval), so the link's rate C is the largest budget seen per 100 ms.
    let mut step = rounds_every(&mut c, 100);
    // Two low rounds: +5000 (0.5 * 10 ms * 1 MB/s), then 1.5x, then a settling round.
    assert_eq!(step(100_000, 0), (105_000, "hold"));
    assert_eq!(step(105_000, 0), (157_500, "probe"));
    assert_eq!(step(157_500, 0), (157_500, "probe"));
    // The queue reads 40 ms: no more than the raise's own burst on top of the target explains
    // (10 ms + 52.5 kB / 1.575 MB/s = 43.3 ms). Measured only, once.
    assert_eq!(step(157_500, 40), (157_500, "probe"));
    // Still 40 ms while the background delivers the link's rate (1.575 MB/s): its own
    // overshoot. 2T/q halves the budget, and the probe is limited for ten seconds to the
    // smallest budget of this round and the two before it that decided: 105000.
    assert_eq!(step(157_500, 40), (78_750, "yield"));
    // Low: +7875 (0.5 * 10 ms * 1.575 MB/s).
    assert_eq!(step(78_750, 0), (86_625, "hold"));
    // 1.5x would be 129937 (below C * (base + T) = 173250): limited to 105000.
    assert_eq!(step(86_625, 0), (105_000, "probe"));
    // A settling round (it grew by more than a tenth), then the proportional step alone.
    assert_eq!(step(105_000, 0), (105_000, "probe"));
    assert_eq!(step(105_000, 0), (112_875, "probe"));
    // (A queue that lasts five rounds is someone else's and lifts the limit again: the quick
    // recovery test above reaches C * (base + T) after it.)
}

#[test]
fn an_overshoot_the_link_then_outran_is_lifted() {
    // The background alone, 100 ms rounds, delivering all it may send: C is its own largest
    // rate. A probe from 52.5 to 78.75 kB, a settling round, then 60 ms of queue, more than the
    // raise's burst explains (10 ms + 26.25 kB / 787.5 kB/s = 43.3 ms): 2T/q, at most halved,
    // and the probe is limited to 52500 (the smallest budget of this round and the two before),
    // set at 787.5 kB/s.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 50_000);
    let mut step = rounds_every(&mut c, 100);
    assert_eq!(step(50_000, 0), (52_500, "hold"));
    assert_eq!(step(52_500, 0), (78_750, "probe"));
    assert_eq!(step(78_750, 0), (78_750, "probe"));
    assert_eq!(step(78_750, 60), (39_375, "yield"));
    // The link then carries 1.1 MB/s with the queue empty: it was not full at 787.5 kB/s. The
    // first low round takes the proportional step (0.5 * 10 ms * 1.1 MB/s = 5500); in the
    // second the two rounds' rate, 1.1 MB/s, is over 1.25 times the rate the limit was set at:
    // lifted, 1.5x (the limit would have left the proportional step, 115500).
    assert_eq!(step(110_000, 0), (115_500, "hold"));
    assert_eq!(step(110_000, 0), (165_000, "probe"));
}

#[test]
fn a_queue_past_the_operating_point_is_no_raises_burst() {
    // Flows taking turns: their smoothed RTT reads 180 ms, their smallest round trips 100 ms.
    // C is 1 MB/s, known from a round at the target; the probe's operating point (by the
    // smoothed RTT) is 190 kB, the path's (by the smallest) 110 kB.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    let mut t = 1000;
    let mut step = |budget: u64, queue: u64| {
        t += 100;
        let mut r = at(t, round(budget, Some(queue), 100_000, budget));
        r.base_rtt = Some(Duration::from_millis(180));
        r.min_rtt = Some(Duration::from_millis(100));
        c.on_round(&r)
    };
    assert_eq!(step(100_000, 10), 100_000);
    assert_eq!(step(100_000, 0), 105_000);
    assert_eq!(step(105_000, 0), 157_500);
    // 30 ms in the settling round: within the raise's burst (10 ms + 52.5 kB / 1 MB/s), but the
    // budget is past the path's operating point, where a queue stands: 2T/q at once.
    assert_eq!(step(157_500, 30), 105_000);
}

#[test]
fn an_overshoot_at_the_links_rate_stands() {
    // As in `the_probe_stops_short_of_the_backgrounds_own_overshoot`: limited to 105000 at
    // 1.575 MB/s, the link's rate. Rounds at the limit with the queue empty deliver no more
    // than the link does: the limit stands, and above it only the proportional step grows the
    // budget (0.5 * 10 ms * 1.575 MB/s = 7875).
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    let mut step = rounds_every(&mut c, 100);
    step(100_000, 0);
    step(105_000, 0);
    step(157_500, 0);
    step(157_500, 40);
    assert_eq!(step(157_500, 40), (78_750, "yield"));
    assert_eq!(step(105_000, 0), (112_875, "hold"));
    assert_eq!(step(157_500, 0), (165_375, "probe"));
}

#[test]
fn the_ledbat_variant_keeps_its_one_target() {
    let mut c = DelayTarget::new(DelayTargetConfig::ledbat(), 100_000);
    let mut r = round(100_000, Some(5), 100_000, 100_000);
    r.best_effort = Some(BestEffort {
        bytes: 10_000,
        packets: 50,
    });
    // RFC 6817's step with the 10 ms target: +724 (see ledbat_step_by_hand).
    assert_eq!(c.on_round(&r), 100_724);
}
