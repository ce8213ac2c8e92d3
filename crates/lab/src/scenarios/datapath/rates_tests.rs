//! Tests of `datapath::rates`.

use super::*;

#[test]
fn cores_per_gbit_is_cpu_seconds_per_gbit_moved() {
    // 1 s of CPU while moving 500 Mbit/s for 10 s (5 Gbit): 0.2 cores at 1 Gbit/s.
    assert!((cores_per_gbit(1.0, 500.0, 10.0) - 0.2).abs() < 1e-12);
}
