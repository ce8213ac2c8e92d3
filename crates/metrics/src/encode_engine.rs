//! The engine's snapshot as metric families: datapath counters, per rule, per flow.

use std::borrow::Cow;
use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;
use slipstream_engine::{EngineSnapshot, FlowSnapshot, PassReason, RuleSnapshot, PARSE_ERRORS};

use crate::encode_links::encode_links;
use crate::families::{counter, counter_family, gauge, gauge_family};
use crate::HOUSEHOLD_CONTROLLER;

/// Whether a flow is under household control: it has (or waits for) a share of a link's budget.
pub(crate) fn is_household(flow: &FlowSnapshot, rules: &[RuleSnapshot]) -> bool {
    flow.allocation.is_some()
        || flow.held
        || usize::from(flow.rule)
            .checked_sub(1)
            .and_then(|i| rules.get(i))
            .is_some_and(|r| r.controller == HOUSEHOLD_CONTROLLER)
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

pub(crate) fn encode_snapshot(s: &EngineSnapshot, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
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
        "udp_flows_created",
        "Background UDP flows (QUIC, uTP) added to the UDP flow table.",
        None,
        c.udp_flows_created,
    )?;
    counter(
        enc,
        "udp_flows_expired",
        "Background UDP flows removed after their idle timeout.",
        None,
        c.udp_flows_expired,
    )?;
    counter(
        enc,
        "udp_policer_dropped_packets",
        "Packets of background UDP flows dropped by their policer (sent beyond their household share).",
        None,
        c.udp_dropped,
    )?;
    counter(
        enc,
        "udp_policer_marked_packets",
        "Packets of background UDP flows marked CE by their policer instead of dropped (ECN-capable senders).",
        None,
        c.udp_marked,
    )?;
    counter(
        enc,
        "udp_shaper_delayed_packets",
        "Packets of background UDP flows their shaper held at the router for a while (over their household share, within its queue).",
        None,
        c.udp_delayed,
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
