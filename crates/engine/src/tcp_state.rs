//! What one endpoint of a connection has shown through the packets it sent: its handshake
//! options, how far its data and ACKs have got, and the furthest right edge of the windows the
//! router forwarded on its behalf.

use slipstream_control::time::{seq_lt, wrapping_diff};
use slipstream_wire::TcpOptions;

/// The options an endpoint put on its SYN (or SYN-ACK).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SynOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
}

impl SynOptions {
    pub(crate) fn from_wire(options: &TcpOptions) -> SynOptions {
        SynOptions {
            mss: options.mss,
            // RFC 7323 2.3: a shift above 14 is used as 14.
            window_scale: options.window_scale.map(|s| s.min(14)),
            sack_permitted: options.sack_permitted,
            timestamps: options.timestamps.is_some(),
        }
    }
}

/// One direction's TCP state, kept from the packets that endpoint sent.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EndpointState {
    pub syn: Option<SynOptions>,
    /// The sequence number of this endpoint's SYN (its ISN): a SYN with another one on the same
    /// 4-tuple opens a new connection.
    pub syn_seq: Option<u32>,
    /// One past the highest data byte this endpoint has sent.
    pub next_seq: Option<u32>,
    /// The highest cumulative ACK this endpoint has sent.
    pub highest_ack: Option<u32>,
    /// Payload bytes this endpoint has sent (retransmissions included).
    pub payload_bytes: u64,
    /// The furthest right edge (ACK + window) forwarded on this endpoint's behalf.
    pub advertised_edge: Option<u32>,
    pub fin_sent: bool,
    /// Largest payload seen from this endpoint (a lower bound of its segment size).
    pub max_payload: u32,
}

impl EndpointState {
    /// Records a data segment `[seq, seq + len)`; returns true if it starts below data already
    /// seen (a retransmission or a reordering).
    pub(crate) fn on_data(&mut self, seq: u32, len: u32) -> bool {
        self.payload_bytes += u64::from(len);
        self.max_payload = self.max_payload.max(len);
        let end = seq.wrapping_add(len);
        match self.next_seq {
            None => {
                self.next_seq = Some(end);
                false
            }
            Some(next) => {
                if seq_lt(next, end) {
                    self.next_seq = Some(end);
                }
                seq_lt(seq, next)
            }
        }
    }

    /// Records a cumulative ACK; returns the bytes it newly acknowledges.
    pub(crate) fn on_ack(&mut self, ack: u32) -> u32 {
        match self.highest_ack {
            None => {
                self.highest_ack = Some(ack);
                0
            }
            Some(prev) => {
                let advance = wrapping_diff(ack, prev);
                if advance > 0 {
                    self.highest_ack = Some(ack);
                    advance as u32
                } else {
                    0
                }
            }
        }
    }

    /// Records the right edge of a window forwarded for this endpoint.
    pub(crate) fn on_window_forwarded(&mut self, edge: u32) {
        match self.advertised_edge {
            Some(prev) if wrapping_diff(edge, prev) <= 0 => {}
            _ => self.advertised_edge = Some(edge),
        }
    }
}

/// What the two SYNs of a connection agreed on (RFC 7323, RFC 2018).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// Window scale shift each endpoint applies to the windows it sends, by endpoint index.
    pub window_scale: [u8; 2],
    pub timestamps: bool,
    pub sack: bool,
}

impl Negotiated {
    /// Both SYNs seen: scaling is on only if both offered it; timestamps only if both sent them.
    pub(crate) fn from_syns(a: &SynOptions, b: &SynOptions) -> Negotiated {
        let scaling = a.window_scale.is_some() && b.window_scale.is_some();
        let shift = |s: &SynOptions| if scaling { s.window_scale.unwrap_or(0) } else { 0 };
        Negotiated {
            window_scale: [shift(a), shift(b)],
            timestamps: a.timestamps && b.timestamps,
            sack: a.sack_permitted && b.sack_permitted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_tracking_detects_out_of_order() {
        let mut e = EndpointState::default();
        assert!(!e.on_data(1000, 100));
        assert!(!e.on_data(1100, 100));
        assert!(e.on_data(1000, 100), "retransmission");
        assert!(!e.on_data(1300, 100), "a gap ahead is not out of order here");
        assert!(e.on_data(1200, 100), "filling the gap arrives out of order");
        assert_eq!(e.next_seq, Some(1400));
        assert_eq!(e.payload_bytes, 500);
    }

    #[test]
    fn ack_advance_wraps() {
        let mut e = EndpointState::default();
        assert_eq!(e.on_ack(u32::MAX - 9), 0);
        assert_eq!(e.on_ack(10), 20);
        assert_eq!(e.on_ack(5), 0, "old ACK");
        assert_eq!(e.on_ack(10), 0, "duplicate ACK");
    }

    #[test]
    fn scaling_needs_both_sides() {
        let with = SynOptions {
            window_scale: Some(7),
            timestamps: true,
            ..Default::default()
        };
        let without = SynOptions {
            window_scale: None,
            timestamps: true,
            ..Default::default()
        };
        assert_eq!(Negotiated::from_syns(&with, &with).window_scale, [7, 7]);
        assert_eq!(Negotiated::from_syns(&with, &without).window_scale, [0, 0]);
        let wide = SynOptions::from_wire(&TcpOptions {
            window_scale: Some(20),
            ..Default::default()
        });
        assert_eq!(wide.window_scale, Some(14));
    }
}
