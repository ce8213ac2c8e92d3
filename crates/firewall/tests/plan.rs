//! Snapshot-style tests of the generated rules (pure; no commands run).

use slipstream_config::{parse, PortRange};
use slipstream_firewall::{multiport_chunks, plan, Backend, IpFamily};

const TWO_RULES: &str = r#"
[[rules]]
name = "bt"
remote_ports = ["6881-6999", 51413]
lan_hosts = ["192.168.1.0/24", "fd00::/64"]

[[rules]]
name = "le-ssh"
dscp = ["LE"]
local_ports = [22]
controller = { kind = "fixed_window", window_bytes = 65535 }
"#;

fn lines(s: &str) -> Vec<&str> {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect()
}

fn assert_lines(actual: &str, expected: &str) {
    let (a, e) = (lines(actual), lines(expected));
    assert_eq!(a, e, "\n--- actual ---\n{actual}\n--- expected ---\n{expected}");
}

#[test]
fn router_mode_two_rules() {
    let config = parse(TWO_RULES, "t").unwrap();
    let p = plan(&config, Backend::IptablesLegacy);
    assert_eq!(p.iptables.len(), 2);
    assert!(p.nft_ruleset.is_none());
    assert_eq!(p.iptables[0].family, IpFamily::V4);
    assert_lines(
        &p.iptables[0].restore_input(),
        r#"
        *mangle
        :SLIPSTREAM - [0:0]
        :SLIPSTREAM_CLASSIFY - [0:0]
        -A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN SYN -m connmark --mark 0x0/0xff0000 -j SLIPSTREAM_CLASSIFY
        -A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN,ACK SYN -m connmark --mark 0x0/0xff0000 -m limit --limit 20/sec -j NFQUEUE --queue-num 8470 --queue-bypass
        -A SLIPSTREAM -m connmark ! --mark 0x0/0xff0000 -j CONNMARK --restore-mark --nfmask 0xff0000 --ctmask 0xff0000
        -A SLIPSTREAM -m connmark ! --mark 0x0/0xff0000 -m length --length 0:128 -j NFQUEUE --queue-num 8470 --queue-bypass
        -A SLIPSTREAM -m connmark ! --mark 0x0/0xff0000 -j NFQUEUE --queue-num 8471 --queue-bypass
        -A SLIPSTREAM_CLASSIFY -s 192.168.1.0/24 -i br-lan -p tcp -m multiport --dports 6881:6999,51413 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -d 192.168.1.0/24 -o br-lan -p tcp -m multiport --sports 6881:6999,51413 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        -A SLIPSTREAM_CLASSIFY -i br-lan -p tcp -m multiport --sports 22 -m dscp --dscp 0x01 -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -o br-lan -p tcp -m multiport --dports 22 -m dscp --dscp 0x01 -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        -I FORWARD 1 -p tcp -j SLIPSTREAM
        COMMIT
        "#,
    );
    // IPv6: the v6 CIDR, and the ACK threshold 20 bytes higher.
    assert_lines(
        &p.iptables[1].restore_input(),
        r#"
        *mangle
        :SLIPSTREAM - [0:0]
        :SLIPSTREAM_CLASSIFY - [0:0]
        -A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN SYN -m connmark --mark 0x0/0xff0000 -j SLIPSTREAM_CLASSIFY
        -A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN,ACK SYN -m connmark --mark 0x0/0xff0000 -m limit --limit 20/sec -j NFQUEUE --queue-num 8470 --queue-bypass
        -A SLIPSTREAM -m connmark ! --mark 0x0/0xff0000 -j CONNMARK --restore-mark --nfmask 0xff0000 --ctmask 0xff0000
        -A SLIPSTREAM -m connmark ! --mark 0x0/0xff0000 -m length --length 0:148 -j NFQUEUE --queue-num 8470 --queue-bypass
        -A SLIPSTREAM -m connmark ! --mark 0x0/0xff0000 -j NFQUEUE --queue-num 8471 --queue-bypass
        -A SLIPSTREAM_CLASSIFY -s fd00::/64 -i br-lan -p tcp -m multiport --dports 6881:6999,51413 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -d fd00::/64 -o br-lan -p tcp -m multiport --sports 6881:6999,51413 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        -A SLIPSTREAM_CLASSIFY -i br-lan -p tcp -m multiport --sports 22 -m dscp --dscp 0x01 -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -o br-lan -p tcp -m multiport --dports 22 -m dscp --dscp 0x01 -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        -I FORWARD 1 -p tcp -j SLIPSTREAM
        COMMIT
        "#,
    );
    assert_eq!(
        p.iptables[0].hook_rules_as_listed(),
        ["-A FORWARD -p tcp -j SLIPSTREAM"]
    );
    let remove: Vec<String> = p.iptables[0]
        .remove_commands()
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(
        remove,
        [
            "iptables-legacy -w -t mangle -D FORWARD -p tcp -j SLIPSTREAM",
            "iptables-legacy -w -t mangle -F SLIPSTREAM",
            "iptables-legacy -w -t mangle -F SLIPSTREAM_CLASSIFY",
            "iptables-legacy -w -t mangle -X SLIPSTREAM",
            "iptables-legacy -w -t mangle -X SLIPSTREAM_CLASSIFY",
        ]
    );
    let apply: Vec<String> = p.apply_commands().iter().map(|c| c.to_string()).collect();
    assert_eq!(
        apply,
        [
            "iptables-legacy-restore -w --noflush < (generated ruleset)",
            "ip6tables-legacy-restore -w --noflush < (generated ruleset)",
        ]
    );
}

