//! Fixture tests: hand-built packets with known field values, one input per
//! error variant, header-only (NFQUEUE copy range) parsing and padding.
//!
//! They exist to pin the exact parse results the engine relies on; the
//! property tests in `proptests.rs` cover the "never panics / checksum stays
//! valid" side.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use common::*;
use etherparse::{
    IpAuthHeader, IpFragOffset, IpHeaders, IpNumber, Ipv4Extensions, Ipv6Extensions, Ipv6FragmentHeader,
    Ipv6RawExtHeader, PacketBuilder, TcpSlice,
};
use slipstream_wire::*;

/// IPv4 SYN, 192.168.1.10:54321 -> 93.184.216.34:443, TOS 0x20 (DSCP CS1),
/// written out byte by byte with Linux' SYN option order: MSS 1460, SACK
/// permitted, timestamps (TSval 0x123456, TSecr 0), NOP, window scale 7.
/// Checksums computed offline (IP 0x26c9, TCP 0xe5a5).
const V4_SYN: [u8; 60] = [
    // IPv4: version 4, IHL 5, TOS 0x20, total length 60
    0x45, 0x20, 0x00, 0x3c, //
    // identification 0x1c46, DF
    0x1c, 0x46, 0x40, 0x00, //
    // TTL 64, protocol 6, header checksum
    0x40, 0x06, 0x26, 0xc9, //
    // 192.168.1.10
    0xc0, 0xa8, 0x01, 0x0a, //
    // 93.184.216.34
    0x5d, 0xb8, 0xd8, 0x22, //
    // TCP: sport 54321, dport 443
    0xd4, 0x31, 0x01, 0xbb, //
    // seq 0xa1b2c3d4
    0xa1, 0xb2, 0xc3, 0xd4, //
    // ack 0
    0x00, 0x00, 0x00, 0x00, //
    // data offset 10 (40 bytes), flags SYN, window 64240
    0xa0, 0x02, 0xfa, 0xf0, //
    // checksum, urgent pointer
    0xe5, 0xa5, 0x00, 0x00, //
    // MSS 1460
    0x02, 0x04, 0x05, 0xb4, //
    // SACK permitted, TS kind/len
    0x04, 0x02, 0x08, 0x0a, //
    // TSval
    0x00, 0x12, 0x34, 0x56, //
    // TSecr
    0x00, 0x00, 0x00, 0x00, //
    // NOP, WS 7
    0x01, 0x03, 0x03, 0x07,
];

#[test]
fn ipv4_syn_linux_option_order() {
    let info = parse(&V4_SYN).unwrap();
    assert_eq!(info.ip_version, IpVersion::V4);
    assert_eq!(info.src, IpAddr::V4(Ipv4Addr::new(192, 168, 1, 10)));
    assert_eq!(info.dst, IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34)));
    assert_eq!(info.dscp, 8);
    assert_eq!(info.src_port, 54321);
    assert_eq!(info.dst_port, 443);
    assert_eq!(info.seq, 0xa1b2_c3d4);
    assert_eq!(info.ack, 0);
    assert_eq!(
        info.flags,
        TcpFlags {
            syn: true,
            ..TcpFlags::default()
        }
    );
    assert_eq!(info.window, 64240);
    assert_eq!(info.payload_len, 0);
    assert_eq!(info.tcp_offset, 20);
    assert_eq!(
        info.options,
        TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some((0x0012_3456, 0)),
            sack: SackBlocks::default(),
        }
    );
    assert_eq!(parse_headers(&V4_SYN), Ok(info));

    // Our checksum code, the offline value and etherparse all agree.
    assert!(tcp_checksum_valid(&V4_SYN));
    assert_eq!(tcp_checksum(&V4_SYN), Some(0xe5a5));
    let tcp = TcpSlice::from_slice(&V4_SYN[20..]).unwrap();
    assert_eq!(tcp.calc_checksum_ipv4(V4_SRC, V4_DST).unwrap(), 0xe5a5);

    // A single flipped payload-covered bit breaks verification.
    let mut bad = V4_SYN;
    bad[30] ^= 0x01;
    assert!(!tcp_checksum_valid(&bad));
}

