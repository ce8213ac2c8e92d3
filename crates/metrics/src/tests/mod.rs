//! Shared fixtures: snapshots, rendering, and an exposition-format checker.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use regex::Regex;
use slipstream_control::{ControllerMode, ControllerStats, EpochSummary, WindowPolicy};
use slipstream_engine::{
    BestEffortPace, BudgetPhase, EngineCounters, EngineSnapshot, FlowSnapshot, LinkDirection, LinkSnapshot,
    PassReason, RoundTargets, RuleSnapshot, PARSE_ERRORS,
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
        udp: None,
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
        udp: None,
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
    counters.udp_flows_created = 11;
    counters.udp_flows_expired = 12;
    counters.udp_dropped = 13;
    counters.udp_marked = 14;
    counters.udp_delayed = 15;
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
        steady_flows: 0,
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

mod engine;
mod host;
mod household;
