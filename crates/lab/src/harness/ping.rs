//! Best-effort RTT: `ping -D -i 0.1` client → server (ICMP matches no background rule and no
//! HTB background filter). Series `rtt` of flow `ping`.

use std::sync::{Arc, Mutex};

use anyhow::Result;
use slipstream_testbed::{Ns, Testbed};

use super::poller::{lock, Poller};
use crate::measure::parse_ping_line;
use crate::result::{Role, Series, Unit};

/// The running ping and its `(t, rtt ms)` samples.
pub(super) struct PingSampler {
    poller: Poller,
    points: Arc<Mutex<Vec<(f64, f64)>>>,
}

impl PingSampler {
    /// Starts pinging the server; times count from `t0_unix`.
    pub(super) fn start(tb: &Testbed, t0_unix: f64) -> Result<PingSampler> {
        let dst = tb.server_addr(false).to_string();
        let command = tb.exec(Ns::Client, &["ping", "-D", "-n", "-i", "0.1", "-W", "1", &dst]);
        let points = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&points);
        let poller = Poller::spawn(command, "ping", move |line| {
            if let Some((unix, rtt, _)) = parse_ping_line(line) {
                lock(&sink).push((unix - t0_unix, rtt));
            }
        })?;
        Ok(PingSampler { poller, points })
    }

    /// Stops pinging; the series, if any reply came.
    pub(super) fn finish(mut self) -> Option<Series> {
        self.poller.stop();
        let points = std::mem::take(&mut *lock(&self.points));
        (!points.is_empty())
            .then(|| Series::new("rtt", Unit::Ms, "ping", Role::Probe, "ping").with_points(points))
    }
}
