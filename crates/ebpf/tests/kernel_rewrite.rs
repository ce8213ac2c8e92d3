//! The kernel side of the window rewrite, run in the kernel: real frames through the loaded tc
//! program with BPF_PROG_TEST_RUN (the kernel builds an skb from each frame, runs the program and
//! hands back the frame as it would leave). Each case checks the window the program forwards
//! against `slipstream_engine::window_clamp::clamp_window` (the engine's own, hand-tested rules)
//! and the TCP checksum of the frame that comes out, computed independently by etherparse:
//! IPv4 and IPv6, window scales 0-14, odd payload lengths, ACK numbers across the sequence wrap,
//! a right edge never moved left, and everything unexpected passed byte for byte.
//!
//! Needs root (CAP_BPF and CAP_NET_ADMIN); without it each test says why and returns.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TcpOptionElement, TransportSlice};
use slipstream_ebpf::{DirKey, FlowCfg, Hook, TcConfig, TcDatapath, FLOW_CLAMP, FLOW_HOLD, FLOW_SENT_EDGE};
use slipstream_engine::window_clamp::{clamp_window, ClampRequest};

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// TC_ACT_UNSPEC (-1; TCX_NEXT under TCX): no verdict, the next filter runs (sqm's redirect).
const PASS: u32 = u32::MAX;

fn datapath() -> Option<TcDatapath> {
    if let Some(why) = slipstream_testbed::missing_prerequisite(&[]) {
        panic!("cannot run here: {why} (BPF_PROG_TEST_RUN of a tc program)");
    }
    let mut dp = TcDatapath::load(TcConfig {
        max_flows: 64,
        ring_bytes: 1 << 16,
        ..TcConfig::default()
    })
    .expect("load the tc program");
    dp.heartbeat(Duration::from_secs(60)).unwrap();
    Some(dp)
}

/// An ACK (with `payload` bytes of data) from `src` to `dst` as an Ethernet frame.
fn ack_frame(src: SocketAddr, dst: SocketAddr, seq: u32, ack: u32, window: u16, payload: &[u8]) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2(MAC_A, MAC_B);
    let ts = [
        TcpOptionElement::Noop,
        TcpOptionElement::Noop,
        TcpOptionElement::Timestamp(7, 9),
    ];
    let builder = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), 64),
        (IpAddr::V6(s), IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), 64),
        _ => unreachable!(),
    }
    .tcp(src.port(), dst.port(), seq, window)
    .ack(ack)
    .options(&ts)
    .unwrap();
    let mut out = Vec::new();
    builder.write(&mut out, payload).unwrap();
    out
}

/// The forwarded window field, after checking that the frame's TCP checksum is right.
fn window_of(frame: &[u8]) -> u16 {
    let packet = SlicedPacket::from_ethernet(frame).expect("a TCP frame comes out");
    let Some(TransportSlice::Tcp(tcp)) = packet.transport else {
        panic!("not TCP")
    };
    let expected = match packet.net {
        Some(NetSlice::Ipv4(ip)) => tcp
            .calc_checksum_ipv4(ip.header().source(), ip.header().destination())
            .unwrap(),
        Some(NetSlice::Ipv6(ip)) => tcp
            .calc_checksum_ipv6(ip.header().source(), ip.header().destination())
            .unwrap(),
        _ => panic!("not IP"),
    };
    assert_eq!(tcp.checksum(), expected, "TCP checksum of the forwarded frame");
    tcp.window_size()
}

fn endpoints(v6: bool) -> (SocketAddr, SocketAddr) {
    if v6 {
        (
            "[2001:db8::10]:40000".parse().unwrap(),
            "[2001:db8:ff::22]:443".parse().unwrap(),
        )
    } else {
        (
            "192.168.1.10:40000".parse().unwrap(),
            "93.184.216.34:443".parse().unwrap(),
        )
    }
}

fn clamp(target: u32, mss: u32, scale: u8, hold: bool) -> FlowCfg {
    FlowCfg {
        target_bytes: target,
        mss,
        scale,
        flags: FLOW_CLAMP | if hold { FLOW_HOLD } else { 0 },
        rule: 1,
        sent_edge: 0,
    }
}

