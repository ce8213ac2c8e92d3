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

use crate::controllers::{RawBudget, RawController};
use crate::kinded::{Kinded, Kinds, ParamError};
use crate::raw::{IntOrString, RawConfig, RawRule};
use crate::{default_controller, Config, ConfigError, Format, Validator};
use serde::de::{self, Visitor};
use slipstream_household::BudgetConfig;
use std::collections::HashMap;
use std::fmt;

/// A UCI syntax error: where and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct UciSyntaxError {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

/// One `option` or `list` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciEntry {
    pub name: String,
    pub value: String,
    /// `list` (true) or `option` (false).
    pub list: bool,
    /// 1-based line of the statement.
    pub line: usize,
}

/// One `config <type> [<name>]` section with its statements in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciSection {
    pub section_type: String,
    /// `None` for an anonymous section.
    pub name: Option<String>,
    /// Position among the sections of the same type (what `@type[index]` refers to).
    pub index: usize,
    /// 1-based line of the `config` statement.
    pub line: usize,
    pub entries: Vec<UciEntry>,
}

impl UciSection {
    /// The value of `option <name>` as libuci resolves it: the last `option` wins; for a list, its
    /// values joined by spaces. `None` if absent.
    pub fn option(&self, name: &str) -> Option<String> {
        self.values(name).map(|v| v.join(" "))
    }

    /// The values of `name` as libuci resolves mixed statements: `option` replaces what came before,
    /// `list` appends (an earlier `option` value becomes the list's first element).
    pub fn values(&self, name: &str) -> Option<Vec<String>> {
        let mut out: Option<Vec<String>> = None;
        for e in self.entries.iter().filter(|e| e.name == name) {
            if e.list {
                out.get_or_insert_with(Vec::new).push(e.value.clone());
            } else {
                out = Some(vec![e.value.clone()]);
            }
        }
        out
    }

    /// `'main'` for a named section, `@rule[2]` for an anonymous one (uci's own notation).
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("'{n}'"),
            None => format!("@{}[{}]", self.section_type, self.index),
        }
    }
}

/// A UCI boolean as libuci/`uci_get_bool` reads it: `1/yes/on/true/enabled` and
/// `0/no/off/false/disabled` (case-insensitive).
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "on" | "true" | "enabled" => Some(true),
        "0" | "no" | "off" | "false" | "disabled" => Some(false),
        _ => None,
    }
}

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
}

impl Lexer<'_> {
    /// The next statement's words and its first line; `None` at the end of the text.
    fn statement(&mut self) -> Result<Option<(usize, Vec<String>)>, UciSyntaxError> {
        let mut words = Vec::new();
        let mut start = self.line;
        loop {
            match self.chars.peek().copied() {
                None => return Ok((!words.is_empty()).then_some((start, words))),
                Some('\n') => {
                    self.chars.next();
                    self.line += 1;
                    if !words.is_empty() {
                        return Ok(Some((start, words)));
                    }
                }
                Some(';') => {
                    self.chars.next();
                    if !words.is_empty() {
                        return Ok(Some((start, words)));
                    }
                }
                Some('#') => {
                    while self.chars.peek().is_some_and(|&c| c != '\n') {
                        self.chars.next();
                    }
                }
                Some(c) if c.is_whitespace() => {
                    self.chars.next();
                }
                Some(_) => {
                    if words.is_empty() {
                        start = self.line;
                    }
                    if let Some(w) = self.word()? {
                        words.push(w);
                    }
                }
            }
        }
    }

    /// One word (pieces joined); `None` if it was only a line continuation.
    fn word(&mut self) -> Result<Option<String>, UciSyntaxError> {
        let mut w = String::new();
        let mut started = false;
        while let Some(&c) = self.chars.peek() {
            match c {
                '\'' | '"' => {
                    let open = self.line;
                    self.chars.next();
                    started = true;
                    loop {
                        match self.chars.next() {
                            None => {
                                return Err(UciSyntaxError {
                                    line: open,
                                    message: format!("unterminated {c} quote"),
                                })
                            }
                            Some(q) if q == c => break,
                            Some('\\') if c == '"' => match self.chars.next() {
                                Some('\n') => self.line += 1,
                                Some(e) => w.push(e),
                                None => {
                                    return Err(UciSyntaxError {
                                        line: open,
                                        message: "unterminated \" quote".to_owned(),
                                    })
                                }
                            },
                            Some(ch) => {
                                if ch == '\n' {
                                    self.line += 1;
                                }
                                w.push(ch);
                            }
                        }
                    }
                }
                '\\' => {
                    self.chars.next();
                    match self.chars.next() {
                        Some('\n') => self.line += 1,
                        Some(e) => {
                            started = true;
                            w.push(e);
                        }
                        None => {}
                    }
                }
                ';' | '#' => break,
                c if c.is_whitespace() => break,
                c => {
                    self.chars.next();
                    started = true;
                    w.push(c);
                }
            }
        }
        Ok(started.then_some(w))
    }
}

