//! Rules by name, end to end with the real parts (issue 13): the namespace testbed with two
//! servers, the real `slipstreamd` on the router, real dnsmasq (an upstream authoritative for
//! the test names in the server namespace, and the router's resolver forwarding to it, which
//! fills Slipstream's sets from the answers), the LAN host resolving through its own C library
//! (`getent`, `/etc/resolv.conf` pointing at the router) and real iperf3 downloads.
//!
//! dnsmasq is configured as OpenWrt's dnsmasq init configures an instance: started with
//! `--conf-file=<dir>/var/etc/dnsmasq.conf.cfg01411c`, the instance's generated config, which
//! names the instance's own `conf-dir` (`<dir>/tmp/dnsmasq.cfg01411c.d`, as on 24.10) and holds
//! the lines the init writes for the `dhcp` ipset sections `slipstreamd --dnsmasq-uci` prints
//! (`IpsetSection::init_lines`, checked against OpenWrt's own init script by
//! `openwrt/tests/dnsmasq_init.sh`). Nothing is written to `/tmp/dnsmasq.d` or any conf-dir.
//!
//! * fw3 style (iptables-legacy + ipset): a name of a background rule and a name of no rule are
//!   resolved; only the first's address lands in the rule's ipset; of two downloads at once the
//!   first is classed and clamped (control socket, metrics), the second never reaches the daemon;
//!   the set entry expires after `names.set_timeout`, and a new connection is no longer classed.
//! * `lan_hostnames` from a dnsmasq lease file: the host set follows a lease that changes address.
//! * fw4 style (nftables + nftset): the same names fill the nft sets, and the classify chain
//!   marks the flow to the background name only (conntrack); the element expires after the
//!   set's timeout, and a new connection is no longer marked. This kernel has no nft `queue`
//!   expression, so that part runs without the daemon, the queue statements swapped for accept.
//!
//! Needs root, dnsmasq, ipset, nft, iperf3 and the binaries built (scripts/test.sh does both).

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use slipstream::{daemon_binary, require_netns};
use slipstream_inspect::{query, FlowInfo, Request, Response};
use slipstream_names::uci::IpsetSection;
use slipstream_testbed::daemon::{metric_value, Daemon};
use slipstream_testbed::dnsmasq::{self, ResolvConf};
use slipstream_testbed::{unique_prefix, IperfEnds, Ns, Testbed, TopologySpec};

const BG_NAME: &str = "dl.games.test";
const OTHER_NAME: &str = "video.call.test";
const SET_TIMEOUT_SECS: u64 = 25;

fn config_text(dir: &Path) -> String {
    format!(
        r#"
[datapath]
lan_interfaces = ["br-lan"]
firewall = "iptables"
[control]
socket = "{dir}/ctl.sock"
[names]
set_timeout = "{SET_TIMEOUT_SECS}s"
dhcp_leases = ["{dir}/dhcp.leases"]
lease_poll = "300ms"
[[rules]]
name = "games"
domains = ["games.test"]
[[rules]]
name = "deck"
lan_hostnames = ["steam-deck"]
remote_ports = [5203]
"#,
        dir = dir.display()
    )
}

