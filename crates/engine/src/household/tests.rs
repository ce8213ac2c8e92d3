//! The household link's pure helpers: flow sort keys, the opposite queue's part, a link's capacity.

use super::opposite_queue::background_part;
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

#[test]
fn a_link_under_its_capacity_is_not_full() {
    let t = Instant::from_millis;
    let mut capacity = Capacity::default();
    // Best effort filled the link (1.25 MB/s) for a round.
    assert!(capacity.is_full(t(0), 1.25e6));
    // The background alone at 0.4 of it: not full within a few rounds.
    let full: Vec<bool> = (1..=8).map(|i| capacity.is_full(t(i * 100), 0.5e6)).collect();
    assert_eq!(full.iter().position(|f| !f), Some(0));
    assert!(!full[7]);
    // Back to 0.96 of it, round counts moving by a tenth: full again, and stays so.
    let full: Vec<bool> = (9..=40)
        .map(|i| capacity.is_full(t(i * 100), if i % 2 == 0 { 1.3e6 } else { 1.1e6 }))
        .collect();
    assert!(full[12..].iter().all(|f| *f), "{full:?}");
}

#[test]
fn a_capacity_halves_every_minute() {
    let t = Instant::from_millis;
    let mut capacity = Capacity::default();
    assert!(capacity.is_full(t(0), 1.2e6));
    // The link got slower: half of the old peak, round after round.
    let mut full = Vec::new();
    for i in 1..=700 {
        full.push(capacity.is_full(t(i * 100), 0.55e6));
    }
    // 30 s later the peak has aged to 0.85 MB/s: 0.55 is not full.
    assert!(!full[299]);
    // A minute later to 0.6 MB/s: 0.55 is full.
    assert!(full[599] && full[699]);
}

#[test]
fn a_link_not_full_reads_the_full_opposite_links_queue() {
    let config = HouseholdConfig::default();
    let mut upload = Link::new(LinkDirection::Upload, &config);
    let mut download = Link::new(LinkDirection::Download, &config);
    // No counters yet: nothing is known of either.
    assert!(!upload.holds_the_sum_of_queues());
    assert!(!download.reads_only_the_opposite_queue());
    // Counted: the upload full with background members, the download not full.
    upload.last.flows = 2;
    upload.full = Some(true);
    download.full = Some(false);
    assert!(upload.holds_the_sum_of_queues());
    assert!(download.reads_only_the_opposite_queue());
    // A full download holds a queue of its own.
    download.full = Some(true);
    assert!(!download.reads_only_the_opposite_queue());
    // An upload without background members holds best effort's queue, which the download's
    // round trips keep reading (its ACKs wait there).
    upload.last.flows = 0;
    assert!(!upload.holds_the_sum_of_queues());
}

#[test]
fn a_small_household_on_a_small_link_may_go_below_its_floors() {
    // 10 Mbit/s at 200 ms (250 kB: a 64th is 3906, above one floor), or nothing counted: one
    // floor.
    assert_eq!(min_budget(1448, 1, Some(250_000.0)), 2896);
    assert_eq!(min_budget(1448, 1, None), 2896);
    // 10 Mbit/s at 100 ms (125 kB): a 64th of it.
    assert_eq!(min_budget(1448, 1, Some(125_000.0)), 1953);
    // 1 Mbit/s at 40 ms (5 kB): a 64th is 78, below an eighth of the floor (362); four flows:
    // half of their floor each (1448); eight or more: one floor.
    let tiny = Some(5_000.0);
    assert_eq!(min_budget(1448, 1, tiny), 362);
    assert_eq!(min_budget(1448, 0, tiny), 362);
    assert_eq!(min_budget(1448, 4, tiny), 1448);
    assert_eq!(min_budget(1448, 8, tiny), 2896);
    assert_eq!(min_budget(1448, 64, tiny), 2896);
}
