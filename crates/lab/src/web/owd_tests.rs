//! Tests of the one-way delay probe: statistics computed by hand, and a loopback round.

use super::*;

fn arrival(seq: u64, sent_s: f64, recv_s: f64) -> Arrival {
    Arrival { seq, sent_s, recv_s }
}

#[test]
fn wire_rates() {
    // A video call: 5 datagrams of 1250 wire bytes every 20 ms = 2.5 Mbit/s.
    let call = Stream { interval_s: 0.02, burst: 5, payload: 1250 - OVERHEAD };
    assert!((call.wire_mbit() - 2.5).abs() < 1e-9);
    let game = Stream { interval_s: 1.0 / 50.0, burst: 1, payload: 100 - OVERHEAD };
    assert!((game.wire_mbit() - 0.04).abs() < 1e-9);
}

/// Sent 0..=5 at 0.0, 0.1, ..., 0.5 s; 2 is lost, 4 overtakes 3, 1 comes twice, 5 lies outside
/// the window, and a datagram that was never sent (seq 9) is ignored.
#[test]
fn loss_reordering_and_delays() {
    let sent = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5];
    let arrivals = [
        arrival(0, 0.0, 0.050),
        arrival(1, 0.1, 0.160),
        arrival(1, 0.1, 0.170),
        arrival(4, 0.4, 0.452),
        arrival(3, 0.3, 0.455),
        arrival(5, 0.5, 0.550),
        arrival(9, 0.9, 0.950),
    ];
    let s = stats(&sent, &arrivals, 0.0, 0.45);
    assert_eq!((s.sent, s.received, s.reordered), (5, 4, 1));
    assert!((s.loss() - 0.2).abs() < 1e-12);
    let want = [50.0, 60.0, 52.0, 155.0];
    assert_eq!(s.delays_ms.len(), want.len());
    for (got, want) in s.delays_ms.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "{:?}", s.delays_ms);
    }
    // A later window: only 5, on time.
    let s = stats(&sent, &arrivals, 0.45, 1.0);
    assert_eq!((s.sent, s.received, s.reordered, s.loss()), (1, 1, 0, 0.0));
    // Nothing sent, nothing lost.
    assert_eq!(stats(&sent, &arrivals, 2.0, 3.0).loss(), 0.0);
    assert_eq!(stats(&[], &[], 0.0, 1.0), Stats::default());
}

/// Sender and receiver on loopback: every datagram arrives, in order, within milliseconds.
#[test]
fn loopback_round() {
    let sock = UdpSocket::bind(("127.0.0.1", 0)).unwrap();
    let dst = sock.local_addr().unwrap();
    let epoch = Instant::now();
    let rx = std::thread::spawn(move || receive(&sock, epoch, 0.4).unwrap());
    let stream = Stream { interval_s: 0.01, burst: 2, payload: 200 };
    let sent = send(dst, stream, epoch, 0.2).unwrap();
    let got = rx.join().unwrap();
    assert!((38..=42).contains(&sent.len()), "{} sent", sent.len());
    let s = stats(&sent, &got, 0.0, 1.0);
    assert_eq!((s.received, s.reordered), (sent.len(), 0));
    assert!(s.delays_ms.iter().all(|d| (0.0..50.0).contains(d)), "{:?}", s.delays_ms);
}
