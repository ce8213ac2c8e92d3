//! Tests of `scenarios::datapath`.

use super::*;

#[test]
fn orders_alternate() {
    assert_eq!(round_order(0), vec![Mode::Kernel, Mode::NfqAccept, Mode::Slipstreamd, Mode::SlipstreamdEbpf]);
    assert_eq!(round_order(1), vec![Mode::SlipstreamdEbpf, Mode::Slipstreamd, Mode::NfqAccept, Mode::Kernel]);
}

#[test]
fn ratios_within_a_round() {
    let run = |alt: &str, pps: f64, rtt: f64| RunResult {
        alternative: alt.into(),
        metrics: vec![
            Metric::new("pps", Unit::PacketsPerS, pps).period("throughput"),
            Metric::new("probe_rtt_p50", Unit::Us, rtt).period("latency"),
        ],
        ..Default::default()
    };
    let mut r = vec![run("slipstreamd", 50.0, 0.3), run("kernel", 100.0, 0.1)];
    r[0].metrics.push(Metric::new("process_cpu_per_mpkt", Unit::S, 12.0).period("throughput"));
    let mut ebpf = run("slipstreamd-ebpf", 95.0, 0.12);
    ebpf.metrics.push(Metric::new("process_cpu_per_mpkt", Unit::S, 0.75).period("throughput"));
    r.push(ebpf);
    add_ratios(&mut r);
    assert_eq!(r[2].metric("pps_ratio", Some("throughput")), Some(0.95));
    assert_eq!(r[2].metric("process_cpu_vs_nfqueue", Some("throughput")), Some(0.0625));
    assert_eq!(r[0].metric("process_cpu_vs_nfqueue", Some("throughput")), Some(1.0));
    assert_eq!(r[0].metric("pps_ratio", Some("throughput")), Some(0.5));
    assert!((r[0].metric("probe_rtt_added_p50", Some("latency")).unwrap() - 0.2).abs() < 1e-12);
    assert_eq!(r[1].metric("pps_ratio", Some("throughput")), Some(1.0));
}
