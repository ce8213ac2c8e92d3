//! Tests of `web::probe`.

use super::*;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn quantiles() {
    let v = [5.0, 1.0, 3.0, 2.0, 4.0];
    assert_eq!(quantile(&v, 0.5), 3.0);
    assert_eq!(quantile(&v, 0.0), 1.0);
    assert_eq!(quantile(&v, 1.0), 5.0);
    assert_eq!(quantile(&v, 0.99), 5.0);
    assert!(quantile(&[], 0.5).is_nan());
}

#[test]
fn probe_over_loopback() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let h = std::thread::spawn(move || super::super::serve(listener, s2));
    let rtts = tcp_rtt_probe(addr, 64, 20, Duration::from_millis(2)).unwrap();
    assert_eq!(rtts.len(), 20);
    assert!(rtts.iter().all(|&r| r > 0.0 && r < 1.0));
    assert!(tcp_rtt_probe(addr, 5000, 1, Duration::ZERO).is_err());
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap().unwrap();
}
