//! The engine's path for background UDP packets (see `crate::udp`): classed by the same rule
//! number in the mark as TCP, measured, and held to the flow's household share by its shaper
//! (or policer).

use slipstream_control::{ControllerConfig, Instant};
use slipstream_household::UdpEnforcement;
use slipstream_wire::{lower_utp_window, parse_udp, parse_udp_headers, set_ce};

use super::Engine;
use crate::api::{PacketCopy, PacketMeta, Verdict};
use crate::flow_key::FlowKey;
use crate::stats::{LinkDirection, PassReason};
use crate::udp::policer::Admission;
use crate::udp::utp::{Packet, UdpKind};
use crate::udp::UdpFlow;

impl Engine {
    /// A packet that is not TCP: a background UDP flow's, or passed untouched.
    pub(super) fn handle_udp(&mut self, now: Instant, packet: &mut [u8], meta: PacketMeta) -> Verdict {
        let parsed = match meta.copy {
            PacketCopy::Full => parse_udp(packet),
            PacketCopy::HeaderOnly => parse_udp_headers(packet),
        };
        let info = match parsed {
            Ok(info) => info,
            Err(error) => {
                self.counters.count_malformed(error);
                return Verdict::Accept;
            }
        };
        let Some(rule) = meta.rule.filter(|r| *r >= 1) else {
            self.counters.count_pass(PassReason::Unclassified);
            return Verdict::Accept;
        };
        let (key, side) = FlowKey::from_packet(info.src, info.src_port, info.dst, info.dst_port);
        if usize::from(rule) > self.configured && !self.udp.contains(&key) {
            self.counters.count_pass(PassReason::Unclassified);
            return Verdict::Accept;
        }
        if !self.rounds_deferred {
            self.run_household(now);
        }
        let at = meta.arrival.filter(|t| *t <= now).unwrap_or(now);
        let household = self
            .classes
            .get(usize::from(rule) - 1)
            .is_some_and(|c| matches!(c.spec.controller, ControllerConfig::Household));
        let max_flows = self.table.limits().max_flows;
        let Some((flow, created)) = self
            .udp
            .admit(key, max_flows, || UdpFlow::new(rule, now, household))
        else {
            self.counters.count_pass(PassReason::TableFull);
            return Verdict::Accept;
        };
        if created {
            self.counters.udp_flows_created += 1;
            self.classes[usize::from(rule) - 1].counters.flows_started += 1;
        }
        flow.last_seen = now;
        flow.note_lan_side(side, meta.from_lan);
        flow.on_packet(side, at, info.payload_len, info.ip_len);
        let from_sender = flow.bulk_sender() == Some(side);
        let sender_is_lan = flow.bulk_sender() == Some(flow.lan_side());
        let payload = packet.get(info.payload_offset..).unwrap_or(&[]);
        let sample = flow.utp.on_packet(Packet {
            payload,
            from_sender,
            sender_is_lan,
            at,
        });
        if let (Some(sample), Some(link)) = (sample, flow.link()) {
            if let Some((state, _)) = flow.household_mut() {
                self.household.links[link.index()]
                    .delay
                    .on_sample(&mut state.delay, sample);
            }
        }
        let controlled = flow.household.is_some() && !flow.is_released();
        let utp = flow.utp.kind == UdpKind::Utp;
        // uTP carries its receiver's window in clear: lowered in the receiver's packets as a
        // TCP window is, it holds the sender to its share without a loss. Opaque flows (QUIC)
        // have the policer.
        let mut window_lowered = false;
        if controlled && utp && !from_sender && flow.bulk_sender().is_some() && meta.copy == PacketCopy::Full
        {
            let floor = flow.floor();
            if let Some((_, share)) = flow.household_mut() {
                if let Some(target) = share.target() {
                    let window = target.max(floor / 2);
                    window_lowered = meta.checksum_ready
                        && lower_utp_window(packet, info.payload_offset, window).unwrap_or(false);
                }
            }
        }
        let policed = from_sender && controlled && !utp;
        let ecn_capable = meta.copy == PacketCopy::Full && info.ecn.capable();
        let verdict = if window_lowered {
            self.counters.rewritten += 1;
            Verdict::AcceptModified
        } else if !policed {
            Verdict::Accept
        } else {
            // Over the rate: a mark where the sender understands ECN (the policer: instead of
            // the drop; the shaper: the first packet over its queue, which then waits too).
            let mut mark = || ecn_capable && set_ce(packet).is_ok();
            match self.household.config.udp {
                UdpEnforcement::Police if flow.policer.admit(at, info.ip_len) => Verdict::Accept,
                UdpEnforcement::Police if mark() => Verdict::AcceptModified,
                UdpEnforcement::Police => Verdict::Drop,
                UdpEnforcement::Shape => match flow.policer.shape(at, info.ip_len, ecn_capable) {
                    Admission::Pass => Verdict::Accept,
                    Admission::Wait(wait) => Verdict::Hold {
                        until: at + wait,
                        modified: false,
                    },
                    Admission::MarkAndWait(wait) => Verdict::Hold {
                        until: at + wait,
                        modified: mark(),
                    },
                    Admission::Over => Verdict::Drop,
                },
            }
        };
        match verdict {
            Verdict::Drop => {
                flow.dropped_packets += 1;
                flow.dropped_bytes += u64::from(info.ip_len);
                self.counters.udp_dropped += 1;
            }
            Verdict::Hold { modified, .. } => {
                flow.delayed_packets += 1;
                self.counters.udp_delayed += 1;
                if modified {
                    flow.marked_packets += 1;
                    self.counters.udp_marked += 1;
                }
            }
            Verdict::AcceptModified if policed => {
                flow.marked_packets += 1;
                self.counters.udp_marked += 1;
            }
            _ => {}
        }
        // The background's own packets on the link they cross, taken off the WAN counters to
        // leave best effort's: a dropped download packet came over the link (the interface
        // counted it); a dropped upload packet never reaches it.
        let direction = if side == flow.lan_side() {
            LinkDirection::Upload
        } else {
            LinkDirection::Download
        };
        if verdict != Verdict::Drop || direction == LinkDirection::Download {
            let background = &mut self.household.links[direction.index()].background;
            background.bytes += u64::from(info.ip_len);
            background.packets += 1;
        }
        if from_sender && verdict != Verdict::Drop {
            flow.on_forwarded(now, info.payload_len);
            let class = usize::from(flow.rule).clamp(1, self.classes.len()) - 1;
            self.classes[class].counters.acked_bytes += u64::from(info.payload_len);
            if let (Some(link), Some((state, _))) = (flow.link(), flow.household.as_mut()) {
                state.round_acked += u64::from(info.payload_len);
                self.household.links[link.index()].delivered += u64::from(info.payload_len);
            }
        }
        if verdict == Verdict::Accept {
            self.counters.count_pass(PassReason::Observed);
        }
        verdict
    }
}
