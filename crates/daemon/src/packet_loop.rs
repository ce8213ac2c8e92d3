//! The packet thread: NFQUEUE messages in, engine verdicts out, timers and snapshots on the side.
//!
//! It owns the engine (single-threaded, no locks on the per-packet path) and publishes a snapshot
//! for the metrics endpoint twice a second. The control side reaches the engine only through
//! [`PacketCommand`]s on a channel, which the loop reads between batches of packets (at least
//! every 100 ms): a reload hands it its new rules, and `slipstream status` / `slipstream flows`
//! ask it for a snapshot of every flow, built only when asked.
//!
//! Each iteration handles at most [`BATCH`] packets, then runs the timers, takes the engine's
//! events (flows seen mid-stream go to the conntrack lookups, `scale_lookups`), sends the window
//! updates the engine asked for (`window_updates`) and answers commands: under a steady stream
//! the queue never empties, and draining it first would starve all three.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::SystemTime;

use slipstream_config::Hook;
use slipstream_control::Duration;
use slipstream_engine::{
    Engine, EngineConfig, EngineSnapshot, FlowEvent, FlowKey, PacketCopy, PacketMeta, ReconfigureSummary,
    Side, Verdict,
};
use slipstream_firewall::rule_number_from_mark;
use slipstream_metrics::SharedSnapshot;
use slipstream_nfqueue::{Datapath, QueueKind};
use tracing::{info, warn};

use crate::clock::MonotonicClock;
use crate::kernel_side::KernelSide;
use crate::kernel_time;
use crate::lan_hosts::source_address;
use crate::lan_side::LanSide;
use crate::scale_lookups::{Outcome, ScaleLookups};
use crate::window_updates::WindowUpdateSender;

const TICK: Duration = Duration::from_millis(250);
const PUBLISH: Duration = Duration::from_millis(500);
const POLL_TIMEOUT_MS: i32 = 100;
/// Pause after a batch of kernel reports before looking again (eBPF datapath). The ring buffer
/// wakes its reader only once it has read everything, so without a pause the daemon caught up
/// after every few reports and was woken for the next one; most of its CPU went to wakeups
/// (lab datapath scenario: 1.9 s per million packets with a wakeup per report, 0.5 s with a
/// millisecond between looks, where the sleep's context switches were still about 10% of the
/// reader's time). Reports carry their kernel time, so the pause does not bias measurements;
/// window targets reach the kernel at most this much later (the controllers act once per
/// RTT), and a handshake arriving through NFQUEUE ends the pause at once. The ring buffer
/// holds 4 ms of reports up to about 6 million packets per second.
const KERNEL_PAUSE_MS: i32 = 4;
/// Consecutive datapath errors after which the loop gives up (traffic keeps flowing: the queues
/// fail open and the rules bypass when nobody listens).
const MAX_CONSECUTIVE_ERRORS: u32 = 1000;
/// Packets handled per iteration before timers, window updates and commands get their turn.
/// At 7-9 us per packet, verdict included (measured on the 2-core test VM,
/// `crates/nfqueue/tests/kernel_timestamps.rs`), a batch takes about 2 ms: that is how late a
/// tick or a window update can be.
pub(crate) const BATCH: usize = 256;
/// Kernel reports handled per iteration (eBPF datapath): each costs about a microsecond, so a
/// batch takes about as long as an NFQUEUE one.
pub(crate) const KERNEL_BATCH: usize = 2048;

pub(crate) struct PacketLoop {
    pub datapath: Datapath,
    pub engine: Engine,
    pub snapshot: SharedSnapshot,
    pub stop: Arc<AtomicBool>,
    pub mark_mask: u32,
    pub top_flows: usize,
    pub commands: Receiver<PacketCommand>,
    /// Datapath errors since start (receive or verdict failures), for `slipstream status`.
    pub errors: Arc<AtomicU64>,
    /// Raw sockets for the engine's window updates (and their counters).
    pub window_updates: WindowUpdateSender,
    /// Tells packets from the LAN by their input interface.
    pub lan_side: LanSide,
    /// Window scales of flows seen without their handshake, from conntrack (`None`: no lookups).
    pub scale_lookups: Option<ScaleLookups>,
    /// The eBPF datapath (`None`: every packet comes through NFQUEUE).
    pub kernel: Option<KernelSide>,
}

