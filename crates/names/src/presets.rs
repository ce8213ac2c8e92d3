//! The presets: `crates/names/presets.toml` (inside the crate, so that every build, the OpenWrt
//! package's included, has it), built into the binaries so that a preset means the same on every
//! router running the same version. The file is checked by this module's tests (in CI):
//! every pattern parses, every entry has a description and a source, names are unique.

use crate::DomainPattern;
use serde::Deserialize;
use std::sync::OnceLock;

/// The presets file as shipped (`crates/names/presets.toml` in the repository).
pub const PRESETS_TOML: &str = include_str!("../presets.toml");

/// One preset: a named list of DNS name patterns with where they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preset {
    /// What `preset = "..."` takes: lower case letters, digits and `_`.
    pub name: String,
    /// One line for `slipstream presets`.
    pub description: String,
    /// Which transport the listed hosts serve their content over: a rule naming a preset with
    /// UDP (HTTP/3's QUIC) covers UDP flows too, unless the rule sets its own `protocol`.
    pub protocol: Protocol,
    /// The names it classes, as a rule's `domains`.
    pub domains: Vec<DomainPattern>,
    /// Vendor documentation, public lists (with the file), or captures.
    pub sources: Vec<String>,
    /// Caveats: what is not covered, what else to add.
    pub note: Option<String>,
}

/// The transport protocols a rule (or a preset's hosts) covers: `"tcp"`, `"udp"` or `"both"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// TCP only (`"tcp"`): what every rule meant before rules could name a protocol.
    #[default]
    Tcp,
    /// UDP only (`"udp"`): QUIC, uTP, other UDP transfers.
    Udp,
    /// TCP and UDP (`"both"`).
    Both,
}

impl Protocol {
    /// Every protocol with its config name.
    pub const ALL: [(Protocol, &'static str); 3] = [
        (Protocol::Tcp, "tcp"),
        (Protocol::Udp, "udp"),
        (Protocol::Both, "both"),
    ];

    /// The protocol a config names (`"tcp"`, `"udp"`, `"both"`; lower case).
    pub fn from_name(name: &str) -> Option<Protocol> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(p, _)| *p)
    }

    /// Its config name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("tcp", |(_, n)| n)
    }

    /// Whether TCP flows are covered.
    pub fn tcp(self) -> bool {
        matches!(self, Protocol::Tcp | Protocol::Both)
    }

    /// Whether UDP flows are covered.
    pub fn udp(self) -> bool {
        matches!(self, Protocol::Udp | Protocol::Both)
    }

    /// What covers the flows of both.
    pub fn union(self, other: Protocol) -> Protocol {
        match (self.tcp() || other.tcp(), self.udp() || other.udp()) {
            (true, true) => Protocol::Both,
            (false, true) => Protocol::Udp,
            _ => Protocol::Tcp,
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    preset: Vec<RawPreset>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPreset {
    name: String,
    description: String,
    protocol: String,
    domains: Vec<String>,
    sources: Vec<String>,
    note: Option<String>,
}

/// Parses and checks a presets file: what the tests run on the shipped file.
pub fn parse(text: &str) -> Result<Vec<Preset>, String> {
    let raw: RawFile = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut out: Vec<Preset> = Vec::with_capacity(raw.preset.len());
    for (i, p) in raw.preset.into_iter().enumerate() {
        let at = format!("preset[{i}] {:?}", p.name);
        if p.name.is_empty()
            || !p
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(format!("{at}: name must be lower case letters, digits and '_'"));
        }
        if out.iter().any(|q| q.name == p.name) {
            return Err(format!("{at}: duplicate name"));
        }
        if p.description.trim().is_empty() {
            return Err(format!("{at}: no description"));
        }
        if p.sources.is_empty() || p.sources.iter().any(|s| s.trim().is_empty()) {
            return Err(format!("{at}: every preset needs at least one non-empty source"));
        }
        let Some(protocol) = Protocol::from_name(&p.protocol) else {
            return Err(format!(
                "{at}: protocol {:?} is not \"tcp\", \"udp\" or \"both\"",
                p.protocol
            ));
        };
        if p.domains.is_empty() {
            return Err(format!("{at}: no domains"));
        }
        let mut domains = Vec::with_capacity(p.domains.len());
        for (j, d) in p.domains.iter().enumerate() {
            let pattern: DomainPattern = d.parse().map_err(|e| format!("{at}: domains[{j}]: {e}"))?;
            if domains.contains(&pattern) {
                return Err(format!("{at}: domains[{j}]: {d:?} is listed twice"));
            }
            domains.push(pattern);
        }
        out.push(Preset {
            name: p.name,
            description: p.description,
            protocol,
            domains,
            sources: p.sources,
            note: p.note,
        });
    }
    Ok(out)
}

/// Every shipped preset, in file order.
pub fn all() -> &'static [Preset] {
    static PRESETS: OnceLock<Vec<Preset>> = OnceLock::new();
    // The shipped file is checked by the tests below, so this cannot fail in a tested build; an
    // untested edit fails open to "no presets" (configs naming one are then rejected).
    PRESETS.get_or_init(|| parse(PRESETS_TOML).unwrap_or_default())
}

