//! Figures the engine cannot see, read from the kernel at scrape time: NFQUEUE queue statistics
//! (`/proc/net/netfilter/nfnetlink_queue`, and the listening socket's drops in
//! `/proc/net/netlink`) and the byte counters of the LAN interfaces (`/proc/net/dev`).
//!
//! Why: the engine sees only the packets of background flows, so it can tell neither how many
//! packets the kernel dropped before they reached the daemon nor how much traffic the LAN got in
//! all. Both files are per network namespace and are read by the serving process, so they always
//! describe the daemon's own namespace (unlike `/sys/class/net`, which shows the namespace of
//! whoever mounted sysfs). Reading happens in the scrape, never on the packet thread.
//!
//! The parsers are pure functions over the file text (unit-tested); [`HostStats`] bundles two
//! providers (closures), so tests and other callers can feed figures without touching `/proc`.

use std::fmt;
use std::sync::Arc;

/// Where the kernel lists the NFQUEUE instances of the reader's network namespace.
pub const NFNETLINK_QUEUE_PATH: &str = "/proc/net/netfilter/nfnetlink_queue";
/// Where the kernel lists the interface counters of the reader's network namespace.
pub const NET_DEV_PATH: &str = "/proc/net/dev";
/// Where the kernel lists the netlink sockets of the reader's network namespace.
pub const NETLINK_PATH: &str = "/proc/net/netlink";

/// One line of `/proc/net/netfilter/nfnetlink_queue` (one bound NFQUEUE instance).
///
/// The kernel prints `queue_num peer_portid queue_total copy_mode copy_range queue_dropped
/// queue_user_dropped id_sequence 1` (see `seq_show` in `net/netfilter/nfnetlink_queue.c`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// The queue number (`--queue-num`).
    pub queue: u16,
    /// Netlink port id of the listener.
    pub peer_portid: u32,
    /// Packets waiting in the queue for a verdict right now.
    pub waiting: u32,
    /// Packets dropped because the queue was full (`queue_dropped`; a queue configured to fail
    /// open lets them pass instead and does not count them).
    pub dropped_queue_full: u32,
    /// Packets dropped because the netlink socket could not take them (`queue_user_dropped`:
    /// the listener's receive buffer was full).
    pub dropped_socket_full: u32,
    /// Id of the last packet queued (`id_sequence`): the packets queued since the queue was bound,
    /// modulo 2^32.
    pub id_sequence: u32,
    /// Messages the listening socket had no room for (`Drops` of its row in `/proc/net/netlink`),
    /// counted per socket, so the same for queues sharing one. A fail-open queue lets each such
    /// packet pass unseen and counts it nowhere else.
    pub socket_overruns: u64,
}

/// Parses `/proc/net/netfilter/nfnetlink_queue`. Lines that do not parse are skipped.
pub fn parse_nfnetlink_queue(text: &str) -> Vec<QueueStats> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            Some(QueueStats {
                queue: f[0].parse().ok()?,
                peer_portid: f[1].parse().ok()?,
                waiting: f[2].parse().ok()?,
                dropped_queue_full: f[5].parse().ok()?,
                dropped_socket_full: f[6].parse().ok()?,
                id_sequence: f[7].parse().ok()?,
                socket_overruns: 0,
            })
        })
        .collect()
}

/// The `Drops` of the netlink socket with port id `portid` in `/proc/net/netlink` text
/// (`sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode`, see `netlink_seq_show`).
pub fn parse_netlink_drops(text: &str, portid: u32) -> Option<u64> {
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 9 || f[2].parse::<u32>().ok()? != portid {
            return None;
        }
        f[8].parse().ok()
    })
}

