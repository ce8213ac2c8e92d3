//! Engine-wide, per-rule and per-flow series; the exposition checker's own tests.

use super::*;

#[test]
fn renders_engine_and_rule_metrics() {
    let text = render_snapshot(snapshot());
    let expected: Vec<String> = [
        "slipstream_packets_total 1000",
        "slipstream_packets_rewritten_total 700",
        r#"slipstream_packets_passed_total{reason="observed"} 3"#,
        r#"slipstream_packets_passed_total{reason="malformed"} 1"#,
        r#"slipstream_packets_passed_total{reason="checksum_not_ready"} 0"#,
        r#"slipstream_packets_malformed_total{error="truncated"} 1"#,
        r#"slipstream_packets_malformed_total{error="not_ip"} 0"#,
        "slipstream_flows_created_total 9",
        "slipstream_flows_evicted_total 1",
        "slipstream_flows_expired_total 2",
        "slipstream_flows_closed_total 3",
        "slipstream_flows_without_timestamps_total 4",
        "slipstream_flows_without_handshake_total 5",
        "slipstream_flows_recovered_total 4",
        "slipstream_flows_reopened_total 7",
        "slipstream_events_dropped_total 6",
        "slipstream_udp_flows_created_total 11",
        "slipstream_udp_flows_expired_total 12",
        "slipstream_udp_policer_dropped_packets_total 13",
        "slipstream_udp_policer_marked_packets_total 14",
        "slipstream_udp_shaper_delayed_packets_total 15",
        "slipstream_flows_active 3",
        "slipstream_flows_max 4096",
        r#"slipstream_rule_flows_active{rule="bulk",controller="vulture"} 2"#,
        r#"slipstream_rule_flows_active{rule="backup",controller="fixed_window"} 1"#,
        r#"slipstream_rule_flows_started_total{rule="bulk",controller="vulture"} 7"#,
        r#"slipstream_rule_acked_bytes_total{rule="bulk",controller="vulture"} 1000000"#,
        r#"slipstream_rule_acked_bytes_total{rule="backup",controller="fixed_window"} 5000"#,
        r#"slipstream_rule_packets_rewritten_total{rule="backup",controller="fixed_window"} 50"#,
        "# TYPE slipstream_rule_acked_bytes counter",
        "# UNIT slipstream_rule_acked_bytes bytes",
        "# EOF",
    ]
    .map(String::from)
    .into();
    assert_lines(&text, &expected);

    // Every pass reason and every parse error has a series, even at zero.
    for reason in PassReason::ALL {
        let prefix = format!(
            "slipstream_packets_passed_total{{reason=\"{}\"}} ",
            reason.as_str()
        );
        assert!(
            text.lines().any(|l| l.starts_with(&prefix)),
            "no series for {reason:?}"
        );
    }
    for error in PARSE_ERRORS {
        let prefix = format!(
            "slipstream_packets_malformed_total{{error=\"{}\"}} ",
            error.as_str()
        );
        assert!(
            text.lines().any(|l| l.starts_with(&prefix)),
            "no series for {error:?}"
        );
    }
}

#[test]
fn renders_per_flow_metrics() {
    let text = render_snapshot(snapshot());
    let expected = [
        format!("slipstream_flow_rwnd_bytes{{{BULK_FLOW}}} 64000"),
        format!("slipstream_flow_host_window_bytes{{{BULK_FLOW}}} 131072"),
        format!("slipstream_flow_target_window_bytes{{{BULK_FLOW}}} 60000"),
        format!("slipstream_flow_cwnd_estimate_bytes{{{BULK_FLOW}}} 80000"),
        format!("slipstream_flow_piv_sum_seconds{{{BULK_FLOW}}} -0.0015"),
        format!("slipstream_flow_piv_positive_ratio{{{BULK_FLOW}}} 0.3"),
        format!("slipstream_flow_piv_samples{{{BULK_FLOW}}} 10"),
        format!("slipstream_flow_goodput_bytes_per_second{{{BULK_FLOW}}} 1000000.0"),
        format!("slipstream_flow_rtt_seconds{{{BULK_FLOW}}} 0.025"),
        format!("slipstream_flow_acked_bytes_total{{{BULK_FLOW}}} 123456"),
        format!(r#"slipstream_flow_mode{{{BULK_FLOW},mode="conservative",policy="increase"}} 1"#),
        format!("slipstream_flow_rwnd_bytes{{{BACKUP_FLOW}}} 65535"),
        format!("slipstream_flow_host_window_bytes{{{BACKUP_FLOW}}} 65535"),
        format!("slipstream_flow_goodput_bytes_per_second{{{BACKUP_FLOW}}} 0.0"),
        format!("slipstream_flow_acked_bytes_total{{{BACKUP_FLOW}}} 0"),
        format!(r#"slipstream_flow_unclamped{{{BACKUP_FLOW},reason="no_timestamps"}} 1"#),
    ];
    assert_lines(&text, &expected);

    // The flow without controller stats has none of the optional series.
    for name in [
        "flow_target_window_bytes",
        "flow_cwnd_estimate_bytes",
        "flow_piv_sum_seconds",
        "flow_piv_positive_ratio",
        "flow_piv_samples",
        "flow_rtt_seconds",
        "flow_mode",
    ] {
        let prefix = format!("slipstream_{name}{{{BACKUP_FLOW}");
        assert!(
            !text.lines().any(|l| l.starts_with(&prefix)),
            "unexpected {name} for the backup flow"
        );
    }
    // The clamped flow has no unclamped series.
    assert!(!text.contains(&format!("slipstream_flow_unclamped{{{BULK_FLOW}")));
    // The flow with an unknown sender has no series at all: 2 flows, 2 rwnd series.
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("slipstream_flow_rwnd_bytes{"))
            .count(),
        2
    );
}

