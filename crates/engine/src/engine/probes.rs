//! Delay probes: how the household measures a link whose background flows cannot be timed.
//!
//! A QUIC flow's packets are encrypted: no timestamps, no sequence numbers, nothing the router
//! can pair into a round trip. While such a flow is under household control, the engine asks the
//! shell for probes, ICMP echoes to a reflector beyond the access link (as cake-autorate and
//! sqm-autorate do), and each answer's round trip is one more sample of each such link's delay,
//! as one more flow with its own base (`Link::probe_delay`): base plus the link's queueing
//! delay. A round trip crosses both links' queues; the opposite link's own queue is taken off
//! where it is known (`LinkDelay::on_round_trip_sample`), as for TCP round-trip halves.
//!
//! A uTP flow times itself (its headers), and TCP flows do, so a link with only those gets no
//! probes: probing costs nothing unless it is needed. Except in one case: background both ways
//! without TCP timestamps (a Windows PC's BitTorrent). Then every sample of either link is a
//! round trip across both queues, each link reads the sum, and the two controllers yield to
//! each other's queues (lab `both`, no timestamps: the background alone filled 0.07-0.75 of
//! the download). The shell's probes are ICMP timestamp requests where it can send them
//! (IPv4, a raw socket): their halves are each link's own queue
//! ([`Engine::on_probe_one_way`], `household::one_way_probe`), and the round trips of either
//! link are then corrected by the other's, as with timestamps.

use slipstream_control::{Duration, Instant};

use super::Engine;
use crate::stats::LinkDirection;
use crate::udp::utp::UdpKind;

/// Probes per round (about one base RTT) a link is measured with, and the bounds of the
/// interval: at least 20 ms between probes (at most 50 a second, 25 kbit/s each way with
/// 64-byte echoes, a few per cent of a 1 Mbit/s uplink at worst), at most 100 ms.
const PROBES_PER_ROUND: u32 = 4;
const MIN_INTERVAL: Duration = Duration::from_millis(20);
const MAX_INTERVAL: Duration = Duration::from_millis(100);
/// An echo's IP packet (the daemon's: 20 bytes of IPv4 header, 16 of ICMP); a timestamp
/// request's is 40 (20 of ICMP).
const PROBE_IP_BYTES: u64 = 36;
const TIMESTAMP_IP_BYTES: u64 = 40;

/// The one-way delays of an ICMP timestamp probe (RFC 792), each on the two clocks' offset, µs:
/// the request's trip (our send time to the reflector's receive stamp) and the reply's (the
/// reflector's transmit stamp to our receive time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneWayDelays {
    /// The request's trip: across the upload link.
    pub up_us: i64,
    /// The reply's trip: across the download link.
    pub down_us: i64,
}
/// Round trips longer than this are no measurement of a queue (a reflector that answered late).
const MAX_PROBE_RTT: Duration = Duration::from_secs(2);
/// A one-way half this far below its minimum is no queue draining (the minimum was measured on
/// an empty queue, to within the reflector's millisecond tick): a clock moved, or the path got
/// shorter.
const CLOCK_MOVED: Duration = Duration::from_millis(2);

impl Engine {
    /// The links that have a household flow the router cannot time (a UDP flow that is not
    /// uTP; both links for one whose direction is not known yet), by [`LinkDirection::index`].
    fn untimed_links(&self) -> [bool; 2] {
        let mut untimed = [false; 2];
        for (_, flow) in self.udp.iter() {
            if flow.household.is_none() || flow.is_released() || flow.utp.kind == UdpKind::Utp {
                continue;
            }
            match flow.link() {
                Some(link) => untimed[link.index()] = true,
                // Not yet known which way it will load: probe from its start, so the probes'
                // base is measured before its queue builds (a base taken on a standing queue
                // would hide that queue for the rest of the epoch).
                None => untimed = [true; 2],
            }
        }
        untimed
    }

    /// Both links when both have household flows that only round trips time (no TCP
    /// timestamps, no uTP): one-way probes tell their queues apart. Where one link's flows time
    /// it alone, the other's round trips are corrected by it, and no probe is needed.
    fn round_trip_only_links(&self) -> [bool; 2] {
        let [a, b] = &self.household.links;
        [a.timed_by_round_trips_only() && b.timed_by_round_trips_only(); 2]
    }

