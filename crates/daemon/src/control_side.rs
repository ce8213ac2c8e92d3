//! The control side of the daemon (the main thread): the config in force, the firewall rules
//! and what changes them: SIGHUP reloads, the firewall watchdog, the DHCP lease files of rules
//! by host name. The engine is reached only through `PacketCommand`s to the packet thread.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use slipstream_config::Config;
use slipstream_firewall::Firewall;
use slipstream_metrics::DaemonCounters;
use tracing::{error, info, warn};

use crate::control_socket::{unix_now, unix_now_ms, Control};
use crate::names;
use crate::packet_loop::PacketCommand;
use crate::reload;

/// The control side's state: the config in force and the installed rules.
pub(crate) struct Daemon {
    pub config_path: PathBuf,
    /// The config in force (settings that need a restart keep their start values).
    pub running: Config,
    pub firewall: Firewall,
    pub control: Arc<Control>,
    pub counters: Arc<DaemonCounters>,
    pub lan_interfaces: Arc<Mutex<Vec<String>>>,
    /// The DHCP lease files of `lan_hostnames`.
    pub leases: names::LeaseWatch,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reloaded {
    Applied,
    Failed,
    Disabled,
}

impl Daemon {
    /// SIGHUP: re-reads the config file. Invalid, or the firewall refuses the new rules: the old
    /// config stays in force (rules and engine), the error is logged, counted and shown by
    /// `slipstream status`. Valid: firewall rules replaced in one transaction, then the engine
    /// reconfigured (flows kept; see `reload` and `Engine::reconfigure`).
    pub(crate) async fn reload(&mut self) -> Reloaded {
        let path = self.config_path.clone();
        info!("SIGHUP: reloading {}", path.display());
        let new = match slipstream_config::load(&path) {
            Ok(new) => new,
            Err(e) => {
                self.reload_failed(format!("{e}"));
                return Reloaded::Failed;
            }
        };
        if !new.enabled {
            info!("{}: enabled = false; shutting down", path.display());
            return Reloaded::Disabled;
        }
        let (effective, restart_needed) = reload::effective_config(&self.running, new);
        for r in &restart_needed {
            warn!("{r}");
        }
        if let Err(e) = self.firewall.replace(&effective) {
            let installed = self.firewall.check().unwrap_or(false);
            self.counters.set_firewall_installed(installed);
            self.control.update(|s| {
                s.firewall_installed = installed;
                s.firewall_last_error = Some(e.to_string());
            });
            self.reload_failed(format!("replacing the firewall rules: {e}"));
            return Reloaded::Failed;
        }
        let (reply, summary) = tokio::sync::oneshot::channel();
        let sent = self.control.send(PacketCommand::Reconfigure {
            engine: Box::new(reload::engine_config(&effective)),
            top_flows: effective.metrics.top_flows,
            hook: effective.datapath.hook,
            lan_interfaces: effective.datapath.lan_interfaces.clone(),
            probe: effective.probe,
            reply,
        });
        let summary = if sent {
            tokio::time::timeout(std::time::Duration::from_secs(5), summary)
                .await
                .ok()
                .and_then(Result::ok)
        } else {
            None
        };
        match summary {
            Some(s) => info!(
                "config reloaded: {} rules ({} added, {} removed); {} flows kept, {} of them released (rule removed)",
                effective.rules.len(),
                s.rules_added,
                s.rules_removed,
                s.flows,
                s.released
            ),
            None => warn!("config reloaded, but the packet thread did not confirm the new rules"),
        }
        *self.lan_interfaces.lock().unwrap_or_else(PoisonError::into_inner) =
            effective.datapath.lan_interfaces.clone();
        write_dnsmasq_conf(&effective, self.firewall.backend());
        let by = matched_by(&effective);
        let sets = self.firewall.plan().sets.clone();
        self.control.update(|s| {
            s.matched_by = by;
            s.name_sets = sets;
            s.dhcp_leases = effective.names.dhcp_leases.clone();
            s.lan_interfaces = effective.datapath.lan_interfaces.clone();
        });
        self.leases = names::LeaseWatch::new(&effective.names.dhcp_leases);
        self.running = effective;
        self.refresh_hosts();
        self.counters.config_loaded(unix_now_ms(), false);
        self.counters.set_firewall_installed(true);
        self.control.update(|s| {
            s.loaded_unix = unix_now();
            s.last_reload_error = None;
            s.restart_needed = restart_needed;
            s.firewall_installed = true;
            s.firewall_last_check_unix = Some(unix_now());
            s.firewall_last_error = None;
        });
        Reloaded::Applied
    }

