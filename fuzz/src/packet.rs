//! A small IPv4/IPv6 TCP packet builder and a TCP checksum written independently of
//! `slipstream_wire`, so the fuzz targets can build well-formed packets and check the crate's
//! checksum arithmetic against a second implementation.

use std::net::IpAddr;

/// Everything needed to write one TCP/IP packet.
#[derive(Clone, Debug)]
pub struct TcpSpec {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    /// The TCP flags byte (CWR ECE URG ACK PSH RST SYN FIN).
    pub flags: u8,
    /// The NS bit (low bit of the data offset byte).
    pub ns: bool,
    pub window: u16,
    pub urgent: u16,
    /// Option bytes; padded with EOL to a multiple of four, cut at 40.
    pub options: Vec<u8>,
    pub payload_len: usize,
    /// DSCP (6 bits) and ECN (2 bits) as the IPv4 TOS / IPv6 traffic class byte.
    pub tos: u8,
    /// IPv4: this many 4-byte words of IP options (NOPs), 0..=10. IPv6: a hop-by-hop header
    /// (8 bytes, PadN) before TCP when non-zero.
    pub ip_options: u8,
}

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;
pub const URG: u8 = 0x20;
pub const ECE: u8 = 0x40;
pub const CWR: u8 = 0x80;

/// One's complement sum of big-endian 16-bit words (odd byte padded with zero), unfolded.
fn sum_words(data: &[u8]) -> u64 {
    let mut sum = 0u64;
    let mut i = 0;
    while i + 1 < data.len() {
        sum += u64::from(data[i]) << 8 | u64::from(data[i + 1]);
        i += 2;
    }
    if i < data.len() {
        sum += u64::from(data[i]) << 8;
    }
    sum
}

fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn pseudo_header_sum(src: IpAddr, dst: IpAddr, segment_len: usize) -> u64 {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            sum_words(&s.octets()) + sum_words(&d.octets()) + 6 + segment_len as u64
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            sum_words(&s.octets())
                + sum_words(&d.octets())
                + sum_words(&(segment_len as u32).to_be_bytes())
                + 6
        }
        _ => 0,
    }
}

/// The one's complement sum (folded) over the pseudo-header and `segment`, checksum field
/// included as it is.
pub fn segment_sum(src: IpAddr, dst: IpAddr, segment: &[u8]) -> u16 {
    fold(pseudo_header_sum(src, dst, segment.len()) + sum_words(segment))
}

/// The checksum a sender writes for `segment` (its checksum field taken as zero).
pub fn segment_checksum(src: IpAddr, dst: IpAddr, segment: &[u8]) -> u16 {
    let field = segment
        .get(16..18)
        .map_or(0, |f| u64::from(f[0]) << 8 | u64::from(f[1]));
    let sum = pseudo_header_sum(src, dst, segment.len()) + sum_words(segment) + (0xffff - field);
    // Subtracting the field in one's complement is adding its complement.
    !fold(sum)
}

/// Where the TCP segment of a packet is, by the packet's own length fields, found with
/// `slipstream_wire::parse` (which must accept the packet).
pub fn segment_bounds(packet: &[u8]) -> Option<(IpAddr, IpAddr, usize, usize)> {
    let info = slipstream_wire::parse(packet).ok()?;
    let header_len = usize::from(*packet.get(info.tcp_offset + 12)? >> 4) * 4;
    let end = info.tcp_offset + header_len + info.payload_len as usize;
    (end <= packet.len()).then_some((info.src, info.dst, info.tcp_offset, end))
}

/// Full recomputation: the TCP checksum of a packet `slipstream_wire::parse` accepts is valid
/// (the sum over pseudo-header and segment is -0). `None` if the packet does not parse.
pub fn checksum_valid(packet: &[u8]) -> Option<bool> {
    let (src, dst, start, end) = segment_bounds(packet)?;
    Some(segment_sum(src, dst, &packet[start..end]) == 0xffff)
}

/// Rewrites the TCP checksum of a packet `slipstream_wire::parse` accepts to the from-scratch
/// value; false if it does not parse.
pub fn fix_checksum(packet: &mut [u8]) -> bool {
    let Some((src, dst, start, end)) = segment_bounds(packet) else {
        return false;
    };
    let checksum = segment_checksum(src, dst, &packet[start..end]);
    packet[start + 16..start + 18].copy_from_slice(&checksum.to_be_bytes());
    true
}

/// The stored checksum field of a packet whose TCP header starts at `tcp_offset`.
pub fn checksum_field(packet: &[u8], tcp_offset: usize) -> u16 {
    u16::from_be_bytes([packet[tcp_offset + 16], packet[tcp_offset + 17]])
}

fn ipv4_header_checksum(header: &[u8]) -> u16 {
    !fold(sum_words(header))
}

