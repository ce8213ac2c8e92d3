//! The history ring: one sample a second of every household link, kept for ten minutes, the
//! yields found in it, and each rule's bytes today. Fixed size and fed by the daemon whether or
//! not the page is open, so the page has the last minutes the moment it opens.

use std::collections::VecDeque;

use super::{History, HistorySample, LinkSample, RuleToday, YieldEvent};

/// Time between samples.
pub const SAMPLE_INTERVAL_MS: u64 = 1000;
/// Samples kept: ten minutes.
pub const HISTORY_SAMPLES: usize = 600;
/// Yields kept.
pub const MAX_YIELDS: usize = 20;
/// Best effort has arrived when it takes more than this share of what crossed the link ...
const ARRIVED_SHARE: f64 = 0.10;
/// ... after the link was quiet of it (below this share) for at least `QUIET_MS`.
const QUIET_SHARE: f64 = 0.05;
const QUIET_MS: u64 = 3000;
/// The background stepped back when its rate fell to this fraction of its rate before the
/// arrival (mean of the samples of the `QUIET_MS` before), within `STEP_BACK_WITHIN_MS`.
const STEPPED_BACK_FRACTION: f64 = 0.5;
const STEP_BACK_WITHIN_MS: u64 = 30_000;
/// Rules followed at most (a config has far fewer; removed rules go).
const MAX_RULES: usize = 256;

/// One sampling of the daemon's snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryInput {
    /// When it was taken.
    pub t_unix_ms: u64,
    /// Local midnight of that moment (seconds since the epoch): a new value starts a new day.
    pub day_start_unix: u64,
    /// The household links.
    pub links: Vec<LinkSample>,
    /// The rules, as `status` lists them.
    pub rules: Vec<RuleInput>,
}

/// A rule's counters in a sampling.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleInput {
    /// The rule's name.
    pub name: String,
    /// Its flows in the table.
    pub active_flows: usize,
    /// Bytes acknowledged for its flows since the daemon started (monotonic while the rule
    /// exists).
    pub acked_bytes: u64,
}

#[derive(Clone, Debug, Default)]
struct RuleDay {
    today: RuleToday,
    acked_bytes: u64,
    day_start_unix: u64,
}

#[derive(Clone, Debug, Default)]
struct LinkWatch {
    link: String,
    /// Since when best effort has been below `QUIET_SHARE`.
    quiet_since: Option<u64>,
    /// An arrival not yet answered: its time and the background's rate before it.
    arrival: Option<(u64, f64)>,
}

/// The ring, the yield finder and the rules' days.
#[derive(Clone, Debug, Default)]
pub struct HistoryRecorder {
    samples: VecDeque<HistorySample>,
    yields: VecDeque<YieldEvent>,
    rules: Vec<RuleDay>,
    links: Vec<LinkWatch>,
    started_unix: Option<u64>,
}

impl HistoryRecorder {
    /// Adds a sampling: the oldest sample goes when the ring is full.
    pub fn record(&mut self, input: HistoryInput) {
        let t = input.t_unix_ms;
        let started = *self.started_unix.get_or_insert(t / 1000);
        self.count_rules(&input, started);
        for link in &input.links {
            self.watch_link(t, link);
        }
        self.links
            .retain(|w| input.links.iter().any(|l| l.link == w.link));
        if self.samples.len() == HISTORY_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(HistorySample {
            t_unix_ms: t,
            links: input.links,
        });
    }

    /// The answer to `GET /api/history?since=...`: samples after `since` (all without it).
    pub fn view(&self, since_unix_ms: Option<u64>, now_unix_ms: u64) -> History {
        let since = since_unix_ms.unwrap_or(0);
        History {
            interval_ms: SAMPLE_INTERVAL_MS,
            window_secs: HISTORY_SAMPLES as u64 * SAMPLE_INTERVAL_MS / 1000,
            now_unix_ms,
            samples: self
                .samples
                .iter()
                .filter(|s| since_unix_ms.is_none() || s.t_unix_ms > since)
                .cloned()
                .collect(),
            yields: self.yields.iter().cloned().collect(),
            rules: self.rules.iter().map(|r| r.today.clone()).collect(),
        }
    }