    /// Every `names.lease_poll`, and after a reload: if a lease file changed, the host sets of
    /// `lan_hostnames` rules get the addresses leased now (rules untouched).
    pub(crate) fn refresh_hosts(&mut self) {
        if !self.running.rules.iter().any(|r| !r.lan_hostnames.is_empty()) || !self.leases.changed() {
            return;
        }
        let hosts = names::host_addrs(&self.running, &self.leases.read());
        match self.firewall.set_hosts(hosts) {
            Ok(true) => {
                for (rule, addrs) in self.firewall.hosts() {
                    let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
                    info!("rule {rule:?}: named LAN hosts now at [{}]", list.join(", "));
                }
            }
            Ok(false) => {}
            Err(e) => warn!("updating the host sets of lan_hostnames rules: {e}"),
        }
    }

    fn reload_failed(&self, message: String) {
        error!("config reload failed, the previous config stays in force: {message}");
        self.counters.reload_failed();
        self.control.update(|s| s.last_reload_error = Some(message));
    }

    /// Every few seconds: are the rules still installed? If not, re-apply them.
    pub(crate) fn watchdog(&mut self) {
        let result = self.firewall.ensure_installed();
        let now = unix_now();
        match result {
            Ok(reapplied) => {
                if reapplied {
                    warn!("firewall watchdog: rules were missing and have been re-applied");
                    self.counters.firewall_reapplied();
                }
                self.counters.set_firewall_installed(true);
                self.control.update(|s| {
                    s.firewall_installed = true;
                    s.firewall_last_check_unix = Some(now);
                    if reapplied {
                        s.firewall_last_error = None;
                    }
                });
            }
            Err(e) => {
                error!("firewall watchdog: {e}");
                let installed = self.firewall.check().unwrap_or(false);
                self.counters.set_firewall_installed(installed);
                self.control.update(|s| {
                    s.firewall_installed = installed;
                    s.firewall_last_check_unix = Some(now);
                    s.firewall_last_error = Some(e.to_string());
                });
            }
        }
    }
}

/// Writes the dnsmasq snippet of the rules by name (when `names.dnsmasq_conf` is set); dnsmasq
/// reads it when it restarts. Warns when the dnsmasq found cannot fill the sets at all. A
/// failure is logged: rules by port still work without it.
pub(crate) fn write_dnsmasq_conf(config: &Config, backend: slipstream_firewall::Backend) {
    if let Some(why) = names::dnsmasq_cannot_fill_sets(config, backend) {
        warn!("rules by domain will match nothing: {why}");
    }
    match names::write_dnsmasq_conf(config, backend) {
        Ok(true) => info!(
            "dnsmasq snippet {} updated: dnsmasq applies it when restarted",
            config
                .names
                .dnsmasq_conf
                .as_deref()
                .unwrap_or(std::path::Path::new("-"))
                .display()
        ),
        Ok(false) => {}
        Err(e) => {
            warn!("writing the dnsmasq snippet: {e}; rules by domain match only what dnsmasq is told by hand")
        }
    }
}

/// How each rule classes by name, for `slipstream flows`.
pub(crate) fn matched_by(config: &Config) -> std::collections::BTreeMap<String, String> {
    config
        .rules
        .iter()
        .map(|r| (r.name.clone(), names::matched_by(r)))
        .filter(|(_, by)| !by.is_empty())
        .collect()
}
