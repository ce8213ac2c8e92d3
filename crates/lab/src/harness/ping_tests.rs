//! Tests of `harness::ping`.

use super::*;

#[test]
fn ping_lines() {
    let l = "[1700000000.123456] 64 bytes from 10.77.1.2: icmp_seq=17 ttl=62 time=104.3 ms";
    assert_eq!(parse_ping_line(l), Some((1_700_000_000.123456, 104.3)));
    assert_eq!(
        parse_ping_line("[1700000000.5] 64 bytes from 10.77.1.2: icmp_seq=2 ttl=62 time=100 ms"),
        Some((1_700_000_000.5, 100.0))
    );
    assert_eq!(parse_ping_line("PING 10.77.1.2 (10.77.1.2) 56(84) bytes of data."), None);
    assert_eq!(
        parse_ping_line("[1700000000.1] From 10.77.2.1 icmp_seq=3 Destination Host Unreachable"),
        None
    );
}
