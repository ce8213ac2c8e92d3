//! Which side of the router a queued packet came from (`PacketMeta::from_lan`).
//!
//! The engine needs to know which endpoint of a flow is the household's host (it decides
//! whether the flow loads the uplink or the downlink). NFQUEUE tells the packet's input
//! interface as an ifindex; this compares its name with the configured `lan_interfaces`, where
//! a trailing `+` matches any name with that prefix, as in iptables (`lan+`). Names are looked
//! up with `if_indextoname` once per ifindex and cached: a router has a handful of interfaces.
//! The cache is dropped every [`CACHE_LIFETIME`] and when full, so an interface that went
//! away and whose ifindex was reused is looked up again.
//!
//! By hook:
//! * `forward`: every packet has an input interface; LAN if it is one of `lan_interfaces`.
//! * `local` (an end host): a packet without an input interface was sent by this host, the
//!   household's host itself: from the LAN; one with an input interface came from the peer.
//! * `both`: as `forward` for packets with an input interface; the router's own packets say
//!   nothing (its flows may go to the WAN or to a LAN host).
#![allow(
    unsafe_code,
    reason = "if_indextoname(3) turns the kernel's interface index into a name"
)]

use std::ffi::CStr;
use std::time::{Duration, Instant};

use slipstream_config::Hook;

/// How long a resolved interface name is trusted.
pub(crate) const CACHE_LIFETIME: Duration = Duration::from_secs(10);
/// Most cached interfaces; a lookup that would exceed it drops the cache first.
const CACHE_MAX: usize = 64;

/// The LAN-side classifier of the packet thread.
pub(crate) struct LanSide {
    hook: Hook,
    lan_interfaces: Vec<String>,
    /// (ifindex, is LAN).
    cache: Vec<(u32, bool)>,
    cached_since: Instant,
    resolve: fn(u32) -> Option<String>,
}

impl LanSide {
    pub(crate) fn new(hook: Hook, lan_interfaces: Vec<String>) -> LanSide {
        LanSide::with_resolver(hook, lan_interfaces, interface_name)
    }

    /// With another way to name interfaces (tests).
    pub(crate) fn with_resolver(
        hook: Hook,
        lan_interfaces: Vec<String>,
        resolve: fn(u32) -> Option<String>,
    ) -> LanSide {
        LanSide {
            hook,
            lan_interfaces,
            cache: Vec::new(),
            cached_since: Instant::now(),
            resolve,
        }
    }

    /// A reload: new hook and interfaces.
    pub(crate) fn reconfigure(&mut self, hook: Hook, lan_interfaces: Vec<String>) {
        self.hook = hook;
        self.lan_interfaces = lan_interfaces;
        self.cache.clear();
    }

    /// Forgets resolved names older than [`CACHE_LIFETIME`]; call now and then (ticks).
    pub(crate) fn expire(&mut self, now: Instant) {
        if now.saturating_duration_since(self.cached_since) >= CACHE_LIFETIME {
            self.cache.clear();
            self.cached_since = now;
        }
    }

    /// Whether a packet that entered on `indev` (0: none, locally generated) came from the LAN;
    /// `None` when that cannot be told.
    pub(crate) fn classify(&mut self, indev: u32) -> Option<bool> {
        match (self.hook, indev) {
            (Hook::Local, 0) => Some(true),
            (Hook::Local, _) => Some(false),
            (Hook::Forward | Hook::Both, 0) => None,
            (Hook::Forward | Hook::Both, _) => self.is_lan(indev),
        }
    }

    fn is_lan(&mut self, ifindex: u32) -> Option<bool> {
        if let Some(&(_, lan)) = self.cache.iter().find(|(i, _)| *i == ifindex) {
            return Some(lan);
        }
        // An interface that is gone by now: cannot tell, and nothing to cache.
        let name = (self.resolve)(ifindex)?;
        let lan = self.lan_interfaces.iter().any(|p| interface_matches(p, &name));
        if self.cache.len() >= CACHE_MAX {
            self.cache.clear();
        }
        self.cache.push((ifindex, lan));
        Some(lan)
    }
}

/// iptables' interface match: `pattern` equals `name`, or ends in `+` and prefixes it.
pub(crate) fn interface_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('+') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// The present interfaces the patterns name (`/sys/class/net`), sorted; for attaching the tc
/// programs (the eBPF datapath looks again every second for interfaces that appear later).
pub(crate) fn devices(patterns: &[String]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| patterns.iter().any(|p| interface_matches(p, name)))
        .collect();
    names.sort();
    names
}

