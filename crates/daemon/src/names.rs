//! Rules by name at the daemon's edge: the dnsmasq snippet that fills the remote address sets,
//! and the DHCP lease files whose addresses fill the host sets (`lan_hostnames`). The parsing
//! and the texts are pure (`slipstream_names`); this module reads and writes the files.
//!
//! The daemon does not read DNS answers itself: dnsmasq is OpenWrt's resolver and already
//! fills kernel sets (`ipset=`, `nftset=`) from the answers it gives, with no packet copied to
//! userspace and no DNS parser exposed to the LAN in a root daemon. Clients that bypass
//! dnsmasq (DNS over HTTPS or TLS, a hard-coded resolver) are not classed by name; the
//! configuration guide says so.

use slipstream_config::{Config, Rule};
use slipstream_firewall::{Backend, CommandRunner, HostAddrs, KernelSet, NFT_TABLE};
use slipstream_inspect::NameSetStatus;
use slipstream_names::leases::{self, Lease};
use slipstream_names::sets::{dnsmasq_conf, DnsmasqSets, RuleDomains};
use slipstream_names::uci::{dhcp_ipset_sections, dnsmasq_features, uci_batch};
use std::io;
use std::path::{Path, PathBuf};

fn domain_rules(config: &Config) -> Vec<RuleDomains<'_>> {
    config
        .rules
        .iter()
        .filter(|r| !r.domains.is_empty())
        .map(|r| RuleDomains {
            rule: &r.name,
            domains: &r.domains,
        })
        .collect()
}

/// The `uci batch` commands that create the `dhcp` ipset sections of the rules by domain
/// (`--dnsmasq-uci`; empty if no rule has domains). OpenWrt's init script applies them.
pub(crate) fn dnsmasq_uci_batch(config: &Config) -> String {
    uci_batch(&dhcp_ipset_sections(
        &domain_rules(config),
        NFT_TABLE,
        config.datapath.ipv6,
    ))
}

/// Why the dnsmasq on this host cannot fill the sets of the rules by domain, if it cannot
/// (built without the directive the firewall `backend` needs, as OpenWrt's plain `dnsmasq`,
/// or not found); `None` when it can or no rule has domains.
pub(crate) fn dnsmasq_cannot_fill_sets(config: &Config, backend: Backend) -> Option<String> {
    if !config.rules.iter().any(|r| !r.domains.is_empty()) {
        return None;
    }
    let out = std::process::Command::new("dnsmasq").arg("--version").output();
    let text = match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(e) => return Some(format!("no dnsmasq found ({e})")),
    };
    let features = dnsmasq_features(&text)?;
    let (ok, directive, package) = match backend {
        Backend::Nftables => (features.nftset, "nftset", "dnsmasq-full"),
        Backend::IptablesLegacy => (features.ipset, "ipset", "a dnsmasq-full built with ipset support"),
    };
    (!ok).then(|| format!("the installed dnsmasq was built without {directive} (install {package})"))
}

/// The dnsmasq snippet for `config` with the firewall `backend` (ipset for iptables, nftset
/// for nftables); `None` if no rule has domains.
pub(crate) fn dnsmasq_text(config: &Config, backend: Backend) -> Option<String> {
    let rules = domain_rules(config);
    if rules.is_empty() {
        return None;
    }
    let how = match backend {
        Backend::IptablesLegacy => DnsmasqSets::Ipset,
        Backend::Nftables => DnsmasqSets::Nftset { table: NFT_TABLE },
    };
    Some(dnsmasq_conf(&rules, how, config.datapath.ipv6))
}

/// Writes (or, with no rule by domain, removes) the snippet at `names.dnsmasq_conf`. Returns
/// whether the file changed: dnsmasq reads it only when it (re)starts.
pub(crate) fn write_dnsmasq_conf(config: &Config, backend: Backend) -> io::Result<bool> {
    let Some(path) = &config.names.dnsmasq_conf else {
        return Ok(false);
    };
    let old = std::fs::read_to_string(path).ok();
    match dnsmasq_text(config, backend) {
        None => match old {
            Some(_) => std::fs::remove_file(path).map(|()| true),
            None => Ok(false),
        },
        Some(text) if old.as_deref() == Some(text.as_str()) => Ok(false),
        Some(text) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // Whole or not at all: dnsmasq may start while this is written.
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, path).map(|()| true)
        }
    }
}

