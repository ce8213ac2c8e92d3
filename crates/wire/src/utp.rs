//! BitTorrent's uTP header ([BEP 29]): what the router reads from it.
//!
//! uTP is LEDBAT over UDP, and every packet carries what LEDBAT needs, in clear: the sender's
//! clock when it sent the packet (`timestamp_microseconds`) and the last one-way delay it
//! measured the other way (`timestamp_difference_microseconds`). The router takes one-way delay
//! samples from them as it does from TCP timestamps: a download's data by its sender's clock, an
//! upload's by the receiver's report.
//!
//! [BEP 29]: https://www.bittorrent.org/beps/bep_0029.html

/// Length of the uTP header.
pub const UTP_HEADER_LEN: usize = 20;

/// The packet types of BEP 29.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UtpType {
    /// ST_DATA: carries payload.
    Data,
    /// ST_FIN: the last packet.
    Fin,
    /// ST_STATE: an ACK without data.
    State,
    /// ST_RESET.
    Reset,
    /// ST_SYN: opens a connection.
    Syn,
}

/// A uTP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UtpHeader {
    /// The packet's type.
    pub kind: UtpType,
    /// The connection id (a connection's two directions use ids one apart).
    pub connection_id: u16,
    /// The sender's clock when it sent the packet, microseconds (wraps).
    pub timestamp_us: u32,
    /// The one-way delay the sender last measured the other way (its arrival time less the
    /// other end's timestamp), microseconds; an arbitrary offset, as the clocks are not synced.
    pub timestamp_difference_us: u32,
    /// The sender's receive window, bytes.
    pub wnd_size: u32,
    /// Sequence number.
    pub seq_nr: u16,
    /// Acknowledgment number.
    pub ack_nr: u16,
}

/// The uTP header at the start of a UDP payload, if it is one: version 1, a known type, a
/// known first extension (none, selective ACK, extension bits, or libtorrent's close reason).
/// Other UDP traffic (QUIC: its first byte has 0x40 set and a long header's 0x80) is `None`
/// almost always; a flow is taken for uTP only after several headers in a row (the engine).
pub fn parse_utp(payload: &[u8]) -> Option<UtpHeader> {
    let h = payload.get(..UTP_HEADER_LEN)?;
    if h[0] & 0x0f != 1 || h[1] > 3 {
        return None;
    }
    let kind = match h[0] >> 4 {
        0 => UtpType::Data,
        1 => UtpType::Fin,
        2 => UtpType::State,
        3 => UtpType::Reset,
        4 => UtpType::Syn,
        _ => return None,
    };
    let u16_at = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    let u32_at = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    Some(UtpHeader {
        kind,
        connection_id: u16_at(2),
        timestamp_us: u32_at(4),
        timestamp_difference_us: u32_at(8),
        wnd_size: u32_at(12),
        seq_nr: u16_at(16),
        ack_nr: u16_at(18),
    })
}

/// Offset of `wnd_size` in the uTP header.
const WND_SIZE_OFFSET: usize = 12;

/// Why a uTP window could not be rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UtpRewriteError {
    /// The header is not all there.
    OutOfBounds,
}

