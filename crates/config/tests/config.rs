//! The TOML config: the shipped file and its commented examples, defaults, rule matching, and
//! errors that name the rule and field.

use slipstream_config::*;
use slipstream_control::{ControllerConfig, FixedWindowConfig, VultureConfig};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

fn shipped_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/slipstream.toml")
}

const MINIMAL: &str = r#"
[[rules]]
name = "bt"
remote_ports = [51413]
"#;

#[test]
fn shipped_config_parses_and_validates() {
    let config = load(&shipped_path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.datapath, Datapath::default());
    assert_eq!(config.metrics, Metrics::default());
    assert_eq!(config.limits, Limits::default());
    assert_eq!(config.household, slipstream_household::HouseholdConfig::default());
    let names: Vec<_> = config.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["bittorrent", "bittorrent-incoming", "dscp-background"]);
    assert_eq!(
        config.rules[0].remote_ports,
        [
            PortRange {
                first: 6881,
                last: 6999
            },
            PortRange::single(51413)
        ]
    );
    assert!(config.rules[0].local_ports.is_empty());
    assert_eq!(config.rules[1].local_ports, config.rules[0].remote_ports);
    assert_eq!(config.rules[2].dscp, [1, 8]);
    for rule in &config.rules {
        assert_eq!(rule.controller, ControllerConfig::Household);
        assert_eq!(rule.share, slipstream_household::ShareSpec::default());
        // Port 443 must not be background by default.
        assert!(!rule.remote_ports.iter().any(|p| p.contains(443)));
    }
}

#[test]
fn shipped_config_commented_examples_parse_when_uncommented() {
    let text = std::fs::read_to_string(shipped_path()).unwrap();
    let uncommented: String = text
        .lines()
        .map(|l| {
            let t = l.trim_start();
            if let Some(rest) = t.strip_prefix("# ") {
                if rest.starts_with("[[rules]]")
                    || [
                        "name",
                        "lan_hosts",
                        "lan_macs",
                        "remote_ports",
                        "controller",
                        "weight",
                        "min_rate",
                        "priority",
                        "preset",
                    ]
                    .iter()
                    .any(|k| rest.starts_with(&format!("{k} =")))
                {
                    return format!("{rest}\n");
                }
            }
            format!("{l}\n")
        })
        .collect();
    let config = parse(&uncommented, "uncommented").unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
    let names: Vec<_> = config.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names[3..],
        ["backup-box", "game-downloads", "nightly-sync", "downloads"]
    );
    assert_eq!(config.rules[6].presets.len(), 5);
    assert_eq!(config.rules[3].lan_hosts.len(), 2);
    assert_eq!(config.rules[3].controller, ControllerConfig::Household);
    assert_eq!(config.rules[3].share.weight, 1);
    assert_eq!(config.rules[4].lan_macs.len(), 1);
    assert_eq!(
        (config.rules[4].share.weight, config.rules[4].share.min_rate),
        (4, 625_000)
    );
    assert_eq!(
        config.rules[5].controller,
        ControllerConfig::FixedWindow(FixedWindowConfig { window_bytes: 65535 })
    );
}

#[test]
fn defaults_when_sections_omitted() {
    let config = parse(MINIMAL, "minimal.toml").unwrap();
    let d = &config.datapath;
    assert_eq!(d.lan_interfaces, ["br-lan"]);
    assert_eq!(d.hook, Hook::Forward);
    assert_eq!((d.ack_queue, d.data_queue), (8470, 8471));
    assert_eq!(d.queue_max_len, 4096);
    assert_eq!(d.data_copy_bytes, 65535);
    assert_eq!(d.ack_max_len, 128);
    assert_eq!(d.ack_max_len_v6(), 148);
    assert_eq!(d.firewall, FirewallBackend::Auto);
    assert_eq!(d.mark_mask, 0x00ff_0000);
    assert_eq!(d.mark_shift(), 16);
    assert_eq!(d.mark_for_rule(3), 0x0003_0000);
    assert!(d.ipv6);
    assert_eq!(config.metrics.listen, "127.0.0.1:9617".parse().unwrap());
    assert_eq!(config.metrics.top_flows, 32);
    assert_eq!(config.limits.max_flows, 4096);
    assert_eq!(config.limits.idle_timeout, Duration::from_secs(120));
    assert_eq!(config.limits.evict_idle_after, Duration::from_secs(10));
    assert_eq!(config.rules[0].controller, ControllerConfig::Household);
}

