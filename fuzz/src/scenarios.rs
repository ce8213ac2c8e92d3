//! Hand-written engine inputs (downloads under each controller, several household flows, a
//! flow recovered mid-stream, a reload, eviction) that start the `engine` target's seed corpus
//! in the states that matter (`examples/gen_seeds.rs` writes them with `encode`).

use crate::engine_run::*;

fn meta() -> MetaIn {
    MetaIn {
        rule: RuleIn::Conn,
        copy: CopyIn::Datapath,
        checksum_not_ready: false,
        from_lan: LanIn::Truth,
        arrival: ArrivalIn::None,
    }
}

fn seg(dt: Dt, conn: u8, from_server: bool, flags: FlagsIn, payload: PayloadIn, window: u16) -> Op {
    Op::Segment(segment(dt, conn, from_server, flags, payload, window))
}

fn segment(dt: Dt, conn: u8, from_server: bool, flags: FlagsIn, payload: PayloadIn, window: u16) -> Segment {
    Segment {
        dt,
        conn,
        from_server,
        flags,
        seq: SeqIn::Next,
        ack: SeqIn::Next,
        window,
        options: OptionsIn::Linux { ws: 7, sack: None },
        payload,
        meta: meta(),
        tos: 0,
        ip_options: 0,
        mutate: MutateIn(None),
    }
}

/// Setup with the rules rotated by `rule_order` (connection c gets rule
/// `[house-a, vulture, fixed, house-b][(c % 4 + rule_order) % 4]`).
pub fn setup(rule_order: u8, max_flows: u8, budget: BudgetIn) -> Setup {
    Setup {
        max_flows: max_flows - 1,
        idle_timeout: TimeoutIn::TwoMinutes,
        evict_idle_after: TimeoutIn::TenSeconds,
        budget,
        slowdown: true,
        turn_ms: 450,
        police_udp: false,
        fixed_window: 2500,
        vulture: VultureIn {
            bounded_steps: false,
            draining_is_congestion: true,
            queue_delay_limit_ms: None,
        },
        shares: [
            ShareIn {
                weight: 0,
                min_rate: 0,
                priority: 0,
            },
            ShareIn {
                weight: 2,
                min_rate: 100_000,
                priority: 1,
            },
        ],
        rule_order,
    }
}

fn handshake(ops: &mut Vec<Op>, conn: u8) {
    ops.push(seg(
        Dt::Millis(1),
        conn,
        false,
        FlagsIn::Syn,
        PayloadIn::None,
        64240,
    ));
    ops.push(seg(
        Dt::Millis(20),
        conn,
        true,
        FlagsIn::SynAck,
        PayloadIn::None,
        65160,
    ));
    ops.push(seg(
        Dt::Millis(20),
        conn,
        false,
        FlagsIn::Ack,
        PayloadIn::None,
        502,
    ));
}

/// `rounds` rounds of four full segments from the server (spacing growing and shrinking like a
/// queue) and two ACKs from the client.
fn transfer(ops: &mut Vec<Op>, conn: u8, rounds: u16, round: u16) {
    for r in round..round + rounds {
        for i in 0..4u16 {
            let gap = 800 + (r * 131 + i * 17) % 1600;
            ops.push(seg(
                Dt::Micros(gap),
                conn,
                true,
                FlagsIn::Data,
                PayloadIn::Full,
                509,
            ));
            if i % 2 == 1 {
                ops.push(seg(
                    Dt::Micros(50),
                    conn,
                    false,
                    FlagsIn::Ack,
                    PayloadIn::None,
                    3000,
                ));
            }
        }
        if r % 8 == 7 {
            ops.push(Op::Tick(Dt::Zero));
        }
    }
}

fn close(ops: &mut Vec<Op>, conn: u8) {
    ops.push(seg(
        Dt::Millis(1),
        conn,
        true,
        FlagsIn::FinAck,
        PayloadIn::None,
        509,
    ));
    ops.push(seg(
        Dt::Millis(20),
        conn,
        false,
        FlagsIn::FinAck,
        PayloadIn::None,
        3000,
    ));
    ops.push(seg(
        Dt::Millis(20),
        conn,
        true,
        FlagsIn::Ack,
        PayloadIn::None,
        509,
    ));
    ops.push(Op::Tick(Dt::Seconds(3)));
}

/// One download on connection 0 under the controller the rotation gives it.
pub fn download(name_rule_order: u8, conn: u8) -> EngineInput {
    let mut ops = Vec::new();
    handshake(&mut ops, conn);
    transfer(&mut ops, conn, 60, 0);
    ops.push(Op::Snapshot);
    close(&mut ops, conn);
    EngineInput {
        setup: setup(name_rule_order, 4, BudgetIn::DelayTarget),
        ops,
    }
}

/// Three household flows (connections 0, 3, 4 with rule order 0) interleaved, the link's delay
/// growing, so the budget shrinks and flows take turns.
pub fn household(budget: BudgetIn) -> EngineInput {
    let mut ops = Vec::new();
    for conn in [0, 3, 4] {
        handshake(&mut ops, conn);
    }
    for r in 0..18u16 {
        for conn in [0u8, 3, 4] {
            transfer(&mut ops, conn, 1, r);
        }
        ops.push(Op::Tick(Dt::Millis(5 + (r % 20) as u8)));
    }
    EngineInput {
        setup: setup(0, 4, budget),
        ops,
    }
}

