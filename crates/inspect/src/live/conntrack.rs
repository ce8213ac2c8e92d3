//! Best effort per LAN host, from the kernel's connection tracker: `/proc/net/nf_conntrack`
//! lists every connection through (or to) the router with its byte counters (with
//! `net.netfilter.nf_conntrack_acct = 1`, OpenWrt's default). The engine sees only background
//! flows, so this is the one place that knows what else a host is doing.
//!
//! A host's best effort is the change of the bytes of its connections between two reads, less
//! its background flows' connections (left out by their endpoints) and less traffic that stays
//! inside the LAN (both ends in a LAN prefix: LAN to LAN, or to the router's LAN address). LAN
//! prefixes are the routes on the LAN interfaces (`/proc/net/route`, `/proc/net/ipv6_route`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Connections followed at most between two reads (a router's table is far smaller; those
/// past it are not counted).
const MAX_ENTRIES: usize = 65_536;
/// Reads further apart than this give no rates (the page was closed meanwhile): the rate of a
/// long gap would not be "now".
const MAX_GAP_MS: u64 = 10_000;

/// One connection of `/proc/net/nf_conntrack`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConntrackEntry {
    /// Identifies the connection between reads (a hash of its original tuple).
    pub key: u64,
    /// The original direction's source and destination (ports 0 for protocols without).
    pub original: (SocketAddr, SocketAddr),
    /// The reply direction's source (the LAN host of a port-forwarded connection).
    pub reply_source: IpAddr,
    /// Bytes both ways; `None` without conntrack accounting.
    pub bytes: Option<u64>,
}

/// Parses `/proc/net/nf_conntrack` (`ipv4 2 tcp 6 117 ESTABLISHED src=.. dst=.. sport=..
/// dport=.. [packets=.. bytes=..] src=.. dst=.. sport=.. dport=.. [packets=.. bytes=..] ...`);
/// lines that do not parse are skipped.
pub fn parse_conntrack(text: &str) -> Vec<ConntrackEntry> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<ConntrackEntry> {
    let mut hasher = std::hash::DefaultHasher::new();
    let mut fields = line.split_whitespace();
    let family = fields.next()?;
    fields.next()?;
    let protocol = fields.next()?;
    (family, protocol).hash(&mut hasher);
    let (mut src, mut dst, mut sport, mut dport) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut bytes: Option<u64> = None;
    for field in fields {
        let Some((key, value)) = field.split_once('=') else {
            continue;
        };
        // The original tuple (up to the reply's `src=`; ICMP's type, code and id too) names
        // the connection.
        let original = src.is_empty() || src.len() == 1 && key != "src";
        if original && !matches!(key, "packets" | "bytes") {
            field.hash(&mut hasher);
        }
        match key {
            "src" => src.push(value.parse::<IpAddr>().ok()?),
            "dst" => dst.push(value.parse::<IpAddr>().ok()?),
            "sport" => sport.push(value.parse::<u16>().ok()?),
            "dport" => dport.push(value.parse::<u16>().ok()?),
            "bytes" => *bytes.get_or_insert(0) += value.parse::<u64>().ok()?,
            _ => {}
        }
    }
    let port = |p: &Vec<u16>| p.first().copied().unwrap_or(0);
    Some(ConntrackEntry {
        key: hasher.finish(),
        original: (
            SocketAddr::new(*src.first()?, port(&sport)),
            SocketAddr::new(*dst.first()?, port(&dport)),
        ),
        reply_source: *src.get(1)?,
        bytes,
    })
}

/// An address prefix (`192.168.1.0/24`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    /// The network address.
    pub address: IpAddr,
    /// Its length in bits.
    pub length: u8,
}

impl Prefix {
    /// Whether `ip` is in the prefix.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let bits = |a: IpAddr| match a {
            IpAddr::V4(a) => (u128::from(u32::from(a)) << 96, 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        };
        let ((net, width), (host, host_width)) = (bits(self.address), bits(ip));
        if width != host_width || self.length == 0 || u32::from(self.length) > width {
            return false;
        }
        let mask = u128::MAX << (128 - u32::from(self.length));
        net & mask == host & mask
    }
}

