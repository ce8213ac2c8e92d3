//! What a config reload (SIGHUP) may change while the daemon runs.
//!
//! Applied live: the rules (firewall rules replaced in one transaction, the engine reconfigured:
//! see `slipstream_engine::Engine::reconfigure` for existing flows), `[limits]`,
//! `metrics.top_flows`, and everything that only shapes the firewall rules: `datapath.hook`,
//! `lan_interfaces`, `ipv6`, `ack_max_len`. `[household]` and the rules' `weight`, `min_rate` and
//! `priority` go to the engine with the rules (`EngineConfig::household`, `RuleSpec::share`).
//!
//! Needs a restart (the old value stays in force, a warning is logged and `slipstream status`
//! lists it until the file and the running daemon agree again): what was bound or fixed at start,
//! `datapath.ack_queue`, `data_queue`, `queue_max_len`, `data_copy_bytes` (the NFQUEUE bindings),
//! `datapath.firewall` (the backend: switching means tearing down one set of rules and installing
//! another), `datapath.mark_mask` (existing connections carry their rule number in the old bits),
//! `metrics.listen` and `control.socket` (bound sockets). Rebinding these live would open windows
//! where packets or clients are lost, for settings that are changed once at installation.
//!
//! `enabled = false` in a reloaded file stops the daemon cleanly, as at start.

use slipstream_config::{Config, DatapathEngine};
use slipstream_engine::{EngineConfig, RuleSpec};

/// The engine's part of a config.
pub(crate) fn engine_config(config: &Config) -> EngineConfig {
    EngineConfig {
        rules: config
            .rules
            .iter()
            .map(|r| RuleSpec {
                name: r.name.clone(),
                controller: r.controller.clone(),
                share: r.share,
            })
            .collect(),
        max_flows: config.limits.max_flows,
        idle_timeout: config.limits.idle_timeout,
        evict_idle_after: config.limits.evict_idle_after,
        household: config.household.clone(),
    }
}

/// The config to run after a reload: `new` with every setting that needs a restart kept at its
/// `running` value, and one message per such setting that changed.
pub(crate) fn effective_config(running: &Config, new: Config) -> (Config, Vec<String>) {
    let mut effective = new;
    let mut restart = Vec::new();
    macro_rules! keep {
        ($($field:ident).+, $name:expr) => {
            if effective.$($field).+ != running.$($field).+ {
                restart.push(format!(
                    "{} changed from {:?} to {:?}: restart slipstreamd to apply it (keeping {:?})",
                    $name,
                    running.$($field).+,
                    effective.$($field).+,
                    running.$($field).+
                ));
                effective.$($field).+ = running.$($field).+.clone();
            }
        };
    }
    keep!(datapath.ack_queue, "datapath.ack_queue");
    keep!(datapath.data_queue, "datapath.data_queue");
    keep!(datapath.queue_max_len, "datapath.queue_max_len");
    keep!(datapath.data_copy_bytes, "datapath.data_copy_bytes");
    keep!(datapath.firewall, "datapath.firewall");
    keep!(datapath.mark_mask, "datapath.mark_mask");
    // `running` holds the datapath in use ("auto" resolved at start); "auto" keeps it.
    if effective.datapath.engine == DatapathEngine::Auto {
        effective.datapath.engine = running.datapath.engine;
    }
    keep!(datapath.engine, "datapath.engine");
    if running.datapath.engine == DatapathEngine::Ebpf {
        // The tc programs stay on the interfaces they were attached to at start.
        keep!(datapath.lan_interfaces, "datapath.lan_interfaces (eBPF datapath)");
    }
    keep!(metrics.listen, "metrics.listen");
    keep!(control.socket, "control.socket");
    // An ipset's default timeout is fixed when it is created.
    keep!(names.set_timeout, "names.set_timeout");
    (effective, restart)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slipstream_config::parse;

    const BASE: &str = "[datapath]\nlan_interfaces = [\"br-lan\"]\n\
                        [[rules]]\nname = \"bt\"\nremote_ports = [6881]\n";

    #[test]
    fn live_settings_pass_restart_settings_are_kept() {
        let running = parse(BASE, "a.toml").unwrap();
        let new = parse(
            "[datapath]\nlan_interfaces = [\"br-lan\", \"wlan0\"]\nhook = \"both\"\nack_queue = 9000\n\
             mark_mask = 0xff00\n\
             [metrics]\nlisten = \"127.0.0.1:9999\"\ntop_flows = 5\n\
             [limits]\nmax_flows = 10\n\
             [control]\nsocket = \"/tmp/other.sock\"\n\
             [[rules]]\nname = \"backup\"\nremote_ports = [22]\n\
             [[rules]]\nname = \"bt\"\nremote_ports = [6881]\n",
            "b.toml",
        )
        .unwrap();
        let (effective, restart) = effective_config(&running, new.clone());
        // Applied live.
        assert_eq!(effective.rules, new.rules);
        assert_eq!(effective.limits, new.limits);
        assert_eq!(effective.metrics.top_flows, 5);
        assert_eq!(effective.datapath.lan_interfaces, ["br-lan", "wlan0"]);
        assert_eq!(effective.datapath.hook, new.datapath.hook);
        // Kept, each with a message.
        assert_eq!(effective.datapath.ack_queue, running.datapath.ack_queue);
        assert_eq!(effective.datapath.mark_mask, running.datapath.mark_mask);
        assert_eq!(effective.metrics.listen, running.metrics.listen);
        assert_eq!(effective.control.socket, running.control.socket);
        assert_eq!(restart.len(), 4, "{restart:#?}");
        assert_eq!(
            restart[0],
            "datapath.ack_queue changed from 8470 to 9000: restart slipstreamd to apply it (keeping 8470)"
        );
        assert!(
            restart.iter().any(|m| m.starts_with("control.socket changed")),
            "{restart:#?}"
        );

        let (same, none) = effective_config(&running, running.clone());
        assert_eq!(same, running);
        assert!(none.is_empty());
    }

    #[test]
    fn engine_config_follows_the_rules_in_order() {
        let config = parse(
            "[[rules]]\nname = \"a\"\nremote_ports = [1]\n[[rules]]\nname = \"b\"\nremote_ports = [2]\n\
             [limits]\nmax_flows = 7\n",
            "c.toml",
        )
        .unwrap();
        let e = engine_config(&config);
        assert_eq!(
            e.rules.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(e.max_flows, 7);
    }

    #[test]
    fn engine_config_carries_shares_and_household() {
        let config = parse(
            "[household]\nbudget = { kind = \"delay_target\", target = \"5ms\" }\nturn = \"1s\"\n\
             [[rules]]\nname = \"a\"\nremote_ports = [1]\ncontroller = \"household\"\n\
             weight = 3\nmin_rate = \"2mbit\"\npriority = 1\n\
             [[rules]]\nname = \"b\"\nremote_ports = [2]\n",
            "h.toml",
        )
        .unwrap();
        let e = engine_config(&config);
        assert_eq!(e.household, config.household);
        assert_eq!(e.household.turn, std::time::Duration::from_secs(1));
        let share = e.rules[0].share;
        assert_eq!((share.weight, share.min_rate, share.priority), (3, 250_000, 1));
        assert_eq!(e.rules[1].share, slipstream_engine::ShareSpec::default());
    }
}
