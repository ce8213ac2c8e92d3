//! Replies captured from Linux 6.18 (`ctnetlink` GETs sent by this crate's request builder in
//! throwaway namespaces, transfers by iperf3; the netlink headers' sequence numbers are 0).

use std::net::SocketAddr;

use proptest::prelude::*;

use super::*;

fn bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

/// 127.0.0.1:40000 -> 127.0.0.1:5555 over lo, conntrack saw the handshake: scales 10 and 10,
/// flags 0x33 (window scale, SACK, unacked, max-ack) and 0x23.
const SYN_SEEN_LO: &str = "d400000000010200000000007a170000020000003400018014000180080001007f000001080002007f0000011c0002800500010006000000060002009c4000000600030015b300003400028014000180080001007f000001080002007f0000011c00028005000100060000000600020015b30000060003009c400000080003000000000e080008000000000008000c004ddef86208000b0000000002080007000000012c300004802c0001800500010003000000050002000a000000050003000a00000006000400330000000600050023000000";
/// A masqueraded download through a router namespace: LAN 10.9.0.2:41002 -> server 10.9.1.2:6882,
/// reply 10.9.1.2:6882 -> 10.9.1.1:41002 (the router's WAN address). The LAN host's receive
/// buffer was smaller (tcp_rmem max 6 MiB): it offered scale 7, the server 10.
const MASQUERADED: &str = "d40000000001020000000000dc3a0000020000003400018014000180080001000a090002080002000a0901021c000280050001000600000006000200a02a0000060003001ae200003400028014000180080001000a090102080002000a0901011c0002800500010006000000060002001ae2000006000300a02a0000080003000000019e080008000000000008000c006bc9504608000b0000000002080007000000012c300004802c00018005000100030000000500020007000000050003000a00000006000400230000000600050033000000";
/// 127.0.0.1:40001 -> :5556 after `conntrack -F` while the transfer ran: conntrack picked the
/// connection up mid-stream (flags 0x0a: SACK, be-liberal; scales 0): no scale known.
const PICKED_UP_LO: &str = "d40000000001020000000000fa1a0000020000003400018014000180080001007f000001080002007f0000011c0002800500010006000000060002009c4100000600030015b400003400028014000180080001007f000001080002007f0000011c00028005000100060000000600020015b40000060003009c410000080003000000000e080008000000000008000c00b92498af08000b0000000002080007000000012c300004802c000180050001000300000005000200000000000500030000000000060004000a000000060005000a000000";
/// [::1]:40003 -> [::1]:5558 over lo, handshake seen, scales 10 and 10.
const V6_LO: &str = "040100000001020000000000a33800000a0000004c0001802c000180140003000000000000000000000000000000000114000400000000000000000000000000000000011c0002800500010006000000060002009c4300000600030015b600004c0002802c000180140003000000000000000000000000000000000114000400000000000000000000000000000000011c00028005000100060000000600020015b60000060003009c430000080003000000000e080008000000000008000c00b7890d2c08000b0000000002080007000000012b300004802c0001800500010003000000050002000a000000050003000a00000006000400330000000600050023000000";
/// No entry: NLMSG_ERROR -2 (ENOENT) quoting the request for 10.9.0.2:41009 -> 10.9.1.2:6882.
const NOT_FOUND: &str = "5c0000000200000000000000e33a0000feffffff48000000010101000000000000000000020000003400018014000180080001000a090002080002000a0901021c000280050001000600000006000200a0310000060003001ae20000";

fn entry_of(hex: &str) -> Entry {
    match parse_reply(&bytes(hex), 0) {
        Ok(Some(Reply::Entry(e))) => e,
        other => panic!("expected an entry, got {other:?}"),
    }
}

#[test]
fn a_tracked_handshake_gives_both_scales() {
    let e = entry_of(SYN_SEEN_LO);
    assert_eq!(e.original, (addr("127.0.0.1:40000"), addr("127.0.0.1:5555")));
    assert_eq!(e.reply, (addr("127.0.0.1:5555"), addr("127.0.0.1:40000")));
    let tcp = e.tcp.expect("TCP protoinfo");
    assert_eq!((tcp.state, tcp.wscale_original, tcp.wscale_reply), (3, 10, 10));
    assert_eq!((tcp.flags_original, tcp.flags_reply), (0x33, 0x23));
    assert_eq!(
        e.scales_of(addr("127.0.0.1:40000"), addr("127.0.0.1:5555")),
        Some(Scales::Known { a: 10, b: 10 })
    );
}

