//! The live page's data (docs/live-page.md): the history sampler, and the answers of
//! `GET /api/status`, `/api/flows`, `/api/hosts` and `/api/history`. The shaping is pure
//! (`slipstream_inspect::live`); this module only feeds it the daemon's snapshots, the lease
//! files, the routes and the conntrack table. The HTTP side is `metrics_server`.
//!
//! The sampler runs once a second whether or not anyone looks: it copies a few numbers out of
//! the snapshot the packet thread already publishes for `/metrics` into a fixed ring, so the
//! page has the last minutes as soon as it opens, at a fixed, tiny cost. Everything else
//! (every flow from the packet thread, the conntrack table) is read only when asked.
#![allow(
    unsafe_code,
    reason = "localtime_r(3) for local midnight (the rules' bytes today); libc has no safe wrapper"
)]

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use slipstream_inspect::live::{
    host_list, lan_prefixes, parse_conntrack, ConntrackRates, History, HistoryInput, HistoryRecorder,
    HostList, LinkSample, RuleInput, SAMPLE_INTERVAL_MS,
};
use slipstream_inspect::{FlowList, Status};
use slipstream_metrics::household_links;
use slipstream_names::leases;

use crate::control_socket::{link_status, unix_now_ms, Control};
use crate::wan_counters::WanCounters;

/// The kernel's connection table of the daemon's network namespace.
const CONNTRACK_PATH: &str = "/proc/net/nf_conntrack";

/// What the page's endpoints read.
pub(crate) struct Page {
    control: Arc<Control>,
    history: Mutex<HistoryRecorder>,
    conntrack: Mutex<ConntrackRates>,
    wan: Mutex<WanRates>,
}

/// The WAN interfaces' own byte counters, read once a sample: the link's rate also while no
/// background flow runs (household rounds, which measure best effort, run only while one does).
struct WanRates {
    counters: WanCounters,
    last: Option<(Instant, u64, u64)>,
}

impl WanRates {
    /// Download and upload rates since the previous call, bits per second.
    fn rates(&mut self) -> Option<(f64, f64)> {
        let now = Instant::now();
        let (down, up) = self.counters.read(now)?;
        let previous = self.last.replace((now, down.bytes, up.bytes));
        let (at, down0, up0) = previous?;
        let secs = now.duration_since(at).as_secs_f64();
        (secs > 0.0).then(|| {
            let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 * 8.0 / secs;
            (rate(down.bytes, down0), rate(up.bytes, up0))
        })
    }
}

impl Page {
    pub(crate) fn new(control: Arc<Control>) -> Page {
        Page {
            control,
            history: Mutex::new(HistoryRecorder::default()),
            conntrack: Mutex::new(ConntrackRates::default()),
            wan: Mutex::new(WanRates {
                counters: WanCounters::new(),
                last: None,
            }),
        }
    }

    /// Samples once a second until the future is dropped.
    pub(crate) async fn run_sampler(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(SAMPLE_INTERVAL_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.sample();
        }
    }

    /// One sample of the published snapshot into the ring.
    fn sample(&self) {
        let snapshot = self.control.published.latest();
        let now_ms = unix_now_ms();
        let wan = lock(&self.wan).rates();
        let links = household_links(&snapshot)
            .map(link_status)
            .map(|l| {
                let wan_bps = wan.map(|(down, up)| if l.link == "upload" { up } else { down });
                // While household rounds run they measure best effort; between them (no
                // background flow) all that crosses the WAN is best effort.
                let best_effort_bps = match (l.best_effort_bps, wan_bps) {
                    (Some(b), _) if l.flows > 0 => Some(b),
                    (_, Some(w)) => Some((w - l.goodput_bps).max(0.0)),
                    (b, None) => b,
                };
                LinkSample {
                    link_bps: best_effort_bps.map(|b| b + l.goodput_bps),
                    link: l.link,
                    phase: l.phase,
                    background_bps: l.goodput_bps,
                    best_effort_bps,
                    budget_bytes: l.budget_bytes,
                    queue_delay_ms: l.queue_delay_ms,
                    queue_target_ms: l.queue_target_ms,
                    queue_aim_ms: l.queue_aim_ms,
                    best_effort_pace: l.best_effort_pace,
                    flows: l.flows,
                    held_flows: l.held_flows,
                }
            })
            .collect();
        let rules = snapshot
            .rules
            .iter()
            .map(|r| RuleInput {
                name: r.name.clone(),
                active_flows: r.active_flows,
                acked_bytes: r.acked_bytes,
            })
            .collect();
        let input = HistoryInput {
            t_unix_ms: now_ms,
            day_start_unix: local_midnight(now_ms / 1000),
            links,
            rules,
        };
        lock(&self.history).record(input);
    }

