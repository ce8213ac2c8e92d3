use super::*;
use std::io::{BufRead, BufReader, Write};

fn bulk() -> FlowInfo {
    FlowInfo {
        rule: "bittorrent".into(),
        rule_removed: false,
        matched_by: String::new(),
        controller: "vulture".into(),
        endpoints: ["192.168.1.20:40000".into(), "203.0.113.5:6881".into()],
        sender: Some("203.0.113.5:6881".into()),
        receiver: Some("192.168.1.20:40000".into()),
        mode: "conservative".into(),
        policy: "increase".into(),
        rwnd_bytes: Some(127_744),
        host_window_bytes: Some(3_145_728),
        target_window_bytes: Some(127_000),
        cwnd_estimate_bytes: Some(131_000),
        piv: Some(PivSummary {
            sum_ms: -1.5,
            positive_ratio: 0.3,
            count: 10,
        }),
        goodput_bps: 9_560_000.0,
        acked_bytes: 12_345_678,
        rtt_ms: Some(104.2),
        unclamped: None,
        link: Some("download".into()),
        allocation_bytes: None,
        held: false,
        protocol: "tcp".into(),
        policer: None,
    }
}

/// Two flows of a household rule on the download link: one with its share, one waiting.
fn shared() -> FlowInfo {
    FlowInfo {
        rule: "backups".into(),
        controller: "household".into(),
        mode: "household".into(),
        policy: "share".into(),
        allocation_bytes: Some(96_000),
        target_window_bytes: Some(96_000),
        cwnd_estimate_bytes: None,
        piv: None,
        goodput_bps: 4_000_000.0,
        ..bulk()
    }
}

fn waiting() -> FlowInfo {
    FlowInfo {
        endpoints: ["192.168.1.21:40001".into(), "203.0.113.6:6881".into()],
        sender: Some("203.0.113.6:6881".into()),
        receiver: Some("192.168.1.21:40001".into()),
        policy: "hold".into(),
        allocation_bytes: Some(0),
        target_window_bytes: Some(0),
        held: true,
        protocol: "tcp".into(),
        policer: None,
        goodput_bps: 0.0,
        ..shared()
    }
}

fn household() -> Vec<LinkStatus> {
    vec![
        LinkStatus {
            link: "download".into(),
            controller: "delay_target".into(),
            phase: "hold".into(),
            budget_bytes: 150_000,
            in_flight_bytes: 120_000,
            queue_delay_ms: Some(4.5),
            base_rtt_ms: Some(20.0),
            queue_target_ms: Some(3.0),
            queue_aim_ms: Some(1.0),
            best_effort_pace: Some("steady".into()),
            flows: 3,
            held_flows: 1,
            goodput_bps: 8_000_000.0,
            best_effort_bps: Some(1_500_000.0),
            slowdowns: 2,
            window_updates: 5,
        },
        LinkStatus {
            link: "upload".into(),
            controller: "delay_target".into(),
            phase: "idle".into(),
            budget_bytes: 14_480,
            ..LinkStatus::default()
        },
    ]
}

fn fresh() -> FlowInfo {
    FlowInfo {
        rule: "old-rule".into(),
        rule_removed: true,
        controller: "fixed_window".into(),
        endpoints: ["[fd00::2]:50000".into(), "[2001:db8::1]:22".into()],
        unclamped: Some("rule_removed".into()),
        ..FlowInfo::default()
    }
}

