//! iperf3 client runs and their JSON results.
//!
//! Why it exists: end-to-end tests judge Slipstream by the goodput of bulk downloads (a
//! background flow that should yield, a foreground flow that should not), often over a
//! sub-window after the clamp has settled. This module runs `iperf3 -c ... -J` in a namespace
//! (as a child so several can run concurrently), collects its stdout on a thread (so a long JSON
//! document can never block on a full pipe) and parses the receiver goodput, the per-interval
//! series and the client's local port of the data connection (to tie daemon metrics to flows).

use std::io::Read;
use std::process::Child;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// One `intervals[]` entry of iperf3's JSON (the `sum` over streams).
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// Seconds since the test start.
    pub start: f64,
    /// Seconds since the test start.
    pub end: f64,
    /// Bytes transferred (as seen by the local side: received bytes for `-R`).
    pub bytes: u64,
    /// `bits_per_second` as iperf3 reports it for this interval.
    pub bits_per_second: f64,
    /// True for intervals inside iperf3's `--omit` period.
    pub omitted: bool,
}

/// Parsed result of one iperf3 client run.
#[derive(Debug, Clone)]
pub struct IperfResult {
    /// Receiver goodput over the whole run, `end.sum_received.bits_per_second`, in Mbit/s.
    pub goodput_mbps: f64,
    /// Per-interval series (non-omitted and omitted; see [`Interval::omitted`]).
    pub intervals: Vec<Interval>,
    /// The client's local TCP port of the (first) data connection, `start.connected[0].local_port`.
    pub local_port: Option<u16>,
    /// The server's TCP port, `start.connected[0].remote_port`.
    pub remote_port: Option<u16>,
    /// Sender retransmits (`end.sum_sent.retransmits`; for `-R` this is the server's count).
    pub retransmits: Option<u64>,
    /// The whole JSON document, for anything not lifted into fields.
    pub raw: Value,
}

impl IperfResult {
    /// Parses iperf3 `-J` output. Fails if iperf3 reported an `error`.
    pub fn parse(json: &str) -> Result<IperfResult> {
        let raw: Value = serde_json::from_str(json).context("iperf3 output is not JSON")?;
        if let Some(err) = raw.get("error").and_then(Value::as_str) {
            bail!("iperf3 reported an error: {err}");
        }
        let goodput_bps = raw
            .pointer("/end/sum_received/bits_per_second")
            .and_then(Value::as_f64)
            .ok_or_else(|| anyhow!("iperf3 JSON lacks end.sum_received.bits_per_second"))?;
        // Goodput is what the receiver got: for downloads (-R) that is the client's own series;
        // for uploads it is the server's, which `--get-server-output` embeds.
        let receiver_intervals = raw
            .pointer("/server_output_json/intervals")
            .or_else(|| raw.get("intervals"));
        let mut intervals = Vec::new();
        for iv in receiver_intervals
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let sum = iv
                .get("sum")
                .ok_or_else(|| anyhow!("iperf3 interval without sum"))?;
            let num = |k: &str| sum.get(k).and_then(Value::as_f64);
            intervals.push(Interval {
                start: num("start").ok_or_else(|| anyhow!("interval without start"))?,
                end: num("end").ok_or_else(|| anyhow!("interval without end"))?,
                bytes: sum.get("bytes").and_then(Value::as_u64).unwrap_or(0),
                bits_per_second: num("bits_per_second").unwrap_or(0.0),
                omitted: sum.get("omitted").and_then(Value::as_bool).unwrap_or(false),
            });
        }
        let port = |k: &str| {
            raw.pointer(&format!("/start/connected/0/{k}"))
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())
        };
        Ok(IperfResult {
            goodput_mbps: goodput_bps / 1e6,
            local_port: port("local_port"),
            remote_port: port("remote_port"),
            retransmits: raw.pointer("/end/sum_sent/retransmits").and_then(Value::as_u64),
            intervals,
            raw,
        })
    }

    /// End time (s) of the last interval, i.e. the measured run length.
    pub fn run_end(&self) -> Option<f64> {
        self.intervals.last().map(|iv| iv.end)
    }

    /// Goodput in Mbit/s over `[t0, t1]` (seconds since the test start), from the interval
    /// series: each interval's bytes count in proportion to its overlap with the window.
    /// `None` if the window is empty or not covered by the series.
    pub fn goodput_mbps_between(&self, t0: f64, t1: f64) -> Option<f64> {
        goodput_mbps_between(&self.intervals, t0, t1)
    }

    /// Goodput in Mbit/s over the last `secs` seconds of the run.
    pub fn goodput_mbps_last(&self, secs: f64) -> Option<f64> {
        let end = self.run_end()?;
        self.goodput_mbps_between(end - secs, end)
    }

    /// The longest time the flow moved nothing: see [`longest_stall_secs`].
    pub fn longest_stall_secs(&self) -> f64 {
        longest_stall_secs(&self.intervals)
    }
}

