//! The generated rules for UDP rules and `quic = "refuse"` (issue 24), as text (pure).

use slipstream_config::parse;
use slipstream_firewall::{plan, Backend};

fn lines(s: &str) -> Vec<&str> {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect()
}

fn assert_lines(actual: &str, expected: &str) {
    let (a, e) = (lines(actual), lines(expected));
    assert_eq!(a, e, "\n--- actual ---\n{actual}\n--- expected ---\n{expected}");
}

const UDP_RULE: &str = r#"
[datapath]
ipv6 = false
[[rules]]
name = "utp"
remote_ports = ["6881-6999"]
protocol = "udp"
"#;

#[test]
fn udp_rule_iptables() {
    let p = plan(&parse(UDP_RULE, "t").unwrap(), Backend::IptablesLegacy);
    assert_eq!(p.iptables.len(), 1);
    assert_lines(
        &p.iptables[0].restore_input(),
        r#"
        *mangle
        :SLIPSTREAM - [0:0]
        :SLIPSTREAM_CLASSIFY - [0:0]
        -A SLIPSTREAM -p udp -m connmark --mark 0x0/0xff0000 -m conntrack ! --ctstate NEW -j RETURN
        -A SLIPSTREAM -p udp -m connmark --mark 0x0/0xff0000 -j SLIPSTREAM_CLASSIFY
        -A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN SYN -m connmark --mark 0x0/0xff0000 -j SLIPSTREAM_CLASSIFY
        -A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN,ACK SYN -m connmark --mark 0x0/0xff0000 -m limit --limit 20/sec -j NFQUEUE --queue-num 8470 --queue-bypass
        -A SLIPSTREAM -m connmark ! --mark 0x0/0xff0000 -j CONNMARK --restore-mark --nfmask 0xff0000 --ctmask 0xff0000
        -A SLIPSTREAM -m connmark ! --mark 0x0/0xff0000 -m length --length 0:128 -j NFQUEUE --queue-num 8470 --queue-bypass
        -A SLIPSTREAM -m connmark ! --mark 0x0/0xff0000 -j NFQUEUE --queue-num 8471 --queue-bypass
        -A SLIPSTREAM_CLASSIFY -i br-lan -p udp -m multiport --dports 6881:6999 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -o br-lan -p udp -m multiport --sports 6881:6999 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        -I FORWARD 1 -p tcp -j SLIPSTREAM
        -I FORWARD 1 -p udp -j SLIPSTREAM
        COMMIT
        "#,
    );
    assert!(p.iptables[0].refuse_rules.is_empty() && p.iptables[0].refuse_hooks.is_empty());
    assert_eq!(
        p.iptables[0].hook_rules_as_listed(),
        [
            "-A FORWARD -p tcp -j SLIPSTREAM",
            "-A FORWARD -p udp -j SLIPSTREAM"
        ]
    );
}

#[test]
fn udp_rule_nftables() {
    let p = plan(&parse(UDP_RULE, "t").unwrap(), Backend::Nftables);
    assert_lines(
        p.nft_ruleset.as_deref().unwrap(),
        r#"
        table inet slipstream {
        chain forward {
        type filter hook forward priority mangle; policy accept;
        meta nfproto ipv4 meta l4proto tcp tcp flags & syn == syn ct mark and 0xff0000 == 0x0 jump classify_forward
        meta nfproto ipv4 meta l4proto udp ct state new ct mark and 0xff0000 == 0x0 jump classify_forward
        meta nfproto ipv4 meta l4proto tcp tcp flags & (syn | ack) == syn ct mark and 0xff0000 == 0x0 limit rate 20/second queue num 8470 bypass
        meta nfproto ipv4 meta l4proto tcp ct mark and 0xff0000 != 0x0 jump enqueue
        meta nfproto ipv4 meta l4proto udp ct mark and 0xff0000 != 0x0 jump enqueue
        }
        chain classify_forward {
        # rule 1 "utp"
        iifname "br-lan" meta l4proto udp udp dport 6881-6999 ct mark set ct mark and 0xff00ffff or 0x10000
        oifname "br-lan" meta l4proto udp udp sport 6881-6999 ct mark set ct mark and 0xff00ffff or 0x10000
        ct mark and 0xff0000 != 0x0 return
        }
        chain enqueue {
        ct mark and 0xff0000 == 0x10000 meta mark set meta mark and 0xff00ffff or 0x10000
        meta nfproto ipv4 meta length <= 128 queue num 8470 bypass
        queue num 8471 bypass
        }
        }
        "#,
    );
}

