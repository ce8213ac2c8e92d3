//! Flows first seen after their handshake (the daemon restarted while they ran).
//!
//! Without the SYNs the window scale is unknown, so such a flow passes unclamped
//! (`PassReason::NoHandshake`) and the engine reports it once (`FlowEvent::HandshakeMissed`).
//! The shell may then find the scales elsewhere (conntrack saw the SYNs) and hand them over with
//! [`crate::Engine::learn_window_scales`]. From the flow's next packet on it is treated as if the
//! handshake had been seen:
//!
//! * timestamps count as negotiated if that packet carries the option (RFC 7323 3.2: once
//!   negotiated, every segment but a reset carries it; without negotiation none does);
//! * the controller starts at once if the bulk direction is already known;
//! * each side's right edge is learned from its first ACK: the host may have advertised up to
//!   its own window while the flow passed unclamped (and before, while no daemon ran and the
//!   queue was bypassed), and that edge is where the clamp starts, never left of it. A host's
//!   edge only moves right (Linux never shrinks its window), so the edge of its latest ACK
//!   covers every window forwarded before.

use slipstream_control::ControllerConfig;
use slipstream_wire::TcpPacketInfo;

use super::{Flow, FlowEvent};
use crate::flow_key::{FlowKey, Side};
use crate::stats::PassReason;
use crate::tcp_state::Negotiated;
use crate::window_clamp::right_edge;

impl Flow {
    /// The window scale shift each endpoint applies to the windows it sends, by [`Side`] index,
    /// learned outside the flow's packets. Returns false (and changes nothing) unless the flow
    /// was seen without its handshake, has no scales yet and is not released.
    pub(crate) fn learn_window_scales(&mut self, scales: [u8; 2]) -> bool {
        if !self.handshake_missed
            || self.negotiated.is_some()
            || self.learned_scales.is_some()
            || self.released
        {
            return false;
        }
        // RFC 7323 2.3: a shift above 14 is used as 14.
        self.learned_scales = Some(scales.map(|s| s.min(14)));
        true
    }

    /// Every non-SYN packet: completes a flow whose scales were learned, before the packet is
    /// tracked. May start the controller, which can produce an event.
    pub(crate) fn resume_midstream(
        &mut self,
        info: &TcpPacketInfo,
        controller: &ControllerConfig,
        key: FlowKey,
    ) -> Option<FlowEvent> {
        let scales = self.learned_scales.take()?;
        if self.negotiated.is_some() || self.released {
            return None;
        }
        self.negotiated = Some(Negotiated {
            window_scale: scales,
            timestamps: info.options.timestamps.is_some(),
            sack: false,
        });
        if self.unclamped_reason == Some(PassReason::NoHandshake) {
            self.unclamped_reason = None;
        }
        if self.bulk_sender.is_some() {
            self.start_control(controller, key)
        } else {
            None
        }
    }

    /// An ACK from `side` of a flow seen mid-stream whose edge is not known yet: the edge the
    /// host advertises in it is the floor of every window forwarded from now on.
    pub(super) fn learn_edge_if_midstream(&mut self, side: Side, info: &TcpPacketInfo, scale: u8) {
        let end = &mut self.ends[side.index()];
        if self.handshake_missed && end.advertised_edge.is_none() {
            end.on_window_forwarded(right_edge(info.ack, info.window, scale));
        }
    }
}
