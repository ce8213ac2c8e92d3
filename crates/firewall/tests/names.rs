//! Root integration test of rules by name in a throwaway network namespace: the ipsets a config
//! needs are created with the rules (remote sets with their timeout), the classify rules match
//! them, host sets are refilled in one step when leases change, a reload that drops a rule
//! destroys its sets, and removing the rules removes the sets. The nftables ruleset with its
//! sets is loaded into the kernel with the queue statements swapped for `accept` (this kernel
//! has no nft queue expression). Needs root, `ip`, `iptables-legacy`, `ipset` and `nft`: ignored
//! by default, run with --ignored; without them it fails saying why.

use slipstream_config::{parse, Config};
use slipstream_firewall::{plan_with_hosts, Backend, Firewall, HostAddrs, PlannedCommand};

mod common;
use common::Netns;

fn skip_reason(tools: &[&str]) -> Option<String> {
    slipstream_testbed::missing_prerequisite(tools)
        .map(|why| format!("{why} (apt-get install ipset nftables)"))
}

const CONFIG: &str = r#"
[datapath]
lan_interfaces = ["lan0"]
[names]
set_timeout = "90s"
[[rules]]
name = "steam"
preset = "steam"
domains = ["dl.example.com"]
[[rules]]
name = "deck"
lan_hostnames = ["steam-deck"]
lan_hosts = ["192.168.1.5"]
remote_ports = [443]
"#;

