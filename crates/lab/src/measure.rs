//! Pure parsers of what the lab samples, each unit-tested with captured text:
//!
//! * `ping -D -i 0.1` lines → `(unix time, rtt ms)`;
//! * `ss -tinH` output (the server's sockets, polled every 100 ms) → per-socket cwnd, mss, rtt,
//!   byte counters;
//! * the block stream of a polling shell loop (`@@ <unix time>` separators, see
//!   [`poll_script`]);
//! * iperf3 JSON → a goodput series (via the testbed's parser).

use slipstream_testbed::iperf::IperfResult;

/// One `ping -D` reply: `(unix seconds, rtt ms, icmp_seq)`.
pub fn parse_ping_line(line: &str) -> Option<(f64, f64, u32)> {
    // "[1700000000.123456] 64 bytes from 10.77.1.2: icmp_seq=1 ttl=62 time=100 ms"
    let rest = line.trim().strip_prefix('[')?;
    let (ts, rest) = rest.split_once(']')?;
    let unix: f64 = ts.trim().parse().ok()?;
    let mut rtt = None;
    let mut seq = None;
    for tok in rest.split_whitespace() {
        if let Some(v) = tok.strip_prefix("time=") {
            rtt = v.parse().ok();
        } else if let Some(v) = tok.strip_prefix("icmp_seq=") {
            seq = v.parse().ok();
        }
    }
    Some((unix, rtt?, seq?))
}

/// One TCP socket from `ss -tinH`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SsSocket {
    /// Local `addr:port`.
    pub local: String,
    /// Peer `addr:port`.
    pub peer: String,
    /// Local port.
    pub local_port: u16,
    /// Peer port.
    pub peer_port: u16,
    /// Congestion control name ("cubic", "reno", "bbr").
    pub cc: Option<String>,
    /// Congestion window in segments.
    pub cwnd: Option<u64>,
    /// Sender MSS, bytes.
    pub mss: Option<u64>,
    /// Smoothed RTT, ms.
    pub rtt_ms: Option<f64>,
    /// Slow-start threshold, segments.
    pub ssthresh: Option<u64>,
    /// Bytes sent, retransmissions included (sender side).
    pub bytes_sent: Option<u64>,
    /// Bytes acked by the peer (sender side).
    pub bytes_acked: Option<u64>,
    /// Bytes received (receiver side).
    pub bytes_received: Option<u64>,
    /// Retransmitted bytes.
    pub bytes_retrans: Option<u64>,
    /// Peer's advertised window as the sender sees it, bytes.
    pub snd_wnd: Option<u64>,
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
        self.bytes_acked
            .unwrap_or(0)
            .max(self.bytes_received.unwrap_or(0))
    }
}