    fn count_rules(&mut self, input: &HistoryInput, started_unix: u64) {
        let previous_t = self.samples.back().map(|s| s.t_unix_ms);
        let mut days = Vec::with_capacity(input.rules.len().min(MAX_RULES));
        for rule in input.rules.iter().take(MAX_RULES) {
            let known = self.rules.iter().position(|r| r.today.name == rule.name);
            let day = match known {
                Some(i) => {
                    let mut d = std::mem::take(&mut self.rules[i]);
                    // A counter that went back is a new one (the rule was removed and added
                    // again): all it holds is new.
                    let delta = rule
                        .acked_bytes
                        .checked_sub(d.acked_bytes)
                        .unwrap_or(rule.acked_bytes);
                    if d.day_start_unix != input.day_start_unix {
                        d.day_start_unix = input.day_start_unix;
                        d.today.today_since_unix = input.day_start_unix;
                        d.today.bytes_today = 0;
                    }
                    d.today.bytes_today += delta;
                    d.today.rate_bps = match previous_t {
                        Some(p) if input.t_unix_ms > p => {
                            delta as f64 * 8000.0 / (input.t_unix_ms - p) as f64
                        }
                        _ => 0.0,
                    };
                    d.acked_bytes = rule.acked_bytes;
                    d
                }
                // First seen: its bytes so far count for today (the daemon started today, or
                // the rule was just added).
                None => RuleDay {
                    today: RuleToday {
                        name: rule.name.clone(),
                        active_flows: 0,
                        rate_bps: 0.0,
                        bytes_today: rule.acked_bytes,
                        today_since_unix: input.day_start_unix.max(started_unix),
                    },
                    acked_bytes: rule.acked_bytes,
                    day_start_unix: input.day_start_unix,
                },
            };
            days.push(RuleDay {
                today: RuleToday {
                    active_flows: rule.active_flows,
                    ..day.today
                },
                ..day
            });
        }
        self.rules = days;
    }

    fn watch_link(&mut self, t: u64, link: &LinkSample) {
        let before = self.background_before(&link.link, t);
        let i = match self.links.iter().position(|w| w.link == link.link) {
            Some(i) => i,
            None => {
                self.links.push(LinkWatch {
                    link: link.link.clone(),
                    ..LinkWatch::default()
                });
                self.links.len() - 1
            }
        };
        let best_effort = link.best_effort_bps.unwrap_or(0.0);
        let total = link.link_bps.unwrap_or(link.background_bps);
        let share = if total > 0.0 { best_effort / total } else { 0.0 };
        let event = |kind: &str, after_ms| YieldEvent {
            link: link.link.clone(),
            kind: kind.to_owned(),
            t_unix_ms: t,
            best_effort_bps: best_effort,
            background_bps: link.background_bps,
            after_ms,
        };
        let w = &mut self.links[i];
        let mut found = None;
        match w.arrival {
            Some((at, _)) if t.saturating_sub(at) > STEP_BACK_WITHIN_MS => w.arrival = None,
            Some((at, before)) if link.background_bps <= STEPPED_BACK_FRACTION * before => {
                found = Some(event("background_stepped_back", Some(t.saturating_sub(at))));
                w.arrival = None;
            }
            Some(_) => {}
            None => {
                let quiet = w.quiet_since.is_some_and(|q| t.saturating_sub(q) >= QUIET_MS);
                if quiet && share > ARRIVED_SHARE && before > 0.0 {
                    found = Some(YieldEvent {
                        background_bps: before,
                        ..event("best_effort_arrived", None)
                    });
                    w.arrival = Some((t, before));
                }
            }
        }
        // Hysteresis: best effort ramping up passes through the shares between the two
        // thresholds without ending the quiet that came before it.
        if share < QUIET_SHARE {
            w.quiet_since.get_or_insert(t);
        } else if share > ARRIVED_SHARE {
            w.quiet_since = None;
        }
        if let Some(e) = found {
            if self.yields.len() == MAX_YIELDS {
                self.yields.pop_front();
            }
            self.yields.push_back(e);
        }
    }

    /// The background's mean rate on `link` over the samples of the `QUIET_MS` before `t`.
    fn background_before(&self, link: &str, t: u64) -> f64 {
        let rates: Vec<f64> = self
            .samples
            .iter()
            .rev()
            .take_while(|s| t.saturating_sub(s.t_unix_ms) <= QUIET_MS)
            .filter_map(|s| s.links.iter().find(|l| l.link == link))
            .map(|l| l.background_bps)
            .collect();
        if rates.is_empty() {
            0.0
        } else {
            rates.iter().sum::<f64>() / rates.len() as f64
        }
    }
}
