//! Tests of `scenarios::web`.

use super::*;

fn rec(size: u64, rt: f64) -> ObjectRecord {
    ObjectRecord { size, start_s: 0.0, response_s: Some(rt) }
}

#[test]
fn labels_and_metrics() {
    let labels: Vec<String> = (0..EDGES.len()).map(bucket_label).collect();
    assert_eq!(labels, vec!["<4k", "4-8k", "8-16k", "16-32k", "32-64k", "64-128k", "128-256k", "256k+"]);
    let failed = ObjectRecord { response_s: None, ..rec(9000, 9.0) };
    let with = [rec(3000, 0.3), rec(5000, 0.4), rec(6000, 0.4), rec(4096, 0.1), rec(300_000, 1.0), failed];
    let m = web_metrics(&with);
    let get = |n: &str| m.iter().find(|x| x.name == n).map(|x| x.value);
    assert!((get("web_rt_mean_<4k").unwrap() - 300.0).abs() < 1e-9);
    assert!((get("web_rt_mean_4-8k").unwrap() - 300.0).abs() < 1e-9);
    assert!((get("web_rt_mean_256k+").unwrap() - 1000.0).abs() < 1e-9);
    assert!(get("web_rt_mean_8-16k").unwrap().is_nan());
    assert_eq!(get("web_count_4-8k"), Some(3.0));
    assert_eq!(get("web_count_8-16k"), Some(0.0));
    assert_eq!((get("web_objects"), get("web_failed")), (Some(5.0), Some(1.0)));
    assert!((get("web_rt_mean").unwrap() - 440.0).abs() < 1e-9);
    // Nearest rank over 100, 300, 400, 400, 1000 ms: the 3rd and the 5th.
    assert_eq!((get("web_rt_p50"), get("web_rt_p95")), (Some(400.0), Some(1000.0)));
    assert_eq!(sessions_default(10.0), 4);
    assert_eq!(sessions_default(1.5), 1);
}

#[test]
fn normalised_by_the_reference_run_of_the_same_repeat() {
    let run = |alt: &str, repeat: u32, mean: f64| RunResult {
        alternative: alt.into(),
        params: crate::result::RunParams { repeat, ..Default::default() },
        metrics: vec![
            Metric::new("web_rt_mean", Unit::Ms, mean),
            Metric::new("web_rt_mean_<4k", Unit::Ms, mean / 2.0),
            Metric::new("web_rt_p95", Unit::Ms, mean * 3.0),
            Metric::new("web_rt_goodput_x", Unit::Ms, mean),
        ],
        ..Default::default()
    };
    let mut runs = vec![
        run(WEB_ONLY, 0, 200.0),
        run("no-control", 0, 400.0),
        run("slipstream", 0, 220.0),
        run("no-control", 1, 500.0),
        run("slipstream", 1, 250.0),
    ];
    normalise(&mut runs, "no-control", "web_rt_vs_tcp");
    normalise(&mut runs, WEB_ONLY, "web_rt_norm");
    assert_eq!(runs[0].metric("web_rt_vs_tcp", None), None, "web-only has none");
    assert_eq!(runs[0].metric("web_rt_norm", None), None, "web-only has none");
    assert_eq!(runs[1].metric("web_rt_vs_tcp", None), Some(1.0));
    assert!((runs[2].metric("web_rt_vs_tcp", None).unwrap() - 0.55).abs() < 1e-9);
    assert!((runs[2].metric("web_rt_vs_tcp_<4k", None).unwrap() - 0.55).abs() < 1e-9);
    assert!((runs[2].metric("web_rt_norm", None).unwrap() - 1.1).abs() < 1e-9);
    assert!((runs[2].metric("web_rt_norm_<4k", None).unwrap() - 1.1).abs() < 1e-9);
    assert!((runs[2].metric("web_rt_norm_p95", None).unwrap() - 1.1).abs() < 1e-9);
    assert!((runs[2].metric("web_rt_vs_tcp_p95", None).unwrap() - 0.55).abs() < 1e-9);
    assert_eq!(runs[2].metric("web_rt_norm_goodput_x", None), None, "only means and quantiles");
    assert!((runs[4].metric("web_rt_vs_tcp", None).unwrap() - 0.5).abs() < 1e-9);
    assert_eq!(runs[4].metric("web_rt_norm", None), None, "no web-only run in repeat 1");
}

/// Completed objects' bytes spread over their fetch, clipped to the window; failed ones count
/// nothing.
#[test]
fn goodput_of_the_objects_inside_the_window() {
    let at = |size, start_s, rt| ObjectRecord { size, start_s, response_s: rt };
    let records = [
        at(1_000_000, 0.0, Some(1.0)), // [10, 11): all inside
        at(500_000, 1.5, Some(1.0)),   // [11.5, 12.5): half inside [10, 12)
        at(700_000, 0.5, None),        // failed
        at(250_000, 3.0, Some(0.5)),   // [13, 13.5): outside
    ];
    // 1 000 000 + 250 000 bytes over 2 s = 5 Mbit/s.
    assert!((web_goodput_mbit(&records, 10.0, 10.0, 12.0) - 5.0).abs() < 1e-9);
    assert_eq!(web_goodput_mbit(&[], 0.0, 0.0, 1.0), 0.0);
}

#[test]
fn the_table_shows_the_cpu_stolen_while_each_ran() {
    // 2026-12-01: the background's share at 25 Mbit/s / 40 ms followed the CPU time stolen
    // (0.29-0.32 at 1-5%, 0.03-0.05 at 31-38%): the row must be there to read.
    let run = |alt: &str, stolen: f64| RunResult {
        scenario: "web".into(),
        alternative: alt.into(),
        metrics: vec![Metric::new("cpu_stolen", Unit::Ratio, stolen)],
        ..Default::default()
    };
    let runs = [run("web-only", 0.02), run("household", 0.3)];
    let t = table(vec!["web-only".into(), "household".into()], &runs);
    let row = t.rows.iter().find(|r| r.metric.starts_with("machine: CPU time stolen")).expect("the row");
    assert_eq!(row.cells[1].map(|c| c.mean), Some(0.3));
}
