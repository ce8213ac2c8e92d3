//! Validation of one `[[rules]]` entry: its name, criteria, controller and household share.

use super::{VResult, Validator};
use crate::raw::{IntOrString, RawRule};
use crate::types::*;
use crate::values::{parse_dscp, parse_rate, MacAddr, PortRange};
use crate::{default_controller, uci, Format, MAX_PRIORITY};
use ipnet::IpNet;
use slipstream_control::ControllerConfig;
use slipstream_household::ShareSpec;
use std::net::IpAddr;
use std::str::FromStr;

impl Validator<'_> {
    /// `weight`, `min_rate` and `priority` of a rule with controller `controller`.
    fn share(&self, p: &str, raw: &RawRule, controller: &ControllerConfig) -> VResult<ShareSpec> {
        let given = [
            ("weight", raw.weight.is_some()),
            ("min_rate", raw.min_rate.is_some()),
            ("priority", raw.priority.is_some()),
        ];
        if let Some((field, _)) = given.iter().find(|(_, set)| *set) {
            if *controller != ControllerConfig::Household {
                return Err(self.err(
                    format!("{p}.{field}"),
                    format!(
                        "only household flows share a budget; set {} (this rule's controller is {})",
                        match self.format {
                            Format::Toml => "controller = \"household\"",
                            Format::Uci => "option controller 'household'",
                        },
                        controller.kind()
                    ),
                ));
            }
        }
        let d = ShareSpec::default();
        let weight = match raw.weight {
            None => d.weight,
            Some(n) if (1..=i64::from(ShareSpec::MAX_WEIGHT)).contains(&n) => n as u32,
            Some(n) => {
                return Err(self.err(
                    format!("{p}.weight"),
                    format!("must be 1 to {}, not {n}", ShareSpec::MAX_WEIGHT),
                ))
            }
        };
        let priority = match raw.priority {
            None => d.priority,
            Some(n) if (0..=i64::from(MAX_PRIORITY)).contains(&n) => n as u8,
            Some(n) => {
                return Err(self.err(
                    format!("{p}.priority"),
                    format!("must be 0 to {MAX_PRIORITY} (0 is served first), not {n}"),
                ))
            }
        };
        let min_rate = match &raw.min_rate {
            None => d.min_rate,
            Some(IntOrString::Int(0)) => 0,
            Some(IntOrString::Int(n)) => {
                return Err(self.err(
                    format!("{p}.min_rate"),
                    format!(
                        "{n} has no unit: write bits per second as a string like \"2mbit\" or \"500kbit\""
                    ),
                ))
            }
            Some(IntOrString::Str(s)) => {
                parse_rate(s).map_err(|why| self.err(format!("{p}.min_rate"), why))?
            }
        };
        let share = ShareSpec {
            weight,
            min_rate,
            priority,
        };
        self.checked(p, &["weight", "min_rate", "priority"], share.validate())?;
        Ok(share)
    }

    pub(super) fn rule(&self, i: usize, mut raw: RawRule, datapath: &Datapath) -> VResult<Rule> {
        let p = format!("rules[{i}]");
        let name = raw.name.trim().to_owned();
        if name.is_empty() {
            return Err(self.err(format!("{p}.name"), "must not be empty"));
        }
        if name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(self.err(
                format!("{p}.name"),
                format!("{name:?}: use at most 64 letters, digits, '-', '_' or '.'"),
            ));
        }
        let remote_ports = self.ports(&format!("{p}.remote_ports"), &raw.remote_ports)?;
        let local_ports = self.ports(&format!("{p}.local_ports"), &raw.local_ports)?;
        let mut dscp = Vec::new();
        for (j, v) in raw.dscp.iter().enumerate() {
            let path = format!("{p}.dscp[{j}]");
            let value = match v {
                IntOrString::Int(n) if (0..=63).contains(n) => *n as u8,
                IntOrString::Int(n) => {
                    return Err(self.err(path, format!("DSCP {n} is out of range (0..=63)")))
                }
                IntOrString::Str(s) => parse_dscp(s).ok_or_else(|| {
                    self.err(
                        path,
                        format!("{s:?} is not a DSCP value (0..=63) or name like \"LE\" or \"CS1\""),
                    )
                })?,
            };
            dscp.push(value);
        }
        let mut lan_hosts = Vec::new();
        for (j, s) in raw.lan_hosts.iter().enumerate() {
            let s = s.trim();
            // A bare address is a /32 or /128; host bits in a CIDR are dropped ("192.168.1.5/24"
            // means the 192.168.1.0/24 network, as iptables reads it).
            let net = IpNet::from_str(s)
                .or_else(|_| IpAddr::from_str(s).map(IpNet::from))
                .map_err(|_| {
                    self.err(
                        format!("{p}.lan_hosts[{j}]"),
                        format!("{s:?} is not an address or CIDR like \"192.168.1.20/32\""),
                    )
                })?;
            lan_hosts.push(net.trunc());
        }
        if !datapath.ipv6
            && raw.lan_hostnames.is_empty()
            && !lan_hosts.is_empty()
            && lan_hosts.iter().all(|n| matches!(n, IpNet::V6(_)))
        {
            return Err(self.err(
                format!("{p}.lan_hosts"),
                format!(
                    "all entries are IPv6 but {} is false, so the rule could never match",
                    self.name("datapath.ipv6")
                ),
            ));
        }
        let mut lan_macs = Vec::new();
        for (j, s) in raw.lan_macs.iter().enumerate() {
            let mac = s
                .parse::<MacAddr>()
                .map_err(|why| self.err(format!("{p}.lan_macs[{j}]"), why))?;
            lan_macs.push(mac);
        }
        if !lan_macs.is_empty() && datapath.hook != Hook::Forward {
            return Err(self.err(
                format!("{p}.lan_macs"),
                format!(
                    "MAC addresses can only be matched on packets a LAN host sends through the router; \
                     they need {} = \"forward\" (iptables also rejects a MAC match reachable from OUTPUT)",
                    self.name("datapath.hook")
                ),
            ));
        }
        let names = self.rule_names(&p, &mut raw, datapath)?;
        if remote_ports.is_empty()
            && local_ports.is_empty()
            && dscp.is_empty()
            && lan_hosts.is_empty()
            && lan_macs.is_empty()
            && names.domains.is_empty()
            && names.lan_hostnames.is_empty()
        {
            let criteria = [
                "remote_ports",
                "local_ports",
                "dscp",
                "lan_hosts",
                "lan_macs",
                "lan_hostnames",
                "domains",
                "preset",
            ]
            .map(|c| match self.format {
                Format::Toml => c.to_owned(),
                Format::Uci => uci::option_name(c),
            })
            .join(", ");
            return Err(self.err(
                p,
                format!(
                    "rule {name:?} has no criteria ({criteria}); it would class every flow as background"
                ),
            ));
        }
        let (protocol, quic) = self.protocol_and_quic(&p, &raw, names.preset_protocol, &remote_ports)?;
        let controller = match raw.controller.take() {
            None => default_controller(),
            Some(c) => c.validate(self, &format!("{p}.controller"))?,
        };
        let share = self.share(&p, &raw, &controller)?;
        Ok(Rule {
            name,
            remote_ports,
            local_ports,
            dscp,
            lan_hosts,
            lan_macs,
            domains: names.domains,
            presets: names.presets,
            lan_hostnames: names.lan_hostnames,
            protocol,
            quic,
            controller,
            share,
        })
    }

    /// `protocol` (default: TCP, plus UDP if a preset's hosts serve over UDP) and `quic`, which
    /// only a rule covering UDP may set, and whose "refuse" needs remote port 443 in the rule.
    fn protocol_and_quic(
        &self,
        p: &str,
        raw: &RawRule,
        preset_protocol: Option<Protocol>,
        remote_ports: &[PortRange],
    ) -> VResult<(Protocol, Quic)> {
        let protocol = match raw.protocol.as_deref().map(|s| s.trim().to_ascii_lowercase()) {
            None => preset_protocol.map_or(Protocol::Tcp, |pp| Protocol::Tcp.union(pp)),
            Some(s) => Protocol::from_name(&s).ok_or_else(|| {
                self.err(
                    format!("{p}.protocol"),
                    format!("unknown protocol {s:?}, expected \"tcp\", \"udp\" or \"both\""),
                )
            })?,
        };
        let Some(given) = raw.quic.as_deref().map(|s| s.trim().to_ascii_lowercase()) else {
            return Ok((protocol, Quic::default()));
        };
        let quic = Quic::ALL
            .iter()
            .find(|(_, n)| *n == given)
            .map(|(q, _)| *q)
            .ok_or_else(|| {
                self.err(
                    format!("{p}.quic"),
                    format!("unknown setting {given:?}, expected \"control\" or \"refuse\""),
                )
            })?;
        if !protocol.udp() {
            return Err(self.err(
                format!("{p}.quic"),
                format!(
                    "QUIC runs over UDP, but this rule covers TCP only; set {} (or leave {} out)",
                    match self.format {
                        Format::Toml => "protocol = \"udp\" or \"both\"",
                        Format::Uci => "option protocol 'udp' or 'both'",
                    },
                    self.name("quic")
                ),
            ));
        }
        if quic == Quic::Refuse
            && !remote_ports.is_empty()
            && !remote_ports.iter().any(|r| r.contains(QUIC_PORT))
        {
            return Err(self.err(
                format!("{p}.quic"),
                format!(
                    "\"refuse\" rejects the rule's UDP flows to remote port {QUIC_PORT}, but its {} leave \
                     {QUIC_PORT} out, so nothing would be refused",
                    self.name("remote_ports")
                ),
            ));
        }
        Ok((protocol, quic))
    }

    fn ports(&self, path: &str, raw: &[IntOrString]) -> VResult<Vec<PortRange>> {
        raw.iter()
            .enumerate()
            .map(|(j, v)| {
                let path = format!("{path}[{j}]");
                match v {
                    IntOrString::Int(0) => Err(self.err(path, "port 0 is not a valid port")),
                    IntOrString::Int(n) if (1..=65535).contains(n) => Ok(PortRange::single(*n as u16)),
                    IntOrString::Int(n) => {
                        Err(self.err(path, format!("port {n} is out of range (1..=65535)")))
                    }
                    IntOrString::Str(s) => s.parse::<PortRange>().map_err(|why| self.err(path, why)),
                }
            })
            .collect()
    }
}
