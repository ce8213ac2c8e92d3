//! The per-packet entry point: bytes and time in, a verdict (and maybe a rewritten window) out.
//!
//! `handle_packet` parses the packet, finds or creates its flow, feeds the flow's controller and
//! applies its target to the receiver's ACKs through the safety rules of `window_clamp`. Every
//! unknown case passes the packet untouched and counts why (fail open).

use std::collections::VecDeque;

use slipstream_control::{ControllerConfig, Duration, Instant};
use slipstream_wire::{parse, parse_headers, rewrite_window, TcpPacketInfo};

use crate::flow::{AckOutcome, Flow, FlowEvent};
use crate::flow_key::FlowKey;
use crate::flow_table::{Admission, FlowTable, TableLimits};
use crate::stats::{EngineCounters, EngineSnapshot, PassReason, RuleSnapshot};

/// At most this many events wait for the shell; more are dropped and counted.
const MAX_PENDING_EVENTS: usize = 256;

/// A classification rule as the engine needs it: the kernel matched it, the engine runs its
/// controller.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleSpec {
    pub name: String,
    pub controller: ControllerConfig,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Rules, numbered from 1 in this order (the number the kernel puts in the packet mark).
    pub rules: Vec<RuleSpec>,
    pub max_flows: usize,
    pub idle_timeout: Duration,
    pub evict_idle_after: Duration,
}

/// How much of the packet the datapath handed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copy {
    /// The whole packet: it may be rewritten.
    Full,
    /// Only the first bytes (headers): observe only.
    HeaderOnly,
}

/// What the datapath knows about a packet besides its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// 1-based number of the rule that classed the flow, from the packet mark.
    pub rule: Option<u16>,
    pub copy: Copy,
    /// False when the kernel says the checksum is not final (GSO, checksum offload).
    pub checksum_ready: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accept the packet as it came.
    Accept,
    /// Accept the packet with the modified bytes (the window field was lowered).
    AcceptModified,
}

/// Per-rule monotonic counters.
#[derive(Clone, Copy, Debug, Default)]
struct RuleCounters {
    flows_started: u64,
    acked_bytes: u64,
    rewritten: u64,
}

