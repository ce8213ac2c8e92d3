//! One tracked connection: both endpoints' TCP state, which way the bulk data goes, the
//! controller of the receiving side's ACKs, and the router-side RTT and goodput.

use slipstream_control::{
    AckSample, AnyController, Controller, ControllerConfig, DataSample, Duration, FlowContext, Instant,
    Timestamps, TsClockEstimator,
};
use slipstream_wire::TcpPacketInfo;

use crate::flow_key::{FlowKey, Side};
use crate::goodput::GoodputMeter;
use crate::rtt::RttEstimator;
use crate::stats::{FlowSnapshot, LinkDirection, PassReason};
use crate::tcp_state::{EndpointState, Negotiated, SynOptions};
use crate::window_clamp::{clamp_window, right_edge, ClampRequest};

mod household;
mod kernel;
mod midstream;

pub(crate) use household::HouseholdFlow;
pub use kernel::KernelClamp;

/// Payload bytes one side must have sent before it is taken as the bulk sender.
const BULK_MIN_BYTES: u64 = 4096;
/// The other side takes over as bulk sender only once it has sent this much more.
const BULK_SWITCH_MARGIN: u64 = 256 * 1024;
/// RFC 9293 default MSS when the receiver announced none.
const DEFAULT_MSS: u32 = 536;
/// Segments a household flow's LAN host may be sent before the flow's direction is known: RFC
/// 3390's initial window of four segments, not RFC 6928's ten (dozens of flows opened at once,
/// as Steam and BitTorrent do, would otherwise queue ten segments each).
const INITIAL_WINDOW_SEGMENTS: u32 = 4;
/// Bytes of the timestamp option (10, padded to 12) that come out of every segment.
const TIMESTAMP_OPTION_BYTES: u32 = 12;

/// Something the I/O shell should log once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowEvent {
    /// A background flow negotiated no TCP timestamps: its controller cannot work, it stays unclamped.
    NoTimestamps {
        /// The flow.
        key: FlowKey,
        /// The rule that classed it.
        rule: u16,
    },
    /// A flow was first seen after its handshake: its window scale is unknown, it stays unclamped
    /// until the shell finds the scales (`Engine::learn_window_scales`).
    HandshakeMissed {
        /// The flow.
        key: FlowKey,
        /// The rule that classed it.
        rule: u16,
    },
}

/// The controller of a flow and the sender clock it needs.
#[derive(Clone, Debug)]
struct FlowControl {
    controller: AnyController,
    sender_clock: TsClockEstimator,
    /// Household control's per-flow state (`ControllerConfig::Household` flows only).
    household: Option<HouseholdFlow>,
}

/// What a data segment gave the engine.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DataOutcome {
    pub event: Option<FlowEvent>,
    /// A new sample of the delay across the access link for household control: the one-way
    /// delay sender -> router where the sender's TSval clock is known (it leaves the ACK path,
    /// and a queue of uploads on it, out), else the far half of the RTT (router -> sender ->
    /// router, by window release without timestamps). One kind per flow, never mixed.
    pub link_sample: Option<Duration>,
    /// `link_sample` is a one-way delay: it crossed the download link's queue alone.
    pub one_way: bool,
    /// With a one-way sample, the trip of the ACK this segment answered, router -> sender, on
    /// an arbitrary origin: the far half of the round trip less the data's one-way delay. Its
    /// excess over the flow's minimum is the queue the background's ACKs met on the upload
    /// link (see `household::ack_room`).
    pub ack_trip: Option<Duration>,
}

/// What an ACK gave the engine.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AckResult {
    pub outcome: AckOutcome,
    /// A new near-half RTT sample (router -> receiver -> router).
    pub near_sample: Option<Duration>,
    /// For a household upload with timestamps: the one-way delay of this ACK from the receiver
    /// to the router, by the receiver's TSval clock on an arbitrary origin (`AckPath`).
    pub ack_one_way: Option<Duration>,
    /// Bytes the receiver newly acknowledged (0 unless the ACK came from the bulk receiver).
    pub acked: u32,
}

