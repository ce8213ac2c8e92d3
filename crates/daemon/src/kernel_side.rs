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
//! Not carried over yet: the household controller's early clamp of a LAN host's window before
//! the flow's direction is known, and the right edge of the window updates the daemon sends
//! (household time-sharing) is not known to the kernel.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration as StdDuration;

use slipstream_control::Instant;
use slipstream_ebpf::{monotonic_ns, Counters, DirKey, FlowCfg, TcDatapath, FLOW_CLAMP, FLOW_HOLD};
use slipstream_engine::{Engine, FlowKey, KernelClamp, PacketCopy, PacketMeta};
use slipstream_wire::{is_complete, parse_headers};
use tracing::warn;

use crate::clock::MonotonicClock;

/// How long the kernel acts on one heartbeat; renewed every tick (250 ms).
pub(crate) const HEARTBEAT: StdDuration = StdDuration::from_secs(2);

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
    warned: bool,
}

impl KernelSide {
    pub(crate) fn new(tc: TcDatapath, max_flows: usize) -> KernelSide {
        KernelSide {
            tc,
            origin_ns: monotonic_ns(),
            touched: HashSet::new(),
            last_touched: None,
            written: HashMap::new(),
            max_written: max_flows.saturating_mul(2).max(1024),
            warned: false,
        }
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
    /// flow in the kernel's map (afresh: a reused port forgets the old connection's edge).
    pub(crate) fn on_handshake(&mut self, packet: &[u8], rule: Option<u16>) {
        let Some(rule) = rule.filter(|r| *r >= 1) else {
            return;
        };
        let Ok(info) = parse_headers(packet) else { return };
        if !info.flags.syn || info.flags.ack || info.flags.rst {
            return;
        }
        let src = std::net::SocketAddr::new(info.src, info.src_port);
        let dst = std::net::SocketAddr::new(info.dst, info.dst_port);
        let Some(dir) = DirKey::new(src, dst) else { return };
        let (key, _) = FlowKey::from_packet(info.src, info.src_port, info.dst, info.dst_port);
        self.written.remove(&key);
        if let Err(e) = self.tc.start_flow(&dir, rule) {
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

    /// Writes the engine's targets for the flows touched since the last call (only changes).
    pub(crate) fn sync(&mut self, engine: &Engine) {
        if self.written.len() > self.max_written {
            self.written.clear();
        }
        self.last_touched = None;
        let touched: Vec<(FlowKey, u16)> = self.touched.drain().collect();
        for (key, rule) in touched {
            let wanted = engine.kernel_clamp(&key).and_then(|c| map_entry(&key, c, rule));
            let result = match (wanted, self.written.get(&key)) {
                (Some((dir, cfg)), Some((old_dir, old))) if dir == *old_dir && cfg == *old => Ok(()),
                (Some((dir, cfg)), _) => {
                    self.written.insert(key, (dir, cfg));
                    self.tc.set_flow(&dir, cfg)
                }
                // Nothing to lower any more (released rule): the ACKs pass as the host wrote them.
                (None, Some((dir, old))) if old.flags != 0 => {
                    let (dir, cfg) = (*dir, FlowCfg { flags: 0, ..*old });
                    self.written.insert(key, (dir, cfg));
                    self.tc.set_flow(&dir, cfg)
                }
                (None, _) => Ok(()),
            };
            if let Err(e) = result {
                self.warn(&e);
            }
        }
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
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_entry_is_the_receivers_ack_direction() {
        let (key, side) = FlowKey::from_packet(
            "192.168.1.10".parse().unwrap(),
            40000,
            "93.184.216.34".parse().unwrap(),
            443,
        );
        let clamp = KernelClamp {
            receiver: side,
            scale: 7,
            mss: 1448,
            target_bytes: Some(30_000),
            hold: false,
        };
        let (dir, cfg) = map_entry(&key, clamp, 2).unwrap();
        let expected = DirKey::new(
            "192.168.1.10:40000".parse().unwrap(),
            "93.184.216.34:443".parse().unwrap(),
        );
        assert_eq!(Some(dir), expected);
        assert_eq!(
            (cfg.target_bytes, cfg.mss, cfg.scale, cfg.flags, cfg.rule),
            (30_000, 1448, 7, FLOW_CLAMP, 2)
        );
        let held = map_entry(&key, KernelClamp { hold: true, ..clamp }, 2).unwrap().1;
        assert_eq!(held.flags, FLOW_CLAMP | FLOW_HOLD);
        let none = map_entry(
            &key,
            KernelClamp {
                target_bytes: None,
                ..clamp
            },
            2,
        )
        .unwrap()
        .1;
        assert_eq!((none.flags, none.target_bytes), (0, 0));
    }
}
