//! The inverse of the engine target's input decoding: writes an [`EngineInput`] as the bytes
//! that decode back to it, so hand-written scenarios (`scenarios`) become seed files. Mirrors
//! `arbitrary` 1.x (integers little-endian, `bool` as a byte's low bit, `Option` as a bool and
//! the value, derived enums as a `u32` scaled to the variant count, `Vec` as "one more" bools
//! before each element) and this crate's own `Arbitrary` impls (one selector byte). The round
//! trip is tested, so a change of `arbitrary`'s format shows up as a failing test.

use crate::engine_run::*;

pub trait Encode {
    fn encode(&self, out: &mut Vec<u8>);
}

/// A derived enum's discriminant: the smallest `u32` x with `(x * n) >> 32 == i`.
fn tag(out: &mut Vec<u8>, i: u64, n: u64) {
    let x = (i << 32).div_ceil(n) as u32;
    out.extend_from_slice(&x.to_le_bytes());
}

macro_rules! encode_int {
    ($($t:ty),*) => {$(
        impl Encode for $t {
            fn encode(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
encode_int!(u8, u16, u32);

impl Encode for bool {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
}

impl<T: Encode> Encode for Option<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                v.encode(out);
            }
        }
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        for v in self {
            out.push(1);
            v.encode(out);
        }
        out.push(0);
    }
}

impl<T: Encode, const N: usize> Encode for [T; N] {
    fn encode(&self, out: &mut Vec<u8>) {
        for v in self {
            v.encode(out);
        }
    }
}

impl<A: Encode, B: Encode> Encode for (A, B) {
    fn encode(&self, out: &mut Vec<u8>) {
        self.0.encode(out);
        self.1.encode(out);
    }
}

impl Encode for EngineInput {
    fn encode(&self, out: &mut Vec<u8>) {
        self.setup.encode(out);
        for op in &self.ops {
            op.encode(out);
        }
    }
}

impl Encode for Setup {
    fn encode(&self, out: &mut Vec<u8>) {
        self.max_flows.encode(out);
        self.idle_timeout.encode(out);
        self.evict_idle_after.encode(out);
        self.budget.encode(out);
        self.slowdown.encode(out);
        self.turn_ms.encode(out);
        self.police_udp.encode(out);
        self.fixed_window.encode(out);
        self.vulture.encode(out);
        self.shares.encode(out);
        self.rule_order.encode(out);
    }
}

impl Encode for TimeoutIn {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            TimeoutIn::Millis(ms) => {
                tag(out, 0, 4);
                ms.encode(out);
            }
            TimeoutIn::Second => tag(out, 1, 4),
            TimeoutIn::TenSeconds => tag(out, 2, 4),
            TimeoutIn::TwoMinutes => tag(out, 3, 4),
        }
    }
}

impl Encode for BudgetIn {
    fn encode(&self, out: &mut Vec<u8>) {
        let i = match self {
            BudgetIn::DelayTarget => 0,
            BudgetIn::Ledbat => 1,
            BudgetIn::KeyBinarySearch => 2,
            BudgetIn::KeyStochastic => 3,
        };
        tag(out, i, 4);
    }
}

impl Encode for VultureIn {
    fn encode(&self, out: &mut Vec<u8>) {
        self.bounded_steps.encode(out);
        self.draining_is_congestion.encode(out);
        self.queue_delay_limit_ms.encode(out);
    }
}

impl Encode for ShareIn {
    fn encode(&self, out: &mut Vec<u8>) {
        self.weight.encode(out);
        self.min_rate.encode(out);
        self.priority.encode(out);
    }
}

impl Encode for Op {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Op::Segment(s) => {
                out.push(0);
                s.encode(out);
            }
            Op::Tick(dt) => {
                out.push(190);
                dt.encode(out);
            }
            Op::Raw { dt, meta, bytes } => {
                out.push(220);
                dt.encode(out);
                meta.encode(out);
                bytes.encode(out);
            }
            Op::LearnScales { conn, low, high } => {
                out.push(235);
                conn.encode(out);
                low.encode(out);
                high.encode(out);
            }
            Op::Snapshot => out.push(245),
            Op::Reconfigure(r) => {
                out.push(253);
                r.encode(out);
            }
        }
    }
}

impl Encode for Dt {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Dt::Zero => out.push(0),
            Dt::Micros(us) => {
                out.push(64);
                us.encode(out);
            }
            Dt::Millis(ms) => {
                out.push(176);
                ms.encode(out);
            }
            Dt::Seconds(s) => {
                out.push(248);
                s.encode(out);
            }
        }
    }
}

impl Encode for Segment {
    fn encode(&self, out: &mut Vec<u8>) {
        self.dt.encode(out);
        self.conn.encode(out);
        self.from_server.encode(out);
        self.flags.encode(out);
        self.seq.encode(out);
        self.ack.encode(out);
        self.window.encode(out);
        self.options.encode(out);
        self.payload.encode(out);
        self.meta.encode(out);
        self.tos.encode(out);
        self.ip_options.encode(out);
        self.mutate.encode(out);
    }
}