#[test]
fn ipv4_syn_window_rewrite() {
    let mut pkt = V4_SYN;
    rewrite_window(&mut pkt, 20, 1024).unwrap();
    assert_eq!(&pkt[34..36], &[0x04, 0x00]);
    assert!(tcp_checksum_valid(&pkt));
    assert_eq!(parse(&pkt).unwrap().window, 1024);
    assert_eq!(&pkt[..34], &V4_SYN[..34]);
    assert_eq!(&pkt[38..], &V4_SYN[38..]);
}

/// A copy of a packet its sender's stack left to the device to sum (`CHECKSUM_PARTIAL`, as a
/// tc program reads it on a veth): the field holds only the pseudo-header's folded sum. An
/// incremental rewrite keeps it wrong; a sum from scratch makes it what the device would write.
#[test]
fn checksum_filled_from_scratch_over_a_partial_one() {
    let mut pkt = V4_SYN;
    // The pseudo-header alone: addresses, protocol 6, TCP length.
    let mut sum: u32 = 6 + (pkt.len() as u32 - 20);
    for w in pkt[12..20].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    pkt[36..38].copy_from_slice(&(sum as u16).to_be_bytes());
    rewrite_window(&mut pkt, 20, 1024).unwrap();
    assert!(!tcp_checksum_valid(&pkt), "a partial checksum stays partial");
    assert_eq!(fill_tcp_checksum(&mut pkt), Some(()));
    assert!(tcp_checksum_valid(&pkt));
    let mut expected = V4_SYN;
    rewrite_window(&mut expected, 20, 1024).unwrap();
    assert_eq!(
        pkt, expected,
        "the same bytes as a rewrite of the complete packet"
    );
    // Not a TCP packet: left alone.
    let mut short = [0x45u8; 10];
    assert_eq!(fill_tcp_checksum(&mut short), None);
    assert_eq!(short, [0x45u8; 10]);
}

#[test]
fn ipv6_pure_ack_with_timestamps_and_two_sack_blocks() {
    let mut opts = vec![1, 1, 8, 10];
    opts.extend_from_slice(&0xdead_beefu32.to_be_bytes());
    opts.extend_from_slice(&0x0102_0304u32.to_be_bytes());
    opts.extend_from_slice(&[1, 1, 5, 18]);
    for v in [5000u32, 6000, 8000, 9000] {
        opts.extend_from_slice(&v.to_be_bytes());
    }
    assert_eq!(opts.len(), 32);
    let tcp = tcp_header(443, 40000, 777, Some(4000), 1234, &opts);
    let pkt = v6_tcp(0xb8, tcp, &[]);

    // hand-check a few wire bytes
    assert_eq!(pkt[0] >> 4, 6);
    assert_eq!(pkt[6], 6, "next header TCP");
    assert_eq!(u16::from_be_bytes([pkt[4], pkt[5]]), 52, "payload length");
    assert_eq!(pkt[40 + 12] >> 4, 13, "data offset");
    assert_eq!(pkt.len(), 92);

    let info = parse(&pkt).unwrap();
    assert_eq!(info.ip_version, IpVersion::V6);
    assert_eq!(info.src, IpAddr::V6(Ipv6Addr::from(V6_SRC)));
    assert_eq!(info.dst, IpAddr::V6(Ipv6Addr::from(V6_DST)));
    assert_eq!(info.dscp, 46, "traffic class 0xb8 is EF");
    assert_eq!(info.src_port, 443);
    assert_eq!(info.dst_port, 40000);
    assert_eq!(info.seq, 777);
    assert_eq!(info.ack, 4000);
    assert_eq!(
        info.flags,
        TcpFlags {
            ack: true,
            ..TcpFlags::default()
        }
    );
    assert_eq!(info.window, 1234);
    assert_eq!(info.payload_len, 0);
    assert_eq!(info.tcp_offset, 40);
    assert_eq!(info.options.timestamps, Some((0xdead_beef, 0x0102_0304)));
    assert_eq!(info.options.sack.count, 2);
    assert_eq!(info.options.sack.as_slice(), &[(5000, 6000), (8000, 9000)]);
    assert_eq!(info.options.mss, None);
    assert_eq!(info.options.window_scale, None);
    assert!(!info.options.sack_permitted);
    assert!(tcp_checksum_valid(&pkt));
    assert_eq!(parse_headers(&pkt), Ok(info));
}