/// A "both" rule has a TCP and a UDP line per direction; with UDP entering the classify chains
/// the TCP lines of nft say their protocol too (a line without ports would match UDP otherwise).
#[test]
fn both_rule_classes_tcp_and_udp() {
    let text =
        "[[rules]]\nname = \"bt\"\nlan_hosts = [\"192.168.1.0/24\", \"fd00::/64\"]\nprotocol = \"both\"\n\
                [[rules]]\nname = \"ssh\"\nremote_ports = [22]\n";
    let config = parse(text, "t").unwrap();
    let p = plan(&config, Backend::IptablesLegacy);
    assert_lines(
        &p.iptables[0].classify_rules.join("\n"),
        r#"
        -A SLIPSTREAM_CLASSIFY -s 192.168.1.0/24 -i br-lan -p tcp -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -d 192.168.1.0/24 -o br-lan -p tcp -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -s 192.168.1.0/24 -i br-lan -p udp -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -d 192.168.1.0/24 -o br-lan -p udp -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        -A SLIPSTREAM_CLASSIFY -i br-lan -p tcp -m multiport --dports 22 -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -o br-lan -p tcp -m multiport --sports 22 -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        "#,
    );
    assert!(
        p.iptables[1].classify_rules[2].starts_with("-A SLIPSTREAM_CLASSIFY -s fd00::/64 -i br-lan -p udp")
    );
    let t = plan(&config, Backend::Nftables).nft_ruleset.unwrap();
    let classify: Vec<&str> = lines(&t)
        .into_iter()
        .filter(|l| l.contains("ct mark set"))
        .collect();
    assert_eq!(
        classify,
        [
            "iifname \"br-lan\" ip saddr 192.168.1.0/24 meta l4proto tcp ct mark set ct mark and 0xff00ffff or 0x10000",
            "iifname \"br-lan\" ip6 saddr fd00::/64 meta l4proto tcp ct mark set ct mark and 0xff00ffff or 0x10000",
            "oifname \"br-lan\" ip daddr 192.168.1.0/24 meta l4proto tcp ct mark set ct mark and 0xff00ffff or 0x10000",
            "oifname \"br-lan\" ip6 daddr fd00::/64 meta l4proto tcp ct mark set ct mark and 0xff00ffff or 0x10000",
            "iifname \"br-lan\" ip saddr 192.168.1.0/24 meta l4proto udp ct mark set ct mark and 0xff00ffff or 0x10000",
            "iifname \"br-lan\" ip6 saddr fd00::/64 meta l4proto udp ct mark set ct mark and 0xff00ffff or 0x10000",
            "oifname \"br-lan\" ip daddr 192.168.1.0/24 meta l4proto udp ct mark set ct mark and 0xff00ffff or 0x10000",
            "oifname \"br-lan\" ip6 daddr fd00::/64 meta l4proto udp ct mark set ct mark and 0xff00ffff or 0x10000",
            "iifname \"br-lan\" meta l4proto tcp tcp dport 22 ct mark set ct mark and 0xff00ffff or 0x20000",
            "oifname \"br-lan\" meta l4proto tcp tcp sport 22 ct mark set ct mark and 0xff00ffff or 0x20000",
        ]
    );
}

