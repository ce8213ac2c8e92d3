//! The control socket: `slipstream status` and `slipstream flows` (protocol in
//! `slipstream_inspect`). One JSON request line in, one JSON response line out, per connection.
//!
//! Flow data comes from the packet thread, asked through its command channel: it builds a
//! snapshot of every flow (bounded by `limits.max_flows`) only when a client asks, so the packet
//! path stays lock-free and the metrics snapshot stays small (top N). The rest of `status` is
//! the control side's own state.
#![allow(
    unsafe_code,
    reason = "umask(2) around the bind, so the socket is created 0600 with no window"
)]

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use slipstream_engine::{EngineSnapshot, FlowKey, FlowSnapshot, LinkSnapshot, PassReason, Side};
use slipstream_inspect::{
    FirewallStatus, FlowInfo, FlowList, LinkStatus, PivSummary, PolicerInfo, ProbeStatus, Request, Response,
    RuleStatus, Status, MAX_REQUEST_BYTES,
};
use slipstream_metrics::{household_links, DaemonCounters, ProbeCounters, SharedSnapshot};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tracing::debug;

use crate::packet_loop::{PacketCommand, PacketView};

/// How long a client may take to send its request, and the packet thread to answer.
const TIMEOUT: Duration = Duration::from_secs(3);

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) fn unix_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The control side's view of itself, for `status`. Written by the main loop (reloads, watchdog).
#[derive(Clone, Debug, Default)]
pub(crate) struct ControlState {
    pub config_path: String,
    pub loaded_unix: u64,
    pub last_reload_error: Option<String>,
    pub restart_needed: Vec<String>,
    pub firewall_backend: String,
    pub firewall_installed: bool,
    pub firewall_last_check_unix: Option<u64>,
    pub firewall_last_error: Option<String>,
    /// `nfqueue` or `ebpf`: the datapath the daemon runs (`status`).
    pub datapath: String,
    pub ack_queue: u16,
    pub data_queue: u16,
    /// How each rule classes by name (`preset steam`), by rule name; shown by `flows`.
    pub matched_by: std::collections::BTreeMap<String, String>,
    /// The address sets of rules by name and the backend holding them; `status` counts entries.
    pub name_sets: Vec<slipstream_firewall::KernelSet>,
    pub name_sets_backend: Option<slipstream_firewall::Backend>,
    /// The DHCP lease files (`names.dhcp_leases`): the live page names LAN hosts from them.
    pub dhcp_leases: Vec<std::path::PathBuf>,
    /// The LAN interfaces (`datapath.lan_interfaces`): the live page's LAN prefixes.
    pub lan_interfaces: Vec<String>,
}

/// Everything a connection handler needs.
pub(crate) struct Control {
    pub state: Mutex<ControlState>,
    pub counters: Arc<DaemonCounters>,
    pub started: std::time::Instant,
    pub packets: Mutex<Sender<PacketCommand>>,
    pub datapath_errors: Arc<AtomicU64>,
    /// The metrics snapshot, used for `status` if the packet thread does not answer.
    pub published: SharedSnapshot,
    /// The link-delay prober's counters and target (the packet thread writes them).
    pub probes: Arc<ProbeCounters>,
}

impl Control {
    pub(crate) fn update(&self, f: impl FnOnce(&mut ControlState)) {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
    }

    pub(crate) fn state(&self) -> ControlState {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Sends a command to the packet thread; false if it is gone.
    pub(crate) fn send(&self, command: PacketCommand) -> bool {
        self.packets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(command)
            .is_ok()
    }

    /// A snapshot from the packet thread with the `top_flows` busiest flows.
    async fn ask(&self, top_flows: usize) -> Option<PacketView> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if !self.send(PacketCommand::Snapshot { top_flows, reply }) {
            return None;
        }
        tokio::time::timeout(TIMEOUT, answer).await.ok()?.ok()
    }

    async fn respond(&self, request: Request) -> Response {
        match request {
            Request::Status => Response::Status(Box::new(self.status_now().await)),
            Request::Flows => match self.flows_now(usize::MAX).await {
                Some(list) => Response::Flows(list),
                None => Response::Error("the packet thread does not answer (stopped?)".into()),
            },
        }
    }

    /// `status`, as the control socket and `GET /api/status` answer it: from a fresh snapshot,
    /// or the metrics snapshot if the packet thread does not answer.
    pub(crate) async fn status_now(&self) -> Status {
        let view = match self.ask(0).await {
            Some(view) => view,
            None => {
                let snapshot = (*self.published.latest()).clone();
                PacketView {
                    configured_rules: snapshot.rules.len(),
                    snapshot,
                    keys: Vec::new(),
                }
            }
        };
        self.status(&view)
    }

