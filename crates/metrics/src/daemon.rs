//! Counters of the daemon itself rather than the engine: config reloads and firewall re-applies.
//! The daemon's control side (signal handler, watchdog) writes them, the collector reads them at
//! scrape time; both sides only touch atomics.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::{Registry, Unit};

use crate::families::{counter, counter_family, gauge};

/// The daemon's own counters, shared (in an `Arc`) with the collector.
#[derive(Debug, Default)]
pub struct DaemonCounters {
    reloads_ok: AtomicU64,
    reloads_failed: AtomicU64,
    firewall_reapplied: AtomicU64,
    /// Unix time in milliseconds of the last successful load (the start counts), 0 before.
    last_reload_success_ms: AtomicU64,
    firewall_installed: AtomicBool,
}

impl DaemonCounters {
    /// A successful (re)load at `unix_ms`; `initial` is the load at start, which sets the
    /// timestamp but is not a reload.
    pub fn config_loaded(&self, unix_ms: u64, initial: bool) {
        if !initial {
            self.reloads_ok.fetch_add(1, Ordering::Relaxed);
        }
        self.last_reload_success_ms.store(unix_ms, Ordering::Relaxed);
    }

    /// A reload that was refused (the previous config stays in force).
    pub fn reload_failed(&self) {
        self.reloads_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// The watchdog found the rules missing and put them back.
    pub fn firewall_reapplied(&self) {
        self.firewall_reapplied.fetch_add(1, Ordering::Relaxed);
    }

    /// What the last firewall check found.
    pub fn set_firewall_installed(&self, installed: bool) {
        self.firewall_installed.store(installed, Ordering::Relaxed);
    }

    /// Successful reloads (the start not counted).
    pub fn reloads_ok(&self) -> u64 {
        self.reloads_ok.load(Ordering::Relaxed)
    }

    /// Refused reloads.
    pub fn reloads_failed(&self) -> u64 {
        self.reloads_failed.load(Ordering::Relaxed)
    }

    /// Times the watchdog re-applied the rules.
    pub fn firewall_reapplied_count(&self) -> u64 {
        self.firewall_reapplied.load(Ordering::Relaxed)
    }

    /// Unix time in milliseconds of the last successful load (the start counts).
    pub fn last_reload_success_ms(&self) -> u64 {
        self.last_reload_success_ms.load(Ordering::Relaxed)
    }

    /// Whether the last check found the rules in place.
    pub fn firewall_installed(&self) -> bool {
        self.firewall_installed.load(Ordering::Relaxed)
    }
}

/// Adds the daemon's counters to a registry made by [`crate::registry`]:
/// `slipstream_config_reloads_total{result="ok|failed"}`,
/// `slipstream_config_last_reload_success_timestamp_seconds`,
/// `slipstream_firewall_reapplied_total` and `slipstream_firewall_rules_installed`.
pub fn register_daemon_counters(registry: &mut Registry, counters: Arc<DaemonCounters>) {
    registry.register_collector(Box::new(DaemonCollector { counters }));
}

#[derive(Debug)]
struct DaemonCollector {
    counters: Arc<DaemonCounters>,
}

impl Collector for DaemonCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
        let c = &self.counters;
        counter_family(
            &mut enc,
            "config_reloads",
            "Config reloads (SIGHUP) by result: ok (applied), failed (invalid config or firewall \
             error; the previous config stays in force).",
            None,
            [("ok", c.reloads_ok()), ("failed", c.reloads_failed())].map(|(r, n)| ([("result", r)], n)),
        )?;
        gauge(
            &mut enc,
            "config_last_reload_success_timestamp",
            "Unix time of the last successful config load (start or reload).",
            Some(&Unit::Seconds),
            c.last_reload_success_ms() as f64 / 1000.0,
        )?;
        counter(
            &mut enc,
            "firewall_reapplied",
            "Times the watchdog found the daemon's firewall rules missing and re-applied them.",
            None,
            c.firewall_reapplied_count(),
        )?;
        gauge(
            &mut enc,
            "firewall_rules_installed",
            "1 if the last check found the daemon's firewall rules in place, else 0.",
            None,
            u32::from(c.firewall_installed()),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_counters_render() {
        let counters = Arc::new(DaemonCounters::default());
        let mut registry = crate::registry(crate::SharedSnapshot::default());
        register_daemon_counters(&mut registry, counters.clone());
        counters.config_loaded(1_700_000_000_500, true);
        counters.config_loaded(1_700_000_100_250, false);
        counters.reload_failed();
        counters.reload_failed();
        counters.firewall_reapplied();
        counters.set_firewall_installed(true);
        let text = crate::render(&registry);
        for line in [
            "slipstream_config_reloads_total{result=\"ok\"} 1",
            "slipstream_config_reloads_total{result=\"failed\"} 2",
            "slipstream_config_last_reload_success_timestamp_seconds 1700000100.25",
            "slipstream_firewall_reapplied_total 1",
            "slipstream_firewall_rules_installed 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
