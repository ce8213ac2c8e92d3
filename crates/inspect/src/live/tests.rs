use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, SocketAddr};

use super::*;
use crate::FlowInfo;

fn link(background: f64, best_effort: f64) -> LinkSample {
    LinkSample {
        link: "download".into(),
        phase: "hold".into(),
        link_bps: Some(background + best_effort),
        background_bps: background,
        best_effort_bps: Some(best_effort),
        budget_bytes: 30_000,
        queue_delay_ms: Some(5.0),
        flows: 1,
        held_flows: 0,
        ..LinkSample::default()
    }
}

fn input(t_s: u64, links: Vec<LinkSample>, acked: u64) -> HistoryInput {
    HistoryInput {
        t_unix_ms: t_s * 1000,
        day_start_unix: 86_400,
        links,
        rules: vec![RuleInput {
            name: "bt".into(),
            active_flows: 1,
            acked_bytes: acked,
        }],
    }
}

#[test]
fn the_ring_keeps_the_last_ten_minutes_and_answers_since() {
    let mut h = HistoryRecorder::default();
    for t in 0..(HISTORY_SAMPLES as u64 + 50) {
        h.record(input(100_000 + t, vec![link(1e6, 0.0)], t * 1000));
    }
    let all = h.view(None, 0);
    assert_eq!(all.samples.len(), HISTORY_SAMPLES);
    assert_eq!(all.samples[0].t_unix_ms, (100_000 + 50) * 1000);
    let last = all.samples.last().unwrap().t_unix_ms;
    let newer = h.view(Some(last - 2000), 0);
    assert_eq!(newer.samples.len(), 2);
    assert!(h.view(Some(last), 0).samples.is_empty());
}

#[test]
fn a_yield_is_an_arrival_then_a_step_back() {
    let mut h = HistoryRecorder::default();
    let mut t = 100_000;
    // Background alone: 9.5 Mbit/s, best effort's noise under 5%.
    for _ in 0..5 {
        h.record(input(t, vec![link(9.5e6, 0.2e6)], 0));
        t += 1;
    }
    assert!(h.view(None, 0).yields.is_empty());
    // Best effort arrives (25% of the link), the background is still high ...
    h.record(input(t, vec![link(7.5e6, 2.5e6)], 0));
    t += 1;
    h.record(input(t, vec![link(6e6, 3.5e6)], 0));
    t += 1;
    // ... then steps back below half of its 9.5 Mbit/s.
    h.record(input(t, vec![link(3e6, 6.5e6)], 0));
    let y = h.view(None, 0).yields;
    assert_eq!(y.len(), 2, "{y:?}");
    assert_eq!(y[0].kind, "best_effort_arrived");
    assert_eq!(y[0].t_unix_ms, 100_005 * 1000);
    assert_eq!(
        y[0].background_bps, 9.5e6,
        "the background's rate before the arrival"
    );
    assert_eq!(y[1].kind, "background_stepped_back");
    assert_eq!(y[1].after_ms, Some(2000));
    assert_eq!(y[1].background_bps, 3e6);
    // Best effort stays: no new arrival until the link was quiet again for 3 s.
    for _ in 0..10 {
        t += 1;
        h.record(input(t, vec![link(3e6, 6.5e6)], 0));
    }
    assert_eq!(h.view(None, 0).yields.len(), 2);
}

#[test]
fn no_yield_without_background_or_when_it_does_not_step_back() {
    let mut h = HistoryRecorder::default();
    let mut t = 100_000;
    for _ in 0..5 {
        h.record(input(t, vec![link(0.0, 0.0)], 0));
        t += 1;
    }
    // Best effort alone: nothing yielded.
    h.record(input(t, vec![link(0.0, 9e6)], 0));
    t += 1;
    for _ in 0..5 {
        h.record(input(t, vec![link(9e6, 0.1e6)], 0));
        t += 1;
    }
    // An arrival the background never answers: the arrival is listed, no step back, and after
    // 30 s the watch ends.
    for _ in 0..40 {
        h.record(input(t, vec![link(8e6, 2e6)], 0));
        t += 1;
    }
    let y = h.view(None, 0).yields;
    assert_eq!(y.len(), 1, "{y:?}");
    assert_eq!(y[0].kind, "best_effort_arrived");
}