fn status() -> Status {
    Status {
        version: "0.1.0".into(),
        pid: 4242,
        uptime_secs: 3723,
        config_path: "/etc/config/slipstream".into(),
        config_loaded_unix: 1_000_000 - 90,
        reloads_ok: 2,
        reloads_failed: 1,
        last_reload_error: Some(
            "/etc/config/slipstream: rule 'x' (line 3), option remote_port (line 4): bad port".into(),
        ),
        restart_needed: vec!["datapath.ack_queue changed 8470 -> 9000; keeping 8470".into()],
        rules: vec![
            RuleStatus {
                name: "bittorrent".into(),
                controller: "vulture".into(),
                active_flows: 3,
                flows_started: 17,
                removed: false,
            },
            RuleStatus {
                name: "gone".into(),
                controller: "fixed_window".into(),
                active_flows: 1,
                flows_started: 4,
                removed: true,
            },
        ],
        firewall: FirewallStatus {
            backend: "iptables-legacy".into(),
            installed: true,
            last_check_unix: Some(1_000_000 - 2),
            reapplied: 1,
            last_error: None,
        },
        datapath: "nfqueue".into(),
        ack_queue: 8470,
        data_queue: 8471,
        packets: 1000,
        packets_rewritten: 600,
        packets_passed: 400,
        flows_active: 4,
        flows_max: 4096,
        datapath_errors: 0,
        household: household(),
        name_sets: vec![NameSetStatus {
            rule: "games".into(),
            set: "ss_dst_games_4".into(),
            entries: Some(3),
        }],
        probe: Some(ProbeStatus {
            target: "192.0.2.1 (gateway via wan)".into(),
            sent: 120,
            answered: 118,
            lost: 2,
            last_rtt_ms: Some(23.5),
        }),
    }
}

#[test]
fn requests_are_one_json_line_each() {
    assert_eq!(Request::Status.to_line(), "{\"cmd\":\"status\"}\n");
    assert_eq!(Request::Flows.to_line(), "{\"cmd\":\"flows\"}\n");
    for r in [Request::Status, Request::Flows] {
        assert_eq!(Request::parse_line(&r.to_line()), Ok(r));
    }
    assert_eq!(
        Request::parse_line("  {\"cmd\": \"flows\"}\r\n"),
        Ok(Request::Flows)
    );
    let e = Request::parse_line("{\"cmd\":\"reboot\"}").unwrap_err();
    assert!(
        e.contains("bad request") && e.contains("{\"cmd\":\"status\"}"),
        "{e}"
    );
    assert!(Request::parse_line("status").is_err());
}

#[test]
fn responses_round_trip() {
    let responses = [
        Response::Status(Box::new(status())),
        Response::Flows(FlowList {
            active: 2,
            max: 4096,
            flows: vec![bulk(), fresh(), shared(), waiting()],
        }),
        Response::Error("the packet thread has stopped".into()),
    ];
    for r in responses {
        let line = r.to_line();
        assert!(
            line.ends_with('\n') && !line[..line.len() - 1].contains('\n'),
            "{line}"
        );
        assert_eq!(Response::parse_line(&line).unwrap(), r);
    }
    let line = Response::Error("x".into()).to_line();
    assert_eq!(line, "{\"error\":\"x\"}\n");
    let flows = Response::Flows(FlowList::default()).to_line();
    assert_eq!(flows, "{\"flows\":{\"active\":0,\"max\":0,\"flows\":[]}}\n");
    // Units are in the field names, unknowns are null.
    let text = Response::Flows(FlowList {
        flows: vec![fresh()],
        ..FlowList::default()
    })
    .to_line();
    for field in [
        "\"rwnd_bytes\":null",
        "\"goodput_bps\":0.0",
        "\"rtt_ms\":null",
        "\"rule_removed\":true",
        "\"link\":null",
        "\"allocation_bytes\":null",
        "\"held\":false",
    ] {
        assert!(text.contains(field), "{field} in {text}");
    }
    let text = Response::Flows(FlowList {
        flows: vec![waiting()],
        ..FlowList::default()
    })
    .to_line();
    for field in ["\"link\":\"download\"", "\"allocation_bytes\":0", "\"held\":true"] {
        assert!(text.contains(field), "{field} in {text}");
    }
    let text = Response::Status(Box::new(status())).to_line();
    for field in [
        "\"household\":[{\"link\":\"download\",\"controller\":\"delay_target\",\"phase\":\"hold\",\
         \"budget_bytes\":150000,\"in_flight_bytes\":120000,\"queue_delay_ms\":4.5,\"base_rtt_ms\":20.0,\
         \"queue_target_ms\":3.0,\"queue_aim_ms\":1.0,\"best_effort_pace\":\"steady\",\"flows\":3,\"held_flows\":1,\"goodput_bps\":8000000.0,\"best_effort_bps\":1500000.0,\"slowdowns\":2,\"window_updates\":5}",
        "\"queue_delay_ms\":null,\"base_rtt_ms\":null",
    ] {
        assert!(text.contains(field), "{field} in {text}");
    }
}

