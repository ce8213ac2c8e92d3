//! Batched verdicts (`Datapath::accept_later` / `flush_accepts`, NFQNL_MSG_VERDICT_BATCH) with
//! real TCP through an NFQUEUE in a throwaway network namespace: on the sending side every
//! unmodified packet (handshake, ACKs, even-length segments, FIN) is accepted by batch, while
//! odd-length segments get their window rewritten and their own verdict at once, in between. A
//! second queue on the receiving side checks that the rewritten segments reached the wire as
//! rewritten (the batch did not accept their originals), and the stream must arrive whole
//! without a retransmission (no packet was left waiting for a verdict).
//!
//! Needs root (CI runs as root): ignored by default, run with --ignored; without root it fails
//! saying why.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;
use common::{queue_reader, queue_tcp_port, transfer, veth_pair};

const REWRITTEN_WINDOW: u16 = 3210;
const LENGTHS: [usize; 8] = [8, 7, 64, 13, 2, 1, 1000, 333];

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn batched_accepts_and_single_rewrites_are_all_delivered() {
    if let Some(why) = slipstream_testbed::missing_prerequisite(&["ip", "iptables-legacy"]) {
        panic!("cannot run here: {why}");
    }
    let (_cleanup, a, b) = veth_pair("bat", "10.79.1");
    queue_tcp_port(&a, "OUTPUT", 9998, 7011);
    queue_tcp_port(&b, "INPUT", 9998, 7013);

    let stop = Arc::new(AtomicBool::new(false));
    let batched = Arc::new(AtomicUsize::new(0));
    let flushes = Arc::new(AtomicUsize::new(0));
    let arrived_odd = Arc::new(Mutex::new(Vec::<(u16, bool)>::new()));
    let sender_side = {
        let (batched, flushes) = (batched.clone(), flushes.clone());
        queue_reader(a.clone(), 7011, stop.clone(), move |dp| {
            while let Some(mut msg) = dp.try_recv().unwrap() {
                let info = slipstream_wire::parse(msg.get_payload()).expect("parse");
                if info.payload_len % 2 == 1 {
                    let bytes = msg.get_payload_mut();
                    slipstream_wire::rewrite_window(bytes, info.tcp_offset, REWRITTEN_WINDOW).unwrap();
                    msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
                    dp.verdict(msg).unwrap();
                } else {
                    dp.accept_later(msg).unwrap();
                    batched.fetch_add(1, Ordering::Relaxed);
                }
            }
            flushes.fetch_add(dp.flush_accepts().unwrap(), Ordering::Relaxed);
        })
    };
    let receiver_side = {
        let arrived = arrived_odd.clone();
        queue_reader(b.clone(), 7013, stop.clone(), move |dp| {
            while let Some(mut msg) = dp.try_recv().unwrap() {
                let info = slipstream_wire::parse(msg.get_payload()).expect("parse");
                if info.payload_len % 2 == 1 {
                    let valid = slipstream_wire::tcp_checksum_valid(msg.get_payload());
                    arrived.lock().unwrap().push((info.window, valid));
                }
                msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
                dp.verdict(msg).unwrap();
            }
        })
    };
    std::thread::sleep(Duration::from_millis(200));

    let (got, elapsed) = transfer(
        &a,
        &b,
        "10.79.1.2:9998",
        &LENGTHS,
        Duration::from_millis(30),
        b'y',
    );
    stop.store(true, Ordering::Relaxed);
    sender_side.join().unwrap();
    receiver_side.join().unwrap();

    let (batched, flushes) = (batched.load(Ordering::Relaxed), flushes.load(Ordering::Relaxed));
    let arrived = arrived_odd.lock().unwrap().clone();
    eprintln!(
        "delivered {} bytes in {elapsed:?}; {batched} packets accepted in {flushes} batch verdicts; odd segments at the receiver (window, checksum valid): {arrived:?}",
        got.len()
    );
    assert_eq!(got.len(), LENGTHS.iter().sum::<usize>(), "all bytes delivered");
    assert!(got.iter().all(|&c| c == b'y'), "bytes intact");
    assert!(
        batched >= 6 && flushes >= 1,
        "the handshake and even segments went by batch"
    );
    assert!(
        elapsed < Duration::from_secs(1),
        "no retransmission timeout was needed"
    );
    assert_eq!(arrived.len(), 4, "each odd segment arrived once");
    assert!(
        arrived.iter().all(|&(w, valid)| w == REWRITTEN_WINDOW && valid),
        "the single verdicts' rewrites reached the wire, not the batch's originals"
    );
}
