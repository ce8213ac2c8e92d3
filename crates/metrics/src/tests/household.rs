//! Household control's per-link and per-flow series.

use super::*;

const SHARED_FLOW: &str = r#"rule="shared",sender="198.51.100.7:6881",receiver="10.0.0.3:41000""#;
const WAITING_FLOW: &str = r#"rule="shared",sender="198.51.100.8:6881",receiver="10.0.0.4:42000""#;

/// A download link in the middle of things and an upload link that has not run a round yet.
fn links() -> Vec<LinkSnapshot> {
    vec![
        LinkSnapshot {
            direction: LinkDirection::Download,
            controller: "delay_target",
            phase: BudgetPhase::Hold,
            // Beside a call under browsing: yields above 3 ms, steps towards 1 ms.
            targets: Some(RoundTargets {
                threshold: Duration::from_millis(3),
                aim: Duration::from_millis(1),
                pace: BestEffortPace::Steady,
            }),
            budget_bytes: 150_000,
            queue_delay: Some(Duration::from_micros(4_500)),
            base_rtt: Some(Duration::from_millis(20)),
            flows: 3,
            held_flows: 1,
            in_flight_bytes: 120_000,
            goodput_bits_per_second: 8_000_000.0,
            slowdowns: 2,
            best_effort_bits_per_second: None,
            window_updates: 5,
        },
        LinkSnapshot {
            budget_bytes: 14_480,
            ..LinkSnapshot::idle(LinkDirection::Upload, "delay_target")
        },
    ]
}

/// The usual snapshot plus a household rule (rule 3) with a flow that has its share and one that
/// waits for its turn, and both links.
fn household_snapshot() -> EngineSnapshot {
    let mut s = snapshot();
    s.rules
        .push(rule("shared", HOUSEHOLD_CONTROLLER, 2, 2, 10_000, 90));
    let household = FlowSnapshot {
        rule: 3,
        sender: addr("198.51.100.7:6881"),
        receiver: addr("10.0.0.3:41000"),
        controller: Some(ControllerStats {
            target_window: Some(100_000),
            ..ControllerStats::new(ControllerMode::Household, WindowPolicy::Share)
        }),
        allocation: Some(100_000),
        held: false,
        link: Some(LinkDirection::Download),
        udp: None,
        ..bulk_flow()
    };
    let waiting = FlowSnapshot {
        sender: addr("198.51.100.8:6881"),
        receiver: addr("10.0.0.4:42000"),
        controller: Some(ControllerStats {
            target_window: Some(0),
            ..ControllerStats::new(ControllerMode::Household, WindowPolicy::Hold)
        }),
        allocation: Some(0),
        held: true,
        ..household.clone()
    };
    // A household flow before its first allocation: no allocation series, but held 0.
    let fresh = FlowSnapshot {
        receiver: addr("10.0.0.5:43000"),
        allocation: None,
        link: None,
        udp: None,
        ..household.clone()
    };
    s.flows.extend([household, waiting, fresh]);
    s.links = links();
    s.steady_flows = 2;
    s
}

#[test]
fn renders_household_link_metrics() {
    let text = render_snapshot(household_snapshot());
    let expected: Vec<String> = [
        r#"slipstream_household_budget_bytes{link="download",controller="delay_target"} 150000"#,
        r#"slipstream_household_budget_bytes{link="upload",controller="delay_target"} 14480"#,
        r#"slipstream_household_phase{link="download",controller="delay_target",phase="hold"} 1"#,
        r#"slipstream_household_phase{link="upload",controller="delay_target",phase="idle"} 1"#,
        r#"slipstream_household_queue_delay_seconds{link="download"} 0.0045"#,
        r#"slipstream_household_queue_target_seconds{link="download"} 0.003"#,
        r#"slipstream_household_queue_aim_seconds{link="download"} 0.001"#,
        r#"slipstream_household_best_effort_pace{link="download",pace="steady"} 1"#,
        "slipstream_household_steady_flows 2",
        r#"slipstream_household_base_rtt_seconds{link="download"} 0.02"#,
        r#"slipstream_household_flows{link="download"} 3"#,
        r#"slipstream_household_flows{link="upload"} 0"#,
        r#"slipstream_household_held_flows{link="download"} 1"#,
        r#"slipstream_household_held_flows{link="upload"} 0"#,
        r#"slipstream_household_in_flight_bytes{link="download"} 120000"#,
        r#"slipstream_household_goodput_bytes_per_second{link="download"} 1000000.0"#,
        r#"slipstream_household_goodput_bytes_per_second{link="upload"} 0.0"#,
        r#"slipstream_household_slowdowns_total{link="download"} 2"#,
        r#"slipstream_household_slowdowns_total{link="upload"} 0"#,
        r#"slipstream_household_window_updates_total{link="download"} 5"#,
        "# TYPE slipstream_household_slowdowns counter",
        "# TYPE slipstream_household_budget_bytes gauge",
        "# UNIT slipstream_household_budget_bytes bytes",
        "# UNIT slipstream_household_queue_delay_seconds seconds",
        "# UNIT slipstream_household_goodput_bytes_per_second bytes_per_second",
    ]
    .map(String::from)
    .into();
    assert_lines(&text, &expected);
    // The upload link has no delay figures yet: no series rather than 0 s.
    for name in [
        "queue_delay_seconds",
        "base_rtt_seconds",
        "queue_target_seconds",
        "queue_aim_seconds",
        "best_effort_pace",
    ] {
        let prefix = format!("slipstream_household_{name}{{link=\"upload\"");
        assert!(!text.contains(&prefix), "{prefix} in:\n{text}");
    }
    check_exposition(&text);
}