#[test]
fn local_mode_two_rules() {
    let text = format!("[datapath]\nhook = \"local\"\nipv6 = false\n{TWO_RULES}");
    let config = parse(&text, "t").unwrap();
    let p = plan(&config, Backend::IptablesLegacy);
    assert_eq!(p.iptables.len(), 1, "ipv6 = false: no ip6tables plan");
    let v4 = &p.iptables[0];
    assert_eq!(
        v4.hook_rules,
        [
            "-I OUTPUT 1 ! -o lo -p tcp -j SLIPSTREAM",
            "-I INPUT 1 ! -i lo -p tcp -j SLIPSTREAM"
        ]
    );
    assert_lines(
        &v4.classify_rules.join("\n"),
        r#"
        -A SLIPSTREAM_CLASSIFY -s 192.168.1.0/24 -p tcp -m addrtype --src-type LOCAL -m multiport --dports 6881:6999,51413 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -d 192.168.1.0/24 -p tcp -m addrtype --dst-type LOCAL -m multiport --sports 6881:6999,51413 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        -A SLIPSTREAM_CLASSIFY -p tcp -m addrtype --src-type LOCAL -m multiport --sports 22 -m dscp --dscp 0x01 -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -p tcp -m addrtype --dst-type LOCAL -m multiport --dports 22 -m dscp --dscp 0x01 -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        "#,
    );
}

#[test]
fn both_mode_keeps_router_directions_off_own_traffic() {
    let text = "[datapath]\nhook = \"both\"\nipv6 = false\n[[rules]]\nname = \"r\"\nremote_ports = [5001]\n";
    let p = plan(&parse(text, "t").unwrap(), Backend::IptablesLegacy);
    let v4 = &p.iptables[0];
    assert_eq!(v4.hook_rules.len(), 3);
    assert_lines(
        &v4.classify_rules.join("\n"),
        r#"
        -A SLIPSTREAM_CLASSIFY -i br-lan -p tcp -m addrtype ! --dst-type LOCAL -m multiport --dports 5001 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -o br-lan -p tcp -m addrtype ! --src-type LOCAL -m multiport --sports 5001 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -p tcp -m addrtype --src-type LOCAL -m multiport --dports 5001 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -p tcp -m addrtype --dst-type LOCAL -m multiport --sports 5001 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        "#,
    );
}

