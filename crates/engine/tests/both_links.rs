//! Each link judged on its own queue: an upload's round trip crosses the upload link's queue and,
//! with its receiver's ACKs, the download link's. With timestamps the engine takes the ACKs'
//! one-way excess (by the receiver's clock) off, so a queue on the download link (best effort
//! downloading) is not the upload's to yield to, and a queue on the upload link still is.

mod common;

use common::*;
use slipstream_control::{ControllerConfig, Duration, Instant};
use slipstream_engine::{Engine, HouseholdConfig, LinkCounters, LinkDirection};

fn household_engine() -> Engine {
    Engine::new(slipstream_engine::EngineConfig {
        household: HouseholdConfig {
            slowdown_interval: Duration::ZERO,
            ..Default::default()
        },
        ..engine_config(
            vec![slipstream_engine::RuleSpec {
                name: "bulk".into(),
                controller: ControllerConfig::Household,
                share: Default::default(),
            }],
            64,
        )
    })
}

/// An upload from the LAN client, a segment every 5 ms for `until_ms`; the server is 50 ms away
/// each way, its ACK leaves at once (TSval: its 1 kHz clock, here the same as ours) and meets
/// `up(t)` ms of queue on the way there and `down(t)` ms on the way back. Returns the upload
/// link's queueing delay after each round (ms), with the time.
fn upload(up: impl Fn(u64) -> u64, down: impl Fn(u64) -> u64, until_ms: u64) -> Vec<(u64, f64)> {
    upload_beside(up, down, |_| 0, until_ms)
}

/// [`upload`] with best effort downloading `best_effort(t)` bytes per 5 ms beside it, as the WAN
/// counters count it (they count the background's packets too, as an interface does).
fn upload_beside(
    up: impl Fn(u64) -> u64,
    down: impl Fn(u64) -> u64,
    best_effort: impl Fn(u64) -> u64,
    until_ms: u64,
) -> Vec<(u64, f64)> {
    upload_run(up, down, best_effort, until_ms).0
}

/// [`upload_beside`], with the upload link's budget at the end.
fn upload_run(
    up: impl Fn(u64) -> u64,
    down: impl Fn(u64) -> u64,
    best_effort: impl Fn(u64) -> u64,
    until_ms: u64,
) -> (Vec<(u64, f64)>, u64) {
    let mut engine = household_engine();
    // The handshake crosses the empty path (the SYN-ACK comes back 100 ms after the SYN); the
    // times below (`t`) start after it, at `HANDSHAKE_MS`.
    const HANDSHAKE_MS: u64 = 100;
    let [syn, syn_ack] = handshake_segments(true);
    feed_lan(&mut engine, Instant::from_millis(0), syn);
    feed_lan(&mut engine, Instant::from_millis(HANDSHAKE_MS), syn_ack);
    // (time at the router, packet): data as sent, ACKs when they come back.
    let mut packets: Vec<(u64, Seg)> = Vec::new();
    for t in (10..until_ms).step_by(5) {
        let k = (t / 5 - 2) as u32;
        let seq = 101 + k * 1448;
        packets.push((
            t,
            Seg {
                seq,
                ack: 5001,
                payload: 1448,
                ts: Some((1000 + t as u32, 70000)),
                ..Default::default()
            },
        ));
        let sent = t + 50 + up(t);
        let back = sent + 50 + down(sent);
        packets.push((
            back,
            Seg {
                from_server: true,
                seq: 5001,
                ack: seq + 1448,
                window: 2000,
                ts: Some((70000 + sent as u32, 1000 + t as u32)),
                ..Default::default()
            },
        ));
    }
    packets.sort_by_key(|(t, s)| (*t, s.from_server));
    let mut queue = Vec::new();
    let counted = |_| LinkCounters {
        header_bytes: 14,
        ..Default::default()
    };
    let (mut downlink, mut uplink) = (counted(()), counted(()));
    let mut next_tick = 0;
    for (t, seg) in packets {
        while next_tick <= t {
            downlink.bytes += best_effort(next_tick);
            downlink.packets += best_effort(next_tick).div_ceil(1514);
            next_tick += 5;
        }
        let (_, bytes) = feed_lan(&mut engine, Instant::from_millis(HANDSHAKE_MS + t), seg);
        let link = if seg.from_server {
            &mut downlink
        } else {
            &mut uplink
        };
        link.bytes += bytes.len() as u64 + 14;
        link.packets += 1;
        engine.on_link_counters(downlink, uplink);
        let s = engine.snapshot(0);
        let link = s
            .links
            .iter()
            .find(|l| l.direction == LinkDirection::Upload)
            .expect("the upload link");
        if let Some(q) = link.queue_delay.filter(|_| link.flows > 0) {
            queue.push((t, q.as_secs_f64() * 1e3));
        }
    }
    let budget = engine.snapshot(0).links[LinkDirection::Upload.index()].budget_bytes;
    (queue, budget)
}