/// Every scale, both families, odd and even payloads, ACK numbers on both sides of the wrap:
/// the forwarded window is exactly what the engine's rules give, the checksum is right, and the
/// ACK is never raised.
#[test]
#[ignore = "needs root and BPF (BPF_PROG_TEST_RUN): scripts/test.sh runs it (--include-ignored)"]
fn lowers_windows_as_the_engine_rules_say() {
    let Some(mut dp) = datapath() else { return };
    let mut cases = 0;
    for v6 in [false, true] {
        let (host, server) = endpoints(v6);
        let key = DirKey::new(host, server).unwrap();
        for scale in 0u8..=14 {
            for (payload_len, ack) in [
                (0usize, 1_000u32),
                (1, u32::MAX - 3_000),
                (1001, 0x7fff_fff0),
                (3, 17),
            ] {
                for (host_field, target, mss) in
                    [(65535u16, 20_000u32, 1448u32), (4000, 1, 1220), (9, 1 << 20, 536)]
                {
                    dp.start_flow(&key, 1).unwrap();
                    dp.set_flow(&key, clamp(target, mss, scale, false)).unwrap();
                    let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
                    let frame = ack_frame(host, server, 5, ack, host_field, &payload);
                    let (verdict, out) = dp.test_run(Hook::Ingress, &frame).unwrap();
                    assert_eq!(verdict, PASS);
                    assert_eq!(out.len(), frame.len(), "same length out");
                    let want = clamp_window(ClampRequest {
                        host_field,
                        scale,
                        ack,
                        right_edge: None,
                        target_bytes: target,
                        mss,
                        hold: false,
                    });
                    let got = window_of(&out);
                    assert_eq!(
                        got, want,
                        "v6 {v6} scale {scale} payload {payload_len} ack {ack} host {host_field} target {target}"
                    );
                    assert!(got <= host_field, "never raised");
                    // Only the window and the checksum changed.
                    let diff: Vec<usize> = (0..frame.len()).filter(|&i| frame[i] != out[i]).collect();
                    assert!(diff.len() <= 4, "bytes changed: {diff:?}");
                    cases += 1;
                }
            }
        }
    }
    eprintln!("{cases} frames checked");
}

/// A lower target later in the flow never pulls the right edge back, across the sequence wrap,
/// and the edge the kernel keeps is the one it advertised.
#[test]
#[ignore = "needs root and BPF (BPF_PROG_TEST_RUN): scripts/test.sh runs it (--include-ignored)"]
fn never_moves_the_right_edge_left_across_the_wrap() {
    let Some(mut dp) = datapath() else { return };
    for v6 in [false, true] {
        let (host, server) = endpoints(v6);
        let key = DirKey::new(host, server).unwrap();
        dp.start_flow(&key, 1).unwrap();
        let scale = 7;
        // First ACK: a generous target, the edge lands 100 000 bytes past the ACK (rounded up).
        let ack1 = u32::MAX - 50_000;
        dp.set_flow(&key, clamp(100_000, 1448, scale, false)).unwrap();
        let (_, out) = dp
            .test_run(Hook::Ingress, &ack_frame(host, server, 1, ack1, 60_000, &[]))
            .unwrap();
        let field1 = window_of(&out);
        assert_eq!(field1, 782, "ceil(100000 / 128)");
        let edge1 = ack1.wrapping_add(u32::from(field1) << scale);
        assert_eq!(dp.edge(&key), Some(edge1), "edge kept across the wrap");
        // Target drops to nothing; the next ACK (past the wrap) must keep the edge.
        dp.set_flow(&key, clamp(1, 1448, scale, false)).unwrap();
        let ack2 = ack1.wrapping_add(60_000);
        let (_, out) = dp
            .test_run(Hook::Ingress, &ack_frame(host, server, 1, ack2, 60_000, &[]))
            .unwrap();
        let field2 = window_of(&out);
        let edge2 = ack2.wrapping_add(u32::from(field2) << scale);
        assert!(
            (edge2.wrapping_sub(edge1) as i32) >= 0,
            "edge {edge2} left of {edge1}"
        );
        assert_eq!(
            field2,
            40_096u32.div_ceil(128) as u16,
            "exactly the edge kept: 40 096 bytes left"
        );
        // Held (household): the edge stays, no floor of two segments; everything acked: zero.
        dp.set_flow(&key, clamp(0, 1448, scale, true)).unwrap();
        let ack3 = edge2;
        let (_, out) = dp
            .test_run(Hook::Ingress, &ack_frame(host, server, 1, ack3, 60_000, &[]))
            .unwrap();
        assert_eq!(window_of(&out), 0, "held with nothing left open");
    }
}

