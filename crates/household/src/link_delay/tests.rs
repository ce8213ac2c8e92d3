//! Tests of the link's delay view, the ACK path and the coordinated slowdown's schedule.

use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

#[test]
fn base_is_the_minimum_and_queue_the_excess() {
    let mut link = LinkDelay::default();
    let mut f = FlowDelay::default();
    link.on_sample(&mut f, ms(100));
    link.on_sample(&mut f, ms(130));
    assert_eq!(f.base(), Some(ms(100)));
    // Samples 0 and 30 ms: fewer than four, the minimum.
    assert_eq!(link.end_round(), Some(ms(0)));
    for q in [40, 10, 30, 20, 50, 60, 70, 80] {
        link.on_sample(&mut f, ms(100 + q));
    }
    // Sorted 10..80, 8 samples: the 25th percentile is index 2 = 30 ms.
    assert_eq!(link.end_round(), Some(ms(30)));
    assert_eq!(link.end_round(), None, "a round without samples");
    assert_eq!(link.queue_delay(), Some(ms(30)));
}

#[test]
fn latecomer_does_not_take_the_standing_queue_for_its_base() {
    let mut link = LinkDelay::default();
    let mut old = FlowDelay::default();
    link.on_sample(&mut old, ms(50));
    for _ in 0..4 {
        link.on_sample(&mut old, ms(90)); // a 40 ms queue stands
    }
    assert_eq!(link.end_round(), Some(ms(40)));
    // A new flow to another server (base 20 ms) starts now: its samples read 60 ms.
    let mut new = FlowDelay::default();
    link.on_sample(&mut new, ms(60));
    assert_eq!(new.base(), Some(ms(20)), "60 - the shared 40 ms");
    // A round without samples: the next new flow is not calibrated against a stale value.
    link.on_sample(&mut old, ms(90));
    link.on_sample(&mut new, ms(60));
    assert_eq!(link.end_round(), Some(ms(40)));
    assert_eq!(link.end_round(), None);
    let mut late = FlowDelay::default();
    link.on_sample(&mut late, ms(60));
    assert_eq!(late.base(), Some(ms(60)));
}

#[test]
fn a_flow_alone_is_not_calibrated_against_its_own_queue() {
    // Lab no-timestamps, the background alone (its window-release samples, 2026-11-25):
    // 100.4 ms, then two samples of the sender's first burst, 127.4 and 127.2 ms.
    let mut link = LinkDelay::default();
    let mut f = FlowDelay::default();
    link.on_sample(&mut f, Duration::from_micros(100_425));
    assert_eq!(link.end_round(), Some(Duration::ZERO));
    link.on_sample(&mut f, Duration::from_micros(127_350));
    link.on_sample(&mut f, Duration::from_micros(127_177));
    assert_eq!(link.end_round(), Some(Duration::from_micros(26_752)));
    // The fourth sample, 108.1 ms, is still calibrated, but not against the 26.8 ms of the
    // flow's own burst (it alone measured that round): before, its base fell to 81.4 ms,
    // and every later sample of an empty link (100.2-101.4 ms) read as 19 ms of queue: the
    // background alone held at its floor for the whole phase.
    link.on_sample(&mut f, Duration::from_micros(108_129));
    assert_eq!(f.base(), Some(Duration::from_micros(100_425)));
    link.on_sample(&mut f, Duration::from_micros(100_165));
    link.on_sample(&mut f, Duration::from_micros(101_429));
    assert_eq!(link.end_round(), Some(Duration::ZERO));
}

