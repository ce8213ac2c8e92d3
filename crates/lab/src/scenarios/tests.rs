//! Tests of `scenarios::mod`.

use super::*;

#[test]
fn options() {
    let o = ScenarioOptions::default();
    assert_eq!(o.bdp_bytes(), 125_000);
    assert_eq!(o.queue_packets(), 83);
    assert_eq!(o.scaled(90.0, 5.0), 90.0);
    let o = ScenarioOptions { duration_scale: 0.01, ..o };
    assert_eq!(o.scaled(90.0, 5.0), 5.0);
    let names: Vec<&str> = all().map(|s| s.name).collect();
    assert_eq!(names.len(), 17);
    assert!(!names.contains(&"smoke") && lookup("smoke").is_some());
    assert_eq!(lookup("udp-square").map(|s| s.set_keys), Some(&["periods"][..]));
    assert_eq!(lookup("datapath").map(|s| s.set_keys), Some(&["cpu_rates"][..]));
    assert!(lookup("nope").is_none());
    let households = SCENARIOS.iter().filter(|s| s.alternatives == HOUSEHOLD_ALTERNATIVES);
    assert_eq!(
        households.map(|s| s.name).collect::<Vec<_>>(),
        ["no-timestamps", "many-flows", "weights", "link", "both"]
    );
    let udp = SCENARIOS.iter().filter(|s| s.alternatives == UDP_ALTERNATIVES);
    assert_eq!(udp.map(|s| s.name).collect::<Vec<_>>(), ["quic", "utp", "udp-mix"]);
    let paper: Vec<String> = lookup("alone").unwrap().alternatives.iter().map(Alternative::label).collect();
    let want =
        ["household", "no-control", "slipstream", "slipstream-paper", "fixed-rwnd", "htb-90", "htb-95"];
    assert_eq!(paper, want);
    // Household control is every scenario's first column.
    for s in all() {
        assert_eq!(s.alternatives.first(), Some(&Alternative::Household), "{}", s.name);
    }
}

#[test]
fn stalls_are_a_gap_and_a_shorter_length_in_ms() {
    assert_eq!(parse_stalls("200:5").unwrap(), (200.0, 5.0));
    assert_eq!(parse_stalls(" 50 : 2.5 ").unwrap(), (50.0, 2.5));
    for bad in ["200", "0:1", "200:0", "5:200", "x:1", "1:nan"] {
        assert!(parse_stalls(bad).is_err(), "{bad}");
    }
}