/// A window update the daemon sent itself (a held household flow's turn) advertised an edge
/// the program never saw: once the daemon records it in the flow's map entry, the next ACK,
/// held again, keeps it (no shrink), and the program folds it into its own edge.
#[test]
#[ignore = "needs root and BPF (BPF_PROG_TEST_RUN): scripts/test.sh runs it (--include-ignored)"]
fn the_edge_of_the_daemons_window_update_counts_as_advertised() {
    let Some(mut dp) = datapath() else { return };
    for v6 in [false, true] {
        let (host, server) = endpoints(v6);
        let key = DirKey::new(host, server).unwrap();
        dp.start_flow(&key, 1).unwrap();
        let scale = 7;
        // Across the wrap: the first ACK leaves the edge 12 800 bytes past it.
        let ack1 = u32::MAX - 5_000;
        dp.set_flow(&key, clamp(12_800, 1448, scale, false)).unwrap();
        let (_, out) = dp
            .test_run(Hook::Ingress, &ack_frame(host, server, 1, ack1, 60_000, &[]))
            .unwrap();
        assert_eq!(window_of(&out), 100);
        let edge1 = ack1.wrapping_add(12_800);
        // The daemon's update opened 64 000 bytes past ack1; the flow is held again after it.
        let sent = ack1.wrapping_add(500 << scale);
        let held = FlowCfg {
            flags: FLOW_CLAMP | FLOW_HOLD | FLOW_SENT_EDGE,
            sent_edge: sent,
            ..clamp(0, 1448, scale, true)
        };
        dp.set_flow(&key, held).unwrap();
        let ack2 = ack1.wrapping_add(10_000);
        let (_, out) = dp
            .test_run(Hook::Ingress, &ack_frame(host, server, 1, ack2, 60_000, &[]))
            .unwrap();
        let field = window_of(&out);
        assert_eq!(
            u32::from(field),
            sent.wrapping_sub(ack2).div_ceil(1 << scale),
            "held, the window reaches exactly the daemon's edge (not the program's {edge1})"
        );
        // Rounded up to the scale unit, the edge the program keeps now covers the sent one.
        assert_eq!(
            dp.edge(&key),
            Some(ack2.wrapping_add(u32::from(field) << scale)),
            "the sent edge folded into the program's"
        );
        // Without the record, the same held ACK would have gone back to the program's edge.
        dp.start_flow(&key, 1).unwrap();
        dp.set_flow(&key, clamp(12_800, 1448, scale, false)).unwrap();
        dp.test_run(Hook::Ingress, &ack_frame(host, server, 1, ack1, 60_000, &[]))
            .unwrap();
        dp.set_flow(&key, clamp(0, 1448, scale, true)).unwrap();
        let (_, out) = dp
            .test_run(Hook::Ingress, &ack_frame(host, server, 1, ack2, 60_000, &[]))
            .unwrap();
        assert_eq!(
            u32::from(window_of(&out)),
            edge1.wrapping_sub(ack2).div_ceil(1 << scale)
        );
    }
}

