//! The eBPF datapath's side of the packet thread: the tc programs' reports in, the engine's
//! targets out to the kernel's flow map.
//!
//! Handshakes still arrive through NFQUEUE (the firewall queues only SYNs with this datapath):
//! a classed SYN puts its flow into the kernel's map ([`KernelSide::on_handshake`]), before its
//! verdict, so every later packet of the flow is reported. Reports are fed to the engine like
//! queued packets: a pure ACK is whole in its report (and is handed over as a full copy, so the
//! engine runs its clamp exactly as with NFQUEUE), a data segment is its headers. The window the
//! engine would have written is not sent back: after each batch the flows whose receiver ACKed
//! get the controller's target written to the map ([`KernelSide::sync`]), and the kernel lowers
//! each following ACK itself, with the same safety rules.
//!
//! Household control needs two more things of the kernel. Until a household flow's bulk
//! direction is known its LAN host is held to an initial window: the engine gives that clamp
//! too ([`Engine::kernel_clamp`]), written as soon as the SYN-ACK has shown the window scales,
//! before its verdict. And a held flow whose turn comes gets a window update the daemon sends
//! itself: its right edge goes into the flow's map entry first ([`KernelSide::on_window_update`]),
//! where the program counts it as advertised, so no later ACK goes left of it.
//!
//! The map follows the engine's table: flows the engine forgot (closed, expired, evicted,
//! reopened) are removed from it within a second ([`KernelSide::sweep`]); flows running across
//! a restart, whose handshake this daemon never saw, are put into it from conntrack at start
//! ([`KernelSide::seed_from_conntrack`]: the connection mark holds their rule, conntrack's TCP
//! state their window scales), after which the engine recovers them from their reports as the
//! NFQUEUE datapath does from queued packets (`scale_lookups`). The attachments are checked
//! every two seconds and put back where they went ([`KernelSide::recheck_attachments`]), and
//! the kernel's counters are copied for `/metrics` every tick.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use slipstream_control::Instant;
use slipstream_ebpf::{
    monotonic_ns, Counters, DirKey, FlowCfg, Recheck, TcDatapath, FLOW_CLAMP, FLOW_HOLD, FLOW_SENT_EDGE,
};
use slipstream_engine::{Engine, FlowKey, KernelClamp, PacketCopy, PacketMeta, Side, WindowUpdate};
use slipstream_metrics::KernelCounters;
use slipstream_wire::{is_complete, parse_headers};
use tracing::{info, warn};

use crate::clock::MonotonicClock;
use crate::lan_side;

/// How long the kernel acts on one heartbeat; renewed every tick (250 ms).
pub(crate) const HEARTBEAT: StdDuration = StdDuration::from_secs(2);
/// A flow put into the map that the engine has not taken into its table this long after is
/// removed again (a conntrack entry's other NAT side, a flow that sent nothing since start).
const UNCLAIMED: StdDuration = StdDuration::from_secs(10);
/// `TCP_CONNTRACK_ESTABLISHED`: the only state whose flows are seeded.
const TCP_ESTABLISHED: u8 = 3;
/// Longest wait for one ctnetlink answer of the conntrack dump at start.
const CONNTRACK_TIMEOUT: StdDuration = StdDuration::from_millis(500);

