//! The `engine` target's input: a setup (rules, limits, household settings) and a sequence of
//! operations, decoded from fuzz bytes with `arbitrary`, and what the setup means as engine
//! rules and config.

use std::net::IpAddr;

use arbitrary::{Arbitrary, Unstructured};
use slipstream_control::{ControllerConfig, Duration, FixedWindowConfig, VultureConfig};
use slipstream_engine::{EngineConfig, HouseholdConfig, RuleSpec, ShareSpec, UdpEnforcement};
use slipstream_household::{BudgetConfig, DelayTargetConfig, KeyBinarySearchConfig, KeyStochasticConfig};

/// At most this many operations of an input are run (longer inputs are cut).
pub const MAX_OPS: usize = 400;
/// The payload of a full-size segment.
pub(crate) const MSS_PAYLOAD: usize = 1448;

/// The setup, then operations until the input ends (at most [`MAX_OPS`]).
#[derive(Debug, Clone)]
pub struct EngineInput {
    pub setup: Setup,
    pub ops: Vec<Op>,
}

impl<'a> Arbitrary<'a> for EngineInput {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let setup = u.arbitrary()?;
        let mut ops = Vec::new();
        // Every byte is part of an operation (no "one more?" flags between them), so a random
        // input is a long sequence of operations.
        while !u.is_empty() && ops.len() < MAX_OPS {
            ops.push(u.arbitrary()?);
        }
        Ok(EngineInput { setup, ops })
    }
}

#[derive(Arbitrary, Debug, Clone)]
pub struct Setup {
    /// 1..=4 flows (the connections below are six, so the table fills and evicts).
    pub max_flows: u8,
    pub idle_timeout: TimeoutIn,
    pub evict_idle_after: TimeoutIn,
    pub budget: BudgetIn,
    pub slowdown: bool,
    pub turn_ms: u16,
    /// Background UDP policed (`household.udp = "police"`) instead of shaped.
    pub police_udp: bool,
    /// Fixed window rule: 1 + 8 x this many bytes (up to 512 KiB).
    pub fixed_window: u16,
    pub vulture: VultureIn,
    pub shares: [ShareIn; 2],
    pub rule_order: u8,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum TimeoutIn {
    Millis(u8),
    Second,
    TenSeconds,
    TwoMinutes,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum BudgetIn {
    DelayTarget,
    Ledbat,
    KeyBinarySearch,
    KeyStochastic,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct VultureIn {
    pub bounded_steps: bool,
    pub draining_is_congestion: bool,
    pub queue_delay_limit_ms: Option<u8>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct ShareIn {
    pub weight: u16,
    pub min_rate: u32,
    pub priority: u8,
}

/// Operations, weighted towards segments (see the `Arbitrary` impl).
#[derive(Debug, Clone)]
pub enum Op {
    Segment(Segment),
    Raw { dt: Dt, meta: MetaIn, bytes: Vec<u8> },
    Tick(Dt),
    LearnScales { conn: u8, low: u8, high: u8 },
    Snapshot,
    Reconfigure(Reconf),
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u8::arbitrary(u)? {
            0..=189 => Op::Segment(u.arbitrary()?),
            190..=219 => Op::Tick(u.arbitrary()?),
            220..=234 => Op::Raw {
                dt: u.arbitrary()?,
                meta: u.arbitrary()?,
                bytes: u.arbitrary()?,
            },
            235..=244 => Op::LearnScales {
                conn: u.arbitrary()?,
                low: u.arbitrary()?,
                high: u.arbitrary()?,
            },
            245..=252 => Op::Snapshot,
            _ => Op::Reconfigure(u.arbitrary()?),
        })
    }
}

/// A time step before the operation: mostly short (see the `Arbitrary` impl).
#[derive(Debug, Clone, Copy)]
pub enum Dt {
    Zero,
    Micros(u16),
    Millis(u8),
    Seconds(u8),
}

impl<'a> Arbitrary<'a> for Dt {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u8::arbitrary(u)? {
            0..=63 => Dt::Zero,
            64..=175 => Dt::Micros(u.arbitrary()?),
            176..=247 => Dt::Millis(u.arbitrary()?),
            _ => Dt::Seconds(u.arbitrary()?),
        })
    }
}

#[derive(Arbitrary, Debug, Clone)]
pub struct Segment {
    pub dt: Dt,
    /// Which of the six connections.
    pub conn: u8,
    pub from_server: bool,
    pub flags: FlagsIn,
    pub seq: SeqIn,
    pub ack: SeqIn,
    pub window: u16,
    pub options: OptionsIn,
    pub payload: PayloadIn,
    pub meta: MetaIn,
    pub tos: u8,
    pub ip_options: u8,
    pub mutate: MutateIn,
}

