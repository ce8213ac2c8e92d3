//! Tests of the control socket: requests, answers and the views built for them.

use super::*;
use slipstream_control::{ControllerMode, ControllerStats, EpochSummary, WindowPolicy};
use slipstream_engine::{LinkDirection, RuleSnapshot};

fn key() -> FlowKey {
    FlowKey::from_packet(
        "192.168.1.20".parse().unwrap(),
        40000,
        "203.0.113.5".parse().unwrap(),
        6881,
    )
    .0
}

#[test]
fn flows_name_their_rule_and_removed_rules() {
    let flow = FlowSnapshot {
        rule: 2,
        sender: Some("203.0.113.5:6881".parse().unwrap()),
        receiver: Some("192.168.1.20:40000".parse().unwrap()),
        controller: Some(ControllerStats {
            target_window: Some(100_000),
            cwnd_estimate: Some(120_000),
            mode: ControllerMode::Conservative,
            policy: WindowPolicy::Fix,
            last_epoch: Some(EpochSummary {
                piv_count: 8,
                positive: 2,
                piv_sum_micros: 2500,
            }),
        }),
        rtt: Some(slipstream_control::Duration::from_millis(42)),
        goodput_bits_per_second: 1e6,
        acked_bytes: 5000,
        host_window: Some(300_000),
        forwarded_window: Some(100_000),
        unclamped_reason: None,
        allocation: None,
        held: false,
        link: None,
        udp: None,
    };
    let rule = |name: &str| RuleSnapshot {
        name: name.into(),
        controller: "vulture",
        ..RuleSnapshot::default()
    };
    let view = PacketView {
        snapshot: EngineSnapshot {
            active_flows: 2,
            max_flows: 10,
            rules: vec![rule("a"), rule("b"), rule("gone")],
            flows: vec![
                flow.clone(),
                FlowSnapshot {
                    rule: 3,
                    unclamped_reason: Some(PassReason::RuleRemoved),
                    ..flow
                },
            ],
            ..EngineSnapshot::default()
        },
        keys: vec![key(), key()],
        configured_rules: 2,
    };
    let list = flow_list(&view);
    assert_eq!((list.active, list.max, list.flows.len()), (2, 10, 2));
    let f = &list.flows[0];
    assert_eq!(
        (f.rule.as_str(), f.rule_removed, f.controller.as_str()),
        ("b", false, "vulture")
    );
    assert_eq!(f.endpoints, ["192.168.1.20:40000", "203.0.113.5:6881"]);
    assert_eq!(f.rtt_ms, Some(42.0));
    assert_eq!(
        (
            f.mode.as_str(),
            f.policy.as_str(),
            f.target_window_bytes,
            f.cwnd_estimate_bytes
        ),
        ("conservative", "fix", Some(100_000), Some(120_000))
    );
    assert_eq!(
        f.piv,
        Some(PivSummary {
            sum_ms: 2.5,
            positive_ratio: 0.25,
            count: 8
        })
    );
    let g = &list.flows[1];
    assert_eq!((g.rule.as_str(), g.rule_removed), ("gone", true));
    assert_eq!(g.unclamped.as_deref(), Some("rule_removed"));
    // Not a household flow: no link known, no allocation, not held.
    assert_eq!(
        (f.link.as_deref(), f.allocation_bytes, f.held),
        (None, None, false)
    );
}

fn household_flow(allocation: u32, held: bool) -> FlowSnapshot {
    FlowSnapshot {
        rule: 1,
        sender: Some("203.0.113.5:6881".parse().unwrap()),
        receiver: Some("192.168.1.20:40000".parse().unwrap()),
        controller: None,
        rtt: None,
        goodput_bits_per_second: 0.0,
        acked_bytes: 0,
        host_window: None,
        forwarded_window: None,
        unclamped_reason: None,
        allocation: Some(allocation),
        held,
        link: Some(LinkDirection::Upload),
        udp: None,
    }
}

fn household_rule() -> RuleSnapshot {
    RuleSnapshot {
        name: "shared".into(),
        controller: "household",
        ..RuleSnapshot::default()
    }
}

