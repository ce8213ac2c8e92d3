//! The delay target beside steady best-effort packets (a call, a game) and browsing: the
//! interactive target and the call's aim, by hand.

use super::tests::{at, round};
use super::*;
use crate::budget::BestEffort;

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

/// Rounds of 100 ms from 1.1 s on, the background delivering 250 kB a round (2.5 MB/s), the
/// queue at `queue_us` and the budget in force at 150 kB, best effort sending `packets(i)`
/// packets of 100 bytes in round `i` (at most 30 a round, 1.2% of the link: under
/// `BEST_EFFORT_NEGLIGIBLE`, so no bound by what it leaves free): the budgets.
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
    beside_packets_of(100, queue_us, rounds, steady_flow, path, packets)
}

/// Likewise, with packets of `size` bytes on the wire.
fn beside_packets_of(
    size: u64,
    queue_us: u64,
    rounds: u64,
    steady_flow: bool,
    path: Option<Duration>,
    packets: impl Fn(u64) -> u64,
) -> Vec<u64> {
    let mut c = DelayTarget::new(DelayTargetConfig::default(), 150_000);
    (1..=rounds)
        .map(|i| {
            let mut r = at(1_000 + 100 * i, round(150_000, None, 250_000, 150_000));
            r.queue_delay = Some(Duration::from_micros(queue_us));
            r.steady_flow = steady_flow;
            r.min_rtt = path;
            let packets = packets(i);
            r.best_effort = Some(BestEffort {
                bytes: size * packets,
                packets,
            });
            c.on_round(&r)
        })
        .collect()
}

#[test]
fn a_steady_call_gets_the_interactive_aim_and_browsing_does_not() {
    // q = 3 ms at 2.5 MB/s; windows close at rounds 3, 6, 9, 12, 15.
    // Alone (the first window could be a burst): +0.5 * 7 ms * 2.5 MB/s = +8750.
    // Two windows in a row: browsing's 3 ms, no step.
    // Five windows at the same rate (30 packets a round): a call, the step aims at 1 ms and
    // takes the excess queue's bytes at once, -2 ms * 2.5 MB/s = -5000; 3 ms is not above the
    // 3 ms above which it yields: "hold".
    let call = beside_packets(3_000, 16, |_| 30);
    assert_eq!(&call[..5], &[158_750; 5]);
    assert_eq!(&call[5..14], &[150_000; 9]);
    assert_eq!(&call[14..], &[145_000; 2]);
    // Browsing: 30 packets a round for a window, then 10: never steady, browsing's target stays.
    let browsing = beside_packets(3_000, 16, |i| if (i - 1) / 3 % 2 == 0 { 30 } else { 10 });
    assert_eq!(&browsing[5..], &[150_000; 11]);
    // A 30 Hz game: 3 packets a round, now and then 2 or 4 (a count that moves by one): steady.
    let game = beside_packets(3_000, 16, |i| [3, 3, 4, 3, 2][i as usize % 5]);
    assert_eq!(&game[14..], &[145_000; 2]);
}

#[test]
fn a_call_under_browsing_gets_the_interactive_aim_when_its_flow_is_steady() {
    // The browsing pattern above, with the connection tracker seeing a steady UDP flow: from
    // the second window in a row (round 6) the step aims at 1 ms, -5000 a round, as beside a
    // call alone. Without best effort on the link the flow alone changes nothing.
    let browsing = |i: u64| if (i - 1) / 3 % 2 == 0 { 30 } else { 10 };
    let under_browsing = beside_packets_and_flow(3_000, 16, true, None, browsing);
    assert_eq!(&under_browsing[..5], &[158_750; 5]);
    assert_eq!(&under_browsing[5..], &[145_000; 11]);
    let quiet = beside_packets_and_flow(3_000, 16, true, None, |_| 1);
    assert_eq!(quiet, vec![158_750; 16]);
    // On a 20 ms path browsing's target is the 1 ms aim already (3% of 20 ms, at least 1 ms):
    // the call's aim is browsing's, and the flow changes nothing.
    let short = Some(Duration::from_millis(20));
    assert_eq!(
        beside_packets_and_flow(3_000, 16, true, short, browsing),
        beside_packets_and_flow(3_000, 16, false, short, browsing)
    );
}

#[test]
fn acks_of_a_best_effort_upload_are_no_call() {
    // 30 packets a round of 66 bytes (pure ACKs with timestamps and an Ethernet header: a
    // best-effort upload's, down the download link): as steady as a call, but no call, and the
    // 10 ms target stays (+8750 a round at q = 3 ms).
    assert_eq!(
        beside_packets_of(66, 3_000, 16, false, None, |_| 30),
        vec![158_750; 16]
    );
    // 86 bytes (IPv6) likewise; 90 and more are a call's (from the fifth window: -5000).
    assert_eq!(
        beside_packets_of(86, 3_000, 16, false, None, |_| 30),
        vec![158_750; 16]
    );
    let small_frames = beside_packets_of(90, 3_000, 16, false, None, |_| 30);
    assert_eq!(&small_frames[14..], &[145_000; 2]);
    // A call under such ACKs, found by its own flow (the connection tracker): the call's aim.
    let under_acks = beside_packets_of(66, 3_000, 16, true, None, |_| 30);
    assert_eq!(&under_acks[5..], &[145_000; 11]);
}

#[test]
fn beside_a_call_the_background_grows_a_segment_a_round() {
    // A call (30 packets a round), the queue at 0.5 ms, under the 1 ms aim: the step would add
    // 0.5 * 0.5 ms * 2.5 MB/s = 625; a segment (1448) instead, and no 1.5x probe although the
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