pub struct Engine {
    rules: Vec<RuleSpec>,
    rule_counters: Vec<RuleCounters>,
    table: FlowTable,
    counters: EngineCounters,
    events: VecDeque<(FlowEvent, Instant)>,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        Engine {
            rule_counters: vec![RuleCounters::default(); config.rules.len()],
            rules: config.rules,
            table: FlowTable::new(TableLimits {
                max_flows: config.max_flows,
                idle_timeout: config.idle_timeout,
                evict_idle_after: config.evict_idle_after,
            }),
            counters: EngineCounters::default(),
            events: VecDeque::new(),
        }
    }

    /// Replaces the rules (a config reload); flows keep their state and their current controller.
    pub fn set_rules(&mut self, rules: Vec<RuleSpec>) {
        self.rule_counters.resize(rules.len(), RuleCounters::default());
        self.rules = rules;
    }

    /// Handles one packet; rewrites `packet` in place when the verdict says so.
    pub fn handle_packet(&mut self, now: Instant, packet: &mut [u8], meta: PacketMeta) -> Verdict {
        self.counters.packets += 1;
        let parsed = match meta.copy {
            Copy::Full => parse(packet),
            Copy::HeaderOnly => parse_headers(packet),
        };
        let info = match parsed {
            Ok(info) => info,
            Err(error) => {
                self.counters.count_malformed(error);
                return Verdict::Accept;
            }
        };
        let Some(rule) = meta
            .rule
            .filter(|r| *r >= 1 && usize::from(*r) <= self.rules.len())
        else {
            self.counters.count_pass(PassReason::Unclassified);
            return Verdict::Accept;
        };
        match self.handle_tcp(now, &info, rule, meta) {
            Ok(field) => match rewrite_window(packet, info.tcp_offset, field) {
                Ok(()) => {
                    self.counters.rewritten += 1;
                    self.rule_counters[usize::from(rule) - 1].rewritten += 1;
                    Verdict::AcceptModified
                }
                Err(_) => {
                    self.counters.count_pass(PassReason::Malformed);
                    Verdict::Accept
                }
            },
            Err(reason) => {
                self.counters.count_pass(reason);
                Verdict::Accept
            }
        }
    }

    /// Tracks the packet; `Ok(field)` asks for the window field to be rewritten to `field`.
    fn handle_tcp(
        &mut self,
        now: Instant,
        info: &TcpPacketInfo,
        rule: u16,
        meta: PacketMeta,
    ) -> Result<u16, PassReason> {
        let (key, side) = FlowKey::from_packet(info.src, info.src_port, info.dst, info.dst_port);
        match self.table.admit(key, now, || Flow::new(rule, now)) {
            Admission::Existing => {}
            Admission::Inserted { evicted } => {
                self.counters.flows_created += 1;
                self.counters.flows_evicted += u64::from(evicted);
                self.rule_counters[usize::from(rule) - 1].flows_started += 1;
            }
            Admission::Refused => return Err(PassReason::TableFull),
        }
        let Some(flow) = self.table.get_mut(&key) else {
            return Err(PassReason::TableFull);
        };
        flow.last_seen = now;
        let flags = info.flags;
        if flags.rst {
            flow.closing_since.get_or_insert(now);
            return Err(PassReason::Observed);
        }
        if flags.syn {
            flow.on_syn(side, info);
            return Err(PassReason::Observed);
        }
        let mut events: [Option<FlowEvent>; 2] = [None, None];
        if flow.note_missed_handshake() {
            self.counters.flows_without_handshake += 1;
            events[0] = Some(FlowEvent::HandshakeMissed { key, rule: flow.rule });
        }
        let flow_rule = usize::from(flow.rule).clamp(1, self.rules.len()) - 1;
        if info.payload_len > 0 {
            let controller = &self.rules[flow_rule].controller;
            events[1] = flow.on_data(side, now, info, controller, key);
        }
        if flags.fin {
            flow.on_fin(side, now);
        }
        let mut outcome = Err(PassReason::Observed);
        if flags.ack {
            let acked_before = flow.acked_bytes();
            let can_rewrite = match (meta.copy, meta.checksum_ready) {
                (Copy::HeaderOnly, _) => Err(PassReason::HeaderOnly),
                (Copy::Full, false) => Err(PassReason::ChecksumNotReady),
                (Copy::Full, true) => Ok(()),
            };
            outcome = match flow.on_ack(side, now, info, can_rewrite) {
                AckOutcome::Rewrite(field) => Ok(field),
                AckOutcome::Pass(reason) => Err(reason),
            };
            self.rule_counters[flow_rule].acked_bytes += flow.acked_bytes() - acked_before;
        }
        for event in events.into_iter().flatten() {
            if let FlowEvent::NoTimestamps { .. } = event {
                self.counters.flows_without_timestamps += 1;
            }
            self.push_event(event, now);
        }
        outcome
    }

    fn push_event(&mut self, event: FlowEvent, now: Instant) {
        if self.events.len() >= MAX_PENDING_EVENTS {
            self.counters.events_dropped += 1;
        } else {
            self.events.push_back((event, now));
        }
    }

    /// Timer work: expire idle and closed flows. Call every few hundred milliseconds.
    pub fn on_tick(&mut self, now: Instant) {
        let expired = self.table.expire(now);
        self.counters.flows_expired += expired.idle;
        self.counters.flows_closed += expired.closed;
    }

    /// Events for the shell to log, oldest first.
    pub fn drain_events(&mut self) -> impl Iterator<Item = (FlowEvent, Instant)> + '_ {
        self.events.drain(..)
    }

    pub fn counters(&self) -> &EngineCounters {
        &self.counters
    }

    pub fn active_flows(&self) -> usize {
        self.table.len()
    }

    /// A consistent picture for metrics: counters, per-rule figures and the `top_flows` busiest
    /// flows by goodput.
    pub fn snapshot(&self, top_flows: usize) -> EngineSnapshot {
        let mut rules: Vec<RuleSnapshot> = self
            .rules
            .iter()
            .zip(&self.rule_counters)
            .map(|(spec, c)| RuleSnapshot {
                name: spec.name.clone(),
                controller: spec.controller.kind(),
                active_flows: 0,
                flows_started: c.flows_started,
                acked_bytes: c.acked_bytes,
                rewritten: c.rewritten,
            })
            .collect();
        let mut busiest: Vec<(&FlowKey, &Flow)> = Vec::with_capacity(self.table.len());
        for (key, flow) in self.table.iter() {
            if let Some(rule) = rules.get_mut(usize::from(flow.rule).wrapping_sub(1)) {
                rule.active_flows += 1;
            }
            busiest.push((key, flow));
        }
        let by_rate = |f: &Flow| (f.goodput_bits_per_second(), f.acked_bytes());
        busiest.sort_by(|a, b| {
            by_rate(b.1)
                .partial_cmp(&by_rate(a.1))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        busiest.truncate(top_flows);
        EngineSnapshot {
            counters: self.counters.clone(),
            active_flows: self.table.len(),
            max_flows: self.table.limits().max_flows,
            rules,
            flows: busiest.into_iter().map(|(k, f)| f.snapshot(k)).collect(),
        }
    }
}
