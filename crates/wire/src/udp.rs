//! IP + UDP header parsing into [`UdpPacketInfo`], and the one change Slipstream makes to a UDP
//! packet: marking it Congestion Experienced ([`set_ce`]).
//!
//! Background UDP flows (QUIC, BitTorrent's uTP) have no window to lower: the engine holds them
//! to their share by dropping what exceeds it, or, where the packet says its transport reacts to
//! ECN (ECT(0) or ECT(1), RFC 3168), by marking it CE instead, which the sender reads as a loss
//! without the loss. The IP layer is parsed as for TCP (`parse.rs`: fragments, AH and IPv6
//! extension headers are handled there the same way).

use std::net::IpAddr;

use etherparse::IpNumber;

use crate::checksum::checksum_adjust;
use crate::parse::{lax_ip_layer, strict_ip_layer, IpLayer, IpVersion, ParseError};

/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;

/// The ECN field of the IP header (RFC 3168 Sec. 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ecn {
    /// Not-ECT: the transport does not react to CE; only a drop slows it.
    NotEct,
    /// ECT(1).
    Ect1,
    /// ECT(0).
    Ect0,
    /// Congestion Experienced: already marked on the way.
    Ce,
}

impl Ecn {
    fn from_bits(bits: u8) -> Ecn {
        match bits & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The sender's transport reacts to a CE mark.
    pub fn capable(self) -> bool {
        matches!(self, Ecn::Ect0 | Ecn::Ect1)
    }
}

/// Everything the engine needs from one UDP/IP packet. Small and Copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpPacketInfo {
    /// IP version.
    pub ip_version: IpVersion,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// 6-bit DSCP.
    pub dscp: u8,
    /// The ECN field.
    pub ecn: Ecn,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// UDP payload bytes, from the UDP length field (also right for header-only copies).
    pub payload_len: u32,
    /// The whole IP packet's length, from its length fields.
    pub ip_len: u32,
    /// Byte offset of the UDP payload within the packet buffer.
    pub payload_offset: usize,
}

/// Parse a whole UDP packet (IP header first); the whole IP packet must be present.
pub fn parse_udp(packet: &[u8]) -> Result<UdpPacketInfo, ParseError> {
    let (packet, layer) = strict_ip_layer(packet)?;
    udp_info(packet, layer)
}

/// Parse a UDP packet whose payload may be cut off (an NFQUEUE copy range): the IP and UDP
/// headers must be present.
pub fn parse_udp_headers(packet: &[u8]) -> Result<UdpPacketInfo, ParseError> {
    let (packet, layer) = lax_ip_layer(packet)?;
    udp_info(packet, layer)
}

fn udp_info(packet: &[u8], ip: IpLayer) -> Result<UdpPacketInfo, ParseError> {
    if ip.ip_number != IpNumber::UDP || ip.has_auth {
        return Err(ParseError::NotTcp);
    }
    if ip.fragmented {
        return Err(ParseError::Fragmented);
    }
    let header = packet
        .get(ip.tcp_offset..ip.tcp_offset + UDP_HEADER_LEN)
        .ok_or(ParseError::Truncated)?;
    let word = |i: usize| u16::from_be_bytes([header[i], header[i + 1]]);
    let udp_len = usize::from(word(4));
    if udp_len < UDP_HEADER_LEN || udp_len > ip.declared_len {
        return Err(ParseError::BadUdpHeader);
    }
    let ecn_bits = match ip.ip_version {
        IpVersion::V4 => packet[1],
        IpVersion::V6 => packet[1] >> 4,
    };
    Ok(UdpPacketInfo {
        ip_version: ip.ip_version,
        src: ip.src,
        dst: ip.dst,
        dscp: ip.dscp,
        ecn: Ecn::from_bits(ecn_bits),
        src_port: word(0),
        dst_port: word(2),
        payload_len: (udp_len - UDP_HEADER_LEN) as u32,
        ip_len: (ip.tcp_offset + ip.declared_len) as u32,
        payload_offset: ip.tcp_offset + UDP_HEADER_LEN,
    })
}

/// Why a packet could not be marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkError {
    /// Not an IPv4 or IPv6 header, or too short.
    NotIp,
    /// The packet is Not-ECT: marking it would say congestion to a transport that ignores it.
    NotEct,
}

/// Sets the ECN field of an IPv4 or IPv6 packet to CE (RFC 3168 Sec. 5), updating the IPv4
/// header checksum incrementally (RFC 1624). A packet already CE stays as it is. Only bytes 0..2
/// (and the IPv4 checksum, bytes 10..12) can change.
pub fn set_ce(packet: &mut [u8]) -> Result<(), MarkError> {
    match packet.first().map(|b| b >> 4) {
        Some(4) if packet.len() >= 20 => {
            if Ecn::from_bits(packet[1]) == Ecn::NotEct {
                return Err(MarkError::NotEct);
            }
            let old = u16::from_be_bytes([packet[0], packet[1]]);
            packet[1] |= 3;
            let new = u16::from_be_bytes([packet[0], packet[1]]);
            let checksum = u16::from_be_bytes([packet[10], packet[11]]);
            packet[10..12].copy_from_slice(&checksum_adjust(checksum, old, new).to_be_bytes());
            Ok(())
        }
        Some(6) if packet.len() >= 40 => {
            if Ecn::from_bits(packet[1] >> 4) == Ecn::NotEct {
                return Err(MarkError::NotEct);
            }
            packet[1] |= 3 << 4;
            Ok(())
        }
        _ => Err(MarkError::NotIp),
    }
}

#[cfg(test)]
mod tests;
