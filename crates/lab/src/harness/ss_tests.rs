//! Tests of `harness::ss`.

use super::*;

// Captured from `ip netns exec <srv> ss -tinH` during a download (kernel 6.x, iproute2 6.1).
const SS_SAMPLE: &str = "ESTAB 0      0      10.77.1.2:6881 10.77.3.2:39214\n\
\t cubic wscale:7,7 rto:304 rtt:101.012/0.35 ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:10 bytes_sent:37 bytes_acked:38 bytes_received:145 segs_out:8 segs_in:10 data_segs_out:4 data_segs_in:4 send 1.15Mbps lastsnd:2100 lastrcv:2100 lastack:1996 pacing_rate 2.29Mbps delivery_rate 5.7Kbps delivered:5 app_limited busy:404ms rcv_space:14480 rcv_ssthresh:64088 minrtt:100.3 snd_wnd:64256\n\
ESTAB 0      180968 10.77.1.2:6881 10.77.3.2:39224\n\
\t cubic wscale:7,7 rto:356 rtt:155.442/8.112 ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:118 ssthresh:86 bytes_sent:2379064 bytes_retrans:4344 bytes_acked:2196008 bytes_received:37 segs_out:1645 segs_in:784 data_segs_out:1644 data_segs_in:1 send 8.79Mbps lastsnd:4 lastrcv:2096 lastack:4 pacing_rate 10.5Mbps delivery_rate 9.45Mbps delivered:1518 busy:2092ms unacked:124 retrans:0/3 rcv_space:14480 rcv_ssthresh:64088 notsent:1448 minrtt:100.2 snd_wnd:250240\n";

#[test]
fn ss_sockets() {
    let s = parse_ss(SS_SAMPLE);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].local_port, 6881);
    assert_eq!(s[0].peer_port, 39214);
    assert_eq!(s[0].cwnd, Some(10));
    assert_eq!(s[0].bytes(), 145);
    let d = &s[1];
    assert_eq!(d.cwnd, Some(118));
    assert_eq!(d.mss, Some(1448));
    assert_eq!(d.cwnd_bytes(), Some(118 * 1448));
    assert_eq!(d.rtt_ms, Some(155.442));
    assert_eq!(d.bytes_acked, Some(2_196_008));
    assert_eq!(d.unacked, Some(124));
    assert_eq!(s[0].unacked, None);
    // Without the State column (`state established` filter) and with IPv6 endpoints.
    let v6 = "0 0 [fd77:1::2]:5201 [fd77:3::2]:40000\n\t reno cwnd:7 mss:1428 rtt:100.5/1 bytes_acked:10\n";
    let s = parse_ss(v6);
    assert_eq!((s[0].local_port, s[0].peer_port, s[0].cwnd), (5201, 40000, Some(7)));
    assert!(parse_ss("").is_empty());
}

#[test]
fn data_start_is_between_the_samples_around_the_first_data() {
    let sock = |peer: u16, sent: u64| SsSocket {
        local_port: 6881,
        peer_port: peer,
        bytes_sent: Some(sent),
        ..Default::default()
    };
    let ss = vec![
        (0.9, vec![sock(40000, 5_000_000)]), // an earlier connection, before `after`
        (1.1, vec![]),
        (1.2, vec![sock(40002, 0)]),  // connected, no data yet
        (1.3, vec![sock(40002, 37)]), // the cookie is not data
        (1.4, vec![sock(40002, 30_000), sock(40000, 9)]),
    ];
    let t = data_start(&ss, 6881, 40002, 1.0, |s| s.bytes_sent).unwrap();
    assert!((t - 1.35).abs() < 1e-9, "{t}");
    assert_eq!(data_start(&ss, 6881, 40003, 1.0, |s| s.bytes_sent), None);
    assert_eq!(data_start(&ss, 6881, 40002, 1.0, |s| s.bytes_received), None);
}
