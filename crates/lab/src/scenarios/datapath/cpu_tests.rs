//! Tests of `datapath::cpu`.

use super::*;

#[test]
fn machine_cpu() {
    let t = "cpu  100 10 50 1000 5 2 8 0 0 0\ncpu0 50 5 25 500 2 1 4 0 0 0\n";
    let c = parse_machine_cpu(t, 100.0).unwrap();
    assert_eq!(c.user, 1.1);
    assert_eq!(c.system, 0.5);
    assert_eq!(c.softirq, 0.08);
    assert!((c.busy - 1.7).abs() < 1e-12);
    let later = MachineCpu { busy: 2.0, ..c };
    assert!((later.since(&c).busy - 0.3).abs() < 1e-12);
    assert!(MachineCpu::read().is_some());
}