/// A UDP preset's domains: UDP flows match the same address set as TCP flows.
#[test]
fn udp_preset_flows_match_the_same_set() {
    let config = parse(
        "[datapath]\nipv6 = false\n[[rules]]\nname = \"play\"\npreset = \"google_play\"\n",
        "t",
    )
    .unwrap();
    let p = plan(&config, Backend::IptablesLegacy);
    let set_lines: Vec<&String> = p.iptables[0]
        .classify_rules
        .iter()
        .filter(|l| l.contains("--match-set ss_dst_play_4"))
        .collect();
    assert_eq!(set_lines.len(), 4, "tcp and udp, both directions: {set_lines:?}");
    assert_eq!(set_lines.iter().filter(|l| l.contains(" -p udp ")).count(), 2);
    assert_eq!(p.sets.len(), 1, "one set for both protocols");
}

/// The household's ordinary UDP: with no UDP rule it never enters Slipstream's chains; with
/// one, the first rule a UDP packet meets returns every packet of an unclassed flow but the
/// first, and no queueing rule can match a packet of an unclassed UDP flow.
#[test]
fn ordinary_udp_costs_one_rule_and_is_never_queued() {
    let tcp_only = parse("[[rules]]\nname = \"bt\"\nremote_ports = [6881]\n", "t").unwrap();
    for backend in [Backend::IptablesLegacy, Backend::Nftables] {
        let text = plan(&tcp_only, backend).to_string();
        assert!(
            !text.contains("udp"),
            "{backend}: UDP enters the chains of a TCP-only config:\n{text}"
        );
    }
    for engine in ["nfqueue", "ebpf"] {
        let config = parse(
            &format!(
                "[datapath]\nengine = \"{engine}\"\n{}",
                &UDP_RULE[UDP_RULE.find("[[rules]]").unwrap()..]
            ),
            "t",
        )
        .unwrap();
        let p = plan(&config, Backend::IptablesLegacy);
        for f in &p.iptables {
            let udp_rules: Vec<&String> = f.main_rules.iter().filter(|r| !r.contains("-p tcp")).collect();
            assert_eq!(
                udp_rules[0],
                "-A SLIPSTREAM -p udp -m connmark --mark 0x0/0xff0000 -m conntrack ! --ctstate NEW -j RETURN",
                "{engine}"
            );
            for r in f
                .main_rules
                .iter()
                .filter(|r| r.contains("NFQUEUE") && !r.contains("-p tcp"))
            {
                assert!(r.contains("-m connmark ! --mark 0x0/0xff0000"), "{engine}: {r}");
            }
        }
        let t = plan(&config, Backend::Nftables).nft_ruleset.unwrap();
        let udp: Vec<&str> = lines(&t)
            .into_iter()
            .filter(|l| l.contains("l4proto udp"))
            .collect();
        assert_eq!(
            udp,
            [
                "meta l4proto udp ct state new ct mark and 0xff0000 == 0x0 jump classify_forward",
                "meta l4proto udp ct mark and 0xff0000 != 0x0 jump enqueue",
                "iifname \"br-lan\" meta l4proto udp udp dport 6881-6999 ct mark set ct mark and 0xff00ffff or 0x10000",
                "oifname \"br-lan\" meta l4proto udp udp sport 6881-6999 ct mark set ct mark and 0xff00ffff or 0x10000",
            ]
            .into_iter()
            .chain(if engine == "ebpf" {
                vec![
                    "meta l4proto udp meta nfproto ipv4 meta length <= 128 queue num 8470 bypass",
                    "meta l4proto udp meta nfproto ipv6 meta length <= 148 queue num 8470 bypass",
                    "meta l4proto udp queue num 8471 bypass",
                ]
            } else {
                vec![]
            })
            .collect::<Vec<_>>(),
            "{engine}"
        );
    }
}