/// The last round's reading at each packet: `(time ms, queueing delay ms)`, as [`upload`] gives.
type Readings = [(u64, f64)];

/// The largest queueing delay the upload link read between `from` and `to` ms.
fn max_between(queue: &Readings, from: u64, to: u64) -> f64 {
    queue
        .iter()
        .filter(|(t, _)| (from..to).contains(t))
        .map(|(_, q)| *q)
        .fold(0.0, f64::max)
}

/// The download's k-th data segment (the server's sequence numbers start at 5001).
fn download_data(k: u32, ts: Option<(u32, u32)>) -> Seg {
    Seg {
        from_server: true,
        seq: 5001 + k * 1448,
        ack: 101,
        payload: 1448,
        ts,
        ..Default::default()
    }
}

#[test]
fn an_upload_does_not_read_the_download_links_queue() {
    // Best effort downloads from 3 s: 60 ms on the download link, nothing on the upload link.
    let queue = upload(|_| 0, |t| if t >= 3000 { 60 } else { 0 }, 6000);
    assert!(max_between(&queue, 1000, 3000) < 3.0, "an empty link");
    assert!(
        max_between(&queue, 3500, 6000) < 3.0,
        "the download link's queue read as the upload's"
    );
}

#[test]
fn an_upload_yields_to_a_queue_best_effort_built_on_the_download_link() {
    // The same 60 ms, built by best effort downloading at 8 Mbit/s (5 kB per 5 ms): its ACKs
    // cross the upload link, and the upload steps back from them as from best effort there.
    let queue = upload_beside(
        |_| 0,
        |t| if t >= 3000 { 60 } else { 0 },
        |t| if t >= 3000 { 5000 } else { 0 },
        6000,
    );
    assert!(max_between(&queue, 1000, 3000) < 3.0, "an empty link");
    let late = max_between(&queue, 3500, 6000);
    assert!(late > 40.0, "best effort's queue read as {late} ms");
}

#[test]
fn an_upload_still_reads_its_own_links_queue() {
    // The same with 20 ms on the upload link from 3 s as well: that one is the upload's.
    let queue = upload(
        |t| if t >= 3000 { 20 } else { 0 },
        |t| if t >= 3000 { 60 } else { 0 },
        6000,
    );
    let late = max_between(&queue, 3500, 6000);
    assert!(late > 0.0, "no reading: {:?}", &queue[..queue.len().min(20)]);
    assert!(
        (17.0..23.0).contains(&late),
        "the upload link's own 20 ms read as {late} ms"
    );
}

#[test]
fn an_upload_that_starts_behind_a_queue_reads_it() {
    // 40 ms stand on the upload link from the first data on (the queue a batch of uploads'
    // initial windows builds); the handshake crossed the empty link just before. Every data
    // sample reads 140 ms: the flow's minimum alone would take the queue for its path (0 ms
    // read). Bounded by the handshake's 100 ms plus the 10 ms target, it reads 30 of the 40.
    let queue = upload(|_| 40, |_| 0, 3000);
    let read = max_between(&queue, 1000, 3000);
    assert!((27.0..33.0).contains(&read), "a 40 ms queue read as {read} ms");
}

/// A packet of the flow of LAN port `port` (server port [`SERVER_PORT`]), with etherparse.
fn packet(port: u16, seg: Seg) -> Vec<u8> {
    let mut bytes = build(seg);
    // `build` writes the client port; this flow's is `port` (the checksums are not checked).
    let at = if seg.from_server { 22 } else { 20 };
    bytes[at..at + 2].copy_from_slice(&port.to_be_bytes());
    bytes
}

/// Hands `seg` of the flow with client port `port` to the engine at `t` ms, as forwarded between
/// the LAN and the WAN; returns its IP length.
fn feed_port(engine: &mut Engine, t: u64, port: u16, seg: Seg) -> u64 {
    use slipstream_engine::{PacketCopy, PacketMeta};
    let mut bytes = packet(port, seg);
    let len = bytes.len() as u64;
    let meta = PacketMeta {
        from_lan: Some(!seg.from_server),
        ..meta(PacketCopy::Full)
    };
    engine.handle_packet(Instant::from_millis(t), &mut bytes, meta);
    len
}