    /// `flows` with the `top` busiest flows (`usize::MAX`: all), as the control socket and
    /// `GET /api/flows` answer it; `None` if the packet thread does not answer.
    pub(crate) async fn flows_now(&self, top: usize) -> Option<FlowList> {
        let view = self.ask(top).await?;
        let mut list = flow_list(&view);
        let by = self.state().matched_by;
        for f in &mut list.flows {
            f.matched_by = by.get(&f.rule).cloned().unwrap_or_default();
        }
        Some(list)
    }

    fn status(&self, view: &PacketView) -> Status {
        let state = self.state();
        let name_sets = crate::names::set_status(state.name_sets_backend, &state.name_sets);
        let s = &view.snapshot;
        let passed = PassReason::ALL.iter().map(|r| s.counters.passed(*r)).sum();
        Status {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            pid: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs(),
            config_path: state.config_path,
            config_loaded_unix: state.loaded_unix,
            reloads_ok: self.counters.reloads_ok(),
            reloads_failed: self.counters.reloads_failed(),
            last_reload_error: state.last_reload_error,
            restart_needed: state.restart_needed,
            rules: s
                .rules
                .iter()
                .enumerate()
                .map(|(i, r)| RuleStatus {
                    name: r.name.clone(),
                    controller: r.controller.to_owned(),
                    active_flows: r.active_flows,
                    flows_started: r.flows_started,
                    removed: i >= view.configured_rules,
                })
                .collect(),
            firewall: FirewallStatus {
                backend: state.firewall_backend,
                installed: state.firewall_installed,
                last_check_unix: state.firewall_last_check_unix,
                reapplied: self.counters.firewall_reapplied_count(),
                last_error: state.firewall_last_error,
            },
            datapath: state.datapath,
            ack_queue: state.ack_queue,
            data_queue: state.data_queue,
            packets: s.counters.packets,
            packets_rewritten: s.counters.rewritten,
            packets_passed: passed,
            flows_active: s.active_flows,
            flows_max: s.max_flows,
            datapath_errors: self.datapath_errors.load(Ordering::Relaxed),
            // The same links as the metrics show, so `status` and the dashboard agree.
            household: household_links(s).map(link_status).collect(),
            name_sets,
            probe: Some(probe_status(&self.probes)),
        }
    }
}

/// The prober's part of `status`.
fn probe_status(c: &ProbeCounters) -> ProbeStatus {
    ProbeStatus {
        target: c.target(),
        sent: c.sent.load(Ordering::Relaxed),
        answered: c.answered.load(Ordering::Relaxed),
        lost: c.lost.load(Ordering::Relaxed),
        last_rtt_ms: c.last_rtt_seconds().map(|s| s * 1000.0),
    }
}

pub(crate) fn link_status(l: &LinkSnapshot) -> LinkStatus {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    LinkStatus {
        link: l.direction.as_str().to_owned(),
        controller: l.controller.to_owned(),
        phase: l.phase.as_str().to_owned(),
        budget_bytes: l.budget_bytes,
        in_flight_bytes: l.in_flight_bytes,
        queue_delay_ms: l.queue_delay.map(ms),
        base_rtt_ms: l.base_rtt.map(ms),
        queue_target_ms: l.targets.map(|t| ms(t.threshold)),
        queue_aim_ms: l.targets.map(|t| ms(t.aim)),
        best_effort_pace: l.targets.map(|t| t.pace.as_str().to_owned()),
        flows: l.flows,
        held_flows: l.held_flows,
        goodput_bps: l.goodput_bits_per_second,
        best_effort_bps: l.best_effort_bits_per_second,
        slowdowns: l.slowdowns,
        window_updates: l.window_updates,
    }
}

/// Every flow of the view, for `flows`.
pub(crate) fn flow_list(view: &PacketView) -> FlowList {
    let s = &view.snapshot;
    FlowList {
        active: s.active_flows,
        max: s.max_flows,
        flows: s
            .flows
            .iter()
            .zip(&view.keys)
            .map(|(f, k)| flow_info(s, view.configured_rules, k, f))
            .collect(),
    }
}