pub(crate) struct KernelSide {
    tc: TcDatapath,
    /// CLOCK_MONOTONIC (the kernel's report clock) at the engine clock's origin, ns.
    origin_ns: u64,
    /// Flows whose receiver ACKed since the last sync, with their rule.
    touched: HashSet<(FlowKey, u16)>,
    /// The last entry put into `touched`: reports come in runs of one flow, so most need no
    /// hashing (cleared with `touched`).
    last_touched: Option<(FlowKey, u16)>,
    /// What the map holds for each flow's ACK direction, so only changes are written.
    written: HashMap<FlowKey, (DirKey, FlowCfg)>,
    /// Bound on `written` (it is cleared past it; the next syncs write again).
    max_written: usize,
    /// `Engine::household_rounds` at the last sync.
    rounds_seen: u64,
    /// `datapath.lan_interfaces`: interfaces that match and appear later are attached too.
    lan_interfaces: Vec<String>,
    /// The interfaces the programs are attached to, with their index then (an interface
    /// deleted and created again under its name has a new index and needs a new attachment).
    attached: HashMap<String, u32>,
    /// Interfaces whose attachment failed, with their index then (logged once per index).
    failed: HashMap<String, u32>,
    /// Every flow put into the map, with when: removed once the engine no longer has it.
    mapped: HashMap<FlowKey, StdInstant>,
    /// `datapath.mark_mask`: where the connection mark keeps the rule number.
    mark_mask: u32,
    /// The counters `/metrics` shows.
    counters: Arc<KernelCounters>,
    warned: bool,
}

impl KernelSide {
    pub(crate) fn new(
        tc: TcDatapath,
        max_flows: usize,
        lan_interfaces: Vec<String>,
        mark_mask: u32,
        counters: Arc<KernelCounters>,
    ) -> KernelSide {
        let attached = tc
            .attached()
            .iter()
            .map(|name| (name.clone(), lan_side::interface_index(name)))
            .collect();
        KernelSide {
            tc,
            origin_ns: monotonic_ns(),
            touched: HashSet::new(),
            last_touched: None,
            written: HashMap::new(),
            max_written: max_flows.saturating_mul(2).max(1024),
            rounds_seen: 0,
            lan_interfaces,
            attached,
            failed: HashMap::new(),
            mapped: HashMap::new(),
            mark_mask,
            counters,
            warned: false,
        }
    }

    /// Attaches the programs to the LAN interfaces that appeared since the last look (a bridge
    /// or VLAN created after the daemon started, a Wi-Fi interface brought up later). Polled
    /// from the tick rather than told by rtnetlink: a readdir of `/sys/class/net` a second is
    /// cheap, and a poll cannot miss a notification (netlink sockets drop them on overrun).
    /// A failed attachment is counted and tried again at the next look (logged once per
    /// interface index).
    pub(crate) fn attach_new_interfaces(&mut self) {
        for name in lan_side::devices(&self.lan_interfaces) {
            let index = lan_side::interface_index(&name);
            if index == 0 || self.attached.get(&name) == Some(&index) {
                continue;
            }
            match self.tc.attach(&name) {
                Ok(()) => {
                    info!("eBPF datapath: tc programs attached to {name}, which appeared after start");
                    self.failed.remove(&name);
                    self.attached.insert(name, index);
                }
                Err(e) => {
                    self.counters.attach_failed.fetch_add(1, Ordering::Relaxed);
                    if self.failed.insert(name.clone(), index) != Some(index) {
                        warn!("eBPF datapath: attaching to {name}, which appeared after start, failed: {e}; its flows are not seen (tried again every second)");
                    }
                }
            }
        }
    }

    /// Puts back attachments that went: sqm-scripts and other tc users delete and recreate
    /// qdiscs, and deleting a clsact qdisc deletes our netlink filters with it; a TCX link can
    /// be detached from outside. Counted in `/metrics` (`slipstream_ebpf_reattached_total`).
    pub(crate) fn recheck_attachments(&mut self) {
        let names: Vec<(String, u32)> = self.attached.iter().map(|(n, i)| (n.clone(), *i)).collect();
        for (name, index) in names {
            if lan_side::interface_index(&name) != index {
                continue; // gone or recreated: attach_new_interfaces takes it
            }
            match self.tc.recheck(&name) {
                Ok(Recheck::Present) => {
                    self.failed.remove(&name);
                }
                Ok(Recheck::Reattached) => {
                    self.counters.reattached.fetch_add(1, Ordering::Relaxed);
                    self.failed.remove(&name);
                    warn!("eBPF datapath: the tc programs on {name} were gone (its qdisc deleted?); attached again");
                }
                Err(e) => {
                    self.counters.attach_failed.fetch_add(1, Ordering::Relaxed);
                    if self.failed.insert(name.clone(), index) != Some(index) {
                        warn!("eBPF datapath: the tc programs on {name} are gone and could not be attached again: {e}; its flows pass unclamped (tried again every 2 s)");
                    }
                }
            }
        }
    }

