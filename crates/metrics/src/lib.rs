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

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric, MetricEncoder,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use slipstream_engine::{EngineSnapshot, FlowSnapshot, LinkSnapshot, PassReason, RuleSnapshot, PARSE_ERRORS};

mod daemon;
mod host;

pub use daemon::{register_daemon_counters, DaemonCounters};

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

/// Whether a flow is under household control: it has (or waits for) a share of a link's budget.
fn is_household(flow: &FlowSnapshot, rules: &[RuleSnapshot]) -> bool {
    flow.allocation.is_some()
        || flow.held
        || usize::from(flow.rule)
            .checked_sub(1)
            .and_then(|i| rules.get(i))
            .is_some_and(|r| r.controller == HOUSEHOLD_CONTROLLER)
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

/// A prometheus-client [`Collector`] calling the [`HostStats`] providers on every scrape.
#[derive(Debug)]
struct HostCollector {
    host: HostStats,
}

impl Collector for HostCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        encode_host(&self.host, &mut encoder)
    }
}

fn encode_host(host: &HostStats, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let bytes = Unit::Bytes;
    let queues = (host.queues)();
    let queue_label = |q: &QueueStats| [("queue", q.queue.to_string())];
    counter_family(
        enc,
        "nfqueue_packets",
        "Packets the kernel queued to the daemon since the queue was bound (modulo 2^32).",
        None,
        queues.iter().map(|q| (queue_label(q), u64::from(q.id_sequence))),
    )?;
    gauge_family(
        enc,
        "nfqueue_waiting_packets",
        "Packets waiting in the queue for the daemon's verdict.",
        None,
        queues.iter().map(|q| (queue_label(q), q.waiting)),
    )?;
    counter_family(
        enc,
        "nfqueue_dropped_packets",
        "Packets the kernel dropped instead of queueing: queue_full (the queue was full and does \
         not fail open), socket_full (the daemon's netlink socket buffer was full).",
        None,
        queues.iter().flat_map(|q| {
            [
                ("queue_full", q.dropped_queue_full),
                ("socket_full", q.dropped_socket_full),
            ]
            .map(|(reason, n)| {
                (
                    [("queue", q.queue.to_string()), ("reason", reason.to_owned())],
                    u64::from(n),
                )
            })
        }),
    )?;
    // One socket serves both queues: its overruns once, not per queue (no queue, no series).
    if let Some(overruns) = queues.iter().map(|q| q.socket_overruns).max() {
        counter(
            enc,
            "nfqueue_socket_overruns",
            "Queued packets the daemon's netlink socket had no room for: the fail-open queues let \
             them pass unseen (their windows unclamped). Should stay 0; see datapath.queue_max_len.",
            None,
            overruns,
        )?;
    }
    let interfaces = (host.interfaces)();
    counter_family(
        enc,
        "interface_receive",
        "Bytes received on a LAN interface (sent by LAN hosts), all traffic.",
        Some(&bytes),
        interfaces
            .iter()
            .map(|i| ([("interface", i.interface.as_str())], i.receive_bytes)),
    )?;
    counter_family(
        enc,
        "interface_transmit",
        "Bytes transmitted on a LAN interface (delivered to LAN hosts), all traffic.",
        Some(&bytes),
        interfaces
            .iter()
            .map(|i| ([("interface", i.interface.as_str())], i.transmit_bytes)),
    )?;
    Ok(())
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

/// One flow that gets per-flow series, with its label values.
struct FlowSeries<'a> {
    flow: &'a FlowSnapshot,
    rule: Cow<'a, str>,
    sender: String,
    receiver: String,
}

impl<'a> FlowSeries<'a> {
    /// `None` for a flow whose endpoints are not known yet: it has no stable labels.
    fn new(flow: &'a FlowSnapshot, rules: &'a [RuleSnapshot]) -> Option<FlowSeries<'a>> {
        let (sender, receiver) = (flow.sender?, flow.receiver?);
        // `FlowSnapshot::rule` is the 1-based rule number; after a reload that removed rules the
        // number may name no rule, and then it is the label.
        let rule = usize::from(flow.rule)
            .checked_sub(1)
            .and_then(|i| rules.get(i))
            .map_or_else(
                || Cow::Owned(flow.rule.to_string()),
                |r| Cow::Borrowed(r.name.as_str()),
            );
        Some(FlowSeries {
            flow,
            rule,
            sender: sender.to_string(),
            receiver: receiver.to_string(),
        })
    }

    /// Whether the flow is under household control (for its allocation and held series).
    fn household(&self, rules: &[RuleSnapshot]) -> bool {
        is_household(self.flow, rules)
    }

    fn labels(&self) -> [(&'static str, &str); 3] {
        [
            ("rule", &self.rule),
            ("sender", &self.sender),
            ("receiver", &self.receiver),
        ]
    }
}