#[test]
fn full_example_from_the_brief() {
    let text = r#"
[datapath]
hook = "both"
firewall = "iptables"
mark_mask = 0xff
ipv6 = false
lan_interfaces = ["br-lan", "wlan+"]

[limits]
idle_timeout = "5m"
evict_idle_after = "20s"

[[rules]]
name = "bulk-downloads"
remote_ports = ["6881-6999", 51413]
controller = { kind = "vulture", psi = "20ms", piv_resolution = "4ms", conservative_low = "4ms", conservative_high = "8ms", aggressive_low = "12ms", aggressive_high = "20ms", alpha = 0.875 }

[[rules]]
name = "fixed"
dscp = ["CS1", 1, "le"]
controller = { kind = "fixed_window", window_bytes = 65535 }

[[rules]]
name = "table-form"
lan_hosts = ["192.168.1.77/24", "fd00::1"]
[rules.controller]
kind = "vulture"
alpha = 0.9
"#;
    let c = parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.datapath.hook, Hook::Both);
    assert_eq!(c.datapath.firewall, FirewallBackend::Iptables);
    assert_eq!(c.datapath.mark_shift(), 0);
    assert_eq!(c.limits.idle_timeout, Duration::from_secs(300));
    assert_eq!(
        c.rules[0].controller,
        ControllerConfig::Vulture(slipstream_config::default_vulture())
    );
    assert_eq!(c.rules[1].dscp, [8, 1, 1]);
    assert_eq!(
        c.rules[1].controller,
        ControllerConfig::FixedWindow(FixedWindowConfig { window_bytes: 65535 })
    );
    assert_eq!(c.rules[2].lan_hosts[0].to_string(), "192.168.1.0/24");
    assert_eq!(c.rules[2].lan_hosts[1].to_string(), "fd00::1/128");
    let ControllerConfig::Vulture(v) = &c.rules[2].controller else {
        panic!()
    };
    assert_eq!(v.alpha, 0.9);
    assert_eq!(v.psi, Duration::from_millis(20));
}

#[test]
fn port_range_parsing() {
    assert_eq!("443".parse::<PortRange>().unwrap(), PortRange::single(443));
    assert_eq!(
        "6881-6889".parse::<PortRange>().unwrap(),
        PortRange {
            first: 6881,
            last: 6889
        }
    );
    assert_eq!(
        " 10 - 20 ".parse::<PortRange>().unwrap(),
        PortRange { first: 10, last: 20 }
    );
    assert_eq!("80-80".parse::<PortRange>().unwrap(), PortRange::single(80));
    assert!("9000-80".parse::<PortRange>().unwrap_err().contains("reversed"));
    assert!("0".parse::<PortRange>().unwrap_err().contains("port 0"));
    assert!("70000".parse::<PortRange>().unwrap_err().contains("out of range"));
    assert!("http".parse::<PortRange>().is_err());
    assert!("1-2-3".parse::<PortRange>().is_err());
    assert_eq!(PortRange { first: 1, last: 5 }.to_string(), "1-5");
    assert_eq!(PortRange::single(7).to_string(), "7");
}

