//! OpenWrt UCI syntax: a generic reader ([`parse_sections`]) and Slipstream's schema on top of it
//! ([`parse_uci`]).
//!
//! # Syntax (as OpenWrt's libuci reads it)
//!
//! ```text
//! package slipstream                 # optional, ignored
//! config <type> ['<name>']           # starts a section; the name is optional (anonymous section)
//!     option <key> '<value>'         # one value; a later `option` with the same key replaces it
//!     list <key> '<value>'           # appends one value to a list
//! ```
//!
//! Words are separated by blanks; a statement ends at the end of the line or at `;`. Values may be
//! unquoted, `'single quoted'` (taken literally, no escapes) or `"double quoted"` (a backslash takes
//! the next character literally); adjacent pieces join (`'a'"b"c` is `abc`) and quoted strings may
//! span lines. Outside quotes a backslash takes the next character literally, and a backslash at the
//! end of a line continues the statement on the next one. `#` outside quotes starts a comment that
//! runs to the end of the line. Section types are letters, digits, `_` and `-`; section and option
//! names letters, digits and `_`.
//!
//! # Slipstream's schema
//!
//! One `config slipstream` section (named `main` by convention) holds the global options, an
//! optional `config household` section the household control settings (TOML's `[household]`),
//! each `config rule` section one rule; see `docs/configuration.md`. A setting with a kind
//! (`controller`, `budget`) takes its kind's parameters as options of the same section. The file is read into the same raw
//! structs as the TOML file and checked by the same validator, so both formats mean the same and are
//! held to the same rules. Validator errors name TOML paths (`rules[2].remote_ports[0]`); this module
//! translates them to the UCI section and option with their line numbers.

mod lexer;
mod schema;

pub use lexer::{parse_bool, parse_sections, UciEntry, UciSection, UciSyntaxError};
pub(crate) use schema::option_name;
pub use schema::{household_options, rule_options, HOUSEHOLD_OPTIONS, MAIN_OPTIONS, RULE_OPTIONS};

use crate::controllers::{RawBudget, RawController};
use crate::kinded::{Kinded, Kinds, ParamError};
use crate::raw::{IntOrString, OneOrMany, RawConfig, RawRule};
use crate::{default_controller, Config, ConfigError, Format, Validator};
use schema::{Locations, LIST_OPTIONS};
use serde::de::{self, Visitor};
use slipstream_household::BudgetConfig;
use std::collections::HashMap;

struct Reader<'a> {
    origin: &'a str,
    loc: Locations,
}

