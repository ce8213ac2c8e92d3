//! A UDP square wave (Key et al. Sec. 5.2: a constant-rate UDP flow switched on and off with
//! equal on and off periods) and a sink that counts what arrives. Not `iperf3 -u` once per on
//! period: each iperf3 run first opens a control connection (0.2-0.3 s on the 100 ms testbed),
//! which would shorten a 1 s on period by a quarter; this sender paces datagrams against an
//! absolute schedule instead. Rates count whole Ethernet frames, as the bottleneck's tbf does.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Payload bytes per datagram: the largest that fits a 1500-byte MTU in one IPv4 datagram.
pub const PAYLOAD: usize = 1472;

/// Wire bytes of one datagram as tbf counts them: payload + 8 UDP + 20 IPv4 + 14 Ethernet.
pub const FRAME_BYTES: u64 = PAYLOAD as u64 + 8 + 20 + 14;

/// The square wave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SquareWave {
    /// Rate while on, bit/s of frames on the wire.
    pub rate_bps: f64,
    /// Length of each on period and of each off period, s.
    pub period_s: f64,
}

impl SquareWave {
    /// Gap between datagrams while on, s.
    pub fn interval_s(&self) -> f64 {
        FRAME_BYTES as f64 * 8.0 / self.rate_bps
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
            .step_by(2)
            .flat_map(move |p| {
                (0..per_period).map(move |i| p as f64 * self.period_s + i as f64 * self.interval_s())
            })
            .filter(move |&t| t < duration_s)
    }
}

/// Sends the wave to `dst` for `duration`. Returns the datagrams sent.
pub fn send_square_wave(dst: SocketAddr, wave: &SquareWave, duration: Duration) -> Result<u64> {
    let sock = UdpSocket::bind(("0.0.0.0", 0)).context("binding the UDP sender")?;
    sock.connect(dst).with_context(|| format!("connecting the UDP sender to {dst}"))?;
    let payload = [0u8; PAYLOAD];
    let start = Instant::now();
    let mut sent = 0u64;
    for t in wave.send_times(duration.as_secs_f64()) {
        std::thread::sleep((start + Duration::from_secs_f64(t)).saturating_duration_since(Instant::now()));
        // A full socket buffer or an ICMP error from an absent sink must not stop the wave.
        if sock.send(&payload).is_ok() {
            sent += 1;
        }
    }
    Ok(sent)
}

/// Receives on `sock` for `duration`; the datagrams received in each bin of `bin`.
pub fn run_sink(sock: &UdpSocket, duration: Duration, bin: Duration) -> Result<Vec<u64>> {
    let start = Instant::now();
    let mut bins = vec![0u64; (duration.as_secs_f64() / bin.as_secs_f64()).ceil() as usize];
    let mut buf = [0u8; 2048];
    while let Some(left) = duration.checked_sub(start.elapsed()) {
        sock.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        match sock.recv(&mut buf) {
            Ok(_) => {
                if let Some(b) = bins.get_mut((start.elapsed().as_secs_f64() / bin.as_secs_f64()) as usize) {
                    *b += 1;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("receiving"),
        }
    }
    Ok(bins)
}

#[cfg(test)]
#[path = "udp_tests.rs"]
mod tests;
