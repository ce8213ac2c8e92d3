//! Small process helpers: run a command and fail with its stderr, build `ip netns exec`
//! invocations, signal and reap processes, parse `ping` summaries, and build `tc tbf` arguments.
//!
//! Why it exists: every step of building a testbed is an external tool (`ip`, `tc`, `ethtool`,
//! `iptables-legacy`, `sysctl`); errors must name the exact command line, and the pure argument
//! builders are unit-tested without root.

use std::ffi::OsStr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// Runs `program args...`, returns stdout; on a non-zero exit the error names the command and
/// carries its stderr.
pub fn run<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Result<String> {
    let mut c = Command::new(program);
    c.args(args);
    run_command(c)
}

/// Runs a prepared command (stdin null), returns stdout or an error naming it.
pub fn run_command(mut c: Command) -> Result<String> {
    let desc = describe(&c);
    let out = c
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("spawning `{desc}`"))?;
    if !out.status.success() {
        bail!(
            "`{desc}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A printable command line.
pub fn describe(c: &Command) -> String {
    std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `ip netns exec <ns> args...` as a [`Command`] (nothing is spawned).
pub fn netns_exec<S: AsRef<OsStr>>(ns: &str, args: &[S]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(args);
    c
}

/// Sends `sig` to `pid` (ignoring "no such process").
pub fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        if pid > 0 {
            // SAFETY: kill(2) with a positive pid.
            unsafe { libc::kill(pid, sig) };
        }
    }
}

/// Whether a process with this pid exists (zombies count as gone: they hold no namespace).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // State is the field after the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X") | None)
        }
        Err(_) => false,
    }
}

/// Waits until `pred` holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if pred() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Round-trip statistics of a `ping` run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RttStats {
    /// Minimum RTT, ms.
    pub min: f64,
    /// Average RTT, ms.
    pub avg: f64,
    /// Median RTT of the replies, ms: unlike the average, a few seconds of an unusually deep
    /// sawtooth of a cubic flow in the same queue hardly move it.
    pub median: f64,
    /// Maximum RTT, ms.
    pub max: f64,
    /// Mean deviation, ms.
    pub mdev: f64,
}

/// Parses iputils' `ping` output: the `rtt min/avg/max/mdev = a/b/c/d ms` summary line and,
/// for the median, the replies' `time=t ms` fields.
pub fn parse_ping_output(out: &str) -> Result<RttStats> {
    let line = out
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .ok_or_else(|| anyhow!("no RTT summary in ping output: {}", out.trim()))?;
    // "rtt min/avg/max/mdev = 100.1/100.3/100.9/0.2 ms[, pipe 2]"
    let nums = line
        .split('=')
        .nth(1)
        .and_then(|rest| rest.split("ms").next())
        .ok_or_else(|| anyhow!("malformed ping summary: {line}"))?
        .trim();
    let v: Vec<f64> = nums
        .split('/')
        .map(|s| s.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("malformed ping summary: {line}"))?;
    let [min, avg, max, mdev] = v.as_slice() else {
        bail!("malformed ping summary: {line}");
    };
    let replies = crate::scenario::Summary::of(out.lines().filter_map(ping_reply_rtt_ms));
    if replies.count == 0 {
        bail!("no replies in ping output (run without -q): {}", out.trim());
    }
    Ok(RttStats {
        min: *min,
        avg: *avg,
        median: replies.median,
        max: *max,
        mdev: *mdev,
    })
}

/// The RTT (ms) of one iputils `ping` reply line (`64 bytes from ...: icmp_seq=1 ttl=62 time=100
/// ms`); `None` for any other line.
pub fn ping_reply_rtt_ms(line: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|tok| tok.strip_prefix("time=")?.parse().ok())
}

/// The packet count of the (first) rule jumping to `chain` in `iptables -L <chain> -v -n -x`
/// output (columns: pkts bytes target ...); `None` if no rule jumps there.
pub fn chain_jump_packets(listing: &str, chain: &str) -> Option<u64> {
    listing.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&chain)).then(|| f[0].parse().ok()).flatten()
    })
}

/// The packet and byte counts of the (first) rule jumping to `chain` in `iptables -L <chain>
/// -v -n -x` output; `None` if no rule jumps there.
pub fn chain_jump_counters(listing: &str, chain: &str) -> Option<(u64, u64)> {
    listing.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.get(2) != Some(&chain) {
            return None;
        }
        Some((f[0].parse().ok()?, f[1].parse().ok()?))
    })
}

/// Largest frame on the veths (1500 MTU + Ethernet header), as tbf accounts it.
pub const FRAME_BYTES: u64 = 1514;

/// tbf bucket size for `rate_bps`: two full frames or 1 ms worth of tokens, whichever is
/// larger. Small enough that the shaper never releases a line-rate burst worth mentioning,
/// large enough that a full-size frame always fits the bucket.
pub fn tbf_burst_bytes(rate_bps: u64) -> u64 {
    (2 * FRAME_BYTES).max(rate_bps / 8 / 1000)
}