/// Removes the snippet this config wrote (clean shutdown: the sets it names are gone).
pub(crate) fn remove_dnsmasq_conf(config: &Config) {
    if !config.rules.iter().any(|r| !r.domains.is_empty()) {
        return;
    }
    if let Some(path) = &config.names.dnsmasq_conf {
        if path.exists() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// How a rule classes by name, for `slipstream flows` (`preset steam`, `host steam-deck`).
pub(crate) fn matched_by(rule: &Rule) -> String {
    let mut parts = Vec::new();
    if !rule.presets.is_empty() {
        parts.push(format!("preset {}", rule.presets.join("+")));
    } else if !rule.domains.is_empty() {
        let first: Vec<String> = rule.domains.iter().take(2).map(ToString::to_string).collect();
        let more = rule.domains.len().saturating_sub(2);
        let more = if more > 0 {
            format!(" +{more}")
        } else {
            String::new()
        };
        parts.push(format!("domains {}{more}", first.join(",")));
    }
    if !rule.lan_hostnames.is_empty() {
        parts.push(format!("host {}", rule.lan_hostnames.join(",")));
    }
    parts.join("; ")
}

/// The sets of rules by name with their entries now, for `slipstream status` (one `ipset list
/// -t` / `nft -j list set` per set: a status request is rare and the sets are few).
pub(crate) fn set_status(backend: Option<Backend>, sets: &[KernelSet]) -> Vec<NameSetStatus> {
    let Some(backend) = backend else {
        return Vec::new();
    };
    let counts = slipstream_firewall::set_entry_counts(&CommandRunner::host(), backend, sets);
    sets.iter()
        .zip(counts)
        .map(|(set, entries)| NameSetStatus {
            rule: set.rule.clone(),
            set: set.name.clone(),
            entries,
        })
        .collect()
}

/// The lease files, watched by a hash of their contents (polled: simple, and the files are tiny;
/// inotify would need a thread and gains nothing at a poll of seconds). Not by modification time
/// and size: a lease that moves to an address of the same length, rewritten within one tick of
/// a coarse file clock (kernels before 6.13's fine-grained timestamps, OpenWrt's 6.6 among
/// them), leaves both alone. Reading a few kB every `lease_poll` (5 s) costs nothing.
pub(crate) struct LeaseWatch {
    files: Vec<PathBuf>,
    stamps: Vec<Option<u64>>,
    first: bool,
}

impl LeaseWatch {
    pub(crate) fn new(files: &[PathBuf]) -> Self {
        LeaseWatch {
            files: files.to_vec(),
            stamps: vec![None; files.len()],
            first: true,
        }
    }

    fn stamp(path: &Path) -> Option<u64> {
        let bytes = std::fs::read(path).ok()?;
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hasher::write(&mut hasher, &bytes);
        Some(std::hash::Hasher::finish(&hasher))
    }

    /// Whether any file changed (appeared, went, was rewritten) since the last call; true the
    /// first time.
    pub(crate) fn changed(&mut self) -> bool {
        let now: Vec<_> = self.files.iter().map(|f| Self::stamp(f)).collect();
        let changed = self.first || now != self.stamps;
        self.first = false;
        self.stamps = now;
        changed
    }

    /// Every lease in the files (missing or unreadable files count as empty).
    pub(crate) fn read(&self) -> Vec<Lease> {
        self.files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .flat_map(|text| leases::parse(&text))
            .collect()
    }
}

/// The addresses each rule's `lan_hostnames` hold now.
pub(crate) fn host_addrs(config: &Config, leases: &[Lease]) -> HostAddrs {
    config
        .rules
        .iter()
        .filter(|r| !r.lan_hostnames.is_empty())
        .map(|r| (r.name.clone(), leases::addresses_of(leases, &r.lan_hostnames)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        slipstream_config::parse(text, "t.toml").unwrap()
    }

    #[test]
    fn snippet_per_backend_and_none_without_domains() {
        let c = config("[[rules]]\nname = \"dl\"\ndomains = [\"dl.example.com\"]\n");
        let ipset = dnsmasq_text(&c, Backend::IptablesLegacy).unwrap();
        assert!(
            ipset.contains("ipset=/dl.example.com/ss_dst_dl_4,ss_dst_dl_6\n"),
            "{ipset}"
        );
        let nft = dnsmasq_text(&c, Backend::Nftables).unwrap();
        assert!(nft.contains(
            "nftset=/dl.example.com/4#inet#slipstream#ss_dst_dl_4,6#inet#slipstream#ss_dst_dl_6\n"
        ));
        let none = config("[[rules]]\nname = \"bt\"\nremote_ports = [1]\n");
        assert_eq!(dnsmasq_text(&none, Backend::IptablesLegacy), None);
    }

    #[test]
    fn uci_batch_of_the_rules_by_domain() {
        let c = config("[[rules]]\nname = \"dl\"\ndomains = [\"dl.example.com\"]\n");
        let batch = dnsmasq_uci_batch(&c);
        assert!(
            batch.contains("add_list dhcp.slipstream_1.name='ss_dst_dl_4'\n"),
            "{batch}"
        );
        assert!(
            batch.contains("add_list dhcp.slipstream_1.name='ss_dst_dl_6'\n"),
            "{batch}"
        );
        assert!(
            batch.contains("add_list dhcp.slipstream_1.domain='dl.example.com'\n"),
            "{batch}"
        );
        let none = config("[[rules]]\nname = \"bt\"\nremote_ports = [1]\n");
        assert_eq!(dnsmasq_uci_batch(&none), "");
        assert_eq!(dnsmasq_cannot_fill_sets(&none, Backend::Nftables), None);
    }

    #[test]
    fn snippet_file_is_written_only_on_change_and_removed_when_unused() {
        let dir = std::env::temp_dir().join(format!("ss-names-{}", std::process::id()));
        let path = dir.join("dnsmasq.d/slipstream.conf");
        let with = |rules: &str| {
            config(&format!(
                "[names]\ndnsmasq_conf = \"{}\"\n{rules}",
                path.display()
            ))
        };
        let c = with("[[rules]]\nname = \"dl\"\npreset = \"steam\"\n");
        assert!(write_dnsmasq_conf(&c, Backend::IptablesLegacy).unwrap());
        assert!(!write_dnsmasq_conf(&c, Backend::IptablesLegacy).unwrap());
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("steamcontent.com"));
        let c2 = with("[[rules]]\nname = \"bt\"\nremote_ports = [1]\n");
        assert!(write_dnsmasq_conf(&c2, Backend::IptablesLegacy).unwrap());
        assert!(!path.exists());
        assert!(!write_dnsmasq_conf(&c2, Backend::IptablesLegacy).unwrap());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn leases_to_host_sets_and_descriptions() {
        let dir = std::env::temp_dir().join(format!("ss-leases-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("dhcp.leases");
        let c = config(
            "[[rules]]\nname = \"deck\"\nlan_hostnames = [\"steam-deck\"]\n\
             [[rules]]\nname = \"games\"\npreset = [\"steam\", \"epic\"]\n\
             [[rules]]\nname = \"dl\"\ndomains = [\"a.example.com\", \"b.example.com\", \"c.example.com\"]\n",
        );
        let mut watch = LeaseWatch::new(std::slice::from_ref(&file));
        assert!(watch.changed(), "first call");
        assert!(host_addrs(&c, &watch.read())["deck"].is_empty());
        assert!(!watch.changed());
        std::fs::write(&file, "0 aa:bb:cc:dd:ee:01 192.168.1.20 steam-deck *\n").unwrap();
        assert!(watch.changed());
        let h = host_addrs(&c, &watch.read());
        assert_eq!(h.len(), 1);
        assert_eq!(
            h["deck"].iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["192.168.1.20"]
        );
        // The lease moves to another address of the same length, at once (same size; with a
        // coarse file clock also the same modification time): the change is seen all the same.
        std::fs::write(&file, "0 aa:bb:cc:dd:ee:01 192.168.1.21 steam-deck *\n").unwrap();
        assert!(watch.changed(), "a lease that changed address");
        assert_eq!(
            host_addrs(&c, &watch.read())["deck"]
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["192.168.1.21"]
        );
        assert!(!watch.changed());
        std::fs::remove_file(&file).unwrap();
        assert!(watch.changed(), "the file went");
        assert!(host_addrs(&c, &watch.read())["deck"].is_empty());
        assert_eq!(matched_by(&c.rules[0]), "host steam-deck");
        assert_eq!(matched_by(&c.rules[1]), "preset steam+epic");
        assert_eq!(matched_by(&c.rules[2]), "domains a.example.com,b.example.com +1");
        let _ = std::fs::remove_dir_all(dir);
    }
}