#[test]
fn each_link_is_judged_on_its_own_queue() {
    // Background both ways, 100 ms base. The upload link's queue is 12 ms, the download
    // link's 8 ms. An upload with timestamps: a round trip of 120 ms whose ACK met 8 ms
    // (its one-way excess) is 112 ms on the upload link alone.
    let (mut up, mut down) = (LinkDelay::default(), LinkDelay::default());
    let mut path = AckPath::default();
    let mut upload = FlowDelay::default();
    // Empty queues first: the bases (round trip 100 ms, ACK one-way 50 ms).
    assert_eq!(path.excess(Instant::ZERO, ms(50)), Duration::ZERO);
    up.on_sample(&mut upload, ms(100));
    assert_eq!(up.end_round(), Some(Duration::ZERO));
    let excess = path.excess(Instant::from_millis(100), ms(58));
    assert_eq!(excess, ms(8));
    up.on_sample(&mut upload, ms(120) - excess);
    assert_eq!(up.end_round(), Some(ms(12)));
    assert_eq!(up.own_queue_delay(), Some(ms(12)));
    // A download without timestamps: its far half (ACK up, data down) reads 120 ms, less
    // the upload link's own 12 ms: the download link sees its own 8 ms.
    let mut download = FlowDelay::default();
    // Its base first: 112 ms while only the upload link queued.
    down.on_round_trip_sample(&mut download, ms(112), up.own_queue_delay());
    assert_eq!(download.base(), Some(ms(100)));
    down.end_round();
    down.on_round_trip_sample(&mut download, ms(120), up.own_queue_delay());
    assert_eq!(down.end_round(), Some(ms(8)));
    // Round-trip samples are not the link's own: the upload link cannot correct by them.
    assert_eq!(down.own_queue_delay(), None);
    // Where the opposite link measured nothing alone, the round trip stands as it is.
    down.on_round_trip_sample(&mut download, ms(120), None);
    assert_eq!(down.end_round(), Some(ms(20)));
}

#[test]
fn the_ack_path_minimum_ages_with_its_own_epochs_and_restarts() {
    let at = |s: u64| Instant::from_millis(s * 1000);
    let mut path = AckPath::default();
    assert_eq!(path.excess(at(0), ms(40)), Duration::ZERO);
    assert_eq!(path.excess(at(61), ms(45)), ms(5));
    // Two epochs on, the 40 ms minimum is gone (a clock that drifted).
    assert_eq!(path.excess(at(122), ms(45)), Duration::ZERO);
    assert_eq!(path.excess(at(123), ms(50)), ms(5));
    // After a silence of two epochs nothing old is kept.
    assert_eq!(path.excess(at(300), ms(70)), Duration::ZERO);
    path.restart();
    assert_eq!(path.excess(at(301), ms(90)), Duration::ZERO);
}

#[test]
fn after_calibration_the_base_is_a_plain_minimum() {
    let mut link = LinkDelay::default();
    let mut f = FlowDelay::default();
    for _ in 0..CALIBRATION_SAMPLES {
        link.on_sample(&mut f, ms(100));
    }
    link.end_round();
    // A shared estimate no longer moves this flow's base.
    link.queue_delay = Some(ms(30));
    link.on_sample(&mut f, ms(110));
    assert_eq!(f.base(), Some(ms(100)));
    link.on_sample(&mut f, ms(95));
    assert_eq!(f.base(), Some(ms(95)));
}

#[test]
fn a_base_too_low_ages_out_after_two_epochs() {
    let mut link = LinkDelay::default();
    let mut f = FlowDelay::default();
    link.queue_delay = Some(ms(90)); // an overestimated shared queue
    link.fresh = true;
    link.on_sample(&mut f, ms(100));
    assert_eq!(f.base(), Some(ms(10)));
    link.queue_delay = None;
    link.next_epoch();
    link.on_sample(&mut f, ms(100));
    assert_eq!(f.base(), Some(ms(10)), "the previous epoch still counts");
    link.next_epoch();
    for _ in 0..CALIBRATION_SAMPLES {
        link.on_sample(&mut f, ms(100));
    }
    assert_eq!(f.base(), Some(ms(100)));
}

#[test]
fn a_restarted_flow_learns_its_base_afresh_without_calibration() {
    let mut link = LinkDelay::default();
    let mut f = FlowDelay::default();
    // Samples that drifted down (a sender clock read too slow) left a base 500 ms too low.
    link.on_sample(&mut f, ms(9_500));
    for _ in 0..4 {
        link.on_sample(&mut f, ms(10_080));
    }
    assert_eq!(link.end_round(), Some(ms(580)), "an 80 ms queue read as 580 ms");
    f.restart();
    // Rescaled samples: 80 ms of queue stands; the fresh 580 ms is not subtracted.
    link.on_sample(&mut f, ms(10_080));
    assert_eq!(f.base(), Some(ms(10_080)));
    assert_eq!(link.end_round(), Some(ms(0)));
    // The queue empties: the base comes down to the path's.
    link.on_sample(&mut f, ms(10_000));
    assert_eq!(f.base(), Some(ms(10_000)));
    link.on_sample(&mut f, ms(10_001));
    link.on_sample(&mut f, ms(10_002));
    assert_eq!(link.end_round(), Some(ms(0)));
}

