//! Tests of `scenarios::onoff`.

use super::*;

#[test]
fn on_off_windows() {
    let on = on_windows(5.0, 20.0);
    assert_eq!(on, vec![(0.0, 5.0), (10.0, 15.0)]);
    assert_eq!(off_windows(&on, 5.0, 20.0), vec![(5.0, 10.0), (15.0, 20.0)]);
    let on = on_windows(30.0, 60.0);
    assert_eq!((on.len(), off_windows(&on, 30.0, 60.0).len()), (1, 1));
}

#[test]
fn table1_by_hand() {
    // T = 1 over 4 s: on [0,1), [2,3); off [1,2), [3,4).
    // BE 8 in on periods; BG 2 when BE is on, 9 when off.
    let mut be = Vec::new();
    let mut bg = Vec::new();
    for i in 0..40 {
        let t = i as f64 * 0.1;
        let on = (t as u32).is_multiple_of(2);
        if on {
            be.push((t, 8.0));
        }
        bg.push((t, if on { 2.0 } else { 9.0 }));
    }
    let on = on_windows(1.0, 4.0);
    let off = off_windows(&on, 1.0, 4.0);
    let (u, sb, sl) = table1(&be, &bg, &on, &off, 10.0).unwrap();
    assert!((u - 0.9).abs() < 1e-9, "{u}");
    assert!((sb - 0.8).abs() < 1e-9, "{sb}");
    assert!((sl - 0.2).abs() < 1e-9, "{sl}");
}

#[test]
fn windows_follow_the_measured_spans() {
    // T = 5 over 20 s; each BE connection carried data 0.3 s after its spawn, for 5 s.
    let spans = [(0.3, 5.3), (10.35, 15.35)];
    assert_eq!(off_windows(&spans, 5.0, 20.0), vec![(5.3, 10.35), (15.35, 20.0)]);
    // A last gap shorter than half a period (the run ended) is no off period.
    assert_eq!(off_windows(&[(0.3, 5.3), (10.3, 18.5)], 5.0, 20.0), vec![(5.3, 10.3)]);
}
