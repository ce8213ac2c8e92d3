use super::*;
use crate::household::Allocated;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// A flow whose LAN host is the low side (as packets from the LAN say).
fn lan_flow() -> UdpFlow {
    let mut f = UdpFlow::new(1, at(0), true);
    f.note_lan_side(Side::Low, Some(true));
    f
}

#[test]
fn the_opening_exchange_gives_the_far_half() {
    let mut f = lan_flow();
    f.on_packet(Side::Low, at(10), 1200, 1228);
    f.on_packet(Side::Low, at(11), 1200, 1228);
    assert_eq!(f.rtt_estimate(), None);
    f.on_packet(Side::High, at(95), 1200, 1228);
    assert_eq!(f.rtt_estimate(), Some(Duration::from_millis(85)));
    f.on_packet(Side::High, at(300), 1200, 1228);
    assert_eq!(
        f.rtt_estimate(),
        Some(Duration::from_millis(85)),
        "only the first answer"
    );
}

#[test]
fn a_flow_opened_from_outside_learns_no_rtt_from_the_lan_hosts_answer() {
    let mut f = lan_flow();
    f.on_packet(Side::High, at(10), 100, 128);
    f.on_packet(Side::Low, at(11), 100, 128);
    assert_eq!(f.rtt_estimate(), None);
}

#[test]
fn the_bulk_sender_is_the_side_that_sent_four_times_more_and_32_kb() {
    let mut f = lan_flow();
    for i in 0..20 {
        f.on_packet(Side::High, at(i), 1200, 1228);
        f.on_packet(Side::Low, at(i), 60, 88);
    }
    // 24 kB so far: not yet.
    assert_eq!(f.link(), None);
    for i in 20..30 {
        f.on_packet(Side::High, at(i), 1200, 1228);
    }
    assert_eq!(f.link(), Some(LinkDirection::Download));
    assert_eq!(f.floor(), 2 * 1228);
    // The LAN host starts an upload far larger than what it received: it becomes one.
    for i in 30..200 {
        f.on_packet(Side::Low, at(i), 1400, 1428);
    }
    assert_eq!(f.link(), Some(LinkDirection::Upload));
}

fn round(ms: u64, window: Option<u32>, phase: BudgetPhase) -> Allocated {
    Allocated {
        now: at(ms),
        window,
        was_held: false,
        rtt: Duration::from_millis(100),
        phase,
        best_effort_queue: false,
        queue_low: false,
        udp: UdpEnforcement::Police,
    }
}

#[test]
fn an_allocation_becomes_the_policers_rate_and_a_hold_two_packets_per_rtt() {
    let mut f = lan_flow();
    for i in 0..40 {
        f.on_packet(Side::High, at(i), 1200, 1228);
    }
    // The flow's first allocation leaves it alone (it is starting): the second one holds it.
    f.apply_allocation(&round(50, Some(50_000), BudgetPhase::Yield));
    assert_eq!(f.policer.rate(), None);
    f.apply_allocation(&round(100, Some(50_000), BudgetPhase::Yield));
    assert_eq!(f.policer.rate(), Some(500_000.0));
    // Held: two packets per RTT (the bucket's smallest depth, two full-size packets).
    f.apply_allocation(&round(200, None, BudgetPhase::Yield));
    assert_eq!(f.policer.rate(), Some(30_000.0));
    // A round that measured nothing changes nothing.
    f.apply_allocation(&round(300, Some(90_000), BudgetPhase::Idle));
    assert_eq!(f.policer.rate(), Some(30_000.0));
    f.release();
    assert_eq!(f.policer.rate(), None);
    assert!(f.household_mut().is_none());
}

#[test]
fn a_growing_budget_never_polices_below_what_the_flow_sends_and_a_slowdown_halves_a_standing_queue_once() {
    let mut f = lan_flow();
    for i in 0..40 {
        f.on_packet(Side::High, at(i), 1200, 1228);
    }
    f.apply_allocation(&round(100, Some(10_000), BudgetPhase::Probe));
    // 100 kB forwarded in 100 ms: 1 MB/s; the allocation's 100 kB/s would drop nine in ten.
    f.on_forwarded(at(150), 100_000);
    f.apply_allocation(&round(200, Some(10_000), BudgetPhase::Probe));
    assert_eq!(f.policer.rate(), Some(2_000_000.0));
    // A slowdown after growing rounds: the queue is empty, the rate stays.
    f.on_forwarded(at(250), 100_000);
    f.apply_allocation(&round(300, Some(10_000), BudgetPhase::Slowdown));
    assert_eq!(f.policer.rate(), Some(2_000_000.0));
    // Near the target: not below what it sends.
    f.on_forwarded(at(350), 100_000);
    f.apply_allocation(&round(400, Some(10_000), BudgetPhase::Hold));
    assert_eq!(f.policer.rate(), Some(1_000_000.0));
    // A slowdown after holding: half of what it sent, once.
    f.on_forwarded(at(450), 100_000);
    f.apply_allocation(&round(500, Some(10_000), BudgetPhase::Slowdown));
    assert_eq!(f.policer.rate(), Some(500_000.0), "half of 1 MB/s");
    f.on_forwarded(at(550), 50_000);
    f.apply_allocation(&round(600, Some(2_000), BudgetPhase::Slowdown));
    assert_eq!(f.policer.rate(), Some(500_000.0), "not halved again");
}