/// The name of interface `ifindex` in the calling thread's network namespace.
pub(crate) fn interface_name(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: if_indextoname writes at most IF_NAMESIZE bytes (NUL included) into `buf`.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success `buf` holds a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

/// The index of interface `name` in the calling thread's network namespace (0: none).
pub(crate) fn interface_index(name: &str) -> u32 {
    let Ok(name) = std::ffi::CString::new(name) else {
        return 0;
    };
    // SAFETY: a NUL-terminated string that lives through the call.
    unsafe { libc::if_nametoindex(name.as_ptr()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn names(ifindex: u32) -> Option<String> {
        match ifindex {
            1 => Some("lo".into()),
            2 => Some("eth0".into()),
            3 => Some("br-lan".into()),
            4 => Some("lan1".into()),
            5 => Some("pppoe-wan".into()),
            _ => None,
        }
    }

    #[test]
    fn plus_is_a_prefix_wildcard() {
        assert!(interface_matches("br-lan", "br-lan"));
        assert!(!interface_matches("br-lan", "br-lan2"));
        assert!(interface_matches("lan+", "lan1"));
        assert!(interface_matches("lan+", "lan"));
        assert!(!interface_matches("lan+", "wlan0"));
        assert!(interface_matches("+", "anything"));
    }

    #[test]
    fn forward_compares_the_input_interface() {
        let mut side = LanSide::with_resolver(Hook::Forward, vec!["br-lan".into(), "lan+".into()], names);
        assert_eq!(side.classify(3), Some(true));
        assert_eq!(side.classify(4), Some(true));
        assert_eq!(side.classify(5), Some(false));
        assert_eq!(side.classify(2), Some(false));
        assert_eq!(side.classify(0), None, "no input interface");
        assert_eq!(side.classify(99), None, "an interface that is gone");
    }

    #[test]
    fn local_and_both() {
        let mut local = LanSide::with_resolver(Hook::Local, vec![], names);
        assert_eq!(local.classify(0), Some(true), "sent by this host");
        assert_eq!(local.classify(2), Some(false), "received from the peer");
        let mut both = LanSide::with_resolver(Hook::Both, vec!["br-lan".into()], names);
        assert_eq!(both.classify(0), None, "the router's own packet");
        assert_eq!(both.classify(3), Some(true));
        assert_eq!(both.classify(5), Some(false));
    }

    static LOOKUPS: AtomicU32 = AtomicU32::new(0);
    fn counted(ifindex: u32) -> Option<String> {
        LOOKUPS.fetch_add(1, Ordering::Relaxed);
        names(ifindex)
    }

    #[test]
    fn names_are_cached_bounded_and_expire() {
        let mut side = LanSide::with_resolver(Hook::Forward, vec!["br-lan".into()], counted);
        let start = side.cached_since;
        for _ in 0..100 {
            side.classify(3);
            side.classify(5);
        }
        assert_eq!(LOOKUPS.load(Ordering::Relaxed), 2, "one lookup per interface");
        side.expire(start + Duration::from_secs(1));
        side.classify(3);
        assert_eq!(LOOKUPS.load(Ordering::Relaxed), 2, "still cached");
        side.expire(start + CACHE_LIFETIME);
        side.classify(3);
        assert_eq!(
            LOOKUPS.load(Ordering::Relaxed),
            3,
            "looked up again after the lifetime"
        );
        // Unknown interfaces are not cached, so the cache never grows past its bound.
        for i in 1000..1200 {
            side.classify(i);
        }
        assert!(side.cache.len() <= CACHE_MAX);
        side.reconfigure(Hook::Forward, vec!["pppoe+".into()]);
        assert_eq!(side.classify(3), Some(false));
        assert_eq!(side.classify(5), Some(true), "a reload applies at once");
    }

    #[test]
    fn the_cache_bound_holds_with_many_interfaces() {
        fn any(ifindex: u32) -> Option<String> {
            Some(format!("veth{ifindex}"))
        }
        let mut side = LanSide::with_resolver(Hook::Forward, vec!["veth1+".into()], any);
        for i in 0..500 {
            assert_eq!(
                side.classify(i + 1),
                Some(format!("veth{}", i + 1).starts_with("veth1"))
            );
            assert!(side.cache.len() <= CACHE_MAX);
        }
    }

    #[test]
    fn real_loopback_name() {
        // ifindex 1 is `lo` in every network namespace.
        assert_eq!(interface_name(1).as_deref(), Some("lo"));
        assert_eq!(interface_name(0), None);
    }
}
