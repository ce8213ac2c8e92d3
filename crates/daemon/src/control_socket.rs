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
    FirewallStatus, FlowInfo, FlowList, LinkStatus, PivSummary, Request, Response, RuleStatus, Status,
    MAX_REQUEST_BYTES,
};
use slipstream_metrics::{household_links, DaemonCounters, SharedSnapshot};
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
    pub ack_queue: u16,
    pub data_queue: u16,
    /// How each rule classes by name (`preset steam`), by rule name; shown by `flows`.
    pub matched_by: std::collections::BTreeMap<String, String>,
    /// The address sets of rules by name and the backend holding them; `status` counts entries.
    pub name_sets: Vec<slipstream_firewall::KernelSet>,
    pub name_sets_backend: Option<slipstream_firewall::Backend>,
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
}

impl Control {
    pub(crate) fn update(&self, f: impl FnOnce(&mut ControlState)) {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
    }

    fn state(&self) -> ControlState {
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
            Request::Status => {
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
                Response::Status(Box::new(self.status(&view)))
            }
            Request::Flows => match self.ask(usize::MAX).await {
                Some(view) => {
                    let mut list = flow_list(&view);
                    let by = self.state().matched_by;
                    for f in &mut list.flows {
                        f.matched_by = by.get(&f.rule).cloned().unwrap_or_default();
                    }
                    Response::Flows(list)
                }
                None => Response::Error("the packet thread does not answer (stopped?)".into()),
            },
        }
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
        }
    }
}

