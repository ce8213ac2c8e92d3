//! `slipstreamd`: the Slipstream daemon.
//!
//! Start-up order matters for never hurting traffic: the queues are bound before the firewall
//! rules that feed them exist, and the rules are removed before the queues close. Packets that
//! meet rules without a listener bypass the queue (`--queue-bypass`); a full queue fails open.

mod clock;
mod metrics_server;
mod packet_loop;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use slipstream_config::Config;
use slipstream_engine::{Engine, EngineConfig, RuleSpec};
use slipstream_firewall::{detect_backend, Firewall};
use slipstream_metrics::SharedSnapshot;
use slipstream_nfqueue::{Datapath, QueueConfig};
use tracing::{error, info};

use crate::packet_loop::PacketLoop;

/// Makes the background TCP flows of a home network less-than-best-effort by clamping the
/// receive window of their ACKs.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// Run with this config file (TOML).
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present = "check_config",
        conflicts_with = "check_config"
    )]
    config: Option<PathBuf>,
    /// Validate this config file and exit (status 0 if valid, 2 if not).
    #[arg(long, value_name = "PATH")]
    check_config: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(path) = cli.check_config {
        return match slipstream_config::load(&path) {
            Ok(config) => {
                println!("{}: valid ({} rules)", path.display(), config.rules.len());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        };
    }
    let Some(path) = cli.config else {
        return ExitCode::from(2);
    };
    let config = match slipstream_config::load(&path) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn engine_config(config: &Config) -> EngineConfig {
    EngineConfig {
        rules: config
            .rules
            .iter()
            .map(|r| RuleSpec {
                name: r.name.clone(),
                controller: r.controller.clone(),
            })
            .collect(),
        max_flows: config.limits.max_flows,
        idle_timeout: config.limits.idle_timeout,
        evict_idle_after: config.limits.evict_idle_after,
    }
}

fn run(config: Config) -> anyhow::Result<()> {
    let datapath = Datapath::open(QueueConfig {
        ack_queue: config.datapath.ack_queue,
        data_queue: config.datapath.data_queue,
        max_len: config.datapath.queue_max_len,
        data_copy_bytes: config.datapath.data_copy_bytes,
    })
    .context("setting up NFQUEUE")?;
    let backend = detect_backend(config.datapath.firewall).context("choosing a firewall backend")?;
    let firewall = Firewall::install(&config, backend).context("installing firewall rules")?;
    info!(
        "slipstreamd running: {} rules, firewall {backend:?}, queues {}/{}, metrics on http://{}/metrics",
        config.rules.len(),
        config.datapath.ack_queue,
        config.datapath.data_queue,
        config.metrics.listen
    );

    let snapshot = SharedSnapshot::default();
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let packet_loop = PacketLoop {
        datapath,
        engine: Engine::new(engine_config(&config)),
        snapshot: snapshot.clone(),
        stop: stop.clone(),
        mark_mask: config.datapath.mark_mask,
        top_flows: config.metrics.top_flows,
    };
    let packet_thread = std::thread::Builder::new()
        .name("packets".into())
        .spawn(move || {
            let result = packet_loop.run();
            let _ = done_tx.send(());
            result
        })?;

    let registry = Arc::new(slipstream_metrics::registry(snapshot));
    let served = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let listener = tokio::net::TcpListener::bind(config.metrics.listen)
                .await
                .with_context(|| format!("binding the metrics endpoint {}", config.metrics.listen))?;
            tokio::select! {
                r = metrics_server::serve(listener, registry) => r.context("metrics endpoint"),
                r = shutdown_signal() => { info!("{}: shutting down", r?); Ok(()) }
                _ = done_rx => Ok(()),
            }
        });

    stop.store(true, Ordering::Relaxed);
    let looped = match packet_thread.join() {
        Ok(Ok(totals)) => {
            report_cpu(totals);
            Ok(())
        }
        Ok(Err(e)) => Err(anyhow::Error::new(e).context("packet loop")),
        Err(_) => Err(anyhow::anyhow!("packet loop panicked")),
    };
    let removed = firewall.remove().context("removing firewall rules");
    served.and(looped).and(removed)
}

/// Logs the packets handled and the CPU time the daemon used for them.
fn report_cpu(totals: packet_loop::LoopTotals) {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF has no other preconditions.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let (user, system) = (secs(usage.ru_utime), secs(usage.ru_stime));
    let per_packet_us = if totals.packets > 0 {
        (user + system) * 1e6 / totals.packets as f64
    } else {
        0.0
    };
    info!(
        "handled {} packets ({} rewritten); CPU user {user:.2} s, system {system:.2} s: {per_packet_us:.1} us per packet",
        totals.packets, totals.rewritten
    );
}

async fn shutdown_signal() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}
