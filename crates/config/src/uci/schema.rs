//! Slipstream's UCI schema: the options each section takes, which hold lists, and how TOML field
//! paths map to UCI options and lines (for messages).

use crate::controllers::{RawBudget, RawController};
use crate::kinded::Kinds;
use std::collections::HashMap;

/// Options of the `config slipstream` section.
pub const MAIN_OPTIONS: &[&str] = &[
    "enabled",
    "lan_interface",
    "hook",
    "ack_queue",
    "data_queue",
    "queue_max_len",
    "data_copy_bytes",
    "ack_max_len",
    "firewall",
    "mark_mask",
    "ipv6",
    "engine",
    "metrics_listen",
    "top_flows",
    "max_flows",
    "idle_timeout",
    "evict_idle_after",
    "control_socket",
    "set_timeout",
    "dnsmasq_conf",
    "dhcp_leases",
    "lease_poll",
];

/// Options of a `config rule` section besides the controllers' parameters (see [`rule_options`]).
pub const RULE_OPTIONS: &[&str] = &[
    "name",
    "enabled",
    "remote_port",
    "local_port",
    "dscp",
    "lan_host",
    "lan_mac",
    "lan_hostname",
    "domain",
    "preset",
    "protocol",
    "quic",
    "controller",
    "weight",
    "min_rate",
    "priority",
];

/// Options of the `config household` section besides the budget controllers' parameters (see
/// [`household_options`]).
pub const HOUSEHOLD_OPTIONS: &[&str] = &["budget", "slowdown_interval", "turn", "probe", "udp"];

/// Every option a `config rule` section takes: [`RULE_OPTIONS`], then every controller's
/// parameters.
pub fn rule_options() -> Vec<&'static str> {
    [RULE_OPTIONS.to_vec(), RawController::all_fields()].concat()
}

/// Every option the `config household` section takes: [`HOUSEHOLD_OPTIONS`], then every budget
/// controller's parameters.
pub fn household_options() -> Vec<&'static str> {
    [HOUSEHOLD_OPTIONS.to_vec(), RawBudget::all_fields()].concat()
}

/// Options that hold lists: `list x 'a'` entries, or one `option x 'a b c'` split at blanks.
pub(crate) const LIST_OPTIONS: &[&str] = &[
    "lan_interface",
    "remote_port",
    "local_port",
    "dscp",
    "lan_host",
    "lan_mac",
    "lan_hostname",
    "domain",
    "preset",
    "dhcp_leases",
];

/// The UCI option name of a TOML field path (`rules[2].remote_ports[0]` -> `remote_port`,
/// `datapath.lan_interfaces` -> `lan_interface`, `rules[0].controller.kind` -> `controller`).
pub(crate) fn option_name(toml_path: &str) -> String {
    let mut p = toml_path;
    if p.starts_with("rules[") {
        p = p.split_once("].").map_or("", |(_, rest)| rest);
    }
    let p: String = strip_indices(p);
    let mapped = match p.as_str() {
        "controller.kind" | "controller" => "controller",
        "household.budget.kind" | "household.budget" => "budget",
        "datapath.lan_interfaces" => "lan_interface",
        "metrics.listen" => "metrics_listen",
        "control.socket" => "control_socket",
        "remote_ports" => "remote_port",
        "local_ports" => "local_port",
        "lan_hosts" => "lan_host",
        "lan_macs" => "lan_mac",
        "lan_hostnames" => "lan_hostname",
        "domains" => "domain",
        other => other.rsplit('.').next().unwrap_or(other),
    };
    mapped.to_owned()
}

fn strip_indices(p: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in p.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Where each raw value came from, keyed by TOML field path.
#[derive(Default)]
pub(crate) struct Locations {
    /// `slipstream 'main' (line 3)`; `None` if the file has no such section.
    pub(crate) main: Option<String>,
    /// `household 'household' (line 30)`; `None` if the file has no such section.
    pub(crate) household: Option<String>,
    /// One per rule section, in order (same index as the raw rules).
    pub(crate) rules: Vec<String>,
    /// TOML path (`datapath.ack_queue`, `rules[1].remote_ports[2]`) -> line.
    pub(crate) lines: HashMap<String, usize>,
}

impl Locations {
    /// The UCI location of a validator path.
    pub(crate) fn describe(&self, toml_path: &str) -> String {
        let (section, rest) = if let Some(r) = toml_path.strip_prefix("rules[") {
            let (idx, rest) = r.split_once(']').unwrap_or((r, ""));
            let section = idx
                .parse::<usize>()
                .ok()
                .and_then(|i| self.rules.get(i).cloned())
                .unwrap_or_else(|| "config rule".to_owned());
            (section, rest.trim_start_matches('.'))
        } else if toml_path == "rules" {
            return "config rule".to_owned();
        } else if toml_path.starts_with("household") {
            (
                self.household
                    .clone()
                    .unwrap_or_else(|| "config household".to_owned()),
                toml_path
                    .strip_prefix("household")
                    .unwrap_or("")
                    .trim_start_matches('.'),
            )
        } else {
            (
                self.main
                    .clone()
                    .unwrap_or_else(|| "config slipstream".to_owned()),
                toml_path,
            )
        };
        if rest.is_empty() {
            return section;
        }
        let line = self.lines.get(toml_path).or_else(|| {
            // `rules[0].lan_hosts[3]` not recorded (should not happen): the option's line.
            let without_index = toml_path.rsplit_once('[').map(|(a, _)| a)?;
            self.lines.get(without_index)
        });
        match line {
            Some(l) => format!("{section}, option {} (line {l})", option_name(toml_path)),
            None => format!("{section}, option {}", option_name(toml_path)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_names_of_toml_paths() {
        for (toml, uci) in [
            ("rules[2].remote_ports[0]", "remote_port"),
            ("rules[0].controller.kind", "controller"),
            ("rules[0].controller.psi", "psi"),
            ("rules[3].weight", "weight"),
            ("rules[3].min_rate", "min_rate"),
            ("household.budget.kind", "budget"),
            ("household.budget", "budget"),
            ("household.budget.target", "target"),
            ("household.slowdown_interval", "slowdown_interval"),
            ("rules[10].lan_macs", "lan_mac"),
            ("datapath.lan_interfaces[1]", "lan_interface"),
            ("datapath.ack_queue", "ack_queue"),
            ("metrics.listen", "metrics_listen"),
            ("metrics.top_flows", "top_flows"),
            ("control.socket", "control_socket"),
            ("limits.idle_timeout", "idle_timeout"),
            ("enabled", "enabled"),
        ] {
            assert_eq!(option_name(toml), uci, "{toml}");
        }
    }
}
