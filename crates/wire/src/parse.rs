//! IP + TCP header parsing into [`TcpPacketInfo`].
//!
//! This module exists to turn the raw bytes NFQUEUE hands us (starting at the
//! IP header) into the few fields the engine needs, or into a [`ParseError`]
//! the caller can count before passing the packet through untouched. The IP
//! layer (IPv4 header/total length checks, IPv6 extension header chain) is
//! delegated to etherparse; the TCP header is read via `etherparse::TcpSlice`
//! and its options by our own walker ([`crate::parse_options`]).
//!
//! Two entry points:
//!
//! * [`parse`]: the whole packet must be present (strict). Use it for packets
//!   that may be rewritten. A buffer longer than the IP length fields say
//!   (link-layer padding) is accepted and the trailing bytes are ignored; a
//!   shorter one is [`ParseError::Truncated`].
//! * [`parse_headers`]: the headers (IP, extension headers and the full TCP
//!   header including options) must be present, the TCP payload may be cut
//!   off, as with an NFQUEUE copy range. `payload_len` still reports the full
//!   payload length from the IP length fields.
//!
//! Policy decisions beyond the obvious:
//!
//! * Protocol is checked before fragmentation, so a fragment of a non-TCP
//!   packet is `NotTcp` and `Fragmented` counts TCP fragments only.
//! * Any IPv6 Fragment header is `Fragmented`, including "atomic fragments"
//!   (offset 0, M=0), which etherparse itself does not flag as fragmenting.
//! * TCP carried behind an IPsec Authentication Header is `NotTcp`: AH
//!   authenticates the TCP header, so the window must not be rewritten.
//! * An IPv6 payload length of 0 is taken literally (no jumbogram support,
//!   etherparse would otherwise treat the rest of the buffer as payload), so
//!   such a packet cannot carry a TCP header.

use std::net::IpAddr;

use etherparse::{
    err, IpNumber, IpSlice, Ipv6ExtensionSlice, Ipv6ExtensionsSlice, LaxIpSlice, LenSource, TcpSlice,
};

use crate::options::{parse_options, TcpOptions};

/// Offset of the window field within the TCP header.
pub const TCP_WINDOW_OFFSET: usize = 14;
/// Offset of the checksum field within the TCP header.
pub const TCP_CHECKSUM_OFFSET: usize = 16;

const TCP_MIN_HEADER_LEN: usize = 20;
const IPV6_HEADER_LEN: usize = 40;

/// IP version of a parsed packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// TCP header flags (the NS bit is ignored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpFlags {
    /// FIN.
    pub fin: bool,
    /// SYN.
    pub syn: bool,
    /// RST.
    pub rst: bool,
    /// PSH.
    pub psh: bool,
    /// ACK.
    pub ack: bool,
    /// URG.
    pub urg: bool,
    /// ECN-Echo.
    pub ece: bool,
    /// Congestion Window Reduced.
    pub cwr: bool,
}

/// Everything the engine needs from one TCP/IP packet. Small and Copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpPacketInfo {
    /// IP version.
    pub ip_version: IpVersion,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// 6-bit DSCP from IPv4 TOS / IPv6 traffic class.
    pub dscp: u8,
    /// TCP source port.
    pub src_port: u16,
    /// TCP destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number (raw, also when the ACK flag is clear).
    pub ack: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Raw window field (unscaled).
    pub window: u16,
    /// TCP payload bytes, from the IP length fields (so also right for
    /// header-only copies).
    pub payload_len: u32,
    /// Options of interest.
    pub options: TcpOptions,
    /// Byte offset of the TCP header within the packet buffer.
    pub tcp_offset: usize,
}

