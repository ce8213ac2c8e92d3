//! Household control options: the `household` controller, a rule's `weight`, `min_rate` and
//! `priority`, and the `[household]` section (`config household` in UCI), in both syntaxes.

use slipstream_config::*;
use slipstream_control::ControllerConfig;
use slipstream_household::delay_target::DelayTargetVariant;
use slipstream_household::{
    BudgetConfig, DelayTargetConfig, HouseholdConfig, KeyBinarySearchConfig, KeyStochasticConfig, ShareSpec,
    UdpEnforcement,
};
use std::time::Duration;

const UCI_FILE: &str = "/etc/config/slipstream";

fn toml(text: &str) -> Config {
    parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn uci(text: &str) -> Config {
    parse_uci(text, UCI_FILE).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A household rule with `extra` lines, TOML.
fn toml_rule(extra: &str) -> String {
    format!("[[rules]]\nname = \"r\"\nremote_ports = [1]\ncontroller = \"household\"\n{extra}")
}

/// A household rule with `extra` option lines, UCI (the rule is at line 1, `extra` from line 4).
fn uci_rule(extra: &str) -> String {
    format!("config rule 'r'\n\toption remote_port '1'\n\toption controller 'household'\n{extra}")
}

/// The budget written in TOML as `budget`, in UCI as the options of `config household`.
fn toml_budget(budget: &str) -> BudgetConfig {
    toml(&format!("[household]\nbudget = {budget}\n{}", toml_rule("")))
        .household
        .budget
}

#[test]
fn household_controller_in_both_forms_and_syntaxes() {
    for text in [
        toml_rule(""),
        toml_rule("").replace("\"household\"", "{ kind = \"household\" }"),
    ] {
        let c = toml(&text);
        assert_eq!(c.rules[0].controller, ControllerConfig::Household);
        assert_eq!(c.rules[0].share, ShareSpec::default());
        assert_eq!(c.household, HouseholdConfig::default());
    }
    assert_eq!(uci(&uci_rule("")), toml(&toml_rule("")));
    // A rule without a controller gets default_controller(), and without shares the default.
    let c = toml("[[rules]]\nname = \"r\"\nremote_ports = [1]\n");
    assert_eq!(c.rules[0].controller, default_controller());
    assert_eq!(c.rules[0].share, ShareSpec::default());
}

#[test]
fn shares_in_both_syntaxes() {
    let t = toml(&toml_rule("weight = 5\nmin_rate = \"2mbit\"\npriority = 3\n"));
    assert_eq!(
        t.rules[0].share,
        ShareSpec {
            weight: 5,
            min_rate: 250_000,
            priority: 3
        }
    );
    let u = uci(&uci_rule(
        "\toption weight '5'\n\toption min_rate '2mbit'\n\toption priority '3'\n",
    ));
    assert_eq!(u, t);
    // Bounds are accepted.
    let t = toml(&toml_rule(
        "weight = 1000\npriority = 7\nmin_rate = \"100gbit\"\n",
    ));
    assert_eq!((t.rules[0].share.weight, t.rules[0].share.priority), (1000, 7));
    assert_eq!(t.rules[0].share.min_rate, 12_500_000_000);
    let t = toml(&toml_rule("weight = 1\npriority = 0\nmin_rate = 0\n"));
    assert_eq!(t.rules[0].share, ShareSpec::default());
}

#[test]
fn rates_are_bits_per_second() {
    for (text, bytes) in [
        ("2mbit", 250_000),
        ("500kbit", 62_500),
        ("1.5mbit", 187_500),
        ("1gbit", 125_000_000),
        ("64000bit", 8_000),
        ("1kbit", 125),
        (" 2MBit ", 250_000),
        ("0", 0),
        ("0kbit", 0),
    ] {
        assert_eq!(parse_rate(text), Ok(bytes), "{text}");
        let c = toml(&toml_rule(&format!("min_rate = \"{text}\"\n")));
        assert_eq!(c.rules[0].share.min_rate, bytes, "{text}");
    }
    for (text, why) in [
        ("2mbps", "ambiguous"),
        ("2kbps", "ambiguous"),
        ("2mb/s", "ambiguous"),
        ("2mbit/s", "ambiguous"),
        ("2", "no unit"),
        ("fast", "not a rate"),
        ("2 tbit", "not a rate"),
        ("-1mbit", "not a rate"),
        ("mbit", "not a rate"),
        ("500bit", "0 or 1kbit to 100gbit"),
        ("101gbit", "0 or 1kbit to 100gbit"),
    ] {
        let e = parse_rate(text).unwrap_err();
        assert!(e.contains(why), "{text}: {e}");
    }
}

/// Each bad value fails with the field path and a phrase, in TOML.
#[test]
fn bad_toml_names_the_field() {
    let vulture_rule = "[[rules]]\nname = \"r\"\nremote_ports = [1]\ncontroller = \"vulture\"\n";
    let hh = |section: &str| format!("[household]\n{section}\n{}", toml_rule(""));
    let cases: Vec<(String, &str, &str)> = vec![
        (toml_rule("weight = 0\n"), "rules[0].weight", "must be 1 to 1000, not 0"),
        (toml_rule("weight = 1001\n"), "rules[0].weight", "must be 1 to 1000"),
        (toml_rule("priority = 8\n"), "rules[0].priority", "must be 0 to 7"),
        (toml_rule("priority = -1\n"), "rules[0].priority", "must be 0 to 7"),
        (toml_rule("min_rate = \"2mbps\"\n"), "rules[0].min_rate", "ambiguous"),
        (toml_rule("min_rate = 2000000\n"), "rules[0].min_rate", "has no unit"),
        (toml_rule("min_rate = \"lots\"\n"), "rules[0].min_rate", "not a rate"),
        (toml_rule("weight = \"5\"\n"), "line 5", "invalid type"),
        (format!("{vulture_rule}weight = 2\n"), "rules[0].weight", "only household flows share a budget; set controller = \"household\" (this rule's controller is vulture)"),
        (format!("{}controller = {{ kind = \"fixed_window\", window_bytes = 9 }}\nmin_rate = \"1mbit\"\n", vulture_rule.replace("controller = \"vulture\"\n", "")), "rules[0].min_rate", "fixed_window"),
        (format!("{vulture_rule}priority = 1\n"), "rules[0].priority", "only household flows"),
        (toml_rule("").replace("\"household\"", "{ kind = \"household\", psi = \"1ms\" }"), "rules[0].controller.psi", "is a vulture parameter, not a household one"),
        (toml_rule("").replace("\"household\"", "{ kind = \"household\", weight = 2 }"), "rules[0].controller.weight", "unknown parameter; household takes none"),
        (toml_rule("").replace("\"household\"", "\"househould\""), "rules[0].controller.kind", "unknown controller \"househould\", expected \"vulture\", \"fixed_window\" or \"household\""),
        (hh("budget = \"pid\""), "household.budget.kind", "unknown budget controller \"pid\", expected \"delay_target\", \"key_binary_search\" or \"key_stochastic\""),
        (hh("budget = { target = \"5ms\" }"), "household.budget.kind", "is required"),
        (hh("budget = { kind = 1 }"), "household.budget.kind", "is not a string"),
        (hh("budget = { kind = \"delay_target\", target = \"0ms\" }"), "household.budget.target", "must be above 0"),
        (hh("budget = { kind = \"delay_target\", target = \"2s\" }"), "household.budget.target", "at most 1s"),
        (hh("budget = { kind = \"delay_target\", target = \"soon\" }"), "household.budget.target", "not a duration"),
        (hh("budget = { kind = \"delay_target\", gain = 1.5 }"), "household.budget.gain", "must be in (0, 1]"),
        (hh("budget = { kind = \"delay_target\", gain = 0 }"), "household.budget.gain", "must be in (0, 1]"),
        (hh("budget = { kind = \"delay_target\", gain = \"high\" }"), "household.budget.gain", "invalid type"),
        (hh("budget = { kind = \"delay_target\", max_growth = 5.0 }"), "household.budget.max_growth", "must be 1 to 4"),
        (hh("budget = { kind = \"delay_target\", variant = \"cubic\" }"), "household.budget.variant", "expected \"proportional\" or \"ledbat\""),
        (hh("budget = { kind = \"delay_target\", variant = \"ledbat\", max_growth = 2.0 }"), "household.budget.max_growth", "does not use it"),
        (hh("budget = { kind = \"delay_target\", variant = \"ledbat\", early_yield = true }"), "household.budget.early_yield", "only for the proportional variant"),
        (hh("budget = { kind = \"delay_target\", interval = \"1s\" }"), "household.budget.interval", "is a key_binary_search and key_stochastic parameter, not a delay_target one"),
        (hh("budget = { kind = \"key_binary_search\", target = \"5ms\" }"), "household.budget.target", "is a delay_target parameter, not a key_binary_search one"),
        (hh("budget = { kind = \"key_stochastic\", interval = \"x\" }"), "household.budget.interval", "not a duration"),
        (hh("slowdown_interval = \"1s\""), "household.slowdown_interval", "must be 0 (off) or at least 2s"),
        (hh("slowdown_interval = \"never\""), "household.slowdown_interval", "not a duration"),
        (hh("turn = \"10ms\""), "household.turn", "must be 50ms to 10s"),
        (hh("turn = \"11s\""), "household.turn", "must be 50ms to 10s"),
        (hh("probe = \"gateway\""), "household.probe", "\"gateway\" is not \"auto\" (the default route's gateway), \"off\" or an IP address like \"192.0.2.1\""),
        (hh("probe = \"10.0.0.300\""), "household.probe", "is not \"auto\""),
        (hh("probe = \"0.0.0.0\""), "household.probe", "cannot answer an echo request"),
        (hh("probe = \"ff02::1\""), "household.probe", "cannot answer an echo request"),
        (hh("probe = 1"), "line 2", "invalid type"),
        (hh("target = \"5ms\""), "line 2", "unknown field `target`"),
    ];
    for (text, path, phrase) in &cases {
        let err = match parse(text, "t.toml") {
            Ok(_) => panic!("accepted bad config:\n{text}"),
            Err(e) => e.to_string(),
        };
        assert!(err.starts_with("t.toml: "), "{err}");
        assert!(err.contains(path), "expected {path:?} in {err:?}\nfor:\n{text}");
        assert!(
            err.contains(phrase),
            "expected {phrase:?} in {err:?}\nfor:\n{text}"
        );
    }
    // The whole message, as the daemon prints it.
    let two = toml_rule("").replace("name = \"r\"", "name = \"a\"") + &toml_rule("weight = 0\n");
    let e = parse(&two, "t.toml");
    assert_eq!(
        e.unwrap_err().to_string(),
        "t.toml: rules[1].weight: must be 1 to 1000, not 0"
    );
}

/// Each bad value fails naming the UCI section, option and line.
#[test]
fn bad_uci_names_section_option_and_line() {
    let rule = "config rule 'r'\n\toption remote_port '1'\n";
    let hh = |options: &str| format!("{rule}config household 'household'\n{options}");
    let cases: Vec<(String, &str, &str)> = vec![
        (uci_rule("\toption weight '0'\n"), "rule 'r' (line 1), option weight (line 4)", "must be 1 to 1000, not 0"),
        (uci_rule("\toption weight 'x'\n"), "rule 'r' (line 1), option weight (line 4)", "is not an integer"),
        (uci_rule("\toption priority '9'\n"), "rule 'r' (line 1), option priority (line 4)", "must be 0 to 7"),
        (uci_rule("\toption min_rate '2mbps'\n"), "rule 'r' (line 1), option min_rate (line 4)", "ambiguous"),
        (uci_rule("\toption min_rate '2000000'\n"), "rule 'r' (line 1), option min_rate (line 4)", "has no unit"),
        (uci_rule("\tlist weight '2'\n"), "rule 'r' (line 1), option weight (line 4)", "takes a single value"),
        (format!("{rule}\toption controller 'vulture'\n\toption weight '2'\n"), "rule 'r' (line 1), option weight (line 4)", "only household flows share a budget; set option controller 'household' (this rule's controller is vulture)"),
        (uci_rule("\toption psi '1ms'\n"), "rule 'r' (line 1), option psi (line 4)", "is a vulture parameter, not a household one"),
        (uci_rule("").replace("'household'", "'househould'"), "rule 'r' (line 1), option controller (line 3)", "unknown controller \"househould\""),
        (hh("\toption budget 'pid'\n"), "household 'household' (line 3), option budget (line 4)", "unknown budget controller \"pid\""),
        (hh("\toption budget 'delay_target'\n\toption target '0ms'\n"), "household 'household' (line 3), option target (line 5)", "must be above 0"),
        (hh("\toption gain '2'\n"), "household 'household' (line 3), option gain (line 4)", "must be in (0, 1]"),
        (hh("\toption gain 'high'\n"), "household 'household' (line 3), option gain (line 4)", "\"high\" is not a number"),
        (hh("\toption max_growth '9'\n"), "household 'household' (line 3), option max_growth (line 4)", "must be 1 to 4"),
        (hh("\toption variant 'x'\n"), "household 'household' (line 3), option variant (line 4)", "unknown variant"),
        (hh("\toption budget 'key_stochastic'\n\toption gain '0.5'\n"), "household 'household' (line 3), option gain (line 5)", "is a delay_target parameter, not a key_stochastic one"),
        (hh("\toption interval '1s'\n"), "household 'household' (line 3), option interval (line 4)", "is a key_binary_search and key_stochastic parameter, not a delay_target one"),
        (hh("\toption slowdown_interval '1s'\n"), "household 'household' (line 3), option slowdown_interval (line 4)", "must be 0 (off) or at least 2s"),
        (hh("\toption turn '20s'\n"), "household 'household' (line 3), option turn (line 4)", "must be 50ms to 10s"),
        (hh("\toption probe 'gw'\n"), "household 'household' (line 3), option probe (line 4)", "\"gw\" is not \"auto\""),
        (hh("\toption psi '20ms'\n"), "household 'household' (line 3), option psi (line 4)", "unknown option; known options of a `config household` section: budget, slowdown_interval, turn, probe, udp, variant, target, gain, max_growth, early_yield, interactive_target, interval"),
        (hh("\tlist turn '1s'\n"), "household 'household' (line 3), option turn (line 4)", "takes a single value"),
        (format!("{}config household\n", hh("")), "household @household[1] (line 4)", "only one `config household` section is allowed (the first is at line 3)"),
    ];
    for (text, path, message) in cases {
        let e = match parse_uci(&text, UCI_FILE) {
            Ok(c) => panic!("accepted:\n{text}\n{c:?}"),
            Err(e) => e,
        };
        assert_eq!(e.path(), path, "{text}\n=> {e}");
        assert!(e.message().contains(message), "{text}\n=> {e}\nwanted: {message}");
    }
}

#[test]
fn household_section_in_both_syntaxes() {
    let t = toml(&format!(
        "[household]\nslowdown_interval = \"1m\"\nturn = \"250ms\"\n\
         [household.budget]\nkind = \"delay_target\"\ntarget = \"5ms\"\ngain = 0.25\nmax_growth = 2.0\n\
         variant = \"proportional\"\n{}",
        toml_rule("")
    ));
    assert_eq!(
        t.household,
        HouseholdConfig {
            budget: BudgetConfig::DelayTarget(DelayTargetConfig {
                target: Duration::from_millis(5),
                gain: 0.25,
                max_growth: 2.0,
                variant: DelayTargetVariant::Proportional,
                early_yield: true,
                interactive_target: Duration::from_millis(1),
            }),
            slowdown_interval: Duration::from_secs(60),
            turn: Duration::from_millis(250),
            udp: UdpEnforcement::Shape,
        }
    );
    let u = uci(&format!(
        "config household 'household'\n\toption budget 'delay_target'\n\toption target '5ms'\n\
         \toption gain '0.25'\n\toption max_growth '2'\n\toption variant 'proportional'\n\
         \toption slowdown_interval '1m'\n\toption turn '250ms'\n{}",
        uci_rule("")
    ));
    assert_eq!(u, t);
    // Budget parameters without `option budget` are the default controller's.
    let u = uci(&format!(
        "config household\n\toption target '5ms'\n\toption gain '0.25'\n\toption max_growth '2'\n\
         \toption slowdown_interval '1m'\n\toption turn '250ms'\n{}",
        uci_rule("")
    ));
    assert_eq!(u, t);
    // An empty section is all defaults, as is no section.
    assert_eq!(
        uci(&format!("config household 'household'\n{}", uci_rule(""))).household,
        HouseholdConfig::default()
    );
}

/// `probe`: "auto" by default, "off", or an address of either family, in both syntaxes.
#[test]
fn probe_target_in_both_syntaxes() {
    assert_eq!(toml(&toml_rule("")).probe, ProbeTarget::Auto);
    assert_eq!(uci(&uci_rule("")).probe, ProbeTarget::Auto);
    for (given, wanted) in [
        ("auto", ProbeTarget::Auto),
        ("off", ProbeTarget::Off),
        (" 192.0.2.1 ", ProbeTarget::Address("192.0.2.1".parse().unwrap())),
        (
            "2001:db8::1",
            ProbeTarget::Address("2001:db8::1".parse().unwrap()),
        ),
    ] {
        let t = toml(&format!("[household]\nprobe = \"{given}\"\n{}", toml_rule("")));
        assert_eq!(t.probe, wanted, "{given}");
        let u = uci(&format!(
            "config household\n\toption probe '{given}'\n{}",
            uci_rule("")
        ));
        assert_eq!(u, t, "{given}");
        assert_eq!(wanted.to_string(), given.trim());
    }
}

/// `udp`: "shape" by default, or "police", in both syntaxes; anything else is an error that names
/// both.
#[test]
fn udp_enforcement_in_both_syntaxes() {
    assert_eq!(toml(&toml_rule("")).household.udp, UdpEnforcement::Shape);
    for (given, wanted) in [
        ("shape", UdpEnforcement::Shape),
        ("police", UdpEnforcement::Police),
        (" Police ", UdpEnforcement::Police),
    ] {
        let t = toml(&format!("[household]\nudp = \"{given}\"\n{}", toml_rule("")));
        assert_eq!(t.household.udp, wanted, "{given}");
        let u = uci(&format!(
            "config household\n\toption udp '{given}'\n{}",
            uci_rule("")
        ));
        assert_eq!(u, t, "{given}");
    }
    let err = parse(
        &format!("[household]\nudp = \"drop\"\n{}", toml_rule("")),
        "t.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("household.udp") && err.contains("\"shape\" or \"police\""),
        "{err}"
    );
}

#[test]
fn slowdown_can_be_turned_off() {
    for off in ["\"off\"", "\"0s\"", "\"0\""] {
        let c = toml(&format!(
            "[household]\nslowdown_interval = {off}\n{}",
            toml_rule("")
        ));
        assert_eq!(c.household.slowdown_interval, Duration::ZERO, "{off}");
    }
    let c = uci(&format!(
        "config household\n\toption slowdown_interval 'off'\n{}",
        uci_rule("")
    ));
    assert!(c.household.slowdown_interval.is_zero());
}

#[test]
fn ledbat_variant_takes_rfc_6817_defaults() {
    assert_eq!(
        toml_budget("{ kind = \"delay_target\", variant = \"ledbat\" }"),
        BudgetConfig::DelayTarget(DelayTargetConfig::ledbat())
    );
    let BudgetConfig::DelayTarget(c) =
        toml_budget("{ kind = \"delay_target\", variant = \"ledbat\", gain = 0.5, target = \"25ms\" }")
    else {
        panic!()
    };
    assert_eq!(c.variant, DelayTargetVariant::Ledbat);
    assert_eq!((c.gain, c.target), (0.5, Duration::from_millis(25)));
}

/// Every budget kind: its name gives its default config (string or table form, TOML or UCI), and
/// the config's `kind()` gives the name back.
#[test]
fn budget_kinds_round_trip() {
    let defaults = [
        BudgetConfig::DelayTarget(DelayTargetConfig::default()),
        BudgetConfig::KeyBinarySearch(KeyBinarySearchConfig::default()),
        BudgetConfig::KeyStochastic(KeyStochasticConfig::default()),
    ];
    for expected in defaults {
        let kind = expected.kind();
        let by_name = toml_budget(&format!("\"{kind}\""));
        assert_eq!(by_name, expected, "{kind}");
        assert_eq!(by_name.kind(), kind);
        assert_eq!(
            toml_budget(&format!("{{ kind = \"{kind}\" }}")),
            expected,
            "{kind}"
        );
        let u = uci(&format!(
            "config household\n\toption budget '{kind}'\n{}",
            uci_rule("")
        ));
        assert_eq!(u.household.budget, expected, "{kind}");
    }
    assert_eq!(
        toml(&toml_rule("")).household.budget,
        BudgetConfig::default(),
        "no [household]: the default budget"
    );
}

/// Every parameter of every budget kind, none at its default: the same config in TOML and UCI,
/// each value where it belongs. (Struct literals: a new library field fails here until mapped.)
#[test]
fn budget_parameters_round_trip() {
    let cases = [
        (
            "{ kind = \"delay_target\", variant = \"ledbat\", target = \"20ms\", gain = 0.75 }",
            "\toption budget 'delay_target'\n\toption variant 'ledbat'\n\toption target '20ms'\n\
             \toption gain '0.75'\n",
            BudgetConfig::DelayTarget(DelayTargetConfig {
                target: Duration::from_millis(20),
                gain: 0.75,
                max_growth: DelayTargetConfig::default().max_growth,
                variant: DelayTargetVariant::Ledbat,
                early_yield: false,
                interactive_target: Duration::from_millis(1),
            }),
        ),
        (
            "{ kind = \"delay_target\", target = \"3ms\", gain = 0.25, max_growth = 3, early_yield = false, \
             interactive_target = \"2ms\" }",
            "\toption target '3ms'\n\toption gain '0.25'\n\toption max_growth '3'\n\toption early_yield '0'\n\
             \toption interactive_target '2ms'\n",
            BudgetConfig::DelayTarget(DelayTargetConfig {
                target: Duration::from_millis(3),
                gain: 0.25,
                max_growth: 3.0,
                variant: DelayTargetVariant::Proportional,
                early_yield: false,
                interactive_target: Duration::from_millis(2),
            }),
        ),
        (
            "{ kind = \"key_binary_search\", interval = \"300ms\", unit_bytes = 1448, epsilon_units = 2.5, \
             epsilon_prime_units = 3, delta = 0.2, c = 4, max_budget_bytes = 0x100000, anchored_estimate = false }",
            "\toption budget 'key_binary_search'\n\toption interval '300ms'\n\toption unit_bytes '1448'\n\
             \toption epsilon_units '2.5'\n\toption epsilon_prime_units '3'\n\toption delta '0.2'\n\
             \toption c '4'\n\toption max_budget_bytes '0x100000'\n\toption anchored_estimate '0'\n",
            BudgetConfig::KeyBinarySearch(KeyBinarySearchConfig {
                interval: Duration::from_millis(300),
                unit_bytes: 1448,
                epsilon_units: 2.5,
                epsilon_prime_units: 3.0,
                delta: 0.2,
                c: 4.0,
                max_budget_bytes: 1 << 20,
                anchored_estimate: false,
            }),
        ),
        (
            "{ kind = \"key_stochastic\", interval = \"1s\", unit_bytes = 500, epsilon_units = 0.5, \
             epsilon_prime_units = 2, delta = 0.05, gamma = 2.5, max_budget_bytes = 2000000, anchored_estimate = false }",
            "\toption budget 'key_stochastic'\n\toption interval '1s'\n\toption unit_bytes '500'\n\
             \toption epsilon_units '0.5'\n\toption epsilon_prime_units '2'\n\toption delta '0.05'\n\
             \toption gamma '2.5'\n\toption max_budget_bytes '2000000'\n\toption anchored_estimate 'no'\n",
            BudgetConfig::KeyStochastic(KeyStochasticConfig {
                interval: Duration::from_secs(1),
                unit_bytes: 500,
                epsilon_units: 0.5,
                epsilon_prime_units: 2.0,
                delta: 0.05,
                gamma: 2.5,
                max_budget_bytes: 2_000_000,
                anchored_estimate: false,
            }),
        ),
    ];
    for (budget, options, expected) in cases {
        assert_eq!(toml_budget(budget), expected, "{budget}");
        let u = uci(&format!("config household\n{options}{}", uci_rule("")));
        assert_eq!(u.household.budget, expected, "{options}");
    }
}

/// Key et al.'s parameters: the library's checks, reported at the option.
#[test]
fn bad_key_parameters_name_the_field() {
    let hh = |budget: &str| format!("[household]\nbudget = {budget}\n{}", toml_rule(""));
    for kind in ["key_binary_search", "key_stochastic"] {
        for (params, path, phrase) in [
            ("interval = \"10ms\"", "interval", "must be 50ms to 10s"),
            ("unit_bytes = 0", "unit_bytes", "must be 1 to 65536, not 0"),
            ("unit_bytes = 5000000000", "unit_bytes", "out of range"),
            ("epsilon_units = 0", "epsilon_units", "above 0"),
            (
                "epsilon_prime_units = 1001",
                "epsilon_prime_units",
                "at most 1000",
            ),
            ("delta = 1", "delta", "must be in (0, 1)"),
            ("max_budget_bytes = 100", "max_budget_bytes", "at least 4 units"),
            ("max_budget_bytes = -1", "max_budget_bytes", "out of range"),
            ("anchored_estimate = \"yes\"", "anchored_estimate", "invalid type"),
            ("target = \"5ms\"", "target", "is a delay_target parameter"),
        ] {
            let text = hh(&format!("{{ kind = \"{kind}\", {params} }}"));
            let e = parse(&text, "t.toml").expect_err(&text);
            assert_eq!(e.path(), format!("household.budget.{path}"), "{text}\n=> {e}");
            assert!(e.message().contains(phrase), "{text}\n=> {e}\nwanted: {phrase}");
        }
    }
    for (text, path, phrase) in [
        (
            hh("{ kind = \"key_binary_search\", c = 0 }"),
            "household.budget.c",
            "above 0 and at most 100",
        ),
        (
            hh("{ kind = \"key_stochastic\", gamma = 101 }"),
            "household.budget.gamma",
            "above 0 and at most 100",
        ),
        (
            hh("{ kind = \"key_stochastic\", c = 1 }"),
            "household.budget.c",
            "is a key_binary_search parameter, not a key_stochastic one",
        ),
        (
            hh("{ kind = \"key_binary_search\", gamma = 1 }"),
            "household.budget.gamma",
            "is a key_stochastic parameter",
        ),
    ] {
        let e = parse(&text, "t.toml").expect_err(&text);
        assert_eq!(e.path(), path, "{text}\n=> {e}");
        assert!(e.message().contains(phrase), "{text}\n=> {e}\nwanted: {phrase}");
    }
    let rule = uci_rule("");
    for (options, path, phrase) in [
        (
            "\toption budget 'key_stochastic'\n\toption anchored_estimate 'maybe'\n",
            "option anchored_estimate (line 3)",
            "is not a boolean",
        ),
        (
            "\toption budget 'key_binary_search'\n\toption unit_bytes 'big'\n",
            "option unit_bytes (line 3)",
            "is not an integer",
        ),
        (
            "\toption budget 'key_binary_search'\n\toption delta '2'\n",
            "option delta (line 3)",
            "must be in (0, 1), not 2",
        ),
        (
            "\toption budget 'key_binary_search'\n\toption gamma '2'\n",
            "option gamma (line 3)",
            "is a key_stochastic parameter, not a key_binary_search one",
        ),
    ] {
        let text = format!("config household 'h'\n{options}{rule}");
        let e = parse_uci(&text, UCI_FILE).expect_err(&text);
        assert_eq!(
            e.path(),
            format!("household 'h' (line 1), {path}"),
            "{text}\n=> {e}"
        );
        assert!(e.message().contains(phrase), "{text}\n=> {e}\nwanted: {phrase}");
    }
}

/// Every TOML example in docs/configuration.md is a valid config on its own.
#[test]
fn documented_toml_examples_parse() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert!(blocks.iter().filter(|b| b.contains("[household")).count() >= 2);
    for block in blocks {
        toml(block);
    }
}