/// The shipped preset called `name`.
pub fn find(name: &str) -> Option<&'static Preset> {
    all().iter().find(|p| p.name == name)
}

/// The names of every shipped preset, for messages.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|p| p.name.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_is_valid() {
        let presets = parse(PRESETS_TOML).unwrap_or_else(|e| panic!("crates/names/presets.toml: {e}"));
        assert_eq!(presets.len(), all().len());
        // What the issue asks for, at least.
        for name in [
            "steam",
            "epic",
            "battlenet",
            "windows_update",
            "xbox",
            "playstation",
            "nintendo",
            "apple_updates",
            "google_play",
            "android_ota",
            "icloud_backup",
            "onedrive",
            "google_photos",
        ] {
            assert!(find(name).is_some(), "preset {name} missing");
        }
        for p in all() {
            for s in &p.sources {
                assert!(
                    s.starts_with("https://") || s.starts_with("capture:"),
                    "{}: {s}",
                    p.name
                );
            }
        }
    }

    #[test]
    fn presets_match_what_they_name() {
        let steam = find("steam").unwrap();
        let hit = |p: &Preset, n: &str| p.domains.iter().any(|d| d.matches(n));
        assert!(hit(steam, "cache1-fra1.steamcontent.com"));
        assert!(
            !hit(steam, "store.steampowered.com"),
            "the store page stays best effort"
        );
        // Google's hosts serve HTTP/3 (QUIC on UDP 443); Valve's content servers only HTTP.
        assert_eq!(steam.protocol, Protocol::Tcp);
        for name in ["google_play", "android_ota", "google_photos"] {
            assert_eq!(find(name).unwrap().protocol, Protocol::Both, "{name}");
        }
        let wu = find("windows_update").unwrap();
        assert!(hit(wu, "7.tlu.dl.delivery.mp.microsoft.com"));
        assert!(!hit(wu, "login.microsoftonline.com"));
    }

    #[test]
    fn bad_files_are_rejected() {
        let one =
            |body: &str| format!("[[preset]]\nname = \"x\"\ndescription = \"d\"\nprotocol = \"tcp\"\n{body}");
        for (text, why) in [
            (one("domains = [\"a.com\"]\nsources = []\n"), "source"),
            (one("domains = [\"a.com\"]\nsources = [\" \"]\n"), "source"),
            (
                one("domains = [\"cdn*.a.com\"]\nsources = [\"s\"]\n"),
                "domains[0]",
            ),
            (one("domains = []\nsources = [\"s\"]\n"), "no domains"),
            (
                one("domains = [\"a.com\", \"A.com\"]\nsources = [\"s\"]\n"),
                "twice",
            ),
            (
                format!(
                    "{}\n{}",
                    one("domains = [\"a.com\"]\nsources = [\"s\"]"),
                    one("domains = [\"a.com\"]\nsources = [\"s\"]")
                ),
                "duplicate",
            ),
            (
                one("domains = [\"a.com\"]\nsources = [\"s\"]\nurl = \"\"\n"),
                "unknown field",
            ),
            (
                "[[preset]]\nname = \"x\"\ndescription = \"d\"\ndomains = [\"a.com\"]\nsources = [\"s\"]\n"
                    .to_owned(),
                "protocol",
            ),
            (
                "[[preset]]\nname = \"x\"\ndescription = \"d\"\nprotocol = \"quic\"\ndomains = [\"a.com\"]\nsources = [\"s\"]\n"
                    .to_owned(),
                "protocol \"quic\"",
            ),
        ] {
            let e = parse(&text).expect_err(&text);
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}

#[cfg(test)]
mod protocol_tests {
    use super::Protocol;

    #[test]
    fn names_and_union() {
        for (p, n) in Protocol::ALL {
            assert_eq!(Protocol::from_name(n), Some(p));
            assert_eq!(p.name(), n);
        }
        assert_eq!(Protocol::from_name("TCP"), None, "callers lower-case first");
        assert_eq!(Protocol::Tcp.union(Protocol::Udp), Protocol::Both);
        assert_eq!(Protocol::Tcp.union(Protocol::Tcp), Protocol::Tcp);
        assert_eq!(Protocol::Udp.union(Protocol::Udp), Protocol::Udp);
        assert_eq!(Protocol::Both.union(Protocol::Tcp), Protocol::Both);
        assert!(Protocol::Both.tcp() && Protocol::Both.udp());
        assert!(!Protocol::Udp.tcp() && !Protocol::Tcp.udp());
    }
}