/// Why a packet could not be parsed. The caller counts it and passes the
/// packet through unmodified.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// Empty input or IP version other than 4/6.
    NotIp,
    /// The buffer ends before the IP length fields (or headers) say it should.
    Truncated,
    /// Inconsistent IP header: IHL < 5, total length shorter than the header,
    /// extension headers running past the IP payload, malformed extension.
    BadIpHeader,
    /// IPv4 MF set or non-zero fragment offset, or any IPv6 Fragment header.
    Fragmented,
    /// Not TCP (also TCP behind an IPsec AH header); from the UDP parser, not UDP either.
    NotTcp,
    /// TCP data offset < 5 or the TCP header does not fit in the IP payload.
    BadTcpHeader,
    /// Unreadable TCP option list.
    BadOptions,
    /// UDP length below the 8-byte header or beyond the IP payload.
    BadUdpHeader,
}

impl ParseError {
    /// All variants, e.g. for pre-registering metric labels.
    pub const ALL: [ParseError; 8] = [
        ParseError::NotIp,
        ParseError::Truncated,
        ParseError::BadIpHeader,
        ParseError::Fragmented,
        ParseError::NotTcp,
        ParseError::BadTcpHeader,
        ParseError::BadOptions,
        ParseError::BadUdpHeader,
    ];

    /// snake_case label for metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            ParseError::NotIp => "not_ip",
            ParseError::Truncated => "truncated",
            ParseError::BadIpHeader => "bad_ip_header",
            ParseError::Fragmented => "fragmented",
            ParseError::NotTcp => "not_tcp",
            ParseError::BadTcpHeader => "bad_tcp_header",
            ParseError::BadOptions => "bad_options",
            ParseError::BadUdpHeader => "bad_udp_header",
        }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for ParseError {}

/// What the IP layer tells us, independent of strict/lax parsing.
pub(crate) struct IpLayer {
    pub ip_version: IpVersion,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dscp: u8,
    /// Protocol of the payload after all extension headers.
    pub ip_number: IpNumber,
    pub fragmented: bool,
    /// An IPsec Authentication Header precedes the payload.
    pub has_auth: bool,
    /// Offset of the IP payload (the TCP or UDP header) in the buffer.
    pub tcp_offset: usize,
    /// Length of the IP payload according to the IP length fields.
    pub declared_len: usize,
}

/// Whether `packet` holds the whole IP packet its length field declares (the datapath copied all
/// of it, so it may be handed back modified), not just its first bytes. False for anything that is
/// not IPv4 or IPv6, and for IPv6 jumbograms (payload length 0).
pub fn is_complete(packet: &[u8]) -> bool {
    let declared = match packet.first().map(|b| b >> 4) {
        Some(4) => packet
            .get(2..4)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]]))),
        Some(6) => packet
            .get(4..6)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            .filter(|len| *len > 0)
            .map(|len| IPV6_HEADER_LEN + len),
        _ => None,
    };
    declared.is_some_and(|len| len <= packet.len())
}

/// Parse a whole packet (IP header first). The entire IP packet as declared
/// by its length fields must be present; trailing padding is ignored.
pub fn parse(packet: &[u8]) -> Result<TcpPacketInfo, ParseError> {
    let (packet, layer) = strict_ip_layer(packet)?;
    parse_tcp(packet, layer)
}

/// The IP layer of a whole packet (see [`parse`]), and the packet as far as its length fields
/// reach.
pub(crate) fn strict_ip_layer(packet: &[u8]) -> Result<(&[u8], IpLayer), ParseError> {
    let packet = limit_zero_ipv6_payload(packet)?;
    let ip = IpSlice::from_slice(packet).map_err(map_ip_slice_error)?;
    let layer = match &ip {
        IpSlice::Ipv4(v4) => {
            let header = v4.header();
            let auth = v4.extensions().auth;
            IpLayer {
                ip_version: IpVersion::V4,
                src: ip.source_addr(),
                dst: ip.destination_addr(),
                dscp: header.dcp().value(),
                ip_number: v4.payload().ip_number,
                fragmented: v4.payload().fragmented,
                has_auth: auth.is_some(),
                tcp_offset: header.slice().len() + auth.map_or(0, |a| a.slice().len()),
                declared_len: v4.payload().payload.len(),
            }
        }
        IpSlice::Ipv6(v6) => IpLayer {
            ip_version: IpVersion::V6,
            src: ip.source_addr(),
            dst: ip.destination_addr(),
            dscp: v6.header().traffic_class() >> 2,
            ip_number: v6.payload().ip_number,
            fragmented: has_ipv6_fragment_header(v6.extensions()),
            has_auth: has_ipv6_auth_header(v6.extensions()),
            tcp_offset: IPV6_HEADER_LEN + v6.extensions().slice().len(),
            declared_len: v6.payload().payload.len(),
        },
    };
    Ok((packet, layer))
}

