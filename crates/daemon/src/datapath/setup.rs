//! Opening the datapaths at start, while the daemon still has every privilege: the NFQUEUE
//! queues (both datapaths: the eBPF one takes handshakes through them) and, when
//! `datapath.engine` asks for them, the tc programs on the LAN interfaces.

use anyhow::Context;
use slipstream_config::{Config, DatapathEngine};
use slipstream_nfqueue::QueueConfig;
use tracing::{error, info, warn};

use crate::lan_side;

/// Binds the NFQUEUE queues.
pub(crate) fn open_queues(config: &Config) -> anyhow::Result<slipstream_nfqueue::Datapath> {
    let queues = slipstream_nfqueue::Datapath::open(QueueConfig::from_config(&config.datapath))
        .context("setting up NFQUEUE")?;
    info!(
        "NFQUEUE socket receive buffer: {} KiB (both queues full: {} packets each)",
        queues.receive_buffer() / 1024,
        config.datapath.queue_max_len
    );
    Ok(queues)
}

/// Arrival times from the kernel instead of when the packet thread read the packet. Only with
/// the NFQUEUE datapath: the eBPF datapath's reports carry the kernel's time, its queues bring
/// only handshakes (read at once), and stamping is host-wide, a clock read for every packet
/// every interface receives.
pub(crate) fn enable_timestamps(queues: &mut slipstream_nfqueue::Datapath) {
    if let Err(e) = queues.enable_timestamps() {
        warn!("kernel packet timestamps unavailable ({e}): packets count as arriving when read");
    }
}

/// Loads the tc programs and attaches them to the LAN interfaces when `datapath.engine` asks
/// for them ("ebpf": a failure stops the start; "auto": falls back to NFQUEUE), and records the
/// datapath in use in `config`, which the firewall rules follow.
pub(crate) fn open_kernel_datapath(config: &mut Config) -> anyhow::Result<Option<KernelDatapath>> {
    let wanted = config.datapath.engine;
    if wanted == DatapathEngine::Nfqueue {
        return Ok(None);
    }
    let loaded = if config.datapath.hook.forward() {
        load_tc(config)
    } else {
        Err(anyhow::anyhow!(
            "the tc programs work on the LAN interfaces, so only with hook \"forward\" or \"both\""
        ))
    };
    match loaded {
        Ok(tc) => {
            info!("eBPF datapath: tc programs on {}", tc.attached().join(", "));
            config.datapath.engine = DatapathEngine::Ebpf;
            Ok(Some(tc))
        }
        Err(e) if wanted == DatapathEngine::Auto => {
            warn!("eBPF datapath unavailable ({e:#}): using NFQUEUE");
            config.datapath.engine = DatapathEngine::Nfqueue;
            Ok(None)
        }
        Err(e) => Err(e.context("setting up the eBPF datapath (datapath.engine = \"ebpf\")")),
    }
}

/// The tc programs, loaded and attached.
#[cfg(feature = "ebpf")]
pub(crate) type KernelDatapath = slipstream_ebpf::TcDatapath;

/// A binary built without the cargo feature `ebpf` (an NFQUEUE-only package, built without
/// clang) has no tc programs: no value of this type exists.
#[cfg(not(feature = "ebpf"))]
pub(crate) enum KernelDatapath {}

#[cfg(not(feature = "ebpf"))]
impl KernelDatapath {
    fn attached(&self) -> Vec<String> {
        match *self {}
    }
}

/// Why `datapath.engine` "ebpf" cannot start, and what "auto" logs before it uses NFQUEUE.
#[cfg(not(feature = "ebpf"))]
fn load_tc(_config: &Config) -> anyhow::Result<KernelDatapath> {
    anyhow::bail!("this slipstreamd was built without the eBPF datapath (cargo feature \"ebpf\" off)")
}

#[cfg(feature = "ebpf")]
fn load_tc(config: &Config) -> anyhow::Result<slipstream_ebpf::TcDatapath> {
    let mut tc = slipstream_ebpf::TcDatapath::load(slipstream_ebpf::TcConfig {
        max_flows: u32::try_from(config.limits.max_flows).unwrap_or(u32::MAX),
        attach: slipstream_ebpf::AttachMode::from_env(),
        ..slipstream_ebpf::TcConfig::default()
    })?;
    let devices = lan_side::devices(&config.datapath.lan_interfaces);
    anyhow::ensure!(
        !devices.is_empty(),
        "no LAN interface present ({:?})",
        config.datapath.lan_interfaces
    );
    for device in devices {
        tc.attach(&device)?;
    }
    Ok(tc)
}

/// After the privileges went: writes the heartbeat, the map write the packet thread makes every
/// tick. A kernel that refuses it (before 5.19 without CAP_BPF, see `privileges`) would leave the
/// programs inert while the daemon believed them working: with "auto" the daemon falls back to
/// NFQUEUE (the firewall rules are not installed yet, so they follow), with "ebpf" it stops.
#[cfg(feature = "ebpf")]
pub(crate) fn check_maps_writable(
    config: &mut Config,
    tc: Option<slipstream_ebpf::TcDatapath>,
    wanted: DatapathEngine,
    queues: &mut slipstream_nfqueue::Datapath,
) -> anyhow::Result<Option<slipstream_ebpf::TcDatapath>> {
    let Some(mut tc) = tc else { return Ok(None) };
    match tc.heartbeat(crate::kernel_side::HEARTBEAT) {
        Ok(()) => {
            info!("eBPF datapath: maps writable after dropping privileges");
            Ok(Some(tc))
        }
        Err(e) if wanted == DatapathEngine::Auto => {
            error!(
                "eBPF DATAPATH UNUSABLE: its maps cannot be written after dropping privileges ({e}); \
                 falling back to NFQUEUE (kernels before 5.19 need CAP_BPF kept: check the \
                 capability file)"
            );
            drop(tc);
            config.datapath.engine = DatapathEngine::Nfqueue;
            enable_timestamps(queues);
            Ok(None)
        }
        Err(e) => Err(anyhow::anyhow!(
            "the eBPF datapath's maps cannot be written after dropping privileges ({e}); kernels \
             before 5.19 need CAP_BPF kept (datapath.engine = \"ebpf\")"
        )),
    }
}

/// Without the eBPF datapath there are no maps to check.
#[cfg(not(feature = "ebpf"))]
pub(crate) fn check_maps_writable(
    _config: &mut Config,
    tc: Option<KernelDatapath>,
    _wanted: DatapathEngine,
    _queues: &mut slipstream_nfqueue::Datapath,
) -> anyhow::Result<Option<KernelDatapath>> {
    Ok(tc)
}

#[cfg(all(test, not(feature = "ebpf")))]
mod tests_without_ebpf {
    use super::*;

    fn config(engine: &str) -> Config {
        let text = format!(
            "[datapath]\nhook = \"forward\"\nengine = \"{engine}\"\n\
             [[rules]]\nname = \"dl\"\nremote_ports = [\"6881\"]\n"
        );
        slipstream_config::parse(&text, "t.toml").unwrap()
    }

    #[test]
    fn auto_falls_back_to_nfqueue() {
        let mut c = config("auto");
        assert!(open_kernel_datapath(&mut c).unwrap().is_none());
        assert_eq!(c.datapath.engine, DatapathEngine::Nfqueue);
    }

    #[test]
    fn ebpf_asked_for_stops_the_start_and_says_why() {
        let mut c = config("ebpf");
        let e = format!("{:#}", open_kernel_datapath(&mut c).err().unwrap());
        assert!(e.contains("built without the eBPF datapath"), "{e}");
    }
}
