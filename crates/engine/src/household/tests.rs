//! The household link's pure helpers: flow sort keys, the opposite queue's part.

use super::*;

#[test]
fn sort_keys_order_flows_as_their_keys() {
    let addrs = [
        "10.0.0.2",
        "10.0.0.10",
        "192.0.2.1",
        "192.0.2.200",
        "::1",
        "2001:db8::1",
    ];
    let mut keys = Vec::new();
    for a in addrs {
        for b in addrs {
            if a.contains(':') != b.contains(':') {
                continue; // a connection's ends are of one family
            }
            for (pa, pb) in [(443, 40000), (40000, 443), (6881, 6881), (1, 65535)] {
                keys.push(FlowKey::from_packet(a.parse().unwrap(), pa, b.parse().unwrap(), pb).0);
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    let mut packed: Vec<(u128, FlowKey)> = keys
        .iter()
        .map(|k| (sort_key(k).unwrap_or(u128::MAX), *k))
        .collect();
    packed.sort_unstable();
    assert_eq!(packed.iter().map(|p| p.1).collect::<Vec<_>>(), keys);
}

#[test]
fn the_opposite_link_takes_off_the_backgrounds_part_of_a_queue() {
    // Best effort under a tenth of the traffic (pings, ACKs): the queue is the background's.
    assert_eq!(background_part(0.5e6, 9.0e6), 1.0);
    assert_eq!(background_part(0.0, 0.0), 1.0);
    // A call each way (2.5 Mbit/s) beside 7.5 Mbit/s of background: three quarters of it.
    assert_eq!(background_part(2.5e6, 7.5e6), 0.75);
    // A best-effort download holding the link: a twentieth.
    assert_eq!(background_part(9.5e6, 0.5e6), 0.05);
}