/// What happened to an ACK of the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AckOutcome {
    /// Forward with this window field instead of the host's.
    Rewrite(u16),
    Pass(PassReason),
}

#[derive(Clone, Debug)]
pub(crate) struct Flow {
    pub rule: u16,
    pub last_seen: Instant,
    pub closing_since: Option<Instant>,
    ends: [EndpointState; 2],
    negotiated: Option<Negotiated>,
    handshake_missed: bool,
    /// Window scales learned outside the flow's packets (`midstream`), applied at its next packet.
    learned_scales: Option<[u8; 2]>,
    /// The flow's rule was removed by a reload: never clamped again (see `Engine::reconfigure`).
    released: bool,
    bulk_sender: Option<Side>,
    /// Boxed: only flows with a known bulk direction and a working controller need one, and
    /// the flow table's slots stay small.
    control: Option<Box<FlowControl>>,
    unclamped_reason: Option<PassReason>,
    rtt: RttEstimator,
    goodput: GoodputMeter,
    /// (host window, forwarded window) in bytes, of the receiver's last ACK.
    last_window: Option<(u32, u32)>,
    /// The endpoint on the LAN side, once a packet told (`PacketMeta::from_lan`).
    lan_side: Option<Side>,
    /// When each side's SYN (or SYN-ACK) passed, and the round trip router -> side -> router the
    /// handshake measured for each side.
    syn_at: [Option<Instant>; 2],
    handshake_half: [Option<Duration>; 2],
    /// The controller's last target for the receiver's ACKs (bytes, held), for kernel datapaths.
    last_target: Option<(u32, bool)>,
}

impl Flow {
    pub(crate) fn new(rule: u16, now: Instant) -> Flow {
        Flow {
            rule,
            last_seen: now,
            closing_since: None,
            ends: [EndpointState::default(); 2],
            negotiated: None,
            handshake_missed: false,
            learned_scales: None,
            released: false,
            bulk_sender: None,
            control: None,
            unclamped_reason: None,
            rtt: RttEstimator::default(),
            goodput: GoodputMeter::default(),
            last_window: None,
            lan_side: None,
            syn_at: [None; 2],
            handshake_half: [None; 2],
            last_target: None,
        }
    }

    /// A packet from `side` entered from the LAN (`Some(true)`) or from elsewhere.
    pub(crate) fn note_lan_side(&mut self, side: Side, from_lan: Option<bool>) {
        if self.lan_side.is_none() {
            self.lan_side = from_lan.map(|lan| if lan { side } else { side.other() });
        }
    }

    /// The LAN endpoint: the one a packet said, else the flow's lower address.
    pub(crate) fn lan_side(&self) -> Side {
        self.lan_side.unwrap_or(Side::Low)
    }

    /// Which access link the flow loads: the uplink when its bulk sender is the LAN host.
    pub(crate) fn link(&self) -> Option<LinkDirection> {
        let sender = self.bulk_sender?;
        Some(if self.lan_side == Some(sender) {
            LinkDirection::Upload
        } else {
            LinkDirection::Download
        })
    }

    /// Two of the bulk sender's segments: the smallest window a flow with a turn gets.
    pub(crate) fn floor(&self) -> u32 {
        2 * self.sender_mss()
    }

    /// The router-measured RTT, or the half measured so far.
    pub(crate) fn rtt_estimate(&self) -> Option<Duration> {
        self.rtt.rtt().or_else(|| {
            let (far, near) = self.rtt.halves();
            far.or(near)
        })
    }