#[test]
fn multiport_splits_at_15_slots() {
    let singles: Vec<PortRange> = (1..=16).map(PortRange::single).collect();
    let chunks = multiport_chunks(&singles);
    assert_eq!(chunks, ["1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "16"]);
    // A range takes two slots: 7 ranges = 14 slots, the 8th range would make 16.
    let ranges: Vec<PortRange> = (0..8)
        .map(|i| PortRange {
            first: 100 * i + 1,
            last: 100 * i + 10,
        })
        .collect();
    let chunks = multiport_chunks(&ranges);
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[0].split(',').count(), 7);
    assert_eq!(chunks[1], "701:710");
    assert!(multiport_chunks(&[]).is_empty());

    // In a rule: 20 remote ports and 2 lan interfaces -> 2 chunks x 2 interfaces x 2 directions.
    let ports: Vec<String> = (1000..1020).map(|p| p.to_string()).collect();
    let text = format!(
        "[datapath]\nlan_interfaces = [\"br-lan\", \"wlan+\"]\n[[rules]]\nname = \"many\"\nremote_ports = [{}]\n",
        ports.join(", ")
    );
    let p = plan(&parse(&text, "t").unwrap(), Backend::IptablesLegacy);
    let rules = &p.iptables[0].classify_rules;
    assert_eq!(rules.len(), 8 + 1);
    assert!(rules[0].starts_with("-A SLIPSTREAM_CLASSIFY -i br-lan -p tcp -m multiport --dports 1000,1001,"));
    assert!(rules[0].contains(",1014 -j"));
    assert!(rules[1].contains("--dports 1015,1016,1017,1018,1019 -j"));
    assert!(rules[4].contains("-i wlan+"));
}

#[test]
fn mask_shift() {
    let text = "[datapath]\nmark_mask = 0xff\n[[rules]]\nname = \"a\"\nremote_ports = [1]\n\
                [[rules]]\nname = \"b\"\nremote_ports = [2]\n";
    let p = plan(&parse(text, "t").unwrap(), Backend::IptablesLegacy);
    let v4 = &p.iptables[0];
    assert!(v4.main_rules[0].contains("--mark 0x0/0xff "));
    assert!(v4.main_rules[1].contains("--mark 0x0/0xff -m limit"));
    assert!(v4.main_rules[2].contains("--nfmask 0xff --ctmask 0xff"));
    assert!(v4.classify_rules[0].ends_with("--set-xmark 0x1/0xff"));
    assert!(v4.classify_rules[3].ends_with("--set-xmark 0x2/0xff"));

    let text = "[datapath]\nmark_mask = 0x0ff00000\n[[rules]]\nname = \"a\"\nremote_ports = [1]\n";
    let p = plan(&parse(text, "t").unwrap(), Backend::IptablesLegacy);
    assert!(p.iptables[0].classify_rules[0].ends_with("--set-xmark 0x100000/0xff00000"));
}

#[test]
fn v6_skips_v4_cidrs() {
    let text = r#"
[[rules]]
name = "v4-only"
lan_hosts = ["192.168.1.20", "10.0.0.0/8"]
[[rules]]
name = "mixed"
lan_hosts = ["192.168.1.30", "fd00::30"]
"#;
    let p = plan(&parse(text, "t").unwrap(), Backend::IptablesLegacy);
    let v4 = &p.iptables[0].classify_rules;
    let v6 = &p.iptables[1].classify_rules;
    // v4: rule 1 has 2 CIDRs x 2 directions + RETURN, rule 2 one CIDR x 2 + RETURN.
    assert_eq!(v4.len(), 5 + 3);
    assert!(v4[0].contains("-s 192.168.1.20/32 -i br-lan"));
    assert!(v4[1].contains("-s 10.0.0.0/8 -i br-lan"));
    assert!(v4[2].contains("-d 192.168.1.20/32 -o br-lan"));
    // v6: rule 1 produces nothing at all (not even its RETURN); rule 2 only its v6 host.
    assert_lines(
        &v6.join("\n"),
        r#"
        -A SLIPSTREAM_CLASSIFY -s fd00::30/128 -i br-lan -p tcp -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -d fd00::30/128 -o br-lan -p tcp -j CONNMARK --set-xmark 0x20000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        "#,
    );
}

#[test]
fn cross_product_of_criteria() {
    let text = r#"
[datapath]
ipv6 = false
[[rules]]
name = "x"
lan_hosts = ["192.168.1.1", "192.168.1.2"]
dscp = ["LE", "CS1", 1]
local_ports = [10]
remote_ports = [20]
"#;
    let p = plan(&parse(text, "t").unwrap(), Backend::IptablesLegacy);
    // 2 directions x 2 CIDRs x 2 distinct DSCPs x 1 x 1 + RETURN.
    assert_eq!(p.iptables[0].classify_rules.len(), 2 * 2 * 2 + 1);
}

#[test]
fn nftables_ruleset_router_mode() {
    let config = parse(TWO_RULES, "t").unwrap();
    let p = plan(&config, Backend::Nftables);
    assert!(p.iptables.is_empty());
    assert_lines(
        p.nft_ruleset.as_deref().unwrap(),
        r#"
        table inet slipstream {
        chain forward {
        type filter hook forward priority mangle; policy accept;
        meta l4proto tcp tcp flags & syn == syn ct mark and 0xff0000 == 0x0 jump classify_forward
        meta l4proto tcp tcp flags & (syn | ack) == syn ct mark and 0xff0000 == 0x0 limit rate 20/second queue num 8470 bypass
        meta l4proto tcp ct mark and 0xff0000 != 0x0 jump enqueue
        }
        chain classify_forward {
        # rule 1 "bt"
        iifname "br-lan" ip saddr 192.168.1.0/24 tcp dport { 6881-6999, 51413 } ct mark set ct mark and 0xff00ffff or 0x10000
        iifname "br-lan" ip6 saddr fd00::/64 tcp dport { 6881-6999, 51413 } ct mark set ct mark and 0xff00ffff or 0x10000
        oifname "br-lan" ip daddr 192.168.1.0/24 tcp sport { 6881-6999, 51413 } ct mark set ct mark and 0xff00ffff or 0x10000
        oifname "br-lan" ip6 daddr fd00::/64 tcp sport { 6881-6999, 51413 } ct mark set ct mark and 0xff00ffff or 0x10000
        ct mark and 0xff0000 != 0x0 return
        # rule 2 "le-ssh"
        iifname "br-lan" tcp sport 22 ip dscp 1 ct mark set ct mark and 0xff00ffff or 0x20000
        iifname "br-lan" tcp sport 22 ip6 dscp 1 ct mark set ct mark and 0xff00ffff or 0x20000
        oifname "br-lan" tcp dport 22 ip dscp 1 ct mark set ct mark and 0xff00ffff or 0x20000
        oifname "br-lan" tcp dport 22 ip6 dscp 1 ct mark set ct mark and 0xff00ffff or 0x20000
        ct mark and 0xff0000 != 0x0 return
        }
        chain enqueue {
        ct mark and 0xff0000 == 0x10000 meta mark set meta mark and 0xff00ffff or 0x10000
        ct mark and 0xff0000 == 0x20000 meta mark set meta mark and 0xff00ffff or 0x20000
        meta nfproto ipv4 meta length <= 128 queue num 8470 bypass
        meta nfproto ipv6 meta length <= 148 queue num 8470 bypass
        queue num 8471 bypass
        }
        }
        "#,
    );
    let remove: Vec<String> = p.remove_commands().iter().map(|c| c.to_string()).collect();
    assert_eq!(remove, ["nft delete table inet slipstream"]);
}

#[test]
fn nftables_ruleset_local_mode_v4_only() {
    let text = "[datapath]\nhook = \"local\"\nipv6 = false\n[[rules]]\nname = \"r\"\n\
                remote_ports = [\"6881-6999\", 6900, 7000, 51413]\n";
    let p = plan(&parse(text, "t").unwrap(), Backend::Nftables);
    let t = p.nft_ruleset.unwrap();
    assert!(t.contains("chain output {\n\t\ttype filter hook output priority mangle; policy accept;\n\t\toifname != \"lo\" meta nfproto ipv4 meta l4proto tcp tcp flags & syn == syn ct mark and 0xff0000 == 0x0 jump classify_output\n"), "{t}");
    assert!(t.contains(
        "iifname != \"lo\" meta nfproto ipv4 meta l4proto tcp ct mark and 0xff0000 != 0x0 jump enqueue"
    ));
    // Overlapping/adjacent ranges merged (nft rejects overlapping set elements).
    assert!(
        t.contains("\t\ttcp dport { 6881-7000, 51413 } ct mark set"),
        "{t}"
    );
    assert!(
        t.contains("\t\ttcp sport { 6881-7000, 51413 } ct mark set"),
        "{t}"
    );
    assert!(!t.contains("forward"));
    assert!(!t.contains("ipv6"));
}

const MAC_RULE: &str = r#"
[datapath]
lan_interfaces = ["br-lan", "wlan+"]
[[rules]]
name = "console"
lan_macs = ["AA:BB:CC:DD:EE:FF", "02:00:00:00:00:01", "aa:bb:cc:dd:ee:ff"]
lan_hosts = ["192.168.1.0/24", "fd00::/64"]
remote_ports = [443]
"#;

/// MACs are crossed like hosts, and only in the from-LAN direction (`-i`): there is no to-LAN
/// line for a MAC rule.
#[test]
fn mac_rules_only_from_the_lan() {
    let config = parse(MAC_RULE, "t").unwrap();
    let p = plan(&config, Backend::IptablesLegacy);
    assert_lines(
        &p.iptables[0].classify_rules.join("\n"),
        r#"
        -A SLIPSTREAM_CLASSIFY -s 192.168.1.0/24 -i br-lan -p tcp -m mac --mac-source aa:bb:cc:dd:ee:ff -m multiport --dports 443 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -s 192.168.1.0/24 -i br-lan -p tcp -m mac --mac-source 02:00:00:00:00:01 -m multiport --dports 443 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -s 192.168.1.0/24 -i wlan+ -p tcp -m mac --mac-source aa:bb:cc:dd:ee:ff -m multiport --dports 443 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -s 192.168.1.0/24 -i wlan+ -p tcp -m mac --mac-source 02:00:00:00:00:01 -m multiport --dports 443 -j CONNMARK --set-xmark 0x10000/0xff0000
        -A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN
        "#,
    );
    assert!(p.iptables[1].classify_rules[0]
        .starts_with("-A SLIPSTREAM_CLASSIFY -s fd00::/64 -i br-lan -p tcp -m mac"));
    assert!(p
        .iptables
        .iter()
        .all(|f| f.classify_rules.iter().all(|r| !r.contains(" -o "))));

    // A MAC-only rule: one line per LAN interface and MAC.
    let only = parse(
        "[[rules]]\nname = \"m\"\nlan_macs = [\"aa:bb:cc:dd:ee:ff\"]\n",
        "t",
    )
    .unwrap();
    let p = plan(&only, Backend::IptablesLegacy);
    assert_eq!(
        p.iptables[0].classify_rules,
        [
            "-A SLIPSTREAM_CLASSIFY -i br-lan -p tcp -m mac --mac-source aa:bb:cc:dd:ee:ff -j CONNMARK --set-xmark 0x10000/0xff0000",
            "-A SLIPSTREAM_CLASSIFY -m connmark ! --mark 0x0/0xff0000 -j RETURN",
        ]
    );
    assert_eq!(
        p.iptables[1].classify_rules, p.iptables[0].classify_rules,
        "MACs are family-neutral"
    );

    let t = plan(&config, Backend::Nftables).nft_ruleset.unwrap();
    let classify: Vec<&str> = t
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("ct mark set"))
        .collect();
    assert_eq!(
        classify,
        [
            "iifname { \"br-lan\", \"wlan*\" } ether saddr { 02:00:00:00:00:01, aa:bb:cc:dd:ee:ff } ip saddr 192.168.1.0/24 tcp dport 443 ct mark set ct mark and 0xff00ffff or 0x10000",
            "iifname { \"br-lan\", \"wlan*\" } ether saddr { 02:00:00:00:00:01, aa:bb:cc:dd:ee:ff } ip6 saddr fd00::/64 tcp dport 443 ct mark set ct mark and 0xff00ffff or 0x10000",
        ]
    );
}

