//! The headline scenario: a background download alone, a best-effort download alone, then both
//! together, with the daemon's rwnd for the background flow sampled from its metrics throughout.
//! The end-to-end test asserts on its numbers; the demo prints them.
//!
//! Also the pieces of many-flow scenarios (household control: several LAN hosts, 16-64
//! background flows): [`start_downloads`] runs one iperf3 per flow, so every flow has its own
//! goodput series; [`wait_all`] counts failed flows instead of stopping at the first; and
//! [`host_fair_jain`] judges the split against household control's own notion of fair (equal per
//! LAN host, then equal per flow).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::daemon::Daemon;
use crate::iperf::{IperfResult, IperfRun};
use crate::{IperfEnds, Testbed};

#[derive(Clone, Debug)]
pub struct Params {
    /// Server port of the background download (classed background by the daemon's rules).
    pub background_port: u16,
    /// Server port of the best-effort download (matched by no rule).
    pub best_effort_port: u16,
    /// Length of the background-alone phase.
    pub alone_secs: u32,
    /// Length of each best-effort run (alone, then beside the background flow).
    pub best_effort_secs: u32,
    /// How long the background flow runs before the best-effort one joins in the last phase.
    pub head_start_secs: u32,
    /// Goodputs are averaged over the last this many seconds of a run (after slow start).
    pub measure_secs: f64,
    /// Sender congestion control.
    pub congestion_control: String,
    /// Uploads (the LAN client sends) instead of downloads.
    pub upload: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            background_port: 6881,
            best_effort_port: 5201,
            alone_secs: 25,
            best_effort_secs: 20,
            head_start_secs: 10,
            measure_secs: 12.0,
            congestion_control: "cubic".into(),
            upload: false,
        }
    }
}

/// One scrape of the daemon's view of the background flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RwndSample {
    /// Seconds since the phase started.
    pub t: f64,
    pub rwnd_bytes: f64,
    pub host_window_bytes: Option<f64>,
    pub cwnd_estimate_bytes: Option<f64>,
    pub rtt_seconds: Option<f64>,
}

/// Min / median / max of a set of values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Summary {
        let mut v: Vec<f64> = values.into_iter().collect();
        if v.is_empty() {
            return Summary::default();
        }
        v.sort_by(f64::total_cmp);
        Summary {
            count: v.len(),
            min: v[0],
            median: v[v.len() / 2],
            max: v[v.len() - 1],
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub background_alone_mbps: f64,
    pub best_effort_alone_mbps: f64,
    pub best_effort_beside_background_mbps: f64,
    pub background_beside_best_effort_mbps: f64,
    /// Median ping RTT (client -> server, through the bottleneck queue) while the background
    /// download runs alone, over its measured part, ms.
    pub ping_background_alone_ms: f64,
    /// The same while the best-effort download runs alone.
    pub ping_best_effort_alone_ms: f64,
    /// The same while the best-effort download runs beside the background one.
    pub ping_beside_background_ms: f64,
    /// rwnd of the background flow over the measured part of the alone phase.
    pub rwnd_alone: Summary,
    /// rwnd of the background flow while the best-effort flow runs (its measured part).
    pub rwnd_beside_best_effort: Summary,
    pub trace_alone: Vec<RwndSample>,
    pub trace_together: Vec<RwndSample>,
    /// TCP resets while the flows of each phase ran (see [`resets_during`]); should be 0.
    pub resets_while_running: u64,
}

impl Report {
    /// Best-effort goodput beside the background flow as a fraction of what it gets alone.
    pub fn best_effort_kept(&self) -> f64 {
        self.best_effort_beside_background_mbps / self.best_effort_alone_mbps
    }

    pub fn to_text(&self, link_mbps: f64) -> String {
        format!(
            "background alone:            {:6.2} Mbit/s ({:.0}% of the {link_mbps} Mbit/s link)\n\
             best effort alone:           {:6.2} Mbit/s\n\
             best effort beside background: {:4.2} Mbit/s ({:.1}% of alone)\n\
             background beside best effort: {:4.2} Mbit/s\n\
             ping RTT (median), background alone: {:.1} ms; best effort alone: {:.1} ms; \
             beside background: {:.1} ms\n\
             background rwnd alone:       median {:.0} B (min {:.0}, max {:.0}, {} samples)\n\
             background rwnd beside BE:   median {:.0} B (min {:.0}, max {:.0}, {} samples)\n\
             TCP resets while running:    {}\n",
            self.background_alone_mbps,
            100.0 * self.background_alone_mbps / link_mbps,
            self.best_effort_alone_mbps,
            self.best_effort_beside_background_mbps,
            100.0 * self.best_effort_kept(),
            self.background_beside_best_effort_mbps,
            self.ping_background_alone_ms,
            self.ping_best_effort_alone_ms,
            self.ping_beside_background_ms,
            self.rwnd_alone.median,
            self.rwnd_alone.min,
            self.rwnd_alone.max,
            self.rwnd_alone.count,
            self.rwnd_beside_best_effort.median,
            self.rwnd_beside_best_effort.min,
            self.rwnd_beside_best_effort.max,
            self.rwnd_beside_best_effort.count,
            self.resets_while_running,
        )
    }
}