/// The prefixes routed straight (no gateway) to the interfaces matching `lan_interfaces`
/// (names, or a prefix and `+`), from `/proc/net/route` and `/proc/net/ipv6_route` text;
/// link-local and multicast routes left out.
pub fn lan_prefixes(route_v4: &str, route_v6: &str, lan_interfaces: &[String]) -> Vec<Prefix> {
    let lan = |name: &str| {
        lan_interfaces.iter().any(|p| match p.strip_suffix('+') {
            Some(prefix) => name.starts_with(prefix),
            None => name == p,
        })
    };
    let hex32 = |s: &str| u32::from_str_radix(s, 16).ok();
    let v4 = route_v4.lines().skip(1).filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || !lan(f[0]) || hex32(f[2])? != 0 {
            return None;
        }
        // The kernel prints the network-order words as host-order integers.
        let address = Ipv4Addr::from(hex32(f[1])?.to_ne_bytes());
        let length = hex32(f[7])?.count_ones() as u8;
        (length > 0).then_some(Prefix {
            address: IpAddr::V4(address),
            length,
        })
    });
    let v6 = route_v6.lines().filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 10 || !lan(f[9]) || f[4].bytes().any(|b| b != b'0') {
            return None;
        }
        let address = Ipv6Addr::from(u128::from_str_radix(f[0], 16).ok()?);
        let length = u8::from_str_radix(f[1], 16).ok()?;
        let s = address.segments()[0];
        let special = (s & 0xffc0) == 0xfe80 || (s & 0xff00) == 0xff00;
        (length > 0 && length <= 128 && !special).then_some(Prefix {
            address: IpAddr::V6(address),
            length,
        })
    });
    v4.chain(v6).collect()
}

/// Rates from successive reads of the conntrack table.
#[derive(Clone, Debug, Default)]
pub struct ConntrackRates {
    previous: HashMap<u64, u64>,
    read_at_ms: Option<u64>,
}

impl ConntrackRates {
    /// Each LAN host's best effort, bits per second, since the previous read: `None` for the
    /// first read, one after a gap of more than 10 s, or without accounting (no byte counters).
    /// `background` holds the endpoint pairs of the background flows (either order).
    pub fn update(
        &mut self,
        entries: &[ConntrackEntry],
        now_ms: u64,
        lan: &[Prefix],
        background: &HashSet<(SocketAddr, SocketAddr)>,
    ) -> Option<BTreeMap<IpAddr, f64>> {
        let is_lan = |ip: IpAddr| lan.iter().any(|p| p.contains(canonical(ip)));
        let previous_at = self.read_at_ms.replace(now_ms);
        let previous = std::mem::take(&mut self.previous);
        let mut bytes_by_host: BTreeMap<IpAddr, u64> = BTreeMap::new();
        for entry in entries {
            // Without accounting, no rates at all.
            let bytes = entry.bytes?;
            if self.previous.len() >= MAX_ENTRIES {
                break;
            }
            self.previous.insert(entry.key, bytes);
            let (a, b) = entry.original;
            if background.contains(&(a, b)) || background.contains(&(b, a)) {
                continue;
            }
            // The LAN host: the original source (it opened the connection), or the reply's
            // source (a port forward to it); the other end must be outside the LAN.
            let host = if is_lan(a.ip()) && !is_lan(b.ip()) {
                a.ip()
            } else if is_lan(entry.reply_source) && !is_lan(a.ip()) {
                entry.reply_source
            } else {
                continue;
            };
            // A connection not seen last time is new since then: all its bytes are.
            let delta = bytes.saturating_sub(previous.get(&entry.key).copied().unwrap_or(0));
            *bytes_by_host.entry(canonical(host)).or_default() += delta;
        }
        let elapsed = now_ms.checked_sub(previous_at?)?;
        if elapsed == 0 || elapsed > MAX_GAP_MS {
            return None;
        }
        Some(
            bytes_by_host
                .into_iter()
                .map(|(host, bytes)| (host, bytes as f64 * 8000.0 / elapsed as f64))
                .collect(),
        )
    }
}

/// IPv4-mapped IPv6 addresses as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}
