//! One tracked connection: both endpoints' TCP state, which way the bulk data goes, the
//! controller of the receiving side's ACKs, and the router-side RTT and goodput.

use slipstream_control::{
    AckSample, AnyController, Controller, ControllerConfig, DataSample, FlowContext, Instant, Timestamps,
    TsClockEstimator,
};
use slipstream_wire::TcpPacketInfo;

use crate::flow_key::{FlowKey, Side};
use crate::goodput::GoodputMeter;
use crate::rtt::RttEstimator;
use crate::stats::{FlowSnapshot, PassReason};
use crate::tcp_state::{EndpointState, Negotiated, SynOptions};
use crate::window_clamp::{clamp_window, right_edge, ClampRequest};

/// Payload bytes one side must have sent before it is taken as the bulk sender.
const BULK_MIN_BYTES: u64 = 4096;
/// The other side takes over as bulk sender only once it has sent this much more.
const BULK_SWITCH_MARGIN: u64 = 256 * 1024;
/// RFC 9293 default MSS when the receiver announced none.
const DEFAULT_MSS: u32 = 536;
/// Bytes of the timestamp option (10, padded to 12) that come out of every segment.
const TIMESTAMP_OPTION_BYTES: u32 = 12;

/// Something the I/O shell should log once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowEvent {
    /// A background flow negotiated no TCP timestamps: its controller cannot work, it stays unclamped.
    NoTimestamps { key: FlowKey, rule: u16 },
    /// A flow was first seen after its handshake: its window scale is unknown, it stays unclamped.
    HandshakeMissed { key: FlowKey, rule: u16 },
}

/// The controller of a flow and the sender clock it needs.
#[derive(Clone, Debug)]
struct FlowControl {
    controller: AnyController,
    sender_clock: TsClockEstimator,
}

/// What happened to an ACK of the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckOutcome {
    /// Forward with this window field instead of the host's.
    Rewrite(u16),
    Pass(PassReason),
}

#[derive(Clone, Debug)]
pub struct Flow {
    pub rule: u16,
    pub last_seen: Instant,
    pub closing_since: Option<Instant>,
    ends: [EndpointState; 2],
    negotiated: Option<Negotiated>,
    handshake_missed: bool,
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
}

impl Flow {
    pub fn new(rule: u16, now: Instant) -> Flow {
        Flow {
            rule,
            last_seen: now,
            closing_since: None,
            ends: [EndpointState::default(); 2],
            negotiated: None,
            handshake_missed: false,
            released: false,
            bulk_sender: None,
            control: None,
            unclamped_reason: None,
            rtt: RttEstimator::default(),
            goodput: GoodputMeter::default(),
            last_window: None,
        }
    }

    /// Stops controlling the flow for good (its rule was removed): its ACKs pass unmodified from
    /// now on, which only lets the window grow back to the host's. The controller is freed.
    pub fn release(&mut self) {
        self.released = true;
        self.control = None;
        self.unclamped_reason = Some(PassReason::RuleRemoved);
    }

    pub fn is_released(&self) -> bool {
        self.released
    }

    /// A SYN or SYN-ACK from `side`. Returns true once both have been seen.
    pub fn on_syn(&mut self, side: Side, info: &TcpPacketInfo) {
        self.ends[side.index()].syn = Some(SynOptions::from_wire(&info.options));
        if let (Some(a), Some(b)) = (self.ends[0].syn, self.ends[1].syn) {
            self.negotiated = Some(Negotiated::from_syns(&a, &b));
        }
    }

    /// A non-SYN segment before the handshake completed: returns true the first time, so the
    /// caller can report the flow once.
    pub fn note_missed_handshake(&mut self) -> bool {
        if self.negotiated.is_some() || self.handshake_missed {
            return false;
        }
        self.handshake_missed = true;
        self.unclamped_reason = Some(PassReason::NoHandshake);
        true
    }

    pub fn on_fin(&mut self, side: Side, now: Instant) {
        self.ends[side.index()].fin_sent = true;
        if self.ends[0].fin_sent && self.ends[1].fin_sent && self.closing_since.is_none() {
            self.closing_since = Some(now);
        }
    }