fn rule_labels(rule: &RuleSnapshot) -> [(&'static str, &str); 2] {
    [("rule", rule.name.as_str()), ("controller", rule.controller)]
}

fn encode_snapshot(s: &EngineSnapshot, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let bytes = Unit::Bytes;
    let seconds = Unit::Seconds;
    let ratio = Unit::Other("ratio".to_owned());
    let bytes_per_second = Unit::Other("bytes_per_second".to_owned());

    // Engine-wide counters and gauges.
    let c = &s.counters;
    counter(enc, "packets", "Packets handed to the engine.", None, c.packets)?;
    counter(
        enc,
        "packets_rewritten",
        "Packets forwarded with a lowered receive window.",
        None,
        c.rewritten,
    )?;
    counter_family(
        enc,
        "packets_passed",
        "Packets returned to the kernel unmodified, by reason.",
        None,
        PassReason::ALL
            .iter()
            .map(|r| ([("reason", r.as_str())], c.passed(*r))),
    )?;
    counter_family(
        enc,
        "packets_malformed",
        "Packets that could not be parsed, by parse error.",
        None,
        PARSE_ERRORS
            .iter()
            .map(|e| ([("error", e.as_str())], c.malformed(*e))),
    )?;
    counter(
        enc,
        "flows_created",
        "Flows added to the flow table.",
        None,
        c.flows_created,
    )?;
    counter(
        enc,
        "flows_evicted",
        "Idle flows evicted to make room in a full flow table.",
        None,
        c.flows_evicted,
    )?;
    counter(
        enc,
        "flows_expired",
        "Flows removed after their idle timeout.",
        None,
        c.flows_expired,
    )?;
    counter(
        enc,
        "flows_closed",
        "Flows removed after FIN or RST.",
        None,
        c.flows_closed,
    )?;
    counter(
        enc,
        "flows_without_timestamps",
        "Flows that negotiated no TCP timestamps (left unclamped if their controller needs them).",
        None,
        c.flows_without_timestamps,
    )?;
    counter(
        enc,
        "flows_without_handshake",
        "Flows first seen after their handshake (window scale unknown, left unclamped).",
        None,
        c.flows_without_handshake,
    )?;
    counter(
        enc,
        "flows_recovered",
        "Flows first seen after their handshake whose window scales conntrack knew: controlled from then on.",
        None,
        c.flows_recovered,
    )?;
    counter(
        enc,
        "flows_reopened",
        "Flows replaced by a new connection on the same 4-tuple (a SYN with another initial sequence number).",
        None,
        c.flows_reopened,
    )?;
    counter(
        enc,
        "events_dropped",
        "Flow events dropped because the event queue was full.",
        None,
        c.events_dropped,
    )?;
    gauge(
        enc,
        "flows_active",
        "Flows in the flow table.",
        None,
        s.active_flows,
    )?;
    gauge(enc, "flows_max", "Capacity of the flow table.", None, s.max_flows)?;

    // Per rule.
    gauge_family(
        enc,
        "rule_flows_active",
        "Flows in the flow table classified by the rule.",
        None,
        s.rules.iter().map(|r| (rule_labels(r), r.active_flows)),
    )?;
    counter_family(
        enc,
        "rule_flows_started",
        "Flows classified by the rule since start.",
        None,
        s.rules.iter().map(|r| (rule_labels(r), r.flows_started)),
    )?;
    counter_family(
        enc,
        "rule_acked",
        "Bytes acknowledged by the receivers of the rule's flows.",
        Some(&bytes),
        s.rules.iter().map(|r| (rule_labels(r), r.acked_bytes)),
    )?;
    counter_family(
        enc,
        "rule_packets_rewritten",
        "Packets of the rule's flows forwarded with a lowered receive window.",
        None,
        s.rules.iter().map(|r| (rule_labels(r), r.rewritten)),
    )?;

    // Per flow: only the flows in the snapshot (the busiest ones), only those with known endpoints.
    let flows: Vec<FlowSeries> = s
        .flows
        .iter()
        .filter_map(|f| FlowSeries::new(f, &s.rules))
        .collect();
    gauge_family(
        enc,
        "flow_rwnd",
        "Receive window last forwarded to the sender (the clamped rwnd).",
        Some(&bytes),
        flows
            .iter()
            .filter_map(|f| Some((f.labels(), f.flow.forwarded_window?))),
    )?;
    gauge_family(
        enc,
        "flow_host_window",
        "Receive window the receiving host last advertised.",
        Some(&bytes),
        flows
            .iter()
            .filter_map(|f| Some((f.labels(), f.flow.host_window?))),
    )?;
    gauge_family(
        enc,
        "flow_target_window",
        "Window the flow's controller wants advertised.",
        Some(&bytes),
        flows
            .iter()
            .filter_map(|f| Some((f.labels(), f.flow.controller?.target_window?))),
    )?;
    gauge_family(
        enc,
        "flow_cwnd_estimate",
        "Controller's estimate of the sender's congestion window.",
        Some(&bytes),
        flows
            .iter()
            .filter_map(|f| Some((f.labels(), f.flow.controller?.cwnd_estimate?))),
    )?;
    gauge_family(
        enc,
        "flow_piv_sum",
        "Sum of the packet inter-arrival variations of the last epoch (signed).",
        Some(&seconds),
        flows.iter().filter_map(|f| {
            let epoch = f.flow.controller?.last_epoch?;
            Some((f.labels(), epoch.piv_sum_micros as f64 / 1e6))
        }),
    )?;
    gauge_family(
        enc,
        "flow_piv_positive",
        "Fraction of the last epoch's packet inter-arrival variations that were positive.",
        Some(&ratio),
        flows
            .iter()
            .filter_map(|f| Some((f.labels(), f.flow.controller?.last_epoch?.positive_fraction()))),
    )?;
    gauge_family(
        enc,
        "flow_piv_samples",
        "Packet inter-arrival variations measured in the last epoch.",
        None,
        flows
            .iter()
            .filter_map(|f| Some((f.labels(), f.flow.controller?.last_epoch?.piv_count))),
    )?;
    gauge_family(
        enc,
        "flow_goodput",
        "Rate at which the flow's data is acknowledged.",
        Some(&bytes_per_second),
        flows
            .iter()
            .map(|f| (f.labels(), f.flow.goodput_bits_per_second / 8.0)),
    )?;
    gauge_family(
        enc,
        "flow_rtt",
        "Round-trip time measured at the router.",
        Some(&seconds),
        flows
            .iter()
            .filter_map(|f| Some((f.labels(), f.flow.rtt?.as_secs_f64()))),
    )?;
    counter_family(
        enc,
        "flow_acked",
        "Bytes acknowledged by the flow's receiver.",
        Some(&bytes),
        flows.iter().map(|f| (f.labels(), f.flow.acked_bytes)),
    )?;
    gauge_family(
        enc,
        "flow_mode",
        "Always 1; the labels give the controller's mode and window policy (flows with a controller).",
        None,
        flows.iter().filter_map(|f| {
            let stats = f.flow.controller?;
            Some((
                (
                    f.labels(),
                    [("mode", stats.mode.as_str()), ("policy", stats.policy.as_str())],
                ),
                1u32,
            ))
        }),
    )?;
    gauge_family(
        enc,
        "flow_unclamped",
        "Always 1; present while the flow is not clamped, the label gives the reason.",
        None,
        flows.iter().filter_map(|f| {
            Some((
                (f.labels(), [("reason", f.flow.unclamped_reason?.as_str())]),
                1u32,
            ))
        }),
    )?;
    gauge_family(
        enc,
        "flow_allocation",
        "Household control: the flow's share of its link's budget (bytes it may have in flight).",
        Some(&bytes),
        flows
            .iter()
            .filter_map(|f| Some((f.labels(), f.flow.allocation?))),
    )?;
    gauge_family(
        enc,
        "flow_held",
        "Household control: 1 while the flow waits for its turn (its right edge is held), else 0.",
        None,
        flows
            .iter()
            .filter(|f| f.household(&s.rules))
            .map(|f| (f.labels(), u32::from(f.flow.held))),
    )?;

    encode_links(s, enc)
}

fn link_label(link: &LinkSnapshot) -> [(&'static str, &'static str); 1] {
    [("link", link.direction.as_str())]
}

/// Household control, per access link (see [`household_links`] for which links).
fn encode_links(s: &EngineSnapshot, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let bytes = Unit::Bytes;
    let seconds = Unit::Seconds;
    let bytes_per_second = Unit::Other("bytes_per_second".to_owned());
    let links: Vec<&LinkSnapshot> = household_links(s).collect();
    gauge_family(
        enc,
        "household_budget",
        "Bytes all household-controlled background flows of the link may have in flight; \
         `controller` is the budget controller.",
        Some(&bytes),
        links.iter().map(|l| {
            (
                [("link", l.direction.as_str()), ("controller", l.controller)],
                l.budget_bytes,
            )
        }),
    )?;
    gauge_family(
        enc,
        "household_phase",
        "Always 1; the labels give the budget controller and what it is doing (start, hold, probe, \
         yield, slowdown, idle).",
        None,
        links.iter().map(|l| {
            (
                [
                    ("link", l.direction.as_str()),
                    ("controller", l.controller),
                    ("phase", l.phase.as_str()),
                ],
                1u32,
            )
        }),
    )?;
    gauge_family(
        enc,
        "household_queue_delay",
        "Queueing delay of the link shared by its household flows, last round.",
        Some(&seconds),
        links
            .iter()
            .filter_map(|l| Some((link_label(l), l.queue_delay?.as_secs_f64()))),
    )?;
    gauge_family(
        enc,
        "household_base_rtt",
        "Base (unloaded) round-trip time of the link.",
        Some(&seconds),
        links
            .iter()
            .filter_map(|l| Some((link_label(l), l.base_rtt?.as_secs_f64()))),
    )?;
    gauge_family(
        enc,
        "household_flows",
        "Household-controlled flows on the link.",
        None,
        links.iter().map(|l| (link_label(l), l.flows)),
    )?;
    gauge_family(
        enc,
        "household_held_flows",
        "Household-controlled flows of the link waiting for their turn (budget below their floors).",
        None,
        links.iter().map(|l| (link_label(l), l.held_flows)),
    )?;
    gauge_family(
        enc,
        "household_in_flight",
        "Bytes in flight of the link's household flows at the end of the last round.",
        Some(&bytes),
        links.iter().map(|l| (link_label(l), l.in_flight_bytes)),
    )?;
    gauge_family(
        enc,
        "household_goodput",
        "Delivery rate of the link's household flows over the last round.",
        Some(&bytes_per_second),
        links
            .iter()
            .map(|l| (link_label(l), l.goodput_bits_per_second / 8.0)),
    )?;
    counter_family(
        enc,
        "household_slowdowns",
        "Coordinated slowdowns of the link (budget held at its minimum so the queue drains and the \
         base delays are measured afresh).",
        None,
        links.iter().map(|l| (link_label(l), l.slowdowns)),
    )?;
    counter_family(
        enc,
        "household_window_updates",
        "Window updates the daemon was asked to send for held flows whose turn came.",
        None,
        links.iter().map(|l| (link_label(l), l.window_updates)),
    )?;
    Ok(())
}

fn counter<N: EncodeCounterValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: N,
) -> Result<(), fmt::Error> {
    ConstCounter::new(value).encode(enc.encode_descriptor(name, help, unit, MetricType::Counter)?)
}

