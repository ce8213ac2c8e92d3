//! Root integration test: installs, re-installs and removes the rules inside a throwaway network
//! namespace (`ip netns add ssfw<pid>`), so the host's firewall is never touched. Ignored by
//! default (needs root, `ip` and `iptables-legacy`); scripts/test.sh runs it with --ignored.

use slipstream_config::{parse, Config};
use slipstream_firewall::{detect_backend_with, plan, reset_with, Backend, Firewall, PlannedCommand};
use std::path::PathBuf;
use std::process::Command;

mod common;
use common::{have, routed, skip_reason, Netns, Routed};

fn shipped() -> Config {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/slipstream.toml");
    slipstream_config::load(&path).unwrap()
}

fn count(haystack: &str, line: &str) -> usize {
    haystack.lines().filter(|l| l.trim() == line).count()
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn install_reinstall_remove_in_netns() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let ns = Netns::create("ssfw");
    let config = shipped();
    let expected = plan(&config, Backend::IptablesLegacy);

    // Resetting an empty namespace is fine.
    assert!(reset_with(&ns.runner(), Backend::IptablesLegacy, &config).is_empty());

    let fw = Firewall::install_with(&config, Backend::IptablesLegacy, ns.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    for (i, (save, prog)) in [
        ("iptables-legacy-save", "iptables-legacy"),
        ("ip6tables-legacy-save", "ip6tables-legacy"),
    ]
    .iter()
    .enumerate()
    {
        let dump = ns.run(save, &["-t", "mangle"]);
        assert!(dump.contains(":SLIPSTREAM - [0:0]"), "{dump}");
        assert!(dump.contains(":SLIPSTREAM_CLASSIFY - [0:0]"), "{dump}");
        assert_eq!(count(&dump, "-A FORWARD -p tcp -j SLIPSTREAM"), 1, "{dump}");
        // The generated lines are in canonical form: they read back identically, in order.
        let p = &expected.iptables[i];
        for (chain, lines) in [
            ("SLIPSTREAM", &p.main_rules),
            ("SLIPSTREAM_CLASSIFY", &p.classify_rules),
        ] {
            let listed = ns.run(prog, &["-t", "mangle", "-S", chain]);
            let listed: Vec<&str> = listed.lines().filter(|l| l.starts_with("-A ")).collect();
            assert_eq!(&listed, lines, "{prog} -S {chain}");
        }
    }

    // A second install (as after a crash: the first instance is never removed) must not
    // duplicate anything.
    std::mem::forget(fw);
    let fw = Firewall::install_with(&config, Backend::IptablesLegacy, ns.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    let dump = ns.run("iptables-legacy-save", &["-t", "mangle"]);
    assert_eq!(count(&dump, "-A FORWARD -p tcp -j SLIPSTREAM"), 1, "{dump}");
    let listed = ns.run("iptables-legacy", &["-t", "mangle", "-S", "SLIPSTREAM"]);
    // Classify jump, unclassed SYNs for household control, restore-mark, two queues; with a UDP
    // rule also the unclassed UDP packet's return and classify jump: the plan's lines, once.
    assert_eq!(
        listed.lines().filter(|l| l.starts_with("-A ")).count(),
        expected.iptables[0].main_rules.len(),
        "{listed}"
    );
    std::mem::forget(fw);

    // Switching to local mode replaces the FORWARD hook with OUTPUT and INPUT.
    let local = parse(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/slipstream.toml"),
        )
        .unwrap()
        .replace("hook = \"forward\"", "hook = \"local\""),
        "local",
    )
    .unwrap();
    let fw = Firewall::install_with(&local, Backend::IptablesLegacy, ns.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    for save in ["iptables-legacy-save", "ip6tables-legacy-save"] {
        let dump = ns.run(save, &["-t", "mangle"]);
        assert_eq!(count(&dump, "-A FORWARD -p tcp -j SLIPSTREAM"), 0, "{dump}");
        assert_eq!(
            count(&dump, "-A OUTPUT ! -o lo -p tcp -j SLIPSTREAM"),
            1,
            "{dump}"
        );
        assert_eq!(count(&dump, "-A INPUT ! -i lo -p tcp -j SLIPSTREAM"), 1, "{dump}");
        assert!(dump.contains("-m addrtype --src-type LOCAL"), "{dump}");
    }

    fw.remove().unwrap_or_else(|e| panic!("{e}"));
    for save in ["iptables-legacy-save", "ip6tables-legacy-save"] {
        let dump = ns.run(save, &["-t", "mangle"]);
        assert!(
            !dump.contains("SLIPSTREAM"),
            "{save} still has Slipstream's rules:\n{dump}"
        );
    }
    // Removing again (nothing there) is fine.
    assert!(reset_with(&ns.runner(), Backend::IptablesLegacy, &config).is_empty());

    // MAC rules: accepted by the kernel in FORWARD and read back in the generated form.
    let macs = parse(
        "[[rules]]\nname = \"m\"\nlan_macs = [\"AA:BB:CC:DD:EE:FF\"]\nlan_hosts = [\"192.168.1.0/24\", \"fd00::/64\"]\n\
         [[rules]]\nname = \"p\"\nremote_ports = [6881]\n",
        "macs",
    )
    .unwrap();
    let fw =
        Firewall::install_with(&macs, Backend::IptablesLegacy, ns.runner()).unwrap_or_else(|e| panic!("{e}"));
    for p in &plan(&macs, Backend::IptablesLegacy).iptables {
        let listed = ns.run(p.family.program(), &["-t", "mangle", "-S", "SLIPSTREAM_CLASSIFY"]);
        let listed: Vec<&str> = listed.lines().filter(|l| l.starts_with("-A ")).collect();
        assert_eq!(listed, p.classify_rules, "{}", p.family.program());
        assert!(
            listed[0].contains("-m mac --mac-source aa:bb:cc:dd:ee:ff"),
            "{listed:?}"
        );
    }
    fw.remove().unwrap_or_else(|e| panic!("{e}"));

    // Dropping an installed Firewall removes its rules too.
    drop(Firewall::install_with(&config, Backend::IptablesLegacy, ns.runner()).unwrap());
    assert!(!ns
        .run("iptables-legacy-save", &["-t", "mangle"])
        .contains("SLIPSTREAM"));
}

/// A daemon killed with `kill -9` leaves its rules (they bypass the queue while nobody listens);
/// the next one takes them over in one transaction: the hook jump is never deleted (its packet
/// counter survives), and the chains hold the new config's rules.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn install_takes_over_a_killed_daemons_rules_without_a_gap() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let ns = Netns::create("ssfw");
    let config = shipped();
    let fw = Firewall::install_with(&config, Backend::IptablesLegacy, ns.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    std::mem::forget(fw); // kill -9: nothing removed
                          // Mark the TCP jump: replace it in place with preset counters (7 packets, 420 bytes). With
                          // a UDP rule in the shipped config, the UDP jump is there too, and may come first.
    let hooks = ns.run("iptables-legacy", &["-t", "mangle", "-S", "FORWARD"]);
    let position = hooks
        .lines()
        .filter(|l| l.starts_with("-A "))
        .position(|l| l == "-A FORWARD -p tcp -j SLIPSTREAM")
        .unwrap_or_else(|| panic!("no TCP jump: {hooks}"));
    ns.run(
        "iptables-legacy",
        &[
            "-t",
            "mangle",
            "-R",
            "FORWARD",
            &(position + 1).to_string(),
            "-p",
            "tcp",
            "-j",
            "SLIPSTREAM",
            "-c",
            "7",
            "420",
        ],
    );
    let changed = parse(
        "[[rules]]\nname = \"only\"\nremote_ports = [6881]\n[datapath]\nhook = \"forward\"\n",
        "changed",
    )
    .unwrap();
    let fw = Firewall::install_with(&changed, Backend::IptablesLegacy, ns.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    let listed = ns.run(
        "iptables-legacy",
        &["-t", "mangle", "-L", "FORWARD", "-v", "-x", "-n"],
    );
    let jump: Vec<&str> = listed.lines().filter(|l| l.contains("SLIPSTREAM")).collect();
    assert_eq!(jump.len(), 1, "{listed}");
    let counters: Vec<&str> = jump[0].split_whitespace().take(2).collect();
    assert_eq!(
        counters,
        ["7", "420"],
        "the jump was kept, not re-inserted: {listed}"
    );
    let p = &plan(&changed, Backend::IptablesLegacy).iptables[0];
    let classify = ns.run("iptables-legacy", &["-t", "mangle", "-S", "SLIPSTREAM_CLASSIFY"]);
    let classify: Vec<&str> = classify.lines().filter(|l| l.starts_with("-A ")).collect();
    assert_eq!(classify, p.classify_rules, "the new config's rules");
    assert!(fw.check().unwrap());
    fw.remove().unwrap_or_else(|e| panic!("{e}"));
    assert!(!ns
        .run("iptables-legacy-save", &["-t", "mangle"])
        .contains("SLIPSTREAM"));
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn missing_program_is_reported_with_a_hint() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let ns = Netns::create("ssfwb");
    let err = ns
        .runner()
        .run(&PlannedCommand::new("iptables-legacy-nonexistent", &["-V"]))
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("iptables-legacy-nonexistent not found: install iptables"),
        "{err}"
    );
    let err = ns
        .runner()
        .run(&PlannedCommand::new(
            "iptables-legacy",
            &["-t", "nosuchtable", "-S"],
        ))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`iptables-legacy -t nosuchtable -S` failed"),
        "{err}"
    );
}

/// nftables: detection must agree with what `nft -c` says about the queue statement, and the
/// generated ruleset must be accepted by the kernel apart from the queue statements (which this
/// kernel cannot check, having no nft queue expression).
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn nftables_detection_and_ruleset_check() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    assert!(have("nft"), "nft not found");
    let ns = Netns::create("ssfwn");
    let runner = ns.runner();
    let auto = detect_backend_with(&runner, slipstream_config::FirewallBackend::Auto).unwrap();
    let forced = detect_backend_with(&runner, slipstream_config::FirewallBackend::Nftables);
    eprintln!("auto-detected backend: {auto}");
    match auto {
        Backend::Nftables => assert!(forced.is_ok()),
        Backend::IptablesLegacy => {
            let err = forced.unwrap_err().to_string();
            assert!(err.contains("nft_queue"), "{err}");
        }
    }
    assert_eq!(
        detect_backend_with(&runner, slipstream_config::FirewallBackend::Iptables).unwrap(),
        Backend::IptablesLegacy
    );

    let mut config = shipped();
    config.rules.push(parse(
        "[[rules]]\nname = \"host\"\nlan_hosts = [\"192.168.1.20\", \"fd00::/64\", \"fd00::1\"]\ndscp = [\"CS1\"]\n",
        "x",
    )
    .unwrap()
    .rules
    .remove(0));
    config.rules.push(
        parse(
            "[[rules]]\nname = \"mac\"\nlan_macs = [\"aa:bb:cc:dd:ee:ff\", \"02:00:00:00:00:01\"]\nlan_hosts = [\"192.168.1.0/24\", \"fd00::/64\"]\n",
            "x",
        )
        .unwrap()
        .rules
        .remove(0),
    );
    config.datapath.lan_interfaces = vec!["br-lan".into(), "wlan+".into()];
    config.datapath.hook = slipstream_config::Hook::Both;
    let text = plan(&config, Backend::Nftables).nft_ruleset.unwrap();

    let without_queue: String = text
        .lines()
        .map(|l| {
            if let Some(i) = l.find("queue num") {
                format!("{}accept\n", &l[..i])
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let check = PlannedCommand::new("nft", &["-c", "-f", "-"]);
    runner
        .run(&check.clone().with_stdin(without_queue.clone()))
        .unwrap_or_else(|e| panic!("{e}\n{without_queue}"));

    // The real text: either fully accepted, or rejected only on the queue lines.
    match runner.run(&check.with_stdin(text.clone())) {
        Ok(_) => assert_eq!(auto, Backend::Nftables),
        Err(slipstream_firewall::FirewallError::Failed { stderr, .. }) => {
            for l in stderr.lines().filter(|l| l.starts_with("/dev/stdin:")) {
                let n: usize = l.split(':').nth(1).unwrap().parse().unwrap();
                let line = text.lines().nth(n - 1).unwrap();
                assert!(
                    line.contains("queue num"),
                    "nft rejected a non-queue line {n}: {line}\n{stderr}"
                );
            }
        }
        Err(e) => panic!("{e}"),
    }
}

/// Real traffic through a router namespace: a flow to a background port is classed (connmark set)
/// on its SYN and its packets hit both NFQUEUE rules and still flow (nobody listens:
/// --queue-bypass); a flow to another port never reaches the queues, and only its SYN / SYN-ACK
/// packets enter the classify chain; a background-port flow already established when the rules
/// were installed (its SYN unseen) stays unclassed.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn forwarded_flow_is_classed_and_queued() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    assert!(have("iperf3"), "iperf3 not found");
    let Routed { cli, rtr, srv } = routed("ssfw", "sslan", "sswan", 77);
    let (c, s) = (cli.0.as_str(), srv.0.as_str());

    let text = "[datapath]\nlan_interfaces = [\"sslan\"]\nipv6 = false\n\
                [[rules]]\nname = \"bg\"\nremote_ports = [6881]\n";
    let config = parse(text, "t").unwrap();

    // A background-port flow that is already running when the rules go in: its SYN was not seen.
    let mut early_server = Command::new("ip")
        .args(["netns", "exec", s, "iperf3", "-s", "-1", "-p", "6881"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let early_client = Command::new("ip")
        .args([
            "netns",
            "exec",
            c,
            "iperf3",
            "-c",
            "10.77.2.2",
            "-p",
            "6881",
            "-t",
            "3",
            "-b",
            "20M",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let fw = Firewall::install_with(&config, Backend::IptablesLegacy, rtr.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    let early = early_client.wait_with_output().unwrap();
    assert!(early.status.success(), "early iperf3 client failed");
    let _ = early_server.wait();

    let transfer = |port: &str| {
        let mut server = Command::new("ip")
            .args(["netns", "exec", s, "iperf3", "-s", "-1", "-p", port])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let out = cli.run(
            "iperf3",
            &[
                "-c",
                "10.77.2.2",
                "-p",
                port,
                "-n",
                "1M",
                "--connect-timeout",
                "3000",
            ],
        );
        assert!(out.contains("sender"), "{out}");
        let _ = server.wait();
    };
    // queued packet counts of the two NFQUEUE rules (ACK queue, data queue)
    let queued = || -> (u64, u64) {
        let out = rtr.run(
            "iptables-legacy",
            &["-w", "-t", "mangle", "-L", "SLIPSTREAM", "-v", "-n", "-x"],
        );
        let counts: Vec<u64> = out
            .lines()
            .filter(|l| l.contains("NFQUEUE") && !l.contains("limit:"))
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        (counts[0], counts[1])
    };
    // Opening SYNs of unclassed flows queued (household control hears best effort start).
    let syns_queued = || -> u64 {
        let out = rtr.run(
            "iptables-legacy",
            &["-w", "-t", "mangle", "-L", "SLIPSTREAM", "-v", "-n", "-x"],
        );
        out.lines()
            .find(|l| l.contains("NFQUEUE") && l.contains("limit:"))
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .unwrap_or_else(|| panic!("no rule queueing unclassed SYNs:\n{out}"))
    };

    // packet counts of the jump to the classify chain, and of the FORWARD hook
    let counter = |chain: &str, target: &str| -> u64 {
        let out = rtr.run(
            "iptables-legacy",
            &["-w", "-t", "mangle", "-L", chain, "-v", "-n", "-x"],
        );
        out.lines()
            .find(|l| l.split_whitespace().nth(2) == Some(target))
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .unwrap_or_else(|| panic!("no {target} rule in {chain}:\n{out}"))
    };
    assert_eq!(
        queued(),
        (0, 0),
        "a flow established before the rules (SYN unseen) must stay unclassed"
    );
    if have("conntrack") {
        let ct = rtr.run("conntrack", &["-L", "-p", "tcp", "--dport", "6881"]);
        assert!(ct.contains("mark=0 "), "{ct}");
        assert!(
            !ct.contains("mark=65536"),
            "an established flow got classed:\n{ct}"
        );
    }
    rtr.run("iptables-legacy", &["-w", "-t", "mangle", "-Z"]);

    transfer("5201");
    assert_eq!(queued(), (0, 0), "a flow matching no rule must not be queued");
    // ... but its opening SYNs are, for household control: iperf3's two connections (a
    // retransmitted SYN may add one), never a SYN-ACK or any later packet.
    let syns = syns_queued();
    assert!((2..=4).contains(&syns), "{syns} unclassed SYNs queued");
    let hooked = counter("FORWARD", "SLIPSTREAM");
    let classify_walks = counter("SLIPSTREAM", "SLIPSTREAM_CLASSIFY");
    // iperf3 opens two connections: 2 SYNs + 2 SYN-ACKs (a retransmitted SYN may add one).
    assert!(
        (4..=8).contains(&classify_walks) && hooked > 40,
        "only SYN / SYN-ACK packets may enter the classify chain: {classify_walks} of {hooked}"
    );
    transfer("6881");
    let (acks, data) = queued();
    assert!(
        acks > 0 && data > 0,
        "background flow not queued: acks {acks}, data {data}"
    );
    if have("conntrack") {
        let ct = rtr.run("conntrack", &["-L", "-p", "tcp", "--dport", "6881"]);
        assert!(ct.contains("mark=65536"), "connmark not set to rule 1:\n{ct}");
    }
    fw.remove().unwrap();
}

/// The offload check run for real: the UCI file from disk, `nft list ruleset` in a namespace. This
/// kernel has no nft flowtables (CONFIG_NF_FLOW_TABLE unset), so the fw4 flowtable itself is only
/// covered by the unit tests' ruleset fixtures; here a namespace without offloading must report
/// only what the UCI file says.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn flow_offload_detection_in_netns() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let ns = Netns::create("ssfwo");
    let dir = std::env::temp_dir().join(format!("ssfw-offload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let uci = dir.join("firewall");
    std::fs::write(&uci, "config defaults\n\toption flow_offloading '1'\n").unwrap();
    let found = slipstream_firewall::detect_flow_offload_at(&ns.runner(), &uci);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].source, slipstream_firewall::OffloadSource::FirewallUci);
    std::fs::write(&uci, "config defaults\n\toption flow_offloading '0'\n").unwrap();
    assert!(slipstream_firewall::detect_flow_offload_at(&ns.runner(), &uci).is_empty());
    assert!(slipstream_firewall::detect_flow_offload_at(&ns.runner(), &dir.join("missing")).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}
