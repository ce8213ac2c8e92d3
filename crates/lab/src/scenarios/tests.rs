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
    assert_eq!(names.len(), 11);
    assert!(!names.contains(&"smoke") && lookup("smoke").is_some());
    assert_eq!(lookup("udp-square").map(|s| s.set_keys), Some(&["periods"][..]));
    assert_eq!(lookup("datapath").map(|s| s.set_keys), Some(&["cpu_rates"][..]));
    assert!(lookup("nope").is_none());
    let households: Vec<&str> = SCENARIOS.iter().filter(|s| s.household).map(|s| s.name).collect();
    assert_eq!(households, ["no-timestamps", "many-flows", "weights"]);
    assert_eq!(default_alternatives(&SCENARIOS[9]), HOUSEHOLD_ALTERNATIVES);
}

#[test]
fn status_format() {
    assert_eq!(
        status_line("cbr", 1, 5, "slipstream", 34.2, 90.0, &[("BE", Some(5.94)), ("BG", Some(0.4))]),
        "[cbr] alternative 2/5 slipstream  t=34/90 s  BE 5.9 Mbit/s  BG 0.4 Mbit/s"
    );
}