impl Encode for FlagsIn {
    fn encode(&self, out: &mut Vec<u8>) {
        let i = match self {
            FlagsIn::Syn => 0,
            FlagsIn::SynAck => 1,
            FlagsIn::Ack => 2,
            FlagsIn::Data => 3,
            FlagsIn::FinAck => 4,
            FlagsIn::Rst => 5,
            FlagsIn::RstAck => 6,
            FlagsIn::Raw(f) => {
                tag(out, 7, 8);
                f.encode(out);
                return;
            }
        };
        tag(out, i, 8);
    }
}

impl Encode for SeqIn {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            SeqIn::Next => out.push(0),
            SeqIn::Back(x) => {
                out.push(192);
                x.encode(out);
            }
            SeqIn::Ahead(x) => {
                out.push(222);
                x.encode(out);
            }
            SeqIn::Raw(x) => {
                out.push(246);
                x.encode(out);
            }
        }
    }
}

impl Encode for OptionsIn {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            OptionsIn::Linux { ws, sack } => {
                out.push(0);
                ws.encode(out);
                match sack {
                    None => out.push(255),
                    Some(v) => {
                        out.push(0);
                        v.encode(out);
                    }
                }
            }
            OptionsIn::NoTimestamps { ws } => {
                out.push(180);
                ws.encode(out);
            }
            OptionsIn::Custom(list) => {
                out.push(210);
                list.encode(out);
            }
        }
    }
}

impl Encode for OptIn {
    fn encode(&self, out: &mut Vec<u8>) {
        const N: u64 = 9;
        match self {
            OptIn::Mss(v) => {
                tag(out, 0, N);
                v.encode(out);
            }
            OptIn::WindowScale(v) => {
                tag(out, 1, N);
                v.encode(out);
            }
            OptIn::SackPermitted => tag(out, 2, N),
            OptIn::Timestamps(ts) => {
                tag(out, 3, N);
                ts.encode(out);
            }
            OptIn::Sack { n, gap } => {
                tag(out, 4, N);
                n.encode(out);
                gap.encode(out);
            }
            OptIn::Nop => tag(out, 5, N),
            OptIn::Eol => tag(out, 6, N),
            OptIn::Unknown { kind, len } => {
                tag(out, 7, N);
                kind.encode(out);
                len.encode(out);
            }
            OptIn::Bytes(b) => {
                tag(out, 8, N);
                b.encode(out);
            }
        }
    }
}

impl Encode for TsIn {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            TsIn::Auto => tag(out, 0, 3),
            TsIn::Stale(x) => {
                tag(out, 1, 3);
                x.encode(out);
            }
            TsIn::Raw(a, b) => {
                tag(out, 2, 3);
                a.encode(out);
                b.encode(out);
            }
        }
    }
}

impl Encode for PayloadIn {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            PayloadIn::None => tag(out, 0, 3),
            PayloadIn::Full => tag(out, 1, 3),
            PayloadIn::Bytes(n) => {
                tag(out, 2, 3);
                n.encode(out);
            }
        }
    }
}

impl Encode for MetaIn {
    fn encode(&self, out: &mut Vec<u8>) {
        match self.rule {
            RuleIn::Conn => out.push(0),
            RuleIn::None => out.push(220),
            RuleIn::Number(n) => {
                out.push(236);
                n.encode(out);
            }
        }
        match self.copy {
            CopyIn::Datapath => out.push(0),
            CopyIn::Full => out.push(204),
            CopyIn::HeaderOnly(keep) => {
                out.push(230);
                keep.encode(out);
            }
        }
        out.push(if self.checksum_not_ready { 0 } else { 255 });
        out.push(match self.from_lan {
            LanIn::Truth => 0,
            LanIn::Unknown => 204,
            LanIn::Wrong => 230,
        });
        match self.arrival {
            ArrivalIn::None => out.push(0),
            ArrivalIn::Now => out.push(100),
            ArrivalIn::Earlier(us) => {
                out.push(150);
                us.encode(out);
            }
            ArrivalIn::Later(us) => {
                out.push(230);
                us.encode(out);
            }
        }
    }
}

impl Encode for MutateIn {
    fn encode(&self, out: &mut Vec<u8>) {
        match self.0 {
            None => out.push(255),
            Some(m) => {
                out.push(0);
                m.at.encode(out);
                m.xor.encode(out);
                m.fix_checksum.encode(out);
            }
        }
    }
}

impl Encode for Reconf {
    fn encode(&self, out: &mut Vec<u8>) {
        self.max_flows.encode(out);
        self.drop_rule.encode(out);
        self.rename_rule.encode(out);
        self.rule_order.encode(out);
    }
}

/// The bytes that decode to `input`.
pub fn to_bytes(input: &EngineInput) -> Vec<u8> {
    let mut out = Vec::new();
    input.encode(&mut out);
    out
}
