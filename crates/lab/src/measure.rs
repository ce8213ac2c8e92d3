//! Pure parsers of what the lab samples, each unit-tested with captured text:
//!
//! * `ping -D -i 0.1` lines → `(unix time, rtt ms)`;
//! * `ss -tinH` output (the server's sockets, polled every 100 ms) → per-socket cwnd, mss, rtt,
//!   byte counters;
//! * iperf3 JSON → a goodput series (via the testbed's parser).

use slipstream_testbed::iperf::IperfResult;

/// One `ping -D` reply: `(unix seconds, rtt ms)`.
pub fn parse_ping_line(line: &str) -> Option<(f64, f64)> {
    // "[1700000000.123456] 64 bytes from 10.77.1.2: icmp_seq=1 ttl=62 time=100 ms"
    let rest = line.trim().strip_prefix('[')?;
    let (ts, rest) = rest.split_once(']')?;
    let unix: f64 = ts.trim().parse().ok()?;
    let rtt = rest.split_whitespace().find_map(|tok| tok.strip_prefix("time=")?.parse().ok())?;
    Some((unix, rtt))
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
        if line.trim().is_empty() {
            continue;
        }
        let indented = line.starts_with(|c: char| c.is_whitespace());
        let toks: Vec<&str> = line.split_whitespace().collect();
        let looks_like_socket = !indented && toks.len() >= 4;
        if looks_like_socket {
            // [State] Recv-Q Send-Q Local Peer [Process]
            let start = usize::from(toks[0].parse::<u64>().is_err());
            let (Some(local), Some(peer)) = (toks.get(start + 2), toks.get(start + 3)) else {
                continue;
            };
            out.push(SsSocket { local_port: port_of(local), peer_port: port_of(peer), ..Default::default() });
            continue;
        }
        let Some(s) = out.last_mut() else { continue };
        for tok in &toks {
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

/// Receiver goodput series (Mbit/s) of an iperf3 run: `(offset + interval midpoint, rate)` for
/// every non-omitted interval. (A rate over an interval belongs to the interval's middle: a
/// window `[t0, t1)` then takes the intervals that lie in it.)
pub fn iperf_goodput_series(r: &IperfResult, offset_s: f64) -> Vec<(f64, f64)> {
    r.intervals
        .iter()
        .filter(|iv| !iv.omitted && iv.end > iv.start)
        .map(|iv| (offset_s + (iv.start + iv.end) / 2.0, iv.bytes as f64 * 8.0 / (iv.end - iv.start) / 1e6))
        .collect()
}

#[cfg(test)]
#[path = "measure_tests.rs"]
mod tests;