    /// Copies the kernel's counters for `/metrics`.
    pub(crate) fn publish_counters(&self) {
        let k = self.tc.counters();
        let c = &self.counters;
        for (atomic, value) in [
            (&c.reported, k.events),
            (&c.ringbuf_full, k.ringbuf_full),
            (&c.rewritten, k.rewritten),
            (&c.no_daemon, k.no_daemon),
            (&c.edge_lost, k.edge_lost),
            (&c.stale_forgotten, k.stale_forgotten),
        ] {
            atomic.store(value, Ordering::Relaxed);
        }
    }

    /// Removes from the map the flows the engine no longer has (closed, expired, evicted,
    /// reopened by an unclassed connection), so that a later connection on the same ports is
    /// not clamped as the old one. Flows the engine never took in are removed after
    /// [`UNCLAIMED`].
    pub(crate) fn sweep(&mut self, engine: &Engine) {
        let now = StdInstant::now();
        let gone: Vec<FlowKey> = self
            .mapped
            .iter()
            .filter(|(key, since)| {
                !engine.contains(key) && now.duration_since(**since) >= self.claimed_grace(key)
            })
            .map(|(key, _)| *key)
            .collect();
        for key in gone {
            self.forget(&key);
        }
    }

    /// A flow the engine had in its table needs no grace once gone; one it never had gets
    /// [`UNCLAIMED`].
    fn claimed_grace(&self, key: &FlowKey) -> StdDuration {
        if self.written.contains_key(key) {
            StdDuration::ZERO
        } else {
            UNCLAIMED
        }
    }