fn valid_name(s: &str, dash: bool) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || (dash && c == '-'))
}

/// Reads UCI text into its sections (no schema: any types and options). Errors carry the line.
pub fn parse_sections(text: &str) -> Result<Vec<UciSection>, UciSyntaxError> {
    let mut lexer = Lexer {
        chars: text.chars().peekable(),
        line: 1,
    };
    let mut sections: Vec<UciSection> = Vec::new();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let err = |line, message: String| UciSyntaxError { line, message };
    while let Some((line, words)) = lexer.statement()? {
        match words[0].as_str() {
            "package" => {
                if words.len() != 2 {
                    return Err(err(line, "`package` takes one name".into()));
                }
            }
            "config" => {
                if !(2..=3).contains(&words.len()) {
                    return Err(err(
                        line,
                        "expected `config <type> ['<name>']`".to_owned()
                            + if words.len() > 3 { " (too many words)" } else { "" },
                    ));
                }
                let section_type = words[1].clone();
                if !valid_name(&section_type, true) {
                    return Err(err(
                        line,
                        format!("invalid section type {section_type:?}: use letters, digits, '_' and '-'"),
                    ));
                }
                let name = words.get(2).filter(|n| !n.is_empty()).cloned();
                if let Some(n) = &name {
                    if !valid_name(n, false) {
                        return Err(err(
                            line,
                            format!("invalid section name {n:?}: use letters, digits and '_'"),
                        ));
                    }
                }
                let count = counts.entry(section_type.clone()).or_default();
                sections.push(UciSection {
                    section_type,
                    name,
                    index: *count,
                    line,
                    entries: Vec::new(),
                });
                *count += 1;
            }
            kw @ ("option" | "list") => {
                if words.len() != 3 {
                    return Err(err(
                        line,
                        format!(
                            "expected `{kw} <name> '<value>'`{}",
                            if words.len() > 3 {
                                " (too many words; quote a value that contains blanks)"
                            } else {
                                ""
                            }
                        ),
                    ));
                }
                if !valid_name(&words[1], false) {
                    return Err(err(
                        line,
                        format!("invalid option name {:?}: use letters, digits and '_'", words[1]),
                    ));
                }
                let Some(section) = sections.last_mut() else {
                    return Err(err(line, format!("`{kw}` before the first `config` section")));
                };
                section.entries.push(UciEntry {
                    name: words[1].clone(),
                    value: words[2].clone(),
                    list: kw == "list",
                    line,
                });
            }
            other => {
                return Err(err(
                    line,
                    format!("unknown statement {other:?}; expected package, config, option or list"),
                ))
            }
        }
    }
    Ok(sections)
}

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
    "controller",
    "weight",
    "min_rate",
    "priority",
];