#[test]
fn renders_household_flow_metrics() {
    let text = render_snapshot(household_snapshot());
    let fresh = r#"rule="shared",sender="198.51.100.7:6881",receiver="10.0.0.5:43000""#;
    assert_lines(
        &text,
        &[
            format!("slipstream_flow_allocation_bytes{{{SHARED_FLOW}}} 100000"),
            format!("slipstream_flow_allocation_bytes{{{WAITING_FLOW}}} 0"),
            format!("slipstream_flow_held{{{SHARED_FLOW}}} 0"),
            format!("slipstream_flow_held{{{WAITING_FLOW}}} 1"),
            format!("slipstream_flow_held{{{fresh}}} 0"),
            format!(r#"slipstream_flow_mode{{{SHARED_FLOW},mode="household",policy="share"}} 1"#),
            format!(r#"slipstream_flow_mode{{{WAITING_FLOW},mode="household",policy="hold"}} 1"#),
            "# UNIT slipstream_flow_allocation_bytes bytes".to_owned(),
            "# TYPE slipstream_flow_held gauge".to_owned(),
        ],
    );
    assert!(!text.contains(&format!("slipstream_flow_allocation_bytes{{{fresh}")));
    // Flows of other controllers have neither series.
    for flow in [BULK_FLOW, BACKUP_FLOW] {
        for name in ["flow_allocation_bytes", "flow_held"] {
            let prefix = format!("slipstream_{name}{{{flow}");
            assert!(!text.contains(&prefix), "{prefix} in:\n{text}");
        }
    }
    check_exposition(&text);
}

#[test]
fn household_series_only_with_household_control() {
    // The engine always reports both links; without a household rule and without flows on a link
    // there is nothing to show, and no family is announced.
    let text = render_snapshot(EngineSnapshot {
        links: links()
            .into_iter()
            .map(|l| LinkSnapshot { flows: 0, ..l })
            .collect(),
        ..snapshot()
    });
    assert!(!text.contains("slipstream_household_"), "{text}");
    assert!(!text.contains("slipstream_flow_held"), "{text}");
    check_exposition(&text);

    // A reload removed the household rule but the download link still has flows: that link stays
    // visible until they end.
    let text = render_snapshot(EngineSnapshot {
        links: links(),
        ..snapshot()
    });
    assert!(
        text.contains(r#"slipstream_household_flows{link="download"} 3"#),
        "{text}"
    );
    assert!(!text.contains(r#"link="upload""#), "{text}");
}

#[test]
fn household_counters_end_in_total() {
    let text = render_snapshot(household_snapshot());
    let types = family_types(&text);
    for family in [
        "slipstream_household_slowdowns",
        "slipstream_household_window_updates",
    ] {
        assert_eq!(types.get(family), Some(&"counter"), "{family}");
    }
    for family in [
        "slipstream_household_budget_bytes",
        "slipstream_household_queue_delay_seconds",
        "slipstream_household_queue_target_seconds",
        "slipstream_household_queue_aim_seconds",
        "slipstream_household_best_effort_pace",
        "slipstream_household_steady_flows",
        "slipstream_household_base_rtt_seconds",
        "slipstream_household_flows",
        "slipstream_household_held_flows",
        "slipstream_household_in_flight_bytes",
        "slipstream_household_goodput_bytes_per_second",
        "slipstream_flow_allocation_bytes",
        "slipstream_flow_held",
    ] {
        assert_eq!(types.get(family), Some(&"gauge"), "{family}");
    }
}

#[test]
#[ignore = "prints the exposition for a look: cargo test -p slipstream-metrics -- --ignored --nocapture"]
fn print_exposition() {
    print!("{}", render_snapshot(household_snapshot()));
}
