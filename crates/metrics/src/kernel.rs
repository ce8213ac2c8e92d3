//! The eBPF datapath's counters: what the tc programs counted in the kernel (reports, drops
//! for a full ring buffer, windows lowered, packets passed without a daemon) and what the
//! daemon counted of its attachments. The packet thread copies the kernel's per-CPU counters
//! into these atomics every tick; the collector reads them at scrape time. Not registered with
//! the NFQUEUE datapath.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use crate::families::counter;

/// The eBPF datapath's counters, shared (in an `Arc`) with the collector.
#[derive(Debug, Default)]
pub struct KernelCounters {
    /// Packets the programs reported to the daemon.
    pub reported: AtomicU64,
    /// Packets not reported because the ring buffer was full.
    pub ringbuf_full: AtomicU64,
    /// ACK windows the programs lowered.
    pub rewritten: AtomicU64,
    /// Packets of known flows passed untouched for want of a fresh heartbeat.
    pub no_daemon: AtomicU64,
    /// ACKs passed unlowered because the right edge kept moving under other CPUs.
    pub edge_lost: AtomicU64,
    /// Map entries of an earlier connection dropped at a new SYN on its ports.
    pub stale_forgotten: AtomicU64,
    /// Attachments found gone (a qdisc deleted under them) and attached again.
    pub reattached: AtomicU64,
    /// Attachments that failed (at start, for a new interface, or again after being gone).
    pub attach_failed: AtomicU64,
    /// Flows put into the map from conntrack at start (running across a restart).
    pub seeded: AtomicU64,
    /// Flows whose map entries were removed after the engine forgot them.
    pub removed: AtomicU64,
}

impl KernelCounters {
    fn get(v: &AtomicU64) -> u64 {
        v.load(Ordering::Relaxed)
    }
}

/// Adds the eBPF datapath's counters to a registry made by [`crate::registry`]:
/// `slipstream_ebpf_*_total`.
pub fn register_kernel_counters(registry: &mut Registry, counters: Arc<KernelCounters>) {
    registry.register_collector(Box::new(KernelCollector { counters }));
}

#[derive(Debug)]
struct KernelCollector {
    counters: Arc<KernelCounters>,
}

impl Collector for KernelCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
        let c = &self.counters;
        for (name, help, value) in [
            (
                "ebpf_reported",
                "Packets of background flows the tc programs reported to the daemon.",
                &c.reported,
            ),
            (
                "ebpf_ringbuf_dropped",
                "Reports the tc programs dropped because the ring buffer was full (the packets \
                 passed; the engine missed them).",
                &c.ringbuf_full,
            ),
            (
                "ebpf_rewritten",
                "ACK windows the tc programs lowered in the kernel.",
                &c.rewritten,
            ),
            (
                "ebpf_no_daemon",
                "Packets of known flows the tc programs passed untouched because the daemon's \
                 heartbeat was stale.",
                &c.no_daemon,
            ),
            (
                "ebpf_edge_lost",
                "ACKs passed unlowered because other CPUs kept moving the flow's right edge.",
                &c.edge_lost,
            ),
            (
                "ebpf_stale_entries_dropped",
                "Map entries of an earlier connection dropped at a LAN host's SYN on its ports.",
                &c.stale_forgotten,
            ),
            (
                "ebpf_reattached",
                "Times an attachment of the tc programs was found gone (e.g. its qdisc deleted) \
                 and attached again.",
                &c.reattached,
            ),
            (
                "ebpf_attach_failed",
                "Attachments of the tc programs that failed.",
                &c.attach_failed,
            ),
            (
                "ebpf_flows_seeded",
                "Flows put into the kernel's map from conntrack at start (running across a \
                 restart, their handshake missed).",
                &c.seeded,
            ),
            (
                "ebpf_flows_removed",
                "Flows whose kernel map entries were removed after the engine forgot them \
                 (closed, expired, evicted).",
                &c.removed,
            ),
        ] {
            counter(&mut enc, name, help, None, KernelCounters::get(value))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_counters_render() {
        let counters = Arc::new(KernelCounters::default());
        let mut registry = crate::registry(crate::SharedSnapshot::default());
        register_kernel_counters(&mut registry, counters.clone());
        counters.ringbuf_full.store(7, Ordering::Relaxed);
        counters.reattached.store(2, Ordering::Relaxed);
        let text = crate::render(&registry);
        for line in [
            "slipstream_ebpf_ringbuf_dropped_total 7",
            "slipstream_ebpf_reattached_total 2",
            "slipstream_ebpf_rewritten_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
