//! The validator shared by the TOML and the UCI reader: raw values in, [`Config`] or the first
//! problem (file, field path, what is wrong) out. Rules are checked in `rule.rs`.

mod names;
mod rule;

use crate::raw::{self, RawConfig};
use crate::types::*;
use crate::{uci, ConfigError, DatapathEngine, Format, MAX_RULES};
use slipstream_household::{HouseholdConfig, UdpEnforcement};
use std::collections::HashSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Checks raw values and builds the [`Config`]; shared by the TOML and the UCI reader. Paths in
/// its errors are TOML field paths (`rules[2].remote_ports[0]`); the UCI reader translates them.
/// Field names inside messages go through [`Validator::name`], so they read right in both formats.
pub(crate) struct Validator<'a> {
    pub(crate) origin: &'a str,
    pub(crate) format: Format,
}

pub(crate) type VResult<T> = Result<T, ConfigError>;

impl Validator<'_> {
    pub(crate) fn err(&self, path: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.origin, path, message)
    }

    /// How a field is called in messages: the TOML path, or `option <uci name>`.
    pub(crate) fn name(&self, toml_path: &str) -> String {
        match self.format {
            Format::Toml => toml_path.to_owned(),
            Format::Uci => format!("option {}", uci::option_name(toml_path)),
        }
    }

    pub(crate) fn int<T: TryFrom<i64>>(
        &self,
        path: &str,
        v: Option<i64>,
        default: T,
        min: i64,
        max: i64,
    ) -> VResult<T> {
        match v {
            None => Ok(default),
            Some(n) if n < min || n > max => {
                Err(self.err(path, format!("{n} is out of range ({min}..={max})")))
            }
            Some(n) => T::try_from(n).map_err(|_| self.err(path, format!("{n} is out of range"))),
        }
    }

    pub(crate) fn duration(&self, path: &str, v: Option<&str>, default: Duration) -> VResult<Duration> {
        match v {
            None => Ok(default),
            Some(s) => humantime::parse_duration(s.trim()).map_err(|e| {
                self.err(
                    path,
                    format!("{s:?} is not a duration like \"120s\" or \"20ms\" ({e})"),
                )
            }),
        }
    }

    /// A `validate()` result of a library config: a message that starts with one of `fields` is
    /// reported at that field (`gain must be ...` -> `{path}.gain: must be ...`), others at `path`.
    pub(crate) fn checked(&self, path: &str, fields: &[&str], result: Result<(), String>) -> VResult<()> {
        result.map_err(|message| match message.split_once(' ') {
            Some((field, rest)) if fields.contains(&field) => self.err(format!("{path}.{field}"), rest),
            _ => self.err(path, message),
        })
    }

    pub(crate) fn opt_duration(
        &self,
        path: &str,
        field: &str,
        v: Option<String>,
        default: Duration,
    ) -> VResult<Duration> {
        self.duration(&format!("{path}.{field}"), v.as_deref(), default)
    }

    /// An integer parameter whose range the library's `validate()` checks; here only that it fits.
    pub(crate) fn param_int<T: TryFrom<i64>>(
        &self,
        path: &str,
        field: &str,
        v: Option<i64>,
        default: T,
    ) -> VResult<T> {
        self.int(&format!("{path}.{field}"), v, default, i64::MIN, i64::MAX)
    }

    pub(crate) fn config(&self, raw: RawConfig) -> VResult<Config> {
        let enabled = raw.enabled.unwrap_or(true);
        let datapath = self.datapath(raw.datapath)?;
        let metrics = self.metrics(raw.metrics)?;
        let limits = self.limits(raw.limits)?;
        let control = self.control(raw.control)?;
        let probe = self.probe(raw.household.probe.as_deref())?;
        let household = self.household(raw.household)?;
        let names_settings = self.names(raw.names)?;
        let (rules_name, rule_name) = match self.format {
            Format::Toml => ("[[rules]] entry", "[[rules]] entry"),
            Format::Uci => ("`config rule` section", "`config rule` section"),
        };
        if raw.rules.is_empty() && enabled {
            return Err(self.err("rules", format!("at least one {rules_name} is required")));
        }
        let mut names = HashSet::new();
        let mut rules = Vec::with_capacity(raw.rules.len());
        let given = raw.rules.len();
        for (i, r) in raw.rules.into_iter().enumerate() {
            let rule_enabled = r.enabled.unwrap_or(true);
            let rule = self.rule(i, r, &datapath)?;
            if !names.insert(rule.name.clone()) {
                return Err(self.err(
                    format!("rules[{i}].name"),
                    format!("duplicate rule name {:?}", rule.name),
                ));
            }
            if rule_enabled {
                rules.push(rule);
            }
        }
        if rules.len() > MAX_RULES {
            return Err(self.err(
                "rules",
                format!(
                    "{} enabled rules given, at most {MAX_RULES} are allowed",
                    rules.len()
                ),
            ));
        }
        if rules.is_empty() && enabled {
            return Err(self.err(
                "rules",
                format!(
                    "all {given} rules are disabled; enable at least one {rule_name}, or disable \
                     Slipstream itself with {} = false",
                    self.name("enabled")
                ),
            ));
        }
        Ok(Config {
            enabled,
            datapath,
            metrics,
            limits,
            control,
            household,
            probe,
            names: names_settings,
            rules,
        })
    }

    fn household(&self, raw: raw::RawHousehold) -> VResult<HouseholdConfig> {
        let d = HouseholdConfig::default();
        let budget = match raw.budget {
            None => d.budget,
            Some(b) => b.validate(self, "household.budget")?,
        };
        let slowdown_interval = match raw.slowdown_interval.as_deref().map(str::trim) {
            Some("off") => Duration::ZERO,
            other => self.duration("household.slowdown_interval", other, d.slowdown_interval)?,
        };
        let turn = self.duration("household.turn", raw.turn.as_deref(), d.turn)?;
        let udp = match raw.udp.as_deref().map(|s| s.trim().to_ascii_lowercase()) {
            None => d.udp,
            Some(given) => UdpEnforcement::ALL
                .iter()
                .find(|(_, name)| *name == given)
                .map(|(u, _)| *u)
                .ok_or_else(|| {
                    self.err(
                        "household.udp",
                        format!("unknown setting {given:?}, expected \"shape\" or \"police\""),
                    )
                })?,
        };
        let household = HouseholdConfig {
            budget,
            slowdown_interval,
            turn,
            udp,
        };
        self.checked("household", &["slowdown_interval", "turn"], household.validate())?;
        Ok(household)
    }

    /// `household.probe`: "auto", "off" or the reflector's address (one that can answer an echo
    /// request: not unspecified, multicast or broadcast).
    fn probe(&self, raw: Option<&str>) -> VResult<ProbeTarget> {
        let Some(given) = raw else {
            return Ok(ProbeTarget::default());
        };
        let path = "household.probe";
        match given.trim() {
            "auto" => Ok(ProbeTarget::Auto),
            "off" => Ok(ProbeTarget::Off),
            text => match text.parse::<IpAddr>() {
                Ok(ip)
                    if ip.is_unspecified()
                        || ip.is_multicast()
                        || ip == IpAddr::from([255, 255, 255, 255]) =>
                {
                    Err(self.err(
                        path,
                        format!("{given:?} cannot answer an echo request; give the reflector's own address"),
                    ))
                }
                Ok(ip) => Ok(ProbeTarget::Address(ip)),
                Err(_) => Err(self.err(
                    path,
                    format!(
                        "{given:?} is not \"auto\" (the default route's gateway), \"off\" or an IP \
                         address like \"192.0.2.1\""
                    ),
                )),
            },
        }
    }

    fn control(&self, raw: raw::RawControl) -> VResult<Control> {
        let d = Control::default();
        let socket = match raw.socket {
            None => d.socket,
            Some(s) => {
                let p = PathBuf::from(s.trim());
                if !p.is_absolute() {
                    return Err(self.err(
                        "control.socket",
                        format!("{s:?} is not an absolute path like \"{DEFAULT_CONTROL_SOCKET}\""),
                    ));
                }
                if p.as_os_str().len() > 107 {
                    return Err(self.err(
                        "control.socket",
                        format!(
                            "{s:?} is {} bytes long; Unix socket paths are at most 107",
                            p.as_os_str().len()
                        ),
                    ));
                }
                p
            }
        };
        Ok(Control { socket })
    }

    fn datapath(&self, raw: raw::RawDatapath) -> VResult<Datapath> {
        let d = Datapath::default();
        let hook = match raw.hook.as_deref() {
            None => d.hook,
            Some("forward") => Hook::Forward,
            Some("local") => Hook::Local,
            Some("both") => Hook::Both,
            Some(other) => {
                return Err(self.err(
                    "datapath.hook",
                    format!("unknown hook {other:?}, expected \"forward\", \"local\" or \"both\""),
                ))
            }
        };
        let firewall = match raw.firewall.as_deref() {
            None => d.firewall,
            Some("auto") => FirewallBackend::Auto,
            Some("iptables") => FirewallBackend::Iptables,
            Some("nftables") => FirewallBackend::Nftables,
            Some(other) => {
                return Err(self.err(
                    "datapath.firewall",
                    format!("unknown firewall {other:?}, expected \"auto\", \"iptables\" or \"nftables\""),
                ))
            }
        };
        let lan_interfaces = raw.lan_interfaces.unwrap_or(d.lan_interfaces);
        for (i, name) in lan_interfaces.iter().enumerate() {
            if let Err(why) = check_interface_name(name) {
                return Err(self.err(format!("datapath.lan_interfaces[{i}]"), why));
            }
        }
        if hook.forward() && lan_interfaces.is_empty() {
            return Err(self.err(
                "datapath.lan_interfaces",
                "is empty, but router mode (hook \"forward\" or \"both\") needs the LAN interfaces",
            ));
        }
        let ack_queue: u16 = self.int("datapath.ack_queue", raw.ack_queue, d.ack_queue, 0, 65535)?;
        let data_queue: u16 = self.int("datapath.data_queue", raw.data_queue, d.data_queue, 0, 65535)?;
        if ack_queue == data_queue {
            return Err(self.err(
                "datapath.data_queue",
                format!(
                    "must differ from {} (both are {ack_queue})",
                    self.name("datapath.ack_queue")
                ),
            ));
        }
        let queue_max_len = self.int(
            "datapath.queue_max_len",
            raw.queue_max_len,
            d.queue_max_len,
            1,
            u32::MAX as i64,
        )?;
        let data_copy_bytes = self.int(
            "datapath.data_copy_bytes",
            raw.data_copy_bytes,
            d.data_copy_bytes,
            100,
            65535,
        )?;
        // 40 = the smallest IPv4+TCP packet; 65515 leaves room for the IPv6 +20.
        let ack_max_len = self.int("datapath.ack_max_len", raw.ack_max_len, d.ack_max_len, 40, 65515)?;
        let mark_mask: u32 = self.int(
            "datapath.mark_mask",
            raw.mark_mask,
            d.mark_mask,
            0,
            u32::MAX as i64,
        )?;
        if mark_mask.count_ones() < 8 || !is_contiguous(mark_mask) {
            return Err(self.err(
                "datapath.mark_mask",
                format!("{mark_mask:#010x} must be one contiguous run of at least 8 bits, like 0x00ff0000"),
            ));
        }
        Ok(Datapath {
            lan_interfaces,
            hook,
            ack_queue,
            data_queue,
            queue_max_len,
            data_copy_bytes,
            ack_max_len,
            firewall,
            mark_mask,
            ipv6: raw.ipv6.unwrap_or(d.ipv6),
            engine: DatapathEngine::parse(raw.engine.as_deref())
                .map_err(|e| self.err("datapath.engine", e))?,
        })
    }

    fn metrics(&self, raw: raw::RawMetrics) -> VResult<Metrics> {
        let d = Metrics::default();
        let listen = match raw.listen {
            None => d.listen,
            Some(s) => s.parse().map_err(|_| {
                self.err(
                    "metrics.listen",
                    format!("{s:?} is not an address like \"127.0.0.1:9617\""),
                )
            })?,
        };
        let top_flows = self.int("metrics.top_flows", raw.top_flows, d.top_flows, 0, 1000)?;
        Ok(Metrics { listen, top_flows })
    }

    fn limits(&self, raw: raw::RawLimits) -> VResult<Limits> {
        let d = Limits::default();
        let max_flows = self.int("limits.max_flows", raw.max_flows, d.max_flows, 1, 1_000_000)?;
        let idle_timeout =
            self.duration("limits.idle_timeout", raw.idle_timeout.as_deref(), d.idle_timeout)?;
        if idle_timeout.is_zero() {
            return Err(self.err("limits.idle_timeout", "must be greater than zero"));
        }
        let evict_idle_after = self.duration(
            "limits.evict_idle_after",
            raw.evict_idle_after.as_deref(),
            d.evict_idle_after,
        )?;
        if evict_idle_after > idle_timeout {
            return Err(self.err(
                "limits.evict_idle_after",
                format!(
                    "{} is longer than {} ({}); idle flows would expire first",
                    humantime::format_duration(evict_idle_after),
                    self.name("limits.idle_timeout"),
                    humantime::format_duration(idle_timeout)
                ),
            ));
        }
        Ok(Limits {
            max_flows,
            idle_timeout,
            evict_idle_after,
        })
    }
}

fn is_contiguous(mask: u32) -> bool {
    mask != 0 && (mask >> mask.trailing_zeros()).trailing_ones() == mask.count_ones()
}

/// Interface names as Linux and iptables take them: 1..=15 bytes of letters, digits, `-_.@`,
/// optionally ending in iptables' `+` wildcard.
fn check_interface_name(name: &str) -> Result<(), String> {
    let base = name.strip_suffix('+').unwrap_or(name);
    if name.is_empty() || name.len() > 15 {
        return Err(format!("{name:?}: interface names are 1 to 15 characters"));
    }
    if !base
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
    {
        return Err(format!(
            "{name:?}: interface names use letters, digits, '-', '_', '.', '@' (and a trailing '+' wildcard)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_masks() {
        assert!(is_contiguous(0x00ff_0000));
        assert!(is_contiguous(0xffff_ffff));
        assert!(is_contiguous(0x0000_00ff));
        assert!(!is_contiguous(0x00f0_f000));
        assert!(!is_contiguous(0));
    }
}
