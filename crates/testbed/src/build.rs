//! Building a [`Testbed`]: namespaces, links, bridges, addresses, shapers, the delay element.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::topology::*;
use crate::{cmd, delay_binary, list_netns, Owned, Testbed};

impl Testbed {
    /// Builds the topology. On error everything created so far is removed again.
    pub fn build(spec: TopologySpec) -> Result<Testbed> {
        spec.validate()?;
        let mut tb = Testbed {
            spec,
            created: Vec::new(),
            owned: Mutex::new(Vec::new()),
        };
        // On `?` below, `tb` is dropped and Drop tears down what was made.
        tb.setup()
            .with_context(|| format!("building testbed {}", tb.spec.name_prefix))?;
        Ok(tb)
    }

    pub(crate) fn setup(&mut self) -> Result<()> {
        let delay_bin = self.spec.delay_bin.clone().unwrap_or_else(delay_binary);
        if self.spec.delay_element_needed() && !delay_bin.is_file() {
            bail!(
                "delay element {} not found; build it with `cargo build -p slipstream-testbed --bins` \
                 or set SLIPSTREAM_DELAY_BIN",
                delay_bin.display()
            );
        }
        let ipv6 = self.spec.ipv6;
        let existing = list_netns()?;
        for ns in self.namespaces() {
            let name = self.ns_name(ns);
            if existing.contains(&name) {
                bail!("namespace {name} already exists (stale run? see cleanup_stale)");
            }
            cmd::run("ip", &["netns", "add", &name])?;
            self.created.push(name.clone());
            cmd::run("ip", &["-n", &name, "link", "set", "lo", "up"])?;
        }
        // The router's WAN link to the isp, then a bridge on each side with one port per host.
        self.add_veth(Ns::Router, ROUTER_WAN_IF, Ns::Isp, ISP_DOWN_IF)?;
        self.add_address(Ns::Router, ROUTER_WAN_IF, WAN_LINK, 2)?;
        self.add_address(Ns::Isp, ISP_DOWN_IF, WAN_LINK, 1)?;
        for (side, bridge, link) in [
            (Ns::Isp, ISP_UP_IF, SERVER_LINK),
            (Ns::Router, ROUTER_LAN_IF, LAN_LINK),
        ] {
            let ns = self.ns_name(side);
            cmd::run("ip", &["-n", &ns, "link", "add", bridge, "type", "bridge"])?;
            // Best effort: a bridge may refuse some feature changes; its ports have them off.
            let _ = cmd::run_command(self.exec(
                side,
                &["ethtool", "-K", bridge, "tso", "off", "gso", "off", "gro", "off"],
            ));
            self.add_address(side, bridge, link, 1)?;
        }
        for n in 1..=self.spec.servers {
            let port = format!("srvp{n}");
            self.add_veth(Ns::server(n), HOST_IF, Ns::Isp, &port)?;
            self.enslave(Ns::Isp, &port, ISP_UP_IF)?;
            self.add_address(Ns::server(n), HOST_IF, SERVER_LINK, 1 + n)?;
        }
        for n in 1..=self.spec.clients {
            let port = format!("lan{n}");
            self.add_veth(Ns::client(n), HOST_IF, Ns::Router, &port)?;
            self.enslave(Ns::Router, &port, ROUTER_LAN_IF)?;
            self.add_address(Ns::client(n), HOST_IF, LAN_LINK, 1 + n)?;
        }
        if self.spec.flood_source {
            self.add_veth(Ns::Flood, FLOOD_IF, Ns::Router, ROUTER_FLOOD_IF)?;
            self.add_address(Ns::Flood, FLOOD_IF, FLOOD_LINK, 2)?;
            self.add_address(Ns::Router, ROUTER_FLOOD_IF, FLOOD_LINK, 1)?;
        }
        // Routing: end hosts and router default towards the isp side; isp knows the LAN.
        let mut routes = vec![
            (Ns::Router, "default".to_string(), v4(WAN_LINK, 1)),
            (Ns::Isp, format!("10.77.{LAN_LINK}.0/24"), v4(WAN_LINK, 2)),
        ];
        for n in 1..=self.spec.servers {
            routes.push((Ns::server(n), "default".into(), v4(SERVER_LINK, 1)));
        }
        for n in 1..=self.spec.clients {
            routes.push((Ns::client(n), "default".into(), v4(LAN_LINK, 1)));
        }
        if self.spec.flood_source {
            // The flood's sources live behind the flood link (so reverse-path filtering passes
            // them, and any answer goes back there); the flood namespace reaches the LAN via it.
            routes.push((Ns::Flood, "default".into(), v4(FLOOD_LINK, 1)));
            routes.push((Ns::Router, FLOOD_SOURCES.into(), v4(FLOOD_LINK, 2)));
        }
        if ipv6 {
            routes.push((Ns::Router, "default".into(), v6(WAN_LINK, 1)));
            routes.push((Ns::Isp, format!("fd77:{LAN_LINK}::/64"), v6(WAN_LINK, 2)));
            for n in 1..=self.spec.servers {
                routes.push((Ns::server(n), "default".into(), v6(SERVER_LINK, 1)));
            }
            for n in 1..=self.spec.clients {
                routes.push((Ns::client(n), "default".into(), v6(LAN_LINK, 1)));
            }
        }
        for (ns, dst, via) in routes {
            cmd::run(
                "ip",
                &["-n", &self.ns_name(ns), "route", "add", &dst, "via", &via],
            )?;
        }
        // Sysctls.
        for ns in [Ns::Isp, Ns::Router] {
            self.sysctl(ns, "net.ipv4.ip_forward", "1")?;
            if ipv6 {
                self.sysctl(ns, "net.ipv6.conf.all.forwarding", "1")?;
            }
        }
        // Per-connection counters, as OpenWrt has them (`sysctl-nf-conntrack.conf`): the daemon
        // tells a call under browsing by its flow's steady count. Without conntrack loaded
        // there is nothing to set, and the daemon does without.
        let _ = self.sysctl(Ns::Router, "net.netfilter.nf_conntrack_acct", "1");
        for ns in self.end_hosts() {
            self.sysctl(ns, "net.ipv4.tcp_no_metrics_save", "1")?;
            self.sysctl(ns, "net.ipv4.tcp_rmem", "4096 131072 8388608")?;
            self.sysctl(ns, "net.ipv4.tcp_wmem", "4096 16384 8388608")?;
        }
        for &n in &self.spec.timestamps_off {
            self.sysctl(Ns::client(n), "net.ipv4.tcp_timestamps", "0")?;
        }
        // Bottlenecks.
        let spec = &self.spec;
        let (down, up) = (spec.rate_bps(), spec.upload_rate_bps());
        for (ns, dev, rate, limit) in [
            (Ns::Isp, ISP_DOWN_IF, down, spec.effective_queue_bytes()),
            (Ns::Router, ROUTER_WAN_IF, up, spec.effective_upload_queue_bytes()),
        ] {
            let burst = cmd::tbf_burst_bytes(rate);
            cmd::run(
                "tc",
                &[
                    &["-n".to_string(), self.ns_name(ns)][..],
                    &cmd::tbf_args(dev, rate, burst, limit),
                ]
                .concat(),
            )?;
        }
        let isp = self.ns_name(Ns::Isp);
        let tools = self.iptables();
        // RST counter (see `tcp_resets`): an empty chain jumped to by every forwarded RST.
        let count_resets = format!("-A FORWARD -p tcp --tcp-flags RST RST -j {RST_CHAIN}");
        for tool in &tools {
            cmd::run_command(self.exec_named(&isp, &[tool, "-N", RST_CHAIN]))?;
            let args: Vec<&str> = std::iter::once(*tool).chain(count_resets.split(' ')).collect();
            cmd::run_command(self.exec_named(&isp, &args))?;
        }
        // Delay element, then the rules feeding it (NFQUEUE without a listener drops).
        if self.spec.delay_element_needed() {
            self.start_delay_element(&delay_bin)?;
            for tool in tools {
                for (dev, q) in [(ISP_UP_IF, DOWNLOAD_QUEUE), (ISP_DOWN_IF, UPLOAD_QUEUE)] {
                    let q = q.to_string();
                    let args = [
                        tool,
                        "-t",
                        "mangle",
                        "-A",
                        "FORWARD",
                        "-i",
                        dev,
                        "-j",
                        "NFQUEUE",
                        "--queue-num",
                        &q,
                    ];
                    cmd::run_command(self.exec_named(&isp, &args))?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn start_delay_element(&self, bin: &std::path::Path) -> Result<()> {
        let d = format!("{}", self.spec.one_way_delay_ms);
        let d2 = format!("{}", self.spec.upload_delay_ms());
        let (q1, q2) = (DOWNLOAD_QUEUE.to_string(), UPLOAD_QUEUE.to_string());
        let mut c = self.exec(Ns::Isp, &[bin.as_os_str()]);
        c.args([
            "--queue",
            &q1,
            "--delay-ms",
            &d,
            "--queue2",
            &q2,
            "--delay2-ms",
            &d2,
        ]);
        // Read only on SIGHUP ([`Testbed::set_one_way_delays`]); not created until then.
        c.arg("--control-file").arg(self.delay_control_file());
        c.arg("--stats-file").arg(self.delay_stats_file());
        if let Some((every, length)) = self.spec.stalls_ms {
            c.args([
                "--stall-every-ms",
                &every.to_string(),
                "--stall-ms",
                &length.to_string(),
            ]);
        }
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = c.spawn().with_context(|| format!("spawning {}", bin.display()))?;
        let stdout = child.stdout.take().expect("piped");
        self.own("slipstream-delay", child);
        // Read the `ready` line on a thread (with a timeout here); the thread then keeps
        // draining stdout until the process exits.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next();
            let _ = tx.send(first.map(|l| l.unwrap_or_default()));
            for _ in lines {}
        });
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Some(line)) if line.trim() == "ready" => Ok(()),
            Ok(other) => bail!("slipstream-delay did not report ready (got {other:?}; see its stderr)"),
            Err(_) => bail!("slipstream-delay did not report ready within 5 s"),
        }
    }

