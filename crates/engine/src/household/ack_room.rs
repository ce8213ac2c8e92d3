//! A link's background flows send their ACKs across the opposite link, and while best effort
//! needs that link they take part of it: a background download of 12.7 Mbit/s sends 0.29 Mbit/s
//! of ACKs (one per two segments, 66 bytes on the wire), 15% of a 2 Mbit/s uplink, and a
//! best-effort upload beside it kept 0.80 of its rate (lab `both --rate 20 --up-rate 2`; on an
//! ADSL-like 8/0.5 line a third of the uplink, best effort kept 0.56). The opposite link's
//! controller governs only its own flows' windows, so the link whose flows send the ACKs caps
//! its budget by the room the opposite link leaves them.
//!
//! The room: [`ACK_SHARE`] of the opposite link's capacity while best effort needs that link
//! (it is full, best effort carried at least [`BEST_EFFORT_NEEDS`] of it, and where the router
//! can time the queue there, it stands at [`FULL_QUEUE`] or more), else no cap. The
//! flows' ACK bytes per delivered byte are measured each round (timestamps, delayed ACKs and
//! the LAN hosts' ACK policy all change it), so the cap is the data rate whose ACKs fit the
//! room, times the path's round trip. It binds only where the opposite link is much slower
//! (see [`ACK_SHARE`]).

use slipstream_control::{Duration, Instant};
use slipstream_household::link_delay::FlowDelay;
use slipstream_household::{BestEffort, LinkDelay};

use super::Link;

/// The share of the opposite link's capacity the background may take while best effort needs
/// that link, its ACKs and its own flows there at their floors together: best effort keeps 97%
/// of it (issue 22's bound for both directions at once). A background download's ACKs are
/// 2.3-2.7% of its data (one 66- or 78-byte ACK per two segments), so on a symmetric link they
/// alone fit; a background upload at its floor beside them took another 1.8% of a 10 Mbit/s /
/// 100 ms uplink, and best effort's upload kept 0.939-0.956 (lab `both --scale 0.5`), so the
/// floor's rate comes out of the room.
pub(super) const ACK_SHARE: f64 = 0.03;
/// Best effort needs the opposite link while that link is full and best effort carried at least
/// this share of its capacity: it is there to be hurt (a half missed a best-effort upload held
/// to 0.47 of an 8/0.5 Mbit/s line's uplink). Where the link is full of the background's own
/// uploads beside a call, the cap holds too; on a symmetric link it binds nothing (see
/// [`ACK_SHARE`]).
pub(super) const BEST_EFFORT_NEEDS: f64 = 0.1;
/// ... and carried at least this fraction of what the background's ACKs carry there. A link
/// that carries little but the background's ACKs is "full" of them at its capacity as its
/// counters know it (their own peak): a ping or a phone's chatter beside them is a tenth of that,
/// and the cap cut a download to 3% of its ACKs' rate, the link emptied, the cap let go, and the
/// budget swung between the floors and the BDP every few seconds (lab `alone --rate 2 --rtt 100`,
/// a ping on the idle uplink: the background filled 0.49 of the link). A best-effort upload that
/// needs the link carries more than the ACKs squeezing it (8/0.5 Mbit/s: held to 0.47 of the
/// uplink, against the ACKs' 0.40).
pub(super) const BEST_EFFORT_VERSUS_ACKS: f64 = 0.5;
/// A full link holds a queue; where the router times the opposite link's queue (its own
/// background's one-way samples, or the ACKs of this link's flows with timestamps: see
/// [`AcksQueue`]) and it stands under this, the link is not full, whatever its
/// counters' peak says. The counters know a link's capacity only from what it carried: a
/// best-effort upload of 6 Mbit/s on a 50 Mbit/s uplink read as a full 6.3 Mbit/s link, and the
/// cap held the background's download to 8 Mbit/s of 50 while the upload ran (lab `onoff`,
/// 50 Mbit/s / 20 ms: the background used 0.17 of the link while best effort's download was
/// off). A full first-in-first-out uplink holds many milliseconds (one packet's wait is 1.2 ms
/// at 10 Mbit/s, and a loss-based upload swings its queue by a large part of the buffer). The
/// ACKs' view is noisy by a millisecond or two (the hosts' TSval ticks are 1 ms, a sender's
/// bursts): read at 1 ms round by round, the cap went on and off every second or two there
/// (the budget from the link's BDP to a sixth of it).
pub(super) const FULL_QUEUE: Duration = Duration::from_millis(2);
/// A timed queue stands once this many rounds in a row read at least [`FULL_QUEUE`] ...
const STANDING_ROUNDS: u32 = 4;
/// ... and is gone once this many in a row read less: a loss-based upload drains its queue
/// for a few round trips after each loss, and a cap lifted for them sends the budget to the
/// controller's for a round. As many rounds without a reading and the queue is no longer timed
/// (the flows that timed it ended): the counters decide again.
const GONE_ROUNDS: u32 = 25;