/// The longest run of consecutive intervals (omitted ones aside) without a byte moved, in
/// seconds: a flow that took turns waits a few round trips at a time, a stalled one for seconds.
pub fn longest_stall_secs(intervals: &[Interval]) -> f64 {
    let mut longest: f64 = 0.0;
    let mut since: Option<f64> = None;
    for iv in intervals.iter().filter(|iv| !iv.omitted) {
        if iv.bytes == 0 {
            let start = *since.get_or_insert(iv.start);
            longest = longest.max(iv.end - start);
        } else {
            since = None;
        }
    }
    longest
}

/// See [`IperfResult::goodput_mbps_between`].
pub fn goodput_mbps_between(intervals: &[Interval], t0: f64, t1: f64) -> Option<f64> {
    const EPS: f64 = 1e-3;
    let ivs: Vec<&Interval> = intervals.iter().filter(|iv| !iv.omitted).collect();
    let (first, last) = (ivs.first()?, ivs.last()?);
    if t1 - t0 <= EPS || t0 < first.start - EPS || t1 > last.end + EPS {
        return None;
    }
    let mut bytes = 0.0;
    for iv in ivs {
        let len = iv.end - iv.start;
        if len <= 0.0 {
            continue;
        }
        let overlap = (iv.end.min(t1) - iv.start.max(t0)).max(0.0);
        bytes += iv.bytes as f64 * overlap / len;
    }
    Some(bytes * 8.0 / (t1 - t0) / 1e6)
}

/// Builds the iperf3 client argument vector (without the program name).
///
/// `reverse` adds `-R` (server sends: a download as seen from the client).
pub fn client_args(
    server: &str,
    port: u16,
    seconds: u32,
    cc: &str,
    reverse: bool,
    extra: &[&str],
) -> Vec<String> {
    let mut v: Vec<String> = vec!["-c".into(), server.into(), "-p".into(), port.to_string()];
    if reverse {
        v.push("-R".into());
    } else {
        // The client is the sender: ask for the server's (receiver's) intervals too.
        v.push("--get-server-output".into());
    }
    v.extend(["-t".into(), seconds.to_string(), "-J".into()]);
    if !cc.is_empty() {
        v.extend(["-C".into(), cc.into()]);
    }
    v.extend([
        "--interval".into(),
        "0.5".into(),
        "--connect-timeout".into(),
        "5000".into(),
    ]);
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// A running iperf3 client. Dropping it kills the client.
pub struct IperfRun {
    child: Option<Child>,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
    deadline: Instant,
    /// Turns the client's stdout into a result ([`IperfResult::parse`] for iperf3).
    parse: fn(&str) -> Result<IperfResult>,
    /// What was run, for error messages.
    pub description: String,
}

fn drain<R: Read + Send + 'static>(r: Option<R>) -> Option<JoinHandle<String>> {
    r.map(|mut r| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    })
}

impl IperfRun {
    /// Wraps a spawned iperf3 client (stdout/stderr piped). `max_runtime` bounds [`wait`](Self::wait).
    pub fn new(child: Child, max_runtime: Duration, description: String) -> IperfRun {
        IperfRun::with_parser(child, max_runtime, description, IperfResult::parse)
    }

    /// Wraps another bulk-transfer client whose stdout `parse` turns into an [`IperfResult`]
    /// (e.g. `slipstream-quic`, see [`crate::quic`]).
    pub fn with_parser(
        mut child: Child,
        max_runtime: Duration,
        description: String,
        parse: fn(&str) -> Result<IperfResult>,
    ) -> IperfRun {
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        IperfRun {
            child: Some(child),
            stdout,
            stderr,
            deadline: Instant::now() + max_runtime,
            parse,
            description,
        }
    }

    /// The client's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Waits for the client to finish (killing it past its deadline) and parses the result.
    pub fn wait(mut self) -> Result<IperfResult> {
        let mut child = self.child.take().expect("child present until wait");
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if Instant::now() > self.deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("{}: timed out, killed", self.description);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let out = self
            .stdout
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        let err = self
            .stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        (self.parse)(&out)
            .with_context(|| format!("{} (exit {status}); stderr: {}", self.description, err.trim()))
    }
}

impl Drop for IperfRun {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../testdata/iperf3-reverse.json");