impl Reader<'_> {
    fn err(&self, path: String, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.origin, path, message)
    }

    fn entry_path(&self, section: &str, e: &UciEntry) -> String {
        format!("{section}, option {} (line {})", e.name, e.line)
    }

    /// Checks the section's options against `known` and resolves them libuci's way: scalars are
    /// the last `option`; lists are split `option` values and `list` values.
    fn resolve(
        &self,
        s: &UciSection,
        label: &str,
        known: &[&'static str],
    ) -> Result<HashMap<String, Resolved>, ConfigError> {
        let mut out: HashMap<String, Resolved> = HashMap::new();
        for e in &s.entries {
            if !known.contains(&e.name.as_str()) {
                return Err(self.err(
                    self.entry_path(label, e),
                    format!(
                        "unknown option; known options of a `config {}` section: {}",
                        s.section_type,
                        known.join(", ")
                    ),
                ));
            }
            let is_list = LIST_OPTIONS.contains(&e.name.as_str());
            if e.list && !is_list {
                return Err(self.err(
                    self.entry_path(label, e),
                    format!(
                        "takes a single value: write `option {}`, not `list {}`",
                        e.name, e.name
                    ),
                ));
            }
            let r = out.entry(e.name.clone()).or_insert(Resolved {
                values: Vec::new(),
                line: e.line,
            });
            r.line = e.line;
            if e.list {
                r.values.push((e.value.clone(), e.line));
            } else if is_list {
                r.values = e
                    .value
                    .split_whitespace()
                    .map(|v| (v.to_owned(), e.line))
                    .collect();
            } else {
                r.values = vec![(e.value.clone(), e.line)];
            }
        }
        Ok(out)
    }

    fn scalar<'r>(
        &mut self,
        opts: &'r HashMap<String, Resolved>,
        name: &str,
        toml_path: &str,
    ) -> Option<&'r str> {
        let r = opts.get(name)?;
        self.loc.lines.insert(toml_path.to_owned(), r.line);
        r.values.first().map(|(v, _)| v.as_str())
    }

    fn list(&mut self, opts: &HashMap<String, Resolved>, name: &str, toml_path: &str) -> Option<Vec<String>> {
        let r = opts.get(name)?;
        self.loc.lines.insert(toml_path.to_owned(), r.line);
        for (j, (_, line)) in r.values.iter().enumerate() {
            self.loc.lines.insert(format!("{toml_path}[{j}]"), *line);
        }
        Some(r.values.iter().map(|(v, _)| v.clone()).collect())
    }

    fn int(
        &mut self,
        opts: &HashMap<String, Resolved>,
        name: &str,
        toml_path: &str,
    ) -> Result<Option<i64>, ConfigError> {
        let Some(v) = self.scalar(opts, name, toml_path) else {
            return Ok(None);
        };
        parse_int(v).map(Some).ok_or_else(|| {
            self.err(
                self.loc.describe(toml_path),
                format!("{v:?} is not an integer (decimal, or hex like 0x00ff0000)"),
            )
        })
    }

    fn bool(
        &mut self,
        opts: &HashMap<String, Resolved>,
        name: &str,
        toml_path: &str,
    ) -> Result<Option<bool>, ConfigError> {
        let Some(v) = self.scalar(opts, name, toml_path) else {
            return Ok(None);
        };
        parse_bool(v).map(Some).ok_or_else(|| {
            self.err(
                self.loc.describe(toml_path),
                format!("{v:?} is not a boolean (use 1 or 0; yes/no, on/off, true/false also work)"),
            )
        })
    }

    fn string(&mut self, opts: &HashMap<String, Resolved>, name: &str, toml_path: &str) -> Option<String> {
        self.scalar(opts, name, toml_path).map(str::to_owned)
    }

    fn main_section(&mut self, s: &UciSection, raw: &mut RawConfig) -> Result<(), ConfigError> {
        let label = format!("slipstream {} (line {})", s.label(), s.line);
        self.loc.main = Some(label.clone());
        let o = self.resolve(s, &label, MAIN_OPTIONS)?;
        raw.enabled = self.bool(&o, "enabled", "enabled")?;
        let d = &mut raw.datapath;
        d.lan_interfaces = self.list(&o, "lan_interface", "datapath.lan_interfaces");
        d.hook = self.string(&o, "hook", "datapath.hook");
        d.ack_queue = self.int(&o, "ack_queue", "datapath.ack_queue")?;
        d.data_queue = self.int(&o, "data_queue", "datapath.data_queue")?;
        d.queue_max_len = self.int(&o, "queue_max_len", "datapath.queue_max_len")?;
        d.data_copy_bytes = self.int(&o, "data_copy_bytes", "datapath.data_copy_bytes")?;
        d.ack_max_len = self.int(&o, "ack_max_len", "datapath.ack_max_len")?;
        d.firewall = self.string(&o, "firewall", "datapath.firewall");
        d.mark_mask = self.int(&o, "mark_mask", "datapath.mark_mask")?;
        d.ipv6 = self.bool(&o, "ipv6", "datapath.ipv6")?;
        d.engine = self.string(&o, "engine", "datapath.engine");
        raw.metrics.listen = self.string(&o, "metrics_listen", "metrics.listen");
        raw.metrics.top_flows = self.int(&o, "top_flows", "metrics.top_flows")?;
        raw.limits.max_flows = self.int(&o, "max_flows", "limits.max_flows")?;
        raw.limits.idle_timeout = self.string(&o, "idle_timeout", "limits.idle_timeout");
        raw.limits.evict_idle_after = self.string(&o, "evict_idle_after", "limits.evict_idle_after");
        raw.control.socket = self.string(&o, "control_socket", "control.socket");
        let n = &mut raw.names;
        n.set_timeout = self.string(&o, "set_timeout", "names.set_timeout");
        n.dnsmasq_conf = self.string(&o, "dnsmasq_conf", "names.dnsmasq_conf");
        n.dhcp_leases = self.list(&o, "dhcp_leases", "names.dhcp_leases");
        n.lease_poll = self.string(&o, "lease_poll", "names.lease_poll");
        Ok(())
    }

    fn rule_section(&mut self, i: usize, s: &UciSection) -> Result<RawRule, ConfigError> {
        let label = format!("rule {} (line {})", s.label(), s.line);
        self.loc.rules.push(label.clone());
        let o = self.resolve(s, &label, &rule_options())?;
        let p = format!("rules[{i}]");
        let name = match self.string(&o, "name", &format!("{p}.name")) {
            Some(n) => n,
            None => match &s.name {
                Some(n) => {
                    self.loc.lines.insert(format!("{p}.name"), s.line);
                    n.clone()
                }
                None => {
                    return Err(self.err(
                        label,
                        "an anonymous rule section needs `option name '<name>'` (or name the section: \
                         `config rule '<name>'`)",
                    ))
                }
            },
        };
        let strings = |v: Option<Vec<String>>| -> Vec<IntOrString> {
            v.unwrap_or_default().into_iter().map(IntOrString::Str).collect()
        };
        let enabled = self.bool(&o, "enabled", &format!("{p}.enabled"))?;
        let remote_ports = strings(self.list(&o, "remote_port", &format!("{p}.remote_ports")));
        let local_ports = strings(self.list(&o, "local_port", &format!("{p}.local_ports")));
        let dscp = strings(self.list(&o, "dscp", &format!("{p}.dscp")));
        let lan_hosts = self
            .list(&o, "lan_host", &format!("{p}.lan_hosts"))
            .unwrap_or_default();
        let lan_macs = self
            .list(&o, "lan_mac", &format!("{p}.lan_macs"))
            .unwrap_or_default();
        let lan_hostnames = self
            .list(&o, "lan_hostname", &format!("{p}.lan_hostnames"))
            .unwrap_or_default();
        let domains = self
            .list(&o, "domain", &format!("{p}.domains"))
            .unwrap_or_default();
        let preset = OneOrMany::Many(
            self.list(&o, "preset", &format!("{p}.preset"))
                .unwrap_or_default(),
        );
        // An empty value is LuCI's "automatic" choice: the default.
        let protocol = self
            .string(&o, "protocol", &format!("{p}.protocol"))
            .filter(|v| !v.trim().is_empty());
        let quic = self
            .string(&o, "quic", &format!("{p}.quic"))
            .filter(|v| !v.trim().is_empty());

        let weight = self.int(&o, "weight", &format!("{p}.weight"))?;
        let min_rate = self
            .string(&o, "min_rate", &format!("{p}.min_rate"))
            .map(IntOrString::Str);
        let priority = self.int(&o, "priority", &format!("{p}.priority"))?;
        let controller = self.kinded::<RawController>(
            &o,
            "controller",
            &format!("{p}.controller"),
            default_controller().kind(),
        );
        Ok(RawRule {
            name,
            enabled,
            remote_ports,
            local_ports,
            dscp,
            lan_hosts,
            lan_macs,
            lan_hostnames,
            domains,
            preset,
            protocol,
            quic,
            controller,
            weight,
            min_rate,
            priority,
        })
    }

    fn household_section(&mut self, s: &UciSection, raw: &mut RawConfig) -> Result<(), ConfigError> {
        let label = format!("household {} (line {})", s.label(), s.line);
        self.loc.household = Some(label.clone());
        let o = self.resolve(s, &label, &household_options())?;
        let h = &mut raw.household;
        h.budget = self.kinded::<RawBudget>(&o, "budget", "household.budget", BudgetConfig::default().kind());
        h.slowdown_interval = self.string(&o, "slowdown_interval", "household.slowdown_interval");
        h.turn = self.string(&o, "turn", "household.turn");
        h.probe = self.string(&o, "probe", "household.probe");
        h.udp = self.string(&o, "udp", "household.udp");
        Ok(())
    }

    /// A setting with a kind: `option <kind_option>` and the kinds' parameters as options of the
    /// section; parameters without the kind option belong to `default_kind`.
    fn kinded<E: Kinds>(
        &mut self,
        opts: &HashMap<String, Resolved>,
        kind_option: &str,
        toml_path: &str,
        default_kind: &str,
    ) -> Option<Kinded<E>> {
        let kind = self.string(opts, kind_option, toml_path);
        if let Some(&line) = self.loc.lines.get(toml_path) {
            self.loc.lines.insert(format!("{toml_path}.kind"), line);
        }
        let mut params = Vec::new();
        for field in E::all_fields() {
            if let Some(v) = self.string(opts, field, &format!("{toml_path}.{field}")) {
                params.push((field.to_owned(), UciValue(v)));
            }
        }
        if kind.is_none() && params.is_empty() {
            return None;
        }
        Some(Kinded::build(kind.as_deref().unwrap_or(default_kind), params))
    }
}