#[test]
fn dscp_names_in_toml() {
    let text = r#"
[[rules]]
name = "d"
dscp = ["LE", "CS1", "cs0", "AF11", "EF", 63, "46"]
"#;
    let c = parse(text, "t").unwrap();
    assert_eq!(c.rules[0].dscp, [1, 8, 0, 10, 46, 63, 46]);
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn matches_semantics() {
    let text = r#"
[[rules]]
name = "bt"
remote_ports = ["6881-6999", 51413]

[[rules]]
name = "host-and-dscp"
lan_hosts = ["192.168.1.20", "fd00::/64"]
dscp = ["LE", "CS1"]

[[rules]]
name = "local-port"
local_ports = [22]
remote_ports = ["1000-2000"]
"#;
    let c = parse(text, "t").unwrap();
    let [bt, host, lp] = &c.rules[..] else { panic!() };
    let a = ip("192.168.1.20");
    assert!(bt.matches(a, 40000, 6881, 0));
    assert!(bt.matches(a, 40000, 6999, 0));
    assert!(bt.matches(ip("fd00::5"), 40000, 51413, 46));
    assert!(!bt.matches(a, 40000, 7000, 0));
    assert!(
        !bt.matches(a, 6881, 443, 0),
        "local port must not satisfy remote_ports"
    );

    assert!(host.matches(a, 1, 443, 1));
    assert!(host.matches(a, 1, 443, 8));
    assert!(!host.matches(a, 1, 443, 0), "AND: dscp must match too");
    assert!(!host.matches(ip("192.168.1.21"), 1, 443, 8));
    assert!(host.matches(ip("fd00::abcd"), 1, 443, 8));
    assert!(!host.matches(ip("fd01::1"), 1, 443, 8));

    assert!(lp.matches(a, 22, 1500, 0));
    assert!(!lp.matches(a, 23, 1500, 0));
    assert!(!lp.matches(a, 22, 2001, 0));

    assert_eq!(c.classify(a, 22, 6881, 8), Some(1), "first match wins");
    assert_eq!(c.classify(a, 22, 1500, 8), Some(2));
    assert_eq!(c.classify(ip("10.0.0.1"), 22, 1500, 8), Some(3));
    assert_eq!(c.classify(ip("10.0.0.1"), 22, 443, 8), None);
    assert_eq!(c.rule_by_number(2).unwrap().name, "host-and-dscp");
    assert!(c.rule_by_number(0).is_none());
    assert!(c.rule_by_number(4).is_none());
}

/// Each bad config must fail with a message containing the field path (and maybe a phrase).
#[test]
fn bad_configs_name_the_field() {
    let rule = "[[rules]]\nname = \"r\"\nremote_ports = [1]\n";
    let cases: Vec<(String, &str, &str)> = vec![
        (String::new(), "rules", "at least one"),
        (
            format!("{rule}[[rules]]\nname = \"s\"\nremote_ports = [1]\n[[rules]]\nname = \"t\"\nremote_ports = [\"9000-80\"]\n"),
            "t.toml: rules[2].remote_ports[0]: port range 9000-80 is reversed",
            "",
        ),
        ("[[rules]]\nname = \"r\"\nremote_ports = [0]\n".into(), "rules[0].remote_ports[0]", "port 0"),
        ("[[rules]]\nname = \"r\"\nlocal_ports = [65536]\n".into(), "rules[0].local_ports[0]", "out of range"),
        ("[[rules]]\nname = \"r\"\nlocal_ports = [\"x\"]\n".into(), "rules[0].local_ports[0]", "not a port"),
        ("[[rules]]\nname = \"r\"\ndscp = [64]\n".into(), "rules[0].dscp[0]", "0..=63"),
        ("[[rules]]\nname = \"r\"\ndscp = [\"CS9\"]\n".into(), "rules[0].dscp[0]", "CS9"),
        ("[[rules]]\nname = \"r\"\nlan_hosts = [\"192.168.1.300/24\"]\n".into(), "rules[0].lan_hosts[0]", ""),
        ("[[rules]]\nname = \"r\"\n".into(), "rules[0]", "no criteria"),
        (format!("{rule}{rule}"), "rules[1].name", "duplicate"),
        ("[[rules]]\nname = \"\"\nremote_ports = [1]\n".into(), "rules[0].name", "empty"),
        ("[[rules]]\nname = \"a b\"\nremote_ports = [1]\n".into(), "rules[0].name", ""),
        (format!("{rule}controller = \"cubic\"\n"), "rules[0].controller.kind", "unknown controller"),
        (format!("{rule}controller = {{ kind = \"vulture\", psi = \"0ms\" }}\n"), "rules[0].controller.psi", "greater than zero"),
        (format!("{rule}controller = {{ kind = \"vulture\", psi = \"fast\" }}\n"), "rules[0].controller.psi", "not a duration"),
        (
            format!("{rule}controller = {{ kind = \"vulture\", conservative_low = \"8ms\", conservative_high = \"8ms\" }}\n"),
            "rules[0].controller.conservative_high",
            "greater than conservative_low",
        ),
        (
            format!("{rule}controller = {{ kind = \"vulture\", aggressive_low = \"30ms\" }}\n"),
            "rules[0].controller.aggressive_high",
            "greater than aggressive_low",
        ),
        (format!("{rule}controller = {{ kind = \"vulture\", alpha = 0.5 }}\n"), "rules[0].controller.alpha", "(0.5, 1.0]"),
        (format!("{rule}controller = {{ kind = \"vulture\", alpha = 1.01 }}\n"), "rules[0].controller.alpha", ""),
        (format!("{rule}controller = {{ kind = \"vulture\", window_bytes = 5 }}\n"), "rules[0].controller.window_bytes", "fixed_window parameter"),
        (format!("{rule}controller = {{ kind = \"fixed_window\", window_bytes = 0 }}\n"), "rules[0].controller.window_bytes", "out of range"),
        (format!("{rule}controller = {{ kind = \"fixed_window\" }}\n"), "rules[0].controller.window_bytes", "required"),
        (format!("{rule}controller = {{ kind = \"fixed_window\", window_bytes = 9, alpha = 0.9 }}\n"), "rules[0].controller.alpha", "vulture parameter"),
        (format!("{rule}controller = {{ kind = \"vulture\", bogus = 1 }}\n"), "rules[0].controller.bogus", "unknown parameter; vulture takes variant, queue_delay_limit, psi"),
        (format!("[datapath]\nack_queue = 5\ndata_queue = 5\n{rule}"), "datapath.data_queue", "must differ"),
        (format!("[datapath]\nack_queue = 70000\n{rule}"), "datapath.ack_queue", "out of range"),
        (format!("[datapath]\nengine = \"xdp\"\n{rule}"), "datapath.engine", "unknown engine \"xdp\""),
        (format!("[datapath]\nmark_mask = 0xf0f000\n{rule}"), "datapath.mark_mask", "contiguous"),
        (format!("[datapath]\nmark_mask = 0xf0\n{rule}"), "datapath.mark_mask", "at least 8 bits"),
        (format!("[datapath]\ndata_copy_bytes = 60\n{rule}"), "datapath.data_copy_bytes", "100..="),
        (format!("[datapath]\nack_max_len = 20\n{rule}"), "datapath.ack_max_len", "out of range"),
        (format!("[datapath]\nqueue_max_len = 0\n{rule}"), "datapath.queue_max_len", ""),
        (format!("[datapath]\nhook = \"prerouting\"\n{rule}"), "datapath.hook", "unknown hook"),
        (format!("[datapath]\nfirewall = \"pf\"\n{rule}"), "datapath.firewall", "unknown firewall"),
        (format!("[datapath]\nlan_interfaces = []\n{rule}"), "datapath.lan_interfaces", "router mode"),
        (format!("[datapath]\nlan_interfaces = [\"a very long interface\"]\n{rule}"), "datapath.lan_interfaces[0]", ""),
        (format!("[datapath]\nlan_interface = [\"br-lan\"]\n{rule}"), "line 2, column 1", "unknown field `lan_interface`"),
        ("[datapath]\nipv6 = false\n[[rules]]\nname = \"r\"\nlan_hosts = [\"fd00::/8\"]\n".into(), "rules[0].lan_hosts", "IPv6"),
        (format!("[metrics]\nlisten = \"localhost\"\n{rule}"), "metrics.listen", "not an address"),
        (format!("[metrics]\ntop_flows = 1001\n{rule}"), "metrics.top_flows", "0..=1000"),
        (format!("[limits]\nmax_flows = 0\n{rule}"), "limits.max_flows", "1..=1000000"),
        (format!("[limits]\nidle_timeout = \"0s\"\n{rule}"), "limits.idle_timeout", "greater than zero"),
        (format!("[limits]\nidle_timeout = 120\n{rule}"), "line 2", "expected a string"),
        (format!("[limits]\nidle_timeout = \"5s\"\n{rule}"), "limits.evict_idle_after", "longer than"),
        ("[[rules]\nname = 1\n".into(), "line 1", ""),
    ];
    for (text, path, phrase) in &cases {
        let err = match parse(text, "t.toml") {
            Ok(_) => panic!("accepted bad config:\n{text}"),
            Err(e) => e.to_string(),
        };
        eprintln!("{err}");
        assert!(err.starts_with("t.toml: "), "{err}");
        assert!(err.contains(path), "expected {path:?} in {err:?}\nfor:\n{text}");
        assert!(
            err.contains(phrase),
            "expected {phrase:?} in {err:?}\nfor:\n{text}"
        );
    }
}

#[test]
fn too_many_rules() {
    let text: String = (0..251)
        .map(|i| format!("[[rules]]\nname = \"r{i}\"\nremote_ports = [1]\n"))
        .collect();
    let err = parse(&text, "t").unwrap_err();
    assert_eq!(err.path(), "rules");
    assert!(err.message().contains("at most 250"), "{err}");
    let ok: String = (0..250)
        .map(|i| format!("[[rules]]\nname = \"r{i}\"\nremote_ports = [1]\n"))
        .collect();
    assert_eq!(parse(&ok, "t").unwrap().rules.len(), 250);
}

#[test]
fn load_names_missing_file() {
    let err = load(std::path::Path::new("/nonexistent/slipstream.toml")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/slipstream.toml: file: cannot read"),
        "{err}"
    );
}

#[test]
fn vulture_variants() {
    let rule = |controller: &str| {
        format!("[[rules]]\nname = \"r\"\nremote_ports = [6881]\ncontroller = {controller}\n")
    };
    let get = |text: String| match slipstream_config::parse(&text, "t.toml").unwrap().rules[0]
        .controller
        .clone()
    {
        ControllerConfig::Vulture(v) => v,
        other => panic!("not vulture: {other:?}"),
    };
    assert_eq!(
        get(rule(r#"{ kind = "vulture", variant = "paper" }"#)),
        VultureConfig::paper()
    );
    let slipstream = get(rule(r#"{ kind = "vulture", variant = "slipstream" }"#));
    assert_eq!(slipstream, slipstream_config::default_vulture());
    assert_eq!(
        slipstream.queue_delay_limit,
        Some(std::time::Duration::from_millis(10))
    );
    let off = get(rule(r#"{ kind = "vulture", queue_delay_limit = "off" }"#));
    assert_eq!(off.queue_delay_limit, None);
    assert!(off.bounded_steps, "other slipstream changes stay");
    let paper_guarded = get(rule(
        r#"{ kind = "vulture", variant = "paper", queue_delay_limit = "30ms" }"#,
    ));
    assert_eq!(
        paper_guarded.queue_delay_limit,
        Some(std::time::Duration::from_millis(30))
    );
    assert!(paper_guarded.draining_is_congestion);
    let err =
        slipstream_config::parse(&rule(r#"{ kind = "vulture", variant = "fast" }"#), "t.toml").unwrap_err();
    assert!(err.to_string().contains("rules[0].controller.variant"), "{err}");
    let err = slipstream_config::parse(
        &rule(r#"{ kind = "vulture", queue_delay_limit = "0s" }"#),
        "t.toml",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("rules[0].controller.queue_delay_limit"),
        "{err}"
    );
}