#[test]
fn answers_of_a_daemon_without_household_control_still_parse() {
    // A daemon from before household control sends neither `household` nor the flows' link,
    // allocation and held fields.
    let mut status = serde_json::to_value(status()).unwrap();
    status.as_object_mut().unwrap().remove("household");
    let line = format!("{{\"status\":{status}}}");
    match Response::parse_line(&line).unwrap() {
        Response::Status(s) => assert!(s.household.is_empty()),
        other => panic!("{other:?}"),
    }
    let mut flow = serde_json::to_value(bulk()).unwrap();
    for field in ["link", "allocation_bytes", "held"] {
        flow.as_object_mut().unwrap().remove(field);
    }
    let line = format!("{{\"flows\":{{\"active\":1,\"max\":9,\"flows\":[{flow}]}}}}");
    match Response::parse_line(&line).unwrap() {
        Response::Flows(f) => {
            let f = &f.flows[0];
            assert_eq!(
                (f.link.as_deref(), f.allocation_bytes, f.held),
                (None, None, false)
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn query_talks_one_line_each_way() {
    let dir = std::env::temp_dir().join(format!("ss-inspect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sock");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line).unwrap();
        let answer = match Request::parse_line(&line) {
            Ok(Request::Status) => Response::Status(Box::new(status())),
            Ok(Request::Flows) => Response::Flows(FlowList::default()),
            Err(e) => Response::Error(e),
        };
        (&stream).write_all(answer.to_line().as_bytes()).unwrap();
    });
    assert_eq!(
        query(&path, &Request::Status).unwrap(),
        Response::Status(Box::new(status()))
    );
    server.join().unwrap();
    std::fs::remove_dir_all(&dir).ok();

    let e = query(&dir.join("none.sock"), &Request::Flows).unwrap_err();
    assert!(e.to_string().contains("is slipstreamd running?"), "{e}");
}

#[test]
fn units() {
    assert_eq!(fmt_bytes(999), "999 B");
    assert_eq!(fmt_bytes(127_744), "127.7 kB");
    assert_eq!(fmt_bytes(12_345_678), "12.35 MB");
    assert_eq!(fmt_rate(9_560_000.0), "9.56 Mbit/s");
    assert_eq!(fmt_rate(140_000.0), "140 kbit/s");
    assert_eq!(fmt_ms(104.2), "104 ms");
    assert_eq!(fmt_ms(2.25), "2.2 ms");
    assert_eq!(fmt_duration(7), "7s");
    assert_eq!(fmt_duration(3723), "1h 2m");
    assert_eq!(fmt_duration(90_061), "1d 1h");
}

#[test]
fn lan_host_is_the_private_end_else_the_receiver() {
    assert_eq!(
        lan_and_remote(&bulk()),
        ("192.168.1.20:40000".into(), "203.0.113.5:6881".into(), "down")
    );
    let upload = FlowInfo {
        sender: Some("192.168.1.20:40000".into()),
        receiver: Some("203.0.113.5:6881".into()),
        ..bulk()
    };
    assert_eq!(lan_and_remote(&upload).2, "up");
    assert_eq!(
        lan_and_remote(&fresh()),
        ("[fd00::2]:50000".into(), "[2001:db8::1]:22".into(), "?")
    );
    // Both private (a lab): the receiver is taken as the LAN host.
    let lab = FlowInfo {
        endpoints: ["10.77.1.2:6881".into(), "10.77.3.2:40000".into()],
        sender: Some("10.77.1.2:6881".into()),
        receiver: Some("10.77.3.2:40000".into()),
        ..bulk()
    };
    assert_eq!(
        lan_and_remote(&lab),
        ("10.77.3.2:40000".into(), "10.77.1.2:6881".into(), "down")
    );
}

#[test]
fn flows_table_is_aligned_with_units() {
    let text = render_flows(&FlowList {
        active: 2,
        max: 4096,
        flows: vec![bulk(), fresh()],
    });
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].starts_with("LAN HOST"), "{text}");
    for col in [
        "REMOTE",
        "CLASS",
        "LINK",
        "ALLOC",
        "HELD",
        "RWND",
        "HOST WND",
        "CWND EST",
        "PIV SUM/POS/N",
        "GOODPUT",
        "RTT",
        "UNCLAMPED",
    ] {
        assert!(lines[0].contains(col), "{col}: {text}");
    }
    // Columns line up: every header starts where its cells start (left-aligned ones) ...
    let class_at = lines[0].find("CLASS").unwrap();
    assert_eq!(&lines[1][class_at..class_at + 10], "bittorrent");
    assert_eq!(&lines[2][class_at..class_at + 18], "old-rule (removed)");
    // ... and right-aligned numbers end where their header ends.
    let rtt_end = lines[0].find("RTT").unwrap() + 3;
    assert_eq!(&lines[1][rtt_end - 6..rtt_end], "104 ms");
    assert_eq!(&lines[2][rtt_end - 1..rtt_end], "-");
    for cell in [
        "192.168.1.20:40000",
        "203.0.113.5:6881",
        "down",
        "vulture",
        "conservative/increase",
        "127.7 kB",
        "3.15 MB",
        "131.0 kB",
        "-1.5 ms/30%/10",
        "9.56 Mbit/s",
        "12.35 MB",
    ] {
        assert!(lines[1].contains(cell), "{cell}: {}", lines[1]);
    }
    let link_at = lines[0].find("LINK").unwrap();
    assert_eq!(&lines[1][link_at..link_at + 8], "download");
    assert_eq!(&lines[2][link_at..link_at + 2], "- ");
    assert!(
        lines[2].contains("rule_removed") && lines[2].contains("0 kbit/s"),
        "{}",
        lines[2]
    );
    assert_eq!(lines[3], "2 flows (table 2/4096), goodput 9.56 Mbit/s");

    // Household flows: their link, their allocation, and HELD for the one waiting its turn.
    let text = render_flows(&FlowList {
        active: 3,
        max: 4096,
        flows: vec![shared(), waiting(), bulk()],
    });
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    let (alloc_end, held_at) = (
        lines[0].find("ALLOC").unwrap() + 5,
        lines[0].find("HELD").unwrap(),
    );
    assert_eq!(&lines[1][alloc_end - 7..alloc_end], "96.0 kB", "{text}");
    assert_eq!(&lines[2][alloc_end - 3..alloc_end], "0 B", "{text}");
    assert_eq!(&lines[3][alloc_end - 1..alloc_end], "-", "{text}");
    assert_eq!(&lines[1][held_at..held_at + 2], "- ", "{text}");
    assert_eq!(&lines[2][held_at..held_at + 4], "HELD", "{text}");
    assert_eq!(&lines[3][held_at..held_at + 2], "- ", "{text}");
    assert!(lines[2].contains("household/hold"), "{text}");
    assert_eq!(lines[4], "3 flows (table 3/4096), goodput 13.56 Mbit/s, 1 held");

    let empty = render_flows(&FlowList {
        active: 0,
        max: 10,
        flows: vec![],
    });
    assert_eq!(empty, "no flows\n0 flows (table 0/10), goodput 0 kbit/s\n");
}

