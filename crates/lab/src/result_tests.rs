//! Tests of `result`.

use super::*;

#[test]
fn timestamps() {
    assert_eq!(timestamp_dirname(0.0), "19700101T000000Z");
    assert_eq!(timestamp_dirname(1_700_000_000.0), "20231114T221320Z");
    assert_eq!(timestamp_dirname(951_782_400.0), "20000229T000000Z");
}

#[test]
fn units_and_roles_print_as_their_serde_names() {
    assert_eq!(
        (Unit::Mbps.to_string(), Unit::PacketsPerS.to_string()),
        ("Mbit/s".into(), "packets/s".into())
    );
    let all = [Unit::Mbps, Unit::Ms, Unit::Us, Unit::S, Unit::Bytes, Unit::Ratio];
    let all = all.into_iter().chain([Unit::Packets, Unit::PacketsPerS, Unit::Count]);
    let names: Vec<String> = all.map(|u| serde_json::to_string(&u).unwrap()).collect();
    let want = ["Mbit/s", "ms", "us", "s", "bytes", "ratio", "packets", "packets/s", "count"];
    assert_eq!(names, want.map(|n| format!("\"{n}\"")));
    // A raw result without the optional fields still reads.
    let m: Metric = serde_json::from_str(r#"{"name": "g", "unit": "ms", "value": 1.0}"#).unwrap();
    assert_eq!((m.period, m.flow, m.unit), (None, None, Unit::Ms));
    assert_eq!((Role::BestEffort.to_string(), Role::Link.to_string()), ("best effort".into(), "link".into()));
}

#[test]
fn table_aggregates_per_alternative() {
    let run = |alt: &str, v: f64| RunResult {
        scenario: "x".into(),
        alternative: alt.into(),
        metrics: vec![Metric::new("g", Unit::Mbps, v).period("bg-active")],
        ..Default::default()
    };
    let runs = [run("a", 1.0), run("a", 3.0), run("b", 5.0)];
    let refs: Vec<&RunResult> = runs.iter().collect();
    let mut t = Table::new(vec!["a".into(), "b".into(), "c".into()]);
    t.add_rows(
        &refs,
        [RowSpec::new("G", Unit::Mbps, "g").period("bg-active").paper(Paper::about(5.98, 2, "Sec. 0.4.3"))],
    );
    assert_eq!(
        Table::of(t.columns.clone(), &runs, [RowSpec::new("G", Unit::Mbps, "g").period("bg-active")]).rows[0]
            .cells,
        t.rows[0].cells
    );
    let r = &t.rows[0];
    let cell = |mean, range| Some(Cell { mean, range });
    assert_eq!(r.cells, vec![cell(2.0, Some((1.0, 3.0))), cell(5.0, None), None]);
    assert_eq!(r.paper.as_ref().map(|p| p.shown.as_str()), Some("5.98"));
    let rep = ScenarioReport { scenario: "x".into(), runs: runs.to_vec(), table: t, ..Default::default() };
    let back = serde_json::from_str::<ScenarioReport>(&serde_json::to_string(&rep).unwrap()).unwrap();
    assert_eq!(back, rep);
}

#[test]
fn the_machine_rows_only_where_measured() {
    let run = |alt: &str, stolen: Option<f64>| RunResult {
        scenario: "x".into(),
        alternative: alt.into(),
        metrics: stolen.map(|v| Metric::new("cpu_stolen", Unit::Ratio, v)).into_iter().collect(),
        ..Default::default()
    };
    let runs = [run("a", Some(0.1)), run("a", Some(0.3)), run("b", None)];
    let refs: Vec<&RunResult> = runs.iter().collect();
    let mut t = Table::new(vec!["a".into(), "b".into()]);
    t.add_machine_rows(&refs[2..], Some("N = 1"));
    assert!(t.rows.is_empty(), "no run measured it");
    t.add_machine_rows(&refs, Some("N = 1"));
    assert_eq!(t.rows[0].metric, "N = 1: machine: CPU time stolen by the hypervisor");
    let cell = Cell { mean: 0.2, range: Some((0.1, 0.3)) };
    assert_eq!(t.rows[0].cells, vec![Some(cell), None]);
    t.add_machine_rows(&refs, None);
    assert_eq!(t.rows[1].metric, "machine: CPU time stolen by the hypervisor");
    assert_eq!(t.rows.len(), 2, "no run has the delay element's rows");
    // With the delay element's lateness: its rows follow, each where measured.
    let mut late = run("b", None);
    late.metrics.push(Metric::new("path_lateness", Unit::Ms, 1.7));
    let refs = [refs[0], &late];
    t.add_machine_rows(&refs, None);
    let labels: Vec<&str> = t.rows[2..].iter().map(|r| r.metric.as_str()).collect();
    assert_eq!(
        labels,
        ["machine: CPU time stolen by the hypervisor", "machine: the delay element's lateness, mean"]
    );
    assert_eq!(t.rows[3].cells, vec![None, Some(Cell { mean: 1.7, range: None })]);
}
