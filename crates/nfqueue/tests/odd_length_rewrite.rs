//! nfq 0.2.5 was reported to drop modified packets whose length is not a multiple of 4 (fixed
//! upstream after that release). This test pushes real TCP segments with odd-length payloads
//! through an NFQUEUE in a throwaway network namespace, rewrites their window the way the daemon
//! does, and checks on the receiving side (a second queue there) that the segments arrive with
//! the rewritten window and that every byte arrives without a single retransmission.
//!
//! Needs root (CI runs as root): ignored by default, run with --ignored; without root it fails
//! saying why.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;
use common::{queue_reader, queue_tcp_port, transfer, veth_pair};

const LENGTHS: [usize; 4] = [7, 13, 1, 333];

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn rewritten_odd_length_segments_are_delivered() {
    if let Some(why) = slipstream_testbed::missing_prerequisite(&["ip", "iptables-legacy"]) {
        panic!("cannot run here: {why}");
    }
    let (_cleanup, a, b) = veth_pair("odd", "10.79.0");
    queue_tcp_port(&a, "OUTPUT", 9999, 7001);
    queue_tcp_port(&b, "INPUT", 9999, 7003);

    // Queue readers: in namespace a every segment with an odd payload length gets the window
    // REWRITTEN_WINDOW; in namespace b we record what arrives.
    const REWRITTEN_WINDOW: u16 = 4321;
    let stop = Arc::new(AtomicBool::new(false));
    let seen_odd = Arc::new(Mutex::new(Vec::<(u32, u32)>::new()));
    let arrived_odd = Arc::new(Mutex::new(Vec::<(u32, u16, bool)>::new()));
    let reader = |ns: String,
                  queue: u16,
                  rewrite: bool,
                  log: Arc<Mutex<Vec<(u32, u32)>>>,
                  arrivals: Arc<Mutex<Vec<(u32, u16, bool)>>>| {
        queue_reader(ns, queue, stop.clone(), move |dp| {
            while let Some(mut msg) = dp.try_recv().unwrap() {
                let info = slipstream_wire::parse(msg.get_payload()).expect("parse");
                if info.payload_len % 2 == 1 {
                    if rewrite {
                        log.lock().unwrap().push((info.seq, info.payload_len));
                        let bytes = msg.get_payload_mut();
                        slipstream_wire::rewrite_window(bytes, info.tcp_offset, REWRITTEN_WINDOW).unwrap();
                        assert!(slipstream_wire::tcp_checksum_valid(bytes));
                    } else {
                        let valid = slipstream_wire::tcp_checksum_valid(msg.get_payload());
                        arrivals.lock().unwrap().push((info.seq, info.window, valid));
                    }
                }
                msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
                dp.verdict(msg).unwrap();
            }
        })
    };
    let readers = [
        reader(a.clone(), 7001, true, seen_odd.clone(), arrived_odd.clone()),
        reader(b.clone(), 7003, false, seen_odd.clone(), arrived_odd.clone()),
    ];
    std::thread::sleep(Duration::from_millis(200));

    let (got, elapsed) = transfer(
        &a,
        &b,
        "10.79.0.2:9999",
        &LENGTHS,
        Duration::from_millis(50),
        b'x',
    );
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }

    let seen = seen_odd.lock().unwrap().clone();
    eprintln!(
        "odd-length segments seen in the queue: {seen:?}; delivered {} bytes in {elapsed:?}",
        got.len()
    );
    assert_eq!(got.len(), LENGTHS.iter().sum::<usize>(), "all bytes delivered");
    assert_eq!(
        seen.len(),
        4,
        "each odd segment queued exactly once: none was dropped and retransmitted"
    );
    assert!(
        elapsed < Duration::from_secs(1),
        "no retransmission timeout was needed"
    );
    let arrived = arrived_odd.lock().unwrap().clone();
    eprintln!("arrived at the receiver (seq, window, checksum valid): {arrived:?}");
    assert_eq!(arrived.len(), 4);
    assert!(
        arrived
            .iter()
            .all(|&(_, w, valid)| w == REWRITTEN_WINDOW && valid),
        "the rewrite reached the wire"
    );
}