#[test]
fn best_effort_ramping_up_through_the_thresholds_still_arrives() {
    let mut h = HistoryRecorder::default();
    let mut t = 100_000;
    for _ in 0..5 {
        h.record(input(t, vec![link(9e6, 0.1e6)], 0));
        t += 1;
    }
    // 7% of the link: between the quiet and the arrival shares.
    h.record(input(t, vec![link(8.4e6, 0.63e6)], 0));
    t += 1;
    h.record(input(t, vec![link(6e6, 3.5e6)], 0));
    t += 1;
    h.record(input(t, vec![link(2e6, 7.5e6)], 0));
    let kinds: Vec<String> = h.view(None, 0).yields.into_iter().map(|y| y.kind).collect();
    assert_eq!(kinds, ["best_effort_arrived", "background_stepped_back"]);
}

#[test]
fn yields_are_bounded() {
    let mut h = HistoryRecorder::default();
    let mut t = 100_000;
    for _ in 0..(MAX_YIELDS + 5) {
        for _ in 0..4 {
            h.record(input(t, vec![link(9e6, 0.0)], 0));
            t += 1;
        }
        h.record(input(t, vec![link(2e6, 7e6)], 0));
        t += 1;
    }
    assert_eq!(h.view(None, 0).yields.len(), MAX_YIELDS);
}

#[test]
fn rules_count_bytes_today_and_their_rate() {
    let mut h = HistoryRecorder::default();
    h.record(input(100_000, vec![], 5_000));
    let r = &h.view(None, 0).rules[0];
    assert_eq!(
        (r.bytes_today, r.rate_bps, r.today_since_unix),
        (5_000, 0.0, 100_000)
    );
    h.record(input(100_001, vec![], 130_000));
    let r = &h.view(None, 0).rules[0];
    assert_eq!((r.bytes_today, r.rate_bps, r.active_flows), (130_000, 1e6, 1));
    // A new day: only what came after midnight counts.
    let mut next = input(100_002, vec![], 140_000);
    next.day_start_unix = 172_800;
    h.record(next);
    let r = &h.view(None, 0).rules[0];
    assert_eq!((r.bytes_today, r.today_since_unix), (10_000, 172_800));
    // The rule removed and added again: its new counter starts from zero.
    let mut again = input(100_003, vec![], 700);
    again.day_start_unix = 172_800;
    h.record(again);
    assert_eq!(h.view(None, 0).rules[0].bytes_today, 10_700);
    // Gone from the config: gone from the list.
    let mut none = input(100_004, vec![], 0);
    none.rules.clear();
    h.record(none);
    assert!(h.view(None, 0).rules.is_empty());
}

fn flow(lan: &str, remote: &str, goodput: f64, held: bool) -> FlowInfo {
    FlowInfo {
        endpoints: [remote.into(), lan.into()],
        sender: Some(remote.into()),
        receiver: Some(lan.into()),
        goodput_bps: goodput,
        held,
        ..FlowInfo::default()
    }
}

#[test]
fn hosts_sum_their_flows_and_take_names_and_best_effort() {
    let flows = [
        flow("10.77.3.2:40000", "10.77.1.2:6881", 2e6, false),
        flow("10.77.3.2:40002", "10.77.1.2:6882", 1e6, true),
        flow("[fd77:3::2]:40004", "[fd77:1::2]:6881", 0.5e6, false),
    ];
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let names = BTreeMap::from([(ip("10.77.3.2"), "deck".to_owned())]);
    let without = host_list(&flows, &names, &[], None, Some("no accounting".into()));
    assert!(!without.best_effort_counted);
    assert_eq!(without.hosts.len(), 2);
    let h = &without.hosts[0];
    assert_eq!(
        (
            h.address.as_str(),
            h.name.as_deref(),
            h.background_bps,
            h.background_flows,
            h.held_flows
        ),
        ("10.77.3.2", Some("deck"), 3e6, 2, 1)
    );
    assert_eq!(h.best_effort_bps, None);
    assert_eq!(without.hosts[1].address, "fd77:3::2");
    let best_effort = BTreeMap::from([(ip("10.77.3.9"), 8e6), (ip("10.77.3.2"), 0.0)]);
    let with = host_list(&flows, &names, &[], Some(&best_effort), None);
    assert!(with.best_effort_counted);
    let addrs: Vec<_> = with.hosts.iter().map(|h| h.address.as_str()).collect();
    assert_eq!(addrs, ["10.77.3.9", "10.77.3.2", "fd77:3::2"]);
    assert_eq!(with.hosts[0].best_effort_bps, Some(8e6));
    assert_eq!(with.hosts[1].best_effort_bps, Some(0.0));
    assert_eq!(with.hosts[2].best_effort_bps, Some(0.0));
    // A flow whose bulk direction is not known yet, both ends private: the LAN prefixes tell
    // which end is the LAN host.
    let unknown = FlowInfo {
        endpoints: ["10.77.1.2:6881".into(), "10.77.3.2:40006".into()],
        ..FlowInfo::default()
    };
    let lan = lan_prefixes(ROUTE, "", &["lan0".to_owned()]);
    let by_prefix = host_list(std::slice::from_ref(&unknown), &names, &lan, None, None);
    assert_eq!(by_prefix.hosts[0].address, "10.77.3.2");
    let guessed = host_list(&[unknown], &names, &[], None, None);
    assert_eq!(
        guessed.hosts[0].address, "10.77.1.2",
        "without prefixes: as `slipstream flows`"
    );
}

