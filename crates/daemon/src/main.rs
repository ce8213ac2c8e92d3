//! `slipstreamd`: the Slipstream daemon.
//!
//! Start-up order matters for never hurting traffic: the queues are bound before the firewall
//! rules that feed them exist, and the rules are removed before the queues close. Packets that
//! meet rules without a listener bypass the queue (`--queue-bypass`); a full queue fails open.
//!
//! Two threads: the packet thread owns the engine (`packet_loop`); the control side (a
//! single-threaded tokio runtime on the main thread) serves metrics over HTTP and the control
//! socket (`control_socket`), and handles signals and the firewall:
//!
//! * **SIGHUP** re-reads the config file (`Daemon::reload`, what can change live: `reload`);
//! * **SIGTERM / SIGINT** stop: rules removed, queues closed, control socket file removed, exit 0;
//! * **watchdog**: every 5 s the rules are checked and re-applied if something removed them
//!   (`slipstream_config_reloads_total`, `slipstream_firewall_reapplied_total` count both).

// Built without the eBPF datapath (NFQUEUE only, cargo feature `ebpf` off), the helpers only it
// uses (LAN interface lookups, link-frame marks) are left unused; the default build still lints them.
#![cfg_attr(not(feature = "ebpf"), allow(dead_code, unused_imports))]

mod clock;
mod control_side;
mod control_socket;
mod datapath;
#[cfg(feature = "ebpf")]
#[allow(
    clippy::incompatible_msrv,
    reason = "the eBPF datapath needs Rust 1.87 (aya), the rest 1.85"
)]
mod kernel_side;
mod kernel_time;
mod lan_hosts;
mod lan_side;
mod logging;
mod metrics_server;
mod multicall;
mod names;
mod packet_loop;
mod page;
mod privileges;
mod prober;
mod reload;
mod scale_lookups;
mod steady_flows;
mod wan_counters;
mod window_updates;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use slipstream_config::Config;
use slipstream_engine::Engine;
use slipstream_firewall::{detect_backend, Firewall};
use slipstream_metrics::{read_interface_bytes, read_queue_stats, DaemonCounters, HostStats, SharedSnapshot};
use tracing::{error, info, warn};

use crate::control_side::{matched_by, write_dnsmasq_conf, Daemon, Reloaded};
use crate::control_socket::{unix_now, unix_now_ms, Control, ControlSocket, ControlState};
#[cfg(feature = "ebpf")]
use crate::datapath::ebpf::EbpfDatapath;
use crate::datapath::nfqueue::NfqueueDatapath;
use crate::datapath::Datapath;
use crate::lan_side::LanSide;
use crate::packet_loop::PacketLoop;
use crate::window_updates::{WindowUpdateCounters, WindowUpdateSender};

/// Makes the background TCP flows of a home network less-than-best-effort by clamping the
/// receive window of their ACKs.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// Run with this config file (UCI, as /etc/config/slipstream, or TOML).
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
    /// With --config: remove the firewall rules and control socket a previous run left behind
    /// (after a crash or `kill -9`), then exit. The init script runs it when the service stops.
    #[arg(long, requires = "config")]
    cleanup: bool,
    /// Start even if OpenWrt flow offloading is on. Offloaded flows skip netfilter after their
    /// handshake, so Slipstream cannot slow them down; only for testing.
    #[arg(long)]
    allow_flow_offload: bool,
    /// With --config: write the dnsmasq snippet for the rules by name (`names.dnsmasq_conf`),
    /// print `changed` or `unchanged`, and exit. The init script restarts dnsmasq on `changed`.
    #[arg(long, requires = "config")]
    write_dnsmasq_conf: bool,
    /// With --config: print the `uci batch` commands that add the rules by domain to OpenWrt's
    /// dnsmasq as `dhcp` ipset sections, and exit. The OpenWrt init script applies them.
    #[arg(long, requires = "config")]
    dnsmasq_uci: bool,
}

