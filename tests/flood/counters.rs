//! What the flood test measures: kernel, daemon and conntrack counters, per phase.

use super::*;

/// Counters read at the start and end of a phase.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    /// SYNs the LAN host's flood rule counted.
    pub(crate) arrived: u64,
    /// Packets that hit the SLIPSTREAM chain's NFQUEUE rules (IPv4).
    pub(crate) hits: u64,
    /// `slipstream_packets_total`: packets the daemon handled.
    pub(crate) handled: f64,
    /// `slipstream_nfqueue_packets_total` of the ACK queue: packets the kernel numbered for the
    /// queue (a packet the daemon's socket had no room for is numbered, then accepted).
    pub(crate) queued: f64,
    /// Messages the router's netfilter netlink sockets (the daemon's) had no room for.
    pub(crate) overruns: u64,
    pub(crate) table_full: f64,
    pub(crate) created: f64,
    pub(crate) evicted: f64,
    pub(crate) cpu_s: f64,
    /// Drops on the flood's path: flood veth tx, router wan1 rx, router LAN port tx, LAN host rx,
    /// and the host's softnet backlog drops (global).
    pub(crate) path_drops: [u64; 5],
}

impl Counters {
    pub(crate) fn delta(&self, before: &Counters) -> Counters {
        let mut path_drops = [0; 5];
        for (i, d) in path_drops.iter_mut().enumerate() {
            *d = self.path_drops[i] - before.path_drops[i];
        }
        Counters {
            arrived: self.arrived - before.arrived,
            hits: self.hits - before.hits,
            handled: self.handled - before.handled,
            queued: self.queued - before.queued,
            overruns: self.overruns - before.overruns,
            table_full: self.table_full - before.table_full,
            created: self.created - before.created,
            evicted: self.evicted - before.evicted,
            cpu_s: self.cpu_s - before.cpu_s,
            path_drops,
        }
    }
}

pub(crate) fn if_stat(tb: &Testbed, ns: Ns, dev: &str, stat: &str) -> u64 {
    let path = format!("/sys/class/net/{dev}/statistics/{stat}");
    tb.run_in(ns, &["cat", &path])
        .unwrap_or_else(|e| panic!("{path} in {}: {e:#}", tb.ns_name(ns)))
        .trim()
        .parse()
        .expect("a counter")
}

/// Backlog drops of all CPUs (`/proc/net/softnet_stat`, second column, hex).
pub(crate) fn softnet_drops() -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
        .sum()
}

/// Drops of the router's NETLINK_NETFILTER sockets (`/proc/net/netlink`: protocol 12, column
/// Drops): messages the kernel had no room for in the receiver's socket buffer.
pub(crate) fn netlink_overruns(tb: &Testbed) -> u64 {
    let out = tb
        .run_in(Ns::Router, &["cat", "/proc/net/netlink"])
        .expect("/proc/net/netlink");
    out.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) == Some(&"12")).then(|| f.get(8)?.parse::<u64>().ok())?
        })
        .sum()
}

/// Packets of the NFQUEUE rules of the router's SLIPSTREAM chain (IPv4: the flood's family).
pub(crate) fn queue_rule_hits(tb: &Testbed) -> u64 {
    let out = tb
        .run_in(
            Ns::Router,
            &["iptables-legacy", "-w", "-t", "mangle", "-vnxL", "SLIPSTREAM"],
        )
        .expect("SLIPSTREAM chain");
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"NFQUEUE")).then(|| f[0].parse::<u64>().ok())?
        })
        .sum()
}

pub(crate) fn arrived(tb: &Testbed) -> u64 {
    let out = tb
        .run_in(Ns::Client, &["iptables-legacy", "-w", "-vnxL", "INPUT"])
        .expect("LAN host INPUT");
    cmd::chain_jump_packets(&out, FLOOD_CHAIN).expect("the LAN host's flood rule")
}

pub(crate) fn metric(m: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    metric_value(m, name, labels).unwrap_or_else(|| panic!("metric {name}{labels:?} missing"))
}

pub(crate) fn read_counters(tb: &Testbed, daemon: &Daemon, pid: u32) -> Counters {
    let m = daemon.scrape(tb).expect("metrics");
    Counters {
        arrived: arrived(tb),
        hits: queue_rule_hits(tb),
        handled: metric(&m, "slipstream_packets_total", &[]),
        queued: metric(&m, "slipstream_nfqueue_packets_total", &[("queue", ACK_QUEUE)]),
        overruns: netlink_overruns(tb),
        table_full: metric(&m, "slipstream_packets_passed_total", &[("reason", "table_full")]),
        created: metric(&m, "slipstream_flows_created_total", &[]),
        evicted: metric(&m, "slipstream_flows_evicted_total", &[]),
        cpu_s: process_cpu_seconds(pid).expect("daemon CPU time"),
        path_drops: [
            if_stat(tb, Ns::Flood, FLOOD_IF, "tx_dropped"),
            if_stat(tb, Ns::Router, ROUTER_FLOOD_IF, "rx_dropped"),
            if_stat(tb, Ns::Router, "lan1", "tx_dropped"),
            if_stat(tb, Ns::Client, HOST_IF, "rx_dropped"),
            softnet_drops(),
        ],
    }
}

