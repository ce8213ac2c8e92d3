//! Sender state: `ss -tinH` polled every 100 ms in the server namespace. Per flow (the socket on
//! the flow's server port with the most bytes, i.e. the data connection rather than iperf3's
//! control one): `cwnd` (bytes, cwnd × mss), `inflight` (bytes, unacked × mss: what a window
//! clamp actually limits) and `ss_rtt` (ms); the progress line shows the rate of the byte
//! counters.

use std::collections::BTreeSet;
use std::process::Command;

use slipstream_testbed::{Ns, Testbed};

use super::poller::{Periodic, Samples};
use crate::analysis;
use crate::result::{Role, Series, Unit};

/// `(t, sockets)` samples.
pub(super) type SsSamples = Samples<Vec<SsSocket>>;

/// Starts `ss -tinH` every 100 ms in the server namespace; times count from `t0_unix`.
pub(super) fn start(tb: &Testbed, t0_unix: f64) -> Periodic<Vec<SsSocket>> {
    Periodic::start(Some(tb.ns_name(Ns::Server)), t0_unix, || {
        let out = Command::new("ss").arg("-tinH").output().ok()?;
        Some(parse_ss(&String::from_utf8_lossy(&out.stdout)))
    })
}

/// Current sender-side rate (Mbit/s) of everything on the server `ports`, from the last two
/// samples (`None` before two samples).
pub(super) fn live_rate(sampler: &Periodic<Vec<SsSocket>>, ports: &BTreeSet<u16>) -> Option<f64> {
    let s = sampler.samples();
    let last = s[s.len().saturating_sub(2)..].iter();
    let bytes = |socks: &[SsSocket]| {
        socks.iter().filter(|s| ports.contains(&s.local_port)).map(SsSocket::bytes).sum::<u64>()
    };
    let counter: Vec<(f64, f64)> = last.map(|(t, socks)| (*t, bytes(socks) as f64)).collect();
    analysis::rate_from_counter(&counter).pop().map(|(_, rate)| rate)
}

/// The sender-side series of the flow `label` on server `port`.
pub(super) fn flow_series(
    samples: &SsSamples,
    label: &str,
    role: Role,
    port: u16,
    download: bool,
) -> Vec<Series> {
    if !download {
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

/// One TCP socket from `ss -tinH`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SsSocket {
    pub local_port: u16,
    pub peer_port: u16,
    /// Congestion window in segments.
    pub cwnd: Option<u64>,
    /// Sender MSS, bytes.
    pub mss: Option<u64>,
    /// Smoothed RTT, ms.
    pub rtt_ms: Option<f64>,
    /// Bytes sent, retransmissions included (sender side).
    pub bytes_sent: Option<u64>,
    /// Bytes acked by the peer (sender side).
    pub bytes_acked: Option<u64>,
    /// Bytes received (receiver side).
    pub bytes_received: Option<u64>,
    /// Segments in flight (sent, not yet acked).
    pub unacked: Option<u64>,
}

impl SsSocket {
    /// cwnd in bytes (`cwnd × mss`).
    pub fn cwnd_bytes(&self) -> Option<u64> {
        Some(self.cwnd? * self.mss?)
    }

    /// The larger byte counter (sent-and-acked or received): the socket's progress either way.
    pub fn bytes(&self) -> u64 {
        self.bytes_acked.unwrap_or(0).max(self.bytes_received.unwrap_or(0))
    }
}

/// Port of an `addr:port` endpoint (0 if none).
pub fn port_of(endpoint: &str) -> u16 {
    endpoint.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(0)
}

/// Parses `ss -tinH` (no header, with or without the State column): a socket line with the two
/// endpoints, followed by an indented line of `key:value` details.
pub fn parse_ss(text: &str) -> Vec<SsSocket> {
    let mut out: Vec<SsSocket> = Vec::new();
    for line in text.lines() {
        if !line.starts_with(|c: char| c.is_whitespace()) {
            // [State] Recv-Q Send-Q Local Peer: the first two columns with a port.
            let mut ends = line.split_whitespace().filter(|t| t.contains(':')).map(port_of);
            if let (Some(local_port), Some(peer_port)) = (ends.next(), ends.next()) {
                out.push(SsSocket { local_port, peer_port, ..Default::default() });
            }
            continue;
        }
        let Some(s) = out.last_mut() else { continue };
        for tok in line.split_whitespace() {
            let Some((k, v)) = tok.split_once(':') else {
                continue;
            };
            let num = || v.parse::<u64>().ok();
            match k {
                "cwnd" => s.cwnd = num(),
                "mss" => s.mss = num(),
                "bytes_sent" => s.bytes_sent = num(),
                "bytes_acked" => s.bytes_acked = num(),
                "bytes_received" => s.bytes_received = num(),
                "unacked" => s.unacked = num(),
                "rtt" => s.rtt_ms = v.split('/').next().and_then(|r| r.parse().ok()),
                _ => {}
            }
        }
    }
    out
}

/// Bytes a data connection must have carried before it counts as started: more than iperf3's
/// 37-byte cookie, less than one full segment.
pub const DATA_START_BYTES: u64 = 1000;

/// When the data of a TCP connection began, from the server's `ss` samples: the midpoint
/// between the last sample before and the first sample after its counter `bytes` (sent for a
/// server that sends, received for one that receives) passed [`DATA_START_BYTES`]. The socket
/// is the one on `server_port` whose peer is `peer_port`; samples before `after` are ignored.
/// `None` if no sample shows the connection's data.
pub fn data_start(
    ss: &[(f64, Vec<SsSocket>)],
    server_port: u16,
    peer_port: u16,
    after: f64,
    bytes: impl Fn(&SsSocket) -> Option<u64>,
) -> Option<f64> {
    let mut prev = after;
    for (t, socks) in ss.iter().filter(|(t, _)| *t >= after) {
        let started = socks.iter().any(|s| {
            s.local_port == server_port
                && s.peer_port == peer_port
                && bytes(s).is_some_and(|b| b > DATA_START_BYTES)
        });
        if started {
            return Some((prev + t) / 2.0);
        }
        prev = *t;
    }
    None
}

#[cfg(test)]
#[path = "ss_tests.rs"]
mod tests;