/// What the control side asks of the packet thread. Replies go back on one-shot channels.
pub(crate) enum PacketCommand {
    /// A reload: new rules and limits for the engine, the new number of per-flow series, and
    /// the hook and LAN interfaces the LAN side is told by.
    Reconfigure {
        engine: EngineConfig,
        top_flows: usize,
        hook: Hook,
        lan_interfaces: Vec<String>,
        reply: tokio::sync::oneshot::Sender<ReconfigureSummary>,
    },
    /// A snapshot with the `top_flows` busiest flows (`usize::MAX`: all, 0: none).
    Snapshot {
        top_flows: usize,
        reply: tokio::sync::oneshot::Sender<PacketView>,
    },
}

/// A snapshot for the control socket.
pub(crate) struct PacketView {
    pub snapshot: EngineSnapshot,
    /// `keys[i]` is the key of `snapshot.flows[i]`.
    pub keys: Vec<FlowKey>,
    /// Rules of the current config; later snapshot rules are removed ones that still have flows.
    pub configured_rules: usize,
}

/// What the loop did, reported at exit.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LoopTotals {
    pub packets: u64,
    pub rewritten: u64,
    pub window_updates_sent: u64,
    /// Of those sent, the ones sent as frames on a LAN host's link.
    pub window_updates_to_lan_link: u64,
    pub window_updates_failed: u64,
}

/// What one batch of packets did.
#[derive(Debug, PartialEq, Eq)]
struct Batch {
    handled: usize,
    /// The batch stopped at its limit: more packets may be waiting, so do not wait for them.
    full: bool,
}

/// Handles packets with `next` until it reports the queue empty (`Ok(false)`), fails, or
/// `limit` packets were handled.
fn drain_batch(limit: usize, mut next: impl FnMut() -> io::Result<bool>) -> (Batch, Option<io::Error>) {
    let mut handled = 0;
    while handled < limit {
        match next() {
            Ok(true) => handled += 1,
            Ok(false) => return (Batch { handled, full: false }, None),
            Err(e) => return (Batch { handled, full: false }, Some(e)),
        }
    }
    (Batch { handled, full: true }, None)
}

impl PacketLoop {
    pub(crate) fn run(mut self) -> io::Result<LoopTotals> {
        let clock = MonotonicClock::start();
        let mut scratch = vec![0u8; 65536];
        let mut last_tick = clock.now();
        let mut last_publish = clock.now();
        let mut errors = 0u32;
        let mut more_waiting = false;
        let mut reports_came = false;
        if let Some(kernel) = self.kernel.as_mut() {
            kernel.align_clock(&clock);
            kernel.heartbeat();
        }
        while !self.stop.load(Ordering::Relaxed) {
            if !more_waiting {
                if reports_came {
                    // Handshakes still end the pause at once: they wait in NFQUEUE for it.
                    self.datapath.wait_readable(KERNEL_PAUSE_MS)?;
                }
                self.wait_readable()?;
            }
            let (batch, mut error) = drain_batch(BATCH, || self.handle_one(&clock, &mut scratch));
            if let Err(e) = self.datapath.flush_accepts() {
                error.get_or_insert(e);
            }
            more_waiting = batch.full;
            if let Some(kernel) = self.kernel.as_mut() {
                let engine = &mut self.engine;
                let mut now = clock.now();
                let (reports, _) = drain_batch(KERNEL_BATCH, || {
                    Ok(kernel.handle_one(engine, &mut now, &clock, &mut scratch))
                });
                kernel.sync(engine);
                more_waiting |= reports.full;
                reports_came = reports.handled > 0;
            }
            if batch.handled > 0 {
                errors = 0;
            }
            if let Some(e) = error {
                errors += 1;
                self.errors.fetch_add(1, Ordering::Relaxed);
                warn!("datapath error: {e}");
                if errors >= MAX_CONSECUTIVE_ERRORS {
                    return Err(e);
                }
            }
            let now = clock.now();
            if now.saturating_since(last_tick) >= TICK {
                self.engine.on_tick(now);
                last_tick = now;
                if let Some(kernel) = self.kernel.as_mut() {
                    kernel.heartbeat();
                }
                self.lan_side.expire(std::time::Instant::now());
            }
            // Every batch, not only at ticks: after a restart under load each running flow
            // reports its missed handshake at once, and the engine keeps a bounded queue.
            self.log_events();
            self.send_window_updates();
            self.learn_window_scales();
            if self.serve_commands() || now.saturating_since(last_publish) >= PUBLISH {
                self.snapshot.publish(self.engine.snapshot(self.top_flows));
                last_publish = now;
            }
        }
        if let Some(kernel) = &self.kernel {
            let k = kernel.counters();
            info!(
                "eBPF datapath: {} packets reported, {} windows lowered in the kernel, {} not reported (ring buffer full), {} passed without a daemon heartbeat",
                k.events, k.rewritten, k.ringbuf_full, k.no_daemon
            );
        }
        let counters = self.engine.counters();
        let updates = self.window_updates.counters();
        Ok(LoopTotals {
            packets: counters.packets,
            rewritten: counters.rewritten,
            window_updates_sent: updates.sent(),
            window_updates_to_lan_link: updates.sent_to_lan_link(),
            window_updates_failed: updates.failed(),
        })
    }