fn v6_with_hop_by_hop(payload: &[u8]) -> Vec<u8> {
    // PadN option filling the 6 bytes of the minimal hop-by-hop header.
    let hbh = Ipv6RawExtHeader::new_raw(IpNumber::TCP, &[1, 4, 0, 0, 0, 0]).unwrap();
    let exts = Ipv6Extensions {
        hop_by_hop_options: Some(hbh),
        ..Default::default()
    };
    let tcp = tcp_header(5201, 50000, 1, Some(2), 3, &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
    build(IpHeaders::Ipv6(v6_header(0), exts), tcp, payload)
}

#[test]
fn ipv6_hop_by_hop_before_tcp() {
    let pkt = v6_with_hop_by_hop(&[0xaa; 33]);
    assert_eq!(pkt[6], 0, "first next header is hop-by-hop");
    assert_eq!(pkt[40], 6, "hop-by-hop next header is TCP");
    assert_eq!(pkt[41], 0, "hop-by-hop length 8 bytes");

    let info = parse(&pkt).unwrap();
    assert_eq!(info.tcp_offset, 48);
    assert_eq!(info.src_port, 5201);
    assert_eq!(info.payload_len, 33);
    assert_eq!(info.options.timestamps, Some((1, 2)));
    assert!(tcp_checksum_valid(&pkt));

    let mut rewritten = pkt.clone();
    rewrite_window(&mut rewritten, info.tcp_offset, 0xffff).unwrap();
    assert!(tcp_checksum_valid(&rewritten));
    assert_eq!(parse(&rewritten).unwrap().window, 0xffff);

    // Cut to headers: still parses, reports the full payload length.
    let cut = &pkt[..48 + 32];
    assert_eq!(parse_headers(cut), Ok(info));
    assert_eq!(parse(cut), Err(ParseError::Truncated));
    // Cut inside the hop-by-hop header.
    assert_eq!(parse_headers(&pkt[..44]), Err(ParseError::Truncated));
    assert_eq!(parse(&pkt[..44]), Err(ParseError::Truncated));
}

#[test]
fn ipv4_data_packet_with_payload() {
    let pkt = v4_data_packet();
    assert_eq!(pkt.len(), 20 + 32 + 100);
    assert_eq!(u16::from_be_bytes([pkt[2], pkt[3]]), 152);
    let info = parse(&pkt).unwrap();
    assert_eq!(info.payload_len, 100);
    assert_eq!(info.seq, 1000);
    assert_eq!(info.ack, 2000);
    assert_eq!(info.window, 501);
    assert!(info.flags.psh && info.flags.ack);
    assert!(!info.flags.syn && !info.flags.fin && !info.flags.rst);
    assert_eq!(info.options.timestamps, Some((7, 9)));
    assert!(tcp_checksum_valid(&pkt));

    let mut rewritten = pkt.clone();
    rewrite_window(&mut rewritten, info.tcp_offset, 64).unwrap();
    assert!(tcp_checksum_valid(&rewritten));
    // The incremental result equals a from-scratch recomputation.
    let ck = info.tcp_offset + 16;
    assert_eq!(
        tcp_checksum(&rewritten),
        Some(u16::from_be_bytes([rewritten[ck], rewritten[ck + 1]]))
    );
    let after = parse(&rewritten).unwrap();
    assert_eq!(after.window, 64);
    assert_eq!(TcpPacketInfo { window: 501, ..after }, info);
}

#[test]
fn all_flags_decode() {
    let mut tcp = tcp_header(1, 2, 3, Some(4), 5, &[]);
    tcp.fin = true;
    tcp.syn = true;
    tcp.rst = true;
    tcp.psh = true;
    tcp.urg = true;
    tcp.ece = true;
    tcp.cwr = true;
    let pkt = v4_tcp(0, tcp, &[]);
    let f = parse(&pkt).unwrap().flags;
    assert_eq!(
        f,
        TcpFlags {
            fin: true,
            syn: true,
            rst: true,
            psh: true,
            ack: true,
            urg: true,
            ece: true,
            cwr: true,
        }
    );
}

#[test]
fn ipv4_padding_uses_total_length() {
    let pkt = v4_data_packet();
    let info = parse(&pkt).unwrap();
    let mut padded = pkt.clone();
    padded.extend_from_slice(&[0xee; 14]);
    assert_eq!(parse(&padded), Ok(info));
    assert_eq!(parse_headers(&padded), Ok(info));
    assert!(tcp_checksum_valid(&padded));

    // A short SYN padded to the Ethernet minimum.
    let mut syn = V4_SYN.to_vec();
    syn.extend_from_slice(&[0; 6]);
    assert_eq!(parse(&syn).unwrap().payload_len, 0);
    assert!(tcp_checksum_valid(&syn));
}

#[test]
fn ipv6_padding_uses_payload_length() {
    let pkt = v6_data_packet();
    let info = parse(&pkt).unwrap();
    assert_eq!(info.payload_len, 77);
    let mut padded = pkt.clone();
    padded.extend_from_slice(&[0xee; 3]);
    assert_eq!(parse(&padded), Ok(info));
    assert!(tcp_checksum_valid(&padded));
}

#[test]
fn parse_headers_on_header_only_copy() {
    for pkt in [v4_data_packet(), v6_data_packet()] {
        let full = parse(&pkt).unwrap();
        let header_end = full.tcp_offset + usize::from(pkt[full.tcp_offset + 12] >> 4) * 4;

        // Cut anywhere from the end of the headers to one byte short.
        for cut in header_end..pkt.len() {
            assert_eq!(parse_headers(&pkt[..cut]), Ok(full), "cut at {cut}");
            assert_eq!(parse(&pkt[..cut]), Err(ParseError::Truncated), "cut at {cut}");
        }
        // Cut inside the TCP header (fixed part or options) or the IP header.
        for cut in 1..header_end {
            assert_eq!(
                parse_headers(&pkt[..cut]),
                Err(ParseError::Truncated),
                "cut at {cut}"
            );
            assert_eq!(parse(&pkt[..cut]), Err(ParseError::Truncated), "cut at {cut}");
        }
        assert_eq!(parse_headers(&pkt), Ok(full));
    }
}

/// A packet is complete when the datapath copied as much as its IP length field declares
/// (trailing padding allowed): then a data-carrying ACK may be handed back rewritten.
#[test]
fn complete_packets_are_told_from_header_only_copies() {
    for pkt in [v4_data_packet(), v6_data_packet()] {
        assert!(is_complete(&pkt));
        let mut padded = pkt.clone();
        padded.extend_from_slice(&[0; 6]);
        assert!(is_complete(&padded));
        for cut in 0..pkt.len() {
            assert!(!is_complete(&pkt[..cut]), "cut at {cut}");
        }
    }
    let mut jumbo = v6_data_packet();
    jumbo[4..6].copy_from_slice(&[0, 0]);
    assert!(!is_complete(&jumbo));
    assert!(!is_complete(&[0x55; 64]), "not IP");
}

#[test]
fn parse_error_labels() {
    let labels: Vec<&str> = ParseError::ALL.iter().map(|e| e.as_str()).collect();
    assert_eq!(
        labels,
        [
            "not_ip",
            "truncated",
            "bad_ip_header",
            "fragmented",
            "not_tcp",
            "bad_tcp_header",
            "bad_options",
            "bad_udp_header"
        ]
    );
    assert_eq!(ParseError::Truncated.to_string(), "truncated");
}

// ---------------------------------------------------------------------------
// One (or more) input per error variant.

fn both(
    pkt: &[u8],
) -> (
    Result<TcpPacketInfo, ParseError>,
    Result<TcpPacketInfo, ParseError>,
) {
    (parse(pkt), parse_headers(pkt))
}

fn assert_both(pkt: &[u8], e: ParseError) {
    assert_eq!(both(pkt), (Err(e), Err(e)));
}

#[test]
fn error_not_ip() {
    assert_both(&[], ParseError::NotIp);
    let mut pkt = V4_SYN;
    pkt[0] = 0x55; // version 5
    assert_both(&pkt, ParseError::NotIp);
    assert_both(&[0x00; 60], ParseError::NotIp);
}

#[test]
fn error_truncated() {
    // Cut inside the IPv4 header.
    assert_both(&V4_SYN[..10], ParseError::Truncated);
    assert_both(&V4_SYN[..1], ParseError::Truncated);
    // Cut inside the IPv6 header.
    assert_both(&v6_data_packet()[..39], ParseError::Truncated);
    // Whole packet minus one byte: strict parse refuses, header parse accepts.
    let pkt = v4_data_packet();
    assert_eq!(parse(&pkt[..pkt.len() - 1]), Err(ParseError::Truncated));
    assert!(parse_headers(&pkt[..pkt.len() - 1]).is_ok());
    // A SYN's options are header: cutting them is Truncated for both.
    assert_both(&V4_SYN[..59], ParseError::Truncated);
}

#[test]
fn error_bad_ip_header() {
    // IHL 4
    let mut pkt = V4_SYN;
    pkt[0] = 0x44;
    assert_both(&pkt, ParseError::BadIpHeader);
    // Total length 10, shorter than the 20-byte header.
    let mut pkt = V4_SYN;
    pkt[2..4].copy_from_slice(&10u16.to_be_bytes());
    assert_both(&pkt, ParseError::BadIpHeader);
    // IPv6 hop-by-hop header longer than the payload length.
    let mut pkt = v6_with_hop_by_hop(&[]);
    pkt[4..6].copy_from_slice(&4u16.to_be_bytes());
    assert_both(&pkt, ParseError::BadIpHeader);
    // IPv6 hop-by-hop header not directly after the fixed header.
    let dest = Ipv6RawExtHeader::new_raw(IpNumber::TCP, &[1, 4, 0, 0, 0, 0]).unwrap();
    let exts = Ipv6Extensions {
        destination_options: Some(dest),
        ..Default::default()
    };
    let mut pkt = build(
        IpHeaders::Ipv6(v6_header(0), exts),
        tcp_header(1, 2, 3, None, 4, &[]),
        &[],
    );
    assert_eq!(pkt[6], 60);
    pkt[40] = 0; // destination options -> hop-by-hop
    assert_both(&pkt, ParseError::BadIpHeader);
}

#[test]
fn error_fragmented_ipv4() {
    // MF set (first fragment, still has the whole TCP header).
    let mut pkt = v4_data_packet();
    pkt[6] = 0x20;
    fix_ipv4_header_checksum(&mut pkt);
    assert_both(&pkt, ParseError::Fragmented);
    // Non-zero offset, MF clear (last fragment).
    let mut pkt = v4_data_packet();
    pkt[6] = 0x00;
    pkt[7] = 0x10;
    fix_ipv4_header_checksum(&mut pkt);
    assert_both(&pkt, ParseError::Fragmented);
}

#[test]
fn error_fragmented_ipv6() {
    for (more, offset) in [(true, 0u16), (false, 100), (false, 0)] {
        let exts = Ipv6Extensions {
            fragment: Some(Ipv6FragmentHeader::new(
                IpNumber::TCP,
                IpFragOffset::try_new(offset).unwrap(),
                more,
                0x1234_5678,
            )),
            ..Default::default()
        };
        let pkt = build(
            IpHeaders::Ipv6(v6_header(0), exts),
            tcp_header(1, 2, 3, Some(4), 5, &[]),
            &[0; 16],
        );
        assert_eq!(pkt[6], 44, "fragment header present");
        // (false, 0) is an atomic fragment, still reported as Fragmented.
        assert_both(&pkt, ParseError::Fragmented);
    }
}

#[test]
fn error_not_tcp() {
    let udp4 = {
        let b = PacketBuilder::ipv4(V4_SRC, V4_DST, 64).udp(53, 5353);
        let mut v = Vec::new();
        b.write(&mut v, &[1, 2, 3]).unwrap();
        v
    };
    assert_both(&udp4, ParseError::NotTcp);
    let udp6 = {
        let b = PacketBuilder::ipv6(V6_SRC, V6_DST, 64).udp(53, 5353);
        let mut v = Vec::new();
        b.write(&mut v, &[0; 40]).unwrap();
        v
    };
    assert_both(&udp6, ParseError::NotTcp);
    // UDP fragment: protocol wins over fragmentation.
    let mut frag = udp4.clone();
    frag[6] = 0x20;
    fix_ipv4_header_checksum(&mut frag);
    assert_both(&frag, ParseError::NotTcp);
    // TCP behind IPsec AH: must not be rewritten.
    let auth = IpAuthHeader::new(IpNumber::TCP, 1, 1, &[0; 12]).unwrap();
    let ah = build(
        IpHeaders::Ipv4(v4_header(0), Ipv4Extensions { auth: Some(auth) }),
        tcp_header(1, 2, 3, Some(4), 5, &[]),
        &[],
    );
    assert_eq!(ah[9], 51);
    assert_both(&ah, ParseError::NotTcp);
    let auth = IpAuthHeader::new(IpNumber::TCP, 1, 1, &[0; 12]).unwrap();
    let ah6 = build(
        IpHeaders::Ipv6(
            v6_header(0),
            Ipv6Extensions {
                auth: Some(auth),
                ..Default::default()
            },
        ),
        tcp_header(1, 2, 3, Some(4), 5, &[]),
        &[],
    );
    assert_eq!(ah6[6], 51);
    assert_both(&ah6, ParseError::NotTcp);
}

#[test]
fn error_bad_tcp_header() {
    // Data offset 4.
    let mut pkt = v4_data_packet();
    pkt[20 + 12] = 0x40;
    assert_both(&pkt, ParseError::BadTcpHeader);
    // Data offset 15 (60 bytes) but the IP payload holds only 20 + 0.
    let mut pkt = v4_tcp(0, tcp_header(1, 2, 3, Some(4), 5, &[]), &[]);
    pkt[20 + 12] = 0xf0;
    assert_both(&pkt, ParseError::BadTcpHeader);
    // Data offset 15 with buffer padding that would hold it: the IP length
    // still says the header does not fit.
    pkt.extend_from_slice(&[0; 40]);
    assert_both(&pkt, ParseError::BadTcpHeader);
    // IPv4 payload shorter than 20 bytes (total length 30), buffer longer.
    let mut pkt = V4_SYN;
    pkt[2..4].copy_from_slice(&30u16.to_be_bytes());
    assert_both(&pkt, ParseError::BadTcpHeader);
    // IPv6 payload length 0: taken literally, no room for TCP.
    let mut pkt = v6_data_packet();
    pkt[4] = 0;
    pkt[5] = 0;
    assert_both(&pkt, ParseError::BadTcpHeader);
}

#[test]
fn error_bad_options() {
    let mut pkt = V4_SYN;
    pkt[41] = 1; // MSS option length 4 -> 1
    assert_both(&pkt, ParseError::BadOptions);
    let mut pkt = V4_SYN;
    pkt[47] = 30; // TS length 10 -> 30, runs past the header
    assert_both(&pkt, ParseError::BadOptions);
}