/// The eBPF datapath handles TCP only: classed UDP flows are queued whole, split by length like
/// TCP with NFQUEUE, and UDP enters the chain (TCP only with SYN).
#[test]
fn ebpf_datapath_queues_udp_whole() {
    let config = parse(
        &format!(
            "[datapath]\nengine = \"ebpf\"\n{}",
            &UDP_RULE[UDP_RULE.find("[[rules]]").unwrap()..]
        ),
        "t",
    )
    .unwrap();
    let p = plan(&config, Backend::IptablesLegacy);
    let v4 = &p.iptables[0];
    assert_eq!(
        v4.hook_rules,
        [
            "-I FORWARD 1 -p tcp -m tcp --tcp-flags SYN SYN -j SLIPSTREAM",
            "-I FORWARD 1 -p udp -j SLIPSTREAM"
        ]
    );
    let queued: Vec<&String> = v4.main_rules.iter().filter(|l| l.contains("NFQUEUE")).collect();
    assert_eq!(
        queued,
        [
            "-A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN,ACK SYN -m connmark --mark 0x0/0xff0000 -m limit --limit 20/sec -j NFQUEUE --queue-num 8470 --queue-bypass",
            "-A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN SYN -m connmark ! --mark 0x0/0xff0000 -j NFQUEUE --queue-num 8470 --queue-bypass",
            "-A SLIPSTREAM -p udp -m connmark ! --mark 0x0/0xff0000 -m length --length 0:128 -j NFQUEUE --queue-num 8470 --queue-bypass",
            "-A SLIPSTREAM -p udp -m connmark ! --mark 0x0/0xff0000 -j NFQUEUE --queue-num 8471 --queue-bypass",
        ]
    );
    assert!(p.iptables[1]
        .main_rules
        .iter()
        .any(|l| l.contains("-p udp") && l.contains("--length 0:148")));
}

const REFUSE: &str = r#"
[[rules]]
name = "updates"
preset = ["windows_update", "google_play"]
quic = "refuse"
[[rules]]
name = "bt"
remote_ports = [6881]
protocol = "both"
[[rules]]
name = "box"
lan_hosts = ["192.168.1.7"]
protocol = "udp"
quic = "refuse"
"#;

#[test]
fn quic_refuse_iptables_in_filter() {
    let config = parse(REFUSE, "t").unwrap();
    let p = plan(&config, Backend::IptablesLegacy);
    let v4 = p.iptables[0].restore_input();
    let filter = &v4[v4.find("*filter").expect("a filter section")..];
    assert_lines(
        filter,
        r#"
        *filter
        :SLIPSTREAM_REFUSE - [0:0]
        -A SLIPSTREAM_REFUSE -i br-lan -m connmark --mark 0x10000/0xff0000 -j REJECT --reject-with icmp-port-unreachable
        -A SLIPSTREAM_REFUSE -i br-lan -m connmark --mark 0x30000/0xff0000 -j REJECT --reject-with icmp-port-unreachable
        -I FORWARD 1 -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE
        COMMIT
        "#,
    );
    assert!(
        !v4[..v4.find("*filter").unwrap()].contains("REJECT"),
        "mangle cannot reject"
    );
    // ... and mangle sends the packets to be rejected on unqueued, right before the queueing.
    let main = &p.iptables[0].main_rules;
    let restore = main.iter().position(|l| l.contains("--restore-mark")).unwrap();
    assert_eq!(
        main[restore - 2..restore],
        [
            "-A SLIPSTREAM -i br-lan -p udp -m udp --dport 443 -m connmark --mark 0x10000/0xff0000 -j RETURN",
            "-A SLIPSTREAM -i br-lan -p udp -m udp --dport 443 -m connmark --mark 0x30000/0xff0000 -j RETURN",
        ]
    );
    let v6 = p.iptables[1].restore_input();
    assert!(v6.contains("-A SLIPSTREAM_REFUSE -i br-lan -m connmark --mark 0x30000/0xff0000 -j REJECT --reject-with icmp6-port-unreachable\n"), "{v6}");
    assert_eq!(
        p.iptables[0].refuse_hooks_as_listed(),
        ["-A FORWARD -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE"]
    );
    let remove: Vec<String> = p.iptables[0]
        .remove_commands()
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(
        remove[remove.len() - 3..],
        [
            "iptables-legacy -w -t filter -D FORWARD -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE",
            "iptables-legacy -w -t filter -F SLIPSTREAM_REFUSE",
            "iptables-legacy -w -t filter -X SLIPSTREAM_REFUSE",
        ]
    );
    // The refused rules' flows are classed like any other (first match wins).
    assert!(p.iptables[0].classify_rules.iter().any(
        |l| l.contains("-p udp -m set --match-set ss_dst_updates_4 dst -j CONNMARK --set-xmark 0x10000/")
    ));

    // Local and both modes: the router's own packets (OUTPUT) too, never loopback.
    let local = parse(
        &format!("[datapath]\nhook = \"both\"\nipv6 = false\n{REFUSE}"),
        "t",
    )
    .unwrap();
    let p = plan(&local, Backend::IptablesLegacy);
    assert_eq!(
        p.iptables[0].refuse_hooks,
        [
            "-I FORWARD 1 -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE",
            "-I OUTPUT 1 ! -o lo -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE"
        ]
    );
    assert_eq!(
        p.iptables[0].refuse_rules[..2],
        [
            "-A SLIPSTREAM_REFUSE -i br-lan -m addrtype ! --dst-type LOCAL -m connmark --mark 0x10000/0xff0000 -j REJECT --reject-with icmp-port-unreachable",
            "-A SLIPSTREAM_REFUSE -m addrtype --src-type LOCAL -m connmark --mark 0x10000/0xff0000 -j REJECT --reject-with icmp-port-unreachable",
        ]
    );
}

