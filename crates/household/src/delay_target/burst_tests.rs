//! A raise's burst under the target (`DelayTarget::burst_read`): hand-computed rounds.

use super::tests::rounds_every;
use super::*;

#[test]
fn a_raises_burst_under_the_target_does_not_restart_the_low_rounds() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    let mut step = rounds_every(&mut c, 100);
    // Two low rounds: +5000 (0.5 * 10 ms * 1 MB/s), then 1.5x, then a settling round.
    assert_eq!(step(100_000, 0), (105_000, "hold"));
    assert_eq!(step(105_000, 0), (157_500, "probe"));
    assert_eq!(step(157_500, 0), (157_500, "probe"));
    // The round after reads the raise's burst: 4 ms, above a quarter of the target, within
    // what the burst explains (10 ms + 52.5 kB / 1.575 MB/s). The proportional step,
    // 0.5 * 6 ms * 1.575 MB/s = 4725; the low rounds are not restarted but left one short.
    assert_eq!(step(157_500, 4), (162_225, "hold"));
    // So the next low round probes again (1.5x); restarted, it would take the proportional
    // step and probe a round later.
    assert_eq!(step(162_225, 0), (243_338, "probe"));
}

#[test]
fn a_queue_above_a_quarter_of_the_target_in_any_other_round_restarts_them() {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 100_000);
    let mut step = rounds_every(&mut c, 100);
    assert_eq!(step(100_000, 0), (105_000, "hold"));
    // 4 ms with no raise before it: the low rounds restart. 0.5 * 6 ms * 1.05 MB/s = 3150.
    assert_eq!(step(105_000, 4), (108_150, "hold"));
    // One low round: the proportional step (0.5 * 10 ms * 1.0815 MB/s); the second probes.
    assert_eq!(step(108_150, 0), (113_558, "hold"));
    assert_eq!(step(113_558, 0), (170_337, "probe"));
}
