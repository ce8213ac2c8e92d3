//! The per-packet entry point: bytes and time in, a verdict (and maybe a rewritten window) out.
//!
//! `handle_packet` parses the packet, finds or creates its flow, feeds the flow's controller and
//! applies its target to the receiver's ACKs through the safety rules of `window_clamp`. Every
//! unknown case passes the packet untouched and counts why (fail open).
//!
//! # Reconfiguration (a config reload)
//!
//! [`Engine::reconfigure`] swaps rules and limits without touching flow state. The kernel keeps the
//! rule *number* a connection was classed with in its conntrack mark, and numbers are positions in
//! the config, so after a reload the same number may mean another rule. The engine therefore
//! decides a flow's rule once, when the flow enters the table, and afterwards ignores the number
//! its packets carry:
//!
//! * rules are matched across configs **by name**. A flow whose rule is still configured (same
//!   name, any position) keeps its state, its controller instance and its rule, so its metrics
//!   labels stay right; a flow that builds its controller only later uses the rule's new
//!   controller settings. Per-rule counters follow the name too, so they stay monotonic.
//! * a flow whose rule was **removed** (or renamed) is *released*: its ACKs pass unmodified from
//!   then on (pass reason `rule_removed`) until it ends. Releasing only lets the window grow back
//!   to what the host advertises, which never hurts traffic. The flow stays in the table (so its
//!   packets, which the kernel still queues because of their conntrack mark, are not taken for a
//!   new flow of whatever rule now has that number) and is listed under its old rule name until
//!   it ends; the removed rule then disappears from snapshots.
//! * **new** flows are classed by the number in their mark under the new rules. A flow not in the
//!   table whose mark predates the reload is necessarily seen mid-stream, so it is left alone
//!   anyway (no handshake, pass reason `no_handshake`). Connections opened in the few
//!   milliseconds between the firewall swap and the engine swap may be counted under the rule
//!   that has their number in the other config; both are background rules.
//! * a smaller `max_flows` drops nothing at once: existing flows stay, new flows are refused until
//!   the table is below the bound, and flows idle at least `evict_idle_after` are evicted by
//!   [`Engine::on_tick`] (counted as evicted) while the table is over it. `idle_timeout` and
//!   `evict_idle_after` apply to every flow from the next tick.

use std::collections::VecDeque;

use slipstream_control::{ControllerConfig, Instant};
use slipstream_wire::{parse, parse_headers, rewrite_window, ParseError, TcpPacketInfo};

use crate::api::{EngineConfig, PacketCopy, PacketMeta, ReconfigureSummary, RuleSpec, Verdict, WindowUpdate};
use crate::flow::{AckOutcome, Flow, FlowEvent, KernelClamp};
use crate::flow_key::FlowKey;
use crate::flow_table::{Admission, FlowTable, TableLimits};
use crate::household::Household;
use crate::stats::LinkDirection;
use crate::stats::{EngineCounters, PassReason};
use crate::udp::UdpTable;

pub(crate) mod probes;
mod rounds;
mod snapshot;
mod udp;

/// At most this many events wait for the shell; more are dropped and counted. A packet makes at
/// most two, and the daemon takes them after every batch of 256 packets.
const MAX_PENDING_EVENTS: usize = 1024;
/// At most this many window updates wait for the shell; more are dropped (the flow's receiver
/// or its sender's persist timer reopens it later).
const MAX_PENDING_UPDATES: usize = 1024;

/// Per-rule monotonic counters.
#[derive(Clone, Copy, Debug, Default)]
struct RuleCounters {
    flows_started: u64,
    acked_bytes: u64,
    rewritten: u64,
}

/// A rule as flows refer to it: a configured rule, or a removed one that still has flows.
#[derive(Clone, Debug)]
struct RuleClass {
    spec: RuleSpec,
    counters: RuleCounters,
    /// In the current config (else removed by a reload; its flows are released).
    configured: bool,
}

/// Most rule classes (configured and removed-with-flows) a flow's `u16` can name.
const MAX_CLASSES: usize = u16::MAX as usize;

/// The pure core: packets and time in, verdicts, events and window updates out; no I/O.
pub struct Engine {
    /// Configured rules in config order (`classes[n - 1]` is rule number n), then removed rules
    /// that still have flows. A flow's `rule` is a 1-based index into this.
    classes: Vec<RuleClass>,
    configured: usize,
    table: FlowTable,
    counters: EngineCounters,
    events: VecDeque<(FlowEvent, Instant)>,
    window_updates: Vec<WindowUpdate>,
    household: Household,
    /// Background UDP flows (QUIC, uTP), held to their share by policers.
    udp: UdpTable,
    /// Household rounds run since start (each may change any household flow's allocation).
    household_rounds: u64,
    /// Rounds run only from `run_due_rounds` and `on_tick`, never inside `handle_packet`.
    rounds_deferred: bool,
}

