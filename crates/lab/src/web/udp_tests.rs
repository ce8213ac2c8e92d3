//! Tests of `web::udp`.

use super::*;

#[test]
fn schedule() {
    let w = SquareWave { rate_bps: 6.7e6, period_s: 1.0 };
    assert_eq!(FRAME_BYTES, 1514);
    assert!((w.interval_s() - 1514.0 * 8.0 / 6.7e6).abs() < 1e-12);
    assert!(w.is_on(0.0) && w.is_on(0.99) && !w.is_on(1.0) && !w.is_on(1.5) && w.is_on(2.0));
    let times: Vec<f64> = w.send_times(4.0).collect();
    // Two on periods of ceil(1 / 1.808 ms) = 554 datagrams each.
    assert_eq!(times.len(), 2 * 554);
    assert!(times.iter().all(|&t| w.is_on(t)));
    assert!(times.windows(2).all(|p| p[1] > p[0]));
    // The average wire rate while on is the configured rate (within one datagram).
    let on_bits = 554.0 * FRAME_BYTES as f64 * 8.0;
    assert!((on_bits - 6.7e6).abs() <= FRAME_BYTES as f64 * 8.0);
    // A duration that ends inside an on period cuts it.
    assert_eq!(w.send_times(0.5).count(), 277);
}

#[test]
fn wave_over_loopback() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dst = sink.local_addr().unwrap();
    // 2 on periods of 0.2 s at 2 Mbit/s of 1514-byte frames: ceil(0.2 / 6.056 ms) = 34 each.
    let w = SquareWave { rate_bps: 2e6, period_s: 0.2 };
    let h =
        std::thread::spawn(move || run_sink(&sink, Duration::from_millis(900), Duration::from_millis(100)));
    let sent = send_square_wave(dst, &w, Duration::from_millis(800)).unwrap();
    let bins = h.join().unwrap().unwrap();
    assert_eq!(sent, 2 * 34);
    assert_eq!(bins.len(), 9);
    assert_eq!(bins.iter().sum::<u64>(), sent);
    // Off periods (0.2-0.4 s, 0.6-0.8 s) stay nearly silent (one bin may catch a late one).
    assert!(bins[3] + bins[7] <= 2, "{bins:?}");
}
