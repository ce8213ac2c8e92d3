//! Tests of `scenarios::home`.

use super::*;

#[test]
fn streams_and_hosts() {
    assert!((CALL.wire_mbit() - 2.5).abs() < 1e-9);
    // A game's packets are small and 30-60 Hz.
    for p in PROBES.iter().filter(|p| p.name.starts_with("game")) {
        assert!(
            p.stream.payload + owd::OVERHEAD <= 250 && (30.0..=60.0).contains(&(1.0 / p.stream.interval_s))
        );
    }
    // The P2P transfers share the P2P port, on two servers.
    let p2p: Vec<(u8, u16)> =
        BACKGROUND.iter().filter(|b| b.0.starts_with("p2p")).map(|b| (b.2, b.3)).collect();
    assert_eq!(p2p, [(1, P2P_PORT), (2, P2P_PORT)]);
}

#[test]
fn against_the_run_without_background_of_the_same_repeat() {
    let run = |alt: &str, repeat: u32, p95: f64| RunResult {
        alternative: alt.into(),
        params: crate::result::RunParams { repeat, ..Default::default() },
        metrics: vec![
            Metric::new("web_rt_p95", Unit::Ms, p95),
            Metric::new("call_up_owd_p95", Unit::Ms, p95 / 10.0),
            Metric::new("call_up_added_p95", Unit::Ms, p95 / 100.0),
        ],
        ..Default::default()
    };
    let mut runs = vec![run(WITHOUT_BG, 0, 400.0), run("household", 0, 420.0), run("household", 1, 500.0)];
    against_alone(&mut runs);
    assert_eq!(runs[0].metric("web_rt_p95_vs_alone", None), None, "the reference has none");
    assert!((runs[1].metric("web_rt_p95_vs_alone", None).unwrap() - 1.05).abs() < 1e-9);
    assert!((runs[1].metric("call_up_owd_p95_vs_alone", None).unwrap() - 1.05).abs() < 1e-9);
    assert!((runs[1].metric("call_up_bg_added_p95", None).unwrap() - 0.2).abs() < 1e-9);
    assert_eq!(runs[1].metric("web_goodput_vs_alone", None), None, "no goodput measured");
    assert_eq!(runs[2].metric("web_rt_p95_vs_alone", None), None, "no reference in repeat 1");
}

#[test]
fn added_delay_is_each_bins_largest() {
    let arrival = |seq, sent_s: f64, recv_s: f64| owd::Arrival { seq, sent_s, recv_s };
    // Idle median 5 ms: arrivals 7 ms and 9 ms late in (10.0, 10.1], 5 ms in (10.1, 10.2].
    let got = [arrival(0, 10.000, 10.007), arrival(1, 10.050, 10.059), arrival(2, 10.120, 10.125)];
    let s = added_delay_series("call_down", &got, 5.0);
    assert_eq!((s.name.as_str(), s.flow.as_str()), ("owd_added", "call_down"));
    let points: Vec<(f64, f64)> =
        s.points.iter().map(|&(t, v)| ((t * 10.0).round() / 10.0, (v * 10.0).round() / 10.0)).collect();
    assert_eq!(points, [(10.1, 4.0), (10.2, 0.0)]);
}

#[test]
fn one_directions_background() {
    let labels = |d: Directions| d.transfers().map(|t| t.0).collect::<Vec<_>>();
    assert_eq!(labels(Directions::Both).len(), BACKGROUND.len());
    assert_eq!(labels(Directions::Down), ["download", "p2p_down"]);
    assert_eq!(labels(Directions::Up), ["backup", "p2p_up"]);
    assert_eq!("up".parse(), Ok(Directions::Up));
    assert!("sideways".parse::<Directions>().is_err());
}