#[test]
fn slowdown_schedule() {
    use SlowdownRound::{Hold, Normal, Resume, Start};
    let mut s = Slowdown::default();
    let mut d = LinkDelay::default();
    let t = |v: u64| Instant::from_millis(v);
    let round = ms(100);
    let every = Duration::from_secs(30);
    assert_eq!(s.round(t(0), every, round, &mut d), Normal); // first due at 2 s
    assert_eq!(s.round(t(1900), every, round, &mut d), Normal);
    // Two rounds at the minimum: the one that starts at 2 s and the next.
    assert_eq!(s.round(t(2000), every, round, &mut d), Start);
    assert_eq!(d.epoch, 1, "a slowdown starts a base epoch");
    assert_eq!(s.round(t(2100), every, round, &mut d), Hold);
    // Then three rounds that measured the slowdown or its restart, the controller's budget back.
    assert_eq!(s.round(t(2200), every, round, &mut d), Resume);
    assert_eq!(s.round(t(2300), every, round, &mut d), Resume);
    assert_eq!(s.round(t(2400), every, round, &mut d), Resume);
    assert_eq!(s.round(t(2500), every, round, &mut d), Normal);
    assert_eq!((s.count, d.epoch), (1, 1));
    assert_eq!(s.round(t(32_100), every, round, &mut d), Normal);
    assert_eq!(s.round(t(32_200), every, round, &mut d), Start);
    assert_eq!(d.epoch, 2);
    assert_eq!(
        Slowdown::default().round(t(0), Duration::ZERO, round, &mut d),
        Normal,
        "off"
    );
    assert!(Start.holds() && Hold.holds() && !Resume.holds() && !Normal.holds());
    assert!(Start.measured() && Normal.measured() && !Hold.measured() && !Resume.measured());
}

#[test]
fn slowdowns_age_out_a_base_too_low() {
    let mut s = Slowdown::default();
    let mut link = LinkDelay::default();
    let mut f = FlowDelay::default();
    let t = |v: u64| Instant::from_millis(v);
    let (round, every) = (ms(100), Duration::from_secs(2));
    // Calibrated against an overestimated shared queue: a base 90 ms too low, which read
    // every later sample of an empty queue as 90 ms (the budget at its floor for good).
    link.queue_delay = Some(ms(90));
    link.fresh = true;
    link.on_sample(&mut f, ms(100));
    assert_eq!(f.base(), Some(ms(10)));
    let mut now = 0;
    let mut run_until = |slowdowns: u64, f: &mut FlowDelay| {
        while s.count < slowdowns {
            s.round(t(now), every, round, &mut link);
            link.on_sample(f, ms(100));
            now += 100;
        }
    };
    run_until(1, &mut f);
    assert_eq!(f.base(), Some(ms(10)), "the previous epoch still holds it");
    run_until(2, &mut f);
    assert_eq!(f.base(), Some(ms(100)), "two slowdowns later it is gone");
}

#[test]
fn a_fresh_base_slowdown_forgets_the_old_base_at_once() {
    let mut s = Slowdown::default();
    let mut link = LinkDelay::default();
    let mut f = FlowDelay::default();
    let t = |v: u64| Instant::from_millis(v);
    let (round, every) = (ms(100), Duration::from_secs(30));
    // The flow's base is 50 ms; then the route gets 30 ms longer.
    link.on_sample(&mut f, ms(50));
    assert_eq!(s.round(t(0), every, round, &mut link), SlowdownRound::Normal);
    link.on_sample(&mut f, ms(80));
    assert_eq!(f.base(), Some(ms(50)));
    // The controller asks: the next round starts a slowdown (not due for 30 s)...
    s.fresh_base();
    assert_eq!(s.round(t(100), every, round, &mut link), SlowdownRound::Start);
    // ...and the samples in it set the base: nothing of the old epoch is kept.
    link.on_sample(&mut f, ms(80));
    assert_eq!(f.base(), Some(ms(80)));
    assert_eq!(s.round(t(200), every, round, &mut link), SlowdownRound::Hold);
    assert_eq!(s.round(t(300), every, round, &mut link), SlowdownRound::Resume);
    assert_eq!(s.count, 1);
}

