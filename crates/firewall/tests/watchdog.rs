//! Root integration test of the daemon's firewall watchdog and live replacement, in a throwaway
//! network namespace (`ip netns add sswd<pid>`): rules flushed or deleted behind the daemon's back
//! are found missing and re-applied; a config reload replaces the rules in place (hook changes,
//! IPv6 switched off and on). Ignored by default (needs root and the iptables-legacy
//! tools); scripts/test.sh runs it with --ignored.

use slipstream_config::{parse, Config};
use slipstream_firewall::{plan, Backend, Firewall};

mod common;
use common::{skip_reason, Netns};

fn config(rules: &str, extra_datapath: &str) -> Config {
    parse(
        &format!("[datapath]\nlan_interfaces = [\"br-lan\"]\n{extra_datapath}\n{rules}"),
        "test.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

const TWO_RULES: &str = "[[rules]]\nname = \"bt\"\nremote_ports = [6881]\n\
                         [[rules]]\nname = \"le\"\ndscp = [\"LE\"]\n";
const THREE_RULES: &str = "[[rules]]\nname = \"backup\"\nremote_ports = [22, 873]\n\
                           [[rules]]\nname = \"bt\"\nremote_ports = [6881, 51413]\n\
                           [[rules]]\nname = \"le\"\ndscp = [\"LE\", \"CS1\"]\n";

fn count(haystack: &str, line: &str) -> usize {
    haystack.lines().filter(|l| l.trim() == line).count()
}

/// The rules installed in `ns` are exactly `config`'s plan (chains and one jump per hook).
fn assert_installed_as(ns: &Netns, config: &Config) {
    for p in &plan(config, Backend::IptablesLegacy).iptables {
        for (chain, lines) in [
            ("SLIPSTREAM", &p.main_rules),
            ("SLIPSTREAM_CLASSIFY", &p.classify_rules),
        ] {
            let listed = ns.run(p.family.program(), &["-t", "mangle", "-S", chain]);
            let listed: Vec<&str> = listed.lines().filter(|l| l.starts_with("-A ")).collect();
            assert_eq!(&listed, lines, "{} -S {chain}", p.family.program());
        }
        let dump = ns.save(p.family.save_program());
        for hook in p.hook_rules_as_listed() {
            assert_eq!(count(&dump, &hook), 1, "{dump}");
        }
    }
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn watchdog_reapplies_flushed_or_deleted_rules() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let ns = Netns::create("sswdw");
    let config = config(TWO_RULES, "");
    let mut fw = Firewall::install_with(&config, Backend::IptablesLegacy, ns.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fw.check().unwrap());
    assert!(!fw.ensure_installed().unwrap(), "nothing to do while installed");

    // An admin flushes the mangle table: our chains stay, empty, and the jump is gone.
    ns.run("iptables-legacy", &["-w", "-t", "mangle", "-F"]);
    assert!(!fw.check().unwrap());
    assert!(fw.ensure_installed().unwrap(), "re-applied");
    assert!(fw.check().unwrap());
    assert_installed_as(&ns, &config);

    // Only IPv6 flushed: found as well.
    ns.run("ip6tables-legacy", &["-w", "-t", "mangle", "-F"]);
    assert!(!fw.check().unwrap());
    assert!(fw.ensure_installed().unwrap());
    assert_installed_as(&ns, &config);

    // Chains deleted too (a firewall restart that rebuilds the table without them).
    for cmd in [
        vec!["-w", "-t", "mangle", "-F"],
        vec!["-w", "-t", "mangle", "-X", "SLIPSTREAM"],
        vec!["-w", "-t", "mangle", "-X", "SLIPSTREAM_CLASSIFY"],
    ] {
        ns.run("iptables-legacy", &cmd);
    }
    assert!(!fw.check().unwrap());
    assert!(fw.ensure_installed().unwrap());
    assert_installed_as(&ns, &config);

    // A duplicated jump (someone re-ran an old script) counts as not as planned, and is fixed.
    ns.run(
        "iptables-legacy",
        &[
            "-w",
            "-t",
            "mangle",
            "-I",
            "FORWARD",
            "1",
            "-p",
            "tcp",
            "-j",
            "SLIPSTREAM",
        ],
    );
    assert!(!fw.check().unwrap());
    assert!(fw.ensure_installed().unwrap());
    assert_installed_as(&ns, &config);
    assert!(!fw.ensure_installed().unwrap());

    fw.remove().unwrap_or_else(|e| panic!("{e}"));
    assert!(!ns.save("iptables-legacy-save").contains("SLIPSTREAM"));
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn replace_swaps_rules_in_place() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    let ns = Netns::create("sswdr");
    // Someone else's rule in FORWARD before ours must survive every replacement.
    let two = config(TWO_RULES, "");
    let mut fw =
        Firewall::install_with(&two, Backend::IptablesLegacy, ns.runner()).unwrap_or_else(|e| panic!("{e}"));
    ns.run(
        "iptables-legacy",
        &["-w", "-t", "mangle", "-A", "FORWARD", "-p", "udp", "-j", "ACCEPT"],
    );

    // More rules, reordered: chains replaced, the jump untouched (still once).
    let three = config(THREE_RULES, "");
    fw.replace(&three).unwrap_or_else(|e| panic!("{e}"));
    assert_installed_as(&ns, &three);
    assert!(fw.check().unwrap());
    assert_eq!(fw.plan(), &plan(&three, Backend::IptablesLegacy));
    let dump = ns.save("iptables-legacy-save");
    assert!(dump.contains("--dports 22,873"), "{dump}");
    assert_eq!(count(&dump, "-A FORWARD -p udp -j ACCEPT"), 1, "{dump}");

    // Hook forward -> both: INPUT and OUTPUT jumps added, FORWARD's kept.
    let both = config(THREE_RULES, "hook = \"both\"");
    fw.replace(&both).unwrap_or_else(|e| panic!("{e}"));
    assert_installed_as(&ns, &both);
    // Back to forward, IPv6 off: the local jumps go, ip6tables is emptied of ours.
    let v4 = config(TWO_RULES, "ipv6 = false");
    fw.replace(&v4).unwrap_or_else(|e| panic!("{e}"));
    assert_installed_as(&ns, &v4);
    let dump = ns.save("iptables-legacy-save");
    assert_eq!(
        count(&dump, "-A OUTPUT ! -o lo -p tcp -j SLIPSTREAM"),
        0,
        "{dump}"
    );
    assert!(!ns.save("ip6tables-legacy-save").contains("SLIPSTREAM"));
    assert!(fw.check().unwrap());
    // IPv6 on again.
    fw.replace(&two).unwrap_or_else(|e| panic!("{e}"));
    assert_installed_as(&ns, &two);

    // Rules flushed behind our back, then a reload: the new rules are installed from scratch.
    ns.run("iptables-legacy", &["-w", "-t", "mangle", "-F"]);
    fw.replace(&three).unwrap_or_else(|e| panic!("{e}"));
    assert_installed_as(&ns, &three);

    fw.remove().unwrap_or_else(|e| panic!("{e}"));
    for save in ["iptables-legacy-save", "ip6tables-legacy-save"] {
        assert!(!ns.save(save).contains("SLIPSTREAM"), "{save}");
    }
}