/// `tc qdisc replace dev <dev> root tbf rate <r>bit burst <b> limit <l>` arguments (for `tc`).
pub fn tbf_args(dev: &str, rate_bps: u64, burst_bytes: u64, limit_bytes: u64) -> Vec<String> {
    tbf_command("replace", dev, rate_bps, burst_bytes, limit_bytes)
}

/// `tc qdisc change dev <dev> root tbf ...` arguments: the same tbf with new parameters, in
/// place (the packets it holds stay queued, where `replace` would start an empty one).
pub fn tbf_change_args(dev: &str, rate_bps: u64, burst_bytes: u64, limit_bytes: u64) -> Vec<String> {
    tbf_command("change", dev, rate_bps, burst_bytes, limit_bytes)
}

fn tbf_command(verb: &str, dev: &str, rate_bps: u64, burst_bytes: u64, limit_bytes: u64) -> Vec<String> {
    [
        "qdisc",
        verb,
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        &format!("{rate_bps}bit"),
        "burst",
        &burst_bytes.to_string(),
        "limit",
        &limit_bytes.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_output() {
        let out = "PING 10.77.1.2 (10.77.1.2) 56(84) bytes of data.\n\
                   64 bytes from 10.77.1.2: icmp_seq=1 ttl=62 time=100.9 ms\n\
                   64 bytes from 10.77.1.2: icmp_seq=2 ttl=62 time=100.112 ms\n\
                   64 bytes from 10.77.1.2: icmp_seq=3 ttl=62 time=100.2 ms\n\n\
                   --- 10.77.1.2 ping statistics ---\n\
                   3 packets transmitted, 3 received, 0% packet loss, time 403ms\n\
                   rtt min/avg/max/mdev = 100.112/100.404/100.901/0.352 ms\n";
        let s = parse_ping_output(out).unwrap();
        assert_eq!(
            s,
            RttStats {
                min: 100.112,
                avg: 100.404,
                median: 100.2,
                max: 100.901,
                mdev: 0.352
            }
        );
        let piped = "64 bytes from 10.77.1.2: icmp_seq=1 ttl=62 time=100.4 ms\n\
                     64 bytes from 10.77.1.2: icmp_seq=2 ttl=62 time=250 ms\n\
                     rtt min/avg/max/mdev = 100.4/175.2/250.0/74.8 ms, pipe 2\n";
        let s = parse_ping_output(piped).unwrap();
        assert_eq!((s.avg, s.median), (175.2, 250.0));
        assert!(parse_ping_output("10 packets transmitted, 0 received, 100% packet loss").is_err());
        assert!(parse_ping_output("rtt min/avg/max/mdev = 1/2/x/4 ms").is_err());
        // A -q summary alone has no replies to take the median of.
        assert!(parse_ping_output("rtt min/avg/max/mdev = 1/2/3/4 ms").is_err());
    }

    #[test]
    fn jump_counter() {
        let out = "Chain FORWARD (policy ACCEPT 40 packets, 3000 bytes)\n\
                   \x20   pkts      bytes target     prot opt in     out     source               destination\n\
                   \x20      3      120 ss-rst     tcp  --  *      *       0.0.0.0/0            0.0.0.0/0            tcp flags:0x04/0x04\n";
        assert_eq!(chain_jump_packets(out, "ss-rst"), Some(3));
        assert_eq!(chain_jump_packets(out, "other"), None);
        assert_eq!(chain_jump_counters(out, "ss-rst"), Some((3, 120)));
        assert_eq!(chain_jump_counters(out, "other"), None);
    }

    #[test]
    fn tbf() {
        assert_eq!(tbf_burst_bytes(10_000_000), 3028);
        assert_eq!(tbf_burst_bytes(100_000_000), 12_500);
        assert_eq!(
            tbf_args("isp-rtr", 10_000_000, 3028, 125_000).join(" "),
            "qdisc replace dev isp-rtr root tbf rate 10000000bit burst 3028 limit 125000"
        );
        assert_eq!(
            tbf_change_args("isp-rtr", 5_000_000, 3028, 125_000).join(" "),
            "qdisc change dev isp-rtr root tbf rate 5000000bit burst 3028 limit 125000"
        );
    }

    #[test]
    fn netns_exec_builds_ip_command() {
        let c = netns_exec("ss1-cli", &["ping", "-c", "1", "10.77.1.2"]);
        assert_eq!(describe(&c), "ip netns exec ss1-cli ping -c 1 10.77.1.2");
    }

    #[test]
    fn run_reports_stderr() {
        let e = run("sh", &["-c", "echo boom >&2; exit 3"]).unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("boom") && msg.contains("sh -c"), "{msg}");
        assert_eq!(run("sh", &["-c", "echo hi"]).unwrap(), "hi\n");
    }

    #[test]
    fn pid_liveness() {
        assert!(pid_alive(std::process::id()));
        let mut c = Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        assert!(!pid_alive(pid));
    }
}