#[test]
fn a_drained_opposite_queue_does_not_lower_a_round_trip_base() {
    // A download without timestamps (base 100 ms) beside an upload link whose own queue reads
    // 12 ms: its far half reads 112 ms on an empty download link.
    let mut up = LinkDelay::default();
    let mut upload = FlowDelay::default();
    up.on_sample(&mut upload, ms(100));
    up.end_round();
    up.on_sample(&mut upload, ms(112));
    assert_eq!(up.end_round(), Some(ms(12)));
    let mut down = LinkDelay::default();
    let mut download = FlowDelay::default();
    for _ in 0..CALIBRATION_SAMPLES {
        down.on_round_trip_sample(&mut download, ms(112), up.own_queue_delay());
    }
    assert_eq!(
        download.base(),
        Some(ms(100)),
        "calibrated: 112 - the upload's 12 ms"
    );
    assert_eq!(down.end_round(), Some(ms(0)));
    // The upload link's coordinated slowdown drains its queue; the correction still takes off
    // the round before's 12 ms. The sample as measured, 100 ms, is no lower than the base.
    down.on_round_trip_sample(&mut download, ms(100), up.own_queue_delay());
    assert_eq!(download.base(), Some(ms(100)), "not 88 ms");
    assert_eq!(down.end_round(), Some(ms(0)));
    // The upload's queue is back: the download link reads its own empty queue, no phantom.
    down.on_round_trip_sample(&mut download, ms(112), up.own_queue_delay());
    assert_eq!(down.end_round(), Some(ms(0)));
    // Its own queue of 5 ms reads as 5.
    down.on_round_trip_sample(&mut download, ms(117), up.own_queue_delay());
    assert_eq!(down.end_round(), Some(ms(5)));
}

#[test]
fn flows_that_start_together_are_bounded_by_their_handshakes() {
    // 48 uploads start at once on a 100 ms path: their first data waits behind the 120 ms queue
    // their initial windows build. Without a queue measured before, every base is 220 ms and the
    // link reads no queue at all.
    let standing = [220, 225, 222, 221];
    let mut link = LinkDelay::default();
    let mut unbounded = vec![FlowDelay::default(); 8];
    for f in &mut unbounded {
        for q in standing {
            link.on_sample(f, ms(q));
        }
    }
    assert_eq!(link.end_round(), Some(ms(1)), "120 ms of queue read as 1");
    // With each handshake's half (100 ms, before the data) and 10 ms of slack, the link reads
    // the queue less the slack.
    let mut link = LinkDelay::default();
    let mut bounded = vec![FlowDelay::default(); 8];
    for f in &mut bounded {
        link.on_handshake(f, ms(100), ms(10));
        for q in standing {
            link.on_sample(f, ms(q));
        }
    }
    assert_eq!(bounded[0].base(), Some(ms(110)));
    assert_eq!(link.end_round(), Some(ms(111)));
    // Once the queue drains, the data's own samples set the base (a data packet's
    // serialization over the handshake's is within the slack: no phantom queue).
    for f in &mut bounded {
        link.on_sample(f, ms(101));
    }
    assert_eq!(bounded[0].base(), Some(ms(101)));
    assert_eq!(link.end_round(), Some(ms(0)));
}

#[test]
fn a_handshake_bound_ages_out_with_its_epoch() {
    // A handshake answered from nearer than the data's path (a SYN proxy) bounds the base too
    // low: a phantom queue, for two epochs at most.
    let mut link = LinkDelay::default();
    let mut f = FlowDelay::default();
    link.on_handshake(&mut f, ms(20), ms(10));
    for _ in 0..CALIBRATION_SAMPLES {
        link.on_sample(&mut f, ms(100));
    }
    assert_eq!(link.end_round(), Some(ms(70)));
    link.next_epoch();
    link.on_sample(&mut f, ms(100));
    assert_eq!(f.base(), Some(ms(30)), "the previous epoch's bound still counts");
    assert_eq!(link.end_round(), Some(ms(70)));
    link.next_epoch();
    link.on_sample(&mut f, ms(100));
    assert_eq!(f.base(), Some(ms(100)));
    assert_eq!(link.end_round(), Some(ms(0)));
}