/// Four household flows (connections 0, 1, 4, 5 with rule order 3) whose data comes later and
/// later after the ACKs (a filling queue): the budget shrinks below two segments per flow, flows
/// are held and take turns, and window updates go out.
pub fn household_queue(budget: BudgetIn) -> EngineInput {
    let conns = [0u8, 1, 4, 5];
    let mut ops = Vec::new();
    for conn in conns {
        handshake(&mut ops, conn);
    }
    for r in 0..28u16 {
        ops.push(Op::Tick(Dt::Zero));
        for (k, conn) in conns.into_iter().enumerate() {
            // The first segment of a round comes later and later after the ACK that let it go:
            // the far half of the RTT grows like a filling queue.
            let wait = match (k, r) {
                (0, 0..10) => 20,
                (0, _) => 150,
                _ => 0,
            };
            ops.push(seg(
                Dt::Millis(wait),
                conn,
                true,
                FlagsIn::Data,
                PayloadIn::Full,
                509,
            ));
            ops.push(seg(
                Dt::Micros(900),
                conn,
                true,
                FlagsIn::Data,
                PayloadIn::Full,
                509,
            ));
            ops.push(seg(
                Dt::Micros(50),
                conn,
                false,
                FlagsIn::Ack,
                PayloadIn::None,
                3000,
            ));
        }
    }
    EngineInput {
        setup: setup(3, 4, budget),
        ops,
    }
}

/// A flow first seen mid-stream (fixed window rule), recovered once its window scales are
/// learned.
pub fn midstream() -> EngineInput {
    let conn = 1;
    let mut ops = Vec::new();
    transfer(&mut ops, conn, 3, 0);
    ops.push(Op::LearnScales {
        conn,
        low: 7,
        high: 7,
    });
    transfer(&mut ops, conn, 10, 3);
    EngineInput {
        setup: setup(1, 4, BudgetIn::DelayTarget),
        ops,
    }
}

/// A fixed-window download whose rule a reload removes, then brings back under another name.
pub fn reload() -> EngineInput {
    let conn = 0;
    let mut ops = Vec::new();
    handshake(&mut ops, conn);
    transfer(&mut ops, conn, 8, 0);
    ops.push(Op::Reconfigure(Reconf {
        max_flows: 3,
        drop_rule: Some(0),
        rename_rule: None,
        rule_order: 2,
    }));
    transfer(&mut ops, conn, 4, 8);
    ops.push(Op::Reconfigure(Reconf {
        max_flows: 0,
        drop_rule: None,
        rename_rule: Some(0),
        rule_order: 2,
    }));
    handshake(&mut ops, 4);
    transfer(&mut ops, 4, 8, 0);
    EngineInput {
        setup: setup(2, 4, BudgetIn::DelayTarget),
        ops,
    }
}

/// One flow slot: a second connection evicts the first once it is idle long enough.
pub fn eviction() -> EngineInput {
    let mut ops = Vec::new();
    handshake(&mut ops, 0);
    transfer(&mut ops, 0, 4, 0);
    handshake(&mut ops, 1);
    ops.push(Op::Tick(Dt::Seconds(11)));
    handshake(&mut ops, 1);
    transfer(&mut ops, 1, 4, 0);
    EngineInput {
        setup: setup(2, 1, BudgetIn::DelayTarget),
        ops,
    }
}

/// Every scenario with a name.
pub fn all() -> Vec<(&'static str, EngineInput)> {
    vec![
        ("scenario-household-download", download(0, 0)),
        ("scenario-vulture-download", download(1, 0)),
        ("scenario-fixed-download", download(2, 0)),
        ("scenario-fixed-download-ipv6", download(3, 3)),
        ("scenario-household-3-flows", household(BudgetIn::DelayTarget)),
        (
            "scenario-household-3-flows-key-bs",
            household(BudgetIn::KeyBinarySearch),
        ),
        ("scenario-household-queue", household_queue(BudgetIn::DelayTarget)),
        (
            "scenario-household-queue-key-sa",
            household_queue(BudgetIn::KeyStochastic),
        ),
        ("scenario-midstream", midstream()),
        ("scenario-reload", reload()),
        ("scenario-eviction", eviction()),
    ]
}

#[cfg(test)]
mod tests {
    use arbitrary::{Arbitrary, Unstructured};

    use super::*;
    use crate::encode::to_bytes;

    #[test]
    fn scenarios_round_trip_through_the_byte_format() {
        for (name, input) in all() {
            assert!(
                input.ops.len() <= MAX_OPS,
                "{name}: {} operations",
                input.ops.len()
            );
            let bytes = to_bytes(&input);
            let decoded = EngineInput::arbitrary_take_rest(Unstructured::new(&bytes)).unwrap();
            assert_eq!(decoded.ops.len(), input.ops.len(), "{name}");
            assert!(
                format!("{decoded:?}") == format!("{input:?}"),
                "{name} decodes differently"
            );
        }
    }

    #[test]
    fn scenarios_reach_the_states_they_are_for() {
        let s = run(&download(2, 0));
        assert!(s.rewritten_rule[2] > 0, "fixed: {s:?}");
        let s = run(&download(3, 3));
        assert!(s.rewritten_v6 > 0, "ipv6: {s:?}");
        let s = run(&download(0, 0));
        assert!(s.rewritten_rule[0] > 0, "household: {s:?}");
        let s = run(&midstream());
        assert!(
            s.counters.flows_recovered > 0 && s.counters.rewritten > 0,
            "midstream: {s:?}"
        );
        let s = run(&reload());
        assert!(s.reconfigured == 2, "reload: {s:?}");
        let s = run(&eviction());
        assert!(s.counters.flows_evicted > 0, "eviction: {s:?}");
        for (name, input) in all() {
            let s = run(&input);
            eprintln!("{name}: {s:?}");
        }
    }
}