/// Whether a timed queue stands, from one reading a round: [`STANDING_ROUNDS`] in a row at
/// [`FULL_QUEUE`] or more, until [`GONE_ROUNDS`] in a row under it. Read round by round instead,
/// the cap went on and off every second or two (see [`FULL_QUEUE`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StandingQueue {
    /// Rounds in a row that read at least [`FULL_QUEUE`], under it, and without a reading.
    above: u32,
    below: u32,
    unread: u32,
    /// `None` before the first reading.
    stands: Option<bool>,
}

impl StandingQueue {
    /// One round's reading of the queue (`None`: the round had none); whether it stands.
    pub(super) fn on_round(&mut self, queue: Option<Duration>) -> Option<bool> {
        let Some(queue) = queue else {
            self.unread += 1;
            if self.unread >= GONE_ROUNDS {
                *self = StandingQueue::default();
            }
            return self.stands;
        };
        self.unread = 0;
        if queue >= FULL_QUEUE {
            (self.above, self.below) = (self.above + 1, 0);
        } else {
            (self.above, self.below) = (0, self.below + 1);
        }
        self.stands = Some(if self.above >= STANDING_ROUNDS {
            true
        } else {
            self.stands == Some(true) && self.below < GONE_ROUNDS
        });
        self.stands
    }

    /// Whether the queue stood at the last reading (`None`: not timed).
    pub(super) fn stands(&self) -> Option<bool> {
        self.stands
    }
}

/// Whether the opposite link's queue stands, as a link's flows' ACKs met it, each flow with its
/// own base (see [`FULL_QUEUE`]): with timestamps, a download's ACK's trip up is the far half of
/// its round trip less its data's one-way delay (`DataOutcome::ack_trip`), an upload's ACK's
/// trip down its one-way delay by the receiver's clock (`AckResult::ack_one_way`).
#[derive(Clone, Debug, Default)]
pub(crate) struct AcksQueue {
    delay: LinkDelay,
    standing: StandingQueue,
}

impl AcksQueue {
    /// One ACK's trip, on the flow's arbitrary origin (its base takes that off).
    pub(crate) fn on_trip(&mut self, flow: &mut FlowDelay, trip: Duration) {
        self.delay.on_sample(flow, trip);
    }

    /// A base epoch, as the link's own delay view's (a route that got longer, a drifting clock).
    pub(super) fn next_epoch(&mut self) {
        self.delay.next_epoch();
    }

    /// Ends a round: whether the queue stands (`None` while not timed).
    pub(super) fn end_round(&mut self) -> Option<bool> {
        let queue = self.delay.end_round();
        self.standing.on_round(queue)
    }
}

/// What the opposite link's last round said (rates in bytes/s).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct OppositeLink {
    /// Whether it carried its capacity's full share (`None` without counters).
    pub full: Option<bool>,
    /// Its capacity (`None` before any counted round).
    pub capacity: Option<f64>,
    /// Best effort's rate on it (`None` where not counted).
    pub best_effort: Option<f64>,
    /// The link-layer header its counters count per packet (as `LinkCounters::header_bytes`).
    pub header_bytes: u64,
    /// Whether its queue stands, where the router times it (see [`FULL_QUEUE`]).
    pub queue_stands: Option<bool>,
    /// Its own background's rate (bytes/s) while that background yields, at its floors: part
    /// of the room (`None` while it takes more, or has no flows).
    pub background_at_floor: Option<f64>,
}

