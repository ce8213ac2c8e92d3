//! `slipstream-web`: the lab's traffic generators (see `slipstream_lab::web`). Each prints
//! `ready` once it listens, then its results as JSON on stdout.
//!
//! ```sh
//! slipstream-web server --listen 0.0.0.0:8080                 # object server
//! slipstream-web client --server 10.77.1.2:8080 --duration 30 --seed 1   # one JSON line per object
//! slipstream-web udp-sink --listen 0.0.0.0:5300 --duration 60            # [{t, bytes, packets}] per 100 ms
//! slipstream-web udp-send --dst 10.77.3.2:5300 --rate-mbit 6.7 --period 5 --duration 50
//! slipstream-web probe --server 10.77.1.2:6882 --count 500 --interval-ms 20   # {"rtts_s": [...]}
//! ```

use std::io::Write;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use slipstream_lab::web::{self, probe, udp, ClientConfig, WebModel};

#[derive(Parser)]
#[command(
    name = "slipstream-web",
    about = "Web-like, UDP square-wave and TCP-probe traffic for slipstream-lab"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve objects: each request line `GET <size>` is answered with `<size>` bytes.
    Server {
        #[arg(long, default_value = "0.0.0.0:8080")]
        listen: SocketAddr,
    },
    /// Fetch pages of objects (`WebModel::key2004`, Key et al. Sec. 5.3).
    Client {
        #[arg(long)]
        server: SocketAddr,
        /// No page starts after this many seconds.
        #[arg(long)]
        duration: f64,
        /// Objects still in flight this long after --duration are abandoned.
        #[arg(long, default_value_t = 20.0)]
        grace: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Concurrent independent sessions.
        #[arg(long, default_value_t = 1)]
        sessions: u32,
    },
    /// Send a UDP square wave: `--rate-mbit` for `--period` s, silence for `--period` s, ...
    UdpSend {
        #[arg(long)]
        dst: SocketAddr,
        /// Rate while on, Mbit/s of whole Ethernet frames (as tbf counts).
        #[arg(long, default_value_t = 6.7)]
        rate_mbit: f64,
        /// On period = off period, s.
        #[arg(long)]
        period: f64,
        #[arg(long)]
        duration: f64,
    },
    /// Count received UDP bytes in 100 ms bins.
    UdpSink {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        duration: f64,
    },
    /// TCP round-trip probe (64-byte answers) against a `server`.
    Probe {
        #[arg(long)]
        server: SocketAddr,
        #[arg(long, default_value_t = 200)]
        count: u32,
        #[arg(long, default_value_t = 20)]
        interval_ms: u64,
    },
}

fn ready() {
    println!("ready");
    let _ = std::io::stdout().flush();
}

fn main() -> Result<()> {
    let secs = Duration::from_secs_f64;
    match Cli::parse().cmd {
        Cmd::Server { listen } => {
            let l = TcpListener::bind(listen).with_context(|| format!("binding {listen}"))?;
            ready();
            web::serve(l, Arc::new(AtomicBool::new(false)))
        }
        Cmd::Client { server, duration, grace, seed, sessions } => {
            let cfg = ClientConfig {
                server,
                model: WebModel::key2004(),
                seed,
                sessions,
                duration: secs(duration),
                grace: secs(grace),
            };
            let mut w = std::io::stdout().lock();
            let (mut ok, mut failed) = (0u64, 0u64);
            web::run_client(&cfg, |r| {
                *(if r.ok() { &mut ok } else { &mut failed }) += 1;
                writeln!(w, "{}", serde_json::to_string(r)?)?;
                Ok(w.flush()?)
            })?;
            eprintln!("slipstream-web client: {ok} objects fetched, {failed} failed");
            Ok(())
        }
        Cmd::UdpSend { dst, rate_mbit, period, duration } => {
            let wave =
                udp::SquareWave { rate_bps: rate_mbit * 1e6, period_s: period, payload: udp::MAX_PAYLOAD };
            let n = udp::send_square_wave(dst, &wave, secs(duration))?;
            eprintln!("slipstream-web udp-send: {n} datagrams");
            Ok(())
        }
        Cmd::UdpSink { listen, duration } => {
            let sock = UdpSocket::bind(listen).with_context(|| format!("binding {listen}"))?;
            ready();
            let bins = udp::run_sink(&sock, secs(duration), Duration::from_millis(100))?;
            println!("{}", serde_json::to_string(&bins)?);
            Ok(())
        }
        Cmd::Probe { server, count, interval_ms } => {
            let rtts = probe::tcp_rtt_probe(server, 64, count, Duration::from_millis(interval_ms))?;
            println!("{}", serde_json::json!({ "rtts_s": rtts }));
            Ok(())
        }
    }
}