/// Waits until the daemon has emptied its queue and its packet count stands still (the
/// metrics are published every 0.5 s), at most 10 s.
pub(crate) fn drain(tb: &Testbed, daemon: &Daemon) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = -1.0;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(700));
        let m = daemon.scrape(tb).unwrap_or_default();
        let handled = metric_value(&m, "slipstream_packets_total", &[]).unwrap_or(-2.0);
        let waiting = metric_value(&m, "slipstream_nfqueue_waiting_packets", &[("queue", ACK_QUEUE)]);
        if waiting == Some(0.0) && handled == last {
            return;
        }
        last = handled;
    }
    eprintln!("warning: the daemon's queue did not drain within 10 s");
}

/// Peaks sampled every second during a phase.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Peaks {
    pub(crate) flows_active: f64,
    pub(crate) flows_max: f64,
    pub(crate) rss_kib: u64,
    pub(crate) waiting: f64,
    pub(crate) samples: u32,
}

/// One flood phase's figures.
#[derive(Debug)]
pub(crate) struct Phase {
    pub(crate) name: String,
    pub(crate) sent: u64,
    /// The generator's own time for sending them, s.
    pub(crate) secs: f64,
    /// Seconds since the best-effort download started: flood start and end.
    pub(crate) from: f64,
    pub(crate) to: f64,
    pub(crate) d: Counters,
    pub(crate) peaks: Peaks,
    /// Flows in the table after the phase.
    pub(crate) active_after: f64,
    /// VmRSS / VmHWM after the phase, KiB.
    pub(crate) rss_kib: u64,
    pub(crate) hwm_kib: u64,
    /// Conntrack entries in the router after the phase.
    pub(crate) conntrack: u64,
}

impl Phase {
    pub(crate) fn offered_pps(&self) -> f64 {
        self.sent as f64 / self.secs
    }

    pub(crate) fn served_pps(&self) -> f64 {
        self.d.handled / self.secs
    }

    /// Packets the kernel accepted without the daemon: NFQUEUE rule hits minus handled.
    pub(crate) fn bypassed(&self) -> f64 {
        self.d.hits as f64 - self.d.handled
    }

    pub(crate) fn report(&self) -> String {
        let d = &self.d;
        format!(
            "{}:\n  sent {} SYNs in {:.2} s ({:.0}/s offered), arrived {} at the LAN host ({} lost; \
             path drops flood tx, wan1 rx, lan1 tx, LAN host rx, softnet: {:?})\n  NFQUEUE rule \
             hits {}, handled by the daemon {:.0} ({:.0}/s, offered {:.2}x that), bypassed \
             (fail-open) {:.0} = {:.2}%: {:.0} refused by the full queue, {:.0} for a full socket \
             ({} netlink overruns), peak {:.0} waiting\n  flows created {:.0}, evicted {:.0}, \
             refused (table_full) {:.0}; flows active peak {:.0} of max {:.0} ({} samples), {:.0} \
             after\n  daemon RSS peak {} KiB, {} KiB after, HWM {} KiB; CPU {:.2} s ({:.1} us per \
             handled packet); router conntrack entries {}",
            self.name,
            self.sent,
            self.secs,
            self.offered_pps(),
            d.arrived,
            self.sent as i64 - d.arrived as i64,
            d.path_drops,
            d.hits,
            d.handled,
            self.served_pps(),
            self.offered_pps() / self.served_pps().max(1.0),
            self.bypassed(),
            100.0 * self.bypassed() / (d.hits as f64).max(1.0),
            d.hits as f64 - d.queued,
            d.queued - d.handled,
            d.overruns,
            self.peaks.waiting,
            d.created,
            d.evicted,
            d.table_full,
            self.peaks.flows_active,
            self.peaks.flows_max,
            self.peaks.samples,
            self.active_after,
            self.peaks.rss_kib,
            self.rss_kib,
            self.hwm_kib,
            d.cpu_s,
            1e6 * d.cpu_s / d.handled.max(1.0),
            self.conntrack,
        )
    }
}

pub(crate) fn conntrack_count(tb: &Testbed) -> u64 {
    tb.run_in(Ns::Router, &["cat", "/proc/sys/net/netfilter/nf_conntrack_count"])
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The router's conntrack statistics summed over CPUs: (drop, early_drop, insert_failed).
pub(crate) fn conntrack_drops(tb: &Testbed) -> (u64, u64, u64) {
    let out = tb.run_in(Ns::Router, &["conntrack", "-S"]).unwrap_or_default();
    let sum = |key: &str| -> u64 {
        out.split_whitespace()
            .filter_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
            .sum()
    };
    (sum("drop"), sum("early_drop"), sum("insert_failed"))
}