    fn iv(start: f64, end: f64, bytes: u64) -> Interval {
        Interval {
            start,
            end,
            bytes,
            bits_per_second: bytes as f64 * 8.0 / (end - start),
            omitted: false,
        }
    }

    #[test]
    fn parses_sample() {
        let r = IperfResult::parse(SAMPLE).unwrap();
        assert!(
            r.goodput_mbps > 5.0 && r.goodput_mbps < 10.5,
            "{}",
            r.goodput_mbps
        );
        assert!(r.intervals.len() >= 6, "{}", r.intervals.len());
        assert!(r.local_port.is_some());
        assert_eq!(r.remote_port, Some(5201));
        let end = r.run_end().unwrap();
        assert!((end - 4.0).abs() < 0.2, "{end}");
        let last2 = r.goodput_mbps_last(2.0).unwrap();
        assert!(last2 > 8.0 && last2 < 10.0, "{last2}");
        // The per-interval bits_per_second agrees with bytes/duration.
        for i in &r.intervals {
            let bps = i.bytes as f64 * 8.0 / (i.end - i.start);
            assert!((bps - i.bits_per_second).abs() / bps.max(1.0) < 0.01);
        }
    }

    #[test]
    fn parse_reports_iperf_error() {
        let e = IperfResult::parse(r#"{"start":{},"intervals":[],"end":{},"error":"unable to connect"}"#)
            .unwrap_err();
        assert!(format!("{e:#}").contains("unable to connect"));
        assert!(IperfResult::parse("not json").is_err());
    }

    #[test]
    fn window_goodput() {
        // 1 Mbyte per second for 4 s, then 0.5 Mbyte/s for 2 s, in 0.5 s intervals.
        let mut ivs = Vec::new();
        for i in 0..12 {
            let t = i as f64 * 0.5;
            ivs.push(iv(t, t + 0.5, if t < 4.0 { 500_000 } else { 250_000 }));
        }
        let all = goodput_mbps_between(&ivs, 0.0, 6.0).unwrap();
        assert!((all - (5.0 * 8.0 / 6.0)).abs() < 1e-9, "{all}");
        assert!((goodput_mbps_between(&ivs, 4.0, 6.0).unwrap() - 4.0).abs() < 1e-9);
        assert!((goodput_mbps_between(&ivs, 0.0, 4.0).unwrap() - 8.0).abs() < 1e-9);
        // Partial overlap: [3.75, 4.25] = half at 8 Mbit/s, half at 4 Mbit/s.
        assert!((goodput_mbps_between(&ivs, 3.75, 4.25).unwrap() - 6.0).abs() < 1e-9);
        assert!(goodput_mbps_between(&ivs, 5.0, 7.0).is_none());
        assert!(goodput_mbps_between(&ivs, 2.0, 2.0).is_none());
        assert!(goodput_mbps_between(&[], 0.0, 1.0).is_none());
        // Omitted intervals are ignored.
        ivs[0].omitted = true;
        assert!(goodput_mbps_between(&ivs, 0.0, 1.0).is_none());
        assert!((goodput_mbps_between(&ivs, 0.5, 1.0).unwrap() - 8.0).abs() < 1e-9);
    }

    #[test]
    fn longest_stall_is_the_longest_run_of_empty_intervals() {
        let bytes = [9, 0, 9, 0, 0, 0, 9, 0, 0];
        let mut ivs: Vec<Interval> = bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| iv(i as f64 * 0.5, i as f64 * 0.5 + 0.5, b))
            .collect();
        assert!((longest_stall_secs(&ivs) - 1.5).abs() < 1e-9);
        // A stall running to the end counts; omitted intervals do not.
        ivs[3].omitted = true;
        ivs[4].omitted = true;
        assert!((longest_stall_secs(&ivs) - 1.0).abs() < 1e-9);
        assert_eq!(longest_stall_secs(&ivs[..3]), 0.5);
        assert_eq!(longest_stall_secs(&[]), 0.0);
    }

    #[test]
    fn client_args_download() {
        let a = client_args("10.77.1.2", 5201, 8, "cubic", true, &["-w", "1M"]);
        assert_eq!(
            a.join(" "),
            "-c 10.77.1.2 -p 5201 -R -t 8 -J -C cubic --interval 0.5 --connect-timeout 5000 -w 1M"
        );
        let b = client_args("fd77:1::2", 5202, 3, "", false, &[]);
        assert_eq!(
            b.join(" "),
            "-c fd77:1::2 -p 5202 --get-server-output -t 3 -J --interval 0.5 --connect-timeout 5000"
        );
    }
}
