//! Shared packet builders for the integration tests.
//!
//! They exist so fixtures and property tests build IPv4/IPv6 TCP packets the
//! same way: through etherparse's `PacketBuilder`, which fills in lengths and
//! computes the IP header and TCP checksums independently of our code.
#![allow(dead_code)]

use etherparse::{
    IpDscp, IpHeaders, IpNumber, Ipv4Extensions, Ipv4Header, Ipv6Extensions, Ipv6Header, PacketBuilder,
    TcpHeader,
};

pub(crate) const V4_SRC: [u8; 4] = [192, 168, 1, 10];
pub(crate) const V4_DST: [u8; 4] = [93, 184, 216, 34];
pub(crate) const V6_SRC: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10];
pub(crate) const V6_DST: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x22];

/// A TCP header with the given fields and raw options (length must be a
/// multiple of 4, at most 40).
pub(crate) fn tcp_header(
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: Option<u32>,
    window: u16,
    options: &[u8],
) -> TcpHeader {
    let mut tcp = TcpHeader::new(src_port, dst_port, seq, window);
    if let Some(ack) = ack {
        tcp.ack = true;
        tcp.acknowledgment_number = ack;
    }
    tcp.set_options_raw(options).expect("test options fit");
    tcp
}

pub(crate) fn v4_header(dscp: u8) -> Ipv4Header {
    let mut ip = Ipv4Header::new(0, 64, IpNumber::TCP, V4_SRC, V4_DST).unwrap();
    ip.dscp = IpDscp::try_new(dscp).unwrap();
    ip.dont_fragment = true;
    ip
}

pub(crate) fn v6_header(traffic_class: u8) -> Ipv6Header {
    Ipv6Header {
        traffic_class,
        hop_limit: 64,
        source: V6_SRC,
        destination: V6_DST,
        ..Default::default()
    }
}

/// Serialise IP headers + TCP header + payload; checksums are computed by
/// etherparse.
pub(crate) fn build(ip: IpHeaders, tcp: TcpHeader, payload: &[u8]) -> Vec<u8> {
    let builder = PacketBuilder::ip(ip).tcp_header(tcp);
    let mut out = Vec::with_capacity(builder.size(payload.len()));
    builder.write(&mut out, payload).unwrap();
    out
}

pub(crate) fn v4_tcp(dscp: u8, tcp: TcpHeader, payload: &[u8]) -> Vec<u8> {
    build(
        IpHeaders::Ipv4(v4_header(dscp), Ipv4Extensions::default()),
        tcp,
        payload,
    )
}

pub(crate) fn v6_tcp(traffic_class: u8, tcp: TcpHeader, payload: &[u8]) -> Vec<u8> {
    build(
        IpHeaders::Ipv6(v6_header(traffic_class), Ipv6Extensions::default()),
        tcp,
        payload,
    )
}

/// A plain IPv4 data packet: 192.168.1.10:40000 -> 93.184.216.34:443,
/// PSH|ACK, 100 bytes of payload.
pub(crate) fn v4_data_packet() -> Vec<u8> {
    let mut tcp = tcp_header(
        40000,
        443,
        1000,
        Some(2000),
        501,
        &[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9],
    );
    tcp.psh = true;
    let payload: Vec<u8> = (0..100u8).collect();
    v4_tcp(0, tcp, &payload)
}

/// The same flow over IPv6 with 77 bytes (odd) of payload.
pub(crate) fn v6_data_packet() -> Vec<u8> {
    let mut tcp = tcp_header(40000, 443, 1000, Some(2000), 501, &[]);
    tcp.psh = true;
    let payload: Vec<u8> = (0..77u8).collect();
    v6_tcp(0, tcp, &payload)
}

/// Recompute the IPv4 header checksum after a test edited the header.
pub(crate) fn fix_ipv4_header_checksum(packet: &mut [u8]) {
    let ihl = usize::from(packet[0] & 0x0f) * 4;
    packet[10] = 0;
    packet[11] = 0;
    let mut sum = 0u32;
    for c in packet[..ihl].chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let ck = !(sum as u16);
    packet[10..12].copy_from_slice(&ck.to_be_bytes());
}