/// Parse a packet whose headers (IP, extension headers, full TCP header) are
/// present but whose TCP payload may be cut off (NFQUEUE copy range).
/// `payload_len` is computed from the IP length fields.
pub fn parse_headers(packet: &[u8]) -> Result<TcpPacketInfo, ParseError> {
    let (packet, layer) = lax_ip_layer(packet)?;
    parse_tcp(packet, layer)
}

/// The IP layer of a packet whose payload may be cut off (see [`parse_headers`]).
pub(crate) fn lax_ip_layer(packet: &[u8]) -> Result<(&[u8], IpLayer), ParseError> {
    let packet = limit_zero_ipv6_payload(packet)?;
    let (ip, ext_err) = LaxIpSlice::from_slice(packet).map_err(|e| match e {
        err::ip::LaxHeaderSliceError::Len(_) => ParseError::Truncated,
        err::ip::LaxHeaderSliceError::Content(c) => map_ip_header_error(c),
    })?;
    let incomplete = ip.payload().incomplete;
    if let Some((e, _layer)) = ext_err {
        return Err(match e {
            err::ipv6_exts::HeaderSliceError::Len(_) if incomplete => ParseError::Truncated,
            _ => ParseError::BadIpHeader,
        });
    }
    let layer = match &ip {
        LaxIpSlice::Ipv4(v4) => {
            let header = v4.header();
            let header_len = header.slice().len();
            let total_len = usize::from(header.total_len());
            if total_len < header_len {
                // etherparse's lax mode falls back to the buffer length here.
                return Err(ParseError::BadIpHeader);
            }
            let auth = v4.extensions().auth;
            let tcp_offset = header_len + auth.map_or(0, |a| a.slice().len());
            IpLayer {
                ip_version: IpVersion::V4,
                src: ip.source_addr(),
                dst: ip.destination_addr(),
                dscp: header.dcp().value(),
                ip_number: v4.payload().ip_number,
                fragmented: v4.payload().fragmented,
                has_auth: auth.is_some(),
                tcp_offset,
                declared_len: total_len.checked_sub(tcp_offset).ok_or(ParseError::BadIpHeader)?,
            }
        }
        LaxIpSlice::Ipv6(v6) => {
            let exts_len = v6.extensions().slice().len();
            IpLayer {
                ip_version: IpVersion::V6,
                src: ip.source_addr(),
                dst: ip.destination_addr(),
                dscp: v6.header().traffic_class() >> 2,
                ip_number: v6.payload().ip_number,
                fragmented: has_ipv6_fragment_header(v6.extensions()),
                has_auth: has_ipv6_auth_header(v6.extensions()),
                tcp_offset: IPV6_HEADER_LEN + exts_len,
                declared_len: usize::from(v6.header().payload_length())
                    .checked_sub(exts_len)
                    .ok_or(ParseError::BadIpHeader)?,
            }
        }
    };
    Ok((packet, layer))
}

/// An IPv6 payload length of 0 would make etherparse treat the rest of the
/// buffer as payload (jumbogram assumption). We take the field literally by
/// hiding everything after the fixed header.
fn limit_zero_ipv6_payload(packet: &[u8]) -> Result<&[u8], ParseError> {
    match packet {
        [] => Err(ParseError::NotIp),
        [first, ..] if first >> 4 == 6 && packet.len() > IPV6_HEADER_LEN => {
            // payload length is bytes 4..6 of the IPv6 header
            match packet.get(4..6) {
                Some([0, 0]) => Ok(packet.get(..IPV6_HEADER_LEN).unwrap_or(packet)),
                _ => Ok(packet),
            }
        }
        _ => Ok(packet),
    }
}