    /// Waits until NFQUEUE or the kernel's ring buffer has something, or the poll timeout.
    #[allow(
        unsafe_code,
        reason = "poll(2) on two descriptors has no safe wrapper in libc"
    )]
    fn wait_readable(&self) -> io::Result<()> {
        let Some(kernel) = &self.kernel else {
            return self.datapath.wait_readable(POLL_TIMEOUT_MS).map(|_| ());
        };
        let mut fds = [self.datapath.fd(), kernel.fd()].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: two valid pollfds for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, POLL_TIMEOUT_MS) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
        Ok(())
    }

    /// Sends what the engine asked for since the last call; failures are counted (and the
    /// first one logged) by the sender.
    fn send_window_updates(&mut self) {
        for update in self.engine.drain_window_updates() {
            let _ = self.window_updates.send(&update.packet);
        }
    }

    /// Hands the scales conntrack found to the engine (never waits for the lookup thread).
    fn learn_window_scales(&mut self) {
        let Some(lookups) = self.scale_lookups.as_mut() else {
            return;
        };
        while let Some((key, outcome)) = lookups.answer() {
            let (a, b) = (key.endpoint(Side::Low), key.endpoint(Side::High));
            match outcome {
                Outcome::Scales { low, high } => {
                    if self.engine.learn_window_scales(key, low, high) {
                        info!("flow {a} <-> {b}: window scales {low} / {high} from conntrack; controlled from its next packet");
                    }
                }
                Outcome::NoScale => info!(
                    "flow {a} <-> {b}: conntrack picked it up mid-stream too and knows no window scale; it stays unclamped"
                ),
                Outcome::NotFound | Outcome::Failed => info!(
                    "flow {a} <-> {b}: no conntrack entry with its window scales; it stays unclamped"
                ),
            }
        }
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
                    hook,
                    lan_interfaces,
                    reply,
                }) => {
                    let summary = self.engine.reconfigure(engine);
                    self.top_flows = top_flows;
                    self.lan_side.reconfigure(hook, lan_interfaces);
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
        let Some((mut msg, stamp)) = self.datapath.try_recv_timed()? else {
            return Ok(false);
        };
        let now = clock.now();
        let arrival = stamp.and_then(|stamp| kernel_time::arrival(stamp, SystemTime::now(), now));
        let copy = copy_of(self.datapath.kind_of(&msg), msg.get_payload());
        let meta = PacketMeta {
            rule: rule_number_from_mark(msg.get_nfmark(), self.mark_mask),
            copy,
            checksum_ready: msg.is_checksum_ready(),
            from_lan: self.lan_side.classify(msg.get_indev()),
            arrival,
        };
        if meta.from_lan == Some(true) {
            if let (Some(src), Some(hw)) = (source_address(msg.get_payload()), msg.get_hw_addr()) {
                self.window_updates.learn_lan_host(src, msg.get_indev(), hw);
            }
        }
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
        // Before the verdict: the flow's next packets meet the kernel's map entry.
        if let Some(kernel) = self.kernel.as_mut() {
            kernel.on_handshake(msg.get_payload(), meta.rule);
        }
        if verdict == Verdict::AcceptModified {
            msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
            self.datapath.verdict(msg)?;
        } else {
            // Unchanged packets are accepted together after the batch (one message per queue).
            self.datapath.accept_later(msg)?;
        }
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
                FlowEvent::HandshakeMissed { key, rule } => {
                    let asked = self.scale_lookups.as_mut().is_some_and(|l| l.request(key));
                    info!(
                        "flow {} <-> {} (rule {rule}) was first seen after its handshake: window scale unknown, {}",
                        key.endpoint(Side::Low),
                        key.endpoint(Side::High),
                        if asked {
                            "asking conntrack"
                        } else {
                            "it stays unclamped"
                        }
                    )
                }
            }
        }
    }
}

