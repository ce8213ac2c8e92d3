use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use regex::Regex;
use slipstream_control::{ControllerMode, ControllerStats, EpochSummary, WindowPolicy};
use slipstream_engine::{
    BudgetPhase, EngineCounters, EngineSnapshot, FlowSnapshot, LinkDirection, LinkSnapshot, PassReason,
    RuleSnapshot, PARSE_ERRORS,
};

use super::*;

const BULK_FLOW: &str = r#"rule="bulk",sender="192.0.2.1:443",receiver="10.0.0.2:40000""#;
const BACKUP_FLOW: &str = r#"rule="backup",sender="[2001:db8::1]:22",receiver="[fd00::2]:50000""#;

fn addr(s: &str) -> Option<SocketAddr> {
    Some(s.parse().unwrap())
}

fn rule(
    name: &str,
    controller: &'static str,
    active: usize,
    started: u64,
    acked: u64,
    rewritten: u64,
) -> RuleSnapshot {
    RuleSnapshot {
        name: name.to_owned(),
        controller,
        active_flows: active,
        flows_started: started,
        acked_bytes: acked,
        rewritten,
    }
}

/// A flow of rule 1 with full controller stats.
fn bulk_flow() -> FlowSnapshot {
    FlowSnapshot {
        rule: 1,
        sender: addr("192.0.2.1:443"),
        receiver: addr("10.0.0.2:40000"),
        controller: Some(ControllerStats {
            target_window: Some(60_000),
            cwnd_estimate: Some(80_000),
            mode: ControllerMode::Conservative,
            policy: WindowPolicy::Increase,
            last_epoch: Some(EpochSummary {
                piv_count: 10,
                positive: 3,
                piv_sum_micros: -1_500,
            }),
        }),
        rtt: Some(Duration::from_millis(25)),
        goodput_bits_per_second: 8_000_000.0,
        acked_bytes: 123_456,
        host_window: Some(131_072),
        forwarded_window: Some(64_000),
        unclamped_reason: None,
        allocation: None,
        held: false,
        link: None,
    }
}

/// A flow of rule 2 without controller stats, not clamped.
fn backup_flow() -> FlowSnapshot {
    FlowSnapshot {
        rule: 2,
        sender: addr("[2001:db8::1]:22"),
        receiver: addr("[fd00::2]:50000"),
        controller: None,
        rtt: None,
        goodput_bits_per_second: 0.0,
        acked_bytes: 0,
        host_window: Some(65_535),
        forwarded_window: Some(65_535),
        unclamped_reason: Some(PassReason::NoTimestamps),
        allocation: None,
        held: false,
        link: None,
    }
}

fn snapshot() -> EngineSnapshot {
    let mut counters = EngineCounters::default();
    counters.packets = 1000;
    counters.rewritten = 700;
    counters.flows_created = 9;
    counters.flows_evicted = 1;
    counters.flows_expired = 2;
    counters.flows_closed = 3;
    counters.flows_without_timestamps = 4;
    counters.flows_without_handshake = 5;
    counters.flows_recovered = 4;
    counters.flows_reopened = 7;
    counters.events_dropped = 6;
    for _ in 0..3 {
        counters.count_pass(PassReason::Observed);
    }
    counters.count_malformed(PARSE_ERRORS[1]);
    let unknown_sender = FlowSnapshot {
        sender: None,
        receiver: None,
        ..bulk_flow()
    };
    EngineSnapshot {
        links: Vec::new(),
        counters,
        active_flows: 3,
        max_flows: 4096,
        rules: vec![
            rule("bulk", "vulture", 2, 7, 1_000_000, 650),
            rule("backup", "fixed_window", 1, 2, 5_000, 50),
        ],
        flows: vec![bulk_flow(), backup_flow(), unknown_sender],
    }
}

fn render_snapshot(snapshot: EngineSnapshot) -> String {
    render(&registry(SharedSnapshot::new(snapshot)))
}

