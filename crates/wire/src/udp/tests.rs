use super::*;
use etherparse::PacketBuilder;

fn v4(tos: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv4([192, 0, 2, 1], [10, 0, 0, 2], 64)
        .udp(443, 50_000)
        .write(&mut out, payload)
        .unwrap();
    out[1] = tos;
    fix_v4_checksum(&mut out);
    out
}

fn v6(traffic_class: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv6(
        [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [0xfd; 16],
        64,
    )
    .udp(6881, 51_413)
    .write(&mut out, payload)
    .unwrap();
    out[0] = 0x60 | traffic_class >> 4;
    out[1] = (traffic_class & 0x0f) << 4 | (out[1] & 0x0f);
    out
}

fn fix_v4_checksum(p: &mut [u8]) {
    p[10] = 0;
    p[11] = 0;
    let sum: u32 = p[..20]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let folded = (folded & 0xffff) + (folded >> 16);
    p[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
}

fn v4_checksum_ok(p: &[u8]) -> bool {
    let sum: u32 = p[..20]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    (folded & 0xffff) + (folded >> 16) == 0xffff
}

#[test]
fn reads_ports_lengths_dscp_and_ecn() {
    let p = v4(0x20 << 2 | 2, &[7; 1200]);
    let info = parse_udp(&p).unwrap();
    assert_eq!((info.src_port, info.dst_port), (443, 50_000));
    assert_eq!(info.payload_len, 1200);
    assert_eq!(info.ip_len, 20 + 8 + 1200);
    assert_eq!(info.payload_offset, 28);
    assert_eq!(info.dscp, 0x20);
    assert_eq!(info.ecn, Ecn::Ect0);
    let p6 = v6(0x01, &[1; 100]);
    let info6 = parse_udp(&p6).unwrap();
    assert_eq!(
        (info6.src_port, info6.dst_port, info6.payload_len),
        (6881, 51_413, 100)
    );
    assert_eq!((info6.ecn, info6.ip_version), (Ecn::Ect1, IpVersion::V6));
}

#[test]
fn a_header_only_copy_keeps_the_declared_length() {
    let p = v4(0, &[0; 1400]);
    assert_eq!(parse_udp(&p[..64]), Err(ParseError::Truncated));
    assert_eq!(parse_udp_headers(&p[..64]).unwrap().payload_len, 1400);
    assert_eq!(parse_udp_headers(&p[..24]), Err(ParseError::Truncated));
}

#[test]
fn refuses_tcp_bad_lengths_and_fragments() {
    let mut tcp = Vec::new();
    PacketBuilder::ipv4([192, 0, 2, 1], [10, 0, 0, 2], 64)
        .tcp(443, 50_000, 1, 1000)
        .write(&mut tcp, &[])
        .unwrap();
    assert_eq!(parse_udp(&tcp), Err(ParseError::NotTcp));
    let mut short = v4(0, &[0; 10]);
    short[24..26].copy_from_slice(&7u16.to_be_bytes());
    assert_eq!(parse_udp(&short), Err(ParseError::BadUdpHeader));
    let mut long = v4(0, &[0; 10]);
    long[24..26].copy_from_slice(&19u16.to_be_bytes());
    assert_eq!(parse_udp(&long), Err(ParseError::BadUdpHeader));
    let mut fragment = v4(0, &[0; 10]);
    fragment[6] = 0x20; // more fragments
    fix_v4_checksum(&mut fragment);
    assert_eq!(parse_udp(&fragment), Err(ParseError::Fragmented));
}

#[test]
fn ce_marks_ect_packets_and_keeps_the_ipv4_checksum_valid() {
    for tos in [0x01u8, 0x02, 0xb9, 0xfe] {
        let mut p = v4(tos, &[3; 50]);
        assert!(v4_checksum_ok(&p));
        set_ce(&mut p).unwrap();
        assert_eq!(p[1], tos | 3, "DSCP kept");
        assert!(v4_checksum_ok(&p), "tos {tos:#x}");
        assert_eq!(parse_udp(&p).unwrap().ecn, Ecn::Ce);
    }
    let mut p6 = v6(0xb8 | 2, &[3; 50]);
    set_ce(&mut p6).unwrap();
    let info = parse_udp(&p6).unwrap();
    assert_eq!((info.ecn, info.dscp), (Ecn::Ce, 0xb8 >> 2));
}

#[test]
fn not_ect_is_never_marked() {
    let mut p = v4(0xb8, &[3; 50]);
    let before = p.clone();
    assert_eq!(set_ce(&mut p), Err(MarkError::NotEct));
    assert_eq!(p, before);
    let mut p6 = v6(0, &[3; 50]);
    assert_eq!(set_ce(&mut p6), Err(MarkError::NotEct));
    assert_eq!(set_ce(&mut [0x45, 0, 0]), Err(MarkError::NotIp));
    assert_eq!(set_ce(&mut []), Err(MarkError::NotIp));
}

#[test]
fn ce_stays_ce() {
    let mut p = v4(3, &[0; 8]);
    set_ce(&mut p).unwrap();
    assert_eq!(p[1], 3);
    assert!(v4_checksum_ok(&p));
}
