//! DHCP lease files to (host name, address) pairs, for `lan_hostnames`.
//!
//! Two formats, both what OpenWrt writes:
//!
//! * dnsmasq's lease file (`/tmp/dhcp.leases`, `dhcp-leasefile`): one lease per line,
//!   `<expiry> <mac> <ipv4> <hostname> <client-id>` for DHCPv4 and, after a `duid <server duid>`
//!   line, `<expiry> <iaid> <ipv6> <hostname> <client-duid>` for DHCPv6; `*` for no host name.
//! * odhcpd's lease file (`/tmp/hosts/odhcpd`, uci `dhcp.odhcpd.leasefile`): one comment line
//!   per lease, `# <interface> <duid> <iaid> <hostname> <valid-until> <id> <prefix-len>
//!   <addr>/<len> ...` (`-` for no host name; a host name odhcpd found invalid is written as
//!   `broken\x20<name>` and skipped here), and for its DHCPv4 leases `# <interface> <hwaddr> ipv4
//!   <hostname> <valid-until> <hexaddr> 32 <addr>/32` (odhcpd's `statefiles_write_state6` /
//!   `_state4`), followed by hosts-file lines for dnsmasq, which are skipped here.
//!
//! Lines that fit neither are skipped: a half-written file must never take a host's address
//! away from the rules for longer than one poll, and never put a wrong one in.

use std::collections::BTreeSet;
use std::net::IpAddr;

/// One address a DHCP server handed to a named host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lease {
    /// Lower case, as compared with `lan_hostnames`.
    pub hostname: String,
    /// The address leased to it (IPv4, or IPv6 from DHCPv6).
    pub addr: IpAddr,
}

/// Every named lease in a lease file of either format (they can be told apart line by line).
pub fn parse(text: &str) -> Vec<Lease> {
    text.lines().filter_map(parse_line).flatten().collect()
}

fn parse_line(line: &str) -> Option<Vec<Lease>> {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix('#') {
        // odhcpd: # iface duid iaid hostname valid id len addr/len...
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() < 8 {
            return None;
        }
        let hostname = named(f[3])?;
        let addrs: Vec<Lease> = f[7..]
            .iter()
            .filter_map(|a| a.split('/').next()?.parse::<IpAddr>().ok())
            .map(|addr| Lease {
                hostname: hostname.clone(),
                addr,
            })
            .collect();
        return Some(addrs);
    }
    // dnsmasq: expiry mac-or-iaid address hostname client-id
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 4 || f[0] == "duid" || f[0].parse::<u64>().is_err() {
        return None;
    }
    let addr = f[2].parse::<IpAddr>().ok()?;
    let hostname = named(f[3])?;
    Some(vec![Lease { hostname, addr }])
}

/// A host name field, or `None` for dnsmasq's `*` / odhcpd's `-` and anything that is not a
/// plausible name.
fn named(field: &str) -> Option<String> {
    if field == "*" || field == "-" || field.is_empty() {
        return None;
    }
    let name = field.to_ascii_lowercase();
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        .then_some(name)
}

/// The addresses currently leased to any of `hostnames` (compared in lower case; a lease's name
/// also matches without its domain, `xbox.lan` for `xbox`).
pub fn addresses_of(leases: &[Lease], hostnames: &[String]) -> BTreeSet<IpAddr> {
    leases
        .iter()
        .filter(|l| {
            let short = l.hostname.split('.').next().unwrap_or(&l.hostname);
            hostnames
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&l.hostname) || h.eq_ignore_ascii_case(short))
        })
        .map(|l| l.addr)
        .collect()
}

/// A valid `lan_hostnames` entry: a DHCP host name (letters, digits, `-`, `_`; 1..=63).
pub fn check_hostname(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 63 {
        return Err(format!("{name:?}: host names are 1 to 63 characters"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "{name:?}: a DHCP host name uses letters, digits, '-' and '_' (the name a device gives in its lease)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DNSMASQ: &str = "\
1732540000 aa:bb:cc:dd:ee:01 192.168.1.20 steam-deck 01:aa:bb:cc:dd:ee:01
1732540000 aa:bb:cc:dd:ee:02 192.168.1.21 * *
0 aa:bb:cc:dd:ee:03 192.168.1.22 Xbox *
duid 00:01:00:01:2c:5e:aa:bb:aa:bb:cc:dd:ee:ff
1732540000 1234 fd00::20 steam-deck 00:01:00:01:aa
garbage line
1732540000 aa:bb:cc:dd:ee:04 not-an-ip tv *
";

    const ODHCPD: &str = "\
# br-lan 000100012c5eaabb 5d4c1b2a steam-deck 1732540000 1a 128 fd00::1a/128 2001:db8::1a/128
fd00::1a steam-deck.lan steam-deck
# br-lan 00010001ffff 1 - 1732540000 1b 128 fd00::1b/128
# br-lan 0200000000aa ipv4 tv 1732540000 a4d0116 32 10.77.1.22/32
# br-lan 0200000000ab ipv4 broken\\x20bad 1732540000 a4d0117 32 10.77.1.23/32
# short line
";

    #[test]
    fn dnsmasq_leases() {
        let l = parse(DNSMASQ);
        let got: Vec<(String, String)> = l
            .iter()
            .map(|l| (l.hostname.clone(), l.addr.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                ("steam-deck".into(), "192.168.1.20".into()),
                ("xbox".into(), "192.168.1.22".into()),
                ("steam-deck".into(), "fd00::20".into()),
            ]
        );
    }

    #[test]
    fn odhcpd_leases() {
        let l = parse(ODHCPD);
        let got: Vec<String> = l.iter().map(|l| format!("{} {}", l.hostname, l.addr)).collect();
        assert_eq!(
            got,
            ["steam-deck fd00::1a", "steam-deck 2001:db8::1a", "tv 10.77.1.22"]
        );
    }

    #[test]
    fn addresses_of_named_hosts() {
        let mut l = parse(DNSMASQ);
        l.extend(parse(ODHCPD));
        l.push(Lease {
            hostname: "xbox.lan".into(),
            addr: "192.168.1.99".parse().unwrap(),
        });
        let a: Vec<String> = addresses_of(&l, &["XBOX".into()])
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(a, ["192.168.1.22", "192.168.1.99"]);
        let a = addresses_of(&l, &["steam-deck".into()]);
        assert_eq!(a.len(), 4);
        assert!(
            addresses_of(&l, &["bad".into()]).is_empty(),
            "odhcpd's broken names are skipped"
        );
        let tv: Vec<String> = addresses_of(&l, &["tv".into()])
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(
            tv,
            ["10.77.1.22"],
            "odhcpd's DHCPv4 lease; dnsmasq's line without an address skipped"
        );
    }

    #[test]
    fn hostname_check() {
        assert!(check_hostname("steam-deck").is_ok());
        assert!(check_hostname("").is_err());
        assert!(check_hostname("a b").is_err());
        assert!(check_hostname("xbox.lan").is_err());
    }
}
