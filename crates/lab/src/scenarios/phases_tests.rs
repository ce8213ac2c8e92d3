//! Tests of `scenarios::phases`.

use super::*;

#[test]
fn spread_is_uneven_and_host_fair_is_measured() {
    let opts = ScenarioOptions::default();
    let m = Mix::spread("x", 16, 4, &opts);
    assert_eq!(m.hosts()[..5], [1, 2, 3, 4, 2]);
    assert_eq!(m.hosts().iter().filter(|h| **h == 1).count(), 1);
    assert_eq!(m.be_host, 5);
    assert_eq!(m.flows[15].port, BG_PORT + 15);
    assert_eq!(Mix::spread("y", 4, 1, &opts).hosts(), vec![1; 4]);
    assert_eq!(Mix::spread("z", 1, 4, &opts).be_host, 2);
    assert_eq!(m.periods()[1], ("bg-alone", 40.0, 60.0));
    let s = m.setup(Alternative::Household);
    assert_eq!((s.clients, s.server_ports.len()), (5, 17));
    assert_eq!(counts(&opts, "nope", "4, 16,64").unwrap(), vec![4, 16, 64]);
    for bad in ["4,x", "0", "101", ""] {
        assert!(counts(&opts, "nope", bad).is_err(), "{bad:?}");
    }
}
