//! QUIC bulk transfers (`slipstream-quic`, issue 24): the receiver's byte counting, the JSON the
//! client prints, and running the client in a namespace.
//!
//! Why it exists: a background QUIC flow is UDP with its own congestion control and no window the
//! router could clamp, so the lab must measure a real QUIC stack's goodput and losses beside TCP.
//! The result converts into an [`IperfResult`] so the lab's goodput series, phases and tables treat
//! a QUIC flow like an iperf3 one; the sender's path statistics (lost and sent packets, congestion
//! events, RTT) ride along in [`QuicResult::path`].

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::iperf::{Interval, IperfResult, IperfRun};
use crate::{cmd, IperfEnds, Ns, Testbed};

/// Width of the receiver's counting intervals, s (as the lab's iperf3 `--interval 0.1`).
pub const INTERVAL_S: f64 = 0.1;

/// The receiver's byte count per fixed-width interval since its clock's start.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalCounter {
    width_s: f64,
    bytes: Vec<u64>,
}

impl IntervalCounter {
    /// Counts in intervals of `width_s` seconds.
    pub fn new(width_s: f64) -> IntervalCounter {
        IntervalCounter {
            width_s,
            bytes: Vec::new(),
        }
    }

    /// Counts `n` bytes that arrived `at_s` seconds after the start.
    pub fn add(&mut self, at_s: f64, n: u64) {
        let i = (at_s.max(0.0) / self.width_s) as usize;
        if self.bytes.len() <= i {
            self.bytes.resize(i + 1, 0);
        }
        self.bytes[i] += n;
    }

    /// Total bytes counted.
    pub fn total(&self) -> u64 {
        self.bytes.iter().sum()
    }

    /// The intervals up to `end_s` (the last one cut at `end_s`; bytes counted after it are
    /// added to the last interval, as arriving data in flight at the end).
    pub fn intervals(&self, end_s: f64) -> Vec<Interval> {
        let n = ((end_s / self.width_s).ceil() as usize).max(1);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let start = i as f64 * self.width_s;
            let end = ((i + 1) as f64 * self.width_s).min(end_s).max(start);
            let mut bytes = self.bytes.get(i).copied().unwrap_or(0);
            if i + 1 == n {
                bytes += self.bytes.iter().skip(n).sum::<u64>();
            }
            let len = end - start;
            let bits_per_second = if len > 0.0 { bytes as f64 * 8.0 / len } else { 0.0 };
            out.push(Interval {
                start,
                end,
                bytes,
                bits_per_second,
                omitted: false,
            });
        }
        out
    }
}

/// The sender's view of the path (quinn's `PathStats`) when the transfer ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathStats {
    /// Smoothed RTT, ms.
    pub rtt_ms: f64,
    /// Smallest RTT seen, ms.
    pub min_rtt_ms: f64,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Times the congestion controller reacted to a loss or CE mark.
    pub congestion_events: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Bytes in the packets declared lost.
    pub lost_bytes: u64,
    /// Packets sent.
    pub sent_packets: u64,
    /// Path MTU in use, bytes (UDP payload).
    pub current_mtu: u64,
}

impl PathStats {
    /// As JSON (the field names above).
    pub fn to_json(&self) -> Value {
        json!({
            "rtt_ms": self.rtt_ms,
            "min_rtt_ms": self.min_rtt_ms,
            "cwnd": self.cwnd,
            "congestion_events": self.congestion_events,
            "lost_packets": self.lost_packets,
            "lost_bytes": self.lost_bytes,
            "sent_packets": self.sent_packets,
            "current_mtu": self.current_mtu,
        })
    }

    /// From [`PathStats::to_json`]'s form.
    pub fn from_json(v: &Value) -> Result<PathStats> {
        let u = |k: &str| {
            v.get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| anyhow!("path stats lack {k}"))
        };
        let f = |k: &str| {
            v.get(k)
                .and_then(Value::as_f64)
                .ok_or_else(|| anyhow!("path stats lack {k}"))
        };
        Ok(PathStats {
            rtt_ms: f("rtt_ms")?,
            min_rtt_ms: f("min_rtt_ms")?,
            cwnd: u("cwnd")?,
            congestion_events: u("congestion_events")?,
            lost_packets: u("lost_packets")?,
            lost_bytes: u("lost_bytes")?,
            sent_packets: u("sent_packets")?,
            current_mtu: u("current_mtu")?,
        })
    }

    /// Lost packets over sent packets (the retransmission rate: QUIC resends lost data in new
    /// packets); `None` before anything was sent.
    pub fn loss_rate(&self) -> Option<f64> {
        (self.sent_packets > 0).then(|| self.lost_packets as f64 / self.sent_packets as f64)
    }
}

/// What `slipstream-quic client --json` prints.
#[derive(Debug, Clone)]
pub struct QuicResult {
    /// "download" or "upload".
    pub mode: String,
    /// The sender's congestion control ("cubic", "newreno", "bbr").
    pub cc: String,
    /// Application bytes the receiver got.
    pub bytes: u64,
    /// Length of the receiver's count, s.
    pub seconds: f64,
    /// The receiver's series, intervals of [`INTERVAL_S`].
    pub intervals: Vec<Interval>,
    /// The sender's path statistics at the end.
    pub path: PathStats,
    /// The whole JSON document.
    pub raw: Value,
}

