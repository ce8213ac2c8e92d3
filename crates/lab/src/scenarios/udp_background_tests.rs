//! Tests of `scenarios::udp_background`.

use super::*;
use crate::result::{Series, Unit};

fn opts(scale: f64) -> ScenarioOptions {
    ScenarioOptions { duration_scale: scale, ..ScenarioOptions::default() }
}

#[test]
fn timelines() {
    let q = Plan::new(Background::Quic, &opts(1.0));
    assert_eq!((q.warmup, q.phase, q.duration()), (0.0, 30.0, 90.0));
    assert_eq!(q.period(1), (40.0, 60.0));
    let u = Plan::new(Background::Utp, &opts(0.5));
    assert_eq!((u.warmup, u.phase, u.duration()), (TORRENT_WARMUP_S, 15.0, 65.0));
    assert_eq!(u.period(0), (25.0, 35.0));
    // The file outlasts the background at the full link rate: 35 s × 1.25 MB/s.
    assert!(u.file_bytes(&opts(0.5)) > 35 * 1_250_000);
    assert_eq!((q.bg_ports(), u.bg_ports()), (vec![443], vec![51413]));
}

#[test]
fn setups_class_the_udp_flows() {
    let o = opts(0.5);
    let q = Plan::new(Background::Quic, &o).setup(Alternative::Household, &o);
    assert_eq!(
        (q.protocol, q.background_ports.clone(), q.quic_ports.clone()),
        (Some("udp"), vec![443], vec![443])
    );
    assert!(q.torrent.is_none() && q.server_ports == vec![BE_PORT]);
    let u = Plan::new(Background::Utp, &o).setup(Alternative::NoControl, &o);
    assert_eq!((u.protocol, u.background_ports.clone()), (Some("both"), vec![SEED_PORT]));
    assert_eq!(u.torrent.as_ref().map(|t| t.leechers.clone()), Some(vec![BG_HOST]));
    assert_eq!(u.clients, 2);
    // The mix: QUIC and TCP on host 1, the torrent and TCP on host 2, best effort on host 3.
    let mix = Plan::new(Background::Mix, &o);
    let m = mix.setup(Alternative::Household, &o);
    assert_eq!(m.background_ports, vec![443, 6881, 51413, 6882]);
    assert_eq!((m.server_ports.clone(), m.quic_ports.clone()), (vec![6881, 6882, BE_PORT], vec![443]));
    assert_eq!((m.clients, mix.be_host(), m.protocol), (3, 3, Some("both")));
    assert_eq!(m.torrent.map(|t| t.leechers), Some(vec![2]));
}

#[test]
fn mix_host_ratio() {
    let p = Plan::new(Background::Mix, &opts(0.1));
    let flat = |v: f64, until: f64| -> Vec<(f64, f64)> {
        (0..800).map(|i| i as f64 * 0.1).filter(|t| *t < until).map(|t| (t, v)).collect()
    };
    let end = p.start(2);
    let r = RunResult {
        params: crate::result::RunParams { rate_mbit: 10.0, ..Default::default() },
        series: [("quic", 3.0), ("tcp1", 1.0), ("utp", 2.0), ("tcp2", 1.0)]
            .iter()
            .map(|(l, v)| {
                Series::new("goodput", Unit::Mbps, l, Role::Background, "receiver").with_points(flat(*v, end))
            })
            .collect(),
        ..Default::default()
    };
    let r = with_metrics(r, &p);
    // Host 1: 4, host 2: 3.
    assert!((r.metric("host_ratio", Some("bg-alone")).unwrap() - 4.0 / 3.0).abs() < 1e-9);
    assert!((r.metric("bg_goodput", Some("bg-alone")).unwrap() - 7.0).abs() < 1e-9);
    assert!((r.metric("bg_link_share", Some("bg-alone")).unwrap() - 0.7).abs() < 1e-9);
}

#[test]
fn metrics_by_hand() {
    // 10 Mbit/s, phases of 10 s (QUIC): BG 9 alone, 2 beside BE; BE 7 beside, 9.5 alone;
    // ping 100 idle, 180 with BG alone, 130 together.
    let p = Plan::new(Background::Quic, &opts(0.1));
    assert_eq!(p.phase, 10.0);
    let pts = |f: &dyn Fn(f64) -> Option<f64>| -> Vec<(f64, f64)> {
        (0..300).filter_map(|i| f(i as f64 * 0.1).map(|v| (i as f64 * 0.1, v))).collect()
    };
    let bg = pts(&|t| (t < 20.0).then_some(if t < 10.0 { 9.0 } else { 2.0 }));
    let be = pts(&|t| (t >= 10.0).then_some(if t < 20.0 { 7.0 } else { 9.5 }));
    let ping = pts(&|t| {
        Some(if t < 10.0 {
            180.0
        } else if t < 20.0 {
            130.0
        } else {
            100.0
        })
    });
    let r = RunResult {
        params: crate::result::RunParams {
            rate_mbit: 10.0,
            measured_rtt_ms: Some(100.0),
            ..Default::default()
        },
        series: vec![
            Series::new("goodput", Unit::Mbps, "bg", Role::Background, "receiver").with_points(bg),
            Series::new("goodput", Unit::Mbps, "be", Role::BestEffort, "receiver").with_points(be),
            Series::new("rtt", Unit::Ms, "ping", Role::BestEffort, "ping").with_points(ping),
        ],
        ..Default::default()
    };
    let r = with_metrics(r, &p);
    let m = |n: &str, period: &str| r.metric(n, Some(period)).unwrap();
    assert!((m("be_kept", "together") - 7.0 / 9.5).abs() < 1e-9);
    assert!((m("bg_fill", "bg-alone") - 9.0 / 9.5).abs() < 1e-9);
    assert!((m("bg_link_share", "bg-alone") - 0.9).abs() < 1e-9);
    assert!((m("ping_added", "bg-alone") - 80.0).abs() < 1e-9);
    assert!((m("ping_added", "together") - 30.0).abs() < 1e-9);
    assert!(m("ping_added", "be-alone").abs() < 1e-9);
    assert!((m("bg_goodput", "together") - 2.0).abs() < 1e-9);
}