/// The NFQUEUE instances of this process's network namespace whose number is in `queues` (all of
/// them if `queues` is empty), with their socket's overruns. Empty if the file cannot be read
/// (module not loaded).
pub fn read_queue_stats(queues: &[u16]) -> Vec<QueueStats> {
    let text = std::fs::read_to_string(NFNETLINK_QUEUE_PATH).unwrap_or_default();
    let mut stats = parse_nfnetlink_queue(&text);
    if !queues.is_empty() {
        stats.retain(|s| queues.contains(&s.queue));
    }
    if !stats.is_empty() {
        let sockets = std::fs::read_to_string(NETLINK_PATH).unwrap_or_default();
        for s in &mut stats {
            s.socket_overruns = parse_netlink_drops(&sockets, s.peer_portid).unwrap_or(0);
        }
    }
    stats
}

/// Byte counters of one network interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterfaceBytes {
    /// The interface's name (the metric label).
    pub interface: String,
    /// Bytes received on the interface (from the LAN, for a LAN interface).
    pub receive_bytes: u64,
    /// Bytes transmitted on the interface (delivered to the LAN, for a LAN interface).
    pub transmit_bytes: u64,
}

/// Parses `/proc/net/dev`: `name: rx_bytes rx_packets ... (8 receive fields) tx_bytes ...`.
/// The two header lines and anything else that does not parse are skipped.
pub fn parse_net_dev(text: &str) -> Vec<InterfaceBytes> {
    text.lines()
        .filter_map(|line| {
            let (name, counters) = line.split_once(':')?;
            let f: Vec<&str> = counters.split_whitespace().collect();
            if f.len() < 9 {
                return None;
            }
            Some(InterfaceBytes {
                interface: name.trim().to_owned(),
                receive_bytes: f[0].parse().ok()?,
                transmit_bytes: f[8].parse().ok()?,
            })
        })
        .collect()
}

/// Whether interface `name` matches a config pattern: the exact name, or with a trailing `+` any
/// name starting with what precedes it (`"wlan+"`, as in iptables and the daemon's
/// `lan_interfaces`).
pub fn interface_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('+') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// The byte counters of this process's network namespace's interfaces that match any of
/// `patterns` (see [`interface_matches`]). Empty if `/proc/net/dev` cannot be read.
pub fn read_interface_bytes(patterns: &[String]) -> Vec<InterfaceBytes> {
    let text = std::fs::read_to_string(NET_DEV_PATH).unwrap_or_default();
    let mut stats = parse_net_dev(&text);
    stats.retain(|s| patterns.iter().any(|p| interface_matches(p, &s.interface)));
    stats
}

type Provider<T> = Arc<dyn Fn() -> Vec<T> + Send + Sync>;

/// Host-side figures for the metrics endpoint: a provider of NFQUEUE statistics and one of
/// interface byte counters, both called on every scrape. Register them with
/// [`register_host_stats`](crate::register_host_stats).
#[derive(Clone)]
pub struct HostStats {
    pub(crate) queues: Provider<QueueStats>,
    pub(crate) interfaces: Provider<InterfaceBytes>,
}

impl HostStats {
    /// Reads the kernel's figures of the daemon's own namespace: the NFQUEUE `queues` (the
    /// config's `ack_queue` and `data_queue`) and the interfaces matching `lan_interfaces` (the
    /// config's list, `+` wildcards included).
    pub fn system(queues: impl IntoIterator<Item = u16>, lan_interfaces: &[String]) -> HostStats {
        let queues: Vec<u16> = queues.into_iter().collect();
        let patterns = lan_interfaces.to_vec();
        HostStats::from_providers(
            move || read_queue_stats(&queues),
            move || read_interface_bytes(&patterns),
        )
    }

    /// Figures from the given providers (tests, or other sources).
    pub fn from_providers(
        queues: impl Fn() -> Vec<QueueStats> + Send + Sync + 'static,
        interfaces: impl Fn() -> Vec<InterfaceBytes> + Send + Sync + 'static,
    ) -> HostStats {
        HostStats {
            queues: Arc::new(queues),
            interfaces: Arc::new(interfaces),
        }
    }
}

impl fmt::Debug for HostStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostStats").finish_non_exhaustive()
    }
}
