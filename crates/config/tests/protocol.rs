//! Rules' `protocol` and `quic` (issue 24): defaults (existing configs keep meaning TCP), what
//! presets add, UCI equivalents, and the errors for settings that could not take effect.

use slipstream_config::*;

fn toml(text: &str) -> Config {
    parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn toml_err(text: &str) -> String {
    match parse(text, "t.toml") {
        Ok(c) => panic!("accepted:\n{text}\n{:?}", c.rules),
        Err(e) => e.to_string(),
    }
}

fn uci(text: &str) -> Config {
    parse_uci(text, "/etc/config/slipstream").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn uci_err(text: &str) -> String {
    match parse_uci(text, "/etc/config/slipstream") {
        Ok(c) => panic!("accepted:\n{text}\n{:?}", c.rules),
        Err(e) => e.to_string(),
    }
}

#[test]
fn rules_without_protocol_stay_tcp() {
    let c = toml("[[rules]]\nname = \"bt\"\nremote_ports = [51413]\n");
    assert_eq!(c.rules[0].protocol, Protocol::Tcp);
    assert_eq!(c.rules[0].quic, Quic::Control);
    assert!(!c.rules[0].refuses_quic());
    // A TCP-only preset adds nothing.
    let c = toml("[[rules]]\nname = \"games\"\npreset = [\"steam\", \"epic\"]\n");
    assert_eq!(c.rules[0].protocol, Protocol::Tcp);
}

#[test]
fn explicit_protocols() {
    for (given, expected) in [
        ("tcp", Protocol::Tcp),
        ("udp", Protocol::Udp),
        ("both", Protocol::Both),
        ("UDP", Protocol::Udp),
    ] {
        let c = toml(&format!(
            "[[rules]]\nname = \"r\"\nremote_ports = [6881]\nprotocol = \"{given}\"\n"
        ));
        assert_eq!(c.rules[0].protocol, expected, "{given}");
    }
}

/// A preset whose hosts serve QUIC makes the rule cover UDP too, unless the rule says otherwise.
#[test]
fn presets_with_udp_add_udp() {
    let c = toml("[[rules]]\nname = \"updates\"\npreset = [\"windows_update\", \"google_play\"]\n");
    assert_eq!(c.rules[0].protocol, Protocol::Both);
    let c = toml("[[rules]]\nname = \"photos\"\npreset = \"google_photos\"\nquic = \"refuse\"\n");
    assert_eq!(c.rules[0].protocol, Protocol::Both);
    assert!(c.rules[0].refuses_quic());
    // The rule's own protocol wins over its presets'.
    let c = toml("[[rules]]\nname = \"play\"\npreset = \"google_play\"\nprotocol = \"tcp\"\n");
    assert_eq!(c.rules[0].protocol, Protocol::Tcp);
}

#[test]
fn quic_settings() {
    let c = toml(
        "[[rules]]\nname = \"a\"\nremote_ports = [443]\nlan_hosts = [\"192.168.1.5\"]\nprotocol = \"both\"\nquic = \"refuse\"\n\
         [[rules]]\nname = \"b\"\nremote_ports = [6881]\nprotocol = \"udp\"\nquic = \"control\"\n\
         [[rules]]\nname = \"c\"\nlan_hosts = [\"192.168.1.6\"]\nprotocol = \"udp\"\nquic = \"refuse\"\n",
    );
    assert_eq!(
        c.rules.iter().map(|r| r.quic).collect::<Vec<_>>(),
        [Quic::Refuse, Quic::Control, Quic::Refuse]
    );
    assert_eq!(
        c.rules.iter().map(Rule::refuses_quic).collect::<Vec<_>>(),
        [true, false, true]
    );
}

#[test]
fn bad_protocol_and_quic_name_the_field() {
    let rule = "[[rules]]\nname = \"r\"\nremote_ports = [443]\n";
    for (text, path, phrase) in [
        (format!("{rule}protocol = \"sctp\"\n"), "rules[0].protocol", "unknown protocol \"sctp\", expected \"tcp\", \"udp\" or \"both\""),
        (format!("{rule}protocol = \"udp\"\nquic = \"block\"\n"), "rules[0].quic", "unknown setting \"block\", expected \"control\" or \"refuse\""),
        (format!("{rule}quic = \"refuse\"\n"), "rules[0].quic", "QUIC runs over UDP, but this rule covers TCP only; set protocol = \"udp\" or \"both\""),
        (format!("{rule}protocol = \"tcp\"\nquic = \"control\"\n"), "rules[0].quic", "covers TCP only"),
        (
            "[[rules]]\nname = \"r\"\nremote_ports = [6881, \"8000-8080\"]\nprotocol = \"both\"\nquic = \"refuse\"\n".into(),
            "rules[0].quic",
            "but its remote_ports leave 443 out",
        ),
        (format!("{rule}protocol = 17\n"), "line 4", "expected a string"),
    ] {
        let err = toml_err(&text);
        assert!(err.starts_with("t.toml: "), "{err}");
        assert!(err.contains(path), "expected {path:?} in {err:?}\nfor:\n{text}");
        assert!(err.contains(phrase), "expected {phrase:?} in {err:?}\nfor:\n{text}");
    }
}

#[test]
fn uci_options_mean_the_same() {
    let from_uci = uci(
        "config rule 'bt'\n list remote_port '6881-6999'\n option protocol 'both'\n\
         config rule 'photos'\n list preset 'google_photos'\n option quic 'refuse'\n\
         config rule 'plain'\n option remote_port '22'\n",
    );
    let from_toml = toml(
        "[[rules]]\nname = \"bt\"\nremote_ports = [\"6881-6999\"]\nprotocol = \"both\"\n\
         [[rules]]\nname = \"photos\"\npreset = [\"google_photos\"]\nquic = \"refuse\"\n\
         [[rules]]\nname = \"plain\"\nremote_ports = [22]\n",
    );
    assert_eq!(from_uci.rules, from_toml.rules);
    assert_eq!(from_uci.rules[0].protocol, Protocol::Both);
    assert!(from_uci.rules[1].refuses_quic());
    assert_eq!(from_uci.rules[2].protocol, Protocol::Tcp);

    let err = uci_err("config rule 'r'\n option remote_port '443'\n option quic 'refuse'\n");
    assert!(
        err.contains("rule 'r' (line 1), option quic (line 3): QUIC runs over UDP, but this rule covers TCP only; set option protocol 'udp' or 'both' (or leave option quic out)"),
        "{err}"
    );
    let err = uci_err("config rule 'r'\n option remote_port '443'\n option protocol 'icmp'\n");
    assert!(
        err.contains("rule 'r' (line 1), option protocol (line 3): unknown protocol \"icmp\""),
        "{err}"
    );
}
