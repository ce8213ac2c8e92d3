use super::*;

#[test]
fn counter_splits_into_intervals_and_keeps_every_byte() {
    let mut c = IntervalCounter::new(0.1);
    c.add(0.05, 1000);
    c.add(0.15, 2000);
    c.add(0.19, 500);
    c.add(0.31, 700); // after the end: counted in the last interval
    let ivs = c.intervals(0.25);
    assert_eq!(ivs.len(), 3);
    assert_eq!(
        ivs.iter().map(|iv| iv.bytes).collect::<Vec<_>>(),
        vec![1000, 2500, 700]
    );
    assert!((ivs[2].end - 0.25).abs() < 1e-9);
    assert!((ivs[1].bits_per_second - 2500.0 * 8.0 / 0.1).abs() < 1e-6);
    assert_eq!(c.total(), 4200);
}

#[test]
fn json_round_trip_and_iperf_view() {
    let mut c = IntervalCounter::new(0.1);
    for i in 0..10 {
        c.add(f64::from(i) * 0.1 + 0.01, 125_000);
    }
    let path = PathStats {
        rtt_ms: 110.0,
        min_rtt_ms: 100.5,
        cwnd: 200_000,
        congestion_events: 3,
        lost_packets: 12,
        lost_bytes: 17_000,
        sent_packets: 1200,
        current_mtu: 1452,
    };
    let doc = QuicResult::to_json("download", "cubic", 1.0, &c.intervals(1.0), &path);
    let r = QuicResult::parse(&doc.to_string()).unwrap();
    assert_eq!(r.bytes, 1_250_000);
    assert!((r.goodput_bps() - 10e6).abs() < 1.0);
    assert_eq!(r.path, path);
    assert_eq!(r.path.loss_rate(), Some(0.01));
    let ip = r.into_iperf();
    assert!((ip.goodput_mbps - 10.0).abs() < 1e-6);
    assert_eq!(ip.retransmits, Some(12));
    assert!((ip.goodput_mbps_between(0.2, 0.8).unwrap() - 10.0).abs() < 1e-6);
}

#[test]
fn errors_and_arguments() {
    assert!(QuicResult::parse(r#"{"error": "connecting: timed out"}"#)
        .unwrap_err()
        .to_string()
        .contains("timed out"));
    assert!(QuicResult::parse("not json").is_err());
    assert_eq!(
        client_args("10.77.1.2", 443, 8, true, None).join(" "),
        "client --connect 10.77.1.2:443 --seconds 8 --download --json"
    );
    assert!(client_args("10.77.1.2", 443, 8, false, Some("bbr"))
        .join(" ")
        .ends_with("--upload --json --cc bbr"));
}
