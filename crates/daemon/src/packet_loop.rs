//! The packet thread: packets in through a [`Datapath`], the engine's decisions out through it,
//! timers and snapshots on the side. One loop for both datapaths (NFQUEUE and eBPF).
//!
//! It owns the engine (single-threaded, no locks on the per-packet path) and publishes a snapshot
//! for the metrics endpoint twice a second. The control side reaches the engine only through
//! [`PacketCommand`]s on a channel, which the loop reads between batches of packets (at least
//! every 100 ms): a reload hands it its new rules, and `slipstream status` / `slipstream flows`
//! ask it for a snapshot of every flow, built only when asked.
//!
//! Each iteration handles at most a batch of packets (`Datapath::receive`), then runs the
//! household rounds that fell due meanwhile (so no verdict waits for one), then the timers, takes the engine's
//! events (flows seen mid-stream go to the conntrack lookups, `scale_lookups`), sends the window
//! updates the engine asked for (`window_updates`) and answers commands: under a steady stream
//! the queue never empties, and draining it first would starve all three.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;

use slipstream_config::{Hook, ProbeTarget};
use slipstream_control::Duration;
use slipstream_engine::{Engine, EngineConfig, EngineSnapshot, FlowEvent, FlowKey, ReconfigureSummary, Side};
use slipstream_metrics::SharedSnapshot;
use tracing::{info, warn};

use crate::clock::MonotonicClock;
use crate::datapath::Datapath;
use crate::prober::Prober;
use crate::scale_lookups::{Outcome, ScaleLookups};
use crate::steady_flows::SteadyFlowWatch;
use crate::wan_counters::WanCounters;
use crate::window_updates::WindowUpdateCounters;

const TICK: Duration = Duration::from_millis(250);
const PUBLISH: Duration = Duration::from_millis(500);
const POLL_TIMEOUT: Duration = Duration::from_millis(100);
/// Consecutive datapath errors after which the loop gives up (traffic keeps flowing: the queues
/// fail open and the rules bypass when nobody listens).
const MAX_CONSECUTIVE_ERRORS: u32 = 1000;
pub(crate) struct PacketLoop<D> {
    /// How packets reach the engine (NFQUEUE, or eBPF with NFQUEUE for handshakes).
    pub datapath: D,
    pub engine: Engine,
    pub snapshot: SharedSnapshot,
    pub stop: Arc<AtomicBool>,
    pub top_flows: usize,
    pub commands: Receiver<PacketCommand>,
    /// Datapath errors since start (receive or verdict failures), for `slipstream status`.
    pub errors: Arc<AtomicU64>,
    /// The window updates sent and failed (the datapath sends them).
    pub window_updates: Arc<WindowUpdateCounters>,
    /// Window scales of flows seen without their handshake, from conntrack (`None`: no lookups).
    pub scale_lookups: Option<ScaleLookups>,
    /// The access link's counters (best effort's traffic is what they count beyond the
    /// background's packets).
    pub wan_counters: WanCounters,
    /// Calls and games under browsing, from conntrack (None: not told apart).
    pub steady_flows: Option<SteadyFlowWatch>,
    /// The link-delay probes the engine asks for (`household.probe`).
    pub prober: Prober,
}