/// What the program must leave alone, byte for byte: flows it was not told about, the other
/// direction without a clamp, handshakes, fragments, IPv6 extension headers, truncated frames,
/// and everything once the daemon's heartbeat is stale.
#[test]
#[ignore = "needs root and BPF (BPF_PROG_TEST_RUN): scripts/test.sh runs it (--include-ignored)"]
fn passes_anything_unexpected_unmodified() {
    let Some(mut dp) = datapath() else { return };
    let (host, server) = endpoints(false);
    let key = DirKey::new(host, server).unwrap();
    let frame = ack_frame(host, server, 5, 1000, 60_000, &[]);
    let same = |dp: &mut TcDatapath, frame: &[u8], what: &str| {
        let (verdict, out) = dp.test_run(Hook::Ingress, frame).unwrap();
        assert_eq!(verdict, PASS, "{what}");
        assert_eq!(out, frame, "{what}: unmodified");
    };
    same(&mut dp, &frame, "unknown flow");
    dp.start_flow(&key, 1).unwrap();
    same(&mut dp, &frame, "known flow, no clamp yet");
    dp.set_flow(&key.reversed(), clamp(1, 1448, 0, false)).unwrap();
    same(&mut dp, &frame, "clamp on the other direction only");
    dp.set_flow(&key, clamp(1, 1448, 0, false)).unwrap();
    // A SYN-ACK of the clamped direction (handshakes go to NFQUEUE).
    let mut syn = frame.clone();
    syn[14 + 20 + 13] |= 0x02;
    same(&mut dp, &syn, "SYN");
    // A fragment (more-fragments bit) and a non-first fragment.
    for flags in [0x20u8, 0x00] {
        let mut frag = frame.clone();
        frag[14 + 6] = flags;
        frag[14 + 7] = if flags == 0 { 0x10 } else { 0 };
        same(&mut dp, &frag, "fragment");
    }
    // Truncated frame: IP header only.
    same(&mut dp, &frame[..14 + 20 + 10], "truncated TCP header");
    // IPv6 with a hop-by-hop header in front of TCP.
    let (h6, s6) = endpoints(true);
    let k6 = DirKey::new(h6, s6).unwrap();
    dp.start_flow(&k6, 1).unwrap();
    dp.set_flow(&k6, clamp(1, 1448, 0, false)).unwrap();
    let mut v6 = ack_frame(h6, s6, 5, 1000, 60_000, &[]);
    v6[14 + 6] = 0; // next header: hop-by-hop
    same(&mut dp, &v6, "IPv6 extension header");
    // The clamp works while the daemon is alive: the unclamped ACKs above advertised up to
    // 1000 + 60000, which stays open; once it is acknowledged, two segments.
    let (_, out) = dp.test_run(Hook::Ingress, &frame).unwrap();
    assert_eq!(window_of(&out), 60_000, "edge kept");
    let later = ack_frame(host, server, 5, 61_000, 60_000, &[]);
    let (_, out) = dp.test_run(Hook::Ingress, &later).unwrap();
    assert_eq!(window_of(&out), 2896, "two segments");
    // ... and stops once its heartbeat is stale.
    dp.heartbeat(Duration::ZERO).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    same(&mut dp, &later, "daemon gone");
    assert!(dp.counters().no_daemon >= 1);
}

/// Each packet of a known flow is reported once with its kernel time, direction and headers as
/// they came (before the rewrite); a data segment's payload is not copied.
#[test]
#[ignore = "needs root and BPF (BPF_PROG_TEST_RUN): scripts/test.sh runs it (--include-ignored)"]
fn reports_packets_before_rewriting_them() {
    let Some(mut dp) = datapath() else { return };
    let (host, server) = endpoints(false);
    let key = DirKey::new(host, server).unwrap();
    dp.start_flow(&key, 1).unwrap();
    dp.set_flow(&key, clamp(1, 1448, 0, false)).unwrap();
    while dp.next_event(|_| {}) {}
    let before = slipstream_ebpf::monotonic_ns();
    let ack = ack_frame(host, server, 5, 1000, 60_000, &[]);
    let data = ack_frame(server, host, 1000, 5, 500, &vec![7u8; 1400]);
    dp.test_run(Hook::Ingress, &ack).unwrap();
    dp.test_run(Hook::Egress, &data).unwrap();
    let mut seen = Vec::new();
    while dp.next_event(|ev| {
        let ev = ev.expect("well-formed report");
        assert_eq!(ev.rule, 1);
        seen.push((ev.ktime_ns, ev.egress, ev.head.to_vec()));
    }) {}
    assert_eq!(seen.len(), 2);
    assert!(seen
        .iter()
        .all(|(t, _, _)| *t >= before && *t <= slipstream_ebpf::monotonic_ns()));
    assert!(!seen[0].1, "entered from the LAN");
    assert_eq!(seen[0].2, ack[14..], "a pure ACK whole, with the host's window");
    assert!(seen[1].1, "left towards the LAN");
    // IPv4 header (20 bytes here) and the TCP header (data offset, in 32-bit words).
    let headers = 20 + usize::from(data[14 + 20 + 12] >> 4) * 4;
    assert!(headers < slipstream_ebpf::HEAD_BYTES);
    assert_eq!(
        seen[1].2,
        data[14..14 + headers],
        "a data segment's headers, without its payload"
    );
    let counters = dp.counters();
    assert_eq!((counters.events, counters.rewritten), (2, 1));
}

