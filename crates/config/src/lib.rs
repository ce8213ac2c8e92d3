//! Slipstream's configuration: the TOML schema, the equivalent OpenWrt UCI schema, their defaults,
//! and validation whose messages name the file, the field and what is wrong.
//!
//! The TOML file has these parts (see `config/slipstream.toml` in the repository for a commented
//! example, and `docs/configuration.md` for every option): a top-level `enabled`, `[datapath]`
//! (where packets are intercepted and how they reach the daemon), `[metrics]`, `[limits]` (flow
//! table size and timeouts), `[control]` (the daemon's local control socket), `[household]` (the
//! budget all household-controlled flows of a link share) and one or more `[[rules]]` that class
//! TCP flows (and UDP flows, with `protocol`) as background and name the controller that holds
//! them back.
//!
//! The same configuration can be written in OpenWrt's UCI syntax (`/etc/config/slipstream`, see
//! `openwrt/files/slipstream.config`): [`parse_uci`] reads it into the same raw structs the TOML
//! goes through and runs the same validation, so the two formats cannot drift; only the names in
//! the messages differ (`rule 'bittorrent' (line 12), option remote_port (line 14): ...`). [`load`]
//! picks the format from the file name and content.
//!
//! Parsing is two-stage: serde reads the text into loose "raw" structs (every table
//! `deny_unknown_fields`, so a typo is an error, not a silently ignored key), then [`parse`]
//! validates and converts them into [`Config`], reporting the first problem as
//! `"<file>: <field path>: <what is wrong>"`, e.g.
//! `config/slipstream.toml: rules[2].remote_ports[0]: port range 9000-80 is reversed`.
//! Syntax and type errors from toml keep its line and column.
//!
//! # Rule matching
//!
//! A flow is background if a rule matches it. Within a rule every *given* criterion must match
//! (AND); within one criterion's list any entry may match (OR); an omitted or empty list matches
//! anything. A rule with no criteria at all is rejected, since it would class every flow as
//! background. Rules are numbered 1..=N in file order and the first match wins; the number is what
//! the firewall stores in the connection mark (see [`Datapath::mark_mask`]).

mod controllers;
mod datapath_engine;
mod kinded;
mod raw;
mod types;
pub mod uci;
mod validate;
mod values;

pub use datapath_engine::DatapathEngine;
pub use types::*;
pub use uci::{parse_sections, parse_uci, UciEntry, UciSection, UciSyntaxError};
pub use values::{parse_dscp, parse_rate, MacAddr, PortRange, DSCP_NAMES};

use raw::RawConfig;
use slipstream_control::{ControllerConfig, VultureConfig};
use std::path::Path;
use std::time::Duration;
pub(crate) use validate::Validator;

/// The queueing-delay guard of Slipstream's Vulture variant. Measured in the end-to-end testbed:
/// 10 ms keeps best effort at 98.6% beside a background download while the background flow alone
/// gets 92-94% of the link (20 ms let a slowly ramping best-effort flow lose more, see docs/vulture.md).
pub const DEFAULT_QUEUE_DELAY_LIMIT: Duration = Duration::from_millis(10);

/// What `controller = "vulture"` means: Slipstream's variant (measured better than the paper's
/// rules in the end-to-end testbed; `variant = "paper"` selects the original).
pub fn default_vulture() -> VultureConfig {
    VultureConfig::slipstream(DEFAULT_QUEUE_DELAY_LIMIT)
}

/// The controller of a rule that names none; the one place that decides it (UCI controller
/// parameters without `option controller` belong to its kind too). Household control: measured
/// against Vulture in the namespace testbed it yields as much to a best-effort download
/// (97.5-98.6% kept, downloads and uploads), fills the idle link as well, and also controls
/// clients without TCP timestamps and many flows per host (docs/household.md).
pub fn default_controller() -> ControllerConfig {
    ControllerConfig::Household
}

/// Highest rule `priority` (lowest precedence): eight levels, numbered like tc's prio bands.
pub const MAX_PRIORITY: u8 = 7;
/// Most rules a config may have: rule numbers must fit the connmark field with room to spare
/// (an 8-bit field holds 1..=255).
pub const MAX_RULES: usize = 250;

/// A configuration problem: which file, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {path}: {message}")]
pub struct ConfigError {
    origin: String,
    path: String,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(origin: &str, path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            origin: origin.to_owned(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// The file (or other origin) the text came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The field path (`rules[2].remote_ports[0]`), or `line L, column C` for toml syntax/type
    /// errors, or `file` for I/O errors. For UCI files: the section and option with their lines
    /// (`rule 'bittorrent' (line 12), option remote_port (line 14)`), or `line L` for syntax errors.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The two syntaxes a config file may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `config/slipstream.toml` style.
    Toml,
    /// OpenWrt UCI (`/etc/config/slipstream`).
    Uci,
}

impl Format {
    /// The format of a file: `.toml` extension -> TOML; otherwise the content decides: if its first
    /// word outside comments is `config` or `package` it is UCI, else TOML.
    pub fn detect(path: &Path, text: &str) -> Format {
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("toml")) {
            return Format::Toml;
        }
        let first_word = text
            .lines()
            .map(str::trim_start)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .and_then(|l| l.split(|c: char| c.is_whitespace() || c == ';').next());
        match first_word {
            Some("config") | Some("package") => Format::Uci,
            _ => Format::Toml,
        }
    }
}

/// Reads, parses and validates a config file, TOML or UCI (see [`Format::detect`]). Messages name
/// the file as given.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(&origin, "file", format!("cannot read: {e}")))?;
    match Format::detect(path, &text) {
        Format::Toml => parse(&text, &origin),
        Format::Uci => parse_uci(&text, &origin),
    }
}

/// Parses and validates TOML config text; `origin` is the file name used in messages.
pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| toml_error(text, origin, &e))?;
    Validator {
        origin,
        format: Format::Toml,
    }
    .config(raw)
}

fn toml_error(text: &str, origin: &str, e: &toml::de::Error) -> ConfigError {
    let path = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}")
        }
        None => "toml".to_owned(),
    };
    ConfigError::new(origin, path, e.message().trim().to_owned())
}