/// A trace as text, one line a second: time, rwnd, host window, cwnd estimate, RTT.
pub fn trace_text(trace: &[RwndSample]) -> String {
    let mut out = String::from("     t s     rwnd B  host window B  cwnd est. B  rtt ms\n");
    let mut next = 0.0;
    let opt = |v: Option<f64>, scale: f64| v.map_or("-".to_string(), |v| format!("{:.0}", v * scale));
    for s in trace.iter() {
        if s.t >= next {
            out.push_str(&format!(
                "  {:6.1} {:10.0} {:>14} {:>12} {:>7}\n",
                s.t,
                s.rwnd_bytes,
                opt(s.host_window_bytes, 1.0),
                opt(s.cwnd_estimate_bytes, 1.0),
                opt(s.rtt_seconds, 1000.0)
            ));
            next = s.t + 1.0;
        }
    }
    out
}

/// Samples the daemon's view (control socket) of the flow with the server endpoint `server`
/// (`("sender", addr:port)` for downloads, `("receiver", ...)` for uploads) every 500 ms until
/// `stop` is set.
fn sample_rwnd(daemon: &Daemon, server: (&str, &str), stop: &AtomicBool) -> Vec<RwndSample> {
    let started = Instant::now();
    let mut samples = Vec::new();
    let (side, endpoint) = server;
    while !stop.load(Ordering::Relaxed) {
        let flows = daemon.flows().unwrap_or_default();
        let flow = flows.iter().find(|f| {
            let end = if side == "sender" { &f.sender } else { &f.receiver };
            end.as_deref() == Some(endpoint)
        });
        if let Some(f) = flow {
            if let Some(rwnd) = f.rwnd_bytes {
                samples.push(RwndSample {
                    t: started.elapsed().as_secs_f64(),
                    rwnd_bytes: f64::from(rwnd),
                    host_window_bytes: f.host_window_bytes.map(f64::from),
                    cwnd_estimate_bytes: f.cwnd_estimate_bytes.map(f64::from),
                    rtt_seconds: f.rtt_ms.map(|ms| ms / 1000.0),
                });
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    samples
}

/// Median ping RTT (ms) over `secs` seconds, starting after `delay_secs`.
fn ping_later(tb: &Testbed, delay_secs: f64, secs: f64) -> Result<f64> {
    std::thread::sleep(Duration::from_secs_f64(delay_secs.max(0.0)));
    let count = ((secs - 1.0) / 0.2).max(3.0) as u32;
    Ok(tb.ping_stats(count, 0.2)?.median)
}

/// Runs the three phases; `progress` gets a line per phase.
pub fn background_vs_best_effort(
    tb: &Testbed,
    daemon: &Daemon,
    p: &Params,
    mut progress: impl FnMut(&str),
) -> Result<Report> {
    tb.start_iperf_server(p.background_port)?;
    tb.start_iperf_server(p.best_effort_port)?;
    let server_endpoint = format!("{}:{}", tb.server_addr(false), p.background_port);
    let server = (
        if p.upload { "receiver" } else { "sender" },
        server_endpoint.as_str(),
    );
    let transfer = |port: u16, secs: u32| {
        if p.upload {
            tb.run_upload(port, secs, &p.congestion_control, &[])
        } else {
            tb.run_download(port, secs, &p.congestion_control, &[])
        }
    };
    let mut report = Report::default();
    let window = |secs: u32| (f64::from(secs) - p.measure_secs, f64::from(secs));

    progress(&format!(
        "phase 1/3: background download alone for {} s",
        p.alone_secs
    ));
    let stop = AtomicBool::new(false);
    let running = |secs: u32| resets_during(tb, f64::from(secs) - 1.0);
    let joined =
        |r: std::thread::Result<Result<u64>>| r.map_err(|_| anyhow::anyhow!("reset counter panicked"))?;
    let (from, to) = window(p.alone_secs);
    let (bg, trace, ping, resets) = std::thread::scope(|s| -> Result<_> {
        let sampler = s.spawn(|| sample_rwnd(daemon, server, &stop));
        let ping = s.spawn(|| ping_later(tb, from, p.measure_secs));
        let resets = s.spawn(|| running(p.alone_secs));
        let bg = transfer(p.background_port, p.alone_secs).and_then(|r| r.wait());
        stop.store(true, Ordering::Relaxed);
        Ok((
            bg,
            sampler.join().unwrap_or_default(),
            ping.join(),
            joined(resets.join()),
        ))
    })?;
    report.resets_while_running += resets?;
    let bg = bg.context("background download alone")?;
    report.ping_background_alone_ms = ping.map_err(|_| anyhow::anyhow!("ping thread panicked"))??;
    report.background_alone_mbps = bg.goodput_mbps_between(from, to).context("no intervals")?;
    report.rwnd_alone = Summary::of(trace.iter().filter(|s| s.t >= from).map(|s| s.rwnd_bytes));
    report.trace_alone = trace;

    settle();
    progress(&format!(
        "phase 2/3: best-effort download alone for {} s",
        p.best_effort_secs
    ));
    let (from, to) = window(p.best_effort_secs);
    let (be, ping, resets) = std::thread::scope(|s| -> Result<_> {
        let ping = s.spawn(|| ping_later(tb, from, p.measure_secs));
        let resets = s.spawn(|| running(p.best_effort_secs));
        let be = transfer(p.best_effort_port, p.best_effort_secs)?.wait();
        Ok((be, ping.join(), joined(resets.join())))
    })?;
    report.resets_while_running += resets?;
    let be = be?;
    report.ping_best_effort_alone_ms = ping.map_err(|_| anyhow::anyhow!("ping thread panicked"))??;
    report.best_effort_alone_mbps = be.goodput_mbps_between(from, to).context("no intervals")?;

    let together = p.head_start_secs + p.best_effort_secs + 2;
    settle();
    progress(&format!(
        "phase 3/3: background download for {together} s, best effort joins after {} s for {} s",
        p.head_start_secs, p.best_effort_secs
    ));
    stop.store(false, Ordering::Relaxed);
    let (bg, be, trace, ping, resets) = std::thread::scope(|s| -> Result<_> {
        let sampler = s.spawn(|| sample_rwnd(daemon, server, &stop));
        // Until the best-effort flow ends, the first to.
        let resets = s.spawn(|| running(p.head_start_secs + p.best_effort_secs));
        let bg = transfer(p.background_port, together)?;
        std::thread::sleep(Duration::from_secs(u64::from(p.head_start_secs)));
        let ping = s.spawn(|| ping_later(tb, from, p.measure_secs));
        let be = transfer(p.best_effort_port, p.best_effort_secs)?.wait();
        let bg = bg.wait();
        stop.store(true, Ordering::Relaxed);
        Ok((
            bg,
            be,
            sampler.join().unwrap_or_default(),
            ping.join(),
            joined(resets.join()),
        ))
    })?;
    report.resets_while_running += resets?;
    report.ping_beside_background_ms = ping.map_err(|_| anyhow::anyhow!("ping thread panicked"))??;
    let (bg, be) = (
        bg.context("background download")?,
        be.context("best-effort download")?,
    );
    report.best_effort_beside_background_mbps = be.goodput_mbps_between(from, to).context("no intervals")?;
    let offset = f64::from(p.head_start_secs);
    report.background_beside_best_effort_mbps = bg
        .goodput_mbps_between(offset + from, offset + to)
        .context("no intervals")?;
    report.rwnd_beside_best_effort = Summary::of(
        trace
            .iter()
            .filter(|s| s.t >= offset + from && s.t <= offset + to)
            .map(|s| s.rwnd_bytes),
    );
    report.trace_together = trace;
    Ok(report)
}

/// Starts one download per `(LAN host, server port)` from the first server, all at once (the
/// ports' iperf3 servers must run). One iperf3 per flow rather than `-P`: each flow gets its own
/// goodput series and its own connection failure.
pub fn start_downloads(tb: &Testbed, flows: &[(u8, u16)], secs: u32, cc: &str) -> Result<Vec<IperfRun>> {
    flows
        .iter()
        .map(|&(client, port)| tb.run_iperf(IperfEnds { client, server: 1 }, port, secs, cc, true, &[]))
        .collect()
}

/// Waits for every run. A flow that failed (could not connect, iperf3 error, timeout) is `None`,
/// with its message in the second list: with 16 flows, a test wants the count, not the first.
pub fn wait_all(runs: Vec<IperfRun>) -> (Vec<Option<IperfResult>>, Vec<String>) {
    let mut errors = Vec::new();
    let results = runs
        .into_iter()
        .map(|r| r.wait().map_err(|e| errors.push(format!("{e:#}"))).ok())
        .collect();
    (results, errors)
}

/// TCP resets the isp forwards during the next `secs` seconds (blocks that long). Run it beside
/// transfers, ending before the first of them does and starting after [`settle`]: iperf3 resets
/// at a download's end by itself (its receiver closes with data in flight, and each segment still
/// arriving draws a reset, for up to an RTT plus the queue).
pub fn resets_during(tb: &Testbed, secs: f64) -> Result<u64> {
    let before = tb.tcp_resets()?;
    std::thread::sleep(Duration::from_secs_f64(secs.max(0.0)));
    Ok(tb.tcp_resets()?.saturating_sub(before))
}

/// Waits a second between phases: the previous one's last data and end resets pass, and its
/// queue drains.
pub fn settle() {
    std::thread::sleep(Duration::from_secs(1));
}

/// Jain's fairness index `(Σx)² / (n · Σx²)`: 1 when all are equal, 1/n when one takes all;
/// `None` for no values or all zero.
pub fn jain_index(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq))
}

/// Each flow's fair fraction of the background total under household control: equal per LAN
/// host, then equal among that host's flows. `hosts[i]` is flow i's LAN host.
pub fn host_fair_shares(hosts: &[u8]) -> Vec<f64> {
    let mut distinct = hosts.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let per_host = 1.0 / distinct.len().max(1) as f64;
    hosts
        .iter()
        .map(|h| per_host / hosts.iter().filter(|x| *x == h).count() as f64)
        .collect()
}

/// Jain's index of each flow's goodput relative to its fair share ([`host_fair_shares`]; Jain,
/// Chiu & Hawe 1984 normalise by the optimal allocation the same way). With one flow on one host
/// and 15 on another, plain Jain over the flows would punish exactly the per-host split household
/// control aims for; this is 1 when every flow gets its host-fair share.
pub fn host_fair_jain(goodputs: &[f64], hosts: &[u8]) -> Option<f64> {
    let x: Vec<f64> = goodputs
        .iter()
        .zip(host_fair_shares(hosts))
        .map(|(g, s)| g / s)
        .collect();
    jain_index(&x)
}

/// Total goodput of each LAN host's flows, by host number (ascending).
pub fn per_host_totals(goodputs: &[f64], hosts: &[u8]) -> Vec<(u8, f64)> {
    let mut out: Vec<(u8, f64)> = Vec::new();
    for (g, &h) in goodputs.iter().zip(hosts) {
        match out.iter_mut().find(|(x, _)| *x == h) {
            Some((_, total)) => *total += g,
            None => out.push((h, *g)),
        }
    }
    out.sort_by_key(|(h, _)| *h);
    out
}

/// Largest host total over the smallest (1 = every host got the same); `None` for fewer than two
/// hosts or a host with nothing.
pub fn host_ratio(totals: &[(u8, f64)]) -> Option<f64> {
    let max = totals.iter().map(|t| t.1).fold(f64::NEG_INFINITY, f64::max);
    let min = totals.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
    (totals.len() >= 2 && min > 0.0).then(|| max / min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fairness_measures() {
        assert_eq!(jain_index(&[1.0, 1.0]), Some(1.0));
        assert_eq!(jain_index(&[1.0, 0.0]), Some(0.5));
        assert_eq!(jain_index(&[]), None);
        let hosts = [1, 2, 2, 2];
        assert_eq!(
            host_fair_shares(&hosts),
            vec![0.5, 0.5 / 3.0, 0.5 / 3.0, 0.5 / 3.0]
        );
        // Host-fair: host 1's one flow gets what host 2's three get together.
        let g = [3.0, 1.0, 1.0, 1.0];
        assert!((host_fair_jain(&g, &hosts).unwrap() - 1.0).abs() < 1e-12);
        assert!(jain_index(&g).unwrap() < 0.8);
        // Flow-fair is not host-fair.
        assert!(host_fair_jain(&[1.0; 4], &hosts).unwrap() < 0.9);
        let totals = per_host_totals(&g, &hosts);
        assert_eq!(totals, vec![(1, 3.0), (2, 3.0)]);
        assert_eq!(host_ratio(&totals), Some(1.0));
        assert_eq!(host_ratio(&[(1, 2.0), (2, 1.0)]), Some(2.0));
        assert_eq!(host_ratio(&[(1, 2.0)]), None);
    }
}