const CONNTRACK: &str = "\
ipv4     2 tcp      6 431999 ESTABLISHED src=10.77.3.2 dst=10.77.1.2 sport=40000 dport=5201 packets=10 bytes=1000 src=10.77.1.2 dst=10.77.3.2 sport=5201 dport=40000 packets=20 bytes=20000 [ASSURED] mark=0 zone=0 use=2
ipv4     2 tcp      6 431999 ESTABLISHED src=10.77.3.2 dst=10.77.1.2 sport=40002 dport=6881 packets=10 bytes=1000 src=10.77.1.2 dst=10.77.3.2 sport=6881 dport=40002 packets=20 bytes=90000 [ASSURED] mark=1 zone=0 use=2
ipv4     2 udp      17 20 src=10.77.3.5 dst=10.77.3.1 sport=5353 dport=53 packets=1 bytes=60 src=10.77.3.1 dst=10.77.3.5 sport=53 dport=5353 packets=1 bytes=100 mark=0 zone=0 use=2
ipv4     2 tcp      6 431999 ESTABLISHED src=203.0.113.7 dst=198.51.100.1 sport=50000 dport=8080 packets=1 bytes=100 src=10.77.3.6 dst=203.0.113.7 sport=80 dport=50000 packets=1 bytes=900 [ASSURED] mark=0 zone=0 use=2
ipv6     10 tcp      6 431999 ESTABLISHED src=fd77:0003:0000:0000:0000:0000:0000:0002 dst=fd77:0001:0000:0000:0000:0000:0000:0002 sport=40010 dport=443 packets=3 bytes=300 src=fd77:0001:0000:0000:0000:0000:0000:0002 dst=fd77:0003:0000:0000:0000:0000:0000:0002 sport=443 dport=40010 packets=3 bytes=700 [ASSURED] mark=0 zone=0 use=2
ipv4     2 icmp     1 29 src=10.77.3.2 dst=10.77.1.2 type=8 code=0 id=7 packets=1 bytes=84 src=10.77.1.2 dst=10.77.3.2 type=0 code=0 id=7 packets=1 bytes=84 mark=0 zone=0 use=2
garbage line
";

const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
    lan0\t00034D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
    wan0\t00014D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
    wan0\t00000000\t01014D0A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
const ROUTE6: &str = "\
fd770003000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 lan0
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 lan0
fd770001000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 wan0
";

#[test]
fn lan_prefixes_are_the_lan_interfaces_routes() {
    let p = lan_prefixes(ROUTE, ROUTE6, &["lan+".to_owned()]);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(p[0].address.to_string(), "10.77.3.0");
    assert_eq!(p[0].length, 24);
    assert_eq!(p[1].address.to_string(), "fd77:3::");
    assert_eq!(p[1].length, 64);
    assert!(p[0].contains("10.77.3.200".parse().unwrap()));
    assert!(!p[0].contains("10.77.4.2".parse().unwrap()));
    assert!(!p[0].contains("fd77:3::2".parse().unwrap()));
    assert!(p[1].contains("fd77:3::2".parse().unwrap()));
    assert!(lan_prefixes(ROUTE, ROUTE6, &["br-lan".to_owned()]).is_empty());
}