/// Options of the `config household` section besides the budget controllers' parameters (see
/// [`household_options`]).
pub const HOUSEHOLD_OPTIONS: &[&str] = &["budget", "slowdown_interval", "turn"];

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
const LIST_OPTIONS: &[&str] = &[
    "lan_interface",
    "remote_port",
    "local_port",
    "dscp",
    "lan_host",
    "lan_mac",
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
struct Locations {
    /// `slipstream 'main' (line 3)`; `None` if the file has no such section.
    main: Option<String>,
    /// `household 'household' (line 30)`; `None` if the file has no such section.
    household: Option<String>,
    /// One per rule section, in order (same index as the raw rules).
    rules: Vec<String>,
    /// TOML path (`datapath.ack_queue`, `rules[1].remote_ports[2]`) -> line.
    lines: HashMap<String, usize>,
}

impl Locations {
    /// The UCI location of a validator path.
    fn describe(&self, toml_path: &str) -> String {
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

impl fmt::Display for UciSection {
    /// `config rule 'bittorrent' (line 12)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "config {} {} (line {})",
            self.section_type,
            self.label(),
            self.line
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> UciSection {
        let mut s = parse_sections(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.len(), 1);
        s.remove(0)
    }

    #[test]
    fn quoting_and_escapes() {
        let s = one(concat!(
            "config t 'n'\n",
            "  option a 'single \\ quoted # not a comment'\n",
            "  option b \"double \\\"q\\\" \\\\ back\"\n",
            "  option c unquoted\\ blank # comment\n",
            "  option d 'a'\"b\"c\n",
            "  option e ''\n",
            "  option f 'two\nlines'\n",
            "  option g long\\\n",
            "value\n",
            "  option h x; option i y\n",
        ));
        let v = |n: &str| s.option(n).unwrap();
        assert_eq!(v("a"), "single \\ quoted # not a comment");
        assert_eq!(v("b"), "double \"q\" \\ back");
        assert_eq!(v("c"), "unquoted blank");
        assert_eq!(v("d"), "abc");
        assert_eq!(v("e"), "");
        assert_eq!(v("f"), "two\nlines");
        assert_eq!(v("g"), "longvalue");
        assert_eq!(v("h"), "x");
        assert_eq!(v("i"), "y");
        let lines: Vec<usize> = s.entries.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7, 9, 11, 11]);
    }

    #[test]
    fn lists_and_overrides() {
        let s = one("config t\n option x 1\n option x 2\n list y a\n list y b\n option z p\n list z q\n");
        assert_eq!(s.name, None);
        assert_eq!(s.label(), "@t[0]");
        assert_eq!(s.option("x").unwrap(), "2");
        assert_eq!(s.values("y").unwrap(), ["a", "b"]);
        assert_eq!(s.values("z").unwrap(), ["p", "q"]);
        assert_eq!(s.values("nope"), None);
    }

    #[test]
    fn syntax_errors_name_the_line() {
        for (text, line, what) in [
            ("config t\n option a 'open\n", 2, "unterminated ' quote"),
            ("config t\n option a \"open\n", 2, "unterminated \" quote"),
            ("option a b\n", 1, "before the first `config`"),
            ("config t\n option a\n", 2, "expected `option <name> '<value>'`"),
            ("config t\n option a b c\n", 2, "too many words"),
            ("config t\n list a-b c\n", 2, "invalid option name"),
            ("config t 'a-b'\n", 1, "invalid section name"),
            ("config\n", 1, "expected `config <type>"),
            ("\n\nconfig t\n foo a b\n", 4, "unknown statement \"foo\""),
        ] {
            let e = parse_sections(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(what), "{text:?}: {e}");
        }
    }

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

    #[test]
    fn booleans() {
        for t in ["1", "yes", "on", "true", "TRUE", "enabled"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "no", "off", "false", "disabled"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        assert_eq!(parse_bool("2"), None);
    }
}