/// The `dhcp` ipset sections `slipstreamd --dnsmasq-uci` prints for `config_path` (what OpenWrt's
/// init script applies with `uci batch`), read back from the batch.
fn uci_sections(config_path: &Path) -> Vec<IpsetSection> {
    let out = std::process::Command::new(daemon_binary())
        .arg("--config")
        .arg(config_path)
        .arg("--dnsmasq-uci")
        .output()
        .expect("slipstreamd --dnsmasq-uci runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let batch = String::from_utf8(out.stdout).unwrap();
    let mut sections: Vec<IpsetSection> = Vec::new();
    for line in batch.lines() {
        let (cmd, rest) = line.split_once(' ').unwrap();
        let (key, value) = rest.split_once('=').unwrap();
        let value = value.trim_matches('\'').to_owned();
        let mut parts = key.split('.');
        assert_eq!(parts.next(), Some("dhcp"), "{line}");
        let id = parts.next().unwrap().to_owned();
        match (cmd, parts.next()) {
            ("set", None) => {
                assert_eq!(value, "ipset", "{line}");
                sections.push(IpsetSection {
                    id,
                    sets: Vec::new(),
                    table: String::new(),
                    domains: Vec::new(),
                });
            }
            ("add_list", Some("name")) => sections.last_mut().unwrap().sets.push(value),
            ("add_list", Some("domain")) => sections.last_mut().unwrap().domains.push(value),
            ("set", Some("table")) => sections.last_mut().unwrap().table = value,
            ("set", Some("table_family")) => assert_eq!(value, "inet"),
            _ => panic!("unexpected batch line {line:?}"),
        }
    }
    sections
}

/// An OpenWrt-style dnsmasq instance `cfg01411c` under `dir`: its conf-dir, and its generated
/// config with the init's lines of `kind` (`ipset` or `nftset`: the one a dnsmasq built for fw3
/// or fw4 keeps) for `sections`. Returns the `--conf-file=` argument procd starts it with.
fn openwrt_instance(dir: &Path, sections: &[IpsetSection], kind: &str) -> String {
    let conf_dir = dir.join("tmp/dnsmasq.cfg01411c.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    std::fs::create_dir_all(dir.join("var/etc")).unwrap();
    let mut conf = format!(
        "# auto-generated config file from /etc/config/dhcp\nconf-dir={}\n",
        conf_dir.display()
    );
    for line in sections.iter().flat_map(IpsetSection::init_lines) {
        if line.starts_with(&format!("{kind}=")) {
            conf.push_str(&line);
            conf.push('\n');
        }
    }
    let path = dir.join("var/etc/dnsmasq.conf.cfg01411c");
    std::fs::write(&path, &conf).unwrap();
    eprintln!("{}:\n{conf}", path.display());
    format!("--conf-file={}", path.display())
}

fn flows(socket: &Path) -> Vec<FlowInfo> {
    match query(socket, &Request::Flows) {
        Ok(Response::Flows(list)) => list.flows,
        other => panic!("flows: {other:?}"),
    }
}

fn ipset_list(tb: &Testbed, set: &str) -> String {
    tb.run_in(Ns::Router, &["ipset", "list", set])
        .unwrap_or_else(|e| panic!("{e:#}"))
}

fn members(listing: &str) -> Vec<String> {
    listing
        .split("Members:")
        .nth(1)
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn daemon_log_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn rule_metric(metrics: &str, name: &str, rule: &str) -> f64 {
    metric_value(metrics, name, &[("rule", rule)]).unwrap_or(0.0)
}

fn download(tb: &Testbed, server: u8, port: u16, secs: u32) -> f64 {
    tb.run_iperf(IperfEnds { client: 1, server }, port, secs, "cubic", true, &[])
        .and_then(|r| r.wait())
        .unwrap_or_else(|e| panic!("download from server {server}: {e:#}"))
        .goodput_mbps
}

#[test]
#[ignore = "needs root, network namespaces and dnsmasq: scripts/test.sh runs it (--include-ignored)"]
fn rules_by_name_with_dnsmasq() {
    require_netns();
    if let Some(why) = dnsmasq::dnsmasq_missing() {
        panic!("cannot run: {why}");
    }
    let dir = std::env::temp_dir().join(format!("ssnames-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("slipstream.toml");
    std::fs::write(&config_path, config_text(&dir)).unwrap();
    let config = slipstream_config::load(&config_path).unwrap_or_else(|e| panic!("{e}"));

    let tb = Testbed::build(TopologySpec {
        servers: 2,
        ..TopologySpec::with_prefix(unique_prefix("ssnm"))
    })
    .expect("testbed");
    let srv = |n: u8, v6: bool| tb.server_addr_of(n, v6);

    // Upstream DNS (authoritative for the test names) on server 1.
    let upstream = srv(1, false);
    dnsmasq::start(
        &tb,
        Ns::server(1),
        "dnsmasq-upstream",
        &[
            format!("--listen-address={upstream}"),
            format!("--host-record={BG_NAME},{},{}", srv(1, false), srv(1, true)),
            format!("--host-record={OTHER_NAME},{},{}", srv(2, false), srv(2, true)),
        ],
        &dir.join("upstream.log"),
    )
    .expect("upstream dnsmasq");

    let daemon_log = dir.join("slipstreamd.log");
    let daemon = Daemon::start(&tb, &daemon_binary(), &config_path, "127.0.0.1:9617", &daemon_log)
        .expect("slipstreamd starts");
    // OpenWrt: no snippet file (names.dnsmasq_conf is off by default); the rules reach dnsmasq
    // as dhcp sections, which dnsmasq's init writes into the instance's generated config.
    assert_eq!(config.names.dnsmasq_conf, None);
    assert!(!Path::new("/tmp/dnsmasq.d/slipstream.conf").exists());
    let sections = uci_sections(&config_path);
    assert_eq!(sections.len(), 1, "{sections:?}");
    assert_eq!(sections[0].sets, ["ss_dst_games_4", "ss_dst_games_6"]);

    // The router's resolver, an OpenWrt-style instance built for fw3 (ipset), forwarding to
    // the upstream.
    let instance = openwrt_instance(&dir, &sections, "ipset");
    let router_dns = tb.router_lan_addr(false);
    let router_dnsmasq = dnsmasq::start(
        &tb,
        Ns::Router,
        "dnsmasq-router",
        &[
            format!("--listen-address={router_dns}"),
            format!("--server={upstream}"),
            instance,
        ],
        &dir.join("router-dns.log"),
    )
    .expect("router dnsmasq");
    let _resolv = ResolvConf::set(&tb, Ns::Client, router_dns).expect("client resolv.conf");

    eprintln!("== fw3 style: iptables-legacy + ipset, dnsmasq ipset=");
    let resolved_at = Instant::now();
    let bg4 = dnsmasq::resolve(&tb, Ns::Client, BG_NAME, false).unwrap();
    let bg6 = dnsmasq::resolve(&tb, Ns::Client, BG_NAME, true).unwrap();
    let other4 = dnsmasq::resolve(&tb, Ns::Client, OTHER_NAME, false).unwrap();
    eprintln!("{BG_NAME} -> {bg4:?} {bg6:?}; {OTHER_NAME} -> {other4:?}");
    assert_eq!(bg4, [srv(1, false)]);
    assert_eq!(bg6, [srv(1, true)]);
    assert_eq!(other4, [srv(2, false)]);
    let set4 = ipset_list(&tb, "ss_dst_games_4");
    eprintln!("ipset ss_dst_games_4 after the lookups:\n{set4}");
    assert_eq!(members(&set4), [srv(1, false).to_string()], "{set4}");
    assert!(set4.contains("timeout"), "{set4}");
    assert_eq!(
        members(&ipset_list(&tb, "ss_dst_games_6")),
        [srv(1, true).to_string()]
    );
    // `slipstream status` shows the sets and what they hold.
    let status = match query(&config.control.socket, &Request::Status) {
        Ok(Response::Status(st)) => st,
        other => panic!("status: {other:?}"),
    };
    let counts: Vec<(String, Option<usize>)> = status
        .name_sets
        .iter()
        .map(|n| (n.set.clone(), n.entries))
        .collect();
    eprintln!("status name sets: {counts:?}");
    assert!(counts.contains(&("ss_dst_games_4".into(), Some(1))), "{counts:?}");
    assert!(counts.contains(&("ss_host_deck_4".into(), Some(0))), "{counts:?}");

    // Two downloads at once: from the background name's address and from the other one.
    tb.start_iperf_server_in(Ns::server(1), 5201).unwrap();
    tb.start_iperf_server_in(Ns::server(2), 5202).unwrap();
    tb.start_iperf_server_in(Ns::server(1), 5203).unwrap();
    let socket = config.control.socket.clone();
    let (bg_mbps, other_mbps, seen) = std::thread::scope(|s| {
        let bg = s.spawn(|| download(&tb, 1, 5201, 12));
        let other = s.spawn(|| download(&tb, 2, 5202, 12));
        std::thread::sleep(Duration::from_secs(6));
        let seen = flows(&socket);
        (bg.join().unwrap(), other.join().unwrap(), seen)
    });
    eprintln!("downloads: {BG_NAME} {bg_mbps:.2} Mbit/s, {OTHER_NAME} {other_mbps:.2} Mbit/s");
    for f in &seen {
        eprintln!(
            "flow {:?} rule {} [{}] rwnd {:?} host window {:?}",
            f.endpoints, f.rule, f.matched_by, f.rwnd_bytes, f.host_window_bytes
        );
    }
    let bg_port = format!("{}:5201", srv(1, false));
    let bg_flow = seen
        .iter()
        .find(|f| f.endpoints.contains(&bg_port))
        .unwrap_or_else(|| panic!("no flow to {bg_port} in the daemon: {seen:?}"));
    assert_eq!(bg_flow.rule, "games");
    assert_eq!(bg_flow.matched_by, "domains games.test");
    let other_addr = srv(2, false).to_string();
    assert!(
        !seen
            .iter()
            .any(|f| f.endpoints.iter().any(|e| e.starts_with(&other_addr))),
        "the flow of the name of no rule reached the daemon: {seen:?}"
    );
    let metrics = daemon.scrape(&tb).unwrap();
    let rewritten = rule_metric(&metrics, "slipstream_rule_packets_rewritten_total", "games");
    let started = rule_metric(&metrics, "slipstream_rule_flows_started_total", "games");
    eprintln!("rule games: {started} flows started, {rewritten} packets rewritten (clamped)");
    assert!(
        started >= 1.0 && rewritten > 0.0,
        "games flow not clamped:\n{metrics}"
    );
    assert!(
        other_mbps > bg_mbps,
        "the background download ({bg_mbps:.2} Mbit/s) did not yield to the other ({other_mbps:.2} Mbit/s)"
    );

    // Expiry: no new lookup, so the entry goes after the set's timeout.
    let expiry = resolved_at + Duration::from_secs(SET_TIMEOUT_SECS + 2);
    std::thread::sleep(expiry.saturating_duration_since(Instant::now()));
    let after = ipset_list(&tb, "ss_dst_games_4");
    eprintln!(
        "ipset ss_dst_games_4 {:.0} s after the lookup:\n{after}",
        resolved_at.elapsed().as_secs_f64()
    );
    assert!(members(&after).is_empty(), "entry did not expire:\n{after}");
    download(&tb, 1, 5201, 2);
    let metrics = daemon.scrape(&tb).unwrap();
    assert_eq!(
        rule_metric(&metrics, "slipstream_rule_flows_started_total", "games"),
        started,
        "a connection after the entry expired was still classed"
    );

    eprintln!("== lan_hostnames from the lease file");
    let leases = dir.join("dhcp.leases");
    let client = tb.client_addr(false);
    std::fs::write(&leases, format!("0 02:00:00:00:00:01 {client} steam-deck *\n")).unwrap();
    wait_for("the lease in ss_host_deck_4", 5, || {
        members(&ipset_list(&tb, "ss_host_deck_4")) == [client.to_string()]
    });
    download(&tb, 1, 5203, 3);
    let metrics = daemon.scrape(&tb).unwrap();
    let deck_started = rule_metric(&metrics, "slipstream_rule_flows_started_total", "deck");
    assert!(
        deck_started >= 1.0,
        "the named host's flow was not classed:\n{metrics}"
    );
    let deck_flow = flows(&socket).into_iter().find(|f| f.rule == "deck");
    assert_eq!(
        deck_flow.map(|f| f.matched_by).as_deref(),
        Some("host steam-deck")
    );
    // The lease moves to another address: the set follows, the host's flows are no longer its.
    let moved: IpAddr = "10.77.3.222".parse().unwrap();
    std::fs::write(&leases, format!("0 02:00:00:00:00:01 {moved} steam-deck *\n")).unwrap();
    wait_for("the moved lease in ss_host_deck_4", 5, || {
        members(&ipset_list(&tb, "ss_host_deck_4")) == [moved.to_string()]
    });
    download(&tb, 1, 5203, 2);
    let metrics = daemon.scrape(&tb).unwrap();
    assert_eq!(
        rule_metric(&metrics, "slipstream_rule_flows_started_total", "deck"),
        deck_started,
        "a flow of the old address was classed after the lease moved"
    );
    let log = daemon.log();
    assert!(
        log.contains("rule \"deck\": named LAN hosts now at [10.77.3.222]"),
        "{log}"
    );

    let status = daemon.stop().expect("slipstreamd stops");
    assert!(
        status.success(),
        "exit status {status}:\n{}",
        std::fs::read_to_string(&daemon_log).unwrap_or_default()
    );
    // Logs for a system log off a terminal: no colour codes, no timestamps (logd adds one).
    let log = daemon_log_text(&daemon_log);
    assert!(!log.contains('\x1b'), "colour codes in the log:\n{log}");
    assert!(
        log.lines().any(|l| l.starts_with("slipstreamd running: ")),
        "no plain start line:\n{log}"
    );
    let left = tb.run_in(Ns::Router, &["ipset", "list", "-n"]).unwrap();
    assert!(!left.lines().any(|l| l.starts_with("ss_")), "ipsets left: {left}");
    eprintln!("fw3 style (ipset): ran");

    nft_style(&tb, &config, &dir, &sections, router_dnsmasq, upstream);
    let _ = std::fs::remove_dir_all(&dir);
}

/// fw4 style: the nft table with its sets (queue statements swapped for accept), dnsmasq with
/// nftset= lines, and the flows' conntrack marks.
fn nft_style(
    tb: &Testbed,
    config: &slipstream_config::Config,
    dir: &Path,
    sections: &[IpsetSection],
    old_dns: u32,
    upstream: IpAddr,
) {
    eprintln!("== fw4 style: nftables sets, dnsmasq nftset=");
    let ruleset = slipstream_firewall::plan(config, slipstream_firewall::Backend::Nftables)
        .nft_ruleset
        .unwrap();
    let without_queue: String = ruleset
        .lines()
        .map(|l| match l.find("queue num") {
            Some(i) => format!("{}accept\n", &l[..i]),
            None => format!("{l}\n"),
        })
        .collect();
    let mut nft = tb.exec(Ns::Router, &["nft", "-f", "-"]);
    nft.stdin(std::process::Stdio::piped());
    let mut child = nft.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(without_queue.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "nft -f failed:\n{without_queue}");

    // The same instance, now as a dnsmasq built for fw4 runs it (nftset lines).
    let instance = openwrt_instance(dir, sections, "nftset");
    let _ = std::process::Command::new("kill")
        .arg(old_dns.to_string())
        .status();
    std::thread::sleep(Duration::from_millis(300));
    let router_dns = tb.router_lan_addr(false);
    dnsmasq::start(
        tb,
        Ns::Router,
        "dnsmasq-router-nft",
        &[
            format!("--listen-address={router_dns}"),
            format!("--server={upstream}"),
            instance,
        ],
        &dir.join("router-dns-nft.log"),
    )
    .expect("router dnsmasq (nftset)");
    let resolved_at = Instant::now();
    let bg = dnsmasq::resolve(tb, Ns::Client, BG_NAME, false).unwrap();
    let other = dnsmasq::resolve(tb, Ns::Client, OTHER_NAME, false).unwrap();
    assert_eq!(bg, [tb.server_addr_of(1, false)]);
    assert_eq!(other, [tb.server_addr_of(2, false)]);
    let list_set = || {
        tb.run_in(
            Ns::Router,
            &["nft", "list", "set", "inet", "slipstream", "ss_dst_games_4"],
        )
        .unwrap()
    };
    let set = list_set();
    eprintln!("nft set after the lookups:\n{set}");
    assert!(set.contains(&format!("{} expires", bg[0])), "{set}");
    assert!(!set.contains(&other[0].to_string()), "{set}");

    // Only this phase's connections in the table (the earlier ones linger in TIME_WAIT).
    tb.run_in(Ns::Router, &["conntrack", "-F"]).unwrap();
    std::thread::scope(|s| {
        let a = s.spawn(|| download(tb, 1, 5201, 3));
        let b = s.spawn(|| download(tb, 2, 5202, 3));
        std::thread::sleep(Duration::from_secs(2));
        let ct = tb
            .run_in(Ns::Router, &["conntrack", "-L", "-p", "tcp"])
            .unwrap_or_default();
        let mark_of = |server: IpAddr, port: u16| -> Option<String> {
            ct.lines()
                .find(|l| {
                    l.contains(" ESTABLISHED ")
                        && l.contains(&format!("dst={server} "))
                        && l.contains(&format!("dport={port} "))
                })
                .and_then(|l| {
                    l.split_whitespace()
                        .find_map(|w| w.strip_prefix("mark="))
                        .map(str::to_owned)
                })
        };
        let bg_mark = mark_of(tb.server_addr_of(1, false), 5201);
        let other_mark = mark_of(tb.server_addr_of(2, false), 5202);
        eprintln!("conntrack marks: {BG_NAME} flow {bg_mark:?}, {OTHER_NAME} flow {other_mark:?}");
        let rule1 = config.datapath.mark_for_rule(1).to_string();
        assert_eq!(bg_mark.as_deref(), Some(rule1.as_str()), "{ct}");
        assert_eq!(other_mark.as_deref(), Some("0"), "{ct}");
        a.join().unwrap();
        b.join().unwrap();
    });

    // Expiry: no new lookup, so the element goes after the set's timeout, and a new connection
    // to the same address is no longer marked.
    let expiry = resolved_at + Duration::from_secs(SET_TIMEOUT_SECS + 2);
    std::thread::sleep(expiry.saturating_duration_since(Instant::now()));
    let after = list_set();
    eprintln!(
        "nft set {:.0} s after the lookup:\n{after}",
        resolved_at.elapsed().as_secs_f64()
    );
    assert!(
        !after.contains(&bg[0].to_string()),
        "element did not expire:\n{after}"
    );
    tb.run_in(Ns::Router, &["conntrack", "-F"]).unwrap();
    std::thread::scope(|s| {
        let a = s.spawn(|| download(tb, 1, 5201, 3));
        std::thread::sleep(Duration::from_secs(2));
        let ct = tb
            .run_in(Ns::Router, &["conntrack", "-L", "-p", "tcp"])
            .unwrap_or_default();
        let server = tb.server_addr_of(1, false);
        let line = ct
            .lines()
            .find(|l| {
                l.contains(" ESTABLISHED ")
                    && l.contains(&format!("dst={server} "))
                    && l.contains("dport=5201 ")
            })
            .unwrap_or_else(|| panic!("no conntrack entry of the download:\n{ct}"));
        eprintln!("after expiry: {line}");
        assert!(
            line.contains(" mark=0 "),
            "a connection after the element expired was still marked: {line}"
        );
        a.join().unwrap();
    });
    eprintln!(
        "fw4 style (nftset): ran (classification in the kernel; queueing needs nft queue, absent here)"
    );
}

/// The daemon's log as procd files it (`procd_set_param stdout 1` / `stderr 1`): each stdout line
/// at daemon.info, each stderr line at daemon.err (procd's `instance_stdout` / `instance_stderr`),
/// shown as `logread` shows them. The real binary, with its output on pipes as under procd, in a
/// network namespace of its own, where it starts and stops at a control socket it cannot bind.
#[test]
#[ignore = "needs root (a network namespace): scripts/test.sh runs it (--include-ignored)"]
fn daemon_logs_as_procd_files_them() {
    let dir = std::env::temp_dir().join(format!("sslogs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("slipstream.toml");
    std::fs::write(
        &config,
        "[datapath]\nlan_interfaces = [\"lo\"]\nengine = \"nfqueue\"\n[metrics]\nlisten = \"127.0.0.1:9617\"\n\
         [control]\nsocket = \"/proc/no-such-dir/ctl.sock\"\n[[rules]]\nname = \"bt\"\nremote_ports = [6881]\n",
    )
    .unwrap();
    let out = std::process::Command::new("timeout")
        .args(["30", "unshare", "-n"])
        .arg(daemon_binary())
        .arg("--config")
        .arg(&config)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("unshare -n slipstreamd runs");
    let _ = std::fs::remove_dir_all(&dir);
    let tag = "slipstreamd[1]";
    let logread: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| format!("daemon.info {tag}: {l}"))
        .chain(
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .map(|l| format!("daemon.err {tag}: {l}")),
        )
        .collect();
    eprintln!("exit {:?}; logread:\n{}", out.status.code(), logread.join("\n"));
    assert!(!out.status.success());
    let start = format!(
        "daemon.info {tag}: slipstreamd {} starting with ",
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        logread.iter().any(|l| l.starts_with(&start)),
        "INFO not filed as info"
    );
    assert!(
        logread
            .iter()
            .any(|l| l.starts_with(&format!("daemon.err {tag}: error: ")) && l.contains("/proc/no-such-dir")),
        "ERROR not filed as err"
    );
    assert!(logread.iter().all(|l| !l.contains('\x1b')), "colour codes");
}