    /// The flow's path without queues: each half's smallest sample (`rtt`), once both have one.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.rtt.base_rtt()
    }

    /// Stops controlling the flow for good (its rule was removed): its ACKs pass unmodified from
    /// now on, which only lets the window grow back to the host's. The controller is freed.
    pub(crate) fn release(&mut self) {
        self.released = true;
        self.control = None;
        self.unclamped_reason = Some(PassReason::RuleRemoved);
    }

    pub(crate) fn is_released(&self) -> bool {
        self.released
    }

    /// A SYN or SYN-ACK from `side`. Returns true once both have been seen.
    pub(crate) fn on_syn(&mut self, side: Side, now: Instant, info: &TcpPacketInfo) {
        // The handshake gives each half of the round trip once: SYN out, SYN-ACK back is the
        // half on the SYN-ACK's side; SYN-ACK out, the first ACK back the other half.
        if info.flags.ack {
            if let (None, Some(syn_at)) = (
                self.handshake_half[side.index()],
                self.syn_at[side.other().index()],
            ) {
                self.handshake_half[side.index()] = Some(now.saturating_since(syn_at));
            }
        }
        self.syn_at[side.index()] = Some(now);
        self.ends[side.index()].syn = Some(SynOptions::from_wire(&info.options));
        self.ends[side.index()].syn_seq = Some(info.seq);
        if let (Some(a), Some(b)) = (self.ends[0].syn, self.ends[1].syn) {
            self.negotiated = Some(Negotiated::from_syns(&a, &b));
        }
    }

    /// Whether a SYN without ACK from `side` with sequence number `seq` opens a new connection on
    /// this flow's 4-tuple (a port reused within the idle timeout or the linger after a close)
    /// rather than repeating the SYN this flow began with. A new connection must not inherit
    /// sequence state, right edges or controller state. A retransmitted SYN carries the same
    /// ISN; the first SYN of a simultaneous open comes from the other side and finds none yet.
    pub(crate) fn is_reopened_by(&self, side: Side, seq: u32) -> bool {
        match self.ends[side.index()].syn_seq {
            Some(isn) => isn != seq,
            None => self.handshake_missed || self.negotiated.is_some() || self.closing_since.is_some(),
        }
    }

    /// The first ACK after a SYN-ACK from `side`'s peer ends the handshake's second half.
    pub(crate) fn on_handshake_ack(&mut self, side: Side, now: Instant) {
        if self.handshake_half[side.index()].is_none() && self.ends[side.index()].syn.is_some() {
            if let Some(synack_at) = self.syn_at[side.other().index()] {
                self.handshake_half[side.index()] = Some(now.saturating_since(synack_at));
            }
        }
    }

    /// A non-SYN segment before the handshake completed: returns true the first time, so the
    /// caller can report the flow once.
    pub(crate) fn note_missed_handshake(&mut self) -> bool {
        if self.negotiated.is_some() || self.handshake_missed {
            return false;
        }
        self.handshake_missed = true;
        self.unclamped_reason = Some(PassReason::NoHandshake);
        true
    }

    pub(crate) fn on_fin(&mut self, side: Side, now: Instant) {
        self.ends[side.index()].fin_sent = true;
        if self.ends[0].fin_sent && self.ends[1].fin_sent && self.closing_since.is_none() {
            self.closing_since = Some(now);
        }
    }

    /// A data segment from `side`. May pick the bulk direction and create the controller, which
    /// can produce an event.
    pub(crate) fn on_data(
        &mut self,
        side: Side,
        now: Instant,
        info: &TcpPacketInfo,
        controller: &ControllerConfig,
        key: FlowKey,
    ) -> DataOutcome {
        let out_of_order = self.ends[side.index()].on_data(info.seq, info.payload_len);
        let event = self.update_bulk_sender(controller, key);
        if self.bulk_sender != Some(side) {
            return DataOutcome {
                event,
                ..DataOutcome::default()
            };
        }
        let timestamps = info
            .options
            .timestamps
            .map(|(tsval, tsecr)| Timestamps { tsval, tsecr });
        let far_sample = self.rtt.on_data_arrived(
            now,
            timestamps.map(|t| t.tsecr),
            info.seq.wrapping_add(info.payload_len),
        );
        let ctx = self.context();
        let timed = self.negotiated.is_some_and(|n| n.timestamps);
        let mut link_sample = if timed { None } else { far_sample };
        let mut ack_trip = None;
        if let Some(control) = self.control.as_mut() {
            if let Some(t) = timestamps {
                control.sender_clock.observe(now, t.tsval);
                if let (Some(clock), Some(h)) = (control.sender_clock.clock(), control.household.as_mut()) {
                    (link_sample, ack_trip) = h.data_delays(clock, now, t.tsval, far_sample);
                }
            }
            let sample = DataSample {
                payload_len: info.payload_len,
                timestamps,
                out_of_order,
            };
            control.controller.on_data(now, &ctx, &sample);
        }
        DataOutcome {
            event,
            link_sample,
            one_way: link_sample.is_some() && timed,
            ack_trip,
        }
    }

    /// Any segment with the ACK flag from `side`: returns what to do with its window field.
    /// `can_rewrite` is false when the packet cannot be handed back modified.
    pub(crate) fn on_ack(
        &mut self,
        side: Side,
        now: Instant,
        info: &TcpPacketInfo,
        can_rewrite: Result<(), PassReason>,
        household: bool,
    ) -> AckResult {
        let acked = self.ends[side.index()].on_ack(info.ack);
        let pass = |reason| AckResult {
            outcome: AckOutcome::Pass(reason),
            near_sample: None,
            ack_one_way: None,
            acked: 0,
        };
        let Some(negotiated) = self.negotiated else {
            return pass(PassReason::NoHandshake);
        };
        let scale = negotiated.window_scale[side.index()];
        self.learn_edge_if_midstream(side, info, scale);
        let host_bytes = u32::from(info.window) << scale;
        let is_receiver = self.bulk_sender == Some(side.other());
        if !is_receiver {
            let mut field = info.window;
            // Household flows: until the bulk direction is known, the LAN host's window is held
            // to an initial window, so dozens of new flows cannot each run ahead on the host's
            // whole window before their first allocation (a right edge never comes back).
            let early =
                household && self.bulk_sender.is_none() && self.lan_side == Some(side) && can_rewrite.is_ok();
            if early {
                let mss = self.early_mss(side);
                field = clamp_window(ClampRequest {
                    host_field: info.window,
                    scale,
                    ack: info.ack,
                    right_edge: self.ends[side.index()].advertised_edge,
                    target_bytes: INITIAL_WINDOW_SEGMENTS * mss,
                    mss,
                    hold: false,
                });
            }
            self.ends[side.index()].on_window_forwarded(right_edge(info.ack, field, scale));
            if field < info.window {
                return AckResult {
                    outcome: AckOutcome::Rewrite(field),
                    near_sample: None,
                    ack_one_way: None,
                    acked: 0,
                };
            }
            return pass(PassReason::Observed);
        }
        self.goodput.on_acked(now, acked);
        let tsval = info.options.timestamps.map(|(tsval, _)| tsval);
        let near_sample = self.rtt.on_ack_forwarded(now, tsval, info.ack);
        let upload = self.link() == Some(LinkDirection::Upload);
        let ack_one_way = match (tsval, self.control.as_mut().and_then(|c| c.household.as_mut())) {
            (Some(tsval), Some(h)) if upload => h.ack_one_way(now, tsval).filter(|_| near_sample.is_some()),
            _ => None,
        };
        let hold = matches!(
            self.control.as_ref().map(|c| &c.controller),
            Some(AnyController::Household(share)) if share.is_held()
        );
        let sack = &info.options.sack;
        let reports_loss = sack.blocks[..usize::from(sack.count.min(4))]
            .iter()
            .any(|&(_, right)| slipstream_control::time::seq_lt(info.ack, right));
        let ctx = self.context();
        let target = match self.control.as_mut() {
            Some(control) => {
                let sample = AckSample {
                    acked_bytes: acked,
                    tsval,
                    reports_loss,
                };
                control.controller.on_ack(now, &ctx, &sample)
            }
            None => None,
        };
        self.last_target = target.map(|t| (t, hold));
        let receiver = &mut self.ends[side.index()];
        let outcome = match (target, can_rewrite) {
            (None, _) => AckOutcome::Pass(self.unclamped_reason.unwrap_or(PassReason::NoTarget)),
            (Some(target_bytes), Ok(())) => {
                let field = clamp_window(ClampRequest {
                    host_field: info.window,
                    scale,
                    ack: info.ack,
                    right_edge: receiver.advertised_edge,
                    target_bytes,
                    mss: ctx.mss,
                    hold,
                });
                if field < info.window {
                    AckOutcome::Rewrite(field)
                } else {
                    AckOutcome::Pass(PassReason::NotLowered)
                }
            }
            (Some(_), Err(reason)) => AckOutcome::Pass(reason),
        };
        let forwarded = match outcome {
            AckOutcome::Rewrite(field) => field,
            AckOutcome::Pass(_) => info.window,
        };
        let previous_edge = receiver.advertised_edge;
        let edge = right_edge(info.ack, forwarded, scale);
        receiver.on_window_forwarded(edge);
        if let Some(previous) = previous_edge {
            if slipstream_control::time::seq_lt(previous, edge) {
                self.rtt.on_window_released(now, previous, negotiated.timestamps);
            }
        }
        self.last_window = Some((host_bytes, u32::from(forwarded) << scale));
        AckResult {
            outcome,
            near_sample,
            ack_one_way,
            acked,
        }
    }

    /// The segment size a household flow's LAN host (`side`) announced, for its early clamp.
    /// As in `sender_mss`: an MSS too small to be real (0 is "none" to Linux) would make the
    /// initial window zero (found by fuzzing).
    fn early_mss(&self, side: Side) -> u32 {
        self.ends[side.index()]
            .syn
            .and_then(|s| s.mss)
            .map(u32::from)
            .filter(|&mss| mss > TIMESTAMP_OPTION_BYTES + 64)
            .unwrap_or(DEFAULT_MSS)
    }

    fn update_bulk_sender(&mut self, controller: &ControllerConfig, key: FlowKey) -> Option<FlowEvent> {
        let bytes = |s: Side| self.ends[s.index()].payload_bytes;
        let candidate = match self.bulk_sender {
            None => [Side::Low, Side::High]
                .into_iter()
                .find(|&s| bytes(s) >= BULK_MIN_BYTES && bytes(s) > bytes(s.other())),
            Some(current) => {
                let other = current.other();
                (bytes(other) > bytes(current) + BULK_SWITCH_MARGIN).then_some(other)
            }
        }?;
        self.bulk_sender = Some(candidate);
        self.control = None;
        self.rtt.on_handshake(
            self.handshake_half[candidate.index()],
            self.handshake_half[candidate.other().index()],
        );
        self.start_control(controller, key)
    }

    /// Builds the bulk receiver's controller once the bulk direction and the handshake (or the
    /// window scales learned mid-stream) are known; a controller that needs timestamps without
    /// them leaves the flow unclamped and reports it once.
    fn start_control(&mut self, controller: &ControllerConfig, key: FlowKey) -> Option<FlowEvent> {
        let negotiated = self.negotiated?;
        if controller.needs_timestamps() && !negotiated.timestamps {
            let first = self.unclamped_reason != Some(PassReason::NoTimestamps);
            self.unclamped_reason = Some(PassReason::NoTimestamps);
            return first.then_some(FlowEvent::NoTimestamps { key, rule: self.rule });
        }
        self.control = Some(Box::new(FlowControl {
            controller: controller.build(),
            sender_clock: TsClockEstimator::new(),
            household: matches!(controller, ControllerConfig::Household).then(|| {
                let mut household = HouseholdFlow::default();
                // An upload's: its near half (see `HouseholdFlow::link_handshake`).
                if self.link() == Some(LinkDirection::Upload) {
                    household.link_handshake = self
                        .lan_side
                        .and_then(|lan| self.handshake_half[lan.other().index()]);
                }
                household
            }),
        }));
        // A household flow starts at its floor: its first round allocates it a share, and until
        // then it must not run ahead on the host's whole window (the edge could not come back).
        let floor = self.floor();
        if let Some(AnyController::Household(share)) = self.control.as_mut().map(|c| &mut c.controller) {
            share.set_allocation(Some(floor), false);
        }
        None
    }

    /// What every controller is told about the flow.
    fn context(&self) -> FlowContext {
        FlowContext {
            mss: self.sender_mss(),
            rtt: self.rtt.rtt(),
            sender_clock: self.control.as_ref().and_then(|c| c.sender_clock.clock()),
            queue_delay: self.rtt.queue_delay(),
            base_rtt: self.rtt.base_rtt(),
            goodput_bits_per_second: self.goodput.measured(),
            allocation: match self.control.as_ref().map(|c| &c.controller) {
                Some(AnyController::Household(share)) => share.target(),
                _ => None,
            },
        }
    }

    /// The bulk sender's segment size: what the receiver announced in its SYN, less the timestamp
    /// option; else the largest segment seen; else the RFC default.
    fn sender_mss(&self) -> u32 {
        let Some(sender) = self.bulk_sender else {
            return DEFAULT_MSS;
        };
        let receiver = &self.ends[sender.other().index()];
        let ts = self.negotiated.is_some_and(|n| n.timestamps);
        match receiver.syn.and_then(|s| s.mss) {
            Some(mss) if u32::from(mss) > TIMESTAMP_OPTION_BYTES + 64 => {
                u32::from(mss) - if ts { TIMESTAMP_OPTION_BYTES } else { 0 }
            }
            _ => self.ends[sender.index()].max_payload.max(DEFAULT_MSS),
        }
    }

    /// The engine's timer, for every flow in the table: lets the goodput meter see time pass when
    /// no ACKs come, and runs the controller's timer hook.
    pub(crate) fn on_tick(&mut self, now: Instant) {
        self.goodput.roll(now);
        if self.control.is_some() {
            let ctx = self.context();
            if let Some(control) = self.control.as_mut() {
                control.controller.on_tick(now, &ctx);
            }
        }
    }

    pub(crate) fn goodput_bits_per_second(&self) -> f64 {
        self.goodput.bits_per_second()
    }

    pub(crate) fn acked_bytes(&self) -> u64 {
        self.goodput.total_acked()
    }

    pub(crate) fn snapshot(&self, key: &FlowKey) -> FlowSnapshot {
        FlowSnapshot {
            rule: self.rule,
            sender: self.bulk_sender.map(|s| key.endpoint(s)),
            receiver: self.bulk_sender.map(|s| key.endpoint(s.other())),
            controller: self.control.as_ref().map(|c| c.controller.stats()),
            rtt: self.rtt.rtt(),
            goodput_bits_per_second: self.goodput.bits_per_second(),
            acked_bytes: self.goodput.total_acked(),
            host_window: self.last_window.map(|w| w.0),
            forwarded_window: self.last_window.map(|w| w.1),
            unclamped_reason: self.unclamped_reason,
            allocation: match self.control.as_ref().map(|c| &c.controller) {
                Some(AnyController::Household(share)) => share.window(),
                _ => None,
            },
            held: matches!(
                self.control.as_ref().map(|c| &c.controller),
                Some(AnyController::Household(share)) if share.is_held()
            ),
            link: self.link(),
            udp: None,
        }
    }
}

#[cfg(test)]
mod tests;
