//! The delay-target controller's tests: hand-computed rounds.

use super::*;
use crate::budget::BestEffort;
use slipstream_control::Instant;

fn round(budget: u64, queue_ms: Option<u64>, delivered: u64, in_flight: u64) -> LinkRound {
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
fn at(ms: u64, mut r: LinkRound) -> LinkRound {
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
fn best_effort_packets_switch_to_the_interactive_target_for_a_while() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 150_000);
    let with_be = |ms: u64, packets: u64| {
        let mut r = at(ms, round(150_000, Some(6), 125_000, 150_000));
        r.best_effort = Some(BestEffort {
            bytes: packets * 200,
            packets,
        });
        r
    };
    // A ping every 100 ms (one packet a round): still the 10 ms target. q = 6 ms:
    // +0.5 * 4 ms * 1.25 MB/s = 2500.
    for ms in [1_000, 1_100, 1_200, 1_300, 1_400, 1_500] {
        assert_eq!(c.on_round(&with_be(ms, 1)), 152_500);
    }
    // A call: 5 packets in 100 ms (50 a second). One window of 300 ms could be a burst: +2500
    // still.
    for ms in [1_600, 1_700, 1_800] {
        assert_eq!(c.on_round(&with_be(ms, 5)), 152_500);
    }
    // The second window in a row: the 3 ms target from its last round. 6 ms is 3 ms above it,
    // -0.5 * 3 ms * 1.25 MB/s = -1875.
    assert_eq!(c.on_round(&with_be(1_900, 5)), 152_500);
    assert_eq!(c.on_round(&with_be(2_000, 5)), 152_500);
    assert_eq!(c.on_round(&with_be(2_100, 5)), 148_125);
    assert_eq!(c.stats().phase.as_str(), "yield");
    // A pause of the call: the interactive target stays for two seconds...
    assert_eq!(c.on_round(&with_be(4_000, 0)), 148_125);
    // ...and then the 10 ms target again.
    assert_eq!(c.on_round(&with_be(4_200, 0)), 152_500);
    // A download with as many packets that takes most of the link (1000 a second, 120 kB in a
    // round beside the background's 5 kB) is no call: the 10 ms target stays.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 150_000);
    for ms in [1_000, 1_100, 1_200, 1_300, 1_400, 1_500] {
        let mut r = at(ms, round(150_000, Some(6), 5_000, 150_000));
        r.best_effort = Some(BestEffort {
            bytes: 120_000,
            packets: 100,
        });
        c.on_round(&r);
    }
    assert_eq!(c.on_round(&with_be(1_600, 0)), 152_500);
}

#[test]
fn sparse_packets_in_short_rounds_are_no_call() {
    // 50 Mbit/s, 20 ms: 22 ms rounds. A ping every 100 ms and a keep-alive now and then (15
    // packets a second) put a packet in two rounds in a row now and then (45 a second, counted
    // round by round); over 300 ms windows they stay below 25 a second: the 10 ms target holds. q = 6 ms at 6.25 MB/s:
    // +0.5 * 4 ms * 6.25 MB/s = 12500 a round.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 300_000);
    for i in 0..50u64 {
        let mut r = at(1_000 + 22 * i, round(300_000, Some(6), 137_500, 300_000));
        r.interval = Duration::from_millis(22);
        r.base_rtt = Some(Duration::from_millis(20));
        // A packet in rounds 0, 1, 6, 7, 12, 13, ...: 2 in 6 rounds (132 ms).
        let packets = u64::from(i % 6 < 2);
        r.best_effort = Some(BestEffort {
            bytes: 98 * packets,
            packets,
        });
        assert_eq!(c.on_round(&r), 312_500, "round {i}");
    }
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

/// Rounds of 100 ms from 1.1 s on, the queue at `queue_us` and the budget in force at 150 kB,
/// best effort sending `packets(i)` small packets in round `i` (negligible bytes): the budgets.
fn beside_packets(queue_us: u64, rounds: u64, packets: impl Fn(u64) -> u64) -> Vec<u64> {
    beside_packets_and_flow(queue_us, rounds, false, None, packets)
}

/// Likewise, with `steady_flow` as the connection tracker says it.
fn beside_packets_and_flow(
    queue_us: u64,
    rounds: u64,
    steady_flow: bool,
    path: Option<Duration>,
    packets: impl Fn(u64) -> u64,
) -> Vec<u64> {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 150_000);
    (1..=rounds)
        .map(|i| {
            let mut r = at(1_000 + 100 * i, round(150_000, None, 125_000, 150_000));
            r.queue_delay = Some(Duration::from_micros(queue_us));
            r.steady_flow = steady_flow;
            r.min_rtt = path;
            let packets = packets(i);
            r.best_effort = Some(BestEffort {
                bytes: 20 * packets,
                packets,
            });
            c.on_round(&r)
        })
        .collect()
}

