//! End-to-end check of the testbed itself: build, RTT, bottleneck rate, teardown.
//!
//! Needs root and `ip netns`; otherwise each test prints why and returns early.

use std::time::Instant;

use slipstream_testbed::{list_netns, netns_supported, unique_prefix, Ns, Testbed, TopologySpec};

fn spec(base: &str) -> TopologySpec {
    TopologySpec {
        delay_bin: Some(env!("CARGO_BIN_EXE_slipstream-delay").into()),
        ..TopologySpec::with_prefix(unique_prefix(base))
    }
}

fn leftovers(prefix: &str) -> Vec<String> {
    list_netns()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

fn skip() -> bool {
    match netns_supported() {
        Ok(()) => false,
        Err(why) => {
            eprintln!("skipping: {why}");
            true
        }
    }
}

#[test]
fn rtt_rate_and_teardown() {
    if skip() {
        return;
    }
    let spec = spec("sstopo");
    let prefix = spec.name_prefix.clone();
    let t0 = Instant::now();
    let tb = Testbed::build(spec).expect("build testbed");
    eprintln!("built {prefix} in {:?}", t0.elapsed());
    assert_eq!(leftovers(&prefix).len(), 4);

    let rtt = tb.ping_stats(10, 0.2).expect("ping");
    eprintln!("ping RTT: {rtt:?}");
    assert!(
        (rtt.avg - 100.0).abs() <= 2.0,
        "RTT {} ms not within 2 ms of 100 ms",
        rtt.avg
    );

    tb.start_iperf_server(5201).expect("iperf3 server");
    let run = tb.run_download(5201, 8, "cubic", &[]).expect("start download");
    let res = run.wait().expect("download result");
    let last4 = res.goodput_mbps_last(4.0).expect("last-4s window");
    eprintln!(
        "download: whole-run {:.3} Mbit/s, last 4 s {:.3} Mbit/s, local port {:?}, retransmits {:?}",
        res.goodput_mbps, last4, res.local_port, res.retransmits
    );
    assert!(
        (8.0..=10.0).contains(&last4),
        "goodput over last 4 s {last4} Mbit/s"
    );
    assert!(res.local_port.is_some());
    assert!(tb.delay_element_alive());

    drop(tb);
    assert!(
        leftovers(&prefix).is_empty(),
        "namespaces left: {:?}",
        leftovers(&prefix)
    );
    eprintln!("total {:?}", t0.elapsed());
}

#[test]
fn failed_build_cleans_up() {
    if skip() {
        return;
    }
    let mut spec = spec("ssfail");
    spec.delay_bin = Some("/bin/false".into()); // exits at once: never reports ready
    let prefix = spec.name_prefix.clone();
    let err = Testbed::build(spec).err().expect("build must fail");
    eprintln!("expected failure: {err:#}");
    assert!(
        leftovers(&prefix).is_empty(),
        "namespaces left: {:?}",
        leftovers(&prefix)
    );
}

#[test]
fn panic_tears_down() {
    if skip() {
        return;
    }
    let spec = spec("sspanic");
    let prefix = spec.name_prefix.clone();
    let r = std::panic::catch_unwind(|| {
        let tb = Testbed::build(spec).expect("build testbed");
        tb.run_in(Ns::Client, &["true"]).unwrap();
        panic!("deliberate");
    });
    assert!(r.is_err());
    assert!(
        leftovers(&prefix).is_empty(),
        "namespaces left: {:?}",
        leftovers(&prefix)
    );
}