#[test]
fn quic_refuse_nftables_rejects_before_queueing() {
    let config = parse(&format!("[datapath]\nipv6 = false\n{REFUSE}"), "t").unwrap();
    let t = plan(&config, Backend::Nftables).nft_ruleset.unwrap();
    let forward: Vec<&str> =
        lines(&t[t.find("chain forward {").unwrap()..t.find("chain classify_forward").unwrap()]);
    assert_eq!(
        forward,
        [
            "chain forward {",
            "type filter hook forward priority mangle; policy accept;",
            "meta nfproto ipv4 meta l4proto tcp tcp flags & syn == syn ct mark and 0xff0000 == 0x0 jump classify_forward",
            "meta nfproto ipv4 meta l4proto udp ct state new ct mark and 0xff0000 == 0x0 jump classify_forward",
            "meta nfproto ipv4 meta l4proto tcp tcp flags & (syn | ack) == syn ct mark and 0xff0000 == 0x0 limit rate 20/second queue num 8470 bypass",
            "meta nfproto ipv4 iifname \"br-lan\" meta l4proto udp udp dport 443 ct mark and 0xff0000 == 0x10000 reject",
            "meta nfproto ipv4 iifname \"br-lan\" meta l4proto udp udp dport 443 ct mark and 0xff0000 == 0x30000 reject",
            "meta nfproto ipv4 meta l4proto tcp ct mark and 0xff0000 != 0x0 jump enqueue",
            "meta nfproto ipv4 meta l4proto udp ct mark and 0xff0000 != 0x0 jump enqueue",
            "}",
        ]
    );
    let local = parse(&format!("[datapath]\nhook = \"local\"\n{REFUSE}"), "t").unwrap();
    let t = plan(&local, Backend::Nftables).nft_ruleset.unwrap();
    assert!(
        t.contains(
            "\t\toifname != \"lo\" meta l4proto udp udp dport 443 ct mark and 0xff0000 == 0x10000 reject\n"
        ),
        "{t}"
    );
    let input = &t[t.find("chain input {").unwrap()..t.find("chain classify_input").unwrap()];
    assert!(
        !input.contains("reject"),
        "this host receiving: its port, not the remote one\n{input}"
    );
}
