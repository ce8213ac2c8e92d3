//! Prometheus exposition of Slipstream's engine statistics.
//!
//! The packet thread owns the [`Engine`](slipstream_engine::Engine) and must never wait on an HTTP
//! client, so it does not touch metric objects per packet. Instead it takes an [`EngineSnapshot`]
//! about twice a second and [publishes](SharedSnapshot::publish) it; the HTTP handler calls
//! [`render`], which asks the [`SlipstreamCollector`] to turn the latest snapshot into metrics at
//! scrape time (the `Collector` pattern of linkerd2-proxy, rather than registered `Family`s).
//!
//! Why a collector and not `Family<Labels, Gauge>`: a family keeps every label set it has ever seen,
//! so per-flow series would pile up for as long as the daemon runs (one set per ended flow, each
//! with a random client port). Rendering from the snapshot means per-flow series exist exactly for
//! the flows in the snapshot, which the engine bounds to the top N by goodput, and vanish once a
//! flow ends or drops out of the top N. Engine-wide and per-rule figures are already monotonic
//! counters in the engine, so re-emitting them from the snapshot loses nothing.
//!
//! Publishing swaps an `Arc` under the mutex, and a scrape only clones that `Arc` before encoding,
//! so neither side holds the lock for longer than a pointer copy.
//!
//! Names follow Prometheus conventions: base units (bytes, seconds), counters end in `_total`
//! (prometheus-client appends the suffix to counter samples), units are declared with `# UNIT`.
//! Every metric has the prefix `slipstream_`. Optional per-flow values (`None` in the snapshot)
//! are omitted rather than exported as 0, and a metric family with no series is left out entirely.
//! Labelled counters with a closed set of label values (pass reasons, parse errors, drop reasons)
//! export every value, zeros included, so a query finds them before the first event.
//!
//! What the engine cannot see (NFQUEUE drops, all traffic on the LAN interfaces) comes from the
//! kernel at scrape time through [`HostStats`] providers; see [`register_host_stats`].

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;
use slipstream_engine::{EngineSnapshot, LinkSnapshot};

mod daemon;
mod encode_engine;
mod encode_host;
mod encode_links;
mod families;
mod host;
mod kernel;
mod probes;

use encode_engine::encode_snapshot;
use encode_host::HostCollector;

pub use daemon::{register_daemon_counters, DaemonCounters};
pub use kernel::{register_kernel_counters, KernelCounters};
pub use probes::{register_probe_counters, ProbeCounters};

pub use host::{
    interface_matches, parse_net_dev, parse_netlink_drops, parse_nfnetlink_queue, read_interface_bytes,
    read_queue_stats, HostStats, InterfaceBytes, QueueStats, NETLINK_PATH, NET_DEV_PATH,
    NFNETLINK_QUEUE_PATH,
};

/// The `Content-Type` of [`render`]'s output (OpenMetrics text, as prometheus-client encodes it).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Prefix of every metric name (`slipstream_...`).
pub const PREFIX: &str = "slipstream";

/// The latest engine snapshot, shared between the packet thread (writer) and the metrics endpoint
/// (reader). Cheap to clone: clones share the same slot.
#[derive(Clone, Debug, Default)]
pub struct SharedSnapshot(Arc<Mutex<Arc<EngineSnapshot>>>);

impl SharedSnapshot {
    /// A slot holding `initial` (use `SharedSnapshot::default()` for an empty snapshot).
    pub fn new(initial: EngineSnapshot) -> SharedSnapshot {
        SharedSnapshot(Arc::new(Mutex::new(Arc::new(initial))))
    }

    /// Replaces the snapshot. Allocation happens before the lock is taken and the old snapshot is
    /// freed after it is released, so the packet thread holds the lock only for a pointer swap.
    pub fn publish(&self, snapshot: EngineSnapshot) {
        let snapshot = Arc::new(snapshot);
        let previous = std::mem::replace(&mut *self.lock(), snapshot);
        drop(previous);
    }

    /// The most recently published snapshot.
    pub fn latest(&self) -> Arc<EngineSnapshot> {
        Arc::clone(&self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Arc<EngineSnapshot>> {
        // The guarded value is a pointer that is only ever swapped whole: a panic elsewhere while
        // holding the lock cannot leave it half-written, so a poisoned lock is still good.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A prometheus-client [`Collector`] that encodes the latest [`EngineSnapshot`] on every scrape.
#[derive(Clone, Debug)]
pub struct SlipstreamCollector {
    shared: SharedSnapshot,
}

impl SlipstreamCollector {
    /// A collector that renders whatever snapshot `shared` holds at scrape time.
    pub fn new(shared: SharedSnapshot) -> SlipstreamCollector {
        SlipstreamCollector { shared }
    }
}

impl Collector for SlipstreamCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let snapshot = self.shared.latest();
        encode_snapshot(&snapshot, &mut encoder)
    }
}

/// The rule controller name of household control (`controller = "household"`).
pub const HOUSEHOLD_CONTROLLER: &str = "household";

/// The links worth showing: the engine keeps both links' state whether or not any rule uses
/// household control, so a link is shown only while some rule (configured, or removed with flows
/// left) uses it, or it still has flows. Without household rules the figures would all be idle
/// zeros: leaving them out keeps `/metrics` and `slipstream status` as they were.
pub fn household_links(s: &EngineSnapshot) -> impl Iterator<Item = &LinkSnapshot> {
    let configured = s.rules.iter().any(|r| r.controller == HOUSEHOLD_CONTROLLER);
    s.links.iter().filter(move |l| configured || l.flows > 0)
}

/// A registry with prefix `slipstream` holding a [`SlipstreamCollector`] over `shared`.
pub fn registry(shared: SharedSnapshot) -> Registry {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(SlipstreamCollector::new(shared)));
    registry
}

/// Adds the host-side figures (NFQUEUE statistics, LAN interface bytes; see [`HostStats`]) to a
/// registry made by [`registry`]. The daemon passes `HostStats::system(...)` with its queues and
/// LAN interfaces.
pub fn register_host_stats(registry: &mut Registry, host: HostStats) {
    registry.register_collector(Box::new(HostCollector { host }));
}

/// The registry's metrics in the OpenMetrics text format, `# EOF` included; serve it with
/// [`CONTENT_TYPE`].
pub fn render(registry: &Registry) -> String {
    let mut out = String::with_capacity(16 * 1024);
    // Writing to a String cannot fail, and neither the collector nor the label sets produce errors
    // of their own.
    prometheus_client::encoding::text::encode(&mut out, registry)
        .expect("encoding metrics into a String cannot fail");
    out
}

#[cfg(test)]
mod tests;
