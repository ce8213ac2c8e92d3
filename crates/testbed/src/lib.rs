//! Network-namespace testbed for Slipstream's end-to-end tests and lab.
//!
//! Why it exists: Slipstream clamps the TCP receive window of background flows on a home router;
//! whether that works can only be judged on a path with a real bottleneck, a real RTT and real
//! TCP senders. [`Testbed`] builds such a path out of four network namespaces on one host and
//! tears it down again, also after a panic or a half-finished build:
//!
//! ```text
//!  server ──┐                                       ┌── client
//!  server2 ─┤ isp ──────────────── router ──────────┤── client2
//!  ...      │                                       │   ...
//!  eth0   isp-srv (bridge)  isp-rtr  wan0   br-lan (bridge)  eth0
//!  10.77.1.(1+n)  .1.1     10.77.2.1   .2.2  10.77.3.1    10.77.3.(1+n)   (+ fd77:N::/64 likewise)
//! ```
//!
//! * `server` (and `server2` ... with [`TopologySpec::servers`] > 1) runs iperf3 servers (the
//!   sender of downloads); servers hang off a bridge in `isp`, so they share its links.
//! * `isp` forwards and hosts the delay element (`slipstream-delay`, see its module docs),
//!   fed from `mangle FORWARD` via NFQUEUE in both directions (queue 1: downloads, entering on
//!   `isp-srv`; queue 2: uploads, entering on `isp-rtr`), each delayed by the one-way delay. The
//!   download bottleneck is a `tbf` on `isp-rtr` egress. `mangle FORWARD` runs before the egress
//!   qdisc, so packets are delayed first and then queue at the bottleneck, like at a DSLAM.
//! * `router` forwards between `wan0` and `br-lan` (named like OpenWrt's LAN bridge, so the default config applies as is); the upload bottleneck is a `tbf` on `wan0`
//!   egress. The daemon under test runs here (started by the caller with [`Testbed::spawn_in`] or
//!   [`Testbed::exec`]) and is configured with [`Testbed::router_lan_if`].
//! * `client` (and `client2` ... with [`TopologySpec::clients`] > 1) are the LAN hosts, the
//!   receivers of downloads, ports of the router's LAN bridge as on a home router.
//!
//! Interfaces are created directly inside their namespaces, so their names are fixed (and
//! short) while namespace names carry the per-test prefix: `<prefix>-srv`, `-srv2`, ..., `-isp`,
//! `-rtr`, `-cli`, `-cli2`, .... TSO/GSO/GRO are off on every veth (one packet = one frame, as in the Vulture
//! testbed), forwarding is on in `isp` and `router`, `tcp_no_metrics_save=1` in the end hosts,
//! and TCP buffer maxima are set to 8 MiB there (far above 10 Mbit/s × 100 ms + one BDP queue).
//! With [`TopologySpec::flood_source`], a WAN-side namespace `<prefix>-fld` is wired straight to
//! the router (`fld0` -- `wan1`, 10.77.4.0/24, neither shaped nor delayed) and the router routes
//! 198.18.0.0/15 (RFC 2544's benchmarking range) to it: floods from spoofed sources in that
//! range (`slipstream-synflood`) reach the router at full speed, past the 10 Mbit/s bottleneck and
//! the delay element, and anything answering them goes back into that namespace.
//! LAN hosts listed in [`TopologySpec::timestamps_off`] run TCP without timestamps (Windows'
//! default). The isp counts the TCP resets it forwards ([`Testbed::tcp_resets`]).
//!
//! **tbf parameters.** `rate` = [`TopologySpec::rate_mbit`]; `burst` = max(2 frames of 1514
//! bytes, 1 ms of tokens) (3028 bytes at 10 Mbit/s: a full frame always fits, and the shaper
//! never emits more than ~2.4 ms of line-rate burst, so the rate is honest at sub-RTT scales);
//! `limit` = [`TopologySpec::queue_bytes`], by default one BDP (rate × RTT, 125 000 bytes at
//! 10 Mbit/s and 100 ms).
//!
//! **Changing the link while it runs** (the lab's `link` scenario):
//! [`Testbed::set_download_rate`] changes the download tbf in place (`tc qdisc change`, same
//! limit in bytes), [`Testbed::set_one_way_delays`] gives the delay element new delays for the
//! packets that arrive after it (a route change; see [`delay_line`]).
//!
//! **Delay binary.** The library starts `slipstream-delay` from [`delay_binary`] (or
//! [`TopologySpec::delay_bin`]); callers outside this crate must have built it first:
//! `cargo build -p slipstream-testbed --bins`.
//!
//! **UDP background (issue 24).** [`quic`] runs real QUIC transfers (`slipstream-quic`, this
//! crate's binary on quinn) between a server and a LAN host; [`torrent`] a uTP swarm (opentracker,
//! Transmission seeder and leechers, TCP between the peers refused). The delay element delays
//! UDP as it does TCP (it holds every packet's verdict, whatever its protocol: QUIC's minimum RTT
//! through the testbed is the base RTT, `tests/quic.rs`).
//!
//! Requires root, `ip`, `tc`, `ethtool`, `sysctl`, `iptables-legacy`/`ip6tables-legacy`,
//! `ping` and `iperf3` (and for [`torrent`]: `transmission-daemon`, `transmission-create`,
//! `transmission-show`, `opentracker`, `curl`); see [`netns_supported`] for a skip check.

