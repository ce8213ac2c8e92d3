//! Rules by name: `domains`, `preset`, `lan_hostnames` and `[names]`, in TOML and UCI, and the
//! errors `--check-config` gives for bad ones (rule and field named).

use slipstream_config::*;
use std::path::PathBuf;
use std::time::Duration;

fn toml(text: &str) -> Config {
    parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn toml_err(text: &str) -> String {
    match parse(text, "t.toml") {
        Ok(c) => panic!("accepted:\n{text}\n{c:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn domains_and_presets_merge_in_order() {
    let c = toml(
        r#"
[[rules]]
name = "games"
domains = ["*.example-cdn.com", "Dl.Example.org."]
preset = ["steam", "epic", "steam"]
[[rules]]
name = "one"
preset = "nintendo"
[[rules]]
name = "alias"
presets = ["xbox"]
"#,
    );
    let r = &c.rules[0];
    assert_eq!(r.presets, ["steam", "epic"]);
    assert_eq!(r.domains[0].to_string(), "*.example-cdn.com");
    assert_eq!(r.domains[1].to_string(), "dl.example.org");
    let steam = slipstream_names::presets::find("steam").unwrap();
    let epic = slipstream_names::presets::find("epic").unwrap();
    assert_eq!(r.domains.len(), 2 + steam.domains.len() + epic.domains.len());
    assert_eq!(c.rules[1].presets, ["nintendo"]);
    assert_eq!(c.rules[2].presets, ["xbox"]);
    assert!(r.remote_ports.is_empty() && r.lan_hostnames.is_empty());
    // Names are matched in the kernel: userspace matching says "would match".
    assert!(r.matches("10.0.0.1".parse().unwrap(), 50000, 443, 0));
}

#[test]
fn lan_hostnames_are_a_criterion_alone_or_beside_addresses() {
    let c = toml(
        r#"
[[rules]]
name = "deck"
lan_hostnames = ["Steam-Deck", "xbox"]
lan_hosts = ["192.168.1.50"]
"#,
    );
    assert_eq!(c.rules[0].lan_hostnames, ["steam-deck", "xbox"]);
    // An address outside lan_hosts may still be a named host.
    assert!(c.rules[0].matches("192.168.1.9".parse().unwrap(), 1, 2, 0));
}

#[test]
fn names_section_defaults_and_values() {
    let d = toml("[[rules]]\nname = \"a\"\nremote_ports = [1]\n").names;
    assert_eq!(d, Names::default());
    assert_eq!(d.set_timeout, Duration::from_secs(3600));
    assert_eq!(d.dnsmasq_conf, None);
    let n = toml(
        r#"
[names]
set_timeout = "10m"
dnsmasq_conf = "/etc/dnsmasq.d/slipstream.conf"
dhcp_leases = ["/var/lib/misc/dnsmasq.leases"]
lease_poll = "1s"
[[rules]]
name = "a"
domains = ["a.example.com"]
"#,
    )
    .names;
    assert_eq!(n.set_timeout, Duration::from_secs(600));
    assert_eq!(
        n.dnsmasq_conf,
        Some(PathBuf::from("/etc/dnsmasq.d/slipstream.conf"))
    );
    assert_eq!(n.dhcp_leases, [PathBuf::from("/var/lib/misc/dnsmasq.leases")]);
    assert_eq!(n.lease_poll, Duration::from_secs(1));
}

#[test]
fn bad_names_name_rule_and_field() {
    let rule = |body: &str| {
        format!("[[rules]]\nname = \"r0\"\nremote_ports = [1]\n[[rules]]\nname = \"games\"\n{body}\n")
    };
    for (body, want) in [
        (
            "domains = [\"cdn*.example.com\"]",
            "rules[1].domains[0]: \"cdn*.example.com\": '*' may only start",
        ),
        (
            "domains = [\"ok.com\", \"a..b.com\"]",
            "rules[1].domains[1]: \"a..b.com\" has an empty label",
        ),
        (
            "domains = [\"com\"]",
            "rules[1].domains[0]: \"com\" is a single label",
        ),
        (
            "domains = [\"a.com/x\"]",
            "rules[1].domains[0]: \"a.com/x\": '/' is not allowed",
        ),
        (
            "preset = \"stean\"",
            "rules[1].preset[0]: unknown preset \"stean\"; known presets: steam,",
        ),
        (
            "preset = [\"steam\", \"nope\"]",
            "rules[1].preset[1]: unknown preset \"nope\"",
        ),
        (
            "lan_hostnames = [\"my tv\"]",
            "rules[1].lan_hostnames[0]: \"my tv\"",
        ),
        (
            "domains = []\npreset = []",
            "rules[1]: rule \"games\" has no criteria",
        ),
    ] {
        let e = toml_err(&rule(body));
        assert!(e.contains(want), "{body}: {e}");
    }
    assert!(
        toml_err("[names]\nset_timeout = \"0s\"\n[[rules]]\nname = \"a\"\nremote_ports = [1]\n")
            .contains("names.set_timeout: must be 1s to 7 days")
    );
    assert!(
        toml_err("[names]\ndhcp_leases = [\"leases\"]\n[[rules]]\nname = \"a\"\nremote_ports = [1]\n")
            .contains("names.dhcp_leases[0]: \"leases\" is not an absolute path")
    );
    let local = "[datapath]\nhook = \"local\"\n[[rules]]\nname = \"a\"\nlan_hostnames = [\"xbox\"]\n";
    assert!(toml_err(local).contains("rules[0].lan_hostnames: named LAN hosts need router mode"));
}

#[test]
fn uci_means_the_same() {
    let uci = parse_uci(
        "config slipstream 'main'\n\toption set_timeout '10m'\n\tlist dhcp_leases '/tmp/a.leases'\n\toption dnsmasq_conf '/tmp/x/slip.conf'\n\toption lease_poll '2s'\n\
         config rule 'games'\n\tlist domain '*.example-cdn.com'\n\tlist domain 'dl.example.org'\n\toption preset 'steam epic'\n\tlist lan_hostname 'steam-deck'\n",
        "/etc/config/slipstream",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let toml = toml(
        "[names]\nset_timeout = \"10m\"\ndhcp_leases = [\"/tmp/a.leases\"]\ndnsmasq_conf = \"/tmp/x/slip.conf\"\nlease_poll = \"2s\"\n\
         [[rules]]\nname = \"games\"\ndomains = [\"*.example-cdn.com\", \"dl.example.org\"]\npreset = [\"steam\", \"epic\"]\nlan_hostnames = [\"steam-deck\"]\n",
    );
    assert_eq!(uci, toml);
    let e = parse_uci(
        "config rule 'games'\n\tlist domain 'ok.example.com'\n\tlist domain 'dl.*.example.com'\n",
        "/etc/config/slipstream",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("rule 'games' (line 1), option domain (line 3): \"dl.*.example.com\": '*' may only start"),
        "{e}"
    );
    let e = parse_uci(
        "config rule 'g'\n\tlist preset 'stean'\n",
        "/etc/config/slipstream",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("rule 'g' (line 1), option preset (line 2): unknown preset \"stean\""),
        "{e}"
    );
}

#[test]
fn household_example_config() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/household-example.toml");
    let c = load(&path).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = c.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "games",
            "updates",
            "backups",
            "nas",
            "bittorrent",
            "dscp-background"
        ]
    );
    assert_eq!(c.rules[0].presets.len(), 6);
    assert!(c.rules[0]
        .domains
        .iter()
        .any(|d| d.matches("cache5-fra1.steamcontent.com")));
    assert_eq!(c.rules[3].lan_hostnames, ["nas"]);
    // Nothing in it classes ordinary web traffic by port.
    assert!(c
        .rules
        .iter()
        .all(|r| !r.remote_ports.iter().any(|p| p.contains(443))));
}