    fn forget(&mut self, key: &FlowKey) {
        self.mapped.remove(key);
        self.written.remove(key);
        if let Some(dir) = DirKey::new(key.endpoint(Side::Low), key.endpoint(Side::High)) {
            self.tc.remove_flow(&dir);
            self.counters.removed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The engine learned a flow's window scales from conntrack (seen mid-stream): both
    /// directions' entries get their sender's shift, and edges the program recorded in the
    /// wrong units go (each is learned again from the next ACK, which passes unlowered until
    /// the engine has a target).
    pub(crate) fn on_scales_learned(&mut self, engine: &Engine, key: FlowKey) {
        let Some(scales) = engine.window_scales(&key) else {
            return;
        };
        for side in [Side::Low, Side::High] {
            let Some(dir) = DirKey::new(key.endpoint(side), key.endpoint(side.other())) else {
                return;
            };
            let Some(mut cfg) = self.tc.flow(&dir) else {
                continue;
            };
            if cfg.scale != scales[side.index()] {
                cfg.scale = scales[side.index()];
                let _ = self.tc.forget_edge(&dir);
                if let Err(e) = self.tc.set_flow(&dir, cfg) {
                    self.warn(&e);
                }
            }
        }
    }

    /// At stop: every entry of the map stops lowering (the host's own windows pass), before the
    /// programs go or their heartbeat lapses.
    pub(crate) fn release_all(&mut self) {
        let entries: Vec<(DirKey, FlowCfg)> = self.written.values().copied().collect();
        for (dir, cfg) in entries {
            if cfg.flags & FLOW_CLAMP != 0 {
                let _ = self.tc.set_flow(&dir, FlowCfg { flags: 0, ..cfg });
            }
        }
    }

    /// A reload: the LAN interface patterns (attached interfaces stay attached).
    pub(crate) fn reconfigure(&mut self, lan_interfaces: Vec<String>) {
        self.lan_interfaces = lan_interfaces;
    }

    /// Reads report times on `clock` (the packet thread's).
    pub(crate) fn align_clock(&mut self, clock: &MonotonicClock) {
        self.origin_ns = monotonic_ns().saturating_sub(clock.now().as_micros().saturating_mul(1000));
    }

    /// The ring buffer's descriptor, readable when reports wait.
    pub(crate) fn fd(&self) -> RawFd {
        self.tc.fd()
    }

    pub(crate) fn counters(&self) -> Counters {
        self.tc.counters()
    }

    /// Keeps the kernel acting for [`HEARTBEAT`] more.
    pub(crate) fn heartbeat(&mut self) {
        if let Err(e) = self.tc.heartbeat(HEARTBEAT) {
            self.warn(&e);
        }
    }

    /// A packet the engine just saw through NFQUEUE: a classed SYN (not a SYN-ACK) starts its
    /// flow in the kernel's map (afresh: a reused port forgets the old connection's edge); a
    /// SYN-ACK completes the handshake, after which the engine may want a household LAN host's
    /// early clamp in the kernel before its first ACK.
    pub(crate) fn on_handshake(&mut self, engine: &Engine, packet: &[u8], rule: Option<u16>) {
        let Ok(info) = parse_headers(packet) else { return };
        if !info.flags.syn || info.flags.rst {
            return;
        }
        let (key, _) = FlowKey::from_packet(info.src, info.src_port, info.dst, info.dst_port);
        let Some(rule) = rule.filter(|r| *r >= 1) else {
            // An unclassed SYN (queued for household control) on the ports of a mapped flow:
            // a new connection, which must not inherit the old one's clamp.
            if !info.flags.ack && self.mapped.contains_key(&key) {
                self.forget(&key);
            }
            return;
        };
        if info.flags.ack {
            if !self.mapped.contains_key(&key) {
                // Classed at its SYN-ACK (a rule on the answering side): its SYN passed
                // unclassed, so the flow starts here.
                self.start(&info, key, rule);
            }
            self.set_scales(engine, key, rule);
            self.sync_flow(engine, key, rule);
            return;
        }
        self.start(&info, key, rule);
    }

    /// A flow afresh in both directions (a reused port forgets the old connection's edge).
    fn start(&mut self, info: &slipstream_wire::TcpPacketInfo, key: FlowKey, rule: u16) {
        let src = std::net::SocketAddr::new(info.src, info.src_port);
        let dst = std::net::SocketAddr::new(info.dst, info.dst_port);
        let Some(dir) = DirKey::new(src, dst) else { return };
        self.written.remove(&key);
        self.mapped.insert(key, StdInstant::now());
        if let Err(e) = self.tc.start_flow(&dir, rule) {
            self.warn(&e);
        }
    }

    /// The SYN-ACK showed the window scales: each direction's entry gets its sender's, before
    /// anything is lowered. The program tracks the right edge of both directions from the first
    /// ACK, and with the start's shift of 0 it took an upload server's first window of 255 units
    /// (64 KiB at shift 8) for 255 bytes: once the upload's ACKs were lowered it moved their right
    /// edge left of what the host had seen, while the engine counted the real edge as still open
    /// (no window update when the flow's turn came; issue 11). Only for a flow not written yet
    /// (a repeated SYN-ACK leaves the engine's target in place); `sync_flow` then writes the
    /// clamped direction over its entry.
    fn set_scales(&mut self, engine: &Engine, key: FlowKey, rule: u16) {
        if self.written.contains_key(&key) {
            return;
        }
        let Some(scales) = engine.window_scales(&key) else {
            return;
        };
        for side in [Side::Low, Side::High] {
            let Some(dir) = DirKey::new(key.endpoint(side), key.endpoint(side.other())) else {
                return;
            };
            let cfg = FlowCfg {
                rule,
                scale: scales[side.index()],
                ..FlowCfg::default()
            };
            if let Err(e) = self.tc.set_flow(&dir, cfg) {
                self.warn(&e);
            }
        }
    }

    /// A window update the engine made (before the daemon sends it): its right edge goes into
    /// the map entry of its direction, with the flow's target as the engine has it now (the flow
    /// is no longer held), so that the program lowers no later ACK left of the edge, and leaves
    /// the update itself as it is should it pass the program.
    pub(crate) fn on_window_update(&mut self, engine: &Engine, update: &WindowUpdate) {
        let Ok(info) = parse_headers(&update.packet) else {
            return;
        };
        let (key, from) = FlowKey::from_packet(info.src, info.src_port, info.dst, info.dst_port);
        let Some(rule) = self.written.get(&key).map(|(_, cfg)| cfg.rule) else {
            // Never written: the program lowers nothing of this flow, so no edge can go left.
            return;
        };
        let src = std::net::SocketAddr::new(info.src, info.src_port);
        let dst = std::net::SocketAddr::new(info.dst, info.dst_port);
        let Some(dir) = DirKey::new(src, dst) else { return };
        let base = engine
            .kernel_clamp(&key)
            .and_then(|c| map_entry(&key, c, rule))
            .filter(|(d, _)| *d == dir)
            .map_or(
                FlowCfg {
                    rule,
                    // The edge is tracked in the units its sender writes.
                    scale: engine.window_scales(&key).map_or(0, |s| s[from.index()]),
                    ..FlowCfg::default()
                },
                |(_, cfg)| cfg,
            );
        let cfg = FlowCfg {
            flags: base.flags | FLOW_SENT_EDGE,
            sent_edge: update.right_edge,
            ..base
        };
        self.written.insert(key, (dir, cfg));
        if let Err(e) = self.tc.set_flow(&dir, cfg) {
            self.warn(&e);
        }
    }

    /// Feeds the next report to the engine; `false` when none waits. `now` is the batch's
    /// current time, read once per batch rather than per report (a clock read cost about 5% of
    /// the reader's time); it is read again only for a report younger than it, so a report's
    /// kernel time is never later than the `now` it is handled at (the engine would drop it).
    pub(crate) fn handle_one(
        &mut self,
        engine: &mut Engine,
        now: &mut Instant,
        clock: &MonotonicClock,
        scratch: &mut [u8],
    ) -> bool {
        let origin_ns = self.origin_ns;
        let touched = &mut self.touched;
        let last_touched = &mut self.last_touched;
        self.tc.next_event(|event| {
            let Some(event) = event else { return };
            let n = event.head.len().min(scratch.len());
            scratch[..n].copy_from_slice(&event.head[..n]);
            let head = &mut scratch[..n];
            let arrival = event
                .ktime_ns
                .checked_sub(origin_ns)
                .map(|ns| Instant::from_micros(ns / 1000));
            let meta = PacketMeta {
                rule: Some(event.rule).filter(|r| *r >= 1),
                copy: if is_complete(head) {
                    PacketCopy::Full
                } else {
                    PacketCopy::HeaderOnly
                },
                // The engine's rewrite of this copy is not used; the kernel patches checksums.
                checksum_ready: true,
                from_lan: Some(!event.egress),
                arrival,
            };
            if let Ok(info) = parse_headers(head) {
                if info.flags.ack {
                    let (key, _) = FlowKey::from_packet(info.src, info.src_port, info.dst, info.dst_port);
                    if *last_touched != Some((key, event.rule)) {
                        touched.insert((key, event.rule));
                        *last_touched = Some((key, event.rule));
                    }
                }
            }
            if arrival.is_some_and(|t| t > *now) {
                *now = clock.now();
            }
            engine.handle_packet(*now, head, meta);
        })
    }

    /// Writes the engine's targets for the flows touched since the last call, and for every
    /// flow in the map after a household round (only changes are written).
    pub(crate) fn sync(&mut self, engine: &Engine) {
        if self.written.len() > self.max_written {
            self.written.clear();
        }
        self.last_touched = None;
        if engine.household_rounds() != self.rounds_seen {
            self.rounds_seen = engine.household_rounds();
            let all = self.written.iter().map(|(key, (_, cfg))| (*key, cfg.rule));
            self.touched.extend(all);
        }
        let touched: Vec<(FlowKey, u16)> = self.touched.drain().collect();
        for (key, rule) in touched {
            self.sync_flow(engine, key, rule);
        }
    }

    /// Writes the engine's target for one flow if it changed.
    fn sync_flow(&mut self, engine: &Engine, key: FlowKey, rule: u16) {
        let mut wanted = engine.kernel_clamp(&key).and_then(|c| map_entry(&key, c, rule));
        let old = self.written.get(&key).copied();
        // The edge of the daemon's own window update stays in the entry until the program's
        // edge has caught up with it (the program folds it in at the next ACK).
        if let (Some((dir, cfg)), Some((old_dir, old))) = (wanted.as_mut(), old) {
            if *dir == old_dir && old.flags & FLOW_SENT_EDGE != 0 && !self.caught_up(dir, old.sent_edge) {
                cfg.flags |= FLOW_SENT_EDGE;
                cfg.sent_edge = old.sent_edge;
            }
        }
        let result = match (wanted, old) {
            (Some((dir, cfg)), Some((old_dir, old))) if dir == old_dir && cfg == old => Ok(()),
            (Some((dir, cfg)), Some((old_dir, old))) if dir != old_dir => {
                // The receiver changed (a household flow's LAN host was held to an initial
                // window, then turned out to be the sender): its ACKs pass as it wrote them.
                let released = FlowCfg { flags: 0, ..old };
                self.written.insert(key, (dir, cfg));
                self.tc
                    .set_flow(&old_dir, released)
                    .and(self.tc.set_flow(&dir, cfg))
            }
            (Some((dir, cfg)), _) => {
                self.written.insert(key, (dir, cfg));
                self.tc.set_flow(&dir, cfg)
            }
            // Nothing to lower any more (released rule): the ACKs pass as the host wrote them.
            (None, Some((dir, old))) if old.flags & FLOW_CLAMP != 0 => {
                let cfg = FlowCfg {
                    flags: old.flags & FLOW_SENT_EDGE,
                    ..old
                };
                self.written.insert(key, (dir, cfg));
                self.tc.set_flow(&dir, cfg)
            }
            (None, _) => Ok(()),
        };
        if self.written.contains_key(&key) {
            self.mapped.entry(key).or_insert_with(StdInstant::now);
        }
        if let Err(e) = result {
            self.warn(&e);
        }
    }

    /// Whether the program's own edge in `dir` reached `sent`.
    fn caught_up(&self, dir: &DirKey, sent: u32) -> bool {
        self.tc
            .edge(dir)
            .is_some_and(|edge| slipstream_control::time::wrapping_diff(edge, sent) >= 0)
    }

    fn warn(&mut self, e: &io::Error) {
        if !self.warned {
            self.warned = true;
            warn!("eBPF datapath: {e} (further failures are not logged)");
        }
    }
}

/// The map entry for a flow's ACK direction (receiver to sender).
fn map_entry(key: &FlowKey, clamp: KernelClamp, rule: u16) -> Option<(DirKey, FlowCfg)> {
    let dir = DirKey::new(key.endpoint(clamp.receiver), key.endpoint(clamp.receiver.other()))?;
    let flags = match clamp.target_bytes {
        None => 0,
        Some(_) if clamp.hold => FLOW_CLAMP | FLOW_HOLD,
        Some(_) => FLOW_CLAMP,
    };
    Some((
        dir,
        FlowCfg {
            target_bytes: clamp.target_bytes.unwrap_or(0),
            mss: clamp.mss,
            scale: clamp.scale,
            flags,
            rule,
            sent_edge: 0,
        },
    ))
}

mod seed;
#[cfg(test)]
mod tests;