    pub(crate) fn own(&self, label: &str, child: Child) -> u32 {
        let pid = child.id();
        self.owned.lock().unwrap_or_else(|e| e.into_inner()).push(Owned {
            label: label.into(),
            child,
        });
        pid
    }

    pub(crate) fn sysctl(&self, ns: Ns, key: &str, value: &str) -> Result<()> {
        cmd::run_command(self.exec(ns, &["sysctl", "-q", "-w", &format!("{key}={value}")]))?;
        Ok(())
    }

    /// A veth pair `a:if_a` -- `b:if_b`, both ends up, segmentation/receive offloads off (one
    /// packet = one frame).
    pub(crate) fn add_veth(&self, a: Ns, if_a: &str, b: Ns, if_b: &str) -> Result<()> {
        let (na, nb) = (self.ns_name(a), self.ns_name(b));
        cmd::run(
            "ip",
            &[
                "-n", &na, "link", "add", if_a, "type", "veth", "peer", "name", if_b, "netns", &nb,
            ],
        )?;
        for (ns, dev) in [(a, if_a), (b, if_b)] {
            cmd::run_command(self.exec(
                ns,
                &["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"],
            ))?;
            cmd::run("ip", &["-n", &self.ns_name(ns), "link", "set", dev, "up"])?;
        }
        Ok(())
    }

    /// Makes `port` a port of `bridge` (both in `ns`).
    pub(crate) fn enslave(&self, ns: Ns, port: &str, bridge: &str) -> Result<()> {
        let name = self.ns_name(ns);
        cmd::run("ip", &["-n", &name, "link", "set", port, "master", bridge])?;
        cmd::run("ip", &["-n", &name, "link", "set", bridge, "up"])?;
        Ok(())
    }

    /// Gives `dev` in `ns` host address `host` of link `link` (and its IPv6 twin), and sets it up.
    pub(crate) fn add_address(&self, ns: Ns, dev: &str, link: u8, host: u8) -> Result<()> {
        let name = self.ns_name(ns);
        let a4 = format!("{}/24", v4(link, host));
        cmd::run("ip", &["-n", &name, "addr", "add", &a4, "dev", dev])?;
        if self.spec.ipv6 {
            let a6 = format!("{}/64", v6(link, host));
            cmd::run(
                "ip",
                &["-n", &name, "-6", "addr", "add", &a6, "dev", dev, "nodad"],
            )?;
        }
        cmd::run("ip", &["-n", &name, "link", "set", dev, "up"])?;
        Ok(())
    }
}