#[test]
fn status_text() {
    let text = render_status(&status(), 1_000_000);
    for line in [
        "slipstreamd 0.1.0 (pid 4242), up 1h 2m",
        "config      /etc/config/slipstream (loaded 1m 30s ago; reloads: 2 ok, 1 failed)",
        "last reload FAILED, previous config still in force: /etc/config/slipstream: rule 'x' (line 3), option remote_port (line 4): bad port",
        "restart needed: datapath.ack_queue changed 8470 -> 9000; keeping 8470",
        "firewall    iptables-legacy, rules installed (checked 2s ago), re-applied 1 times",
        "queues      ack 8470, data 8471",
        "packets     1000 handled, 600 rewritten, 400 passed; 0 datapath errors",
        "flows       4 active of 4096 max",
        "probes      192.0.2.1 (gateway via wan): 120 sent, 118 answered, 2 lost, last RTT 24 ms",
        "#  RULE            CONTROLLER    ACTIVE FLOWS  STARTED",
        "1  bittorrent      vulture                  3       17",
        "-  gone (removed)  fixed_window             1        4",
        "HOUSEHOLD  CONTROLLER/PHASE     BUDGET  IN FLIGHT  QUEUE DELAY  TARGET             BASE RTT  FLOWS  HELD      GOODPUT  SLOWDOWNS",
        "download   delay_target/hold  150.0 kB   120.0 kB       4.5 ms  3.0/1.0 ms steady     20 ms      3     1  8.00 Mbit/s          2",
        "upload     delay_target/idle   14.5 kB        0 B            -  -                         -      0     0     0 kbit/s          0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} not in\n{text}");
    }
    let missing = Status {
        firewall: FirewallStatus {
            installed: false,
            last_check_unix: None,
            last_error: Some("iptables-legacy: chain FORWARD has 0 jumps".into()),
            ..status().firewall
        },
        last_reload_error: None,
        ..status()
    };
    let text = render_status(&missing, 1_000_000);
    assert!(text.contains("rules MISSING (not checked yet)"), "{text}");
    assert!(
        text.contains("\nnames       rule games: set ss_dst_games_4 holds 3 addresses\n"),
        "{text}"
    );
    assert!(
        text.contains("firewall error: iptables-legacy: chain FORWARD has 0 jumps"),
        "{text}"
    );
    assert!(!text.contains("last reload FAILED"), "{text}");
    // Without household control there is no household block.
    let plain = Status {
        household: Vec::new(),
        ..status()
    };
    let text = render_status(&plain, 1_000_000);
    assert!(!text.contains("HOUSEHOLD"), "{text}");
    assert!(
        text.ends_with("-  gone (removed)  fixed_window             1        4\n"),
        "{text}"
    );
}

#[test]
#[ignore = "prints the CLI's text views for a look: cargo test -p slipstream-inspect -- --ignored --nocapture"]
fn print_views() {
    print!("{}", render_status(&status(), 1_000_000));
    println!();
    print!(
        "{}",
        render_flows(&FlowList {
            active: 4,
            max: 4096,
            flows: vec![bulk(), shared(), waiting(), fresh()],
        })
    );
}

#[test]
fn flows_show_how_a_rule_classes_by_name() {
    let mut f = bulk();
    f.rule = "games".into();
    f.matched_by = "preset steam+epic".into();
    let list = FlowList {
        active: 1,
        max: 10,
        flows: vec![f.clone()],
    };
    assert!(render_flows(&list).contains("games [preset steam+epic]"));
    // Older daemons send no matched_by: it reads as empty.
    let mut json = serde_json::to_value(&f).unwrap();
    json.as_object_mut().unwrap().remove("matched_by");
    let back: FlowInfo = serde_json::from_value(json).unwrap();
    assert_eq!(back.matched_by, "");
}