impl OppositeLink {
    /// What `link`'s last round said, at `now`.
    pub(super) fn of(link: &Link, now: Instant) -> OppositeLink {
        OppositeLink {
            full: link.full,
            capacity: link.capacity.rate(now),
            best_effort: link.last.best_effort_bits_per_second.map(|bits| bits / 8.0),
            header_bytes: link.counters.map_or(0, |c| c.header_bytes),
            queue_stands: link.own_queue.stands(),
            background_at_floor: link.at_floor_rate,
        }
    }

    /// With whether the ACKs of the other link's flows found its queue standing, where timed
    /// (either view showing it is enough).
    pub(super) fn with_acks_queue(self, acks_queue_stands: Option<bool>) -> OppositeLink {
        let queue_stands = match (self.queue_stands, acks_queue_stands) {
            (Some(own), Some(acks)) => Some(own || acks),
            (own, acks) => own.or(acks),
        };
        OppositeLink { queue_stands, ..self }
    }

    /// The room (bytes/s) the link leaves the ACKs while best effort needs it (see
    /// [`BEST_EFFORT_NEEDS`] and [`BEST_EFFORT_VERSUS_ACKS`]; `ack_rate`: what the background's
    /// ACKs carry there, bytes/s); `None` while it does not.
    fn room_for_acks(&self, ack_rate: f64) -> Option<f64> {
        let capacity = self.capacity.filter(|c| *c > 0.0)?;
        let best_effort = self.best_effort?;
        let needed = self.full == Some(true)
            && best_effort >= BEST_EFFORT_NEEDS * capacity
            && best_effort >= BEST_EFFORT_VERSUS_ACKS * ack_rate
            && self.queue_stands != Some(false);
        let background_floor = self.background_at_floor.unwrap_or(0.0);
        needed.then(|| (ACK_SHARE * capacity - background_floor).max(0.0))
    }
}