fn has_ipv6_fragment_header(exts: &Ipv6ExtensionsSlice<'_>) -> bool {
    exts.is_fragmenting_payload()
        || exts
            .clone()
            .into_iter()
            .any(|e| matches!(e, Ipv6ExtensionSlice::Fragment(_)))
}

fn has_ipv6_auth_header(exts: &Ipv6ExtensionsSlice<'_>) -> bool {
    exts.clone()
        .into_iter()
        .any(|e| matches!(e, Ipv6ExtensionSlice::Authentication(_)))
}

fn map_ip_header_error(e: err::ip::HeaderError) -> ParseError {
    match e {
        err::ip::HeaderError::UnsupportedIpVersion { .. } => ParseError::NotIp,
        _ => ParseError::BadIpHeader,
    }
}

fn map_ip_slice_error(e: err::ip::SliceError) -> ParseError {
    match e {
        // The buffer is shorter than a header or the declared length.
        err::ip::SliceError::Len(l) if l.len_source == LenSource::Slice => ParseError::Truncated,
        // A length field contradicts another one (e.g. total length shorter
        // than the IHL, extension header running past the payload length).
        err::ip::SliceError::Len(_) => ParseError::BadIpHeader,
        err::ip::SliceError::IpHeaders(err::ip::HeadersError::Ip(h)) => map_ip_header_error(h),
        err::ip::SliceError::IpHeaders(_) => ParseError::BadIpHeader,
    }
}

/// Common TCP step. `packet[ip.tcp_offset..]` holds at least the available
/// part of the IP payload; `ip.declared_len` is its length per the IP header.
fn parse_tcp(packet: &[u8], ip: IpLayer) -> Result<TcpPacketInfo, ParseError> {
    if ip.ip_number != IpNumber::TCP || ip.has_auth {
        return Err(ParseError::NotTcp);
    }
    if ip.fragmented {
        return Err(ParseError::Fragmented);
    }
    let declared_end = ip
        .tcp_offset
        .checked_add(ip.declared_len)
        .ok_or(ParseError::BadIpHeader)?;
    let available_end = declared_end.min(packet.len());
    let segment = packet
        .get(ip.tcp_offset..available_end)
        .ok_or(ParseError::Truncated)?;

    if ip.declared_len < TCP_MIN_HEADER_LEN {
        return Err(ParseError::BadTcpHeader);
    }
    let data_offset_byte = match segment.get(12) {
        Some(&b) if segment.len() >= TCP_MIN_HEADER_LEN => b,
        _ => return Err(ParseError::Truncated),
    };
    let header_len = usize::from(data_offset_byte >> 4) * 4;
    if header_len < TCP_MIN_HEADER_LEN || header_len > ip.declared_len {
        return Err(ParseError::BadTcpHeader);
    }
    if header_len > segment.len() {
        return Err(ParseError::Truncated);
    }
    let tcp = TcpSlice::from_slice(segment).map_err(|_| ParseError::BadTcpHeader)?;
    let options = parse_options(tcp.options())?;
    let payload_len = u32::try_from(ip.declared_len - header_len).map_err(|_| ParseError::BadIpHeader)?;

    Ok(TcpPacketInfo {
        ip_version: ip.ip_version,
        src: ip.src,
        dst: ip.dst,
        dscp: ip.dscp,
        src_port: tcp.source_port(),
        dst_port: tcp.destination_port(),
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        flags: TcpFlags {
            fin: tcp.fin(),
            syn: tcp.syn(),
            rst: tcp.rst(),
            psh: tcp.psh(),
            ack: tcp.ack(),
            urg: tcp.urg(),
            ece: tcp.ece(),
            cwr: tcp.cwr(),
        },
        window: tcp.window_size(),
        payload_len,
        options,
        tcp_offset: ip.tcp_offset,
    })
}