fn config(text: &str) -> Config {
    parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn hosts(list: &[&str]) -> HostAddrs {
    let mut h = HostAddrs::new();
    h.insert("deck".into(), list.iter().map(|a| a.parse().unwrap()).collect());
    h
}

fn our_sets(ns: &Netns) -> Vec<String> {
    let mut v: Vec<String> = ns
        .run("ipset", &["list", "-n"])
        .lines()
        .filter(|l| l.starts_with("ss_"))
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn ipsets_follow_the_rules() {
    if let Some(why) = skip_reason(&["ip", "iptables-legacy", "ipset"]) {
        panic!("cannot run here: {why}");
    }
    let ns = Netns::create("ssnmi");
    let c = config(CONFIG);
    let mut fw =
        Firewall::install_with(&c, Backend::IptablesLegacy, ns.runner()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        our_sets(&ns),
        [
            "ss_dst_steam_4",
            "ss_dst_steam_6",
            "ss_host_deck_4",
            "ss_host_deck_6"
        ]
    );
    let dst = ns.run("ipset", &["list", "ss_dst_steam_4"]);
    assert!(dst.contains("timeout 90"), "{dst}");
    let v4 = ns.run("iptables-legacy-save", &["-t", "mangle"]);
    assert!(
        v4.contains("-i lan0 -p tcp -m set --match-set ss_dst_steam_4 dst -j CONNMARK"),
        "{v4}"
    );
    assert!(
        v4.contains("-o lan0 -p tcp -m set --match-set ss_dst_steam_4 src -j CONNMARK"),
        "{v4}"
    );
    assert!(
        v4.contains("-s 192.168.1.5/32 -i lan0 -p tcp -m multiport --dports 443 -j CONNMARK"),
        "{v4}"
    );
    assert!(
        v4.contains(
            "-i lan0 -p tcp -m multiport --dports 443 -m set --match-set ss_host_deck_4 src -j CONNMARK"
        ),
        "{v4}"
    );
    let v6 = ns.run("ip6tables-legacy-save", &["-t", "mangle"]);
    assert!(v6.contains("--match-set ss_dst_steam_6 dst"), "{v6}");
    assert!(v6.contains("--match-set ss_host_deck_6 src"), "{v6}");

    // Leases: the deck gets addresses, then changes its IPv4 address.
    assert!(fw.set_hosts(hosts(&["192.168.1.20", "fd00::20"])).unwrap());
    assert!(ns
        .run("ipset", &["list", "ss_host_deck_4"])
        .contains("\n192.168.1.20"));
    assert!(ns
        .run("ipset", &["list", "ss_host_deck_6"])
        .contains("\nfd00::20"));
    assert!(
        !fw.set_hosts(hosts(&["192.168.1.20", "fd00::20"])).unwrap(),
        "unchanged: no write"
    );
    assert!(fw.set_hosts(hosts(&["192.168.1.33", "fd00::20"])).unwrap());
    let h4 = ns.run("ipset", &["list", "ss_host_deck_4"]);
    assert!(
        h4.contains("\n192.168.1.33") && !h4.contains("192.168.1.20"),
        "{h4}"
    );
    assert!(!our_sets(&ns).contains(&"ss_tmp4".to_owned()));

    // A reload without the deck rule: its sets go, the steam sets keep their entries.
    ns.run("ipset", &["add", "ss_dst_steam_4", "203.0.113.7"]);
    let fewer = config(&CONFIG[..CONFIG.find("[[rules]]\nname = \"deck\"").unwrap()]);
    fw.replace(&fewer).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(our_sets(&ns), ["ss_dst_steam_4", "ss_dst_steam_6"]);
    assert!(ns
        .run("ipset", &["list", "ss_dst_steam_4"])
        .contains("203.0.113.7"));
    // And back: the host sets are recreated, and filled from the lease addresses still known
    // for a rule of that name only if the rule is back (here: forgotten with the rule).
    fw.replace(&c).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(our_sets(&ns).len(), 4);

    fw.remove().unwrap_or_else(|e| panic!("{e}"));
    assert!(our_sets(&ns).is_empty(), "{:?}", our_sets(&ns));
    assert!(!ns
        .run("iptables-legacy-save", &["-t", "mangle"])
        .contains("match-set"));
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn nft_sets_load_into_the_kernel() {
    if let Some(why) = skip_reason(&["ip", "nft"]) {
        panic!("cannot run here: {why}");
    }
    let ns = Netns::create("ssnmn");
    let c = config(CONFIG);
    let text = plan_with_hosts(&c, Backend::Nftables, &hosts(&["192.168.1.20"]))
        .nft_ruleset
        .unwrap();
    assert!(
        text.contains("iifname \"lan0\" ip daddr @ss_dst_steam_4 ct mark set"),
        "{text}"
    );
    assert!(
        text.contains("oifname \"lan0\" ip6 saddr @ss_dst_steam_6 ct mark set"),
        "{text}"
    );
    assert!(
        text.contains("iifname \"lan0\" ip saddr @ss_host_deck_4 tcp dport 443 ct mark set"),
        "{text}"
    );
    assert!(text.contains("elements = { 192.168.1.20 }"), "{text}");
    let without_queue: String = text
        .lines()
        .map(|l| match l.find("queue num") {
            Some(i) => format!("{}accept\n", &l[..i]),
            None => format!("{l}\n"),
        })
        .collect();
    ns.runner()
        .run(&PlannedCommand::new("nft", &["-f", "-"]).with_stdin(without_queue.clone()))
        .unwrap_or_else(|e| panic!("{e}\n{without_queue}"));
    let listed = ns.run("nft", &["list", "set", "inet", "slipstream", "ss_dst_steam_4"]);
    assert!(listed.contains("timeout 1m30s"), "{listed}");
    // The lease update transaction.
    let sets = slipstream_firewall::kernel_sets(&c);
    let update = slipstream_firewall::nft_hosts_transaction(&sets, &hosts(&["192.168.1.33"]));
    ns.runner()
        .run(&PlannedCommand::new("nft", &["-f", "-"]).with_stdin(update))
        .unwrap_or_else(|e| panic!("{e}"));
    let h = ns.run("nft", &["list", "set", "inet", "slipstream", "ss_host_deck_4"]);
    assert!(h.contains("192.168.1.33") && !h.contains("192.168.1.20"), "{h}");

    // A reload replaces the table: what dnsmasq put in the remote sets is read first and
    // declared again with the time each entry had left.
    ns.run(
        "nft",
        &[
            "add",
            "element",
            "inet",
            "slipstream",
            "ss_dst_steam_4",
            "{ 203.0.113.7 }",
        ],
    );
    let kept = slipstream_firewall::nft_kept_entries(&ns.runner(), &sets);
    let left = kept["ss_dst_steam_4"].clone();
    assert_eq!(left.len(), 1, "{kept:?}");
    assert_eq!(left[0].0.to_string(), "203.0.113.7");
    assert!((85..=90).contains(&left[0].1), "{left:?}");
    let text = slipstream_firewall::plan_keeping(&c, Backend::Nftables, &HostAddrs::new(), &kept)
        .nft_ruleset
        .unwrap();
    let replace = format!(
        "{}{}",
        slipstream_firewall::nft_delete_transaction(),
        text.lines()
            .map(|l| match l.find("queue num") {
                Some(i) => format!("{}accept\n", &l[..i]),
                None => format!("{l}\n"),
            })
            .collect::<String>()
    );
    ns.runner()
        .run(&PlannedCommand::new("nft", &["-f", "-"]).with_stdin(replace))
        .unwrap_or_else(|e| panic!("{e}"));
    let after = ns.run("nft", &["list", "set", "inet", "slipstream", "ss_dst_steam_4"]);
    assert!(after.contains("203.0.113.7 expires"), "{after}");
}
