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
    /// The names it classes, as a rule's `domains`.
    pub domains: Vec<DomainPattern>,
    /// Vendor documentation, public lists (with the file), or captures.
    pub sources: Vec<String>,
    /// Caveats: what is not covered, what else to add.
    pub note: Option<String>,
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
        let wu = find("windows_update").unwrap();
        assert!(hit(wu, "7.tlu.dl.delivery.mp.microsoft.com"));
        assert!(!hit(wu, "login.microsoftonline.com"));
    }

    #[test]
    fn bad_files_are_rejected() {
        let one = |body: &str| format!("[[preset]]\nname = \"x\"\ndescription = \"d\"\n{body}");
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
        ] {
            let e = parse(&text).expect_err(&text);
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
