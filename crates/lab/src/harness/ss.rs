//! Sender state: `ss -tinH` polled every 100 ms in the server namespace. Per flow (the socket on
//! the flow's server port with the most bytes, i.e. the data connection rather than iperf3's
//! control one): `cwnd` (bytes, cwnd × mss), `inflight` (bytes, unacked × mss: what a window
//! clamp actually limits) and `ss_rtt` (ms); the progress line shows the rate of the byte
//! counters.

use std::process::Command;

use slipstream_testbed::{Ns, Testbed};

use super::poller::{Periodic, Samples};
use super::spec::Direction;
use crate::analysis;
use crate::measure::{parse_ss, SsSocket};
use crate::result::{Role, Series, Unit};

/// `(t, sockets)` samples.
pub(super) type SsSamples = Samples<Vec<SsSocket>>;

/// `ss -tinH` run every 100 ms from a thread in the server namespace.
pub(super) struct SsSampler(Periodic<Vec<SsSocket>>);

impl SsSampler {
    /// Starts polling the server namespace; times count from `t0_unix`.
    pub(super) fn start(tb: &Testbed, t0_unix: f64) -> SsSampler {
        SsSampler(Periodic::start(Some(tb.ns_name(Ns::Server)), t0_unix, || {
            let out = Command::new("ss").arg("-tinH").output().ok()?;
            Some(parse_ss(&String::from_utf8_lossy(&out.stdout)))
        }))
    }

    /// Current sender-side rate (Mbit/s) of everything on server `port`, from the last two
    /// samples.
    pub(super) fn live_rate(&self, port: u16) -> Option<f64> {
        let s = self.0.samples();
        let last = s[s.len().saturating_sub(2)..].iter();
        let counter: Vec<(f64, f64)> = last.map(|(t, socks)| (*t, port_bytes(socks, port) as f64)).collect();
        analysis::rate_from_counter(&counter).pop().map(|(_, rate)| rate)
    }

    /// Stops polling; the samples.
    pub(super) fn finish(self) -> SsSamples {
        self.0.finish()
    }
}

/// The bytes of every socket on server `port`.
fn port_bytes(socks: &[SsSocket], port: u16) -> u64 {
    socks.iter().filter(|s| s.local_port == port).map(SsSocket::bytes).sum()
}

/// The sender-side series of the flow `label` on server `port`.
pub(super) fn flow_series(
    samples: &SsSamples,
    label: &str,
    role: Role,
    port: u16,
    dir: Direction,
) -> Vec<Series> {
    if dir == Direction::Upload {
        // The server socket of an upload is the receiver: its cwnd/rtt say nothing.
        return Vec::new();
    }
    let (mut cwnd, mut rtt, mut inflight) = (Vec::new(), Vec::new(), Vec::new());
    for (t, socks) in samples {
        let Some(s) = socks.iter().filter(|s| s.local_port == port).max_by_key(|s| s.bytes()) else {
            continue;
        };
        if let Some(c) = s.cwnd_bytes() {
            cwnd.push((*t, c as f64));
        }
        if let Some(m) = s.mss {
            inflight.push((*t, (s.unacked.unwrap_or(0) * m) as f64));
        }
        if let Some(r) = s.rtt_ms {
            rtt.push((*t, r));
        }
    }
    [("cwnd", Unit::Bytes, cwnd), ("ss_rtt", Unit::Ms, rtt), ("inflight", Unit::Bytes, inflight)]
        .into_iter()
        .filter(|(_, _, pts)| !pts.is_empty())
        .map(|(name, unit, pts)| Series::new(name, unit, label, role, "server-ss").with_points(pts))
        .collect()
}