/// The largest budget (bytes in flight) whose ACKs fit the room the opposite link leaves them:
/// the round (`interval` long) delivered `delivered` bytes and sent `acks` across (IP packets,
/// to which the opposite link's header is added), over a path of `rtt`. `None`: no cap (best
/// effort does not need the opposite link, nothing delivered or no ACK counted, no RTT).
pub(super) fn ack_cap(
    opposite: OppositeLink,
    delivered: u64,
    acks: BestEffort,
    interval: Duration,
    rtt: Option<Duration>,
) -> Option<u64> {
    let acks = acks.bytes + acks.packets * opposite.header_bytes;
    if delivered == 0 || acks == 0 || interval.is_zero() {
        return None;
    }
    let room = opposite.room_for_acks(acks as f64 / interval.as_secs_f64())?;
    let data_rate = room * delivered as f64 / acks as f64;
    Some((data_rate * rtt?.as_secs_f64()) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2 Mbit/s uplink (250 kB/s), full, best effort at 0.85 of it.
    const UPLINK: OppositeLink = OppositeLink {
        full: Some(true),
        capacity: Some(250e3),
        best_effort: Some(212e3),
        header_bytes: 14,
        queue_stands: None,
        background_at_floor: None,
    };

    /// The rounds' length: the ACKs below are bytes a second.
    const ROUND: Duration = Duration::from_secs(1);

    /// The cap for a round of 200 segments delivered (1448 bytes each) and `acks`, over `rtt_ms`.
    fn cap_of_200_segments(opposite: OppositeLink, acks: BestEffort, rtt_ms: u64) -> Option<u64> {
        ack_cap(
            opposite,
            2 * 1448 * 100,
            acks,
            ROUND,
            Some(Duration::from_millis(rtt_ms)),
        )
    }

    /// `n` ACKs of `ip` bytes each.
    fn acks(n: u64, ip: u64) -> BestEffort {
        BestEffort {
            bytes: n * ip,
            packets: n,
        }
    }

    #[test]
    fn acks_fit_three_percent_of_an_uplink_best_effort_needs() {
        // One 66-byte ACK per two 1514-byte segments (1448 delivered each): the room is 7.5 kB/s
        // of ACKs, 329 kB/s (2.6 Mbit/s) of data; over 40 ms, 13 kB in flight.
        assert_eq!(cap_of_200_segments(UPLINK, acks(100, 52), 40), Some(13_163));
        // An ACK per segment: half the data.
        assert_eq!(cap_of_200_segments(UPLINK, acks(200, 52), 40), Some(6_581));
        // The link-layer header counts: without it (PPP) the same ACKs are 52 bytes.
        let ppp = OppositeLink {
            header_bytes: 0,
            ..UPLINK
        };
        assert_eq!(cap_of_200_segments(ppp, acks(100, 52), 40), Some(16_707));
    }

    #[test]
    fn no_cap_while_best_effort_does_not_need_the_opposite_link() {
        let rtt = Some(Duration::from_millis(40));
        let cap = |opposite| ack_cap(opposite, 289_600, acks(100, 52), ROUND, rtt);
        // Not full (a call, a small upload), or best effort under a tenth of it (pings, DNS,
        // the ACKs of best effort's downloads).
        assert_eq!(
            cap(OppositeLink {
                full: Some(false),
                ..UPLINK
            }),
            None
        );
        assert_eq!(
            cap(OppositeLink {
                best_effort: Some(20e3),
                ..UPLINK
            }),
            None
        );
        let present = OppositeLink {
            best_effort: Some(30e3),
            ..UPLINK
        };
        assert!(cap(present).is_some());
        // Nothing counted.
        assert_eq!(cap(OppositeLink::default()), None);
        assert_eq!(
            cap(OppositeLink {
                best_effort: None,
                ..UPLINK
            }),
            None
        );
        // Nothing delivered, no ACK seen, no RTT.
        assert_eq!(ack_cap(UPLINK, 0, acks(100, 52), ROUND, rtt), None);
        assert_eq!(ack_cap(UPLINK, 289_600, acks(0, 52), ROUND, rtt), None);
        assert_eq!(ack_cap(UPLINK, 289_600, acks(100, 52), ROUND, None), None);
    }

    #[test]
    fn on_a_symmetric_link_the_cap_is_about_the_links_rate() {
        // 10 Mbit/s each way at 100 ms (125 kB BDP), ACKs of 66 and of 78 bytes (timestamps):
        // above the BDP, so a download beside a best-effort upload keeps the whole link.
        let uplink = OppositeLink {
            capacity: Some(1.25e6),
            best_effort: Some(1.2e6),
            ..UPLINK
        };
        assert_eq!(cap_of_200_segments(uplink, acks(100, 52), 100), Some(164_545));
        assert_eq!(cap_of_200_segments(uplink, acks(100, 64), 100), Some(139_230));
    }

    #[test]
    fn the_opposite_backgrounds_floor_comes_out_of_the_room() {
        // 10 Mbit/s each way at 100 ms, a background upload at its floor (22.6 kB/s, 1.8%) of
        // the 37.5 kB/s: 14.9 kB/s left for the ACKs (66 bytes per 2896 delivered), 654 kB/s
        // of data, 65 kB in flight.
        let uplink = OppositeLink {
            capacity: Some(1.25e6),
            best_effort: Some(1.2e6),
            background_at_floor: Some(22.6e3),
            ..UPLINK
        };
        assert_eq!(cap_of_200_segments(uplink, acks(100, 52), 100), Some(65_379));
        // A floor over the whole room (a slow uplink): the download at its own floor.
        let slow = OppositeLink {
            background_at_floor: Some(40e3),
            ..uplink
        };
        assert_eq!(cap_of_200_segments(slow, acks(100, 52), 100), Some(0));
    }

    #[test]
    fn no_cap_where_the_queue_is_timed_and_does_not_stand() {
        // The counters read a full 2 Mbit/s uplink, but its queue is timed and does not stand:
        // a faster link that carried only what best effort sent (an app-limited upload).
        let cap = |opposite: OppositeLink| cap_of_200_segments(opposite, acks(100, 52), 40);
        assert_eq!(cap(UPLINK.with_acks_queue(Some(false))), None);
        assert_eq!(cap(UPLINK.with_acks_queue(Some(true))), Some(13_163));
        // Not timed: the counters decide, as before.
        assert_eq!(cap(UPLINK.with_acks_queue(None)), Some(13_163));
        // Either view of a standing queue keeps the cap (the upload link's own samples, or the
        // ACKs').
        let own = |stands| OppositeLink {
            queue_stands: Some(stands),
            ..UPLINK
        };
        assert_eq!(cap(own(true).with_acks_queue(Some(false))), Some(13_163));
        assert_eq!(cap(own(false).with_acks_queue(Some(true))), Some(13_163));
        assert_eq!(cap(own(false).with_acks_queue(None)), None);
    }

    #[test]
    fn the_acks_queue_stands_four_rounds_and_goes_after_twenty_five() {
        let mut queue = AcksQueue::default();
        let mut flow = FlowDelay::default();
        let mut round = |queue: &mut AcksQueue, trips_ms: &[u64]| {
            for &ms in trips_ms {
                queue.on_trip(&mut flow, Duration::from_millis(ms));
            }
            queue.end_round()
        };
        assert_eq!(round(&mut queue, &[]), None);
        // The first trip is the flow's base (10 ms): no queue.
        assert_eq!(round(&mut queue, &[10]), Some(false));
        // Rounds of 2-3 ms (the 25th percentile: 2 ms), one without a reading between them:
        // the fourth in a row stands.
        for _ in 0..3 {
            assert_eq!(round(&mut queue, &[12, 13, 12, 12]), Some(false));
        }
        assert_eq!(round(&mut queue, &[]), Some(false));
        assert_eq!(round(&mut queue, &[12, 13, 12, 12]), Some(true));
        // A drained queue for 24 rounds (a loss-based upload's sawtooth) does not lift it...
        for _ in 0..24 {
            assert_eq!(round(&mut queue, &[10, 11, 10, 10]), Some(true));
        }
        // ... the 25th does; a round of 1 ms is under the 2 ms, and three rounds of a queue do
        // not stand.
        assert_eq!(round(&mut queue, &[11, 11, 11, 11]), Some(false));
        for _ in 0..3 {
            assert_eq!(round(&mut queue, &[30, 30, 30, 30]), Some(false));
        }
        assert_eq!(round(&mut queue, &[11, 10, 11, 11]), Some(false));
    }

    #[test]
    fn a_queue_no_longer_timed_is_left_to_the_counters() {
        let ms = Duration::from_millis;
        let mut queue = StandingQueue::default();
        for _ in 0..4 {
            queue.on_round(Some(ms(5)));
        }
        assert_eq!(queue.stands(), Some(true));
        // The flows that timed it ended: 24 rounds without a reading keep what it said...
        for _ in 0..24 {
            assert_eq!(queue.on_round(None), Some(true));
        }
        // ... the 25th leaves it untimed, and a new reading starts over (one round at 5 ms
        // does not stand).
        assert_eq!(queue.on_round(None), None);
        assert_eq!(queue.on_round(Some(ms(5))), Some(false));
    }

    #[test]
    fn no_cap_on_a_link_that_carries_little_but_the_acks() {
        // A 2 Mbit/s download at 100 ms: a 100 ms round delivers 25 kB and sends 9 ACKs (594
        // bytes on the wire, 5.94 kB/s) up a link that carries nothing else but a ping (0.9 kB/s):
        // its capacity as counted is its own peak, 7 kB/s, and it reads full.
        let idle = OppositeLink {
            full: Some(true),
            capacity: Some(7e3),
            best_effort: Some(900.0),
            header_bytes: 14,
            queue_stands: None,
            background_at_floor: None,
        };
        let (round, rtt) = (Duration::from_millis(100), Some(Duration::from_millis(100)));
        // The ping is over a tenth of the link but under half the ACKs: no cap.
        assert_eq!(ack_cap(idle, 25_000, acks(9, 52), round, rtt), None);
        // Best effort at 3 kB/s, over half the ACKs' 5.94: the room is 3% of 7 kB/s, 210 B/s,
        // 8838 B/s of data, 883 bytes in flight over 100 ms.
        let busy = OppositeLink {
            best_effort: Some(3e3),
            ..idle
        };
        assert_eq!(ack_cap(busy, 25_000, acks(9, 52), round, rtt), Some(883));
        // No round length: no rate, no cap.
        assert_eq!(ack_cap(busy, 25_000, acks(9, 52), Duration::ZERO, rtt), None);
    }
}
