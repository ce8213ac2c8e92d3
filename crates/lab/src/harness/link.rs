//! What each bottleneck delivered: the bytes its device sent (`/proc/net/dev`'s transmit count
//! of the download link's `isp-rtr` and the upload link's `wan0`), sampled every 100 ms in its
//! namespace, as series `link_tx` (Mbit/s over the last second, flows `download` and `upload`).
//!
//! Why: a goodput ratio against a reference phase is only as good as the reference. A link of
//! the testbed can deliver under its rate while a queue stands in its tbf: at 20 Mbit/s a
//! best-effort download alone was measured at 12-17 Mbit/s for 10 s with 22-73 ms in the tbf
//! (2026-12-01, on a 2-core virtual machine whose host was taking up to a third of its CPU
//! time: see `machine`). What the link delivered tells the testbed's shortfall from the
//! controller's.

use slipstream_testbed::{Ns, Testbed, ISP_DOWN_IF, ROUTER_WAN_IF};

use super::poller::{Periodic, Samples, POLL_INTERVAL_S};
use crate::result::{Role, RunResult, Series, Unit};

/// The samples a rate spans: one second.
const RATE_SAMPLES: usize = (1.0 / POLL_INTERVAL_S) as usize;

/// The two bottlenecks' samplers: `(flow name, sampler)`.
pub(super) struct LinkSamplers(Vec<(&'static str, Periodic<u64>)>);

/// Starts sampling both bottleneck devices; times count from `t0_unix`.
pub(super) fn start(tb: &Testbed, t0_unix: f64) -> LinkSamplers {
    let sampler = |ns: Ns, dev: &'static str| {
        Periodic::start(Some(tb.ns_name(ns)), t0_unix, move || {
            // The thread's own namespace (it entered it): /proc/self/net is the process's.
            let text = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
            tx_bytes(&text, dev)
        })
    };
    LinkSamplers(vec![
        ("download", sampler(Ns::Isp, ISP_DOWN_IF)),
        ("upload", sampler(Ns::Router, ROUTER_WAN_IF)),
    ])
}

impl LinkSamplers {
    /// Stops sampling; one series per link that had samples.
    pub(super) fn finish(self) -> Vec<Series> {
        self.0
            .into_iter()
            .filter_map(|(flow, sampler)| {
                let points = rates(&sampler.finish());
                (!points.is_empty()).then(|| {
                    Series::new("link_tx", Unit::Mbps, flow, Role::Link, "/proc/net/dev").with_points(points)
                })
            })
            .collect()
    }
}

/// What `link` ("download" or "upload") delivered of `rate_mbit` over `[a, b]` seconds of the
/// run: metric `link_use`. `None` where the run has no samples of it.
pub fn use_between(r: &RunResult, link: &str, rate_mbit: f64, (a, b): (f64, f64)) -> Option<f64> {
    let tx = r.series("link_tx", link)?.mean_between(a, b)?;
    Some(tx / rate_mbit)
}

/// The transmit byte count of device `dev` in a `/proc/net/dev` text.
pub fn tx_bytes(text: &str, dev: &str) -> Option<u64> {
    // "  wan0: 1234 10 0 0 0 0 0 0 5678 20 0 0 0 0 0 0": 8 receive fields, then transmit bytes.
    text.lines().find_map(|line| {
        let (name, counters) = line.split_once(':')?;
        (name.trim() == dev).then(|| counters.split_whitespace().nth(8)?.parse().ok())?
    })
}

/// Mbit/s over the last [`RATE_SAMPLES`] intervals at each sample from the second on.
pub fn rates(samples: &Samples<u64>) -> Vec<(f64, f64)> {
    samples
        .iter()
        .enumerate()
        .skip(1)
        .filter_map(|(i, &(t, bytes))| {
            let (t0, bytes0) = samples[i.saturating_sub(RATE_SAMPLES)];
            let seconds = t - t0;
            (seconds > 0.0 && bytes >= bytes0).then(|| (t, (bytes - bytes0) as f64 * 8.0 / seconds / 1e6))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transmit_bytes_of_the_named_device() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
isp-rtr: 5000 40 0 0 0 0 0 0 125000000 90000 0 0 0 0 0 0
  wan0: 7 1 0 0 0 0 0 0 42 2 0 0 0 0 0 0
";
        assert_eq!(tx_bytes(text, "isp-rtr"), Some(125_000_000));
        assert_eq!(tx_bytes(text, "wan0"), Some(42));
        assert_eq!(tx_bytes(text, "wan1"), None);
    }

    #[test]
    fn rates_span_a_second() {
        // 10 Mbit/s: 1.25 MB a second, 125 kB per 100 ms sample.
        let samples: Samples<u64> =
            (0..=20u32).map(|i| (f64::from(i) * 0.1, u64::from(i) * 125_000)).collect();
        let r = rates(&samples);
        assert_eq!(r.len(), 20);
        for (t, mbps) in r {
            assert!((mbps - 10.0).abs() < 1e-9, "{mbps} Mbit/s at {t} s");
        }
    }
}
