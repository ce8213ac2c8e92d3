//! Tests of `report::markdown`.

use super::*;

#[test]
fn formats_by_unit() {
    assert_eq!(fmt_value(5.976, Unit::Mbps), "5.98");
    assert_eq!(fmt_value(104.4, Unit::Ms), "104");
    assert_eq!(fmt_value(4.44, Unit::Ms), "4.4");
    assert_eq!(fmt_value(93.26, Unit::Us), "93.3");
    assert_eq!(fmt_value(0.9861, Unit::Ratio), "0.986");
    assert_eq!(fmt_value(62500.0, Unit::Bytes), "62500");
    assert_eq!(fmt_value(210_847.2, Unit::PacketsPerS), "210847");
    assert_eq!(fmt_value(-0.0001, Unit::Mbps), "0.00");
    assert_eq!(fmt_value(-0.542, Unit::Ratio), "-0.542");
    assert_eq!(fmt_value(f64::NAN, Unit::Mbps), MISSING);
}

#[test]
fn cells() {
    let c = |range| Cell { mean: 5.17, range };
    assert_eq!(cell_text(None, Unit::Mbps), MISSING);
    assert_eq!(cell_text(Some(&c(None)), Unit::Mbps), "5.17");
    assert_eq!(cell_text(Some(&c(Some((4.67, 5.49)))), Unit::Mbps), "5.17 (4.67–5.49)");
}