/// Only SYN / SYN-ACK packets of unclassed flows enter the classify chains.
#[test]
fn classify_only_on_syn() {
    let config = parse(MAC_RULE, "t").unwrap();
    let p = plan(&config, Backend::IptablesLegacy);
    for f in &p.iptables {
        let jumps: Vec<&String> = f
            .main_rules
            .iter()
            .filter(|r| r.ends_with("-j SLIPSTREAM_CLASSIFY"))
            .collect();
        assert_eq!(
            jumps,
            ["-A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN SYN -m connmark --mark 0x0/0xff0000 -j SLIPSTREAM_CLASSIFY"]
        );
    }
    let t = plan(&config, Backend::Nftables).nft_ruleset.unwrap();
    let jumps: Vec<&str> = t
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("jump classify_"))
        .collect();
    assert_eq!(
        jumps,
        ["meta l4proto tcp tcp flags & syn == syn ct mark and 0xff0000 == 0x0 jump classify_forward"]
    );
}

/// With the eBPF datapath only handshakes are queued (the tc programs see the rest): one SYN
/// rule to the ACK queue, no length split, no data queue, in both backends.
#[test]
fn ebpf_datapath_queues_only_handshakes() {
    let config = parse(&format!("[datapath]\nengine = \"ebpf\"\n{TWO_RULES}"), "t").unwrap();
    let p = plan(&config, Backend::IptablesLegacy);
    let v4 = p.iptables[0].restore_input();
    let queued: Vec<&str> = lines(&v4).into_iter().filter(|l| l.contains("NFQUEUE")).collect();
    assert_eq!(
        queued,
        [
            "-A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN,ACK SYN -m connmark --mark 0x0/0xff0000 -m limit --limit 20/sec -j NFQUEUE --queue-num 8470 --queue-bypass",
            "-A SLIPSTREAM -p tcp -m tcp --tcp-flags SYN SYN -m connmark ! --mark 0x0/0xff0000 -j NFQUEUE --queue-num 8470 --queue-bypass"
        ]
    );
    let nft = plan(&config, Backend::Nftables).nft_ruleset.unwrap();
    let queued: Vec<&str> = lines(&nft)
        .into_iter()
        .filter(|l| l.contains("queue num"))
        .collect();
    assert_eq!(
        queued,
        [
            "meta l4proto tcp tcp flags & (syn | ack) == syn ct mark and 0xff0000 == 0x0 limit rate 20/second queue num 8470 bypass",
            "tcp flags & syn == syn queue num 8470 bypass"
        ]
    );
    // Only handshakes enter the chains at all.
    let jumps: Vec<&str> = lines(&v4).into_iter().filter(|l| l.starts_with("-I ")).collect();
    assert_eq!(
        jumps,
        ["-I FORWARD 1 -p tcp -m tcp --tcp-flags SYN SYN -j SLIPSTREAM"]
    );
    assert!(
        lines(&nft)
            .contains(&"meta l4proto tcp tcp flags & syn == syn ct mark and 0xff0000 != 0x0 jump enqueue"),
        "{nft}"
    );
}

/// The opening SYNs of unclassed flows (best effort starting, which household control yields
/// to) are queued, rate-limited, only when some rule uses household control.
#[test]
fn competitor_syns_queued_only_for_household_control() {
    let text = "[[rules]]\nname = \"a\"\nremote_ports = [1]\n\
                controller = { kind = \"fixed_window\", window_bytes = 65535 }\n";
    let config = parse(text, "t").unwrap();
    let v4 = plan(&config, Backend::IptablesLegacy).iptables[0].restore_input();
    assert!(!v4.contains("SYN,ACK SYN"), "{v4}");
    let nft = plan(&config, Backend::Nftables).nft_ruleset.unwrap();
    assert!(!nft.contains("limit rate"), "{nft}");
    let config = parse("[[rules]]\nname = \"a\"\nremote_ports = [1]\n", "t").unwrap();
    let v4 = plan(&config, Backend::IptablesLegacy).iptables[0].restore_input();
    assert_eq!(
        lines(&v4)
            .iter()
            .filter(|l| l.contains("SYN,ACK SYN -m connmark --mark 0x0/"))
            .count(),
        1
    );
}
