//! The UCI reader: same Config as the TOML for the same settings, and errors that name the UCI
//! section, option and line.

use slipstream_config::*;
use slipstream_control::{ControllerConfig, FixedWindowConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(p)
}

fn uci(text: &str) -> Config {
    parse_uci(text, "/etc/config/slipstream").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn uci_err(text: &str) -> ConfigError {
    match parse_uci(text, "/etc/config/slipstream") {
        Ok(c) => panic!("accepted:\n{text}\n{c:?}"),
        Err(e) => e,
    }
}

#[test]
fn shipped_uci_file_equals_shipped_toml() {
    let from_uci = load(&repo("openwrt/files/slipstream.config")).unwrap_or_else(|e| panic!("{e}"));
    let from_toml = load(&repo("config/slipstream.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(from_uci, from_toml);
    assert!(from_uci.enabled);
    assert_eq!(from_uci.control.socket, Path::new("/var/run/slipstream.sock"));
}

#[test]
fn shipped_uci_examples_parse_when_uncommented() {
    let text = std::fs::read_to_string(repo("openwrt/files/slipstream.config")).unwrap();
    let uncommented: String = text
        .lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest) if rest.starts_with("config rule") || rest.starts_with('\t') => format!("{rest}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let c = uci(&uncommented);
    let names: Vec<_> = c.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "bittorrent",
            "bittorrent-incoming",
            "dscp-background",
            "backup-box",
            "game-downloads",
            "nightly-sync",
            "downloads"
        ],
        "windows_update_peers is disabled"
    );
    assert_eq!(c.rules[3].controller, ControllerConfig::Household);
    assert_eq!(
        c.rules[4].lan_macs,
        ["aa:bb:cc:dd:ee:ff".parse::<MacAddr>().unwrap()]
    );
    assert_eq!((c.rules[4].share.weight, c.rules[4].share.min_rate), (4, 625_000));
    assert_eq!(
        c.rules[5].controller,
        ControllerConfig::FixedWindow(FixedWindowConfig { window_bytes: 65535 })
    );
}

/// Every option, non-default values, in both syntaxes: the same Config.
#[test]
fn every_option_means_the_same_as_in_toml() {
    let u = uci(r#"
package slipstream

config slipstream 'main'
	option enabled 'no'
	list lan_interface 'br-lan'
	list lan_interface 'wlan+'
	option hook 'forward'
	option ack_queue '100'
	option data_queue '101'
	option queue_max_len '512'
	option data_copy_bytes '160'
	option ack_max_len '100'
	option firewall 'iptables'
	option mark_mask '0xff00'
	option ipv6 'off'
	option metrics_listen '0.0.0.0:9000'
	option top_flows '5'
	option max_flows '100'
	option idle_timeout '5m'
	option evict_idle_after '30s'
	option control_socket '/tmp/ss.sock'

config rule 'a'
	option enabled 'true'
	list remote_port '6881-6999'
	list remote_port '51413'
	option local_port '1000 2000-2010'
	list dscp 'LE'
	list dscp '8'
	list lan_host '192.168.1.0/24'
	list lan_mac 'AA:BB:CC:00:11:22'
	option controller 'vulture'
	option variant 'paper'
	option queue_delay_limit 'off'
	option psi '30ms'
	option piv_resolution '2ms'
	option conservative_low '3ms'
	option conservative_high '9ms'
	option aggressive_low '11ms'
	option aggressive_high '25ms'
	option alpha '0.9'

config rule
	option name 'b.fixed'
	option lan_host '10.0.0.5'
	option controller 'fixed_window'
	option window_bytes '65535'

config rule 'c'
	option enabled '0'
	option dscp 'CS1'
"#);
    let t = parse(
        r#"
enabled = false
[datapath]
lan_interfaces = ["br-lan", "wlan+"]
hook = "forward"
ack_queue = 100
data_queue = 101
queue_max_len = 512
data_copy_bytes = 160
ack_max_len = 100
firewall = "iptables"
mark_mask = 0xff00
ipv6 = false
[metrics]
listen = "0.0.0.0:9000"
top_flows = 5
[limits]
max_flows = 100
idle_timeout = "5m"
evict_idle_after = "30s"
[control]
socket = "/tmp/ss.sock"
[[rules]]
name = "a"
enabled = true
remote_ports = ["6881-6999", 51413]
local_ports = [1000, "2000-2010"]
dscp = ["LE", 8]
lan_hosts = ["192.168.1.0/24"]
lan_macs = ["aa:bb:cc:00:11:22"]
controller = { kind = "vulture", variant = "paper", queue_delay_limit = "off", psi = "30ms", piv_resolution = "2ms", conservative_low = "3ms", conservative_high = "9ms", aggressive_low = "11ms", aggressive_high = "25ms", alpha = 0.9 }
[[rules]]
name = "b.fixed"
lan_hosts = ["10.0.0.5"]
controller = { kind = "fixed_window", window_bytes = 65535 }
[[rules]]
name = "c"
enabled = false
dscp = ["CS1"]
"#,
        "t.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(u, t);
    assert!(!u.enabled);
    assert_eq!(u.datapath.mark_mask, 0xff00);
    assert_eq!(u.limits.idle_timeout, Duration::from_secs(300));
    assert_eq!(u.rules.len(), 2, "the disabled rule is left out");
    assert_eq!(u.rules[0].local_ports.len(), 2);
    assert_eq!(u.rules[0].lan_macs[0].to_string(), "aa:bb:cc:00:11:22");
    assert_eq!(u.rules[0].dscp, [1, 8]);
}

#[test]
fn defaults_without_a_main_section() {
    let c = uci("config rule 'bt'\n\toption remote_port '51413'\n");
    let t = parse("[[rules]]\nname = \"bt\"\nremote_ports = [51413]\n", "t").unwrap();
    assert_eq!(c, t);
    assert!(c.enabled);
    assert_eq!(c.datapath, Datapath::default());
    assert_eq!(c.control, Control::default());
}

#[test]
fn list_and_option_forms_are_equivalent() {
    let a = uci("config rule 'r'\n list remote_port '1'\n list remote_port '2-3'\n");
    let b = uci("config rule 'r'\n option remote_port '1 2-3'\n");
    let c = uci("config rule 'r'\n option remote_port 1\n list remote_port 2-3\n");
    assert_eq!(a, b);
    assert_eq!(
        a, c,
        "libuci: a list after an option keeps the option's value first"
    );
    // An option after a list replaces it.
    let d = uci("config rule 'r'\n list remote_port '1'\n option remote_port '7'\n");
    assert_eq!(d.rules[0].remote_ports, [PortRange::single(7)]);
    // A later option replaces an earlier one.
    let e = uci("config slipstream 'main'\n option top_flows 3\n option top_flows 4\nconfig rule 'r'\n option dscp LE\n");
    assert_eq!(e.metrics.top_flows, 4);
}

#[test]
fn quoting_rules() {
    let c = uci(concat!(
        "config slipstream main # unquoted section name, comment\n",
        "\toption metrics_listen \"127.0.0.1:\"'9000' ; option top_flows 7\n",
        "config rule \"r\"\n",
        "\toption name 'with.dot'\n",
        "\toption remote_port \"6881\\-6889\"\n",
        "\toption controller vulture\n",
    ));
    assert_eq!(c.metrics.listen, "127.0.0.1:9000".parse().unwrap());
    assert_eq!(c.metrics.top_flows, 7);
    assert_eq!(c.rules[0].name, "with.dot");
    assert_eq!(
        c.rules[0].remote_ports,
        [PortRange {
            first: 6881,
            last: 6889
        }]
    );
}

#[test]
fn disabled_rules_take_no_number_but_are_checked() {
    let c =
        uci("config rule 'off'\n option enabled 0\n option dscp LE\nconfig rule 'on'\n option dscp CS1\n");
    assert_eq!(c.rules.len(), 1);
    assert_eq!(c.rule_by_number(1).unwrap().name, "on");
    let e = uci_err(
        "config rule 'off'\n option enabled 0\n option remote_port '9000-80'\nconfig rule 'on'\n option dscp CS1\n",
    );
    assert_eq!(e.path(), "rule 'off' (line 1), option remote_port (line 3)");
    let e = uci_err("config rule 'a'\n option enabled 0\n option dscp LE\n");
    assert!(e.message().contains("all 1 rules are disabled"), "{e}");
    assert!(e.message().contains("option enabled = false"), "{e}");
    // With Slipstream disabled, disabled (or no) rules are fine.
    let c = uci(
        "config slipstream 'main'\n option enabled 0\nconfig rule 'a'\n option enabled 0\n option dscp LE\n",
    );
    assert!(!c.enabled && c.rules.is_empty());
    // Duplicate names count disabled rules too.
    let e = uci_err(
        "config rule 'a'\n option enabled 0\n option dscp LE\nconfig rule\n option name a\n option dscp 1\n",
    );
    assert_eq!(e.path(), "rule @rule[1] (line 4), option name (line 5)");
}

/// Every class of error names the section, the option and the line.
#[test]
fn errors_name_section_option_and_line() {
    let main = "config slipstream 'main'\n";
    let rule = "config rule 'r'\n option dscp LE\n";
    let cases: Vec<(String, &str, &str)> = vec![
        // syntax
        ("config rule 'r'\n option dscp 'LE\n".into(), "line 2", "unterminated ' quote"),
        // unknown section type / option / list misuse
        (format!("{rule}config rules 'x'\n"), "line 3", "unknown section type \"rules\"; known: slipstream, household, rule"),
        (format!("{main} option ack_queues 1\n{rule}"), "slipstream 'main' (line 1), option ack_queues (line 2)", "unknown option; known options of a `config slipstream` section: enabled, lan_interface"),
        ("config rule 'r'\n option remote_ports 1\n".into(), "rule 'r' (line 1), option remote_ports (line 2)", "remote_port, local_port"),
        (format!("{main} list hook forward\n{rule}"), "slipstream 'main' (line 1), option hook (line 2)", "takes a single value: write `option hook`"),
        (format!("{main}{rule}config slipstream 'two'\n"), "slipstream 'two' (line 4)", "only one `config slipstream` section is allowed (the first is at line 1)"),
        // UCI-level type errors
        (format!("{main} option ack_queue 'x1'\n{rule}"), "slipstream 'main' (line 1), option ack_queue (line 2)", "\"x1\" is not an integer"),
        (format!("{main} option ipv6 'maybe'\n{rule}"), "slipstream 'main' (line 1), option ipv6 (line 2)", "is not a boolean"),
        (format!("{main} option enabled '2'\n{rule}"), "slipstream 'main' (line 1), option enabled (line 2)", "is not a boolean"),
        ("config rule 'r'\n option dscp LE\n option controller 'vulture'\n option alpha 'x'\n".into(), "rule 'r' (line 1), option alpha (line 4)", "is not a number"),
        // anonymous rule without a name
        ("config rule\n option dscp LE\n".into(), "rule @rule[0] (line 1)", "needs `option name"),
        // validator errors, global section
        (format!("{main} option hook 'router'\n{rule}"), "slipstream 'main' (line 1), option hook (line 2)", "unknown hook \"router\""),
        (format!("{main} option data_queue 8470\n{rule}"), "slipstream 'main' (line 1), option data_queue (line 2)", "must differ from option ack_queue (both are 8470)"),
        (format!("{main} list lan_interface 'br-lan'\n list lan_interface 'way-too-long-name0'\n{rule}"), "slipstream 'main' (line 1), option lan_interface (line 3)", "1 to 15 characters"),
        (format!("{main} option mark_mask 0xf0\n{rule}"), "slipstream 'main' (line 1), option mark_mask (line 2)", "contiguous run of at least 8 bits"),
        (format!("{main} option metrics_listen 'localhost'\n{rule}"), "slipstream 'main' (line 1), option metrics_listen (line 2)", "not an address"),
        (format!("{main} option top_flows 5000\n{rule}"), "slipstream 'main' (line 1), option top_flows (line 2)", "out of range (0..=1000)"),
        (format!("{main} option idle_timeout 'soon'\n{rule}"), "slipstream 'main' (line 1), option idle_timeout (line 2)", "not a duration"),
        (format!("{main} option idle_timeout 5s\n option evict_idle_after 10s\n{rule}"), "slipstream 'main' (line 1), option evict_idle_after (line 3)", "longer than option idle_timeout"),
        (format!("{main} option control_socket 'relative.sock'\n{rule}"), "slipstream 'main' (line 1), option control_socket (line 2)", "not an absolute path"),
        (main.into(), "config rule", "at least one `config rule` section is required"),
        // validator errors, rules
        ("config rule 'bittorrent'\n list remote_port 6881\n list remote_port '9000-80'\n".into(), "rule 'bittorrent' (line 1), option remote_port (line 3)", "port range 9000-80 is reversed"),
        ("config rule 'r'\n option local_port '22 0'\n".into(), "rule 'r' (line 1), option local_port (line 2)", "port 0"),
        ("config rule 'r'\n list dscp 'XX'\n".into(), "rule 'r' (line 1), option dscp (line 2)", "not a DSCP value"),
        ("config rule 'r'\n list lan_host '192.168.1.300'\n".into(), "rule 'r' (line 1), option lan_host (line 2)", "not an address or CIDR"),
        ("config rule 'r'\n list lan_mac 'aa:bb:cc:dd:ee'\n".into(), "rule 'r' (line 1), option lan_mac (line 2)", "not a MAC address"),
        ("config rule 'r'\n list lan_mac '01:00:5e:00:00:01'\n".into(), "rule 'r' (line 1), option lan_mac (line 2)", "multicast"),
        (format!("{main} option hook local\nconfig rule 'r'\n list lan_mac 'aa:bb:cc:dd:ee:ff'\n"), "rule 'r' (line 3), option lan_mac (line 4)", "need option hook = \"forward\""),
        ("config rule 'r'\n option controller vulture\n".into(), "rule 'r' (line 1)", "has no criteria (remote_port, local_port, dscp, lan_host, lan_mac, lan_hostname, domain, preset)"),
        ("config rule 'r'\n option name 'bad name'\n option dscp LE\n".into(), "rule 'r' (line 1), option name (line 2)", "letters, digits"),
        ("config rule 'r'\n option dscp LE\n option controller 'magic'\n".into(), "rule 'r' (line 1), option controller (line 3)", "unknown controller \"magic\""),
        ("config rule 'r'\n option dscp LE\n option controller 'fixed_window'\n".into(), "rule 'r' (line 1), option window_bytes", "is required for controller 'fixed_window'"),
        ("config rule 'r'\n option dscp LE\n option controller 'fixed_window'\n option psi 5ms\n option window_bytes 100\n".into(), "rule 'r' (line 1), option psi (line 4)", "is a vulture parameter"),
        ("config rule 'r'\n option dscp LE\n option window_bytes 100\n".into(), "rule 'r' (line 1), option window_bytes (line 3)", "is a fixed_window parameter"),
        ("config rule 'r'\n option dscp LE\n option controller 'vulture'\n option conservative_low 9ms\n".into(), "rule 'r' (line 1), option conservative_high", "must be greater than conservative_low"),
        ("config rule 'r'\n option dscp LE\n option controller 'vulture'\n option variant 'x'\n".into(), "rule 'r' (line 1), option variant (line 4)", "unknown variant"),
        ("config rule 'r'\n option dscp LE\n option controller 'vulture'\n option alpha 0.2\n".into(), "rule 'r' (line 1), option alpha (line 4)", "outside (0.5, 1.0]"),
        (format!("{main} option ipv6 0\nconfig rule 'r'\n list lan_host 'fd00::/64'\n"), "rule 'r' (line 3), option lan_host (line 4)", "option ipv6 is false"),
    ];
    for (text, path, message) in cases {
        let e = uci_err(&text);
        assert_eq!(e.origin(), "/etc/config/slipstream");
        assert_eq!(e.path(), path, "{text}\n=> {e}");
        assert!(e.message().contains(message), "{text}\n=> {e}\nwanted: {message}");
    }
    // The whole message, as the daemon prints it.
    let e = uci_err("config rule 'bittorrent'\n\tlist remote_port '9000-80'\n");
    assert_eq!(
        e.to_string(),
        "/etc/config/slipstream: rule 'bittorrent' (line 1), option remote_port (line 2): port range 9000-80 is reversed"
    );
}

#[test]
fn format_detection_and_load() {
    let dir = std::env::temp_dir().join(format!("slipstream-uci-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let uci_text = "# comment\n\nconfig rule 'r'\n option dscp LE\n";
    let toml_text = "# comment\n[[rules]]\nname = \"r\"\ndscp = [\"LE\"]\n";
    for (name, text) in [
        ("slipstream", uci_text),
        ("slipstream.conf", uci_text),
        ("plain", toml_text),
        ("x.toml", toml_text),
        ("X.TOML", toml_text),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let c = load(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(c.rules[0].dscp, [1], "{name}");
    }
    // A .toml file is TOML even if it looks like UCI: the error is toml's.
    let p = dir.join("odd.toml");
    std::fs::write(&p, uci_text).unwrap();
    let e = load(&p).unwrap_err();
    assert!(e.path().starts_with("line 3, column"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();

    assert_eq!(
        Format::detect(Path::new("/etc/config/slipstream"), "package slipstream\n"),
        Format::Uci
    );
    assert_eq!(
        Format::detect(Path::new("/etc/config/slipstream"), "  config\tslipstream\n"),
        Format::Uci
    );
    assert_eq!(
        Format::detect(Path::new("/etc/config/slipstream"), "[datapath]\n"),
        Format::Toml
    );
    assert_eq!(
        Format::detect(Path::new("a"), "configuration = 1\n"),
        Format::Toml
    );
}

#[test]
fn generic_sections_for_other_packages() {
    // /etc/config/firewall as fw4 ships it, abbreviated.
    let s = parse_sections(
        "config defaults\n\toption syn_flood\t1\n\toption flow_offloading\t'1'\n\nconfig zone\n\toption name lan\n\tlist network 'lan'\n",
    )
    .unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].section_type, "defaults");
    assert_eq!(s[0].label(), "@defaults[0]");
    assert_eq!(s[0].option("flow_offloading").as_deref(), Some("1"));
    assert_eq!(s[1].values("network").unwrap(), ["lan"]);
}

#[test]
fn toml_enabled_control_and_macs() {
    let c = parse(
        "enabled = false\n[control]\nsocket = \"/run/x.sock\"\n[[rules]]\nname = \"m\"\nlan_macs = [\"00-11-22-33-44-55\"]\n",
        "t",
    )
    .unwrap();
    assert!(!c.enabled);
    assert_eq!(c.control.socket, Path::new("/run/x.sock"));
    assert_eq!(c.rules[0].lan_macs[0].to_string(), "00:11:22:33:44:55");
    // matches() cannot see MACs: a MAC-only rule answers for the rest of the tuple (nothing).
    assert!(c.rules[0].matches("10.0.0.1".parse().unwrap(), 1, 2, 0));
    let long = format!(
        "[control]\nsocket = \"/{}\"\n[[rules]]\nname = \"m\"\ndscp = [1]\n",
        "a".repeat(120)
    );
    let e = parse(&long, "t").unwrap_err();
    assert_eq!(e.path(), "control.socket");
    let e = parse(
        "[[rules]]\nname = \"m\"\nlan_macs = [\"zz:11:22:33:44:55\"]\n",
        "t",
    )
    .unwrap_err();
    assert_eq!(e.path(), "rules[0].lan_macs[0]");
    assert!(
        e.message()
            .contains("is not a MAC address like \"aa:bb:cc:dd:ee:ff\""),
        "{e}"
    );
    let e = parse(
        "[datapath]\nhook = \"both\"\n[[rules]]\nname = \"m\"\nlan_macs = [\"02:11:22:33:44:55\"]\n",
        "t",
    )
    .unwrap_err();
    assert_eq!(e.path(), "rules[0].lan_macs");
    assert!(e.message().contains("datapath.hook = \"forward\""), "{e}");
    let e = parse("[[rules]]\nname = \"m\"\nenabled = false\ndscp = [1]\n", "t").unwrap_err();
    assert_eq!(e.path(), "rules");
    assert!(
        e.message().contains(
            "enable at least one [[rules]] entry, or disable Slipstream itself with enabled = false"
        ),
        "{e}"
    );
}

#[test]
fn mac_addresses() {
    let m: MacAddr = "AA:bb:0c:dd:ee:ff".parse().unwrap();
    assert_eq!(m, MacAddr([0xaa, 0xbb, 0x0c, 0xdd, 0xee, 0xff]));
    assert_eq!(m.to_string(), "aa:bb:0c:dd:ee:ff");
    for bad in [
        "",
        "aa:bb:cc:dd:ee",
        "aa:bb:cc:dd:ee:ff:00",
        "aabb.ccdd.eeff",
        "a:bb:cc:dd:ee:ff",
        "gg:bb:cc:dd:ee:ff",
        "aa:bb-cc:dd:ee:ff",
    ] {
        assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
    }
    assert!("ff:ff:ff:ff:ff:ff"
        .parse::<MacAddr>()
        .unwrap_err()
        .contains("broadcast"));
}

/// The UCI examples in docs/configuration.md parse (together, as one file) and validate.
#[test]
fn documented_uci_examples_parse() {
    let doc = std::fs::read_to_string(repo("docs/configuration.md")).unwrap();
    let mut text = String::new();
    for block in doc.split("```text\n").skip(1) {
        let block = block.split("```").next().unwrap();
        if !block.contains("config rule") {
            continue;
        }
        for line in block.lines() {
            text += line.trim_start_matches(' ');
            text.push('\n');
        }
    }
    let c = uci(&text);
    assert!(c.rules.len() >= 10, "{}", c.rules.len());
    assert!(c.rules.iter().any(|r| r.name == "delivery-optimization-out"));
}