    /// A data segment from `side`. May pick the bulk direction and create the controller, which
    /// can produce an event.
    pub fn on_data(
        &mut self,
        side: Side,
        now: Instant,
        info: &TcpPacketInfo,
        controller: &ControllerConfig,
        key: FlowKey,
    ) -> Option<FlowEvent> {
        let out_of_order = self.ends[side.index()].on_data(info.seq, info.payload_len);
        let event = self.update_bulk_sender(controller, key);
        if self.bulk_sender != Some(side) {
            return event;
        }
        let timestamps = info
            .options
            .timestamps
            .map(|(tsval, tsecr)| Timestamps { tsval, tsecr });
        self.rtt.on_data_arrived(
            now,
            timestamps.map(|t| t.tsecr),
            info.seq.wrapping_add(info.payload_len),
        );
        let ctx = self.context();
        if let Some(control) = self.control.as_mut() {
            if let Some(t) = timestamps {
                control.sender_clock.observe(now, t.tsval);
            }
            let sample = DataSample {
                arrival: now,
                payload_len: info.payload_len,
                timestamps,
                out_of_order,
            };
            control.controller.on_data(&ctx, &sample);
        }
        event
    }

    /// Any segment with the ACK flag from `side`: returns what to do with its window field.
    /// `can_rewrite` is false when the packet cannot be handed back modified.
    pub fn on_ack(
        &mut self,
        side: Side,
        now: Instant,
        info: &TcpPacketInfo,
        can_rewrite: Result<(), PassReason>,
    ) -> AckOutcome {
        let acked = self.ends[side.index()].on_ack(info.ack);
        let Some(negotiated) = self.negotiated else {
            return AckOutcome::Pass(PassReason::NoHandshake);
        };
        let scale = negotiated.window_scale[side.index()];
        let host_bytes = u32::from(info.window) << scale;
        let is_receiver = self.bulk_sender == Some(side.other());
        if !is_receiver {
            self.ends[side.index()].on_window_forwarded(right_edge(info.ack, info.window, scale));
            return AckOutcome::Pass(PassReason::Observed);
        }
        self.goodput.on_acked(now, acked);
        let tsval = info.options.timestamps.map(|(tsval, _)| tsval);
        self.rtt.on_ack_forwarded(now, tsval, info.ack);
        let sack = &info.options.sack;
        let reports_loss = sack.blocks[..usize::from(sack.count.min(4))]
            .iter()
            .any(|&(_, right)| slipstream_control::time::seq_lt(info.ack, right));
        let ctx = self.context();
        let target = match self.control.as_mut() {
            Some(control) => {
                let sample = AckSample {
                    sent: now,
                    acked_bytes: acked,
                    tsval,
                    reports_loss,
                };
                control.controller.on_ack(&ctx, &sample)
            }
            None => None,
        };
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
        receiver.on_window_forwarded(right_edge(info.ack, forwarded, scale));
        self.last_window = Some((host_bytes, u32::from(forwarded) << scale));
        outcome
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
        let negotiated = self.negotiated?;
        if controller.needs_timestamps() && !negotiated.timestamps {
            let first = self.unclamped_reason != Some(PassReason::NoTimestamps);
            self.unclamped_reason = Some(PassReason::NoTimestamps);
            return first.then_some(FlowEvent::NoTimestamps { key, rule: self.rule });
        }
        self.control = Some(Box::new(FlowControl {
            controller: controller.build(),
            sender_clock: TsClockEstimator::new(),
        }));
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

    /// Lets the goodput meter see time pass when no ACKs come.
    pub fn on_tick(&mut self, now: Instant) {
        self.goodput.roll(now);
    }

    pub fn goodput_bits_per_second(&self) -> f64 {
        self.goodput.bits_per_second()
    }

    pub fn acked_bytes(&self) -> u64 {
        self.goodput.total_acked()
    }

    pub fn snapshot(&self, key: &FlowKey) -> FlowSnapshot {
        FlowSnapshot {
            rule: self.rule,
            sender: self.bulk_sender.map(|s| key.endpoint(s)),
            receiver: self.bulk_sender.map(|s| key.endpoint(s.other())),
            controller: self
                .control
                .as_ref()
                .map(|c| c.controller.stats())
                .unwrap_or_default(),
            rtt: self.rtt.rtt(),
            goodput_bits_per_second: self.goodput.bits_per_second(),
            acked_bytes: self.goodput.total_acked(),
            host_window: self.last_window.map(|w| w.0),
            forwarded_window: self.last_window.map(|w| w.1),
            unclamped_reason: self.unclamped_reason,
            allocation: None,
            held: false,
            link: None,
        }
    }
}
