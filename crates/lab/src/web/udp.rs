//! A UDP square wave (Key et al. Sec. 5.2: a constant-rate UDP flow switched on and off with
//! equal on and off periods) and a sink that measures what arrives.
//!
//! Why not `iperf3 -u` once per on period: each iperf3 run first opens a control connection
//! (two or three RTTs, 0.2-0.3 s on the 100 ms testbed), which would shorten a 1 s on period by
//! a quarter. The sender here paces datagrams against an absolute schedule instead.
//!
//! **Rate accounting.** `rate_bps` is the rate as the bottleneck's tbf counts it: whole
//! Ethernet frames (payload + 8 UDP + 20 IPv4 + 14 Ethernet header bytes). With 1472-byte
//! payloads a frame is 1514 bytes, so 6.7 Mbit/s is one datagram every 1.808 ms.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// UDP + IPv4 + Ethernet header bytes added to a payload on the wire (as tbf counts it).
pub const UDP_FRAME_OVERHEAD: u64 = 8 + 20 + 14;

/// Largest payload that fits a 1500-byte MTU in one IPv4 datagram.
pub const MAX_PAYLOAD: usize = 1472;

/// The square wave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SquareWave {
    /// Rate while on, bit/s of frames on the wire.
    pub rate_bps: f64,
    /// Length of each on period and of each off period, s.
    pub period_s: f64,
    /// Payload bytes per datagram.
    pub payload: usize,
}

impl SquareWave {
    pub fn validate(&self) -> Result<()> {
        if !(self.rate_bps > 0.0 && self.rate_bps.is_finite()) {
            bail!("rate must be positive, got {}", self.rate_bps);
        }
        if !(self.period_s > 0.0 && self.period_s.is_finite()) {
            bail!("period must be positive, got {}", self.period_s);
        }
        if !(16..=MAX_PAYLOAD).contains(&self.payload) {
            bail!("payload must be 16-{MAX_PAYLOAD} bytes, got {}", self.payload);
        }
        Ok(())
    }

    /// Wire bytes of one datagram.
    pub fn frame_bytes(&self) -> u64 {
        self.payload as u64 + UDP_FRAME_OVERHEAD
    }

    /// Gap between datagrams while on, s.
    pub fn interval_s(&self) -> f64 {
        self.frame_bytes() as f64 * 8.0 / self.rate_bps
    }

    /// Whether the wave is on at `t` s after its start (it starts with an on period).
    pub fn is_on(&self, t: f64) -> bool {
        t >= 0.0 && ((t / self.period_s).floor() as u64) & 1 == 0
    }

    /// Send times (s after the start) of every datagram within `[0, duration_s)`.
    /// Each on period restarts the schedule at its own start, so no period loses a datagram to
    /// rounding drift.
    pub fn send_times(&self, duration_s: f64) -> impl Iterator<Item = f64> + '_ {
        let per_period = (self.period_s / self.interval_s()).ceil() as u64;
        let periods = (duration_s / self.period_s).ceil() as u64;
        (0..periods)
            .filter(|p| p % 2 == 0)
            .flat_map(move |p| {
                let start = p as f64 * self.period_s;
                (0..per_period).map(move |i| start + i as f64 * self.interval_s())
            })
            .filter(move |&t| t < duration_s)
    }
}

/// Sends the wave to `dst` for `duration`. Returns the datagrams sent.
pub fn send_square_wave(dst: SocketAddr, wave: &SquareWave, duration: Duration) -> Result<u64> {
    wave.validate()?;
    let bind: SocketAddr = if dst.is_ipv4() { "0.0.0.0:0".parse()? } else { "[::]:0".parse()? };
    let sock = UdpSocket::bind(bind).context("binding the UDP sender")?;
    sock.connect(dst).with_context(|| format!("connecting the UDP sender to {dst}"))?;
    let mut payload = vec![0u8; wave.payload];
    let start = Instant::now();
    let mut sent = 0u64;
    for t in wave.send_times(duration.as_secs_f64()) {
        let due = start + Duration::from_secs_f64(t);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        payload[..8].copy_from_slice(&sent.to_be_bytes());
        // A full socket buffer or an ICMP error from an absent sink must not stop the wave.
        if sock.send(&payload).is_ok() {
            sent += 1;
        }
    }
    Ok(sent)
}

/// What a sink received in one bin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SinkBin {
    /// Bin start, s since the sink started.
    pub t: f64,
    /// Payload bytes received.
    pub bytes: u64,
    /// Datagrams received.
    pub packets: u64,
}

/// Receives on `sock` for `duration`, counting bytes in bins of `bin`.
pub fn run_sink(sock: &UdpSocket, duration: Duration, bin: Duration) -> Result<Vec<SinkBin>> {
    let start = Instant::now();
    let nbins = (duration.as_secs_f64() / bin.as_secs_f64()).ceil() as usize;
    let mut bins: Vec<SinkBin> =
        (0..nbins).map(|i| SinkBin { t: i as f64 * bin.as_secs_f64(), bytes: 0, packets: 0 }).collect();
    let mut buf = vec![0u8; 65_536];
    loop {
        let elapsed = start.elapsed();
        if elapsed >= duration {
            break;
        }
        sock.set_read_timeout(Some((duration - elapsed).max(Duration::from_millis(1))))?;
        match sock.recv(&mut buf) {
            Ok(n) => {
                let i = (start.elapsed().as_secs_f64() / bin.as_secs_f64()) as usize;
                if let Some(b) = bins.get_mut(i) {
                    b.bytes += n as u64;
                    b.packets += 1;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("receiving"),
        }
    }
    Ok(bins)
}

/// The sink's bins as a wire-rate series `(t, Mbit/s)`: payload bytes scaled to whole frames of
/// `payload`-byte datagrams (what the bottleneck carried).
pub fn wire_rate_series(bins: &[SinkBin], bin_s: f64, payload: usize) -> Vec<(f64, f64)> {
    let scale = (payload as u64 + UDP_FRAME_OVERHEAD) as f64 / payload as f64;
    bins.iter().map(|b| (b.t, b.bytes as f64 * scale * 8.0 / bin_s / 1e6)).collect()
}

#[cfg(test)]
#[path = "udp_tests.rs"]
mod tests;
