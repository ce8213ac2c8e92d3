//! Single values of the config and how they are written: rates, MAC addresses, port ranges,
//! DSCP names.

use std::fmt;
use std::str::FromStr;

/// Smallest and largest non-zero `min_rate`, bits per second.
const MIN_RATE_BITS: (f64, f64) = (1e3, 100e9);

/// A rate in bits per second with a unit, `"2mbit"`, `"500kbit"`, `"1.5gbit"`, `"64000bit"`
/// (SI multiples as tc reads them: k = 1000), or `"0"`, to bytes per second (rounded). tc's
/// `kbps`-style units (bytes per second there, bits elsewhere) are refused as ambiguous.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let bad = || format!("{text:?} is not a rate like \"2mbit\" or \"500kbit\" (bits per second)");
    let value: f64 = number.parse().map_err(|_| bad())?;
    let scale = match unit.trim() {
        "" if value == 0.0 => 1.0,
        "" => return Err(format!("{text:?} has no unit: write bits per second like \"2mbit\" or \"500kbit\"")),
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        u if u.ends_with("bps") || u.ends_with("b/s") || u.ends_with("bit/s") => {
            return Err(format!(
                "{text:?}: unit {u:?} is ambiguous (tc reads \"kbps\" as kilobytes per second); use bit, kbit, mbit or gbit"
            ))
        }
        _ => return Err(bad()),
    };
    let bits = value * scale;
    if bits != 0.0 && !(MIN_RATE_BITS.0..=MIN_RATE_BITS.1).contains(&bits) {
        return Err(format!("{text:?} must be 0 or 1kbit to 100gbit"));
    }
    Ok((bits / 8.0).round() as u64)
}

/// A 6-byte Ethernet (MAC) address. Parses `aa:bb:cc:dd:ee:ff` (also `-` separated, any case);
/// displays lowercase with colons, as iptables and nft print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for MacAddr {
    type Err = String;

    /// Six two-digit hex bytes separated by `:` (or `-`); group (multicast/broadcast) addresses are
    /// rejected, since no host sends from one.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a MAC address like \"aa:bb:cc:dd:ee:ff\"");
        let t = s.trim();
        let sep = if t.contains('-') { '-' } else { ':' };
        let parts: Vec<&str> = t.split(sep).collect();
        if parts.len() != 6 {
            return Err(bad());
        }
        let mut b = [0u8; 6];
        for (i, p) in parts.iter().enumerate() {
            if p.len() != 2 {
                return Err(bad());
            }
            b[i] = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if b[0] & 1 == 1 {
            return Err(format!(
                "{s:?} is a multicast or broadcast address; a LAN host sends from its own (unicast) address"
            ));
        }
        Ok(MacAddr(b))
    }
}

/// An inclusive port range; a single port has `first == last`. TOML: `443` or `"6881-6889"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    /// The lowest port in the range.
    pub first: u16,
    /// The highest port in the range (`first` for a single port).
    pub last: u16,
}

impl PortRange {
    /// The range of the one port `port`.
    pub fn single(port: u16) -> Self {
        PortRange {
            first: port,
            last: port,
        }
    }

    /// Whether `port` lies in the range (bounds included).
    pub fn contains(&self, port: u16) -> bool {
        self.first <= port && port <= self.last
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for PortRange {
    type Err = String;

    /// `"443"` or `"6881-6889"`; port 0 and reversed ranges are errors.
    fn from_str(s: &str) -> Result<Self, String> {
        let port = |p: &str| -> Result<u16, String> {
            let p = p.trim();
            match p.parse::<u32>() {
                Ok(0) => Err("port 0 is not a valid port".to_owned()),
                Ok(n) if n <= 65535 => Ok(n as u16),
                Ok(n) => Err(format!("port {n} is out of range (1..=65535)")),
                Err(_) => Err(format!("{s:?} is not a port or a port range like \"6881-6889\"")),
            }
        };
        let range = match s.split_once('-') {
            Some((a, b)) => PortRange {
                first: port(a)?,
                last: port(b)?,
            },
            None => PortRange::single(port(s)?),
        };
        if range.first > range.last {
            return Err(format!("port range {}-{} is reversed", range.first, range.last));
        }
        Ok(range)
    }
}

/// DSCP names accepted in the config (case-insensitive), with their values.
pub const DSCP_NAMES: &[(&str, u8)] = &[
    ("CS0", 0),
    ("DF", 0),
    ("LE", 1),
    ("CS1", 8),
    ("AF11", 10),
    ("AF12", 12),
    ("AF13", 14),
    ("CS2", 16),
    ("AF21", 18),
    ("AF22", 20),
    ("AF23", 22),
    ("CS3", 24),
    ("AF31", 26),
    ("AF32", 28),
    ("AF33", 30),
    ("CS4", 32),
    ("AF41", 34),
    ("AF42", 36),
    ("AF43", 38),
    ("CS5", 40),
    ("VOICE-ADMIT", 44),
    ("EF", 46),
    ("CS6", 48),
    ("CS7", 56),
];

/// A DSCP name ("LE", "cs1") or decimal number ("8") to its value.
pub fn parse_dscp(s: &str) -> Option<u8> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u8>() {
        return (n <= 63).then_some(n);
    }
    DSCP_NAMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(s))
        .map(|&(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dscp_names() {
        assert_eq!(parse_dscp("LE"), Some(1));
        assert_eq!(parse_dscp("cs1"), Some(8));
        assert_eq!(parse_dscp("EF"), Some(46));
        assert_eq!(parse_dscp("63"), Some(63));
        assert_eq!(parse_dscp("64"), None);
        assert_eq!(parse_dscp("XX"), None);
    }
}
