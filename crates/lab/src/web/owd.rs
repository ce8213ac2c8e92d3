//! A UDP one-way delay probe for real-time traffic (the `home` scenario's video call and game):
//! datagrams sent on a fixed schedule (a burst every interval), each carrying its sequence
//! number and send time; the receiver stamps the arrival. Sender and receiver are threads of the
//! lab (each moved into its namespace with [`super::spawn_in`]) reading one monotonic clock
//! ([`Instant`] since a shared epoch), so one-way delay is receive time minus send time, with no
//! clock to synchronise. Loss and reordering follow from the sequence numbers ([`stats`]).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Bytes of the probe header: sequence number, send time in ns since the epoch (both u64 BE).
const HEADER: usize = 16;

/// Wire bytes per datagram beyond its payload: UDP 8, IPv4 20, Ethernet 14 (as tbf counts).
pub const OVERHEAD: usize = 8 + 20 + 14;

/// A constant-rate stream: `burst` datagrams of `payload` bytes every `interval_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stream {
    pub interval_s: f64,
    pub burst: u32,
    /// UDP payload bytes (at least the 16-byte header).
    pub payload: usize,
}

impl Stream {
    /// Rate on the wire (Ethernet frames), Mbit/s.
    pub fn wire_mbit(&self) -> f64 {
        ((self.payload + OVERHEAD) as f64 * 8.0 * f64::from(self.burst)) / self.interval_s / 1e6
    }
}

/// One received datagram: its sequence number, send and receive time (s since the epoch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arrival {
    pub seq: u64,
    pub sent_s: f64,
    pub recv_s: f64,
}

/// Sends `stream` to `dst` from now until `until_s` (s since `epoch`), bursts on an absolute
/// schedule. Returns each datagram's send time (index = sequence number); one whose send failed
/// (a full socket buffer) is listed too and counts as lost.
pub fn send(dst: SocketAddr, stream: Stream, epoch: Instant, until_s: f64) -> Result<Vec<f64>> {
    let sock = UdpSocket::bind(("0.0.0.0", 0)).context("binding a probe sender")?;
    sock.connect(dst).with_context(|| format!("connecting a probe sender to {dst}"))?;
    let mut buf = vec![0u8; stream.payload.max(HEADER)];
    let start = epoch.elapsed().as_secs_f64();
    let mut sent = Vec::new();
    for k in 0.. {
        let due = start + k as f64 * stream.interval_s;
        if due >= until_s {
            break;
        }
        std::thread::sleep(Duration::from_secs_f64((due - epoch.elapsed().as_secs_f64()).max(0.0)));
        for _ in 0..stream.burst {
            let now = epoch.elapsed();
            buf[..8].copy_from_slice(&(sent.len() as u64).to_be_bytes());
            buf[8..16].copy_from_slice(&(now.as_nanos() as u64).to_be_bytes());
            let _ = sock.send(&buf);
            sent.push(now.as_secs_f64());
        }
    }
    Ok(sent)
}

/// Receives probe datagrams on `sock` until `until_s` (s since `epoch`).
pub fn receive(sock: &UdpSocket, epoch: Instant, until_s: f64) -> Result<Vec<Arrival>> {
    let mut buf = [0u8; 2048];
    let mut got = Vec::new();
    loop {
        let left = until_s - epoch.elapsed().as_secs_f64();
        if left <= 0.0 {
            return Ok(got);
        }
        sock.set_read_timeout(Some(Duration::from_secs_f64(left.max(0.001))))?;
        match sock.recv(&mut buf) {
            Ok(n) if n >= HEADER => {
                let recv_s = epoch.elapsed().as_secs_f64();
                let word = |i: usize| u64::from_be_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
                got.push(Arrival { seq: word(0), sent_s: word(8) as f64 / 1e9, recv_s });
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("receiving probe datagrams"),
        }
    }
}

/// What the datagrams sent in a window became.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Datagrams sent in the window.
    pub sent: usize,
    /// Of those, received (duplicates once).
    pub received: usize,
    /// Received after a datagram with a higher sequence number.
    pub reordered: usize,
    /// One-way delays of the received ones (first copy), ms, in arrival order.
    pub delays_ms: Vec<f64>,
}

impl Stats {
    /// Lost / sent (0 with nothing sent).
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            (self.sent - self.received) as f64 / self.sent as f64
        }
    }
}

/// The datagrams sent in `[from_s, to_s)` (`sent`: send time by sequence number, as [`send`]
/// returns) and what of them arrived (`arrivals` in arrival order): every one not in `arrivals`
/// is lost.
pub fn stats(sent: &[f64], arrivals: &[Arrival], from_s: f64, to_s: f64) -> Stats {
    let inside = |seq: u64| sent.get(seq as usize).is_some_and(|t| (from_s..to_s).contains(t));
    let mut seen = vec![false; sent.len()];
    let mut out =
        Stats { sent: sent.iter().filter(|t| (from_s..to_s).contains(*t)).count(), ..Stats::default() };
    let mut highest: Option<u64> = None;
    for a in arrivals {
        if !inside(a.seq) || std::mem::replace(&mut seen[a.seq as usize], true) {
            continue;
        }
        if highest.is_some_and(|h| a.seq < h) {
            out.reordered += 1;
        }
        highest = highest.max(Some(a.seq));
        out.received += 1;
        out.delays_ms.push((a.recv_s - a.sent_s) * 1000.0);
    }
    out
}

#[cfg(test)]
#[path = "owd_tests.rs"]
mod tests;