/// Writes the packet with correct lengths, IPv4 header checksum and TCP checksum.
pub fn build(spec: &TcpSpec) -> Vec<u8> {
    let mut options = spec.options.clone();
    options.truncate(40);
    while !options.len().is_multiple_of(4) {
        options.push(0);
    }
    let tcp_len = 20 + options.len();
    let segment_len = tcp_len + spec.payload_len;
    let mut out = Vec::with_capacity(100 + segment_len);
    match (spec.src, spec.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let opt_words = usize::from(spec.ip_options.min(10));
            let ihl = 5 + opt_words;
            let total = (ihl * 4 + segment_len).min(usize::from(u16::MAX)) as u16;
            out.push(0x40 | ihl as u8);
            out.push(spec.tos);
            out.extend_from_slice(&total.to_be_bytes());
            out.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, 6, 0, 0]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            out.extend(std::iter::repeat_n(1u8, opt_words * 4));
            let checksum = ipv4_header_checksum(&out[..ihl * 4]);
            out[10..12].copy_from_slice(&checksum.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let hop_by_hop = spec.ip_options != 0;
            let payload = (segment_len + if hop_by_hop { 8 } else { 0 }).min(usize::from(u16::MAX)) as u16;
            out.push(0x60 | spec.tos >> 4);
            out.push(spec.tos << 4);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&payload.to_be_bytes());
            out.push(if hop_by_hop { 0 } else { 6 });
            out.push(64);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            if hop_by_hop {
                out.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
            }
        }
        _ => return out,
    }
    let tcp_start = out.len();
    out.extend_from_slice(&spec.src_port.to_be_bytes());
    out.extend_from_slice(&spec.dst_port.to_be_bytes());
    out.extend_from_slice(&spec.seq.to_be_bytes());
    out.extend_from_slice(&spec.ack.to_be_bytes());
    out.push(((tcp_len / 4) as u8) << 4 | u8::from(spec.ns));
    out.push(spec.flags);
    out.extend_from_slice(&spec.window.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&spec.urgent.to_be_bytes());
    out.extend_from_slice(&options);
    // The payload is PAYLOAD_BYTE throughout, so its sum has a closed form (building segments
    // is most of the engine target's time otherwise).
    out.resize(out.len() + spec.payload_len, PAYLOAD_BYTE);
    let word = u64::from(PAYLOAD_BYTE) << 8 | u64::from(PAYLOAD_BYTE);
    let payload_sum = (spec.payload_len / 2) as u64 * word
        + if !spec.payload_len.is_multiple_of(2) {
            u64::from(PAYLOAD_BYTE) << 8
        } else {
            0
        };
    let header_sum = sum_words(&out[tcp_start..tcp_start + tcp_len]);
    let checksum = !fold(pseudo_header_sum(spec.src, spec.dst, segment_len) + header_sum + payload_sum);
    out[tcp_start + 16..tcp_start + 18].copy_from_slice(&checksum.to_be_bytes());
    out
}

/// Every payload byte of a built packet.
pub const PAYLOAD_BYTE: u8 = 0xab;

/// Where the TCP header of a packet [`build`] wrote starts, and where it ends.
pub fn header_bounds(spec: &TcpSpec) -> (usize, usize) {
    let ip = match spec.src {
        IpAddr::V4(_) => 20 + 4 * usize::from(spec.ip_options.min(10)),
        IpAddr::V6(_) => 40 + if spec.ip_options != 0 { 8 } else { 0 },
    };
    let options = spec.options.len().min(40).div_ceil(4) * 4;
    (ip, ip + 20 + options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(src: &str, dst: &str) -> TcpSpec {
        TcpSpec {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            src_port: 40000,
            dst_port: 6881,
            seq: 1,
            ack: 2,
            flags: ACK | PSH,
            ns: false,
            window: 501,
            urgent: 0,
            options: vec![1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9],
            payload_len: 33,
            tos: 0x20,
            ip_options: 0,
        }
    }

    #[test]
    fn built_packets_parse_and_verify_with_the_wire_crate() {
        for (src, dst, ip_options) in [
            ("10.0.0.2", "192.0.2.1", 0),
            ("10.0.0.2", "192.0.2.1", 3),
            ("fd00::2", "2001:db8::1", 0),
            ("fd00::2", "2001:db8::1", 1),
        ] {
            let pkt = build(&TcpSpec {
                ip_options,
                ..spec(src, dst)
            });
            let info = slipstream_wire::parse(&pkt).unwrap();
            assert_eq!(info.payload_len, 33);
            let spec = TcpSpec {
                ip_options,
                ..spec(src, dst)
            };
            let (tcp_offset, header_end) = header_bounds(&spec);
            assert_eq!(tcp_offset, info.tcp_offset);
            assert_eq!(header_end, pkt.len() - 33);
            assert_eq!(info.options.timestamps, Some((7, 9)));
            assert_eq!(info.window, 501);
            assert!(slipstream_wire::tcp_checksum_valid(&pkt));
            assert_eq!(checksum_valid(&pkt), Some(true));
            assert_eq!(
                slipstream_wire::tcp_checksum(&pkt),
                Some(checksum_field(&pkt, info.tcp_offset))
            );
            let mut bad = pkt.clone();
            *bad.last_mut().unwrap() ^= 1;
            assert_eq!(checksum_valid(&bad), Some(false));
            assert!(fix_checksum(&mut bad));
            assert_eq!(checksum_valid(&bad), Some(true));
        }
    }
}