fn table_limits(config: &EngineConfig) -> TableLimits {
    TableLimits {
        max_flows: config.max_flows,
        idle_timeout: config.idle_timeout,
        evict_idle_after: config.evict_idle_after,
    }
}

impl Engine {
    /// An engine with an empty flow table.
    pub fn new(config: EngineConfig) -> Engine {
        let table = FlowTable::new(table_limits(&config));
        let household = Household::new(config.household.clone());
        let classes: Vec<RuleClass> = config
            .rules
            .into_iter()
            .map(|spec| RuleClass {
                spec,
                counters: RuleCounters::default(),
                configured: true,
            })
            .collect();
        Engine {
            configured: classes.len(),
            classes,
            table,
            udp: UdpTable::default(),
            counters: EngineCounters::default(),
            events: VecDeque::new(),
            window_updates: Vec::new(),
            household_rounds: 0,
            household,
            rounds_deferred: false,
        }
    }

    /// The rule class of every flow in both tables (TCP and UDP), one per flow.
    fn flow_rules(&self) -> impl Iterator<Item = u16> + '_ {
        self.table
            .iter()
            .map(|(_, f)| f.rule)
            .chain(self.udp.iter().map(|(_, f)| f.rule))
    }

    /// Applies a new config (a reload) without dropping flow state; see the module docs for what
    /// happens to existing flows. Pure: O(rules + flows), no allocation per flow.
    pub fn reconfigure(&mut self, config: EngineConfig) -> ReconfigureSummary {
        self.table.set_limits(table_limits(&config));
        self.household.reconfigure(config.household.clone());
        let old: Vec<RuleClass> = std::mem::take(&mut self.classes);
        let old_configured = self.configured;
        let mut summary = ReconfigureSummary {
            flows: self.table.len() + self.udp.len(),
            ..ReconfigureSummary::default()
        };
        let mut used = vec![false; old.len()];
        for rule in self.flow_rules() {
            if let Some(u) = used.get_mut(usize::from(rule).wrapping_sub(1)) {
                *u = true;
            }
        }
        let mut remap: Vec<Option<usize>> = vec![None; old.len()];
        let mut classes: Vec<RuleClass> = Vec::with_capacity(config.rules.len());
        for spec in config.rules {
            let previous = old.iter().position(|c| c.spec.name == spec.name);
            let counters = match previous {
                Some(i) => {
                    remap[i] = Some(classes.len());
                    if i >= old_configured {
                        // A removed rule that comes back keeps its counters; its released flows
                        // stay released.
                        summary.rules_added += 1;
                    }
                    old[i].counters
                }
                None => {
                    summary.rules_added += 1;
                    RuleCounters::default()
                }
            };
            classes.push(RuleClass {
                spec,
                counters,
                configured: true,
            });
        }
        let configured = classes.len();
        for (i, class) in old.iter().enumerate() {
            if remap[i].is_some() {
                continue;
            }
            if i < old_configured {
                summary.rules_removed += 1;
            }
            if !used[i] {
                continue;
            }
            if classes.len() < MAX_CLASSES {
                remap[i] = Some(classes.len());
                classes.push(RuleClass {
                    spec: class.spec.clone(),
                    counters: class.counters,
                    configured: false,
                });
            } else {
                // Pathological (tens of thousands of removed rules with live flows): such flows
                // are listed under the last removed rule; they are released all the same.
                remap[i] = Some(classes.len() - 1);
            }
        }
        for (_, flow) in self.table.iter_mut() {
            let Some(new) = remap
                .get(usize::from(flow.rule).wrapping_sub(1))
                .copied()
                .flatten()
            else {
                // A flow with no valid class cannot occur; release it to be safe.
                flow.release();
                continue;
            };
            flow.rule = (new + 1) as u16;
            if !classes[new].configured && !flow.is_released() {
                flow.release();
                summary.released += 1;
            }
        }
        for (_, flow) in self.udp.iter_mut() {
            match remap
                .get(usize::from(flow.rule).wrapping_sub(1))
                .copied()
                .flatten()
            {
                Some(new) => {
                    flow.rule = (new + 1) as u16;
                    if !classes[new].configured && !flow.is_released() {
                        flow.release();
                        summary.released += 1;
                    }
                }
                None => flow.release(),
            }
        }
        self.classes = classes;
        self.configured = configured;
        summary
    }

    /// Number of rules in the current config (snapshot rules past this are removed rules that
    /// still have flows).
    pub fn configured_rules(&self) -> usize {
        self.configured
    }

    /// Handles one packet; rewrites `packet` in place when the verdict says so.
    pub fn handle_packet(&mut self, now: Instant, packet: &mut [u8], meta: PacketMeta) -> Verdict {
        self.counters.packets += 1;
        let parsed = match meta.copy {
            PacketCopy::Full => parse(packet),
            PacketCopy::HeaderOnly => parse_headers(packet),
        };
        let info = match parsed {
            Ok(info) => info,
            Err(ParseError::NotTcp) => return self.handle_udp(now, packet, meta),
            Err(error) => {
                self.counters.count_malformed(error);
                return Verdict::Accept;
            }
        };
        let Some(rule) = meta.rule.filter(|r| *r >= 1) else {
            if info.flags.syn && !info.flags.ack {
                // An ordinary flow opens (the firewall queues these SYNs only for household
                // control): best effort is about to start.
                self.household.on_competitor(now);
            }
            self.counters.count_pass(PassReason::Unclassified);
            return Verdict::Accept;
        };
        if !self.rounds_deferred {
            self.run_household(now);
        }
        match self.handle_tcp(now, &info, packet, rule, meta) {
            Ok((field, class)) => match rewrite_window(packet, info.tcp_offset, field) {
                Ok(()) => {
                    self.counters.rewritten += 1;
                    self.classes[class].counters.rewritten += 1;
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

    /// Tracks the packet; `Ok((field, class))` asks for the window field to be rewritten to
    /// `field` (`class`: index of the flow's rule class). `rule` is the number in the packet's
    /// mark: it classes a new flow; a known flow keeps the rule it was classed with.
    fn handle_tcp(
        &mut self,
        now: Instant,
        info: &TcpPacketInfo,
        packet: &[u8],
        rule: u16,
        meta: PacketMeta,
    ) -> Result<(u16, usize), PassReason> {
        // Measurements use the kernel's arrival time when the datapath has it.
        let at = meta.arrival.filter(|t| *t <= now).unwrap_or(now);
        let (key, side) = FlowKey::from_packet(info.src, info.src_port, info.dst, info.dst_port);
        if info.flags.syn && !info.flags.ack && !info.flags.rst {
            // A port reused within the idle timeout or the close linger: the new connection
            // starts from nothing, classed by its own mark.
            let reopened = self
                .table
                .get_mut(&key)
                .is_some_and(|flow| flow.is_reopened_by(side, info.seq));
            if reopened && self.table.remove(&key) {
                self.counters.flows_reopened += 1;
            }
        }
        if usize::from(rule) > self.configured && !self.table.contains(&key) {
            return Err(PassReason::Unclassified);
        }
        match self.table.admit(key, now, || Flow::new(rule, now)) {
            Admission::Existing => {}
            Admission::Inserted { evicted } => {
                if info.flags.syn && info.flags.ack {
                    // Classed at its SYN-ACK (a rule on the answering side): its SYN passed
                    // unclassed and was taken for best effort's. The background does not yield to
                    // itself.
                    self.household.on_competitor_retracted();
                }
                self.counters.flows_created += 1;
                self.counters.flows_evicted += u64::from(evicted);
                self.classes[usize::from(rule) - 1].counters.flows_started += 1;
            }
            Admission::Refused => return Err(PassReason::TableFull),
        }
        let Some(flow) = self.table.get_mut(&key) else {
            return Err(PassReason::TableFull);
        };
        flow.last_seen = now;
        flow.note_lan_side(side, meta.from_lan);
        {
            // The background's own traffic on the link it crosses, taken off the link's counters
            // to leave best effort's (`household::best_effort`): its data on its link, and its
            // ACKs on the opposite one (a background download's ACKs, counted as best effort on
            // the upload link, read as a call there: hundreds of small packets a second).
            let direction = if side == flow.lan_side() {
                LinkDirection::Upload
            } else {
                LinkDirection::Download
            };
            // A packet GRO merged arrived as several: one header and one count per segment.
            let segments = info.payload_len.div_ceil((flow.floor() / 2).max(536)).max(1);
            let headers = ip_length(info, packet) - u64::from(info.payload_len);
            let bytes = u64::from(info.payload_len) + u64::from(segments) * headers;
            let background = &mut self.household.links[direction.index()].background;
            background.bytes += bytes;
            background.packets += u64::from(segments);
            // A household flow's ACKs, on the link opposite its data's (`household::ack_room`).
            if let Some(data_link) = flow.link().filter(|link| *link != direction) {
                if flow.household_mut().is_some() {
                    let acks = &mut self.household.links[data_link.index()].acks_across;
                    acks.bytes += bytes;
                    acks.packets += u64::from(segments);
                }
            }
        }
        let flags = info.flags;
        if flags.rst {
            flow.closing_since.get_or_insert(now);
            return Err(PassReason::Observed);
        }
        if flow.is_released() {
            if flags.fin {
                flow.on_fin(side, now);
            }
            return Err(PassReason::RuleRemoved);
        }
        if flags.syn {
            flow.on_syn(side, at, info);
            return Err(PassReason::Observed);
        }
        if flags.ack {
            flow.on_handshake_ack(side, at);
        }
        let flow_rule = usize::from(flow.rule).clamp(1, self.classes.len()) - 1;
        let mut events: [Option<FlowEvent>; 2] = [None, None];
        events[0] = flow.resume_midstream(info, &self.classes[flow_rule].spec.controller, key);
        if flow.note_missed_handshake() {
            self.counters.flows_without_handshake += 1;
            events[0] = Some(FlowEvent::HandshakeMissed { key, rule: flow.rule });
        }
        if info.payload_len > 0 {
            let controller = &self.classes[flow_rule].spec.controller;
            let data = flow.on_data(side, at, info, controller, key);
            events[1] = data.event;
            if let (Some(sample), Some(LinkDirection::Download)) = (data.link_sample, flow.link()) {
                if let Some((state, _)) = flow.household_mut() {
                    let upload_queue =
                        self.household.links[LinkDirection::Upload.index()].queue_for_opposite();
                    let link = &mut self.household.links[LinkDirection::Download.index()];
                    if data.one_way {
                        link.delay.on_sample(&mut state.delay, sample);
                        if let Some(trip) = data.ack_trip {
                            link.acks_queue.on_trip(&mut state.ack_trip, trip);
                        }
                    } else {
                        link.delay
                            .on_round_trip_sample(&mut state.delay, sample, upload_queue);
                    }
                }
            }
        }
        if flags.fin {
            flow.on_fin(side, now);
        }
        let mut outcome = Err(PassReason::Observed);
        if flags.ack {
            let acked_before = flow.acked_bytes();
            let can_rewrite = match (meta.copy, meta.checksum_ready) {
                (PacketCopy::HeaderOnly, _) => Err(PassReason::HeaderOnly),
                (PacketCopy::Full, false) => Err(PassReason::ChecksumNotReady),
                (PacketCopy::Full, true) => Ok(()),
            };
            let rewritable = can_rewrite.is_ok();
            let household = matches!(
                self.classes[flow_rule].spec.controller,
                ControllerConfig::Household
            );
            let ack = flow.on_ack(side, at, info, can_rewrite, household);
            outcome = match ack.outcome {
                AckOutcome::Rewrite(field) => Ok((field, flow_rule)),
                AckOutcome::Pass(reason) => Err(reason),
            };
            if let Some(direction) = flow.link() {
                if rewritable {
                    flow.store_ack(side, packet, info);
                }
                if let Some((state, _)) = flow.household_mut() {
                    let download_link = &self.household.links[LinkDirection::Download.index()];
                    let (download_queue, download_part) = (
                        download_link.queue_for_opposite(),
                        download_link.background_part(),
                    );
                    let link = &mut self.household.links[direction.index()];
                    link.delivered += u64::from(ack.acked);
                    state.round_acked += u64::from(ack.acked);
                    if let (Some(sample), LinkDirection::Upload) = (ack.near_sample, direction) {
                        if let Some(half) = state.link_handshake.take() {
                            let slack = self.household.config.budget.delay_target();
                            link.delay.on_handshake(&mut state.delay, half, slack);
                        }
                        if let Some(one_way) = ack.ack_one_way {
                            // The download link's queue as this upload's ACKs met it, for the
                            // cap on their room there (`ack_room::AcksQueue`).
                            link.acks_queue.on_trip(&mut state.ack_trip, one_way);
                        }
                        // The round trip less the background's part of the queue its ACK met
                        // on the download link (`Link::queue_for_opposite`).
                        match (ack.ack_one_way, download_part) {
                            (Some(one_way), Some(part)) => {
                                let excess = state.ack_path.excess(at, one_way);
                                link.delay
                                    .on_sample(&mut state.delay, sample.saturating_sub(excess.mul_f64(part)));
                            }
                            _ => link
                                .delay
                                .on_round_trip_sample(&mut state.delay, sample, download_queue),
                        }
                    }
                }
            }
            self.classes[flow_rule].counters.acked_bytes += flow.acked_bytes() - acked_before;
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

    /// The window scales of a flow seen without its handshake ([`FlowEvent::HandshakeMissed`]),
    /// found by the shell (conntrack saw the SYNs): `low` is the shift
    /// `key.endpoint(Side::Low)` applies to the windows it sends, `high` the other's. The flow
    /// is controlled from its next packet, its right edge learned from each side's next ACK
    /// (`flow/midstream.rs`). Returns false if the flow is gone, released, or not waiting for
    /// scales.
    pub fn learn_window_scales(&mut self, key: FlowKey, low: u8, high: u8) -> bool {
        let learned = self
            .table
            .get_mut(&key)
            .is_some_and(|flow| flow.learn_window_scales([low, high]));
        self.counters.flows_recovered += u64::from(learned);
        learned
    }

    /// Where a kernel datapath should aim the flow's receiver's ACKs (see [`KernelClamp`]);
    /// `None` for unknown flows and flows that may not be lowered.
    pub fn kernel_clamp(&self, key: &FlowKey) -> Option<KernelClamp> {
        let flow = self.table.get(key)?;
        let class = self.classes.get(usize::from(flow.rule).wrapping_sub(1))?;
        flow.kernel_clamp(matches!(class.spec.controller, ControllerConfig::Household))
    }

    /// Whether the flow is in the table: a kernel datapath drops its map entries once the flow
    /// is gone (closed, expired, evicted, reopened).
    pub fn contains(&self, key: &FlowKey) -> bool {
        self.table.contains(key)
    }

    /// At stop: a window update for every household flow whose receiver was held below what it
    /// last advertised, opening the window to that (the host's own window), so that no sender
    /// waits for its persist timer once the daemon is gone. The edges are recorded as forwarded.
    pub fn final_window_updates(&mut self, now: Instant) -> Vec<WindowUpdate> {
        self.table
            .iter_mut()
            .filter_map(|(_, flow)| flow.window_update(now, u32::MAX))
            .collect()
    }

    /// The window-scale shift each end of the flow applies to the windows it sends, by
    /// [`Side`](crate::Side) index, once the handshake showed them. A kernel datapath
    /// tracks the right edge advertised in both directions from the first ACK, before it knows
    /// which one it will lower, and an edge read with the wrong shift is off by that factor.
    pub fn window_scales(&self, key: &FlowKey) -> Option<[u8; 2]> {
        self.table.get(key)?.window_scales()
    }

    /// Timer work: household rounds while no packets come, expire idle and closed flows, and
    /// while the table is over a lowered `max_flows`, evict flows idle at least
    /// `evict_idle_after`. Call at least every few hundred milliseconds.
    pub fn on_tick(&mut self, now: Instant) {
        self.run_household(now);
        self.counters.udp_flows_expired += self.udp.expire(now, self.table.limits().idle_timeout);
        let expired = self.table.expire(now);
        self.counters.flows_expired += expired.idle;
        self.counters.flows_closed += expired.closed;
        self.counters.flows_evicted += self.table.shrink_to_limit(now);
    }

    /// Window updates for the shell to send (raw socket), oldest first.
    pub fn drain_window_updates(&mut self) -> impl Iterator<Item = WindowUpdate> + '_ {
        self.window_updates.drain(..)
    }

    /// Events for the shell to log, oldest first.
    pub fn drain_events(&mut self) -> impl Iterator<Item = (FlowEvent, Instant)> + '_ {
        self.events.drain(..)
    }

    /// Counters since start, for metrics.
    pub fn counters(&self) -> &EngineCounters {
        &self.counters
    }

    /// Flows in the table now.
    pub fn active_flows(&self) -> usize {
        self.table.len() + self.udp.len()
    }
}

/// The packet's IP length: headers and payload (from the headers, so also for header-only
/// copies).
fn ip_length(info: &TcpPacketInfo, packet: &[u8]) -> u64 {
    let tcp_header = packet
        .get(info.tcp_offset + 12)
        .map_or(20, |b| usize::from(b >> 4) * 4);
    (info.tcp_offset + tcp_header) as u64 + u64::from(info.payload_len)
}