/// A background download and (with `upload`) a background upload for 3 s, a segment each way
/// every 5 ms, each ACKed 100 ms later, with or without TCP timestamps. The WAN counters see
/// exactly their packets (14 bytes of Ethernet each), nothing else.
fn background_both_ways(timestamps: bool, upload: bool) -> Engine {
    let mut engine = household_engine();
    let (down, up) = (40001u16, 40002u16);
    let ports: &[u16] = if upload { &[down, up] } else { &[down] };
    for &port in ports {
        for seg in handshake_segments(timestamps) {
            feed_port(&mut engine, 0, port, seg);
        }
    }
    // Both background flows for 3 s, a segment each way every 5 ms, each ACKed 100 ms later.
    // The WAN counters see exactly their packets (14 bytes of Ethernet each), nothing else.
    let (mut downlink, mut uplink) = (
        LinkCounters {
            header_bytes: 14,
            ..Default::default()
        },
        LinkCounters {
            header_bytes: 14,
            ..Default::default()
        },
    );
    for t in (10..3000u64).step_by(5) {
        let k = (t / 5 - 2) as u32;
        let ts = timestamps.then_some((1000 + t as u32, 70000 + t as u32));
        let data = download_data(k, ts);
        downlink.bytes += feed_port(&mut engine, t, down, data) + 14;
        downlink.packets += 1;
        if upload {
            let data = Seg {
                seq: 101 + k * 1448,
                ack: 5001,
                payload: 1448,
                ts,
                ..Default::default()
            };
            uplink.bytes += feed_port(&mut engine, t, up, data) + 14;
            uplink.packets += 1;
        }
        if k >= 20 {
            let acked = (k - 19) * 1448;
            let ack = Seg {
                seq: 101,
                ack: 5001 + acked,
                window: 2000,
                ts,
                ..Default::default()
            };
            uplink.bytes += feed_port(&mut engine, t, down, ack) + 14;
            uplink.packets += 1;
            if upload {
                let ack = Seg {
                    from_server: true,
                    seq: 5001,
                    ack: 101 + acked,
                    window: 2000,
                    ts,
                    ..Default::default()
                };
                downlink.bytes += feed_port(&mut engine, t, up, ack) + 14;
                downlink.packets += 1;
            }
        }
        engine.on_link_counters(downlink, uplink);
    }
    engine
}

#[test]
fn a_background_downloads_acks_are_not_best_effort_on_the_upload_link() {
    let engine = background_both_ways(true, true);
    let s = engine.snapshot(0);
    for link in &s.links {
        let best_effort = link.best_effort_bits_per_second.expect("counted");
        assert!(
            best_effort < 10_000.0,
            "{:?}: the other direction's ACKs read as {best_effort} bit/s of best effort",
            link.direction
        );
    }
}

#[test]
fn background_both_ways_without_timestamps_asks_for_one_way_probes() {
    // Without timestamps every sample of either link is a round trip across both queues: the
    // engine asks for the reflector's timestamps.
    let both = background_both_ways(false, true);
    let interval = both.probe_interval().expect("probes wanted");
    assert!(
        (Duration::from_millis(20)..=Duration::from_millis(100)).contains(&interval),
        "{interval:?}"
    );
    // With timestamps each link is timed alone; a download alone has no opposite queue of the
    // background's to be told from: no probes.
    assert_eq!(background_both_ways(true, true).probe_interval(), None);
    assert_eq!(background_both_ways(false, false).probe_interval(), None);
}

#[test]
fn one_way_probes_give_each_link_its_own_queue() {
    use slipstream_engine::OneWayDelays;
    let mut engine = background_both_ways(false, true);
    let own = |engine: &Engine, link: LinkDirection| {
        engine.snapshot(0).links[link.index()]
            .queue_delay
            .map(|q| q.as_secs_f64() * 1e3)
    };
    // The reflector's clock is 7 s ahead; the path 5 ms each way. For 2 s the download link's
    // queue is empty, then it holds 12 ms; the upload link's stays empty.
    // From 7 s the queue is gone and the reflector's clock is 300 ms further ahead (an NTP
    // correction): the request's half reads 300 ms longer, the reply's 300 ms shorter.
    let probe_until = |engine: &mut Engine, from: u64, until: u64, down_queue: i64, offset: i64| {
        let mut t = from;
        while t < until {
            let halves = OneWayDelays {
                up_us: offset + 5_000,
                down_us: -offset + 5_000 + down_queue,
            };
            engine.on_probe_one_way(
                Instant::from_millis(t),
                Instant::from_millis(t + 10 + down_queue as u64 / 1000),
                halves,
            );
            t += 20;
            engine.run_due_rounds(Instant::from_millis(t));
        }
    };
    probe_until(&mut engine, 3000, 5000, 0, 7_000_000);
    probe_until(&mut engine, 5000, 7000, 12_000, 7_000_000);
    let (down, up) = (
        own(&engine, LinkDirection::Download),
        own(&engine, LinkDirection::Upload),
    );
    assert!(
        down.is_some_and(|q| (11.0..=13.0).contains(&q)),
        "download link {down:?} ms"
    );
    assert!(up.is_some_and(|q| q < 1.0), "upload link {up:?} ms");
    probe_until(&mut engine, 7000, 8000, 0, 7_300_000);
    let (down, up) = (
        own(&engine, LinkDirection::Download),
        own(&engine, LinkDirection::Upload),
    );
    assert!(
        down.is_some_and(|q| q < 1.0),
        "download link after the clock moved: {down:?} ms"
    );
    assert!(
        up.is_some_and(|q| q < 1.0),
        "upload link after the clock moved: {up:?} ms"
    );
}

