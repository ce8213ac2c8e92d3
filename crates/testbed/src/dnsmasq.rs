//! Real dnsmasq in the testbed, for rules by name: a resolver in one namespace, the LAN host's
//! `/etc/resolv.conf` pointing at it, and name lookups through the host's own C library
//! (`getent`), so a LAN host resolves exactly as a real one does.
//!
//! dnsmasq fills kernel sets only from answers it got from an upstream server (not from its own
//! `host-record` / `address` entries), so a test runs two: an "upstream" authoritative for the
//! test names, and the router's, which forwards to it and fills Slipstream's sets.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::{Ns, Testbed};

/// Why dnsmasq tests cannot run here, if they cannot (`apt-get install dnsmasq-base ipset`).
pub fn dnsmasq_missing() -> Option<String> {
    for tool in ["dnsmasq", "ipset", "getent"] {
        let found = std::process::Command::new(tool).arg("--version").output().is_ok();
        if !found {
            return Some(format!("{tool} not found (apt-get install dnsmasq-base ipset)"));
        }
    }
    None
}

/// Starts dnsmasq in `ns` (owned by the testbed: stopped at teardown) with `args` after the
/// common ones (foreground, no /etc/hosts or resolv.conf, bound to its listen addresses, every
/// query logged to `log`). Waits until it has started. Returns its pid.
pub fn start(tb: &Testbed, ns: Ns, label: &str, args: &[String], log: &Path) -> Result<u32> {
    let _ = std::fs::remove_file(log);
    let mut all = vec![
        "dnsmasq".to_owned(),
        "--keep-in-foreground".into(),
        "--no-resolv".into(),
        "--no-hosts".into(),
        "--bind-interfaces".into(),
        "--user=root".into(),
        "--pid-file=".into(),
        "--log-queries".into(),
        format!("--log-facility={}", log.display()),
    ];
    all.extend(args.iter().cloned());
    let pid = tb.spawn_owned(ns, label, &all)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains("started, version") {
            return Ok(pid);
        }
        if text.contains("FAILED") || Instant::now() > deadline {
            bail!("dnsmasq ({label}) did not start:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `/etc/netns/<ns>/resolv.conf` (which `ip netns exec` mounts over `/etc/resolv.conf`),
/// removed on drop.
pub struct ResolvConf {
    dir: PathBuf,
}

impl ResolvConf {
    /// Makes `nameserver` the resolver of `ns`.
    pub fn set(tb: &Testbed, ns: Ns, nameserver: IpAddr) -> Result<ResolvConf> {
        let dir = Path::new("/etc/netns").join(tb.ns_name(ns));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(
            dir.join("resolv.conf"),
            format!("nameserver {nameserver}\noptions timeout:2 attempts:2\n"),
        )?;
        Ok(ResolvConf { dir })
    }
}

impl Drop for ResolvConf {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Resolves `name` in `ns` through its C library (`getent ahostsv4` / `ahostsv6`).
pub fn resolve(tb: &Testbed, ns: Ns, name: &str, v6: bool) -> Result<Vec<IpAddr>> {
    let db = if v6 { "ahostsv6" } else { "ahostsv4" };
    let out = tb
        .run_in(ns, &["getent", db, name])
        .with_context(|| format!("resolving {name} in {ns:?}"))?;
    let mut addrs: Vec<IpAddr> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    addrs.dedup();
    Ok(addrs)
}