#[test]
fn counters_end_in_total_and_gauges_do_not() {
    let text = render_snapshot(snapshot());
    let types = family_types(&text);
    let mut counters = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = sample_name(line);
        if let Some(family) = name
            .strip_suffix("_total")
            .filter(|f| types.get(*f) == Some(&"counter"))
        {
            counters += 1;
            assert!(family.starts_with("slipstream_"));
        } else {
            assert_eq!(
                types.get(name),
                Some(&"gauge"),
                "{name} is neither a counter sample nor a gauge"
            );
        }
    }
    assert!(counters > 20);
}

#[test]
fn ended_flow_disappears_from_next_render() {
    let shared = SharedSnapshot::new(snapshot());
    let registry = registry(shared.clone());
    let before = render(&registry);
    assert!(before.contains(BACKUP_FLOW));

    let mut next = snapshot();
    next.flows.retain(|f| f.rule != 2);
    shared.publish(next);
    let after = render(&registry);
    assert!(after.contains(BULK_FLOW));
    assert!(
        !after.contains(BACKUP_FLOW),
        "ended flow still rendered:\n{after}"
    );
    // The unclamped family had only that flow: it is gone, descriptor included.
    assert!(!after.contains("slipstream_flow_unclamped"));

    // With no flows at all, no per-flow family is left, while the rest stays.
    shared.publish(EngineSnapshot {
        links: Vec::new(),
        flows: Vec::new(),
        ..snapshot()
    });
    let empty = render(&registry);
    assert!(
        !empty.contains("slipstream_flow_"),
        "per-flow metrics without flows:\n{empty}"
    );
    assert!(empty.contains("slipstream_rule_flows_active{"));
}

#[test]
fn per_flow_series_do_not_pile_up_across_snapshots() {
    // 200 short flows one after the other (a new client port each): a registered `Family` would
    // keep 200 label sets; the collector renders only the flow of the latest snapshot.
    let shared = SharedSnapshot::default();
    let registry = registry(shared.clone());
    for i in 0..200u16 {
        let flow = FlowSnapshot {
            receiver: Some(SocketAddr::from(([10, 0, 0, 2], 30_000 + i))),
            ..bulk_flow()
        };
        shared.publish(EngineSnapshot {
            links: Vec::new(),
            flows: vec![flow],
            ..snapshot()
        });
        let _ = render(&registry);
    }
    let text = render(&registry);
    let per_flow: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("slipstream_flow_") && l.contains("receiver="))
        .collect();
    assert!(
        per_flow
            .iter()
            .all(|l| l.contains(r#"receiver="10.0.0.2:30199""#)),
        "{text}"
    );
    assert_eq!(
        per_flow
            .iter()
            .filter(|l| l.starts_with("slipstream_flow_rwnd_bytes{"))
            .count(),
        1
    );
}

#[test]
fn per_flow_series_are_bounded_by_the_snapshot() {
    let flows: Vec<FlowSnapshot> = (0..32u16)
        .map(|i| FlowSnapshot {
            receiver: Some(SocketAddr::from(([10, 0, 0, 2], 40_000 + i))),
            goodput_bits_per_second: f64::from(i) * 1000.0,
            ..bulk_flow()
        })
        .collect();
    let text = render_snapshot(EngineSnapshot { flows, ..snapshot() });
    let rwnd: HashSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("slipstream_flow_rwnd_bytes{"))
        .collect();
    assert_eq!(rwnd.len(), 32);
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("slipstream_flow_rwnd_bytes{"))
            .count(),
        32
    );
}

#[test]
fn flow_of_a_removed_rule_is_labelled_by_number() {
    let flow = FlowSnapshot {
        rule: 5,
        ..bulk_flow()
    };
    let text = render_snapshot(EngineSnapshot {
        links: Vec::new(),
        flows: vec![flow],
        ..snapshot()
    });
    assert!(
        text.contains(r#"slipstream_flow_rwnd_bytes{rule="5",sender="192.0.2.1:443""#),
        "{text}"
    );
}

#[test]
fn empty_snapshot_renders() {
    let text = render(&registry(SharedSnapshot::default()));
    assert_lines(
        &text,
        &[
            "slipstream_packets_total 0".to_owned(),
            "slipstream_flows_max 0".to_owned(),
        ],
    );
    check_exposition(&text);
}

#[test]
fn latest_returns_what_was_published() {
    let shared = SharedSnapshot::default();
    assert_eq!(*shared.latest(), EngineSnapshot::default());
    let held = shared.latest();
    shared.publish(snapshot());
    assert_eq!(*shared.latest(), snapshot());
    // A reader holding the old snapshot keeps it intact.
    assert_eq!(*held, EngineSnapshot::default());
}

#[test]
fn output_is_well_formed_exposition() {
    check_exposition(&render_snapshot(snapshot()));
}

#[test]
#[should_panic(expected = "malformed sample line")]
fn exposition_check_rejects_a_bad_line() {
    check_exposition("# HELP x_y Help.\n# TYPE x_y gauge\nx_y{a=\"b\"} one\n# EOF\n");
}

#[test]
#[should_panic(expected = "sample outside its family")]
fn exposition_check_rejects_a_counter_without_total() {
    check_exposition("# HELP x_y Help.\n# TYPE x_y counter\nx_y 1\n# EOF\n");
}