/// A background download, a segment a millisecond (11.6 Mbit/s), each pair ACKed 100 ms later,
/// on a small uplink whose counters also count `best_effort_up` bytes a millisecond of a
/// best-effort upload; with TCP timestamps or without. Returns the download link's budget after
/// 3 s.
fn download_budget_beside_an_upload(best_effort_up: u64, timestamps: bool) -> u64 {
    let mut engine = household_engine();
    // With its Ethernet header, as the WAN counters count it.
    let feed = |engine: &mut Engine, t, seg| feed_port(engine, t, CLIENT_PORT, seg) + 14;
    for seg in handshake_segments(timestamps) {
        feed(&mut engine, 0, seg);
    }
    let counters = LinkCounters {
        header_bytes: 14,
        ..Default::default()
    };
    let (mut downlink, mut uplink) = (counters, counters);
    for t in 10..3000u64 {
        let k = (t - 10) as u32;
        let ts = timestamps.then_some((1000 + t as u32, 70000 + t as u32));
        let data = download_data(k, ts);
        downlink.bytes += feed(&mut engine, t, data);
        downlink.packets += 1;
        if k >= 100 && k % 2 == 0 {
            let ack = Seg {
                seq: 101,
                ack: 5001 + (k - 98) * 1448,
                window: 65535,
                ts,
                ..Default::default()
            };
            uplink.bytes += feed(&mut engine, t, ack);
            uplink.packets += 1;
        }
        uplink.bytes += best_effort_up;
        uplink.packets += u64::from(best_effort_up > 0);
        engine.on_link_counters(downlink, uplink);
    }
    engine.snapshot(0).links[LinkDirection::Download.index()].budget_bytes
}

#[test]
fn a_background_download_leaves_its_acks_room_on_an_uplink_best_effort_fills() {
    // The ACKs alone on the uplink: nothing caps the download.
    let alone = download_budget_beside_an_upload(0, false);
    // A best-effort upload fills a 2 Mbit/s uplink beside the ACKs (1514 bytes every 6 ms
    // here: 252 kB/s with them, ACKs 33 kB/s, 13% of it). Their room is 3% of it, 7.6 kB/s:
    // 330 kB/s of data, 33 kB over the flow's 100 ms. Without timestamps the uplink's queue is
    // not timed, and the counters decide.
    let beside = download_budget_beside_an_upload(220, false);
    assert!(alone > 100_000, "alone: {alone}");
    assert!(
        (25_000..=40_000).contains(&beside),
        "beside a best-effort upload: {beside}"
    );
    // With timestamps the ACKs time the uplink (`ack_room::AcksQueue`): here their trips never
    // grow, no queue stands, and the counters' "full" is a link that carried what it was given.
    let timed = download_budget_beside_an_upload(220, true);
    assert!(timed > 100_000, "beside an upload that meets no queue: {timed}");
}

#[test]
fn an_upload_leaves_its_acks_room_only_where_their_queue_stands() {
    // Best effort downloads 600 bytes every 5 ms (120 kB/s, an app-limited stream) from 1 s:
    // with the upload's ACKs (13 kB/s) the download link's counters peak there, so it reads
    // full, and best effort needs it. Room for 3% of 133 kB/s: 9 kB in flight over 100 ms.
    let stream = |t: u64| if t >= 1000 { 600 } else { 0 };
    // The ACKs meet no queue on the way down (the link is faster than what it carries): no cap.
    let (_, free) = upload_run(|_| 0, |_| 0, stream, 5000);
    // A queue of 20-40 ms stands there from 2 s (a full link): the cap holds.
    let queued = |t: u64| if t >= 2000 { 20 + (t / 7) % 20 } else { 0 };
    let (_, capped) = upload_run(|_| 0, queued, stream, 5000);
    assert!(free > 25_000, "no queue on the download link: {free}");
    assert!(capped < 15_000, "a queue stands on the download link: {capped}");
}