mod build;
mod change;
pub mod cmd;
pub mod daemon;
pub mod delay_line;
pub mod delay_stats;
pub mod dnsmasq;
pub mod forward;
pub mod iperf;
mod netns;
pub mod quic;
pub mod scenario;
pub mod stalls;
mod topology;
pub mod torrent;

use std::ffi::OsStr;
use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

pub use cmd::RttStats;
pub use iperf::{Interval, IperfResult, IperfRun};
pub use netns::*;
pub use topology::*;

pub(crate) struct Owned {
    pub(crate) label: String,
    pub(crate) child: Child,
}

impl Owned {
    /// After a SIGTERM: waits up to 2 s for the process to exit, then kills it; whether it
    /// exited on its own. Reaps it either way.
    pub(crate) fn wait_or_kill(&mut self) -> bool {
        let exited = cmd::wait_until(Duration::from_secs(2), || {
            !matches!(self.child.try_wait(), Ok(None))
        });
        if !exited {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        exited
    }
}

/// A built topology. Dropping it tears everything down (see [`Testbed::teardown`]).
pub struct Testbed {
    pub(crate) spec: TopologySpec,
    /// Namespaces this testbed created (only these are deleted).
    pub(crate) created: Vec<String>,
    pub(crate) owned: Mutex<Vec<Owned>>,
}

impl Testbed {
    /// Every namespace of the topology, in creation order: servers, isp, router, LAN hosts.
    pub fn namespaces(&self) -> Vec<Ns> {
        let mut v: Vec<Ns> = (1..=self.spec.servers).map(Ns::server).collect();
        v.extend([Ns::Isp, Ns::Router]);
        v.extend((1..=self.spec.clients).map(Ns::client));
        if self.spec.flood_source {
            v.push(Ns::Flood);
        }
        v
    }

    /// The end hosts: servers and LAN hosts.
    pub fn end_hosts(&self) -> Vec<Ns> {
        self.namespaces()
            .into_iter()
            .filter(|n| !matches!(n, Ns::Isp | Ns::Router | Ns::Flood))
            .collect()
    }

    fn exec_named<S: AsRef<OsStr>>(&self, ns_name: &str, args: &[S]) -> Command {
        cmd::netns_exec(ns_name, args)
    }

    /// The spec this testbed was built from.
    pub fn spec(&self) -> &TopologySpec {
        &self.spec
    }

    /// Name of a namespace (`<prefix>-srv` etc.), e.g. for `ip netns exec`.
    pub fn ns_name(&self, ns: Ns) -> String {
        format!("{}-{}", self.spec.name_prefix, ns.suffix())
    }

    /// The router's LAN interface (towards the client), for the daemon's config.
    pub fn router_lan_if(&self) -> &'static str {
        ROUTER_LAN_IF
    }