#[test]
fn masquerade_the_router_sees_lan_addresses_in_the_original_tuple() {
    let e = entry_of(MASQUERADED);
    let (lan, server, wan) = (
        addr("10.9.0.2:41002"),
        addr("10.9.1.2:6882"),
        addr("10.9.1.1:41002"),
    );
    assert_eq!(e.original, (lan, server));
    assert_eq!(e.reply, (server, wan));
    // The forward hook sees LAN <-> server: the LAN host offered 7, the server 10.
    assert_eq!(e.scales_of(lan, server), Some(Scales::Known { a: 7, b: 10 }));
    assert_eq!(e.scales_of(server, lan), Some(Scales::Known { a: 10, b: 7 }));
    // After SNAT (a postrouting hook) the same connection is server <-> WAN address.
    assert_eq!(e.scales_of(server, wan), Some(Scales::Known { a: 10, b: 7 }));
    assert_eq!(e.scales_of(lan, wan), None, "not a tuple of this entry");
}

#[test]
fn port_forward_the_router_sees_the_reply_tuple() {
    // DNAT: a WAN client 198.51.100.7:50000 connects to the router's 203.0.113.1:6881, forwarded
    // to the LAN host 192.168.1.20:6881. The forward hook sees client <-> LAN host, which is the
    // reply tuple reversed.
    let (client, wan, lan) = (
        addr("198.51.100.7:50000"),
        addr("203.0.113.1:6881"),
        addr("192.168.1.20:6881"),
    );
    let e = Entry {
        original: (client, wan),
        reply: (lan, client),
        tcp: Some(TcpInfo {
            state: 3,
            wscale_original: 8,
            wscale_reply: 6,
            flags_original: FLAG_WINDOW_SCALE,
            flags_reply: FLAG_WINDOW_SCALE,
        }),
    };
    assert_eq!(e.scales_of(lan, client), Some(Scales::Known { a: 6, b: 8 }));
    assert_eq!(e.scales_of(client, lan), Some(Scales::Known { a: 8, b: 6 }));
}

#[test]
fn an_entry_picked_up_mid_stream_knows_no_scale() {
    let e = entry_of(PICKED_UP_LO);
    assert_eq!(
        e.scales_of(addr("127.0.0.1:40001"), addr("127.0.0.1:5556")),
        Some(Scales::Unknown)
    );
}

#[test]
fn scaling_off_and_handshake_states() {
    let (a, b) = (addr("10.0.0.2:1000"), addr("192.0.2.1:80"));
    let with = |state, flags_original, flags_reply| Entry {
        original: (a, b),
        reply: (b, a),
        tcp: Some(TcpInfo {
            state,
            wscale_original: 7,
            wscale_reply: 9,
            flags_original,
            flags_reply,
        }),
    };
    // Only the client offered scaling: off both ways.
    assert_eq!(
        with(3, FLAG_WINDOW_SCALE, 0x02).scales_of(a, b),
        Some(Scales::Known { a: 0, b: 0 })
    );
    // Neither offered it, the SYNs were seen (not liberal): 0 both ways.
    assert_eq!(
        with(3, 0x02, 0x02).scales_of(a, b),
        Some(Scales::Known { a: 0, b: 0 })
    );
    // The handshake not through yet (SYN_SENT, or simultaneous open's SYN_SENT2): unknown.
    assert_eq!(
        with(1, FLAG_WINDOW_SCALE, FLAG_WINDOW_SCALE).scales_of(a, b),
        Some(Scales::Unknown)
    );
    assert_eq!(
        with(9, FLAG_WINDOW_SCALE, FLAG_WINDOW_SCALE).scales_of(a, b),
        Some(Scales::Unknown)
    );
    // Closing states still know the scales.
    assert_eq!(
        with(5, FLAG_WINDOW_SCALE, FLAG_WINDOW_SCALE).scales_of(a, b),
        Some(Scales::Known { a: 7, b: 9 })
    );
    // A shift above 14 is used as 14.
    let mut wide = with(3, FLAG_WINDOW_SCALE, FLAG_WINDOW_SCALE);
    wide.tcp.as_mut().unwrap().wscale_reply = 200;
    assert_eq!(wide.scales_of(a, b), Some(Scales::Known { a: 7, b: 14 }));
    // No TCP information: nothing to say.
    let none = Entry {
        tcp: None,
        ..with(3, 0, 0)
    };
    assert_eq!(none.scales_of(a, b), None);
}

#[test]
fn ipv6_entries() {
    let e = entry_of(V6_LO);
    assert_eq!(
        e.scales_of(addr("[::1]:40003"), addr("[::1]:5558")),
        Some(Scales::Known { a: 10, b: 10 })
    );
}

