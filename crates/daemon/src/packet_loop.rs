//! The packet thread: NFQUEUE messages in, engine verdicts out, timers and snapshots on the side.
//!
//! It owns the engine (single-threaded, no locks on the per-packet path) and publishes a snapshot
//! for the metrics endpoint twice a second. The control side reaches the engine only through
//! [`PacketCommand`]s on a channel, which the loop reads between batches of packets (at least
//! every 100 ms): a reload hands it its new rules, and `slipstream status` / `slipstream flows`
//! ask it for a snapshot of every flow, built only when asked.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;

use slipstream_control::Duration;
use slipstream_engine::{
    Copy, Engine, EngineConfig, EngineSnapshot, FlowEvent, FlowKey, PacketMeta, ReconfigureSummary, Side,
    Verdict,
};
use slipstream_firewall::rule_number_from_mark;
use slipstream_metrics::SharedSnapshot;
use slipstream_nfqueue::{Datapath, QueueKind};
use tracing::{info, warn};

use crate::clock::MonotonicClock;

const TICK: Duration = Duration::from_millis(250);
const PUBLISH: Duration = Duration::from_millis(500);
const POLL_TIMEOUT_MS: i32 = 100;
/// Consecutive datapath errors after which the loop gives up (traffic keeps flowing: the queues
/// fail open and the rules bypass when nobody listens).
const MAX_CONSECUTIVE_ERRORS: u32 = 1000;

pub struct PacketLoop {
    pub datapath: Datapath,
    pub engine: Engine,
    pub snapshot: SharedSnapshot,
    pub stop: Arc<AtomicBool>,
    pub mark_mask: u32,
    pub top_flows: usize,
    pub commands: Receiver<PacketCommand>,
    /// Datapath errors since start (receive or verdict failures), for `slipstream status`.
    pub errors: Arc<AtomicU64>,
}

/// What the control side asks of the packet thread. Replies go back on one-shot channels.
pub enum PacketCommand {
    /// A reload: new rules and limits for the engine, and the new number of per-flow series.
    Reconfigure {
        engine: EngineConfig,
        top_flows: usize,
        reply: tokio::sync::oneshot::Sender<ReconfigureSummary>,
    },
    /// A snapshot with the `top_flows` busiest flows (`usize::MAX`: all, 0: none).
    Snapshot {
        top_flows: usize,
        reply: tokio::sync::oneshot::Sender<PacketView>,
    },
}

/// A snapshot for the control socket.
pub struct PacketView {
    pub snapshot: EngineSnapshot,
    /// `keys[i]` is the key of `snapshot.flows[i]`.
    pub keys: Vec<FlowKey>,
    /// Rules of the current config; later snapshot rules are removed ones that still have flows.
    pub configured_rules: usize,
}

/// What the loop did, reported at exit.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoopTotals {
    pub packets: u64,
    pub rewritten: u64,
}

impl PacketLoop {
    pub fn run(mut self) -> io::Result<LoopTotals> {
        let clock = MonotonicClock::start();
        let mut scratch = vec![0u8; 65536];
        let mut last_tick = clock.now();
        let mut last_publish = clock.now();
        let mut errors = 0u32;
        while !self.stop.load(Ordering::Relaxed) {
            self.datapath.wait_readable(POLL_TIMEOUT_MS)?;
            loop {
                match self.handle_one(&clock, &mut scratch) {
                    Ok(true) => errors = 0,
                    Ok(false) => break,
                    Err(e) => {
                        errors += 1;
                        self.errors.fetch_add(1, Ordering::Relaxed);
                        warn!("datapath error: {e}");
                        if errors >= MAX_CONSECUTIVE_ERRORS {
                            return Err(e);
                        }
                        break;
                    }
                }
            }
            let now = clock.now();
            if now.saturating_since(last_tick) >= TICK {
                self.engine.on_tick(now);
                last_tick = now;
                self.log_events();
            }
            if self.serve_commands() || now.saturating_since(last_publish) >= PUBLISH {
                self.snapshot.publish(self.engine.snapshot(self.top_flows));
                last_publish = now;
            }
        }
        let counters = self.engine.counters();
        Ok(LoopTotals {
            packets: counters.packets,
            rewritten: counters.rewritten,
        })
    }

    /// Answers what the control side asked; true if the engine was reconfigured (so the metrics
    /// snapshot should be refreshed at once).
    fn serve_commands(&mut self) -> bool {
        let mut reconfigured = false;
        loop {
            match self.commands.try_recv() {
                Ok(PacketCommand::Reconfigure {
                    engine,
                    top_flows,
                    reply,
                }) => {
                    let summary = self.engine.reconfigure(engine);
                    self.top_flows = top_flows;
                    reconfigured = true;
                    let _ = reply.send(summary);
                }
                Ok(PacketCommand::Snapshot { top_flows, reply }) => {
                    let (snapshot, keys) = self.engine.snapshot_keyed(top_flows);
                    let _ = reply.send(PacketView {
                        snapshot,
                        keys,
                        configured_rules: self.engine.configured_rules(),
                    });
                }
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => return reconfigured,
            }
        }
    }

    /// Handles one queued packet; `Ok(false)` when none was waiting.
    fn handle_one(&mut self, clock: &MonotonicClock, scratch: &mut [u8]) -> io::Result<bool> {
        let Some(mut msg) = self.datapath.try_recv()? else {
            return Ok(false);
        };
        let now = clock.now();
        let copy = match self.datapath.kind_of(&msg) {
            QueueKind::Ack => Copy::Full,
            QueueKind::Data => Copy::HeaderOnly,
        };
        let meta = PacketMeta {
            rule: rule_number_from_mark(msg.get_nfmark(), self.mark_mask),
            copy,
            checksum_ready: msg.is_checksum_ready(),
        from_lan: None,
        arrival: None,
        };
        // The engine works on a copy: asking nfq for the payload mutably would send it back
        // even when unchanged.
        let payload = msg.get_payload();
        let len = payload.len().min(scratch.len());
        scratch[..len].copy_from_slice(&payload[..len]);
        let verdict = if len == payload.len() {
            self.engine.handle_packet(now, &mut scratch[..len], meta)
        } else {
            Verdict::Accept
        };
        if verdict == Verdict::AcceptModified {
            msg.get_payload_mut().copy_from_slice(&scratch[..len]);
        }
        msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
        self.datapath.verdict(msg)?;
        Ok(true)
    }

    fn log_events(&mut self) {
        for (event, _) in self.engine.drain_events() {
            match event {
                FlowEvent::NoTimestamps { key, rule } => info!(
                    "flow {} <-> {} (rule {rule}) negotiated no TCP timestamps: it stays unclamped",
                    key.endpoint(Side::Low),
                    key.endpoint(Side::High)
                ),
                FlowEvent::HandshakeMissed { key, rule } => info!(
                    "flow {} <-> {} (rule {rule}) was first seen after its handshake: window scale unknown, it stays unclamped",
                    key.endpoint(Side::Low),
                    key.endpoint(Side::High)
                ),
            }
        }
    }
}