    pub(crate) async fn status(&self) -> Status {
        self.control.status_now().await
    }

    pub(crate) async fn flows(&self, top: usize) -> Option<FlowList> {
        self.control.flows_now(top).await
    }

    pub(crate) fn history(&self, since_unix_ms: Option<u64>) -> History {
        lock(&self.history).view(since_unix_ms, unix_now_ms())
    }

    /// Every LAN host's background (from every flow) and best effort (conntrack since the
    /// previous request), named from the leases. `None` if the packet thread does not answer.
    pub(crate) async fn hosts(&self) -> Option<HostList> {
        let flows = self.flows(usize::MAX).await?;
        let state = self.control.state();
        let names: BTreeMap<IpAddr, String> = state
            .dhcp_leases
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .flat_map(|text| leases::parse(&text))
            .map(|l| (l.addr, l.hostname))
            .collect();
        let background: HashSet<(SocketAddr, SocketAddr)> = flows
            .flows
            .iter()
            .filter_map(|f| Some((f.endpoints[0].parse().ok()?, f.endpoints[1].parse().ok()?)))
            .collect();
        let lan = lan_prefixes(
            &std::fs::read_to_string("/proc/net/route").unwrap_or_default(),
            &std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default(),
            &state.lan_interfaces,
        );
        let (best_effort, note) = match std::fs::read_to_string(CONNTRACK_PATH) {
            Ok(text) => {
                let entries = parse_conntrack(&text);
                let rates = lock(&self.conntrack).update(&entries, unix_now_ms(), &lan, &background);
                let note = if entries.iter().any(|e| e.bytes.is_none()) {
                    Some("conntrack counts no bytes: set net.netfilter.nf_conntrack_acct = 1".to_owned())
                } else if lan.is_empty() {
                    Some(format!(
                        "no route on the LAN interfaces {:?}: no LAN prefix to tell LAN hosts by",
                        state.lan_interfaces
                    ))
                } else if rates.is_none() {
                    Some("best effort is a rate between two requests: it shows from the next one".to_owned())
                } else {
                    None
                };
                (rates, note)
            }
            Err(e) => (None, Some(format!("{CONNTRACK_PATH}: {e}"))),
        };
        Some(host_list(&flows.flows, &names, &lan, best_effort.as_ref(), note))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each value is replaced whole under the lock: a panic elsewhere cannot leave it half-made.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Local midnight before `unix` (the daemon's time zone, `TZ`), in seconds since the epoch.
#[allow(
    clippy::useless_conversion,
    reason = "tm_gmtoff is a c_long: i64 here, i32 on 32-bit routers"
)]
fn local_midnight(unix: u64) -> u64 {
    let t = libc::time_t::try_from(unix).unwrap_or(0);
    // SAFETY: tm is plain data; zero is a valid value for every field.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r reads `t` and fills `tm`, both valid for the call; it is thread safe.
    let offset = if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        0
    } else {
        i64::from(tm.tm_gmtoff)
    };
    let local = unix as i64 + offset;
    (local - local.rem_euclid(86_400) - offset).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_midnight_is_at_most_a_day_back() {
        let now = 1_764_316_800 + 12_345;
        let m = local_midnight(now);
        assert!(m <= now && now - m < 86_400, "{m} {now}");
        assert_eq!(local_midnight(m + 10), m);
    }
}