/// How much of a queued packet the daemon holds: the ACK queue copies whole packets; the data
/// queue copies `data_copy_bytes`, which is the whole packet when it is that short or the range
/// is raised. A whole packet may be handed back rewritten: in a flow with data both ways
/// (BitTorrent) the receiver's ACKs carry data and go to the data queue.
fn copy_of(kind: QueueKind, payload: &[u8]) -> PacketCopy {
    match kind {
        QueueKind::Ack => PacketCopy::Full,
        QueueKind::Data if slipstream_wire::is_complete(payload) => PacketCopy::Full,
        QueueKind::Data => PacketCopy::HeaderOnly,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1500-byte IPv4 packet as the data queue hands it over with a copy range of `copy`.
    fn data_packet(copy: usize) -> Vec<u8> {
        let mut packet = vec![0u8; 1500];
        packet[0] = 0x45;
        packet[2..4].copy_from_slice(&1500u16.to_be_bytes());
        packet.truncate(copy);
        packet
    }

    /// A data-carrying ACK copied whole from the data queue can be rewritten; a header-only copy
    /// cannot (every data-queue packet was header-only before, so a two-way flow's receiver
    /// ACKs that carry data went out with the host's whole window).
    #[test]
    fn whole_packets_from_the_data_queue_may_be_rewritten() {
        assert_eq!(copy_of(QueueKind::Data, &data_packet(1500)), PacketCopy::Full);
        assert_eq!(
            copy_of(QueueKind::Data, &data_packet(128)),
            PacketCopy::HeaderOnly
        );
        assert_eq!(copy_of(QueueKind::Ack, &data_packet(80)), PacketCopy::Full);
    }

    /// A queue holding `n` packets: `next` handles one per call.
    fn queue(n: usize) -> impl FnMut() -> io::Result<bool> {
        let mut left = n;
        move || {
            if left == 0 {
                return Ok(false);
            }
            left -= 1;
            Ok(true)
        }
    }

    #[test]
    fn a_short_queue_is_drained_in_one_batch() {
        let (batch, error) = drain_batch(BATCH, queue(10));
        assert_eq!(
            batch,
            Batch {
                handled: 10,
                full: false
            }
        );
        assert!(error.is_none());
    }

    #[test]
    fn a_long_queue_is_handled_in_bounded_batches() {
        let mut next = queue(BATCH * 2 + 5);
        let mut batches = Vec::new();
        loop {
            let (batch, _) = drain_batch(BATCH, &mut next);
            let full = batch.full;
            batches.push(batch.handled);
            if !full {
                break;
            }
        }
        assert_eq!(batches, [BATCH, BATCH, 5]);
    }

    #[test]
    fn an_error_ends_the_batch() {
        let mut calls = 0;
        let (batch, error) = drain_batch(BATCH, || {
            calls += 1;
            if calls == 4 {
                Err(io::Error::other("verdict failed"))
            } else {
                Ok(true)
            }
        });
        assert_eq!(
            batch,
            Batch {
                handled: 3,
                full: false
            }
        );
        assert_eq!(error.unwrap().to_string(), "verdict failed");
    }

    #[test]
    fn a_full_batch_stops_exactly_at_its_limit() {
        let mut calls = 0;
        let (batch, _) = drain_batch(3, || {
            calls += 1;
            Ok(true)
        });
        assert_eq!(
            batch,
            Batch {
                handled: 3,
                full: true
            }
        );
        assert_eq!(calls, 3, "no packet is taken from the queue beyond the limit");
    }
}
