//! `slipstream-web`: the lab's traffic generators (see `slipstream_lab::web`).
//!
//! ```sh
//! slipstream-web server --listen 0.0.0.0:8080                 # object server ("ready" on stdout)
//! slipstream-web client --server 10.77.1.2:8080 --duration 30 --seed 1 --out objects.jsonl
//! slipstream-web udp-sink --listen 0.0.0.0:5300 --duration 60 --out bins.json
//! slipstream-web udp-send --dst 10.77.3.2:5300 --rate-mbit 6.7 --period 5 --duration 50
//! slipstream-web probe --server 10.77.1.2:6882 --count 500 --interval-ms 20   # RTTs as JSON
//! ```

use std::io::Write;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use slipstream_lab::web::{self, probe, udp, ClientConfig, CountDist, SizeDist, WebModel};

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
    /// Fetch pages of objects (Key et al. Sec. 5.3 model); one JSON line per object.
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
        /// Objects of a page in flight at once.
        #[arg(long, default_value_t = 4)]
        parallel: usize,
        /// Objects per page (the mean, with --objects-pareto-shape).
        #[arg(long, default_value_t = 10)]
        objects_per_page: u32,
        /// Draw the objects per page from a Pareto with this shape (cap 10 x the mean).
        #[arg(long)]
        objects_pareto_shape: Option<f64>,
        /// Pareto shape of the object sizes.
        #[arg(long, default_value_t = 1.2)]
        size_shape: f64,
        /// Mean object size, bytes (of the clamped distribution).
        #[arg(long, default_value_t = 12_000.0)]
        size_mean: f64,
        /// Object sizes are clamped at this many bytes.
        #[arg(long, default_value_t = 1_000_000.0)]
        size_cap: f64,
        /// Mean think time between pages, s (exponential).
        #[arg(long, default_value_t = 1.0)]
        think_mean: f64,
        /// Mean gap between object launches in a page, s (exponential).
        #[arg(long, default_value_t = 0.001)]
        inter_object_mean: f64,
        /// Output file (JSON lines); stdout if absent.
        #[arg(long)]
        out: Option<PathBuf>,
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
        #[arg(long, default_value_t = udp::MAX_PAYLOAD)]
        payload: usize,
    },
    /// Count received UDP bytes in bins; writes a JSON array of {t, bytes, packets}.
    UdpSink {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        duration: f64,
        #[arg(long, default_value_t = 100)]
        bin_ms: u64,
        /// Output file; stdout if absent.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// TCP round-trip probe against a `server`: prints {"rtts_s": [...]} as JSON.
    Probe {
        #[arg(long)]
        server: SocketAddr,
        #[arg(long, default_value_t = 64)]
        size: u64,
        #[arg(long, default_value_t = 200)]
        count: u32,
        #[arg(long, default_value_t = 20)]
        interval_ms: u64,
    },
}

fn output(path: &Option<PathBuf>) -> Result<Box<dyn Write>> {
    Ok(match path {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    })
}

fn ready() {
    println!("ready");
    let _ = std::io::stdout().flush();
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Server { listen } => {
            let l = TcpListener::bind(listen).with_context(|| format!("binding {listen}"))?;
            ready();
            web::serve(l, Arc::new(AtomicBool::new(false)))
        }
        Cmd::Client {
            server,
            duration,
            grace,
            seed,
            sessions,
            parallel,
            objects_per_page,
            objects_pareto_shape,
            size_shape,
            size_mean,
            size_cap,
            think_mean,
            inter_object_mean,
            out,
        } => {
            let objects = match objects_pareto_shape {
                None => CountDist::Fixed(objects_per_page),
                Some(shape) => {
                    let mean = f64::from(objects_per_page);
                    CountDist::Pareto {
                        dist: SizeDist::with_mean(shape, mean, 10.0 * mean)?,
                    }
                }
            };
            let model = WebModel {
                objects,
                sizes: SizeDist::with_mean(size_shape, size_mean, size_cap)?,
                think_mean_s: think_mean,
                inter_object_mean_s: inter_object_mean,
                parallel,
            };
            let cfg = ClientConfig {
                server,
                model,
                seed,
                sessions,
                duration: Duration::from_secs_f64(duration),
                grace: Duration::from_secs_f64(grace),
            };
            let mut w = output(&out)?;
            let (mut ok, mut failed) = (0u64, 0u64);
            web::run_client(&cfg, |r| {
                if r.ok() {
                    ok += 1;
                } else {
                    failed += 1;
                }
                writeln!(w, "{}", serde_json::to_string(r)?)?;
                w.flush()?;
                Ok(())
            })?;
            eprintln!("slipstream-web client: {ok} objects fetched, {failed} failed");
            Ok(())
        }
        Cmd::UdpSend {
            dst,
            rate_mbit,
            period,
            duration,
            payload,
        } => {
            let wave = udp::SquareWave {
                rate_bps: rate_mbit * 1e6,
                period_s: period,
                payload,
            };
            let n = udp::send_square_wave(dst, &wave, Duration::from_secs_f64(duration))?;
            eprintln!("slipstream-web udp-send: {n} datagrams");
            Ok(())
        }
        Cmd::UdpSink {
            listen,
            duration,
            bin_ms,
            out,
        } => {
            let sock = UdpSocket::bind(listen).with_context(|| format!("binding {listen}"))?;
            ready();
            let bins = udp::run_sink(
                &sock,
                Duration::from_secs_f64(duration),
                Duration::from_millis(bin_ms),
            )?;
            let mut w = output(&out)?;
            writeln!(w, "{}", serde_json::to_string(&bins)?)?;
            w.flush()?;
            Ok(())
        }
        Cmd::Probe {
            server,
            size,
            count,
            interval_ms,
        } => {
            let rtts = probe::tcp_rtt_probe(server, size, count, Duration::from_millis(interval_ms))?;
            println!("{}", serde_json::json!({ "rtts_s": rtts }));
            Ok(())
        }
    }
}
