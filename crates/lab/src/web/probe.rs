//! A TCP round-trip probe: one persistent connection to the object server, one small request
//! every `interval`, the time from request to complete answer recorded for each.
//!
//! Why it exists: the `datapath` scenario measures the latency the router adds to packets of a
//! *queued* flow. `ping` cannot show it (ICMP never enters Slipstream's queues), but a TCP
//! connection to a background port does: each request and each answer (both small, so both
//! go to the ACK queue) crosses the router's NFQUEUE path once.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Sends `count` requests for `size` bytes, `interval` apart, on one connection; returns the
/// round-trip times in seconds.
pub fn tcp_rtt_probe(server: SocketAddr, size: u64, count: u32, interval: Duration) -> Result<Vec<f64>> {
    if size == 0 || size > 1400 {
        bail!("probe answers must be 1-1400 bytes (one segment), got {size}");
    }
    let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(5))
        .with_context(|| format!("probe connect to {server}"))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = vec![0u8; size as usize];
    let mut rtts = Vec::with_capacity(count as usize);
    let start = Instant::now();
    for i in 0..count {
        let due = start + interval * i;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let t0 = Instant::now();
        s.write_all(&size.to_be_bytes()).context("probe request")?;
        s.read_exact(&mut buf).context("probe answer")?;
        rtts.push(t0.elapsed().as_secs_f64());
    }
    Ok(rtts)
}

/// Quantile `q` (0..=1) of `v` by nearest rank on a sorted copy; NaN if empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((q.clamp(0.0, 1.0) * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[i]
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;