#[test]
fn a_steady_call_gets_the_interactive_aim_and_browsing_does_not() {
    // q = 3 ms at 1.25 MB/s; windows close at rounds 3, 6, 9, 12, 15.
    // Alone (the first window could be a burst): +0.5 * 7 ms * 1.25 MB/s = +4375.
    // Two windows in a row: browsing's 3 ms, no step.
    // Five windows at the same rate (30 packets a round): a call, the step aims at 1 ms and
    // takes the excess queue's bytes at once, -2 ms * 1.25 MB/s = -2500; 3 ms is not above the
    // 3 ms above which it yields: "hold".
    let call = beside_packets(3_000, 16, |_| 30);
    assert_eq!(&call[..5], &[154_375; 5]);
    assert_eq!(&call[5..14], &[150_000; 9]);
    assert_eq!(&call[14..], &[147_500; 2]);
    // Browsing: 30 packets a round for a window, then 10: never steady, browsing's target stays.
    let browsing = beside_packets(3_000, 16, |i| if (i - 1) / 3 % 2 == 0 { 30 } else { 10 });
    assert_eq!(&browsing[5..], &[150_000; 11]);
    // A 30 Hz game: 3 packets a round, now and then 2 or 4 (a count that moves by one): steady.
    let game = beside_packets(3_000, 16, |i| [3, 3, 4, 3, 2][i as usize % 5]);
    assert_eq!(&game[14..], &[147_500; 2]);
}

#[test]
fn a_call_under_browsing_gets_the_interactive_aim_when_its_flow_is_steady() {
    // The browsing pattern above, with the connection tracker seeing a steady UDP flow: from
    // the second window in a row (round 6) the step aims at 1 ms, -2500 a round, as beside a
    // call alone. Without best effort on the link the flow alone changes nothing.
    let browsing = |i: u64| if (i - 1) / 3 % 2 == 0 { 30 } else { 10 };
    let under_browsing = beside_packets_and_flow(3_000, 16, true, None, browsing);
    assert_eq!(&under_browsing[..5], &[154_375; 5]);
    assert_eq!(&under_browsing[5..], &[147_500; 11]);
    let quiet = beside_packets_and_flow(3_000, 16, true, None, |_| 1);
    assert_eq!(quiet, vec![154_375; 16]);
    // On a 20 ms path browsing's target is the 1 ms aim already (3% of 20 ms, at least 1 ms):
    // the call's aim is browsing's, and the flow changes nothing.
    let short = Some(Duration::from_millis(20));
    assert_eq!(
        beside_packets_and_flow(3_000, 16, true, short, browsing),
        beside_packets_and_flow(3_000, 16, false, short, browsing)
    );
}

#[test]
fn beside_a_call_the_background_grows_a_segment_a_round() {
    // A call (30 packets a round), the queue at 0.5 ms, under the 1 ms aim: the step would add
    // 0.5 * 0.5 ms * 1.25 MB/s = 312; a segment (1448) instead, and no 1.5x probe although the
    // queue is under a quarter of the 3 ms above which it yields (browsing's target probed).
    let call = beside_packets(500, 20, |_| 30);
    assert_eq!(&call[17..], &[151_448; 3]);
}

#[test]
fn a_round_without_the_calls_frames_is_no_end_of_best_effort() {
    // A call of 310 kB/s (31 kB and 30 packets a 100 ms round) beside the background, which
    // delivers 90 kB a round with the queue at the 1 ms aim: the link carries 1.21 MB/s. Five
    // windows in a row make the call steady (1.5 s); the budget is capped to what the call
    // leaves free, (1.21 MB/s - 310 kB/s) * (99 ms path + 1 ms aim) = 90000, and a recovery to
    // the 100 kB before the cap is armed.
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    let mut t = 1_000;
    let mut step = |budget: u64, queue_ms: u64, be: u64, packets: u64| {
        t += 100;
        let mut r = at(t, round(budget, Some(queue_ms), 90_000, budget));
        r.best_effort = Some(BestEffort { bytes: be, packets });
        let next = c.on_round(&r);
        (next, c.stats().phase.as_str())
    };
    let mut budget = 100_000;
    for _ in 0..16 {
        budget = step(budget, 1, 31_000, 30).0;
    }
    assert_eq!(budget, 90_000);
    // A round that counts none of the call's frames (at 50 Mbit/s / 20 ms a round is shorter
    // than a frame's 20 ms) is no end of best effort: no recovery to the 100 kB ceiling. The
    // step below the aim adds a segment, and the call's rate still caps it: 900 kB/s *
    // (100 ms + 1 ms) = 90900.
    assert_eq!(step(budget, 0, 0, 0), (90_900, "hold"));
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
