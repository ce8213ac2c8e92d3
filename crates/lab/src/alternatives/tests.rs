//! Tests of the alternatives: labels, daemon configs, HTB trees.

use super::*;

fn env() -> AltEnv {
    AltEnv::new("/x/slipstreamd".into(), &ScenarioOptions::default(), "/tmp/x".into(), vec![6881, 6882])
}

#[test]
fn labels_round_trip() {
    let parse = |s: &str| Alternative::from_str(s, false);
    for a in Alternative::value_variants() {
        assert_eq!(parse(&a.label()), Ok(*a));
    }
    let labels: Vec<String> = Alternative::ALL.iter().map(Alternative::label).collect();
    let want =
        ["household", "no-control", "slipstream", "slipstream-paper", "fixed-rwnd", "htb-90", "htb-95"];
    assert_eq!(labels, want);
    assert_eq!(Alternative::HouseholdKeyBinarySearch.label(), "household-key-bs");
    assert!(parse("htb-0").is_err() && parse("cake").is_err());
}

/// `slipstream-ebpf` is `slipstream` on the eBPF datapath, nothing else changed.
#[test]
fn slipstream_ebpf_differs_only_in_the_datapath() {
    let dir = std::env::temp_dir().join(format!("lab-alt-ebpf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let load = |a: Alternative| {
        let text = a.daemon_config(&env(), Path::new("/tmp/s.sock")).unwrap();
        let p = dir.join(format!("{a}.toml"));
        std::fs::write(&p, &text).unwrap();
        slipstream_config::load(&p).unwrap_or_else(|e| panic!("{a}: {e}\n{text}"))
    };
    let mut ebpf = load(Alternative::SlipstreamEbpf);
    let nfqueue = load(Alternative::Slipstream);
    assert_eq!(ebpf.datapath.engine, slipstream_config::DatapathEngine::Ebpf);
    assert_eq!(nfqueue.datapath.engine, slipstream_config::DatapathEngine::Nfqueue);
    ebpf.datapath.engine = nfqueue.datapath.engine;
    assert_eq!(ebpf, nfqueue);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn configs_validate() {
    let dir = std::env::temp_dir().join(format!("lab-alt-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for a in Alternative::ALL {
        let Some(text) = a.daemon_config(&env(), Path::new("/tmp/s.sock")) else {
            assert!(!a.uses_daemon());
            continue;
        };
        let p = dir.join("c.toml");
        std::fs::write(&p, &text).unwrap();
        slipstream_config::load(&p).unwrap_or_else(|e| panic!("{a}: {e}\n{text}"));
        assert!(text.contains("remote_ports = [6881, 6882]"), "{text}");
    }
    // The rules' protocol (issue 24) only where a scenario asks for it.
    let text = Alternative::Household.daemon_config(&env(), Path::new("/tmp/s.sock")).unwrap();
    assert!(!text.contains("protocol"), "{text}");
    let udp = AltEnv { protocol: Some("both"), ..env() };
    let text = Alternative::Household.daemon_config(&udp, Path::new("/tmp/s.sock")).unwrap();
    assert!(text.contains("controller = \"household\"\nprotocol = \"both\"\n"), "{text}");
    // Rules with shares: written for household only, and valid there.
    let shared = AltEnv {
        rules: vec![
            LabRule { name: "w3".into(), ports: vec![6881], share: vec![("weight".into(), "3".into())] },
            LabRule {
                name: "min".into(),
                ports: vec![6882],
                share: vec![("min_rate".into(), "\"2mbit\"".into())],
            },
        ],
        ..env()
    };
    for a in Alternative::value_variants() {
        let Some(text) = a.daemon_config(&shared, Path::new("/tmp/s.sock")) else {
            continue;
        };
        let p = dir.join("c.toml");
        std::fs::write(&p, &text).unwrap();
        let config = slipstream_config::load(&p).unwrap_or_else(|e| panic!("{a}: {e}\n{text}"));
        assert_eq!(config.rules.len(), 2, "{text}");
        let household = a.is_household();
        assert_eq!(text.contains("weight = 3"), household, "{text}");
        if household {
            assert_eq!(
                config.household.budget.kind(),
                match a {
                    Alternative::HouseholdKeyBinarySearch => "key_binary_search",
                    Alternative::HouseholdKeyStochastic => "key_stochastic",
                    _ => "delay_target",
                },
                "{text}"
            );
        }
    }
    let fixed = Alternative::FixedRwnd.daemon_config(&env(), Path::new("/s")).unwrap();
    assert!(fixed.contains("window_bytes = 62500"), "{fixed}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn fixed_window_in_bdps_from_the_command_line() {
    let with = |value: &str| {
        let opts =
            ScenarioOptions { set: vec![(FIXED_WINDOW_BDP.into(), value.into())], ..Default::default() };
        Alternative::FixedRwnd.fixed_window_bytes(&opts)
    };
    // 10 Mbit/s x 100 ms = 125 000 bytes.
    assert_eq!(with("0.75").unwrap(), Some(93_750));
    assert_eq!(with("2").unwrap(), Some(250_000));
    assert!(with("0").is_err());
    assert!(with("half").is_err());
    assert_eq!(Alternative::Household.fixed_window_bytes(&ScenarioOptions::default()).unwrap(), None);
}

#[test]
fn htb_tree() {
    assert!(Alternative::Slipstream.htb_script(&env(), "br-lan").is_none());
    let script = Alternative::Htb90.htb_script(&env(), "br-lan").unwrap();
    let text: Vec<&str> = script.lines().collect();
    assert_eq!(text[0], "qdisc replace dev br-lan root handle 1: htb default 10");
    assert!(text[1].ends_with("rate 9000000bit ceil 9000000bit"), "{}", text[1]);
    assert!(text[2].contains("classid 1:10 htb rate 8550000bit ceil 9000000bit prio 0"), "{}", text[2]);
    assert!(text[3].contains("classid 1:20 htb rate 450000bit ceil 9000000bit prio 7"), "{}", text[3]);
    assert!(text[4].ends_with("pfifo limit 83"));
    assert!(text[6].contains("match ip sport 6881 0xffff flowid 1:20"), "{}", text[6]);
    assert_eq!(text.len(), 6 + 2 * 2);
}
