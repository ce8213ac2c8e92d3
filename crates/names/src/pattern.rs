//! DNS name patterns, in the three forms dnsmasq matches (dnsmasq(8), `--server` and
//! `--address`, which `--ipset` and `--nftset` follow):
//!
//! * `example.com`: the name and every name under it (`dl.example.com`), on whole labels
//!   (not `myexample.com`);
//! * `*.example.com`: only names under it, not `example.com` itself;
//! * `*example.com`: any name ending in that text (`myexample.com` too).
//!
//! A `*` anywhere else is refused: dnsmasq would take it literally and the rule would silently
//! never match. Names are compared in lower case; a trailing dot is dropped.

use std::fmt;
use std::str::FromStr;

/// A validated domain pattern (see the module docs for the forms).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DomainPattern {
    /// `example.com`: the name and every name under it.
    Domain(String),
    /// `*.example.com`: every name under it, not the name itself.
    Below(String),
    /// `*example.com`: any name whose text ends so.
    Suffix(String),
}

/// Longest DNS name (RFC 1035, in text form without the trailing dot).
const MAX_NAME: usize = 253;

impl FromStr for DomainPattern {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim().to_ascii_lowercase();
        let t = t.strip_suffix('.').unwrap_or(&t);
        if t.is_empty() {
            return Err(format!(
                "{text:?} is empty; write a name like \"steamcontent.com\""
            ));
        }
        if let Some(rest) = t.strip_prefix("*.") {
            check_name(text, rest)?;
            return Ok(DomainPattern::Below(rest.to_owned()));
        }
        if let Some(rest) = t.strip_prefix('*') {
            if rest.contains('*') {
                return Err(star_error(text));
            }
            // The text after `*` may start mid-label ("*steam.com"), so check it as a name with
            // a placeholder first label.
            check_name(text, &format!("x{rest}"))?;
            return Ok(DomainPattern::Suffix(rest.to_owned()));
        }
        check_name(text, t)?;
        Ok(DomainPattern::Domain(t.to_owned()))
    }
}

fn star_error(text: &str) -> String {
    format!(
        "{text:?}: '*' may only start a pattern (\"*.example.com\" or \"*example.com\"); dnsmasq, which \
         fills the address sets, matches names by their ending"
    )
}

/// A name of at least two labels, each 1..=63 letters, digits, `-` or `_`, not starting or
/// ending with `-`. One label ("com") would class a whole top-level domain as background.
fn check_name(text: &str, name: &str) -> Result<(), String> {
    if name.contains('*') {
        return Err(star_error(text));
    }
    if name.len() > MAX_NAME {
        return Err(format!("{text:?} is longer than {MAX_NAME} characters"));
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Err(format!(
                "{text:?} has an empty label (two dots, or a dot at the start)"
            ));
        }
        if label.len() > 63 {
            return Err(format!("{text:?}: label {label:?} is longer than 63 characters"));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!(
                "{text:?}: {c:?} is not allowed in a DNS name (letters, digits, '-', '_', '.' and a leading '*')"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("{text:?}: label {label:?} starts or ends with '-'"));
        }
    }
    if labels.len() < 2 {
        return Err(format!(
            "{text:?} is a single label; it would match a whole top-level domain (write e.g. \"example.com\")"
        ));
    }
    Ok(())
}

impl DomainPattern {
    /// The pattern as dnsmasq's `ipset=/.../` and `nftset=/.../` take it.
    pub fn dnsmasq(&self) -> String {
        self.to_string()
    }

    /// Whether `name` matches, as dnsmasq decides it (for tests and `slipstream presets`).
    pub fn matches(&self, name: &str) -> bool {
        let n = name.trim().trim_end_matches('.').to_ascii_lowercase();
        match self {
            DomainPattern::Domain(d) => n == *d || n.ends_with(&format!(".{d}")),
            DomainPattern::Below(d) => n.ends_with(&format!(".{d}")),
            DomainPattern::Suffix(s) => n.ends_with(s.as_str()),
        }
    }
}

impl fmt::Display for DomainPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DomainPattern::Domain(d) => f.write_str(d),
            DomainPattern::Below(d) => write!(f, "*.{d}"),
            DomainPattern::Suffix(s) => write!(f, "*{s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> DomainPattern {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_three_forms() {
        assert_eq!(
            p("SteamContent.com."),
            DomainPattern::Domain("steamcontent.com".into())
        );
        assert_eq!(
            p("*.steamcontent.com"),
            DomainPattern::Below("steamcontent.com".into())
        );
        assert_eq!(p("*steam.com"), DomainPattern::Suffix("steam.com".into()));
        assert_eq!(p("*-dl.example.com").to_string(), "*-dl.example.com");
        assert_eq!(p("_tcp.example.com").dnsmasq(), "_tcp.example.com");
    }

    #[test]
    fn matching_follows_dnsmasq() {
        let d = p("google.com");
        assert!(d.matches("google.com") && d.matches("www.google.com") && d.matches("WWW.Google.com."));
        assert!(!d.matches("supergoogle.com"));
        let b = p("*.google.com");
        assert!(b.matches("www.google.com") && !b.matches("google.com"));
        let s = p("*google.com");
        assert!(s.matches("google.com") && s.matches("www.google.com") && s.matches("supergoogle.com"));
    }

    #[test]
    fn bad_patterns_say_why() {
        for (bad, why) in [
            ("", "empty"),
            ("a..b.com", "empty label"),
            (".example.com", "empty label"),
            ("com", "single label"),
            ("*.com", "single label"),
            ("dl.*.example.com", "may only start"),
            ("cdn*.example.com", "may only start"),
            ("**.example.com", "may only start"),
            ("*.*.example.com", "may only start"),
            ("exa mple.com", "not allowed"),
            ("example.com/x", "not allowed"),
            ("steam#1.com", "not allowed"),
            ("-bad.example.com", "starts or ends"),
        ] {
            let e = bad.parse::<DomainPattern>().expect_err(bad);
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        let long = format!("{}.com", "a".repeat(64));
        assert!(long
            .parse::<DomainPattern>()
            .unwrap_err()
            .contains("longer than 63"));
    }
}