fn port_of(endpoint: &str) -> u16 {
    endpoint
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(0)
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
            out.push(SsSocket {
                local: local.to_string(),
                peer: peer.to_string(),
                local_port: port_of(local),
                peer_port: port_of(peer),
                ..Default::default()
            });
            continue;
        }
        let Some(s) = out.last_mut() else { continue };
        for (i, tok) in toks.iter().enumerate() {
            if i == 0
                && matches!(
                    *tok,
                    "cubic" | "reno" | "bbr" | "bbr2" | "vegas" | "htcp" | "bic" | "dctcp"
                )
            {
                s.cc = Some(tok.to_string());
                continue;
            }
            let Some((k, v)) = tok.split_once(':') else {
                continue;
            };
            let num = || v.parse::<u64>().ok();
            match k {
                "cwnd" => s.cwnd = num(),
                "mss" => s.mss = num(),
                "ssthresh" => s.ssthresh = num(),
                "bytes_sent" => s.bytes_sent = num(),
                "bytes_acked" => s.bytes_acked = num(),
                "bytes_received" => s.bytes_received = num(),
                "bytes_retrans" => s.bytes_retrans = num(),
                "snd_wnd" => s.snd_wnd = num(),
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

/// Marker that starts each block of a polling loop's output.
pub const BLOCK_MARK: &str = "@@";

/// `sh -c` script running `command` every `interval_s`, each output preceded by
/// `@@ <unix time>` (from `date +%s.%N`, taken just before the command). The sleep runs beside
/// the command, so a sample starts every `interval_s` (or as soon as a slower command ends),
/// not every `interval_s` plus the command's own time.
pub fn poll_script(command: &str, interval_s: f64) -> String {
    format!("while :; do echo \"{BLOCK_MARK} $(date +%s.%N)\"; sleep {interval_s} & {command}; wait; done")
}

/// Incremental splitter of a polling loop's output into `(unix time, block text)`.
#[derive(Debug, Default)]
pub struct BlockSplitter {
    current: Option<(f64, String)>,
}

impl BlockSplitter {
    /// Feeds one line; returns the previous block when a new one starts.
    pub fn push_line(&mut self, line: &str) -> Option<(f64, String)> {
        if let Some(ts) = line.strip_prefix(BLOCK_MARK) {
            let t = ts.trim().parse().ok()?;
            return self.current.replace((t, String::new()));
        }
        if let Some((_, text)) = self.current.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
        None
    }

    /// The last (possibly incomplete) block.
    pub fn finish(self) -> Option<(f64, String)> {
        self.current
    }
}

/// Receiver goodput series (Mbit/s) of an iperf3 run: `(offset + interval midpoint, rate)` for
/// every non-omitted interval. (A rate over an interval belongs to the interval's middle: a
/// window `[t0, t1)` then takes the intervals that lie in it.)
pub fn iperf_goodput_series(r: &IperfResult, offset_s: f64) -> Vec<(f64, f64)> {
    r.intervals
        .iter()
        .filter(|iv| !iv.omitted && iv.end > iv.start)
        .map(|iv| {
            (
                offset_s + (iv.start + iv.end) / 2.0,
                iv.bytes as f64 * 8.0 / (iv.end - iv.start) / 1e6,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_lines() {
        let l = "[1700000000.123456] 64 bytes from 10.77.1.2: icmp_seq=17 ttl=62 time=104.3 ms";
        assert_eq!(parse_ping_line(l), Some((1_700_000_000.123456, 104.3, 17)));
        assert_eq!(
            parse_ping_line("[1700000000.5] 64 bytes from 10.77.1.2: icmp_seq=2 ttl=62 time=100 ms"),
            Some((1_700_000_000.5, 100.0, 2))
        );
        assert_eq!(
            parse_ping_line("PING 10.77.1.2 (10.77.1.2) 56(84) bytes of data."),
            None
        );
        assert_eq!(
            parse_ping_line("[1700000000.1] From 10.77.2.1 icmp_seq=3 Destination Host Unreachable"),
            None
        );
    }

    // Captured from `ip netns exec <srv> ss -tinH` during a download (kernel 6.x, iproute2 6.1).
    const SS_SAMPLE: &str = "ESTAB 0      0      10.77.1.2:6881 10.77.3.2:39214\n\
\t cubic wscale:7,7 rto:304 rtt:101.012/0.35 ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:10 bytes_sent:37 bytes_acked:38 bytes_received:145 segs_out:8 segs_in:10 data_segs_out:4 data_segs_in:4 send 1.15Mbps lastsnd:2100 lastrcv:2100 lastack:1996 pacing_rate 2.29Mbps delivery_rate 5.7Kbps delivered:5 app_limited busy:404ms rcv_space:14480 rcv_ssthresh:64088 minrtt:100.3 snd_wnd:64256\n\
ESTAB 0      180968 10.77.1.2:6881 10.77.3.2:39224\n\
\t cubic wscale:7,7 rto:356 rtt:155.442/8.112 ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:118 ssthresh:86 bytes_sent:2379064 bytes_retrans:4344 bytes_acked:2196008 bytes_received:37 segs_out:1645 segs_in:784 data_segs_out:1644 data_segs_in:1 send 8.79Mbps lastsnd:4 lastrcv:2096 lastack:4 pacing_rate 10.5Mbps delivery_rate 9.45Mbps delivered:1518 busy:2092ms unacked:124 retrans:0/3 rcv_space:14480 rcv_ssthresh:64088 notsent:1448 minrtt:100.2 snd_wnd:250240\n";

    #[test]
    fn ss_sockets() {
        let s = parse_ss(SS_SAMPLE);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].local_port, 6881);
        assert_eq!(s[0].peer_port, 39214);
        assert_eq!(s[0].cwnd, Some(10));
        assert_eq!(s[0].bytes(), 145);
        let d = &s[1];
        assert_eq!(d.cc.as_deref(), Some("cubic"));
        assert_eq!(d.cwnd, Some(118));
        assert_eq!(d.mss, Some(1448));
        assert_eq!(d.cwnd_bytes(), Some(118 * 1448));
        assert_eq!(d.ssthresh, Some(86));
        assert_eq!(d.rtt_ms, Some(155.442));
        assert_eq!(d.bytes_acked, Some(2_196_008));
        assert_eq!(d.bytes_retrans, Some(4344));
        assert_eq!(d.snd_wnd, Some(250_240));
        assert_eq!(d.unacked, Some(124));
        assert_eq!(s[0].unacked, None);
        // Without the State column (`state established` filter) and with IPv6 endpoints.
        let v6 =
            "0 0 [fd77:1::2]:5201 [fd77:3::2]:40000\n\t reno cwnd:7 mss:1428 rtt:100.5/1 bytes_acked:10\n";
        let s = parse_ss(v6);
        assert_eq!(
            (s[0].local_port, s[0].peer_port, s[0].cwnd),
            (5201, 40000, Some(7))
        );
        assert_eq!(s[0].cc.as_deref(), Some("reno"));
        assert!(parse_ss("").is_empty());
    }

    #[test]
    fn blocks() {
        let mut s = BlockSplitter::default();
        assert_eq!(s.push_line("junk before"), None);
        assert_eq!(s.push_line("@@ 100.5"), None);
        assert_eq!(s.push_line("a"), None);
        assert_eq!(s.push_line("b"), None);
        assert_eq!(s.push_line("@@ 100.6"), Some((100.5, "a\nb\n".into())));
        assert_eq!(s.finish(), Some((100.6, String::new())));
        assert_eq!(
            poll_script("ss -tinH", 0.1),
            "while :; do echo \"@@ $(date +%s.%N)\"; sleep 0.1 & ss -tinH; wait; done"
        );
    }

    #[test]
    fn data_start_is_between_the_samples_around_the_first_data() {
        let sock = |peer: u16, sent: u64| SsSocket {
            local_port: 6881,
            peer_port: peer,
            bytes_sent: Some(sent),
            ..Default::default()
        };
        let ss = vec![
            (0.9, vec![sock(40000, 5_000_000)]), // an earlier connection, before `after`
            (1.1, vec![]),
            (1.2, vec![sock(40002, 0)]),  // connected, no data yet
            (1.3, vec![sock(40002, 37)]), // the cookie is not data
            (1.4, vec![sock(40002, 30_000), sock(40000, 9)]),
        ];
        let t = data_start(&ss, 6881, 40002, 1.0, |s| s.bytes_sent).unwrap();
        assert!((t - 1.35).abs() < 1e-9, "{t}");
        assert_eq!(data_start(&ss, 6881, 40003, 1.0, |s| s.bytes_sent), None);
        assert_eq!(data_start(&ss, 6881, 40002, 1.0, |s| s.bytes_received), None);
    }

    #[test]
    fn goodput_points_sit_at_interval_midpoints() {
        let iv = |start: f64, end: f64, bytes: u64, omitted: bool| slipstream_testbed::Interval {
            start,
            end,
            bytes,
            bits_per_second: 0.0,
            omitted,
        };
        let r = IperfResult {
            goodput_mbps: 0.0,
            intervals: vec![
                iv(0.0, 0.1, 0, true),
                iv(0.1, 0.2, 125_000, false),
                iv(0.2, 0.25, 0, false),
            ],
            local_port: None,
            remote_port: None,
            retransmits: None,
            raw: serde_json::Value::Null,
        };
        let pts = iperf_goodput_series(&r, 10.0);
        assert_eq!(pts.len(), 2, "omitted intervals are left out");
        assert!((pts[0].0 - 10.15).abs() < 1e-9 && (pts[0].1 - 10.0).abs() < 1e-9);
        assert!((pts[1].0 - 10.225).abs() < 1e-9 && pts[1].1 == 0.0);
    }
}
