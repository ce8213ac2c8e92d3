//! Held packets (`Datapath::hold` / `release`) through a real NFQUEUE in a throwaway network
//! namespace: UDP datagrams numbered 0..N pass a queue where every fourth is held for 60 ms
//! (a shaper's wait) while the others are accepted by batch verdicts. Each held datagram must
//! arrive after its successors and at least 50 ms after the one behind it (no batch verdict
//! released it early), and every datagram must arrive (none left waiting).
//!
//! Needs root (CI runs as root): ignored by default, run with --ignored; without root it fails
//! saying why.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{enter_netns, queue_reader, sh, veth_pair};

const DATAGRAMS: u8 = 40;
const HOLD: Duration = Duration::from_millis(60);

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn held_packets_outlast_batch_verdicts_and_all_arrive() {
    if let Some(why) = slipstream_testbed::missing_prerequisite(&["ip", "iptables-legacy"]) {
        panic!("cannot run here: {why}");
    }
    let (_cleanup, a, b) = veth_pair("hld", "10.79.3");
    sh(&[
        "ip",
        "netns",
        "exec",
        &a,
        "iptables-legacy",
        "-t",
        "mangle",
        "-A",
        "OUTPUT",
        "-p",
        "udp",
        "--dport",
        "9997",
        "-j",
        "NFQUEUE",
        "--queue-num",
        "7021",
    ]);

    let stop = Arc::new(AtomicBool::new(false));
    let mut held: Vec<(Instant, slipstream_nfqueue::Message)> = Vec::new();
    let reader = queue_reader(a.clone(), 7021, stop.clone(), move |dp| {
        while let Some(mut msg) = dp.try_recv().unwrap() {
            // IPv4 (20) + UDP (8): the datagram's number is its first payload byte.
            let number = msg.get_payload().get(28).copied().unwrap_or(1);
            if number % 4 == 0 {
                msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
                dp.hold(&msg);
                held.push((Instant::now() + HOLD, msg));
            } else {
                dp.accept_later(msg).unwrap();
            }
        }
        dp.flush_accepts().unwrap();
        let now = Instant::now();
        while held.first().is_some_and(|(due, _)| *due <= now) {
            let (_, msg) = held.remove(0);
            dp.release(msg).unwrap();
        }
    });

    let receiver = {
        let ns = b.clone();
        std::thread::spawn(move || {
            enter_netns(&ns);
            let socket = UdpSocket::bind("10.79.3.2:9997").unwrap();
            socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut arrivals = Vec::new();
            let mut buf = [0u8; 64];
            while arrivals.len() < usize::from(DATAGRAMS) {
                match socket.recv(&mut buf) {
                    Ok(_) => arrivals.push((buf[0], Instant::now())),
                    Err(_) => break,
                }
            }
            arrivals
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let sender = {
        let ns = a.clone();
        std::thread::spawn(move || {
            enter_netns(&ns);
            let socket = UdpSocket::bind("10.79.3.1:0").unwrap();
            for number in 0..DATAGRAMS {
                socket.send_to(&[number; 32], "10.79.3.2:9997").unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    sender.join().unwrap();
    let arrivals = receiver.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();

    assert_eq!(
        arrivals.len(),
        usize::from(DATAGRAMS),
        "every datagram arrives: {arrivals:?}"
    );
    let at = |n: u8| arrivals.iter().find(|(k, _)| *k == n).map(|(_, t)| *t).unwrap();
    let position = |n: u8| arrivals.iter().position(|(k, _)| *k == n).unwrap();
    for number in (0..DATAGRAMS - 1).filter(|n| n % 4 == 0) {
        assert!(
            position(number) > position(number + 1),
            "datagram {number} was held, yet came before {}",
            number + 1
        );
        let late = at(number).saturating_duration_since(at(number + 1));
        assert!(
            late >= Duration::from_millis(50),
            "datagram {number} came {late:?} after {}: a batch verdict let it go early",
            number + 1
        );
    }
}
