//! The parts of a flow that household control keeps: its base and time-sharing state, and the
//! receiver's last pure ACK, from which the daemon's window updates are made.

use slipstream_control::{AnyController, Duration, HouseholdShare, Instant, TsClock, TsClockEstimator};
use slipstream_household::link_delay::{AckPath, FlowDelay};
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
    /// The one-way delays of the bulk sender's data (a download's, by the sender's clock).
    data_one_way: OneWayTimer,
    /// An upload's ACK path: its receiver's TSval clock, the ACKs' one-way delays by it, and
    /// their minimum (`AckPath`), to take the download link's queue off the round trip.
    receiver_clock: TsClockEstimator,
    ack_one_way: OneWayTimer,
    pub ack_path: AckPath,
    /// The flow's base for its ACKs' trip across the opposite link (`ack_room::AcksQueue`): a
    /// download's up the upload link (`DataOutcome::ack_trip`), an upload's down the download
    /// link (`AckResult::ack_one_way`).
    pub ack_trip: FlowDelay,
    /// The receiver's last pure ACK as it came from the host, to send a window update from.
    pub(super) last_ack: Option<StoredAck>,
    /// An upload's handshake half across the access link (its near half), until the flow's
    /// first link sample bounds its base with it (`LinkDelay::on_handshake`). Not a download's:
    /// without timestamps its round trip reads the upload link's queue too, and a base bounded
    /// below a queue standing there read it as the download's own (lab `both`, no timestamps:
    /// the background alone filled 0.40-0.85 of the download, 0.54-0.95 without it).
    pub link_handshake: Option<Duration>,
}

/// One-way delays are kept relative to the flow's first timed segment, offset by this so they
/// stay positive (a later segment may be faster than the first).
const ONE_WAY_OFFSET_US: i64 = 10_000_000;

/// One-way delays from a TSval clock: each segment's arrival less its send time by the
/// clock, against the first timed segment's (an arbitrary origin, the same for every sample).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OneWayTimer {
    /// (arrival, TSval, clock estimate) of the first segment timed: restarted when the clock
    /// estimate changes.
    reference: Option<(Instant, u32, TsClock)>,
}

impl OneWayTimer {
    /// The one-way delay of a segment that arrived `now` with `tsval`, by `clock`; and whether
    /// the clock estimate changed since the last sample (earlier delays are on another scale).
    pub(crate) fn sample(&mut self, clock: TsClock, now: Instant, tsval: u32) -> (Option<Duration>, bool) {
        let rescaled = self.reference.is_some_and(|(_, _, used)| used != clock);
        if rescaled {
            self.reference = None;
        }
        let (at0, ts0, _) = *self.reference.get_or_insert((now, tsval, clock));
        let sent_us = clock.ticks_to_micros(i64::from(tsval.wrapping_sub(ts0) as i32));
        let one_way = now.signed_micros_since(at0) - sent_us + ONE_WAY_OFFSET_US;
        (
            (one_way > 0).then(|| Duration::from_micros(one_way as u64)),
            rescaled,
        )
    }
}

/// The slowest receiver clock whose ticks are fine enough to take a queue off an upload's round
/// trip: 2 ms (a 100 Hz clock's 10 ms ticks are the whole delay target; the round trip then
/// stands, corrected by the download link's own queue where that is known).
const MIN_ACK_CLOCK_HZ: u32 = 500;

impl HouseholdFlow {
    /// A download's data segment that arrived `now` with `tsval` (the sender's `clock`) and gave
    /// the far half `far` of the round trip: its one-way delay, and the trip up of the ACK it
    /// answered (`DataOutcome::ack_trip`), each on an arbitrary origin.
    pub(super) fn data_delays(
        &mut self,
        clock: TsClock,
        now: Instant,
        tsval: u32,
        far: Option<Duration>,
    ) -> (Option<Duration>, Option<Duration>) {
        let (one_way, rescaled) = self.data_one_way.sample(clock, now, tsval);
        if rescaled {
            // The clock estimate changed (its first step reads a queue building up in the first
            // 250 ms as a slower clock): the delays measured with the old one drifted, and so
            // did the bases taken from them.
            self.delay.restart();
            self.ack_trip.restart();
        }
        let ack_trip = far.zip(one_way).and_then(|(far, one_way)| {
            // One-way delays are offset by ONE_WAY_OFFSET_US: once more keeps the trip positive.
            let trip = far.as_micros() as i64 - one_way.as_micros() as i64 + 2 * ONE_WAY_OFFSET_US;
            (trip > 0).then(|| Duration::from_micros(trip as u64))
        });
        (one_way, ack_trip)
    }

    /// The one-way delay of an upload's ACK from its receiver, once the receiver's clock is known.
    pub(super) fn ack_one_way(&mut self, now: Instant, tsval: u32) -> Option<Duration> {
        self.receiver_clock.observe(now, tsval);
        let clock = self
            .receiver_clock
            .clock()
            .filter(|c| c.hz() >= MIN_ACK_CLOCK_HZ)?;
        let (one_way, rescaled) = self.ack_one_way.sample(clock, now, tsval);
        if rescaled {
            self.ack_path.restart();
        }
        one_way
    }
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
