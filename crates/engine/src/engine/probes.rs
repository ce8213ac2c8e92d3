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
//! probes: probing costs nothing unless it is needed.

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
/// An echo's IP packet (the daemon's: 20 bytes of IPv4 header, 16 of ICMP).
const PROBE_IP_BYTES: u64 = 36;
/// Round trips longer than this are no measurement of a queue (a reflector that answered late).
const MAX_PROBE_RTT: Duration = Duration::from_secs(2);

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

    /// How often the shell should send a delay probe now; `None`: no probes wanted.
    pub fn probe_interval(&self) -> Option<Duration> {
        let untimed = self.untimed_links();
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
}