#[test]
fn no_entry_and_other_sequence_numbers() {
    assert_eq!(parse_reply(&bytes(NOT_FOUND), 0), Ok(Some(Reply::NotFound)));
    assert_eq!(
        parse_reply(&bytes(SYN_SEEN_LO), 7),
        Ok(None),
        "an answer to another request"
    );
    // Two messages in one datagram: the second answers.
    let mut two = bytes(NOT_FOUND);
    let mut second = bytes(SYN_SEEN_LO);
    second[8] = 5;
    two.extend(second);
    assert!(matches!(parse_reply(&two, 5), Ok(Some(Reply::Entry(_)))));
    assert!(parse_reply(&[], 0).unwrap().is_none());
}

#[test]
fn the_request_is_what_conntrack_tools_sends() {
    // Same attribute layout as `conntrack -G -p tcp -s .. -d .. --sport .. --dport ..`: tuple
    // orig { ip { v4 src, v4 dst }, proto { num 6, sport, dport } }.
    let r = get_request(9, addr("10.9.0.2:41009"), addr("10.9.1.2:6882")).expect("one family");
    // The ENOENT reply quotes the request the kernel got from the capture's probe (seq 0): the
    // same bytes but for the sequence number and the port id the kernel filled in.
    let quoted = &bytes(NOT_FOUND)[20..];
    assert_eq!(r.len(), quoted.len());
    assert_eq!(
        &r[..8],
        &quoted[..8],
        "length, type (ctnetlink GET), flags (request)"
    );
    assert_eq!(u32::from_ne_bytes(r[8..12].try_into().unwrap()), 9);
    assert_eq!(&r[16..], &quoted[16..], "nfgenmsg and tuple");
    assert!(get_request(1, addr("10.0.0.1:1"), addr("[::1]:2")).is_none());
}

/// Arbitrary bytes, and real replies with bytes changed, cut or lengths forged: the parser
/// returns (an entry, nothing, or an error) and never panics.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let fixtures = prop_oneof![
        Just(bytes(SYN_SEEN_LO)),
        Just(bytes(MASQUERADED)),
        Just(bytes(PICKED_UP_LO)),
        Just(bytes(V6_LO)),
        Just(bytes(NOT_FOUND)),
    ];
    (
        fixtures,
        proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        any::<usize>(),
    )
        .prop_map(|(mut b, edits, cut)| {
            for (at, value) in edits {
                let i = at % b.len();
                b[i] = value;
            }
            let keep = b.len() - cut % (b.len() / 4 + 1);
            b.truncate(keep);
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn parsing_never_panics(bytes in prop_oneof![proptest::collection::vec(any::<u8>(), 0..512), mutated()]) {
        if let Ok(Some(Reply::Entry(e))) = parse_reply(&bytes, 0) {
            let _ = e.scales_of(e.original.0, e.original.1);
        }
    }
}

/// `hex` with its CTA_MARK (attribute 8, big endian) set to `mark`.
fn with_mark(hex: &str, mark: u32) -> Vec<u8> {
    let mut b = bytes(hex);
    let at = b
        .windows(4)
        .position(|w| w == [0x08, 0x00, 0x08, 0x00])
        .expect("a CTA_MARK attribute");
    b[at + 4..at + 8].copy_from_slice(&mark.to_be_bytes());
    b
}

/// A dump datagram holding two entries (the captured replies, one with a rule in its mark) and
/// the end: only the marked one is kept, with its mark, and the end is seen.
#[test]
fn a_dump_keeps_the_entries_with_a_rule_in_their_mark() {
    let mut datagram = with_mark(SYN_SEEN_LO, 0x0000_0001);
    datagram.extend(with_mark(MASQUERADED, 0x0002_0001));
    let mut out = Vec::new();
    assert!(
        !parse_dump(&datagram, 0x00ff_0000, &mut out).unwrap(),
        "not over yet"
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].mark, 0x0002_0001);
    assert_eq!(out[0].entry.original.1, addr("10.9.1.2:6882"));
    // NLMSG_DONE ends it.
    let mut done = vec![0u8; 20];
    done[0] = 20;
    done[4] = 3;
    assert!(parse_dump(&done, 0x00ff_0000, &mut out).unwrap());
    assert_eq!(out.len(), 1);
    // A dump request: IPCTNL_MSG_CT_GET with NLM_F_DUMP, for IPv4 or IPv6.
    let v4 = dump_request(9, false);
    assert_eq!(u16::from_ne_bytes([v4[6], v4[7]]) & 0x300, 0x300);
    assert_eq!(v4[16], libc::AF_INET as u8);
    assert_eq!(dump_request(9, true)[16], libc::AF_INET6 as u8);
}