#[test]
fn a_yield_takes_a_step_per_three_round_trips_unless_the_queue_is_well_above_target() {
    let mut f = lan_flow();
    for i in 0..40 {
        f.on_packet(Side::High, at(i), 1200, 1228);
    }
    f.apply_allocation(&round(100, Some(10_000), BudgetPhase::Probe));
    let mut yield_round = |ms: u64, sent: u64, severe: bool| {
        f.on_forwarded(at(ms - 50), sent as u32);
        f.apply_allocation(&Allocated {
            best_effort_queue: severe,
            ..round(ms, Some(10_000), BudgetPhase::Yield)
        });
        f.policer.rate()
    };
    // 1 MB/s: a step to 0.7 of it; the next two rounds wait for the sender to answer.
    assert_eq!(yield_round(200, 100_000, false), Some(700_000.0));
    assert_eq!(yield_round(300, 70_000, false), Some(700_000.0));
    assert_eq!(yield_round(400, 70_000, false), Some(700_000.0));
    assert_eq!(yield_round(500, 60_000, false), Some(420_000.0));
    // Best effort came (the queue is over twice the target): a step every round.
    assert_eq!(yield_round(600, 40_000, true), Some(280_000.0));
    assert_eq!(yield_round(700, 20_000, true), Some(140_000.0));
    assert_eq!(
        yield_round(800, 5_000, true),
        Some(50_000.0),
        "not above what it sends"
    );
    assert_eq!(yield_round(900, 12_000, true), Some(100_000.0), "the allocation");
}

#[test]
fn the_table_is_bounded_and_forgets_idle_flows() {
    let mut t = UdpTable::default();
    let key = |port| {
        FlowKey::from_packet(
            "10.0.0.2".parse().unwrap(),
            port,
            "192.0.2.1".parse().unwrap(),
            443,
        )
        .0
    };
    assert!(t
        .admit(key(1), 2, || UdpFlow::new(1, at(0), true))
        .is_some_and(|(_, new)| new));
    assert!(t
        .admit(key(1), 2, || UdpFlow::new(1, at(0), true))
        .is_some_and(|(_, new)| !new));
    assert!(t.admit(key(2), 2, || UdpFlow::new(1, at(0), true)).is_some());
    assert!(t.admit(key(3), 2, || UdpFlow::new(1, at(0), true)).is_none());
    assert_eq!(t.expire(at(59_000), Duration::from_secs(60)), 0);
    assert_eq!(t.expire(at(60_000), Duration::from_secs(60)), 2);
    assert_eq!(t.len(), 0);
}

/// The shaper's phase rules (`UdpFlow::apply_allocation`, docs/udp.md): nothing held back while
/// the flow starts or the link has room, its first yield keeps twice what it sent, later ones
/// step, and a slowdown's halving leaves room for the rest to wait.
#[test]
fn a_shaped_flow_is_held_back_only_when_its_link_has_a_queue() {
    let mut f = lan_flow();
    for i in 0..40 {
        f.on_packet(Side::High, at(i), 1200, 1228);
    }
    let shaped = |ms: u64, phase, queue_low| Allocated {
        queue_low,
        udp: UdpEnforcement::Shape,
        ..round(ms, Some(10_000), phase)
    };
    // Its first allocation, even a yield: nothing.
    f.on_forwarded(at(50), 50_000);
    f.apply_allocation(&shaped(100, BudgetPhase::Yield, false));
    assert_eq!(f.policer.rate(), None);
    // The budget grows, or holds without a queue: nothing.
    f.on_forwarded(at(150), 100_000);
    f.apply_allocation(&shaped(200, BudgetPhase::Probe, true));
    assert_eq!(f.policer.rate(), None);
    f.on_forwarded(at(250), 100_000);
    f.apply_allocation(&shaped(300, BudgetPhase::Hold, true));
    assert_eq!(f.policer.rate(), None);
    // Holding with a queue: not below what it sends (1 MB/s).
    f.on_forwarded(at(350), 100_000);
    f.apply_allocation(&shaped(400, BudgetPhase::Hold, false));
    assert_eq!(f.policer.rate(), Some(1_000_000.0));
    // Its first yield (to its own slow start): twice what it sent.
    f.on_forwarded(at(450), 100_000);
    f.apply_allocation(&shaped(500, BudgetPhase::Yield, false));
    assert_eq!(f.policer.rate(), Some(2_000_000.0));
    // Three round trips later, a step: 0.7 of what it sends.
    f.on_forwarded(at(750), 300_000);
    f.apply_allocation(&shaped(800, BudgetPhase::Yield, false));
    assert_eq!(f.policer.rate(), Some(700_000.0));
    // A slowdown after a yield: half of what it sent, and the other half may wait.
    f.on_forwarded(at(850), 70_000);
    f.apply_allocation(&shaped(900, BudgetPhase::Slowdown, false));
    assert_eq!(f.policer.rate(), Some(350_000.0));
    let waited: Vec<_> = (0..45)
        .map(|i| f.policer.shape(at(900 + i), 1228, false))
        .collect();
    assert!(
        waited.iter().all(|a| *a != policer::Admission::Over),
        "70 kB in 45 ms against 35 kB per round trip: {waited:?}"
    );
}