#[test]
fn conntrack_lines_parse_with_and_without_accounting() {
    let e = parse_conntrack(CONNTRACK);
    assert_eq!(e.len(), 6);
    assert_eq!(e[0].original.0, "10.77.3.2:40000".parse::<SocketAddr>().unwrap());
    assert_eq!(e[0].original.1, "10.77.1.2:5201".parse::<SocketAddr>().unwrap());
    assert_eq!(e[0].bytes, Some(21_000));
    assert_eq!(e[3].reply_source, "10.77.3.6".parse::<IpAddr>().unwrap());
    assert_eq!(e[4].original.0.ip(), "fd77:3::2".parse::<IpAddr>().unwrap());
    // The key follows the original tuple, not the counters.
    let moved = parse_conntrack(&CONNTRACK.replace("bytes=1000 ", "bytes=5000 "));
    assert_eq!(moved[0].key, e[0].key);
    assert_ne!(e[0].key, e[1].key);
    let plain = parse_conntrack(
        "ipv4 2 tcp 6 300 ESTABLISHED src=10.77.3.2 dst=10.77.1.2 sport=1 dport=2 src=10.77.1.2 dst=10.77.3.2 sport=2 dport=1 mark=0 use=1\n",
    );
    assert_eq!(plain[0].bytes, None);
}

#[test]
fn best_effort_per_host_from_two_reads() {
    let lan = lan_prefixes(ROUTE, ROUTE6, &["lan0".to_owned()]);
    let background: HashSet<(SocketAddr, SocketAddr)> = HashSet::from([(
        "10.77.1.2:6881".parse().unwrap(),
        "10.77.3.2:40002".parse().unwrap(),
    )]);
    let mut rates = ConntrackRates::default();
    let first = parse_conntrack(CONNTRACK);
    assert_eq!(rates.update(&first, 1_000, &lan, &background), None, "first read");
    let grown = CONNTRACK
        .replace("bytes=20000", "bytes=270000")
        .replace("bytes=90000", "bytes=9000000")
        .replace("bytes=700 ", "bytes=125700 ");
    let second = parse_conntrack(&grown);
    let r = rates.update(&second, 3_000, &lan, &background).unwrap();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    // 250 000 bytes in 2 s; the background flow, DNS to the router and the ping's unchanged
    // counters add nothing.
    assert_eq!(r[&ip("10.77.3.2")], 1e6);
    assert_eq!(r[&ip("fd77:3::2")], 0.5e6);
    assert_eq!(
        r.get(&ip("10.77.3.5")),
        None,
        "LAN-internal traffic is not best effort"
    );
    assert_eq!(r[&ip("10.77.3.6")], 0.0, "a port forward counts for its LAN host");
    // A gap of more than 10 s (the page was closed): no rate, the next read gives one again.
    assert_eq!(rates.update(&second, 20_000, &lan, &background), None);
    assert!(rates.update(&second, 21_000, &lan, &background).is_some());
    // Without accounting: nothing.
    let plain = parse_conntrack(
        "ipv4 2 tcp 6 300 ESTABLISHED src=10.77.3.2 dst=10.77.1.2 sport=1 dport=2 src=10.77.1.2 dst=10.77.3.2 sport=2 dport=1 mark=0 use=1\n",
    );
    assert_eq!(rates.update(&plain, 22_000, &lan, &background), None);
}

#[test]
fn a_yield_within_one_sample() {
    let mut h = HistoryRecorder::default();
    let mut t = 100_000;
    let start = LinkSample {
        flows: 0,
        ..link(0.0, 3e6)
    };
    h.record(input(t, vec![start], 0));
    t += 1;
    for bg in [2e6, 6e6, 8e6, 9e6, 9e6, 9.2e6] {
        h.record(input(t, vec![link(bg, 0.0)], 0));
        t += 1;
    }
    h.record(input(t, vec![link(0.2e6, 9.8e6)], 0));
    t += 1;
    h.record(input(t, vec![link(0.1e6, 9.9e6)], 0));
    let kinds: Vec<String> = h.view(None, 0).yields.into_iter().map(|y| y.kind).collect();
    assert_eq!(kinds, ["best_effort_arrived", "background_stepped_back"]);
}
