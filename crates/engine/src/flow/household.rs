//! The parts of a flow that household control keeps: its base and time-sharing state, and the
//! receiver's last pure ACK, from which the daemon's window updates are made.

use slipstream_control::{AnyController, HouseholdShare, Instant, TsClock};
use slipstream_household::link_delay::FlowDelay;
use slipstream_wire::{fill_tcp_checksum, rewrite_window, TcpPacketInfo};

use super::Flow;
use crate::api::WindowUpdate;
use crate::flow_key::Side;
use crate::window_clamp::{clamp_window, right_edge, ClampRequest};

/// What household control keeps per flow besides its allocation.
#[derive(Clone, Debug, Default)]
pub(crate) struct HouseholdFlow {
    /// The flow's base on its link.
    pub delay: FlowDelay,
    /// Time-sharing state (see `slipstream_household::allocator`).
    pub credit: i64,
    pub turn_since: Option<Instant>,
    pub held_since: Option<Instant>,
    /// Bytes the flow's receiver acknowledged since the last round.
    pub round_acked: u64,
    /// (arrival, TSval, clock estimate) of the first segment timed by the sender's clock: the
    /// reference of the flow's one-way delays, restarted when the estimate changes.
    pub(super) one_way_ref: Option<(Instant, u32, TsClock)>,
    /// The receiver's last pure ACK as it came from the host, to send a window update from.
    pub(super) last_ack: Option<StoredAck>,
}

/// A pure ACK kept whole, with where its window field is.
#[derive(Clone, Debug)]
pub(super) struct StoredAck {
    packet: Vec<u8>,
    tcp_offset: usize,
    host_field: u16,
    ack: u32,
}

impl Flow {
    /// Household control's parts of the flow, if it is under household control.
    pub(crate) fn household_mut(&mut self) -> Option<(&mut HouseholdFlow, &mut HouseholdShare)> {
        if self.released || self.closing_since.is_some() {
            return None;
        }
        let control = self.control.as_mut()?;
        match (&mut control.household, &mut control.controller) {
            (Some(h), AnyController::Household(share)) => Some((h, share)),
            _ => None,
        }
    }

    /// Bytes the receiver's forwarded windows still let the sender send or have in flight: the
    /// furthest right edge advertised less the receiver's highest ACK.
    pub(crate) fn open_window(&self) -> u64 {
        let Some(sender) = self.bulk_sender else {
            return 0;
        };
        let receiver = &self.ends[sender.other().index()];
        match (receiver.advertised_edge, receiver.highest_ack) {
            (Some(edge), Some(ack)) => slipstream_control::time::wrapping_diff(edge, ack).max(0) as u64,
            _ => 0,
        }
    }

    /// Keeps the receiver's pure ACK (as the host sent it) for a later window update.
    pub(crate) fn store_ack(&mut self, side: Side, packet: &[u8], info: &TcpPacketInfo) {
        if self.bulk_sender != Some(side.other()) || info.payload_len > 0 {
            return;
        }
        let Some(h) = self.control.as_mut().and_then(|c| c.household.as_mut()) else {
            return;
        };
        let stored = h.last_ack.get_or_insert_with(|| StoredAck {
            packet: Vec::with_capacity(packet.len()),
            tcp_offset: 0,
            host_field: 0,
            ack: 0,
        });
        stored.packet.clear();
        stored.packet.extend_from_slice(packet);
        stored.tcp_offset = info.tcp_offset;
        stored.host_field = info.window;
        stored.ack = info.ack;
    }

    /// A window update opening the flow's window to `window` bytes beyond the receiver's last ACK,
    /// if that moves the right edge advertised to the sender; the edge is recorded as forwarded.
    pub(crate) fn window_update(&mut self, now: Instant, window: u32) -> Option<WindowUpdate> {
        let negotiated = self.negotiated?;
        let sender = self.bulk_sender?;
        let receiver = sender.other();
        let mss = self.sender_mss();
        let stored = self.control.as_ref()?.household.as_ref()?.last_ack.as_ref()?;
        let scale = negotiated.window_scale[receiver.index()];
        let end = &self.ends[receiver.index()];
        if end.highest_ack != Some(stored.ack) {
            return None; // a newer ACK went by (with data, say): its window will do
        }
        let field = clamp_window(ClampRequest {
            host_field: stored.host_field,
            scale,
            ack: stored.ack,
            right_edge: end.advertised_edge,
            target_bytes: window,
            mss,
            hold: false,
        });
        let edge = right_edge(stored.ack, field, scale);
        let previous = end.advertised_edge?;
        if slipstream_control::time::wrapping_diff(edge, previous) <= 0 {
            return None;
        }
        let mut packet = stored.packet.clone();
        rewrite_window(&mut packet, stored.tcp_offset, field).ok()?;
        // Summed afresh: a copy a kernel datapath read may hold only the pseudo-header's sum
        // (CHECKSUM_PARTIAL, left for the device), and the daemon's own frame gets no device
        // to finish it, so the LAN host would drop the update as corrupt.
        fill_tcp_checksum(&mut packet)?;
        self.ends[receiver.index()].on_window_forwarded(edge);
        self.rtt.on_window_released(now, previous, negotiated.timestamps);
        Some(WindowUpdate {
            packet,
            right_edge: edge,
        })
    }
}
