//! `nfq-accept`: the lab's baseline for the cost of NFQUEUE itself. It sets up exactly what
//! `slipstreamd` sets up for a config (the same two queues, the same firewall rules from
//! `slipstream_firewall`) and then accepts every queued packet unchanged, with no parsing, no
//! flow table and no controller: the `datapath` scenario's step between plain forwarding
//! (what queueing to user space costs) and `slipstreamd` (what the engine costs).
//!
//! `nfq-accept --config lab.toml` prints `ready` once the queues are bound and the rules in
//! place; on SIGTERM/SIGINT it removes the rules and prints `{"packets":N}`, the packets it
//! accepted (the scenario measures its CPU time from `/proc`).

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
    println!("{}", serde_json::json!({ "packets": packets }));
    result?;
    removed.context("removing firewall rules")?;
    Ok(())
}