    /// The links a probe's answer is a sample of: untimed flows', and both links' of background
    /// timed by round trips only (`one_way`: only one-way halves help them).
    fn probed_links(&self, one_way: bool) -> [bool; 2] {
        let untimed = self.untimed_links();
        let round_trips = if one_way {
            self.round_trip_only_links()
        } else {
            [false; 2]
        };
        [untimed[0] || round_trips[0], untimed[1] || round_trips[1]]
    }

    /// How often the shell should send a delay probe now; `None`: no probes wanted.
    pub fn probe_interval(&self) -> Option<Duration> {
        let untimed = self.probed_links(true);
        if !untimed.contains(&true) {
            return None;
        }
        let base = LinkDirection::ALL
            .iter()
            .filter(|l| untimed[l.index()])
            .filter_map(|l| self.household.base_rtt(l.index()))
            .min()
            .unwrap_or(MAX_INTERVAL * PROBES_PER_ROUND);
        Some((base / PROBES_PER_ROUND).clamp(MIN_INTERVAL, MAX_INTERVAL))
    }

    /// A probe's answer: sent and received on the engine's clock (the kernel's receive
    /// timestamp where the socket gives one).
    pub fn on_probe_sample(&mut self, sent: Instant, received: Instant) {
        let rtt = received.saturating_since(sent);
        if rtt.is_zero() || rtt > MAX_PROBE_RTT {
            return;
        }
        self.counters.probe_samples += 1;
        // The probe and its answer crossed the links: the daemon's own packets, not best
        // effort's (50 steady small packets a second would read as a call and set the
        // interactive target).
        for link in &mut self.household.links {
            link.background.bytes += PROBE_IP_BYTES;
            link.background.packets += 1;
        }
        // Background both ways timed by round trips gains nothing from another round trip.
        let untimed = self.untimed_links();
        for link in LinkDirection::ALL {
            if !untimed[link.index()] {
                continue;
            }
            let opposite = match link {
                LinkDirection::Download => LinkDirection::Upload,
                LinkDirection::Upload => LinkDirection::Download,
            };
            let opposite_queue = self.household.links[opposite.index()].queue_for_opposite();
            let link = &mut self.household.links[link.index()];
            link.delay
                .on_round_trip_sample(&mut link.probe_delay, rtt, opposite_queue);
        }
    }

    /// An ICMP timestamp probe's answer: sent and received on the engine's clock, and its two
    /// one-way halves. Each half is a sample of its link's own queue (`one_way_probe`).
    pub fn on_probe_one_way(&mut self, sent: Instant, received: Instant, halves: OneWayDelays) {
        let rtt = received.saturating_since(sent);
        if rtt.is_zero() || rtt > MAX_PROBE_RTT {
            return;
        }
        self.counters.probe_samples += 1;
        for link in &mut self.household.links {
            link.background.bytes += TIMESTAMP_IP_BYTES;
            link.background.packets += 1;
        }
        let probed = self.probed_links(true);
        let mut samples = [None; 2];
        for link in LinkDirection::ALL {
            if probed[link.index()] {
                let half = match link {
                    LinkDirection::Download => halves.down_us,
                    LinkDirection::Upload => halves.up_us,
                };
                samples[link.index()] = Some(self.household.links[link.index()].one_way_probe.sample(half));
            }
        }
        // A clock that moves by d (an NTP correction under `one_way_probe::STEP`, ours or the
        // reflector's) lowers one half by d and raises the other: the raised one would read d
        // of queue that is not there until its base aged out (two epochs, about a minute). The
        // lowered one's base follows by itself (a new minimum); the raised one's starts again.
        // (A half that falls while the other does not rise is a queue its base was taken on,
        // draining: nothing moved.)
        let links = &self.household.links;
        let excess_us = |i: usize| {
            samples[i]
                .zip(links[i].one_way_probe.delay.base())
                .map(|(sample, base)| sample.as_micros() as i64 - base.as_micros() as i64)
        };
        let moved_us = CLOCK_MOVED.as_micros() as i64;
        let restart = [0, 1].map(|i| {
            let other = 1 - i;
            excess_us(other)
                .zip(excess_us(i))
                .is_some_and(|(fell, rose)| -fell > moved_us && rose >= -fell - moved_us)
        });
        for ((sample, link), restart) in samples.into_iter().zip(&mut self.household.links).zip(restart) {
            if restart {
                link.one_way_probe.delay.restart();
            }
            if let Some(sample) = sample {
                link.delay.on_probe_sample(&mut link.one_way_probe.delay, sample);
            }
        }
    }
}