/// An ACK passed while the daemon's heartbeat is stale still has its right edge recorded: when
/// the clamp resumes, the next ACK is not lowered left of what that ACK advertised.
#[test]
#[ignore = "needs root and BPF (BPF_PROG_TEST_RUN): scripts/test.sh runs it (--include-ignored)"]
fn a_stale_heartbeat_still_records_the_edge() {
    let Some(mut dp) = datapath() else { return };
    let (host, server) = endpoints(false);
    let key = DirKey::new(host, server).unwrap();
    dp.start_flow(&key, 1).unwrap();
    dp.set_flow(&key, clamp(1, 1448, 0, false)).unwrap();
    dp.heartbeat(Duration::ZERO).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    let (verdict, out) = dp
        .test_run(Hook::Ingress, &ack_frame(host, server, 5, 1000, 60_000, &[]))
        .unwrap();
    assert_eq!(verdict, PASS);
    assert_eq!(window_of(&out), 60_000, "passed untouched without a daemon");
    assert_eq!(dp.edge(&key), Some(61_000), "but its edge recorded");
    dp.heartbeat(Duration::from_secs(60)).unwrap();
    let (_, out) = dp
        .test_run(Hook::Ingress, &ack_frame(host, server, 5, 2000, 60_000, &[]))
        .unwrap();
    assert_eq!(
        window_of(&out),
        59_000,
        "lowered no further than the recorded edge"
    );
}

/// A LAN host's opening SYN on the ports of an earlier connection (the tc ingress hook sees it
/// before netfilter and the daemon): the earlier connection's entries go, so a new connection
/// the firewall does not class inherits no clamp. A SYN towards the LAN host leaves them (the
/// daemon writes a classed flow's entry before that SYN reaches tc egress).
#[test]
#[ignore = "needs root and BPF (BPF_PROG_TEST_RUN): scripts/test.sh runs it (--include-ignored)"]
fn a_lan_hosts_syn_forgets_an_earlier_connection() {
    let Some(mut dp) = datapath() else { return };
    let (host, server) = endpoints(false);
    let key = DirKey::new(host, server).unwrap();
    dp.start_flow(&key, 1).unwrap();
    dp.set_flow(&key, clamp(1, 1448, 0, false)).unwrap();
    let mut syn = ack_frame(host, server, 5, 0, 60_000, &[]);
    syn[14 + 20 + 13] = 0x02; // SYN alone
    let mut inbound = ack_frame(server, host, 5, 0, 60_000, &[]);
    inbound[14 + 20 + 13] = 0x02;
    let (verdict, _) = dp.test_run(Hook::Egress, &inbound).unwrap();
    assert_eq!(verdict, PASS);
    let later = ack_frame(host, server, 5, 1000, 60_000, &[]);
    let (_, out) = dp.test_run(Hook::Ingress, &later).unwrap();
    assert!(
        window_of(&out) < 60_000,
        "still clamped after a SYN towards the LAN"
    );
    let (verdict, out) = dp.test_run(Hook::Ingress, &syn).unwrap();
    assert_eq!(
        (verdict, out.as_slice()),
        (PASS, syn.as_slice()),
        "the SYN passes as it is"
    );
    let (_, out) = dp.test_run(Hook::Ingress, &later).unwrap();
    assert_eq!(window_of(&out), 60_000, "the new connection is not clamped");
    assert_eq!(dp.edge(&key), None, "nor is the old edge kept");
    assert_eq!(dp.counters().stale_forgotten, 1);
}
