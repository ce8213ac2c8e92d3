//! Validation of names: a rule's `domains`, `preset` and `lan_hostnames`, and the `[names]`
//! settings (set timeout, dnsmasq snippet, lease files).

use super::{VResult, Validator};
use crate::raw::{RawNames, RawRule};
use crate::types::{Datapath, DomainPattern, Names, Protocol};
use slipstream_names::{leases, presets};
use std::path::PathBuf;
use std::time::Duration;

/// A rule's name criteria, validated.
pub(super) struct RuleNames {
    pub domains: Vec<DomainPattern>,
    pub presets: Vec<String>,
    pub lan_hostnames: Vec<String>,
    /// What the named presets' hosts serve over, together; `None` without presets.
    pub preset_protocol: Option<Protocol>,
}

/// Most patterns one rule may have (its own and its presets'): each becomes a dnsmasq match.
const MAX_DOMAINS: usize = 1000;

impl Validator<'_> {
    pub(super) fn rule_names(&self, p: &str, raw: &mut RawRule, datapath: &Datapath) -> VResult<RuleNames> {
        let mut domains: Vec<DomainPattern> = Vec::new();
        for (j, d) in raw.domains.iter().enumerate() {
            let pattern: DomainPattern = d
                .parse()
                .map_err(|why: String| self.err(format!("{p}.domains[{j}]"), why))?;
            if !domains.contains(&pattern) {
                domains.push(pattern);
            }
        }
        let mut names = Vec::new();
        let mut preset_protocol: Option<Protocol> = None;
        for (j, name) in std::mem::take(&mut raw.preset).into_vec().into_iter().enumerate() {
            let name = name.trim().to_ascii_lowercase();
            let Some(preset) = presets::find(&name) else {
                return Err(self.err(
                    format!("{p}.preset[{j}]"),
                    format!(
                        "unknown preset {name:?}; known presets: {} (`slipstream presets` lists them)",
                        presets::names().join(", ")
                    ),
                ));
            };
            preset_protocol = Some(preset_protocol.map_or(preset.protocol, |p| p.union(preset.protocol)));
            for d in &preset.domains {
                if !domains.contains(d) {
                    domains.push(d.clone());
                }
            }
            if !names.contains(&name) {
                names.push(name);
            }
        }
        if domains.len() > MAX_DOMAINS {
            return Err(self.err(
                format!("{p}.domains"),
                format!(
                    "{} names with the presets; at most {MAX_DOMAINS} per rule",
                    domains.len()
                ),
            ));
        }
        let mut lan_hostnames: Vec<String> = Vec::new();
        for (j, h) in raw.lan_hostnames.iter().enumerate() {
            let h = h.trim().to_ascii_lowercase();
            leases::check_hostname(&h).map_err(|why| self.err(format!("{p}.lan_hostnames[{j}]"), why))?;
            if !lan_hostnames.contains(&h) {
                lan_hostnames.push(h);
            }
        }
        if !lan_hostnames.is_empty() && !datapath.hook.forward() {
            return Err(self.err(
                format!("{p}.lan_hostnames"),
                format!(
                    "named LAN hosts need router mode ({} = \"forward\" or \"both\"); in local mode the \
                     LAN host is this machine",
                    self.name("datapath.hook")
                ),
            ));
        }
        Ok(RuleNames {
            domains,
            presets: names,
            lan_hostnames,
            preset_protocol,
        })
    }

    pub(super) fn names(&self, raw: RawNames) -> VResult<Names> {
        let d = Names::default();
        let set_timeout = self.duration("names.set_timeout", raw.set_timeout.as_deref(), d.set_timeout)?;
        if !(Duration::from_secs(1)..=Duration::from_secs(7 * 24 * 3600)).contains(&set_timeout) {
            return Err(self.err("names.set_timeout", "must be 1s to 7 days"));
        }
        let lease_poll = self.duration("names.lease_poll", raw.lease_poll.as_deref(), d.lease_poll)?;
        if !(Duration::from_millis(100)..=Duration::from_secs(600)).contains(&lease_poll) {
            return Err(self.err("names.lease_poll", "must be 100ms to 10 minutes"));
        }
        let dnsmasq_conf = match raw.dnsmasq_conf.as_deref().map(str::trim) {
            None => d.dnsmasq_conf,
            Some("") => None,
            Some(s) => Some(self.absolute("names.dnsmasq_conf", s)?),
        };
        let dhcp_leases = match raw.dhcp_leases {
            None => d.dhcp_leases,
            Some(list) => list
                .iter()
                .enumerate()
                .map(|(j, s)| self.absolute(&format!("names.dhcp_leases[{j}]"), s.trim()))
                .collect::<VResult<_>>()?,
        };
        Ok(Names {
            set_timeout,
            dnsmasq_conf,
            dhcp_leases,
            lease_poll,
        })
    }

    fn absolute(&self, path: &str, s: &str) -> VResult<PathBuf> {
        let p = PathBuf::from(s);
        if !p.is_absolute() {
            return Err(self.err(path, format!("{s:?} is not an absolute path")));
        }
        Ok(p)
    }
}