fn flow_info(s: &EngineSnapshot, configured: usize, key: &FlowKey, f: &FlowSnapshot) -> FlowInfo {
    let rule = usize::from(f.rule).checked_sub(1).and_then(|i| s.rules.get(i));
    let c = f.controller;
    FlowInfo {
        rule: rule.map_or_else(|| f.rule.to_string(), |r| r.name.clone()),
        rule_removed: usize::from(f.rule) > configured,
        matched_by: String::new(),
        controller: rule.map_or("", |r| r.controller).to_owned(),
        endpoints: [
            key.endpoint(Side::Low).to_string(),
            key.endpoint(Side::High).to_string(),
        ],
        sender: f.sender.map(|a| a.to_string()),
        receiver: f.receiver.map(|a| a.to_string()),
        mode: c.map_or_else(String::new, |c| c.mode.to_string()),
        policy: c.map_or_else(String::new, |c| c.policy.to_string()),
        rwnd_bytes: f.forwarded_window,
        host_window_bytes: f.host_window,
        target_window_bytes: c.and_then(|c| c.target_window),
        cwnd_estimate_bytes: c.and_then(|c| c.cwnd_estimate),
        piv: c.and_then(|c| c.last_epoch).map(|e| PivSummary {
            sum_ms: e.piv_sum_micros as f64 / 1000.0,
            positive_ratio: e.positive_fraction(),
            count: e.piv_count,
        }),
        goodput_bps: f.goodput_bits_per_second,
        acked_bytes: f.acked_bytes,
        rtt_ms: f.rtt.map(|d| d.as_secs_f64() * 1000.0),
        unclamped: f.unclamped_reason.map(|r| r.as_str().to_owned()),
        link: f.link.map(|l| l.as_str().to_owned()),
        allocation_bytes: f.allocation,
        held: f.held,
        protocol: f.udp.as_ref().map_or("tcp", |u| u.kind).to_owned(),
        policer: f.udp.as_ref().map(|u| PolicerInfo {
            rate_bps: u.policed_bits_per_second,
            dropped_packets: u.dropped_packets,
            dropped_bytes: u.dropped_bytes,
            marked_packets: u.marked_packets,
            delayed_packets: u.delayed_packets,
        }),
    }
}

/// The bound control socket; the file is removed on drop.
pub(crate) struct ControlSocket {
    pub listener: UnixListener,
    path: PathBuf,
}

impl ControlSocket {
    /// Binds `path` with mode 0600 (only root, whom the daemon runs as, may connect), replacing a
    /// stale socket file (never another kind of file). The socket is created under umask 0177, so
    /// it is never open to others, not even before the chmod; call it before other threads start
    /// (the umask is the process's).
    pub(crate) fn bind(path: &Path) -> anyhow::Result<ControlSocket> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_socket() => {
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    bail!(
                        "control socket {}: another process (a running slipstreamd?) is listening on it",
                        path.display()
                    );
                }
                std::fs::remove_file(path)
                    .with_context(|| format!("removing the stale control socket {}", path.display()))?;
            }
            Ok(_) => bail!(
                "control socket {}: the path exists and is not a socket; not replacing it",
                path.display()
            ),
            Err(_) => {}
        }
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
        }
        // SAFETY: umask(2) only swaps the process's file mode creation mask.
        let umask = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(path);
        // SAFETY: as above; puts the previous mask back.
        unsafe { libc::umask(umask) };
        let listener = bound.with_context(|| format!("binding the control socket {}", path.display()))?;
        let socket = ControlSocket {
            listener,
            path: path.to_path_buf(),
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("chmod 0600 {}", path.display()))?;
        Ok(socket)
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            debug!("removing the control socket {}: {e}", self.path.display());
        }
    }
}

/// Accepts connections until the future is dropped; each is served on its own task.
pub(crate) async fn serve(listener: &UnixListener, control: Arc<Control>) -> io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let control = control.clone();
        tokio::spawn(async move {
            if let Err(e) = handle(stream, &control).await {
                debug!("control connection: {e}");
            }
        });
    }
}

async fn handle(stream: UnixStream, control: &Control) -> io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read.take(MAX_REQUEST_BYTES as u64));
    let mut line = String::new();
    let response = match tokio::time::timeout(TIMEOUT, reader.read_line(&mut line)).await {
        Err(_) => Response::Error("no request within 3 s".into()),
        Ok(Err(e)) => Response::Error(format!("reading the request: {e}")),
        Ok(Ok(_)) => match Request::parse_line(&line) {
            Ok(request) => control.respond(request).await,
            Err(e) => Response::Error(e),
        },
    };
    write.write_all(response.to_line().as_bytes()).await?;
    write.shutdown().await
}

#[cfg(test)]
mod tests;