#[test]
fn household_flows_carry_link_allocation_and_held() {
    let view = PacketView {
        snapshot: EngineSnapshot {
            rules: vec![household_rule()],
            flows: vec![household_flow(48_000, false), household_flow(0, true)],
            ..EngineSnapshot::default()
        },
        keys: vec![key(), key()],
        configured_rules: 1,
    };
    let list = flow_list(&view);
    let got: Vec<_> = list
        .flows
        .iter()
        .map(|f| (f.link.as_deref(), f.allocation_bytes, f.held))
        .collect();
    assert_eq!(
        got,
        [
            (Some("upload"), Some(48_000), false),
            (Some("upload"), Some(0), true)
        ]
    );
    // No controller stats in the snapshot: empty mode and policy on the wire, no figures.
    assert!(list.flows.iter().all(|f| f.mode.is_empty()
        && f.policy.is_empty()
        && f.target_window_bytes.is_none()
        && f.piv.is_none()));
}

fn link(direction: LinkDirection, flows: usize) -> LinkSnapshot {
    LinkSnapshot {
        direction,
        controller: "delay_target",
        phase: slipstream_engine::BudgetPhase::Probe,
        // Beside browsing: 3 ms for the yields and the step alike.
        targets: Some(slipstream_engine::RoundTargets {
            threshold: std::time::Duration::from_millis(3),
            aim: std::time::Duration::from_millis(3),
            pace: slipstream_engine::BestEffortPace::Browsing,
        }),
        budget_bytes: 90_000,
        queue_delay: Some(std::time::Duration::from_micros(2_500)),
        base_rtt: None,
        flows,
        held_flows: flows / 2,
        in_flight_bytes: 80_000,
        goodput_bits_per_second: 5e6,
        slowdowns: 1,
        best_effort_bits_per_second: None,
        window_updates: 3,
    }
}

fn control() -> Control {
    Control {
        state: Mutex::default(),
        counters: Arc::default(),
        started: std::time::Instant::now(),
        packets: Mutex::new(std::sync::mpsc::channel().0),
        datapath_errors: Arc::default(),
        published: SharedSnapshot::default(),
        probes: Arc::default(),
    }
}

#[test]
fn status_shows_household_links_while_household_control_is_in_use() {
    let links = vec![link(LinkDirection::Download, 4), link(LinkDirection::Upload, 0)];
    let view = |rules: Vec<RuleSnapshot>| PacketView {
        snapshot: EngineSnapshot {
            rules,
            links: links.clone(),
            ..EngineSnapshot::default()
        },
        keys: Vec::new(),
        configured_rules: 1,
    };
    let status = control().status(&view(vec![household_rule()]));
    assert_eq!(
        status.household,
        [
            LinkStatus {
                link: "download".into(),
                controller: "delay_target".into(),
                phase: "probe".into(),
                budget_bytes: 90_000,
                in_flight_bytes: 80_000,
                queue_delay_ms: Some(2.5),
                base_rtt_ms: None,
                queue_target_ms: Some(3.0),
                queue_aim_ms: Some(3.0),
                best_effort_pace: Some("browsing".into()),
                flows: 4,
                held_flows: 2,
                goodput_bps: 5e6,
                best_effort_bps: None,
                slowdowns: 1,
                window_updates: 3,
            },
            LinkStatus {
                link: "upload".into(),
                flows: 0,
                held_flows: 0,
                ..link_status(&links[0])
            },
        ]
    );
    // No household rule: only a link that still has household flows (a reload removed the
    // rule) is shown.
    let rule = RuleSnapshot {
        name: "bt".into(),
        controller: "vulture",
        ..RuleSnapshot::default()
    };
    let status = control().status(&view(vec![rule]));
    let shown: Vec<&str> = status.household.iter().map(|l| l.link.as_str()).collect();
    assert_eq!(shown, ["download"]);
}

#[test]
fn stale_socket_is_replaced_other_files_are_not() {
    let dir = std::env::temp_dir().join(format!("ssd-sock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // A stale socket left by a killed daemon.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let socket = ControlSocket::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A live one is not taken over.
        let e = ControlSocket::bind(&path).err().unwrap().to_string();
        assert!(e.contains("another process"), "{e}");
        drop(socket);
        assert!(!path.exists(), "removed on drop");
    });
    std::fs::write(&path, "not a socket").unwrap();
    let e = rt.block_on(async { ControlSocket::bind(&path).err().unwrap().to_string() });
    assert!(e.contains("is not a socket"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}