/// Lowers the `wnd_size` of the uTP packet whose UDP payload starts at `payload_offset` (the
/// UDP header is the 8 bytes before it) to `window`, as the router lowers a TCP receive window:
/// libutp sends no more than the peer's `wnd_size` beyond what it has in flight. The UDP
/// checksum is updated incrementally (RFC 1624); an IPv4 checksum of 0 (none) stays 0. Only the
/// four window bytes and the checksum change; a window already at or below `window` is left.
pub fn lower_utp_window(
    packet: &mut [u8],
    payload_offset: usize,
    window: u32,
) -> Result<bool, UtpRewriteError> {
    let field = payload_offset + WND_SIZE_OFFSET;
    let checksum_at = payload_offset
        .checked_sub(2)
        .ok_or(UtpRewriteError::OutOfBounds)?;
    if packet.len() < field + 4 {
        return Err(UtpRewriteError::OutOfBounds);
    }
    let old = u32::from_be_bytes([
        packet[field],
        packet[field + 1],
        packet[field + 2],
        packet[field + 3],
    ]);
    if old <= window {
        return Ok(false);
    }
    packet[field..field + 4].copy_from_slice(&window.to_be_bytes());
    let mut checksum = u16::from_be_bytes([packet[checksum_at], packet[checksum_at + 1]]);
    if checksum != 0 {
        for (o, n) in [(old >> 16, window >> 16), (old & 0xffff, window & 0xffff)] {
            checksum = crate::checksum::checksum_adjust(checksum, o as u16, n as u16);
        }
        // RFC 768: a computed 0 is sent as all ones (0 means no checksum).
        if checksum == 0 {
            checksum = 0xffff;
        }
        packet[checksum_at..checksum_at + 2].copy_from_slice(&checksum.to_be_bytes());
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u8, ext: u8) -> Vec<u8> {
        let mut h = vec![kind << 4 | 1, ext, 0x12, 0x34];
        h.extend_from_slice(&1_000_000u32.to_be_bytes());
        h.extend_from_slice(&250u32.to_be_bytes());
        h.extend_from_slice(&65_536u32.to_be_bytes());
        h.extend_from_slice(&[0, 7, 0, 6]);
        h
    }

    #[test]
    fn reads_every_field_of_a_data_packet() {
        let mut p = header(0, 0);
        p.extend_from_slice(b"payload");
        assert_eq!(
            parse_utp(&p),
            Some(UtpHeader {
                kind: UtpType::Data,
                connection_id: 0x1234,
                timestamp_us: 1_000_000,
                timestamp_difference_us: 250,
                wnd_size: 65_536,
                seq_nr: 7,
                ack_nr: 6,
            })
        );
    }

    #[test]
    fn knows_every_type_and_refuses_the_rest() {
        let kinds = [
            UtpType::Data,
            UtpType::Fin,
            UtpType::State,
            UtpType::Reset,
            UtpType::Syn,
        ];
        for (n, kind) in kinds.iter().enumerate() {
            assert_eq!(parse_utp(&header(n as u8, 1)).map(|h| h.kind), Some(*kind));
        }
        assert_eq!(parse_utp(&header(5, 0)), None);
        assert_eq!(parse_utp(&header(0, 4)), None, "unknown extension");
        let mut v2 = header(0, 0);
        v2[0] = 0x02;
        assert_eq!(parse_utp(&v2), None, "version 2");
        assert_eq!(parse_utp(&header(0, 0)[..19]), None, "short");
    }

    fn udp_checksum_ok(p: &[u8]) -> bool {
        // IPv4 pseudo-header: addresses, protocol, UDP length.
        let udp = &p[20..];
        let mut sum: u32 = 0;
        for w in p[12..20].chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        sum += 17 + udp.len() as u32;
        for w in udp.chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum == 0xffff
    }

    #[test]
    fn lowers_the_window_and_keeps_the_udp_checksum_valid() {
        let mut payload = header(2, 0);
        payload.extend_from_slice(&[9; 3]);
        let mut p = Vec::new();
        etherparse::PacketBuilder::ipv4([10, 0, 0, 2], [192, 0, 2, 1], 64)
            .udp(51414, 51413)
            .write(&mut p, &payload)
            .unwrap();
        assert!(udp_checksum_ok(&p));
        assert_eq!(lower_utp_window(&mut p, 28, 20_000), Ok(true));
        assert_eq!(parse_utp(&p[28..]).unwrap().wnd_size, 20_000);
        assert!(udp_checksum_ok(&p));
        // Never raised.
        assert_eq!(lower_utp_window(&mut p, 28, 1 << 20), Ok(false));
        assert_eq!(parse_utp(&p[28..]).unwrap().wnd_size, 20_000);
        // No checksum (IPv4 allows it): stays none.
        p[26] = 0;
        p[27] = 0;
        assert_eq!(lower_utp_window(&mut p, 28, 3_000), Ok(true));
        assert_eq!(&p[26..28], &[0, 0]);
        assert_eq!(
            lower_utp_window(&mut p[..40], 28, 3_000),
            Err(UtpRewriteError::OutOfBounds)
        );
    }

    #[test]
    fn quic_first_bytes_are_not_utp() {
        // Short headers have 0x40 set, long headers 0xc0: no uTP type byte (0x01..0x41) matches
        // except 0x41, a SYN, which the engine never takes alone.
        for first in 0x40u8..=0xff {
            let mut p = header(0, 0);
            p[0] = first;
            assert!(parse_utp(&p).is_none() || first == 0x41, "{first:#x}");
        }
    }
}