fn lines(text: &str) -> HashSet<&str> {
    text.lines().collect()
}

fn assert_lines(text: &str, expected: &[String]) {
    let have = lines(text);
    for line in expected {
        assert!(have.contains(line.as_str()), "missing line {line:?} in:\n{text}");
    }
}

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

/// Family name -> type, from the `# TYPE` lines.
fn family_types(text: &str) -> HashMap<&str, &str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|rest| rest.split_once(' ').expect("TYPE line has a name and a type"))
        .collect()
}

fn sample_name(line: &str) -> &str {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    &line[..end]
}

/// A cheap exposition-format check: every sample line is `name{labels} value`, every sample belongs
/// to a family announced before it with exactly one HELP and one TYPE line, and the output ends
/// with `# EOF`.
fn check_exposition(text: &str) {
    let sample = Regex::new(
        r#"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$"#,
    )
    .unwrap();
    let meta = Regex::new(r"^# (HELP|TYPE|UNIT) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$").unwrap();

    let mut help = HashSet::new();
    let mut types: HashMap<&str, &str> = HashMap::new();
    let mut current: Option<&str> = None;
    let mut samples = 0;
    assert!(text.ends_with("# EOF\n"), "no EOF marker");
    for line in text.lines().filter(|l| *l != "# EOF") {
        if let Some(m) = meta.captures(line) {
            let (kind, name) = (m.get(1).unwrap().as_str(), m.get(2).unwrap().as_str());
            match kind {
                "HELP" => {
                    assert!(help.insert(name), "second HELP for {name}");
                    current = Some(name);
                }
                "TYPE" => {
                    assert_eq!(current, Some(name), "TYPE of {name} not right after its HELP");
                    let ty = m.get(3).unwrap().as_str();
                    assert!(matches!(ty, "counter" | "gauge"), "unexpected type {ty}");
                    assert!(types.insert(name, ty).is_none(), "second TYPE for {name}");
                }
                _ => {
                    let unit = m.get(3).unwrap().as_str();
                    assert!(
                        name.ends_with(&format!("_{unit}")),
                        "{name} does not end in its unit {unit}"
                    );
                }
            }
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment line {line:?}");
        let caps = sample
            .captures(line)
            .unwrap_or_else(|| panic!("malformed sample line {line:?}"));
        let name = caps.get(1).unwrap().as_str();
        let family = current.unwrap_or_else(|| panic!("sample {name} before any family"));
        let ty = types
            .get(family)
            .unwrap_or_else(|| panic!("family {family} has no TYPE"));
        let expected = if *ty == "counter" {
            format!("{family}_total")
        } else {
            family.to_owned()
        };
        assert_eq!(name, expected, "sample outside its family");
        samples += 1;
    }
    assert_eq!(help.len(), types.len(), "a family has HELP but no TYPE");
    assert!(samples > 0);
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

/// `/proc/net/netfilter/nfnetlink_queue` as the kernel prints it (`%5u %6u %5u %1u %5u %5u %5u %8u %2d`).
const NFQUEUE_PROC: &str = " 8470  31337     3 2 65531     7     2    90001  1
 8471  31337     0 2   128     0     0   123456  1
    1   4242     0 2 65531     0     0       17  1
";

/// `/proc/net/dev` (header lines included).
const NET_DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    6386      58    0    0    0     0          0         0     6386      58    0    0    0     0       0          0
  br-lan: 1234567   8901    0    0    0     0          0         3 98765432109   7654    0    0    0     0       0          0
  wan0:      10       1    0    0    0     0          0         0       20       2    0    0    0     0       0          0
 wlan0:     100       1    0    0    0     0          0         0      200       2    0    0    0     0       0          0
 wlan1:     300       1    0    0    0     0          0         0      400       2    0    0    0     0       0          0
";

/// `/proc/net/netlink` as Linux 6.x prints it: the daemon's NFQUEUE socket is port 31337.
const NETLINK_PROC: &str = "\
sk               Eth Pid        Groups   Rmem     Wmem     Dump  Locks    Drops    Inode
0000000063aa6a26 0   0          00000000 0        0        0     2        0        4
00000000a1b2c3d4 12  31337      00000000 212992   0        0     2        115      88123
00000000a1b2c3d5 12  31338      00000000 0        0        0     2        9        88124
";

#[test]
fn parses_netlink_socket_drops() {
    assert_eq!(parse_netlink_drops(NETLINK_PROC, 31337), Some(115));
    assert_eq!(parse_netlink_drops(NETLINK_PROC, 31338), Some(9));
    assert_eq!(parse_netlink_drops(NETLINK_PROC, 4), None);
    assert_eq!(parse_netlink_drops("", 31337), None);
}

#[test]
fn parses_nfnetlink_queue() {
    let queues = parse_nfnetlink_queue(NFQUEUE_PROC);
    assert_eq!(queues.len(), 3);
    assert_eq!(
        queues[0],
        QueueStats {
            queue: 8470,
            peer_portid: 31337,
            waiting: 3,
            dropped_queue_full: 7,
            dropped_socket_full: 2,
            id_sequence: 90001,
            socket_overruns: 0,
        }
    );
    assert_eq!(queues[1].queue, 8471);
    assert_eq!(queues[1].id_sequence, 123_456);
    // Nothing bound: the kernel prints nothing. Garbage and short lines are skipped.
    assert!(parse_nfnetlink_queue("").is_empty());
    assert!(parse_nfnetlink_queue("x y z\n 1 2 3\n").is_empty());
    // u32 maxima (the kernel's counters wrap there).
    let max = parse_nfnetlink_queue("65535 4294967295 0 2 65531 4294967295 0 4294967295 1\n");
    assert_eq!(max[0].dropped_queue_full, u32::MAX);
    assert_eq!(max[0].id_sequence, u32::MAX);
}

#[test]
fn parses_net_dev_and_matches_wildcards() {
    let all = parse_net_dev(NET_DEV);
    assert_eq!(all.len(), 5, "{all:?}");
    let lan = &all[1];
    assert_eq!(lan.interface, "br-lan");
    assert_eq!(lan.receive_bytes, 1_234_567);
    assert_eq!(lan.transmit_bytes, 98_765_432_109);
    assert!(interface_matches("br-lan", "br-lan"));
    assert!(!interface_matches("br-lan", "br-lan2"));
    assert!(interface_matches("wlan+", "wlan1"));
    assert!(!interface_matches("wlan+", "wan0"));
    assert!(interface_matches("+", "anything"));
}

fn host_stats() -> HostStats {
    HostStats::from_providers(
        || {
            let mut q = parse_nfnetlink_queue(NFQUEUE_PROC);
            q.retain(|q| [8470, 8471].contains(&q.queue));
            for q in &mut q {
                q.socket_overruns = parse_netlink_drops(NETLINK_PROC, q.peer_portid).unwrap_or(0);
            }
            q
        },
        || {
            let patterns = ["br-lan".to_owned(), "wlan+".to_owned()];
            let mut i = parse_net_dev(NET_DEV);
            i.retain(|i| patterns.iter().any(|p| interface_matches(p, &i.interface)));
            i
        },
    )
}

#[test]
fn renders_host_stats() {
    let mut registry = registry(SharedSnapshot::new(snapshot()));
    register_host_stats(&mut registry, host_stats());
    let text = render(&registry);
    let expected: Vec<String> = [
        r#"slipstream_nfqueue_packets_total{queue="8470"} 90001"#,
        r#"slipstream_nfqueue_packets_total{queue="8471"} 123456"#,
        r#"slipstream_nfqueue_waiting_packets{queue="8470"} 3"#,
        r#"slipstream_nfqueue_dropped_packets_total{queue="8470",reason="queue_full"} 7"#,
        r#"slipstream_nfqueue_dropped_packets_total{queue="8470",reason="socket_full"} 2"#,
        // Zero drops are series too, so a dashboard query finds them before the first drop.
        r#"slipstream_nfqueue_dropped_packets_total{queue="8471",reason="queue_full"} 0"#,
        r#"slipstream_nfqueue_dropped_packets_total{queue="8471",reason="socket_full"} 0"#,
        // Both queues share socket 31337: its 115 overruns once.
        "slipstream_nfqueue_socket_overruns_total 115",
        r#"slipstream_interface_receive_bytes_total{interface="br-lan"} 1234567"#,
        r#"slipstream_interface_transmit_bytes_total{interface="br-lan"} 98765432109"#,
        r#"slipstream_interface_transmit_bytes_total{interface="wlan0"} 200"#,
        r#"slipstream_interface_transmit_bytes_total{interface="wlan1"} 400"#,
        "# UNIT slipstream_interface_transmit_bytes bytes",
        // The engine's figures are still there.
        "slipstream_packets_total 1000",
    ]
    .map(String::from)
    .into();
    assert_lines(&text, &expected);
    // Only the queues and interfaces asked for.
    assert!(!text.contains(r#"queue="1""#), "{text}");
    assert!(!text.contains(r#"interface="lo""#) && !text.contains(r#"interface="wan0""#));
    check_exposition(&text);
}

#[test]
fn host_stats_without_sources_render_no_families() {
    let mut registry = registry(SharedSnapshot::default());
    register_host_stats(&mut registry, HostStats::from_providers(Vec::new, Vec::new));
    let text = render(&registry);
    assert!(
        !text.contains("nfqueue") && !text.contains("interface_"),
        "{text}"
    );
    check_exposition(&text);
}

#[test]
fn system_host_stats_read_this_namespace() {
    // Whatever this machine has: reading must not fail or panic, and lo is always there.
    let lo = read_interface_bytes(&["lo".to_owned()]);
    assert_eq!(lo.len(), 1, "{lo:?}");
    let _ = read_queue_stats(&[]);
    let mut registry = registry(SharedSnapshot::default());
    register_host_stats(&mut registry, HostStats::system([8470, 8471], &["lo".to_owned()]));
    let text = render(&registry);
    assert!(text.contains(r#"slipstream_interface_receive_bytes_total{interface="lo"} "#));
    check_exposition(&text);
}

const SHARED_FLOW: &str = r#"rule="shared",sender="198.51.100.7:6881",receiver="10.0.0.3:41000""#;
const WAITING_FLOW: &str = r#"rule="shared",sender="198.51.100.8:6881",receiver="10.0.0.4:42000""#;

/// A download link in the middle of things and an upload link that has not run a round yet.
fn links() -> Vec<LinkSnapshot> {
    vec![
        LinkSnapshot {
            direction: LinkDirection::Download,
            controller: "delay_target",
            phase: BudgetPhase::Hold,
            budget_bytes: 150_000,
            queue_delay: Some(Duration::from_micros(4_500)),
            base_rtt: Some(Duration::from_millis(20)),
            flows: 3,
            held_flows: 1,
            in_flight_bytes: 120_000,
            goodput_bits_per_second: 8_000_000.0,
            slowdowns: 2,
            window_updates: 5,
        },
        LinkSnapshot {
            direction: LinkDirection::Upload,
            controller: "delay_target",
            phase: BudgetPhase::Idle,
            budget_bytes: 14_480,
            queue_delay: None,
            base_rtt: None,
            flows: 0,
            held_flows: 0,
            in_flight_bytes: 0,
            goodput_bits_per_second: 0.0,
            slowdowns: 0,
            window_updates: 0,
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
        ..household.clone()
    };
    s.flows.extend([household, waiting, fresh]);
    s.links = links();
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
    for name in ["queue_delay_seconds", "base_rtt_seconds"] {
        let prefix = format!("slipstream_household_{name}{{link=\"upload\"}}");
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
