//! `nfq-accept`: the lab's baseline for the cost of NFQUEUE itself. It sets up exactly what
//! `slipstreamd` sets up for a config — the same two queues (ACK queue with full copies, data
//! queue with header-only copies, fail-open, same lengths) and the same firewall rules
//! (`slipstream_firewall`, same backend choice) — and then accepts every queued packet unchanged,
//! with no parsing, no flow table and no controller. The `datapath` scenario compares plain
//! forwarding, this and `slipstreamd`; the difference between this and `slipstreamd` is what the
//! engine and the daemon's bookkeeping cost, the difference between this and plain forwarding is
//! what queueing every packet to user space costs.
//!
//! ```sh
//! nfq-accept --config lab.toml     # prints "ready" when bound and the rules are in place;
//!                                  # SIGTERM/SIGINT: removes the rules, prints a summary line
//! ```
//!
//! At exit it prints one JSON line to stdout: packets accepted and its own CPU time
//! (`getrusage`), e.g. `{"packets":123456,"user_s":0.4,"system_s":2.1}`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use slipstream_firewall::{detect_backend, Firewall};
use slipstream_nfqueue::{Datapath, QueueConfig, Verdict};

#[derive(Parser)]
#[command(
    name = "nfq-accept",
    about = "Bind Slipstream's NFQUEUE queues and rules, accept every packet unchanged"
)]
struct Cli {
    /// A slipstreamd config (TOML or UCI): its queues and rules are used.
    #[arg(long)]
    config: PathBuf,
}

fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage fills the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return (f64::NAN, f64::NAN);
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(u.ru_utime), s(u.ru_stime))
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let config = slipstream_config::load(&cli.config).map_err(|e| anyhow::anyhow!("{e}"))?;
    // SIGTERM/SIGINT set the flag; the loop below checks it at least every 100 ms.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let mut datapath =
        Datapath::open(QueueConfig::from_config(&config.datapath)).context("setting up NFQUEUE")?;
    let backend = detect_backend(config.datapath.firewall).context("choosing a firewall backend")?;
    let firewall = Firewall::install(&config, backend).context("installing firewall rules")?;
    println!("ready");
    let mut packets = 0u64;
    let result = (|| -> Result<()> {
        while !stop.load(Ordering::SeqCst) {
            datapath.wait_readable(100)?;
            while let Some(mut msg) = datapath.try_recv()? {
                msg.set_verdict(Verdict::Accept);
                datapath.verdict(msg)?;
                packets += 1;
            }
        }
        Ok(())
    })();
    let removed = firewall.remove();
    let (user_s, system_s) = cpu_seconds();
    println!("{}", serde_json::json!({ "packets": packets, "user_s": user_s, "system_s": system_s }));
    result?;
    removed.context("removing firewall rules")?;
    Ok(())
}
