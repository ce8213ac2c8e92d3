//! Tests of `web::udp`.

use super::*;

fn wave(period_s: f64) -> SquareWave {
    SquareWave { rate_bps: 6.7e6, period_s, payload: MAX_PAYLOAD }
}

#[test]
fn schedule() {
    let w = wave(1.0);
    assert!((w.interval_s() - 1514.0 * 8.0 / 6.7e6).abs() < 1e-12);
    assert!(w.is_on(0.0) && w.is_on(0.99) && !w.is_on(1.0) && !w.is_on(1.5) && w.is_on(2.0));
    let times: Vec<f64> = w.send_times(4.0).collect();
    // Two on periods of ceil(1 / 1.808 ms) = 554 datagrams each.
    assert_eq!(times.len(), 2 * 554);
    assert!(times.iter().all(|&t| w.is_on(t)));
    assert!(times.windows(2).all(|p| p[1] > p[0]));
    // The average wire rate while on is the configured rate (within one datagram).
    let on_bits = 554.0 * w.frame_bytes() as f64 * 8.0;
    assert!((on_bits - 6.7e6).abs() <= w.frame_bytes() as f64 * 8.0);
    // A duration that ends inside an on period cuts it.
    assert_eq!(w.send_times(0.5).count(), 277);
    assert!(wave(1.0).validate().is_ok());
    assert!(SquareWave { payload: 2000, ..w }.validate().is_err());
    assert!(SquareWave { period_s: 0.0, ..w }.validate().is_err());
}

#[test]
fn rate_series() {
    let bins = [SinkBin { t: 0.0, bytes: 1472 * 10, packets: 10 }, SinkBin { t: 0.1, bytes: 0, packets: 0 }];
    let s = wire_rate_series(&bins, 0.1, 1472);
    assert!((s[0].1 - 1514.0 * 10.0 * 8.0 / 0.1 / 1e6).abs() < 1e-9);
    assert_eq!(s[1], (0.1, 0.0));
}

#[test]
fn wave_over_loopback() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dst = sink.local_addr().unwrap();
    let w = SquareWave { rate_bps: 2e6, period_s: 0.2, payload: 1000 };
    let h =
        std::thread::spawn(move || run_sink(&sink, Duration::from_millis(900), Duration::from_millis(100)));
    let sent = send_square_wave(dst, &w, Duration::from_millis(800)).unwrap();
    let bins = h.join().unwrap().unwrap();
    let got: u64 = bins.iter().map(|b| b.packets).sum();
    // 2 on periods of 0.2 s at 2 Mbit/s of 1042-byte frames: 48 each.
    assert_eq!(sent, 2 * 48);
    assert_eq!(got, sent);
    // Off periods (0.2-0.4 s, 0.6-0.8 s) stay nearly silent (one bin may catch a late one).
    let off: u64 = bins
        .iter()
        .filter(|b| (0.25..0.35).contains(&b.t) || (0.65..0.75).contains(&b.t))
        .map(|b| b.packets)
        .sum();
    assert!(off <= 2, "{bins:?}");
}