/// A UCI value as a serde value: the text, parsed as the field asks (number, integer, boolean).
struct UciValue(String);

impl<'de> de::Deserializer<'de> for UciValue {
    type Error = ParamError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        visitor.visit_string(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        visitor.visit_some(self)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        match parse_bool(&self.0) {
            Some(b) => visitor.visit_bool(b),
            None => Err(ParamError::new(format!(
                "{:?} is not a boolean (use 1 or 0; yes/no, on/off, true/false also work)",
                self.0
            ))),
        }
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        match parse_int(&self.0) {
            Some(n) => visitor.visit_i64(n),
            None => Err(ParamError::new(format!(
                "{:?} is not an integer (decimal, or hex like 0x00ff0000)",
                self.0
            ))),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        match self.0.trim().parse::<f64>() {
            Ok(x) => visitor.visit_f64(x),
            Err(_) => Err(ParamError::new(format!(
                "{:?} is not a number like 0.875",
                self.0
            ))),
        }
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        self.deserialize_f64(visitor)
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i128 u8 u16 u32 u64 u128 char str string bytes byte_buf unit unit_struct
        newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// A decimal or `0x` hex integer.
fn parse_int(v: &str) -> Option<i64> {
    let t = v.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => t.parse::<i64>().ok(),
    }
}

struct Resolved {
    /// (value, line)
    values: Vec<(String, usize)>,
    /// Line of the last statement.
    line: usize,
}

/// Parses and validates a UCI config (`/etc/config/slipstream`); `origin` is the file name used in
/// messages. Same meaning and validation as [`crate::parse`] for TOML; errors name the section and
/// option with their lines, e.g.
/// `/etc/config/slipstream: rule 'bittorrent' (line 12), option remote_port (line 14): port range 9000-80 is reversed`.
pub fn parse_uci(text: &str, origin: &str) -> Result<Config, ConfigError> {
    let sections = parse_sections(text)
        .map_err(|e| ConfigError::new(origin, format!("line {}", e.line), e.message.clone()))?;
    let mut reader = Reader {
        origin,
        loc: Locations::default(),
    };
    let mut raw = RawConfig::default();
    let mut main_line: Option<usize> = None;
    let mut household_line: Option<usize> = None;
    for s in &sections {
        match s.section_type.as_str() {
            "slipstream" => {
                if let Some(first) = main_line {
                    return Err(reader.err(
                        format!("slipstream {} (line {})", s.label(), s.line),
                        format!(
                            "only one `config slipstream` section is allowed (the first is at line {first})"
                        ),
                    ));
                }
                main_line = Some(s.line);
                reader.main_section(s, &mut raw)?;
            }
            "household" => {
                if let Some(first) = household_line {
                    return Err(reader.err(
                        format!("household {} (line {})", s.label(), s.line),
                        format!(
                            "only one `config household` section is allowed (the first is at line {first})"
                        ),
                    ));
                }
                household_line = Some(s.line);
                reader.household_section(s, &mut raw)?;
            }
            "rule" => {
                let i = raw.rules.len();
                let rule = reader.rule_section(i, s)?;
                raw.rules.push(rule);
            }
            other => {
                return Err(reader.err(
                    format!("line {}", s.line),
                    format!("unknown section type {other:?}; known: slipstream, household, rule"),
                ))
            }
        }
    }
    let validator = Validator {
        origin,
        format: Format::Uci,
    };
    validator
        .config(raw)
        .map_err(|e| ConfigError::new(origin, reader.loc.describe(e.path()), e.message().to_owned()))
}