fn link_status(l: &LinkSnapshot) -> LinkStatus {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    LinkStatus {
        link: l.direction.as_str().to_owned(),
        controller: l.controller.to_owned(),
        phase: l.phase.as_str().to_owned(),
        budget_bytes: l.budget_bytes,
        in_flight_bytes: l.in_flight_bytes,
        queue_delay_ms: l.queue_delay.map(ms),
        base_rtt_ms: l.base_rtt.map(ms),
        flows: l.flows,
        held_flows: l.held_flows,
        goodput_bps: l.goodput_bits_per_second,
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
mod tests {
    use super::*;
    use slipstream_control::{ControllerMode, ControllerStats, EpochSummary, WindowPolicy};
    use slipstream_engine::{LinkDirection, RuleSnapshot};

    fn key() -> FlowKey {
        FlowKey::from_packet(
            "192.168.1.20".parse().unwrap(),
            40000,
            "203.0.113.5".parse().unwrap(),
            6881,
        )
        .0
    }

    #[test]
    fn flows_name_their_rule_and_removed_rules() {
        let flow = FlowSnapshot {
            rule: 2,
            sender: Some("203.0.113.5:6881".parse().unwrap()),
            receiver: Some("192.168.1.20:40000".parse().unwrap()),
            controller: Some(ControllerStats {
                target_window: Some(100_000),
                cwnd_estimate: Some(120_000),
                mode: ControllerMode::Conservative,
                policy: WindowPolicy::Fix,
                last_epoch: Some(EpochSummary {
                    piv_count: 8,
                    positive: 2,
                    piv_sum_micros: 2500,
                }),
            }),
            rtt: Some(slipstream_control::Duration::from_millis(42)),
            goodput_bits_per_second: 1e6,
            acked_bytes: 5000,
            host_window: Some(300_000),
            forwarded_window: Some(100_000),
            unclamped_reason: None,
            allocation: None,
            held: false,
            link: None,
        };
        let rule = |name: &str| RuleSnapshot {
            name: name.into(),
            controller: "vulture",
            ..RuleSnapshot::default()
        };
        let view = PacketView {
            snapshot: EngineSnapshot {
                active_flows: 2,
                max_flows: 10,
                rules: vec![rule("a"), rule("b"), rule("gone")],
                flows: vec![
                    flow.clone(),
                    FlowSnapshot {
                        rule: 3,
                        unclamped_reason: Some(PassReason::RuleRemoved),
                        ..flow
                    },
                ],
                ..EngineSnapshot::default()
            },
            keys: vec![key(), key()],
            configured_rules: 2,
        };
        let list = flow_list(&view);
        assert_eq!((list.active, list.max, list.flows.len()), (2, 10, 2));
        let f = &list.flows[0];
        assert_eq!(
            (f.rule.as_str(), f.rule_removed, f.controller.as_str()),
            ("b", false, "vulture")
        );
        assert_eq!(f.endpoints, ["192.168.1.20:40000", "203.0.113.5:6881"]);
        assert_eq!(f.rtt_ms, Some(42.0));
        assert_eq!(
            (
                f.mode.as_str(),
                f.policy.as_str(),
                f.target_window_bytes,
                f.cwnd_estimate_bytes
            ),
            ("conservative", "fix", Some(100_000), Some(120_000))
        );
        assert_eq!(
            f.piv,
            Some(PivSummary {
                sum_ms: 2.5,
                positive_ratio: 0.25,
                count: 8
            })
        );
        let g = &list.flows[1];
        assert_eq!((g.rule.as_str(), g.rule_removed), ("gone", true));
        assert_eq!(g.unclamped.as_deref(), Some("rule_removed"));
        // Not a household flow: no link known, no allocation, not held.
        assert_eq!(
            (f.link.as_deref(), f.allocation_bytes, f.held),
            (None, None, false)
        );
    }

    fn household_flow(allocation: u32, held: bool) -> FlowSnapshot {
        FlowSnapshot {
            rule: 1,
            sender: Some("203.0.113.5:6881".parse().unwrap()),
            receiver: Some("192.168.1.20:40000".parse().unwrap()),
            controller: None,
            rtt: None,
            goodput_bits_per_second: 0.0,
            acked_bytes: 0,
            host_window: None,
            forwarded_window: None,
            unclamped_reason: None,
            allocation: Some(allocation),
            held,
            link: Some(LinkDirection::Upload),
        }
    }

    fn household_rule() -> RuleSnapshot {
        RuleSnapshot {
            name: "shared".into(),
            controller: "household",
            ..RuleSnapshot::default()
        }
    }

    #[test]
    fn household_flows_carry_link_allocation_and_held() {
        let view = PacketView {
            snapshot: EngineSnapshot {
                rules: vec![household_rule()],
                flows: vec![household_flow(48_000, false), household_flow(0, true)],
                ..EngineSnapshot::default()
            },
            keys: vec![key(), key()],
            configured_rules: 1,
        };
        let list = flow_list(&view);
        let got: Vec<_> = list
            .flows
            .iter()
            .map(|f| (f.link.as_deref(), f.allocation_bytes, f.held))
            .collect();
        assert_eq!(
            got,
            [
                (Some("upload"), Some(48_000), false),
                (Some("upload"), Some(0), true)
            ]
        );
        // No controller stats in the snapshot: empty mode and policy on the wire, no figures.
        assert!(list.flows.iter().all(|f| f.mode.is_empty()
            && f.policy.is_empty()
            && f.target_window_bytes.is_none()
            && f.piv.is_none()));
    }

    fn link(direction: LinkDirection, flows: usize) -> LinkSnapshot {
        LinkSnapshot {
            direction,
            controller: "delay_target",
            phase: slipstream_engine::BudgetPhase::Probe,
            budget_bytes: 90_000,
            queue_delay: Some(std::time::Duration::from_micros(2_500)),
            base_rtt: None,
            flows,
            held_flows: flows / 2,
            in_flight_bytes: 80_000,
            goodput_bits_per_second: 5e6,
            slowdowns: 1,
            window_updates: 3,
        }
    }

    fn control() -> Control {
        Control {
            state: Mutex::default(),
            counters: Arc::default(),
            started: std::time::Instant::now(),
            packets: Mutex::new(std::sync::mpsc::channel().0),
            datapath_errors: Arc::default(),
            published: SharedSnapshot::default(),
        }
    }

    #[test]
    fn status_shows_household_links_while_household_control_is_in_use() {
        let links = vec![link(LinkDirection::Download, 4), link(LinkDirection::Upload, 0)];
        let view = |rules: Vec<RuleSnapshot>| PacketView {
            snapshot: EngineSnapshot {
                rules,
                links: links.clone(),
                ..EngineSnapshot::default()
            },
            keys: Vec::new(),
            configured_rules: 1,
        };
        let status = control().status(&view(vec![household_rule()]));
        assert_eq!(
            status.household,
            [
                LinkStatus {
                    link: "download".into(),
                    controller: "delay_target".into(),
                    phase: "probe".into(),
                    budget_bytes: 90_000,
                    in_flight_bytes: 80_000,
                    queue_delay_ms: Some(2.5),
                    base_rtt_ms: None,
                    flows: 4,
                    held_flows: 2,
                    goodput_bps: 5e6,
                    slowdowns: 1,
                    window_updates: 3,
                },
                LinkStatus {
                    link: "upload".into(),
                    flows: 0,
                    held_flows: 0,
                    ..link_status(&links[0])
                },
            ]
        );
        // No household rule: only a link that still has household flows (a reload removed the
        // rule) is shown.
        let rule = RuleSnapshot {
            name: "bt".into(),
            controller: "vulture",
            ..RuleSnapshot::default()
        };
        let status = control().status(&view(vec![rule]));
        let shown: Vec<&str> = status.household.iter().map(|l| l.link.as_str()).collect();
        assert_eq!(shown, ["download"]);
    }

    #[test]
    fn stale_socket_is_replaced_other_files_are_not() {
        let dir = std::env::temp_dir().join(format!("ssd-sock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.sock");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // A stale socket left by a killed daemon.
            drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
            assert!(path.exists());
            let socket = ControlSocket::bind(&path).unwrap();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            // A live one is not taken over.
            let e = ControlSocket::bind(&path).err().unwrap().to_string();
            assert!(e.contains("another process"), "{e}");
            drop(socket);
            assert!(!path.exists(), "removed on drop");
        });
        std::fs::write(&path, "not a socket").unwrap();
        let e = rt.block_on(async { ControlSocket::bind(&path).err().unwrap().to_string() });
        assert!(e.contains("is not a socket"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
