//! Tests of `main`.

use super::*;
use slipstream_lab::Alternative;

fn run_args(args: &[&str]) -> RunArgs {
    let matches = cli().try_get_matches_from(args).unwrap();
    let (name, sub) = matches.subcommand().unwrap();
    assert_eq!(name, "udp-square");
    RunArgs::from_arg_matches(sub).unwrap()
}

#[test]
fn set_keys_are_checked_against_the_scenario() {
    let ok = run_args(&["lab", "udp-square", "--set", "periods=1,5", "--cc", "reno"]).opts;
    check(&ok, &[scenarios::lookup("udp-square").unwrap()]).unwrap();
    assert_eq!(ok.extra("periods"), Some("1,5"));
    assert_eq!(ok.cc, "reno");
    assert!(cli().try_get_matches_from(["lab", "udp-square", "--cc", "vegas"]).is_err());
    let typo = run_args(&["lab", "udp-square", "--set", "period=1,5"]).opts;
    let err = check(&typo, &[scenarios::lookup("udp-square").unwrap()]).unwrap_err().to_string();
    assert!(err.contains("--set period: unknown key"), "{err}");
    assert!(err.contains("valid: fixed_window_bdp, periods"), "{err}");
    let window = run_args(&["lab", "udp-square", "--set", "fixed_window_bdp=0.75"]).opts;
    check(&window, &[scenarios::lookup("udp-square").unwrap()]).unwrap();
    assert!(cli().try_get_matches_from(["lab", "udp-square", "--set", "novalue"]).is_err());
    assert!(cli().try_get_matches_from(["lab", "udp-square", "--repeats", "0"]).is_err());
    let alts = run_args(&["lab", "udp-square", "--alternatives", "no-control,slipstream,htb-90"]);
    let want = [Alternative::NoControl, Alternative::Slipstream, Alternative::Htb90];
    assert_eq!(alts.opts.alternatives, want);
    assert!(run_args(&["lab", "udp-square"]).opts.alternatives.is_empty());
    assert!(cli().try_get_matches_from(["lab", "udp-square", "--alternatives", "cake"]).is_err());
    assert!(cli().try_get_matches_from(["lab", "udp-square", "--alternatives", ","]).is_err());
}

#[test]
fn every_scenario_all_report_and_cleanup_are_subcommands() {
    cli().debug_assert();
    for s in &scenarios::SCENARIOS {
        assert!(cli().try_get_matches_from(["lab", s.name, "--scale", "0.1"]).is_ok(), "{}", s.name);
    }
    let m = cli().try_get_matches_from(["lab", "report", "--out", "x"]).unwrap();
    assert_eq!(ReportArgs::from_arg_matches(m.subcommand().unwrap().1).unwrap().out, PathBuf::from("x"));
    assert!(cli().try_get_matches_from(["lab", "cleanup"]).is_ok());
    assert!(cli().try_get_matches_from(["lab", "nope"]).is_err());
    assert!(cli().try_get_matches_from(["lab"]).is_err());
}
