//! Tests of `main`.

use super::*;

fn run_args(args: &[&str]) -> RunArgs {
    let cli = Cli::try_parse_from(args).unwrap();
    match cli.command {
        Command::UdpSquare(a) => a,
        _ => panic!("not udp-square"),
    }
}

#[test]
fn set_keys_are_checked_against_the_scenario() {
    let ok = run_args(&["lab", "udp-square", "--set", "periods=1,5", "--cc", "reno"]);
    let opts = options(&ok, &["udp-square"]).unwrap();
    assert_eq!(opts.extra["periods"], "1,5");
    assert_eq!(opts.cc, "reno");
    let typo = run_args(&["lab", "udp-square", "--set", "period=1,5"]);
    let err = options(&typo, &["udp-square"]).unwrap_err().to_string();
    assert!(err.contains("--set period: unknown key"), "{err}");
    assert!(err.contains("valid: periods, udp_mbit"), "{err}");
    assert!(Cli::try_parse_from(["lab", "udp-square", "--set", "novalue"]).is_err());
    assert!(Cli::try_parse_from(["lab", "udp-square", "--repeats", "0"]).is_err());
}