    /// Makes the router masquerade what leaves its WAN side, as a home router does: conntrack's
    /// original tuple then holds the LAN address, its reply tuple the router's WAN address.
    pub fn masquerade(&self) -> Result<()> {
        self.run_in(
            Ns::Router,
            &[
                "iptables-legacy",
                "-w",
                "-t",
                "nat",
                "-A",
                "POSTROUTING",
                "-o",
                ROUTER_WAN_IF,
                "-j",
                "MASQUERADE",
            ],
        )
        .map(|_| ())
    }

    /// Address of the first server (iperf3 target): 10.77.1.2, or fd77:1::2 with `v6`.
    pub fn server_addr(&self, v6_: bool) -> IpAddr {
        self.server_addr_of(1, v6_)
    }

    /// Address of server `n` (1-based): 10.77.1.(1 + n), or fd77:1::(1 + n) with `v6`.
    pub fn server_addr_of(&self, n: u8, v6_: bool) -> IpAddr {
        host_addr(SERVER_LINK, 1 + n.max(1), v6_)
    }

    /// Address of the first LAN host: 10.77.3.2, or fd77:3::2 with `v6`.
    pub fn client_addr(&self, v6_: bool) -> IpAddr {
        self.client_addr_of(1, v6_)
    }

    /// Address of LAN host `n` (1-based): 10.77.3.(1 + n), or fd77:3::(1 + n) with `v6`.
    pub fn client_addr_of(&self, n: u8, v6_: bool) -> IpAddr {
        host_addr(LAN_LINK, 1 + n.max(1), v6_)
    }

    /// The router's LAN address: 10.77.3.1, or fd77:3::1 with `v6` (the LAN hosts' resolver).
    pub fn router_lan_addr(&self, v6_: bool) -> IpAddr {
        host_addr(LAN_LINK, 1, v6_)
    }

    /// A [`Command`] running `args` inside namespace `ns` (`ip netns exec`); nothing is spawned.
    pub fn exec<S: AsRef<OsStr>>(&self, ns: Ns, args: &[S]) -> Command {
        cmd::netns_exec(&self.ns_name(ns), args)
    }

    /// Runs `args` in `ns` to completion; returns stdout, errors (with stderr) on failure.
    pub fn run_in<S: AsRef<OsStr>>(&self, ns: Ns, args: &[S]) -> Result<String> {
        cmd::run_command(self.exec(ns, args))
    }

    /// Spawns `args` in `ns` (stdin null, stdout/stderr inherited) and returns the child to the
    /// caller. The caller should stop it (e.g. SIGTERM + wait) before dropping the testbed;
    /// teardown SIGKILLs whatever still runs in the namespaces anyway.
    pub fn spawn_in<S: AsRef<OsStr>>(&self, ns: Ns, args: &[S]) -> Result<Child> {
        let mut c = self.exec(ns, args);
        c.stdin(Stdio::null());
        c.spawn()
            .with_context(|| format!("spawning `{}`", cmd::describe(&c)))
    }

    /// Like [`spawn_in`](Self::spawn_in) but the testbed owns the process: it gets SIGTERM (then
    /// SIGKILL after 2 s) at teardown. Stdout/stderr go to /dev/null. Returns the pid.
    pub fn spawn_owned<S: AsRef<OsStr>>(&self, ns: Ns, label: &str, args: &[S]) -> Result<u32> {
        let mut c = self.exec(ns, args);
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let child = c
            .spawn()
            .with_context(|| format!("spawning `{}`", cmd::describe(&c)))?;
        Ok(self.own(label, child))
    }

    /// TCP resets the isp forwarded so far, both directions (IPv4 and IPv6): refused or torn-down
    /// connections. iperf3 causes some itself at a download's end, see
    /// [`scenario::resets_during`].
    pub fn tcp_resets(&self) -> Result<u64> {
        let mut total = 0;
        for tool in self.iptables() {
            let out = self.run_in(Ns::Isp, &[tool, "-L", "FORWARD", "-v", "-n", "-x"])?;
            total += cmd::chain_jump_packets(&out, RST_CHAIN)
                .with_context(|| format!("no jump to {RST_CHAIN} in {tool} FORWARD:\n{out}"))?;
        }
        Ok(total)
    }

