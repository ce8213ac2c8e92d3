//! The eBPF datapath: handshakes through NFQUEUE (the firewall queues only SYNs), every other
//! packet of a background flow reported by the tc program, and the engine's targets written to
//! the program's flow map (`kernel_side`), where the kernel lowers each ACK itself.

use std::os::fd::RawFd;

use slipstream_config::Hook;
use slipstream_engine::{Engine, WindowUpdate};
use tracing::info;

use super::nfqueue::NfqueueDatapath;
use super::{drain_batch, Datapath, Received};
use crate::clock::MonotonicClock;
use crate::kernel_side::KernelSide;

/// Pause after a batch of kernel reports before looking again. The ring buffer wakes its
/// reader only once it has read everything, so without a pause the daemon caught up after
/// every few reports and was woken for the next one; most of its CPU went to wakeups (lab
/// datapath scenario: 1.9 s per million packets with a wakeup per report, 0.5 s with a
/// millisecond between looks, where the sleep's context switches were still about 10% of the
/// reader's time). Reports carry their kernel time, so the pause does not bias measurements;
/// window targets reach the kernel at most this much later (the controllers act once per RTT),
/// and a handshake arriving through NFQUEUE ends the pause at once (the loop waits on the
/// queue's descriptor). The ring buffer holds 4 ms of reports up to about 6 million packets
/// per second.
const KERNEL_PAUSE: std::time::Duration = std::time::Duration::from_millis(4);
/// Kernel reports handled per batch: each costs about a microsecond, so a batch takes about as
/// long as an NFQUEUE one.
pub(crate) const KERNEL_BATCH: usize = 2048;

pub(crate) struct EbpfDatapath {
    /// The handshakes' queue (and the window updates' raw sockets).
    nfq: NfqueueDatapath,
    kernel: KernelSide,
    /// The last batch had reports: pause before waiting again.
    reports_came: bool,
    /// Ticks since start: new LAN interfaces are looked for every [`INTERFACE_TICKS`].
    ticks: u32,
    /// `limits.max_flows`: at most this many flows are taken from conntrack at start.
    max_flows: usize,
}

/// Ticks (250 ms) between two looks for LAN interfaces that appeared (and for flows the engine
/// forgot).
const INTERFACE_TICKS: u32 = 4;
/// Ticks between two checks that the attachments are still there: sqm-scripts' restart takes
/// a second or so, and a flow unclamped for two seconds is what a restart of the daemon costs.
const RECHECK_TICKS: u32 = 8;

impl EbpfDatapath {
    pub(crate) fn new(nfq: NfqueueDatapath, kernel: KernelSide, max_flows: usize) -> EbpfDatapath {
        EbpfDatapath {
            nfq,
            kernel,
            reports_came: false,
            ticks: 0,
            max_flows,
        }
    }
}

impl Datapath for EbpfDatapath {
    fn start(&mut self, clock: &MonotonicClock) {
        self.kernel.align_clock(clock);
        self.kernel.heartbeat();
        let seeded = self.kernel.seed_from_conntrack(self.max_flows);
        if seeded > 0 {
            info!("eBPF datapath: {seeded} classed flows from conntrack put into the kernel's map (running across a restart)");
        }
    }

    fn fds(&self) -> [Option<RawFd>; 2] {
        [Some(self.nfq.fd()), Some(self.kernel.fd())]
    }

    fn receive(&mut self, engine: &mut Engine, clock: &MonotonicClock, scratch: &mut [u8]) -> Received {
        let kernel = &mut self.kernel;
        // Before the SYN's verdict: the flow's next packets meet the kernel's map entry.
        let queued = self
            .nfq
            .receive_with(engine, clock, scratch, |engine, packet, rule| {
                kernel.on_handshake(engine, packet, rule)
            });
        // The batch's time is read once, not per report (a clock read cost about 5% of the
        // reader's time); `handle_one` reads it again only for a report younger than it.
        let mut now = clock.now();
        let (reports, _) = drain_batch(KERNEL_BATCH, || {
            Ok(kernel.handle_one(engine, &mut now, clock, scratch))
        });
        self.reports_came = reports.handled > 0;
        Received {
            handled: queued.handled + reports.handled,
            full: queued.full || reports.full,
            error: queued.error,
        }
    }

    fn apply(&mut self, engine: &Engine) {
        self.kernel.sync(engine);
    }

    fn send_window_update(&mut self, engine: &Engine, update: &WindowUpdate) {
        // Recorded first: the update may pass the program itself (to a LAN host's link).
        self.kernel.on_window_update(engine, update);
        self.nfq.send(&update.packet);
    }

    fn on_tick(&mut self, engine: &Engine) {
        self.nfq.on_tick(engine);
        self.kernel.heartbeat();
        self.kernel.publish_counters();
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks.is_multiple_of(INTERFACE_TICKS) {
            self.kernel.attach_new_interfaces();
            self.kernel.sweep(engine);
        }
        if self.ticks.is_multiple_of(RECHECK_TICKS) {
            self.kernel.recheck_attachments();
        }
    }

    fn on_scales_learned(&mut self, engine: &Engine, key: slipstream_engine::FlowKey) {
        self.kernel.on_scales_learned(engine, key);
    }

    fn release_all(&mut self) {
        self.nfq.release_all();
        self.kernel.release_all();
        self.kernel.publish_counters();
    }

    fn reconfigure(&mut self, hook: Hook, lan_interfaces: Vec<String>) {
        self.kernel.reconfigure(lan_interfaces.clone());
        self.nfq.reconfigure(hook, lan_interfaces);
    }

    fn next_release(&self) -> Option<slipstream_control::Instant> {
        self.nfq.next_release()
    }

    fn pause(&self) -> Option<std::time::Duration> {
        self.reports_came.then_some(KERNEL_PAUSE)
    }

    fn log_totals(&self) {
        let k = self.kernel.counters();
        info!(
            "eBPF datapath: {} packets reported, {} windows lowered in the kernel, {} not reported (ring buffer full), {} passed without a daemon heartbeat, {} ACKs left unlowered (right edge contended), {} stale entries dropped at a new SYN",
            k.events, k.rewritten, k.ringbuf_full, k.no_daemon, k.edge_lost, k.stale_forgotten
        );
    }
}