/// A dump datagram of one conntrack entry as the kernel sends it (`IPCTNL_MSG_CT_NEW` with
/// NLM_F_MULTI): `proto`, the mark, `CTA_ID` and both counters (a call: 7 packets out, 3 back).
fn dump_entry(proto: Protocol, mark: u32) -> Vec<u8> {
    use netlink_packet_core::{DefaultNla, NetlinkHeader, NetlinkMessage, NetlinkPayload};
    use netlink_packet_netfilter::conntrack::{
        ConntrackAttribute, ConntrackMessage, IPTuple, ProtoTuple, Tuple,
    };
    use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterProtoFamily};
    let tuple = |a: &str, b: &str| {
        let (a, b) = (addr(a), addr(b));
        vec![
            Tuple::Ip(vec![
                IPTuple::SourceAddress(a.ip()),
                IPTuple::DestinationAddress(b.ip()),
            ]),
            Tuple::Proto(vec![
                ProtoTuple::Protocol(proto),
                ProtoTuple::SourcePort(a.port()),
                ProtoTuple::DestinationPort(b.port()),
            ]),
        ]
    };
    let counters = |packets: u64, bytes: u64| {
        let mut v = Vec::new();
        for (kind, value) in [(1u16, packets), (2, bytes)] {
            v.extend_from_slice(&12u16.to_ne_bytes());
            v.extend_from_slice(&kind.to_ne_bytes());
            v.extend_from_slice(&value.to_be_bytes());
        }
        v
    };
    let mut message = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::from(NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::IPv4, 0, 0),
            ConntrackMessage::New(vec![
                ConntrackAttribute::CtaTupleOrig(tuple("192.168.1.10:50000", "198.51.100.7:3478")),
                ConntrackAttribute::CtaTupleReply(tuple("198.51.100.7:3478", "203.0.113.2:50000")),
                ConntrackAttribute::CtaMark(mark),
                ConntrackAttribute::Other(DefaultNla::new(12, 0x0102_0304u32.to_be_bytes().to_vec())),
                ConntrackAttribute::Other(DefaultNla::new(9, counters(7, 896))),
                ConntrackAttribute::Other(DefaultNla::new(10, counters(3, 234))),
            ]),
        )),
    );
    message.finalize();
    let mut bytes = vec![0u8; message.buffer_len()];
    message.serialize(&mut bytes);
    bytes
}

#[test]
fn a_udp_dump_keeps_the_unclassed_udp_entries_with_their_counters() {
    let mut out = Vec::new();
    assert!(!parse_udp_dump(&dump_entry(Protocol::Udp, 0), 0x00ff_0000, 10, &mut out).unwrap());
    assert_eq!(
        out,
        vec![UdpCount {
            id: 0x0102_0304,
            original: (addr("192.168.1.10:50000"), addr("198.51.100.7:3478")),
            packets: [7, 3],
            bytes: [896, 234]
        }]
    );
    // The background's (a rule's number in the mark), TCP, and past the limit: left out.
    out.clear();
    parse_udp_dump(&dump_entry(Protocol::Udp, 0x0003_0000), 0x00ff_0000, 10, &mut out).unwrap();
    parse_udp_dump(&dump_entry(Protocol::Tcp, 0), 0x00ff_0000, 10, &mut out).unwrap();
    parse_udp_dump(&dump_entry(Protocol::Udp, 0), 0x00ff_0000, 0, &mut out).unwrap();
    assert_eq!(out, vec![]);
}

#[test]
fn a_udp_get_answers_the_counters_or_nothing() {
    let reply = parse_udp_reply(&dump_entry(Protocol::Udp, 0), 0x00ff_0000).unwrap();
    assert_eq!(
        reply.map(|c| (c.id, c.packets, c.bytes)),
        Some((0x0102_0304, [7, 3], [896, 234]))
    );
    // Gone (ENOENT), classed since it was found, or not UDP: nothing.
    assert_eq!(parse_udp_reply(&bytes(NOT_FOUND), 0x00ff_0000), Ok(None));
    assert_eq!(
        parse_udp_reply(&dump_entry(Protocol::Udp, 0x0003_0000), 0x00ff_0000),
        Ok(None)
    );
    assert_eq!(
        parse_udp_reply(&dump_entry(Protocol::Tcp, 0), 0x00ff_0000),
        Ok(None)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    #[test]
    fn udp_dump_parsing_never_panics(
        bytes in prop_oneof![proptest::collection::vec(any::<u8>(), 0..512), Just(dump_entry(Protocol::Udp, 0))],
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        let mut bytes = bytes;
        for (at, value) in edits {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = value;
            }
        }
        let _ = parse_udp_dump(&bytes, 0x00ff_0000, 100, &mut Vec::new());
        let _ = parse_udp_reply(&bytes, 0x00ff_0000);
    }
}