    /// The iptables tools of the address families in use.
    fn iptables(&self) -> Vec<&'static str> {
        let mut tools = vec!["iptables-legacy"];
        if self.spec.ipv6 {
            tools.push("ip6tables-legacy");
        }
        tools
    }

    /// Whether the delay element (if any) is still running.
    pub fn delay_element_alive(&self) -> bool {
        let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        owned
            .iter_mut()
            .filter(|o| o.label == "slipstream-delay")
            .all(|o| matches!(o.child.try_wait(), Ok(None)))
    }

    /// Pings the first server from the first LAN host (`count` pings every `interval_s`), after
    /// one warm-up ping.
    pub fn ping_stats(&self, count: u32, interval_s: f64) -> Result<RttStats> {
        self.ping_between(IperfEnds::default(), count, interval_s)
    }

    /// Pings server `ends.server` from LAN host `ends.client`, as [`ping_stats`](Self::ping_stats).
    pub fn ping_between(&self, ends: IperfEnds, count: u32, interval_s: f64) -> Result<RttStats> {
        let dst = self.server_addr_of(ends.server, false).to_string();
        let from = Ns::client(ends.client);
        // Warm-up: resolves neighbours on all three links so they do not inflate the sample.
        let _ = self.run_in(from, &["ping", "-c", "1", "-W", "2", &dst]);
        let (c, i) = (count.to_string(), format!("{interval_s}"));
        let out = self
            .run_in(from, &["ping", "-c", &c, "-i", &i, "-W", "2", &dst])
            .with_context(|| format!("ping {} -> {dst}", self.ns_name(from)))?;
        cmd::parse_ping_output(&out)
    }

    /// Average client -> server ping RTT in ms (10 pings, 0.2 s apart).
    pub fn check_rtt(&self) -> Result<f64> {
        Ok(self.idle_rtt_stats()?.avg)
    }

    /// The idle path's pings behind [`check_rtt`](Self::check_rtt) and
    /// [`assert_rtt_within`](Self::assert_rtt_within): ten, 0.2 s apart.
    fn idle_rtt_stats(&self) -> Result<RttStats> {
        self.ping_stats(10, 0.2)
    }

    /// Pings as [`check_rtt`](Self::check_rtt) and fails unless the fastest ping is within
    /// `tolerance_ms` of the spec's base RTT. The delay element only ever releases late, so on
    /// a loaded machine one late ping can move the mean past the tolerance while the path is
    /// right (a mean of 102.5 ms from one 107.7 ms ping); the fastest is the path. Returns the
    /// mean, as `check_rtt` does (what the lab records as the measured RTT).
    pub fn assert_rtt_within(&self, tolerance_ms: f64) -> Result<f64> {
        let stats = self.idle_rtt_stats()?;
        let want = self.spec.rtt_ms();
        if (stats.min - want).abs() > tolerance_ms {
            bail!(
                "fastest ping {:.3} ms (mean {:.3}) is not within {tolerance_ms} ms of {want} ms",
                stats.min,
                stats.avg
            );
        }
        Ok(stats.avg)
    }

    /// Starts an iperf3 server on `port` in the (first) server namespace (owned; waits until
    /// listening).
    pub fn start_iperf_server(&self, port: u16) -> Result<()> {
        self.start_iperf_server_in(Ns::Server, port)
    }

    /// Starts an iperf3 server on `port` in namespace `ns` (owned; waits until listening).
    pub fn start_iperf_server_in(&self, ns: Ns, port: u16) -> Result<()> {
        let p = port.to_string();
        let pid = self.spawn_owned(
            ns,
            &format!("iperf3-server-{}-{port}", ns.suffix()),
            &["iperf3", "-s", "-p", &p],
        )?;
        let filter = format!("sport = :{port}");
        let listening = cmd::wait_until(Duration::from_secs(5), || {
            self.run_in(ns, &["ss", "-Hltn", &filter])
                .is_ok_and(|o| !o.trim().is_empty())
        });
        if !listening {
            bail!("iperf3 server (pid {pid}) not listening on port {port} after 5 s");
        }
        Ok(())
    }

    /// Starts a download (`iperf3 -R`: server sends, client receives) of `seconds` on `port` with
    /// congestion control `cc` (e.g. "cubic"; "" = system default), plus `extra` iperf3 args.
    /// Several may run concurrently (one server port each).
    pub fn run_download(&self, port: u16, seconds: u32, cc: &str, extra: &[&str]) -> Result<IperfRun> {
        self.run_iperf(IperfEnds::default(), port, seconds, cc, true, extra)
    }

    /// Starts an upload (client sends) — as [`run_download`](Self::run_download) without `-R`.
    pub fn run_upload(&self, port: u16, seconds: u32, cc: &str, extra: &[&str]) -> Result<IperfRun> {
        self.run_iperf(IperfEnds::default(), port, seconds, cc, false, extra)
    }

    /// Starts an iperf3 client on LAN host `ends.client` against server `ends.server` (its
    /// iperf3 server on `port` must run); `reverse` = download (`-R`).
    pub fn run_iperf(
        &self,
        ends: IperfEnds,
        port: u16,
        seconds: u32,
        cc: &str,
        reverse: bool,
        extra: &[&str],
    ) -> Result<IperfRun> {
        let server = self.server_addr_of(ends.server, false).to_string();
        let mut args = vec!["iperf3".to_string()];
        args.extend(iperf::client_args(&server, port, seconds, cc, reverse, extra));
        let mut c = self.exec(Ns::client(ends.client), &args);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let desc = cmd::describe(&c);
        let child = c.spawn().with_context(|| format!("spawning `{desc}`"))?;
        Ok(IperfRun::new(
            child,
            Duration::from_secs(u64::from(seconds) + 30),
            desc,
        ))
    }

    /// Tears everything down: SIGTERM to owned processes (SIGKILL after 2 s), SIGKILL to anything
    /// else still running in the namespaces, then deletes the namespaces (which deletes their
    /// veths, qdiscs and rules). Idempotent; called by `Drop`.
    pub fn teardown(&mut self) -> Result<()> {
        let mut owned = std::mem::take(&mut *self.owned.lock().unwrap_or_else(|e| e.into_inner()));
        for o in &owned {
            cmd::signal(o.child.id(), libc::SIGTERM);
        }
        for o in &mut owned {
            if !o.wait_or_kill() {
                eprintln!(
                    "testbed: {} (pid {}) ignored SIGTERM, killed",
                    o.label,
                    o.child.id()
                );
            }
        }
        let _ = std::fs::remove_file(self.delay_control_file());
        let _ = std::fs::remove_file(self.delay_stats_file());
        let mut errors = Vec::new();
        for name in std::mem::take(&mut self.created).into_iter().rev() {
            if let Err(e) = delete_netns(&name) {
                errors.push(format!("{e:#}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!("teardown: {}", errors.join("; ")))
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("testbed {}: {e:#}", self.spec.name_prefix);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn spec_defaults() {
        let s = TopologySpec::with_prefix("t1");
        assert_eq!(s.rtt_ms(), 100.0);
        assert_eq!(s.rate_bps(), 10_000_000);
        assert_eq!(s.bdp_bytes(), 125_000);
        assert_eq!(s.effective_queue_bytes(), 125_000);
        assert_eq!(s.tbf_burst_bytes(), 3028);
        assert_eq!(s.clone().with_queue_packets(10).effective_queue_bytes(), 15_140);
        assert!(s.validate().is_ok());
        assert!(TopologySpec::with_prefix("bad-prefix").validate().is_err());
        let asym = TopologySpec {
            one_way_delay_ms: 30.0,
            upload_delay_ms: Some(20.0),
            ..s.clone()
        };
        assert_eq!(asym.rtt_ms(), 50.0);
        assert_eq!(asym.upload_delay_ms(), 20.0);
        let dsl = TopologySpec {
            upload_rate_mbit: Some(1.0),
            ..s.clone()
        };
        assert_eq!(dsl.upload_rate_bps(), 1_000_000);
        assert_eq!(dsl.effective_queue_bytes(), 125_000);
        assert_eq!(dsl.effective_upload_queue_bytes(), 12_500);
        assert_eq!(s.effective_upload_queue_bytes(), 125_000);
        assert!(TopologySpec {
            upload_rate_mbit: Some(0.0),
            ..s.clone()
        }
        .validate()
        .is_err());
        assert!(TopologySpec {
            upload_delay_ms: Some(-1.0),
            ..s.clone()
        }
        .validate()
        .is_err());
        assert!(TopologySpec {
            clients: 2,
            ..s.clone()
        }
        .with_timestamps_off([2])
        .validate()
        .is_ok());
        assert!(s.clone().with_timestamps_off([2]).validate().is_err());
        assert!(TopologySpec { rate_mbit: 0.0, ..s }.validate().is_err());
    }

    #[test]
    fn prefixes_are_unique() {
        let (a, b) = (unique_prefix("ss"), unique_prefix("ss"));
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("ss{}x", std::process::id())));
    }

    #[test]
    fn delay_binary_location() {
        assert_eq!(
            binary_near(Path::new("/w/target/debug/deps/topology-abc"), "slipstream-delay"),
            Path::new("/w/target/debug/slipstream-delay")
        );
        assert_eq!(
            binary_near(Path::new("/w/target/release/slipstream-lab"), "slipstream-delay"),
            Path::new("/w/target/release/slipstream-delay")
        );
    }

    #[test]
    fn names_and_commands() {
        let tb = Testbed {
            spec: TopologySpec::with_prefix("ut9"),
            created: Vec::new(),
            owned: Mutex::new(Vec::new()),
        };
        assert_eq!(tb.ns_name(Ns::Router), "ut9-rtr");
        assert_eq!(tb.router_lan_if(), "br-lan");
        assert!(tb.router_lan_if().len() <= 15 && ISP_DOWN_IF.len() <= 15);
        assert_eq!(
            cmd::describe(&tb.exec(Ns::Client, &["true"])),
            "ip netns exec ut9-cli true"
        );
        assert_eq!(tb.server_addr(false).to_string(), "10.77.1.2");
        assert_eq!(tb.server_addr(true).to_string(), "fd77:1::2");
        assert_eq!(tb.client_addr(false).to_string(), "10.77.3.2");
        assert_eq!(tb.namespaces(), vec![Ns::Server, Ns::Isp, Ns::Router, Ns::Client]);
        drop(tb);
        let tb = Testbed {
            spec: TopologySpec {
                servers: 2,
                clients: 3,
                ..TopologySpec::with_prefix("ut8")
            },
            created: Vec::new(),
            owned: Mutex::new(Vec::new()),
        };
        assert_eq!(tb.ns_name(Ns::client(3)), "ut8-cli3");
        assert_eq!(tb.ns_name(Ns::client(1)), "ut8-cli");
        assert_eq!(tb.ns_name(Ns::server(2)), "ut8-srv2");
        assert_eq!(tb.server_addr_of(2, false).to_string(), "10.77.1.3");
        assert_eq!(tb.client_addr_of(3, true).to_string(), "fd77:3::4");
        assert_eq!(tb.end_hosts().len(), 5);
        assert_eq!(tb.namespaces().len(), 7);
        drop(tb);
        let tb = Testbed {
            spec: TopologySpec {
                flood_source: true,
                ..TopologySpec::with_prefix("ut6")
            },
            created: Vec::new(),
            owned: Mutex::new(Vec::new()),
        };
        assert_eq!(tb.ns_name(Ns::Flood), "ut6-fld");
        assert_eq!(tb.namespaces().last(), Some(&Ns::Flood));
        assert_eq!(tb.end_hosts(), vec![Ns::Server, Ns::Client]);
        assert!(TopologySpec {
            clients: 0,
            ..TopologySpec::with_prefix("ut7")
        }
        .validate()
        .is_err());
        drop(tb); // teardown with nothing created is a no-op
    }
}
