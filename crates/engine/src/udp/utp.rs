//! Which UDP flows are uTP, and the one-way delays their headers give.
//!
//! A flow is taken for uTP after [`UTP_CONFIRM`] packets in a row whose payload starts with a
//! BEP 29 header (`slipstream_wire::parse_utp`), and for something else (QUIC, a game, a call)
//! at the first packet that does not: a QUIC packet's first byte never reads as a uTP data or
//! state packet, and five random payloads all passing the header's checks is a chance of about
//! 2^-60.
//!
//! Samples, as LEDBAT itself measures (RFC 6817 Sec. 2.4):
//! * a **download** (the sender is beyond the access link): each data packet's arrival less the
//!   sender's timestamp, which crossed the downlink's queue and nothing after it;
//! * an **upload** (the LAN host sends): the router sees the data before the uplink's queue, so
//!   the sample is the receiver's own report in its ACKs (`timestamp_difference_microseconds`:
//!   its arrival time less our host's timestamp), which did cross it.
//!
//! Both carry an unknown clock offset; they are kept relative to the flow's first sample (plus
//! [`ONE_WAY_OFFSET_US`] so they stay positive), and the household's per-flow base takes it off.

use slipstream_control::{Duration, Instant};
use slipstream_wire::{parse_utp, UtpType};

/// Headers in a row that make a flow uTP.
pub(crate) const UTP_CONFIRM: u8 = 5;
const ONE_WAY_OFFSET_US: i64 = 10_000_000;

/// What the flow's payloads say it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum UdpKind {
    /// Too few packets yet: this many uTP headers in a row so far.
    #[default]
    Unknown,
    Utp,
    /// Some other protocol (QUIC, a game, a call): nothing to read.
    Other,
}

/// Detection and the one-way delay references of a flow.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UtpTracker {
    pub kind: UdpKind,
    headers_in_a_row: u8,
    /// (arrival, sender timestamp) of the first download sample.
    data_reference: Option<(Instant, u32)>,
    /// The first upload sample's reported difference.
    report_reference: Option<u32>,
}

/// The bulk sender's side relative to the packet: `true` if the packet came from the sender.
pub(crate) struct Packet<'a> {
    pub payload: &'a [u8],
    pub from_sender: bool,
    pub sender_is_lan: bool,
    pub at: Instant,
}

impl UtpTracker {
    /// Reads one packet's payload (the start of it is enough); returns the one-way delay sample
    /// it gives for the bulk sender's link, if any (see the module docs).
    pub(crate) fn on_packet(&mut self, packet: Packet<'_>) -> Option<Duration> {
        let header = parse_utp(packet.payload);
        match (self.kind, header) {
            (UdpKind::Other, _) => return None,
            (UdpKind::Unknown, None) => {
                self.kind = UdpKind::Other;
                return None;
            }
            (UdpKind::Unknown, Some(_)) => {
                self.headers_in_a_row += 1;
                if self.headers_in_a_row < UTP_CONFIRM {
                    return None;
                }
                self.kind = UdpKind::Utp;
            }
            (UdpKind::Utp, None) => return None,
            (UdpKind::Utp, Some(_)) => {}
        }
        let header = header?;
        if packet.from_sender && !packet.sender_is_lan && header.kind == UtpType::Data {
            let (at0, ts0) = *self
                .data_reference
                .get_or_insert((packet.at, header.timestamp_us));
            let sent_us = i64::from(header.timestamp_us.wrapping_sub(ts0) as i32);
            let one_way = packet.at.signed_micros_since(at0) - sent_us + ONE_WAY_OFFSET_US;
            return (one_way > 0).then(|| Duration::from_micros(one_way as u64));
        }
        if !packet.from_sender && packet.sender_is_lan && header.timestamp_difference_us != 0 {
            let d0 = *self
                .report_reference
                .get_or_insert(header.timestamp_difference_us);
            let one_way =
                i64::from(header.timestamp_difference_us.wrapping_sub(d0) as i32) + ONE_WAY_OFFSET_US;
            return (one_way > 0).then(|| Duration::from_micros(one_way as u64));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utp(kind: u8, ts: u32, diff: u32) -> Vec<u8> {
        let mut h = vec![kind << 4 | 1, 0, 0, 9];
        h.extend_from_slice(&ts.to_be_bytes());
        h.extend_from_slice(&diff.to_be_bytes());
        h.extend_from_slice(&[0, 1, 0, 0, 0, 1, 0, 0]);
        h.extend_from_slice(&[0xaa; 1000]);
        h
    }

    fn at(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    fn download(t: &mut UtpTracker, arrival_us: u64, ts: u32) -> Option<Duration> {
        t.on_packet(Packet {
            payload: &utp(0, ts, 0),
            from_sender: true,
            sender_is_lan: false,
            at: at(arrival_us),
        })
    }

    #[test]
    fn five_headers_make_a_flow_utp_and_then_each_data_packet_is_a_sample() {
        let mut t = UtpTracker::default();
        for i in 0..4 {
            assert_eq!(download(&mut t, i * 1000, i as u32 * 1000), None);
            assert_eq!(t.kind, UdpKind::Unknown);
        }
        // The fifth is the reference: 10 s + 0.
        assert_eq!(download(&mut t, 4_000, 4_000), Some(Duration::from_secs(10)));
        assert_eq!(t.kind, UdpKind::Utp);
        // Sent 1 ms later by the sender's clock, arrived 21 ms later: 20 ms of queue.
        assert_eq!(
            download(&mut t, 25_000, 5_000),
            Some(Duration::from_micros(10_020_000))
        );
        // The sender's clock wraps: still 20 ms.
        let mut w = UtpTracker {
            kind: UdpKind::Utp,
            ..Default::default()
        };
        assert_eq!(download(&mut w, 0, u32::MAX - 499), Some(Duration::from_secs(10)));
        assert_eq!(
            download(&mut w, 21_000, 500),
            Some(Duration::from_micros(10_020_000))
        );
    }

    #[test]
    fn an_upload_takes_the_receivers_reports() {
        let mut t = UtpTracker {
            kind: UdpKind::Utp,
            ..Default::default()
        };
        let ack = |t: &mut UtpTracker, diff: u32| {
            t.on_packet(Packet {
                payload: &utp(2, 77, diff)[..20],
                from_sender: false,
                sender_is_lan: true,
                at: at(0),
            })
        };
        assert_eq!(ack(&mut t, 0), None, "no measurement yet");
        assert_eq!(ack(&mut t, 3_000_000), Some(Duration::from_secs(10)));
        assert_eq!(ack(&mut t, 3_030_000), Some(Duration::from_micros(10_030_000)));
        // The LAN host's own data gives nothing: it has not crossed the uplink yet.
        let data = t.on_packet(Packet {
            payload: &utp(0, 5, 0),
            from_sender: true,
            sender_is_lan: true,
            at: at(0),
        });
        assert_eq!(data, None);
    }

    #[test]
    fn quic_is_other_at_its_first_packet() {
        let mut t = UtpTracker::default();
        let initial = [0xc3u8; 1200];
        let p = Packet {
            payload: &initial,
            from_sender: false,
            sender_is_lan: false,
            at: at(0),
        };
        assert_eq!(t.on_packet(p), None);
        assert_eq!(t.kind, UdpKind::Other);
        // Later uTP-looking payloads do not change it.
        for i in 0..10 {
            assert_eq!(download(&mut t, i, i as u32), None);
        }
        assert_eq!(t.kind, UdpKind::Other);
    }
}
