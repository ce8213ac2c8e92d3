//! Household control's per-link figures as metric families.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;
use slipstream_engine::{EngineSnapshot, LinkSnapshot};

use crate::families::{counter_family, gauge, gauge_family};
use crate::household_links;

fn link_label(link: &LinkSnapshot) -> [(&'static str, &'static str); 1] {
    [("link", link.direction.as_str())]
}

/// Household control, per access link (see [`household_links`] for which links).
pub(crate) fn encode_links(s: &EngineSnapshot, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
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
        "household_queue_target",
        "The queue above which the link's background yields, last round: the delay target with the \
         link to itself, less beside best effort (see household_best_effort_pace).",
        Some(&seconds),
        links
            .iter()
            .filter_map(|l| Some((link_label(l), l.targets?.threshold.as_secs_f64()))),
    )?;
    gauge_family(
        enc,
        "household_queue_aim",
        "The queue the background's budget steps towards, last round: the queue target, or less \
         beside a call or a game.",
        Some(&seconds),
        links
            .iter()
            .filter_map(|l| Some((link_label(l), l.targets?.aim.as_secs_f64()))),
    )?;
    gauge_family(
        enc,
        "household_best_effort_pace",
        "Always 1; `pace` is what the router's counts say of best effort on the link, which sets \
         the queue target: alone (nothing steady), browsing (bursts), steady (a call or a game).",
        None,
        links.iter().filter_map(|l| {
            Some((
                [("link", l.direction.as_str()), ("pace", l.targets?.pace.as_str())],
                1u32,
            ))
        }),
    )?;
    if !links.is_empty() {
        gauge(
            enc,
            "household_steady_flows",
            "Best-effort UDP flows the connection tracker saw sending steadily at its last dump \
             (calls, games): beside browsing, the background keeps the queue a call needs.",
            None,
            s.steady_flows,
        )?;
    }
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
    gauge_family(
        enc,
        "household_best_effort",
        "Best effort's rate on the link over the last round: what the WAN interfaces counted less \
         the background's own packets (absent when the router cannot count it).",
        Some(&bytes_per_second),
        links
            .iter()
            .filter_map(|l| Some((link_label(l), l.best_effort_bits_per_second? / 8.0))),
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