/// What the control side asks of the packet thread. Replies go back on one-shot channels.
pub(crate) enum PacketCommand {
    /// A reload: new rules and limits for the engine, the new number of per-flow series, and
    /// the hook and LAN interfaces the LAN side is told by.
    Reconfigure {
        /// Boxed: the command stays small (a reload is rare, a snapshot request is not).
        engine: Box<EngineConfig>,
        top_flows: usize,
        hook: Hook,
        lan_interfaces: Vec<String>,
        /// `household.probe`.
        probe: ProbeTarget,
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

impl<D: Datapath> PacketLoop<D> {
    /// The same loop over another datapath (the eBPF one wraps the NFQUEUE one).
    pub(crate) fn map_datapath<E>(self, f: impl FnOnce(D) -> E) -> PacketLoop<E> {
        PacketLoop {
            datapath: f(self.datapath),
            engine: self.engine,
            snapshot: self.snapshot,
            stop: self.stop,
            top_flows: self.top_flows,
            commands: self.commands,
            errors: self.errors,
            window_updates: self.window_updates,
            scale_lookups: self.scale_lookups,
            wan_counters: self.wan_counters,
            steady_flows: self.steady_flows,
            prober: self.prober,
        }
    }

    pub(crate) fn run(mut self) -> io::Result<LoopTotals> {
        let clock = MonotonicClock::start();
        let mut scratch = vec![0u8; 65536];
        let mut last_tick = clock.now();
        let mut last_publish = clock.now();
        let mut errors = 0u32;
        let mut more_waiting = false;
        // Household rounds run between batches (below), not before the packet that finds one
        // due: no packet's verdict waits for a round.
        self.engine.defer_rounds(true);
        self.datapath.start(&clock);
        while !self.stop.load(Ordering::Relaxed) {
            if !more_waiting {
                if let Some(pause) = self.datapath.pause() {
                    // Handshakes still end the pause at once: they wait in NFQUEUE for it.
                    wait_readable([self.datapath.fds()[0], None], pause)?;
                }
                // Woken in time for the next probe, if the engine wants them, and for the next
                // held packet.
                let now = clock.now();
                let probe_due = self.prober.until_due(self.engine.probe_interval(), now);
                let release_due = self.datapath.next_release().map(|t| t.saturating_since(now));
                let timeout = [probe_due, release_due]
                    .into_iter()
                    .flatten()
                    .fold(POLL_TIMEOUT, Duration::min);
                wait_readable(self.datapath.fds(), timeout)?;
            }
            if let Some((download, upload)) = self.wan_counters.read(std::time::Instant::now()) {
                self.engine.on_link_counters(download, upload);
            }
            if let Some(watch) = &self.steady_flows {
                self.engine.on_steady_flows(watch.steady());
            }
            let received = self.datapath.receive(&mut self.engine, &clock, &mut scratch);
            self.engine.run_due_rounds(clock.now());
            self.datapath.apply(&self.engine);
            let engine = &mut self.engine;
            self.prober.turn(
                engine.probe_interval(),
                &clock,
                |sent, received, halves| match halves {
                    Some(halves) => engine.on_probe_one_way(sent, received, halves),
                    None => engine.on_probe_sample(sent, received),
                },
            );
            more_waiting = received.full;
            if received.handled > 0 {
                errors = 0;
            }
            if let Some(e) = received.error {
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
                self.datapath.on_tick(&self.engine);
            }
            // Every batch, not only at ticks: after a restart under load each running flow
            // reports its missed handshake at once, and the engine keeps a bounded queue.
            self.log_events();
            self.send_window_updates();
            self.learn_window_scales();
            if self.serve_commands() || now.saturating_since(last_publish) >= PUBLISH {
                let snapshot = self.engine.snapshot(self.top_flows);
                if let Some(watch) = &self.steady_flows {
                    // Only household rounds ask which best effort is steady.
                    watch.set_wanted(snapshot.links.iter().any(|l| l.flows > 0));
                }
                self.snapshot.publish(snapshot);
                last_publish = now;
            }
        }
        self.release_held_flows(&clock);
        self.datapath.log_totals();
        let counters = self.engine.counters();
        let updates = &self.window_updates;
        Ok(LoopTotals {
            packets: counters.packets,
            rewritten: counters.rewritten,
            window_updates_sent: updates.sent(),
            window_updates_to_lan_link: updates.sent_to_lan_link(),
            window_updates_failed: updates.failed(),
        })
    }

    /// Sends what the engine asked for since the last call; failures are counted (and the
    /// first one logged) by the sender.
    fn send_window_updates(&mut self) {
        let updates: Vec<_> = self.engine.drain_window_updates().collect();
        for update in &updates {
            self.datapath.send_window_update(&self.engine, update);
        }
    }

    /// At stop: flows the household held get a last window update opening them to their
    /// receiver's own window (a held sender would otherwise wait for its persist timer once the
    /// daemon is gone), then the datapath lowers nothing more.
    fn release_held_flows(&mut self, clock: &MonotonicClock) {
        let updates = self.engine.final_window_updates(clock.now());
        for update in &updates {
            self.datapath.send_window_update(&self.engine, update);
        }
        self.datapath.release_all();
        if !updates.is_empty() {
            info!(
                "stopping: {} held flows released with a last window update",
                updates.len()
            );
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
                        self.datapath.on_scales_learned(&self.engine, key);
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
                    probe,
                    reply,
                }) => {
                    let summary = self.engine.reconfigure(*engine);
                    self.top_flows = top_flows;
                    self.datapath.reconfigure(hook, lan_interfaces);
                    self.prober.reconfigure(probe);
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

/// Waits until a datapath descriptor is readable, or the poll timeout.
#[allow(
    unsafe_code,
    reason = "poll(2) on the datapath's descriptors has no safe wrapper in libc"
)]
fn wait_readable(fds: [Option<std::os::fd::RawFd>; 2], timeout: Duration) -> io::Result<()> {
    // ppoll(2), not poll(2): a held packet is due to the microsecond, and poll's milliseconds
    // would either wake it up to a millisecond late or spin until it is due.
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // poll(2) skips entries with a negative descriptor.
    let mut polled = fds.map(|fd| libc::pollfd {
        fd: fd.unwrap_or(-1),
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: two valid pollfds for the duration of the call.
    let n = unsafe { libc::ppoll(polled.as_mut_ptr(), 2, &timeout, std::ptr::null()) };
    if n < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(())
}
