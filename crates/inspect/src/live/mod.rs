//! The live page's JSON (`GET /api/history`, `GET /api/hosts`; docs/live-page.md) and the pure
//! parts behind it: the history ring with its yield finder and the rules' bytes today
//! ([`HistoryRecorder`]), the per-host view of the flows ([`host_list`]) and best effort per
//! host from conntrack's byte counters ([`ConntrackRates`], [`parse_conntrack`],
//! [`lan_prefixes`]). The daemon feeds them numbers and times; nothing here reads a clock or a
//! file.

mod conntrack;
mod history;
mod hosts;

pub use conntrack::{lan_prefixes, parse_conntrack, ConntrackEntry, ConntrackRates, Prefix};
pub use history::{
    HistoryInput, HistoryRecorder, RuleInput, HISTORY_SAMPLES, MAX_YIELDS, SAMPLE_INTERVAL_MS,
};
pub use hosts::{host_list, MAX_HOSTS};

use serde::{Deserialize, Serialize};

/// `GET /api/history`: the last minutes of each household link, recent yields, rules today.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Time between samples.
    pub interval_ms: u64,
    /// How far back the samples reach at most.
    pub window_secs: u64,
    /// When this answer was made.
    pub now_unix_ms: u64,
    /// Oldest first.
    pub samples: Vec<HistorySample>,
    /// The last yields found, oldest first.
    pub yields: Vec<YieldEvent>,
    /// Each rule's rate and bytes today.
    pub rules: Vec<RuleToday>,
}

/// One second of every household link.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HistorySample {
    /// When the sample was taken.
    pub t_unix_ms: u64,
    /// One entry per link under household control.
    pub links: Vec<LinkSample>,
}

/// One link at one second (the fields of `status`'s `household[]` that a chart needs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSample {
    /// `download` or `upload`.
    pub link: String,
    /// What the budget controller was doing.
    pub phase: String,
    /// What crossed the access link: background plus best effort (`None` without best effort).
    pub link_bps: Option<f64>,
    /// The household (background) flows' delivery rate.
    pub background_bps: f64,
    /// Best effort's rate on the link (`None` when the router cannot count it).
    pub best_effort_bps: Option<f64>,
    /// The household budget: bytes the link's background flows may have in flight.
    pub budget_bytes: u64,
    /// The queueing delay the link's flows share.
    pub queue_delay_ms: Option<f64>,
    /// The queue above which the background yields (`status`'s `queue_target_ms`).
    #[serde(default)]
    pub queue_target_ms: Option<f64>,
    /// The queue it steps towards (`status`'s `queue_aim_ms`).
    #[serde(default)]
    pub queue_aim_ms: Option<f64>,
    /// What best effort was doing: `alone`, `browsing`, `steady` (a call or a game).
    #[serde(default)]
    pub best_effort_pace: Option<String>,
    /// Household flows on the link.
    pub flows: usize,
    /// Of those, the ones waiting for their turn.
    pub held_flows: usize,
}

/// A yield, as the samples show it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct YieldEvent {
    /// The link.
    pub link: String,
    /// `best_effort_arrived` or `background_stepped_back`.
    pub kind: String,
    /// The sample the event was found in.
    pub t_unix_ms: u64,
    /// Best effort's rate in that sample.
    pub best_effort_bps: f64,
    /// The background's rate in that sample.
    pub background_bps: f64,
    /// `background_stepped_back`: time since best effort arrived.
    pub after_ms: Option<u64>,
}

/// A rule's rate and bytes today.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuleToday {
    /// The rule's name.
    pub name: String,
    /// Its flows in the table.
    pub active_flows: usize,
    /// Its acknowledged bytes over the last sampling interval, bits per second.
    pub rate_bps: f64,
    /// Bytes acknowledged since `today_since_unix`.
    pub bytes_today: u64,
    /// Local midnight, or when the daemon started if later.
    pub today_since_unix: u64,
}

/// `GET /api/hosts`: the LAN hosts with background flows or best-effort traffic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostList {
    /// Whether conntrack counted bytes (accounting on), so `best_effort_bps` can be known.
    pub best_effort_counted: bool,
    /// Why best effort is not counted, if it is not.
    pub note: Option<String>,
    /// Busiest first (background plus best effort), at most [`MAX_HOSTS`].
    pub hosts: Vec<HostRates>,
}

/// One LAN host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRates {
    /// The host's address.
    pub address: String,
    /// Its DHCP lease name, if it has one.
    pub name: Option<String>,
    /// The goodput of its background flows.
    pub background_bps: f64,
    /// Its other traffic through the router (`None` when not counted).
    pub best_effort_bps: Option<f64>,
    /// Its background flows in the table.
    pub background_flows: usize,
    /// Of those, the ones household control holds.
    pub held_flows: usize,
}

#[cfg(test)]
mod tests;