/// The segment's TCP options: mostly what Linux sends (see the `Arbitrary` impl).
#[derive(Debug, Clone)]
pub enum OptionsIn {
    /// SYN: MSS, SACK permitted, timestamps, window scale `ws`; others: timestamps (and SACK
    /// blocks when `sack` is set).
    Linux {
        ws: u8,
        sack: Option<(u8, u16)>,
    },
    /// SYN: MSS and window scale; others: none (Windows without timestamps).
    NoTimestamps {
        ws: u8,
    },
    Custom(Vec<OptIn>),
}

impl<'a> Arbitrary<'a> for OptionsIn {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u8::arbitrary(u)? {
            0..=179 => OptionsIn::Linux {
                ws: u.arbitrary()?,
                sack: if u8::arbitrary(u)? < 32 {
                    Some(u.arbitrary()?)
                } else {
                    None
                },
            },
            180..=209 => OptionsIn::NoTimestamps { ws: u.arbitrary()? },
            _ => OptionsIn::Custom(u.arbitrary()?),
        })
    }
}

/// Rarely, one byte flipped after the packet was built.
#[derive(Debug, Clone, Copy)]
pub struct MutateIn(pub Option<Mutation>);

impl<'a> Arbitrary<'a> for MutateIn {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(MutateIn(if u8::arbitrary(u)? < 12 {
            Some(u.arbitrary()?)
        } else {
            None
        }))
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum FlagsIn {
    Syn,
    SynAck,
    Ack,
    Data,
    FinAck,
    Rst,
    RstAck,
    Raw(u8),
}

/// A sequence (or acknowledgment) number relative to what the sender (or its peer) sent so far;
/// mostly the next one (see the `Arbitrary` impl).
#[derive(Debug, Clone, Copy)]
pub enum SeqIn {
    Next,
    Back(u16),
    Ahead(u16),
    Raw(u32),
}

impl<'a> Arbitrary<'a> for SeqIn {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u8::arbitrary(u)? {
            0..=191 => SeqIn::Next,
            192..=221 => SeqIn::Back(u.arbitrary()?),
            222..=245 => SeqIn::Ahead(u.arbitrary()?),
            _ => SeqIn::Raw(u.arbitrary()?),
        })
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum OptIn {
    Mss(u16),
    WindowScale(u8),
    SackPermitted,
    Timestamps(TsIn),
    /// `n` blocks (1..=4) starting `gap` bytes beyond the segment's ACK.
    Sack {
        n: u8,
        gap: u16,
    },
    Nop,
    Eol,
    Unknown {
        kind: u8,
        len: u8,
    },
    Bytes([u8; 3]),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum TsIn {
    /// The sender's clock (milliseconds) and the last TSval it received.
    Auto,
    /// An older TSval than the clock says.
    Stale(u16),
    Raw(u32, u32),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum PayloadIn {
    None,
    Full,
    Bytes(u16),
}

/// What the datapath says besides the bytes; mostly what a router would (see the `Arbitrary`
/// impl).
#[derive(Debug, Clone, Copy)]
pub struct MetaIn {
    pub rule: RuleIn,
    pub copy: CopyIn,
    pub checksum_not_ready: bool,
    pub from_lan: LanIn,
    pub arrival: ArrivalIn,
}

impl<'a> Arbitrary<'a> for MetaIn {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let rule = match u8::arbitrary(u)? {
            0..=219 => RuleIn::Conn,
            220..=235 => RuleIn::None,
            _ => RuleIn::Number(u.arbitrary()?),
        };
        let copy = match u8::arbitrary(u)? {
            0..=203 => CopyIn::Datapath,
            204..=229 => CopyIn::Full,
            _ => CopyIn::HeaderOnly(u.arbitrary()?),
        };
        let checksum_not_ready = u8::arbitrary(u)? < 12;
        let from_lan = match u8::arbitrary(u)? {
            0..=203 => LanIn::Truth,
            204..=229 => LanIn::Unknown,
            _ => LanIn::Wrong,
        };
        let arrival = match u8::arbitrary(u)? {
            0..=99 => ArrivalIn::None,
            100..=149 => ArrivalIn::Now,
            150..=229 => ArrivalIn::Earlier(u.arbitrary()?),
            _ => ArrivalIn::Later(u.arbitrary()?),
        };
        Ok(MetaIn {
            rule,
            copy,
            checksum_not_ready,
            from_lan,
            arrival,
        })
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum RuleIn {
    /// The connection's own rule (the kernel marks every packet of a connection alike).
    Conn,
    None,
    Number(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum CopyIn {
    /// As the daemon's queues do: data segments cut to their headers, everything else whole.
    Datapath,
    Full,
    /// Headers and at most this many payload bytes.
    HeaderOnly(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum LanIn {
    Truth,
    Unknown,
    Wrong,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum ArrivalIn {
    None,
    Now,
    Earlier(u16),
    Later(u16),
}

/// One byte flipped after the packet was built, and the TCP checksum optionally set right again.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct Mutation {
    pub at: u16,
    pub xor: u8,
    pub fix_checksum: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct Reconf {
    pub max_flows: u8,
    pub drop_rule: Option<u8>,
    pub rename_rule: Option<u8>,
    pub rule_order: u8,
}

/// (client, client port, server, server port); the client is the LAN host. In the last one the
/// client has the higher address, so it is the flow key's high side.
pub(crate) fn connections() -> [(IpAddr, u16, IpAddr, u16); 6] {
    let ip = |s: &str| s.parse::<IpAddr>().expect("literal address");
    [
        (ip("10.0.0.2"), 40000, ip("192.0.2.1"), 6881),
        (ip("10.0.0.3"), 40001, ip("192.0.2.1"), 6881),
        (ip("10.0.0.2"), 40002, ip("198.51.100.7"), 443),
        (ip("fd00::2"), 40000, ip("2001:db8::1"), 6881),
        (ip("fd00::3"), 50000, ip("2001:db8::2"), 443),
        (ip("203.0.113.9"), 51413, ip("10.1.1.1"), 80),
    ]
}

pub(crate) fn timeout(t: TimeoutIn) -> Duration {
    match t {
        TimeoutIn::Millis(ms) => Duration::from_millis(u64::from(ms) + 1),
        TimeoutIn::Second => Duration::from_secs(1),
        TimeoutIn::TenSeconds => Duration::from_secs(10),
        TimeoutIn::TwoMinutes => Duration::from_secs(120),
    }
}

pub(crate) fn step(dt: Dt) -> Duration {
    match dt {
        Dt::Zero => Duration::ZERO,
        Dt::Micros(us) => Duration::from_micros(u64::from(us)),
        Dt::Millis(ms) => Duration::from_millis(u64::from(ms)),
        Dt::Seconds(s) => Duration::from_secs(u64::from(s)),
    }
}

/// The four rules (household twice with different shares, Vulture, fixed window), rotated.
pub(crate) fn base_rules(setup: &Setup) -> Vec<RuleSpec> {
    let share = |s: ShareIn| ShareSpec {
        weight: u32::from(s.weight % 1000) + 1,
        min_rate: u64::from(s.min_rate % 2_000_000),
        priority: s.priority % 4,
    };
    let vulture = VultureConfig {
        bounded_steps: setup.vulture.bounded_steps,
        draining_is_congestion: setup.vulture.draining_is_congestion,
        queue_delay_limit: setup
            .vulture
            .queue_delay_limit_ms
            .map(|ms| Duration::from_millis(u64::from(ms) + 1)),
        ..VultureConfig::default()
    };
    let mut rules = vec![
        RuleSpec {
            name: "house-a".into(),
            controller: ControllerConfig::Household,
            share: share(setup.shares[0]),
        },
        RuleSpec {
            name: "vulture".into(),
            controller: ControllerConfig::Vulture(vulture),
            share: ShareSpec::default(),
        },
        RuleSpec {
            name: "fixed".into(),
            controller: ControllerConfig::FixedWindow(FixedWindowConfig {
                window_bytes: u32::from(setup.fixed_window) * 8 + 1,
            }),
            share: ShareSpec::default(),
        },
        RuleSpec {
            name: "house-b".into(),
            controller: ControllerConfig::Household,
            share: share(setup.shares[1]),
        },
    ];
    let n = rules.len();
    rules.rotate_left(usize::from(setup.rule_order) % n);
    rules
}

pub(crate) fn engine_config(setup: &Setup, rules: Vec<RuleSpec>, max_flows: usize) -> EngineConfig {
    let budget = match setup.budget {
        BudgetIn::DelayTarget => BudgetConfig::DelayTarget(DelayTargetConfig::default()),
        BudgetIn::Ledbat => BudgetConfig::DelayTarget(DelayTargetConfig::ledbat()),
        BudgetIn::KeyBinarySearch => BudgetConfig::KeyBinarySearch(KeyBinarySearchConfig::default()),
        BudgetIn::KeyStochastic => BudgetConfig::KeyStochastic(KeyStochasticConfig::default()),
    };
    EngineConfig {
        rules,
        max_flows,
        idle_timeout: timeout(setup.idle_timeout),
        evict_idle_after: timeout(setup.evict_idle_after),
        household: HouseholdConfig {
            budget,
            slowdown_interval: if setup.slowdown {
                Duration::from_secs(2)
            } else {
                Duration::ZERO
            },
            turn: Duration::from_millis(u64::from(setup.turn_ms % 9951) + 50),
            udp: if setup.police_udp {
                UdpEnforcement::Police
            } else {
                UdpEnforcement::Shape
            },
        },
    }
}
