//! Best-effort RTT: `ping -D -i 0.1` client → server (ICMP matches no background rule and no
//! HTB background filter). Its output goes to a file in the run directory, read when the run
//! ends: series `rtt` of flow `ping`.

use std::path::PathBuf;
use std::process::{Child, Stdio};

use anyhow::{Context, Result};
use slipstream_testbed::{Ns, Testbed};

use crate::result::{Role, Series, Unit};

/// The running ping and the file its output goes to.
pub(super) struct PingSampler {
    child: Child,
    out: PathBuf,
    t0_unix: f64,
}

impl PingSampler {
    /// Starts pinging the server, output to `out`; times count from `t0_unix`.
    pub(super) fn start(tb: &Testbed, out: PathBuf, t0_unix: f64) -> Result<PingSampler> {
        let dst = tb.server_addr(false).to_string();
        let file = std::fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?;
        let mut command = tb.exec(Ns::Client, &["ping", "-D", "-n", "-i", "0.1", "-W", "1", &dst]);
        command.stdin(Stdio::null()).stdout(file).stderr(Stdio::null());
        let child = command.spawn().context("starting ping")?;
        Ok(PingSampler { child, out, t0_unix })
    }

    /// Stops pinging; the series, if any reply came.
    pub(super) fn finish(self) -> Option<Series> {
        let (out, t0_unix) = (self.out.clone(), self.t0_unix);
        drop(self);
        let text = std::fs::read_to_string(out).unwrap_or_default();
        let rtt = |(unix, rtt): (f64, f64)| (unix - t0_unix, rtt);
        let points: Vec<(f64, f64)> = text.lines().filter_map(parse_ping_line).map(rtt).collect();
        (!points.is_empty())
            .then(|| Series::new("rtt", Unit::Ms, "ping", Role::Probe, "ping").with_points(points))
    }
}

/// Stops pinging.
impl Drop for PingSampler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `ping -D` reply: `(unix seconds, rtt ms)`.
pub fn parse_ping_line(line: &str) -> Option<(f64, f64)> {
    // "[1700000000.123456] 64 bytes from 10.77.1.2: icmp_seq=1 ttl=62 time=100 ms"
    let rest = line.trim().strip_prefix('[')?;
    let (ts, rest) = rest.split_once(']')?;
    let unix: f64 = ts.trim().parse().ok()?;
    let rtt = slipstream_testbed::cmd::ping_reply_rtt_ms(rest)?;
    Some((unix, rtt))
}

#[cfg(test)]
#[path = "ping_tests.rs"]
mod tests;
