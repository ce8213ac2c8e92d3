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
use serde::{Deserialize, Serialize};

/// UDP + IPv4 + Ethernet header bytes added to a payload on the wire (as tbf counts it).
pub const UDP_FRAME_OVERHEAD: u64 = 8 + 20 + 14;

/// Largest payload that fits a 1500-byte MTU in one IPv4 datagram.
pub const MAX_PAYLOAD: usize = 1472;

/// The square wave.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SquareWave {
    /// Rate while on, bit/s of frames on the wire.
    pub rate_bps: f64,
    /// Length of each on period and of each off period, s.
    pub period_s: f64,
    /// Payload bytes per datagram.
    pub payload: usize,
}

impl SquareWave {
    /// Checks the parameters.
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
    let bind: SocketAddr = if dst.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let sock = UdpSocket::bind(bind).context("binding the UDP sender")?;
    sock.connect(dst)
        .with_context(|| format!("connecting the UDP sender to {dst}"))?;
    let mut payload = vec![0u8; wave.payload];
    let start = Instant::now();
    let mut sent = 0u64;
    for t in wave.send_times(duration.as_secs_f64()) {
        let due = start + Duration::from_secs_f64(t);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        payload[..8].copy_from_slice(&sent.to_be_bytes());
        // A full socket buffer or an ICMP error from an absent sink must not stop the wave.
        if sock.send(&payload).is_ok() {
            sent += 1;
        }
    }
    Ok(sent)
}

/// What a sink received in one bin.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
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
    let mut bins: Vec<SinkBin> = (0..nbins)
        .map(|i| SinkBin {
            t: i as f64 * bin.as_secs_f64(),
            bytes: 0,
            packets: 0,
        })
        .collect();
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
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e).context("receiving"),
        }
    }
    Ok(bins)
}

/// The sink's bins as a wire-rate series `(t, Mbit/s)`: payload bytes scaled to whole frames of
/// `payload`-byte datagrams (what the bottleneck carried).
pub fn wire_rate_series(bins: &[SinkBin], bin_s: f64, payload: usize) -> Vec<(f64, f64)> {
    let scale = (payload as u64 + UDP_FRAME_OVERHEAD) as f64 / payload as f64;
    bins.iter()
        .map(|b| (b.t, b.bytes as f64 * scale * 8.0 / bin_s / 1e6))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wave(period_s: f64) -> SquareWave {
        SquareWave {
            rate_bps: 6.7e6,
            period_s,
            payload: MAX_PAYLOAD,
        }
    }

    #[test]
    fn schedule() {
        let w = wave(1.0);
        assert!((w.interval_s() - 1514.0 * 8.0 / 6.7e6).abs() < 1e-12);
        assert!(w.is_on(0.0) && w.is_on(0.99) && !w.is_on(1.0) && !w.is_on(1.5) && w.is_on(2.0));
        let times: Vec<f64> = w.send_times(4.0).collect();
        // Two on periods of ceil(1 / 1.808 ms) = 554 datagrams each.
        assert_eq!(times.len(), 2 * 554);
        assert!(times.iter().all(|&t| w.is_on(t)));
        assert!(times.windows(2).all(|p| p[1] > p[0]));
        // The average wire rate while on is the configured rate (within one datagram).
        let on_bits = 554.0 * w.frame_bytes() as f64 * 8.0;
        assert!((on_bits - 6.7e6).abs() <= w.frame_bytes() as f64 * 8.0);
        // A duration that ends inside an on period cuts it.
        assert_eq!(w.send_times(0.5).count(), 277);
        assert!(wave(1.0).validate().is_ok());
        assert!(SquareWave { payload: 2000, ..w }.validate().is_err());
        assert!(SquareWave { period_s: 0.0, ..w }.validate().is_err());
    }

    #[test]
    fn rate_series() {
        let bins = [
            SinkBin {
                t: 0.0,
                bytes: 1472 * 10,
                packets: 10,
            },
            SinkBin {
                t: 0.1,
                bytes: 0,
                packets: 0,
            },
        ];
        let s = wire_rate_series(&bins, 0.1, 1472);
        assert!((s[0].1 - 1514.0 * 10.0 * 8.0 / 0.1 / 1e6).abs() < 1e-9);
        assert_eq!(s[1], (0.1, 0.0));
    }

    #[test]
    fn wave_over_loopback() {
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst = sink.local_addr().unwrap();
        let w = SquareWave {
            rate_bps: 2e6,
            period_s: 0.2,
            payload: 1000,
        };
        let h = std::thread::spawn(move || {
            run_sink(&sink, Duration::from_millis(900), Duration::from_millis(100))
        });
        let sent = send_square_wave(dst, &w, Duration::from_millis(800)).unwrap();
        let bins = h.join().unwrap().unwrap();
        let got: u64 = bins.iter().map(|b| b.packets).sum();
        // 2 on periods of 0.2 s at 2 Mbit/s of 1042-byte frames: 48 each.
        assert_eq!(sent, 2 * 48);
        assert_eq!(got, sent);
        // Off periods (0.2-0.4 s, 0.6-0.8 s) stay nearly silent (one bin may catch a late one).
        let off: u64 = bins
            .iter()
            .filter(|b| (0.25..0.35).contains(&b.t) || (0.65..0.75).contains(&b.t))
            .map(|b| b.packets)
            .sum();
        assert!(off <= 2, "{bins:?}");
    }
}