impl QuicResult {
    /// The JSON document the client prints.
    pub fn to_json(mode: &str, cc: &str, seconds: f64, intervals: &[Interval], path: &PathStats) -> Value {
        let bytes: u64 = intervals.iter().map(|iv| iv.bytes).sum();
        let goodput = if seconds > 0.0 {
            bytes as f64 * 8.0 / seconds
        } else {
            0.0
        };
        let ivs: Vec<Value> = intervals
            .iter()
            .map(|iv| json!({"start": iv.start, "end": iv.end, "bytes": iv.bytes, "bits_per_second": iv.bits_per_second}))
            .collect();
        json!({
            "mode": mode,
            "cc": cc,
            "bytes": bytes,
            "seconds": seconds,
            "goodput_bps": goodput,
            "loss_rate": path.loss_rate(),
            "path": path.to_json(),
            "intervals": ivs,
        })
    }

    /// Parses the client's `--json` output.
    pub fn parse(text: &str) -> Result<QuicResult> {
        let raw: Value = serde_json::from_str(text).context("slipstream-quic output is not JSON")?;
        if let Some(e) = raw.get("error").and_then(Value::as_str) {
            bail!("slipstream-quic reported an error: {e}");
        }
        let s = |k: &str| {
            raw.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| anyhow!("no {k}"))
        };
        let mut intervals = Vec::new();
        for iv in raw
            .get("intervals")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let f = |k: &str| {
                iv.get(k)
                    .and_then(Value::as_f64)
                    .ok_or_else(|| anyhow!("interval without {k}"))
            };
            intervals.push(Interval {
                start: f("start")?,
                end: f("end")?,
                bytes: iv.get("bytes").and_then(Value::as_u64).unwrap_or(0),
                bits_per_second: f("bits_per_second").unwrap_or(0.0),
                omitted: false,
            });
        }
        Ok(QuicResult {
            mode: s("mode")?,
            cc: s("cc")?,
            bytes: raw
                .get("bytes")
                .and_then(Value::as_u64)
                .ok_or_else(|| anyhow!("no bytes"))?,
            seconds: raw
                .get("seconds")
                .and_then(Value::as_f64)
                .ok_or_else(|| anyhow!("no seconds"))?,
            path: PathStats::from_json(raw.get("path").ok_or_else(|| anyhow!("no path"))?)?,
            intervals,
            raw,
        })
    }

    /// Goodput over the whole transfer, bit/s.
    pub fn goodput_bps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }

    /// The same numbers as an [`IperfResult`] (goodput, intervals; `retransmits` = packets the
    /// sender declared lost), for code written for iperf3 flows. `raw` is this JSON.
    pub fn into_iperf(self) -> IperfResult {
        IperfResult {
            goodput_mbps: self.goodput_bps() / 1e6,
            intervals: self.intervals,
            local_port: None,
            remote_port: None,
            retransmits: Some(self.path.lost_packets),
            raw: self.raw,
        }
    }
}

/// The QUIC client's arguments (without the program): `download` = the server sends.
pub fn client_args(server: &str, port: u16, seconds: u32, download: bool, cc: Option<&str>) -> Vec<String> {
    let mut v = vec![
        "client".into(),
        "--connect".into(),
        format!("{server}:{port}"),
        "--seconds".into(),
        seconds.to_string(),
        if download { "--download" } else { "--upload" }.into(),
        "--json".into(),
    ];
    if let Some(cc) = cc {
        v.extend(["--cc".into(), cc.into()]);
    }
    v
}

impl Testbed {
    /// Starts a `slipstream-quic` server (`bin`) on UDP `port` in `ns` (owned; waits until
    /// bound), its sender using congestion control `cc`.
    pub fn start_quic_server_in(&self, bin: &std::path::Path, ns: Ns, port: u16, cc: &str) -> Result<()> {
        let listen = format!("0.0.0.0:{port}");
        let args = [
            bin.as_os_str(),
            "server".as_ref(),
            "--listen".as_ref(),
            listen.as_ref(),
            "--cc".as_ref(),
            cc.as_ref(),
        ];
        let pid = self.spawn_owned(ns, &format!("quic-server-{}-{port}", ns.suffix()), &args)?;
        let filter = format!("sport = :{port}");
        let bound = cmd::wait_until(Duration::from_secs(5), || {
            self.run_in(ns, &["ss", "-Hlun", &filter])
                .is_ok_and(|o| !o.trim().is_empty())
        });
        if !bound {
            bail!("slipstream-quic server (pid {pid}) not bound to UDP port {port} after 5 s");
        }
        Ok(())
    }

    /// Starts a QUIC transfer of `seconds` between LAN host `ends.client` and server
    /// `ends.server` (whose `slipstream-quic` server must listen on `port`). Its
    /// [`IperfRun::wait`] parses the output as a [`QuicResult`] turned into an [`IperfResult`].
    pub fn run_quic(
        &self,
        bin: &std::path::Path,
        ends: IperfEnds,
        port: u16,
        seconds: u32,
        download: bool,
    ) -> Result<IperfRun> {
        let server = self.server_addr_of(ends.server, false).to_string();
        let mut args = vec![bin.as_os_str().to_owned()];
        args.extend(
            client_args(&server, port, seconds, download, None)
                .into_iter()
                .map(Into::into),
        );
        let mut c = self.exec(Ns::client(ends.client), &args);
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let desc = cmd::describe(&c);
        let child = c.spawn().with_context(|| format!("spawning `{desc}`"))?;
        Ok(IperfRun::with_parser(
            child,
            Duration::from_secs(u64::from(seconds) + 30),
            desc,
            |out| QuicResult::parse(out).map(QuicResult::into_iperf),
        ))
    }
}

#[cfg(test)]
#[path = "quic_tests.rs"]
mod tests;
