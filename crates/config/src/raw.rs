//! The TOML file as serde sees it: loose types (integers as `i64`, durations and enum names as
//! strings, "number or string" lists) so that validation, not serde, reports range and format
//! problems — with the field path in the message. Serde still catches syntax errors, type
//! mismatches and unknown fields (every table is `deny_unknown_fields`), with toml's line/column;
//! settings with a kind (`controller`, `budget`) keep their problems for the validator instead
//! (see `kinded`).

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

use crate::controllers::{RawBudget, RawController};
use crate::kinded::Kinded;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub enabled: Option<bool>,
    #[serde(default)]
    pub datapath: RawDatapath,
    #[serde(default)]
    pub metrics: RawMetrics,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub control: RawControl,
    #[serde(default)]
    pub household: RawHousehold,
    #[serde(default)]
    pub names: RawNames,
    #[serde(default)]
    pub rules: Vec<RawRule>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNames {
    pub set_timeout: Option<String>,
    pub dnsmasq_conf: Option<String>,
    pub dhcp_leases: Option<Vec<String>>,
    pub lease_poll: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawControl {
    pub socket: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDatapath {
    pub lan_interfaces: Option<Vec<String>>,
    pub hook: Option<String>,
    pub ack_queue: Option<i64>,
    pub data_queue: Option<i64>,
    pub queue_max_len: Option<i64>,
    pub data_copy_bytes: Option<i64>,
    pub ack_max_len: Option<i64>,
    pub firewall: Option<String>,
    pub mark_mask: Option<i64>,
    pub ipv6: Option<bool>,
    pub engine: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMetrics {
    pub listen: Option<String>,
    pub top_flows: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub max_flows: Option<i64>,
    pub idle_timeout: Option<String>,
    pub evict_idle_after: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    pub name: String,
    pub enabled: Option<bool>,
    #[serde(default)]
    pub remote_ports: Vec<IntOrString>,
    #[serde(default)]
    pub local_ports: Vec<IntOrString>,
    #[serde(default)]
    pub dscp: Vec<IntOrString>,
    #[serde(default)]
    pub lan_hosts: Vec<String>,
    #[serde(default)]
    pub lan_macs: Vec<String>,
    #[serde(default)]
    pub lan_hostnames: Vec<String>,
    #[serde(default)]
    pub domains: Vec<String>,
    /// `preset = "steam"` or `preset = ["steam", "epic"]` (also spelled `presets`).
    #[serde(default, alias = "presets")]
    pub preset: OneOrMany,
    pub protocol: Option<String>,
    pub quic: Option<String>,
    pub controller: Option<Kinded<RawController>>,
    pub weight: Option<i64>,
    pub min_rate: Option<IntOrString>,
    pub priority: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHousehold {
    pub budget: Option<Kinded<RawBudget>>,
    pub slowdown_interval: Option<String>,
    pub turn: Option<String>,
    pub probe: Option<String>,
    pub udp: Option<String>,
}

/// One string or a list of them (`preset = "steam"`, `preset = ["steam", "epic"]`).
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(crate) fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::None => Vec::new(),
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// A list entry that may be written as a number or a string (`443` / `"6881-6889"`, `8` / `"CS1"`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IntOrString {
    Int(i64),
    Str(String),
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IntOrString;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrString, E> {
                Ok(IntOrString::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrString, E> {
                i64::try_from(v)
                    .map(IntOrString::Int)
                    .map_err(|_| E::custom("integer too large"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::Str(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}