fn gauge<N: EncodeGaugeValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: N,
) -> Result<(), fmt::Error> {
    ConstGauge::new(value).encode(enc.encode_descriptor(name, help, unit, MetricType::Gauge)?)
}

fn counter_family<L: EncodeLabelSet, N: EncodeCounterValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (L, N)>,
) -> Result<(), fmt::Error> {
    family(enc, name, help, unit, MetricType::Counter, samples, |m, v| {
        ConstCounter::new(v).encode(m)
    })
}

fn gauge_family<L: EncodeLabelSet, N: EncodeGaugeValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (L, N)>,
) -> Result<(), fmt::Error> {
    family(enc, name, help, unit, MetricType::Gauge, samples, |m, v| {
        ConstGauge::new(v).encode(m)
    })
}

/// One metric family: the descriptor, then one sample per label set. A family without samples is
/// left out, descriptor included.
fn family<L: EncodeLabelSet, N>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    metric_type: MetricType,
    samples: impl IntoIterator<Item = (L, N)>,
    encode: impl Fn(MetricEncoder, N) -> Result<(), fmt::Error>,
) -> Result<(), fmt::Error> {
    let mut samples = samples.into_iter().peekable();
    if samples.peek().is_none() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, unit, metric_type)?;
    for (labels, value) in samples {
        encode(metric.encode_family(&labels)?, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
