//! The kernel's figures ([`HostStats`]) as metric families, read at scrape time.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use crate::families::{counter, counter_family, gauge_family};
use crate::{HostStats, QueueStats};

/// A prometheus-client [`Collector`] calling the [`HostStats`] providers on every scrape.
#[derive(Debug)]
pub(crate) struct HostCollector {
    pub(crate) host: HostStats,
}

impl Collector for HostCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        encode_host(&self.host, &mut encoder)
    }
}

pub(crate) fn encode_host(host: &HostStats, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
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