fn main() -> ExitCode {
    if multicall::called_as_cli(std::env::args_os().next().as_deref()) {
        return slipstream_cli::run(std::env::args_os());
    }
    let cli = Cli::parse();
    if let Some(path) = cli.check_config {
        return match slipstream_config::load(&path) {
            Ok(config) if !config.enabled => {
                println!("{}: valid, disabled (enabled = false)", path.display());
                ExitCode::SUCCESS
            }
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
    if cli.cleanup {
        return cleanup(&config);
    }
    if cli.dnsmasq_uci {
        print!("{}", names::dnsmasq_uci_batch(&config));
        return ExitCode::SUCCESS;
    }
    if cli.write_dnsmasq_conf {
        let written = detect_backend(config.datapath.firewall)
            .map_err(anyhow::Error::new)
            .and_then(|backend| Ok(names::write_dnsmasq_conf(&config, backend)?));
        return match written {
            Ok(changed) => {
                println!("{}", if changed { "changed" } else { "unchanged" });
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: writing the dnsmasq snippet: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    if !config.enabled {
        eprintln!(
            "slipstreamd: disabled in {} (enabled = false); not starting",
            path.display()
        );
        return ExitCode::SUCCESS;
    }
    logging::init();
    info!(
        "slipstreamd {} starting with {}",
        env!("CARGO_PKG_VERSION"),
        path.display()
    );
    let mut config = config;
    if config.datapath.hook.forward() && !cli.allow_flow_offload {
        use slipstream_config::DatapathEngine;
        let findings = slipstream_firewall::detect_flow_offload(&slipstream_firewall::CommandRunner::host());
        // Software offloading leaves the tc hooks in the path (docs/flow-offload.md): the eBPF
        // datapath works with it, NFQUEUE does not; "auto" then needs eBPF (which a binary built
        // without the `ebpf` feature does not have).
        let ebpf_possible = cfg!(feature = "ebpf") && config.datapath.engine != DatapathEngine::Nfqueue;
        let blocking = slipstream_firewall::blocking_findings(&findings, ebpf_possible);
        if !blocking.is_empty() {
            for finding in &blocking {
                error!("{finding}");
            }
            error!(
                "not starting: flow offloading makes established flows skip {}, so background flows \
                 could not be slowed down. Turn it off: {}{}",
                if ebpf_possible { "the CPU" } else { "netfilter" },
                slipstream_firewall::OFFLOAD_FIX,
                if ebpf_possible {
                    ""
                } else {
                    " (software offloading alone works with datapath.engine = \"ebpf\")"
                }
            );
            return ExitCode::from(3);
        }
        if !findings.is_empty() && config.datapath.engine == DatapathEngine::Auto {
            info!("software flow offloading is on: using the eBPF datapath, which sees offloaded flows");
            config.datapath.engine = DatapathEngine::Ebpf;
        }
    }
    match run(path, config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--cleanup`: removes what a previous run may have left (firewall rules by name, the tc
/// programs' filters on the LAN interfaces, the control socket file). Refuses, touching nothing, while a daemon answers on the control socket.
/// Exit 0 if everything is gone, 1 otherwise.
fn cleanup(config: &Config) -> ExitCode {
    let socket = &config.control.socket;
    if std::os::unix::net::UnixStream::connect(socket).is_ok() {
        eprintln!(
            "cleanup: a running daemon serves {}; stop it first (its rules are left alone)",
            socket.display()
        );
        return ExitCode::FAILURE;
    }
    let mut ok = true;
    match detect_backend(config.datapath.firewall) {
        Ok(backend) => {
            for e in slipstream_firewall::reset(backend, config) {
                eprintln!("cleanup: {e}");
                ok = false;
            }
        }
        Err(e) => {
            eprintln!("cleanup: {e}");
            ok = false;
        }
    }
    // The tc programs' netlink filters a killed daemon left (kernels before 6.6), with their maps.
    #[cfg(feature = "ebpf")]
    for device in lan_side::devices(&config.datapath.lan_interfaces) {
        if let Err(e) = slipstream_ebpf::remove_leftovers(&device) {
            eprintln!("cleanup: {e}");
            ok = false;
        }
    }
    if socket.exists() {
        if let Err(e) = std::fs::remove_file(socket) {
            eprintln!("cleanup: removing {}: {e}", socket.display());
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// How often the firewall watchdog checks that the rules are still installed.
const WATCHDOG_INTERVAL: Duration = Duration::from_secs(5);

fn run(config_path: PathBuf, mut config: Config) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let mut queues = datapath::setup::open_queues(&config)?;
    // Loaded and attached while the daemon still has CAP_BPF/CAP_SYS_ADMIN; decides the rules.
    let wanted_engine = config.datapath.engine;
    let tc = datapath::setup::open_kernel_datapath(&mut config)?;
    if tc.is_none() {
        datapath::setup::enable_timestamps(&mut queues);
    }
    // Opened before the firewall rules exist, like the queues; read by the control side later.
    let window_update_counters = Arc::new(WindowUpdateCounters::default());
    #[cfg_attr(not(feature = "ebpf"), allow(unused_mut))]
    let mut window_updates = WindowUpdateSender::open(window_update_counters.clone());
    #[cfg(feature = "ebpf")]
    if tc.is_some() {
        if let Err(e) = window_updates.mark_link_frames(slipstream_ebpf::OWN_MARK) {
            warn!("cannot mark the daemon's window updates to LAN hosts ({e}): the tc program will report them too");
        }
    }
    // The metrics listener and the control socket are bound now too, so that every socket that
    // needs a privilege exists before the privileges go (`privileges`); no thread runs yet, and
    // every thread started later inherits the reduced capability sets.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (listener, socket) = runtime.block_on(async {
        let metrics = &config.metrics.listen;
        let listener = tokio::net::TcpListener::bind(metrics)
            .await
            .with_context(|| format!("binding the metrics endpoint {metrics}"))?;
        anyhow::Ok((listener, ControlSocket::bind(&config.control.socket)?))
    })?;
    privileges::drop_privileges(tc.is_some() && privileges::bpf_needed_after_setup());
    let tc = datapath::setup::check_maps_writable(&mut config, tc, wanted_engine, &mut queues)?;
    // From here on the firewall programs run with the two capabilities the daemon kept.
    let backend = detect_backend(config.datapath.firewall).context("choosing a firewall backend")?;
    let firewall = Firewall::install(&config, backend).context("installing firewall rules")?;
    write_dnsmasq_conf(&config, backend);
    info!(
        "slipstreamd running: {} rules, firewall {backend:?}, queues {}/{}, metrics on http://{}/metrics, control socket {}",
        config.rules.len(),
        config.datapath.ack_queue,
        config.datapath.data_queue,
        config.metrics.listen,
        config.control.socket.display()
    );

    let counters = Arc::new(DaemonCounters::default());
    counters.config_loaded(unix_now_ms(), true);
    counters.set_firewall_installed(true);
    let snapshot = SharedSnapshot::default();
    let stop = Arc::new(AtomicBool::new(false));
    let datapath_errors = Arc::new(AtomicU64::new(0));
    let (commands_tx, commands_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let probe_counters = Arc::new(slipstream_metrics::ProbeCounters::default());
    let nfqueue = NfqueueDatapath::new(
        queues,
        config.datapath.mark_mask,
        LanSide::new(config.datapath.hook, config.datapath.lan_interfaces.clone()),
        window_updates,
    );
    let packet_loop = PacketLoop {
        datapath: nfqueue,
        engine: Engine::new(reload::engine_config(&config)),
        snapshot: snapshot.clone(),
        stop: stop.clone(),
        top_flows: config.metrics.top_flows,
        commands: commands_rx,
        errors: datapath_errors.clone(),
        window_updates: window_update_counters,
        scale_lookups: scale_lookups::ScaleLookups::start()
            .map_err(|e| warn!("no conntrack lookup thread ({e}): flows seen mid-stream stay unclamped"))
            .ok(),
        wan_counters: wan_counters::WanCounters::new(),
        steady_flows: steady_flows::SteadyFlowWatch::start(config.datapath.mark_mask)
            .map_err(|e| warn!("no steady-flow thread ({e}): calls under browsing are not told apart"))
            .ok(),
        prober: prober::Prober::new(config.probe, probe_counters.clone()),
    };
    let kernel_counters = Arc::new(slipstream_metrics::KernelCounters::default());
    let ebpf_in_use = tc.is_some();
    let datapath_name = if ebpf_in_use { "ebpf" } else { "nfqueue" };
    let packet_thread = match tc {
        #[cfg(feature = "ebpf")]
        Some(tc) => {
            let kernel = kernel_side::KernelSide::new(
                tc,
                config.limits.max_flows,
                config.datapath.lan_interfaces.clone(),
                config.datapath.mark_mask,
                kernel_counters.clone(),
            );
            let max_flows = config.limits.max_flows;
            spawn_packet_thread(
                packet_loop.map_datapath(|nfq| EbpfDatapath::new(nfq, kernel, max_flows)),
                done_tx,
            )?
        }
        #[cfg(not(feature = "ebpf"))]
        Some(never) => match never {},
        None => spawn_packet_thread(packet_loop, done_tx)?,
    };

    let lan_interfaces = Arc::new(Mutex::new(config.datapath.lan_interfaces.clone()));
    let mut registry = slipstream_metrics::registry(snapshot.clone());
    {
        let queues = [config.datapath.ack_queue, config.datapath.data_queue];
        let lan = lan_interfaces.clone();
        slipstream_metrics::register_host_stats(
            &mut registry,
            HostStats::from_providers(
                move || read_queue_stats(&queues),
                move || read_interface_bytes(&lan.lock().unwrap_or_else(PoisonError::into_inner)),
            ),
        );
    }
    slipstream_metrics::register_daemon_counters(&mut registry, counters.clone());
    slipstream_metrics::register_probe_counters(&mut registry, probe_counters.clone());
    if ebpf_in_use {
        slipstream_metrics::register_kernel_counters(&mut registry, kernel_counters);
    }
    let registry = Arc::new(registry);
    let control = Arc::new(Control {
        state: Mutex::new(ControlState {
            config_path: config_path.display().to_string(),
            loaded_unix: unix_now(),
            firewall_backend: backend.to_string(),
            firewall_installed: true,
            firewall_last_check_unix: Some(unix_now()),
            datapath: datapath_name.to_owned(),
            ack_queue: config.datapath.ack_queue,
            data_queue: config.datapath.data_queue,
            matched_by: matched_by(&config),
            name_sets: firewall.plan().sets.clone(),
            name_sets_backend: Some(backend),
            dhcp_leases: config.names.dhcp_leases.clone(),
            lan_interfaces: config.datapath.lan_interfaces.clone(),
            ..ControlState::default()
        }),
        counters: counters.clone(),
        started,
        packets: Mutex::new(commands_tx),
        datapath_errors,
        published: snapshot,
        probes: probe_counters,
    });
    let page = Arc::new(page::Page::new(control.clone()));
    let lease_poll = config.names.lease_poll;
    let mut daemon = Daemon {
        config_path,
        leases: names::LeaseWatch::new(&config.names.dhcp_leases),
        running: config,
        firewall,
        control: control.clone(),
        counters,
        lan_interfaces,
    };
    daemon.refresh_hosts();

    let served = runtime.block_on(async {
        // Moved in: the socket file goes when `socket` drops, at the end of this block.
        let socket = socket;
        let metrics_server = metrics_server::serve(listener, registry, page);
        let control_server = control_socket::serve(&socket.listener, control);
        tokio::pin!(metrics_server, control_server, done_rx);
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut hup = signal(SignalKind::hangup())?;
        let mut watchdog = tokio::time::interval(WATCHDOG_INTERVAL);
        watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        watchdog.tick().await; // the first tick is immediate; the rules were just verified
        let mut lease_check = tokio::time::interval(lease_poll);
        lease_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                r = &mut metrics_server => return r.context("metrics endpoint"),
                r = &mut control_server => return r.context("control socket"),
                _ = term.recv() => { info!("SIGTERM: shutting down"); break; }
                _ = int.recv() => { info!("SIGINT: shutting down"); break; }
                _ = &mut done_rx => break,
                _ = hup.recv() => {
                    if daemon.reload().await == Reloaded::Disabled {
                        break;
                    }
                }
                _ = watchdog.tick() => daemon.watchdog(),
                _ = lease_check.tick() => daemon.refresh_hosts(),
            }
        }
        Ok(())
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
    let removed = daemon.firewall.remove().context("removing firewall rules");
    names::remove_dnsmasq_conf(&daemon.running);
    served.and(looped).and(removed)
}

/// Runs `packet_loop` on its own thread; `done` fires when it ends.
fn spawn_packet_thread<D: Datapath + Send + 'static>(
    packet_loop: PacketLoop<D>,
    done: tokio::sync::oneshot::Sender<()>,
) -> std::io::Result<std::thread::JoinHandle<std::io::Result<packet_loop::LoopTotals>>> {
    std::thread::Builder::new().name("packets".into()).spawn(move || {
        let result = packet_loop.run();
        let _ = done.send(());
        result
    })
}

/// Logs the packets handled and the CPU time the daemon used for them.
#[allow(unsafe_code, reason = "getrusage(2) has no safe wrapper in libc")]
fn report_cpu(totals: packet_loop::LoopTotals) {
    // SAFETY: rusage is plain data; zero is a valid value for every field.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF has no other preconditions.
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
        "handled {} packets ({} rewritten, {} window updates sent ({} to a LAN host's link), {} failed); CPU user {user:.2} s, system {system:.2} s: {per_packet_us:.1} us per packet",
        totals.packets,
        totals.rewritten,
        totals.window_updates_sent,
        totals.window_updates_to_lan_link,
        totals.window_updates_failed
    );
}
