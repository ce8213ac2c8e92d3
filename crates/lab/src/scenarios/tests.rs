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
    // datapath reads cpu_rates and base_bin with `extra`, nat with `extra_or`.
    assert_eq!(lookup("datapath").map(|s| s.set_keys), Some(&["cpu_rates", "base_bin", "nat"][..]));
    assert!(lookup("nope").is_none());
    let households: Vec<&str> = SCENARIOS.iter().filter(|s| s.household).map(|s| s.name).collect();
    assert_eq!(households, ["no-timestamps", "many-flows", "weights"]);
    assert_eq!(default_alternatives(&SCENARIOS[9]), HOUSEHOLD_ALTERNATIVES);
}
