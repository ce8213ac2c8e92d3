//! Root integration test of UDP rules (issue 24) with real traffic through a router namespace
//! (client `ssfuc<pid>` - router `ssfur<pid>` - server `ssfus<pid>`; `ssfun...` for nftables), no daemon on the queues
//! (`--queue-bypass` passes the packets). Ignored by default; scripts/test.sh runs it with
//! --ignored.
//!
//! Measured with the rules' packet counters and conntrack: a UDP flow to a background port gets
//! the rule's connmark and every packet of it, both ways, hits a queueing rule, also when the
//! far end opens it; a UDP flow to port 53 keeps mark 0, is never queued, and all its packets but
//! the first leave at the chain's first rule; `quic = "refuse"` makes a UDP/443 send fail with
//! ECONNREFUSED at the client while the server's socket receives nothing and nothing is queued,
//! and TCP/443 works; the
//! same with the nftables ruleset (its queue statements swapped for `accept`, since this
//! kernel's nftables has no queue expression).

use slipstream_config::{parse, Config};
use slipstream_firewall::{plan, Backend, Firewall, PlannedCommand};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

mod common;
use common::{have, routed, skip_reason, Netns, Routed};

const CLIENT: &str = "10.78.1.2";
const SERVER: &str = "10.78.2.2";

const RULES: &str = r#"
[datapath]
lan_interfaces = ["ssulan"]
ipv6 = false
[[rules]]
name = "utp"
remote_ports = [6881]
protocol = "udp"
[[rules]]
name = "web"
remote_ports = [443]
protocol = "both"
quic = "refuse"
"#;

/// Runs `f` on a thread inside namespace `ns`: sockets it creates stay in that namespace.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        slipstream_testbed::enter_netns(&ns).unwrap();
        f()
    })
    .join()
    .unwrap()
}

fn udp_in(ns: &str, addr: &str) -> UdpSocket {
    let addr: SocketAddr = addr.parse().unwrap();
    let s = in_ns(ns, move || UdpSocket::bind(addr).unwrap());
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

/// The three namespaces (a prefix per test: the tests of this file run in parallel).
fn topology(prefix: &str) -> Routed {
    routed(prefix, "ssulan", "ssuwan", 78)
}

/// `n` datagrams of `len` bytes from `from` to `to`, each echoed back; panics if one is lost.
fn echo(from: &UdpSocket, to: &UdpSocket, n: usize, len: usize) {
    let dst = to.local_addr().unwrap();
    let mut buf = vec![0u8; 2048];
    for i in 0..n {
        let payload = vec![i as u8; len];
        from.send_to(&payload, format!("{SERVER}:{}", dst.port()))
            .unwrap();
        let (got, peer) = to.recv_from(&mut buf).expect("datagram through the router");
        assert_eq!(got, len);
        to.send_to(&buf[..got], peer).unwrap();
        let (back, _) = from.recv_from(&mut buf).expect("echo through the router");
        assert_eq!(back, len);
    }
}

/// Packet counters of the SLIPSTREAM chain: (UDP fast-path RETURN, UDP classify jump, ACK queue,
/// data queue), the two queue rules being the NFQUEUE datapath's shared ones.
fn counters(rtr: &Netns) -> (u64, u64, u64, u64) {
    let out = rtr.run(
        "iptables-legacy",
        &["-w", "-t", "mangle", "-L", "SLIPSTREAM", "-v", "-n", "-x"],
    );
    let count = |pred: &dyn Fn(&str) -> bool| -> u64 {
        let found: Vec<u64> = out
            .lines()
            .filter(|l| pred(l))
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(found.len(), 1, "{out}");
        found[0]
    };
    // The protocol column: a name, or the number where /etc/protocols is missing.
    let udp = |l: &str| matches!(l.split_whitespace().nth(3), Some("udp" | "17"));
    (
        count(&|l| udp(l) && l.contains("RETURN") && l.contains("! ctstate NEW")),
        count(&|l| udp(l) && l.contains("SLIPSTREAM_CLASSIFY")),
        count(&|l| l.contains("NFQUEUE") && l.contains("length 0:128")),
        count(&|l| l.contains("NFQUEUE num 8471")),
    )
}

fn conntrack_udp(rtr: &Netns, port: &str) -> String {
    rtr.run("conntrack", &["-L", "-p", "udp", "--dport", port])
}

/// A UDP/443 send from the client: the error the second read sees (the ICMP error arrives after
/// the send), `None` if the datagram got through.
fn quic_attempt(cli: &str, server_443: &UdpSocket) -> Option<ErrorKind> {
    let quic = udp_in(cli, &format!("{CLIENT}:0"));
    quic.connect(format!("{SERVER}:443")).unwrap();
    quic.send(b"quic initial").unwrap();
    let mut buf = [0u8; 64];
    let err = quic.recv(&mut buf).err().map(|e| e.kind());
    server_443
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    match server_443.recv_from(&mut buf) {
        Ok(_) => None,
        Err(_) => err,
    }
}

fn tcp_443_works(t: &Routed) {
    let listener = in_ns(&t.srv.0, || TcpListener::bind(format!("{SERVER}:443")).unwrap());
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        got.len()
    });
    let mut c = in_ns(&t.cli.0, || {
        TcpStream::connect_timeout(&format!("{SERVER}:443").parse().unwrap(), Duration::from_secs(3)).unwrap()
    });
    c.write_all(&vec![7u8; 200_000]).unwrap();
    drop(c);
    assert_eq!(server.join().unwrap(), 200_000, "TCP/443 must pass");
}

#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn udp_flows_are_classed_queued_or_refused() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    assert!(have("conntrack"), "conntrack not found");
    let t = topology("ssfu");
    let config: Config = parse(RULES, "udp").unwrap();
    // First TCP rules only (UDP never enters the chains), then a reload to the UDP rules: the UDP
    // hook jump and table filter's rules are added in place.
    let tcp_only = parse(
        &RULES
            .replace("protocol = \"udp\"\n", "")
            .replace("protocol = \"both\"\nquic = \"refuse\"\n", ""),
        "tcp",
    )
    .unwrap();
    let mut fw = Firewall::install_with(&tcp_only, Backend::IptablesLegacy, t.rtr.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    let mangle = t.rtr.run("iptables-legacy-save", &["-t", "mangle"]);
    assert!(!mangle.contains("udp"), "{mangle}");
    // Table filter was not even set up (listing it would have: every packet would pass its hooks).
    let tables = t.rtr.run("cat", &["/proc/net/ip_tables_names"]);
    assert!(!tables.contains("filter"), "{tables}");
    fw.replace(&config).unwrap_or_else(|e| panic!("{e}"));

    // Installed as planned, in canonical form: mangle and filter read back line for line.
    let p = &plan(&config, Backend::IptablesLegacy).iptables[0];
    for (table, chain, lines) in [
        ("mangle", "SLIPSTREAM", &p.main_rules),
        ("mangle", "SLIPSTREAM_CLASSIFY", &p.classify_rules),
        ("filter", "SLIPSTREAM_REFUSE", &p.refuse_rules),
    ] {
        let listed = t.rtr.run("iptables-legacy", &["-t", table, "-S", chain]);
        let listed: Vec<&str> = listed.lines().filter(|l| l.starts_with("-A ")).collect();
        assert_eq!(&listed, lines, "{table} {chain}");
    }
    let filter = t.rtr.run("iptables-legacy-save", &["-t", "filter"]);
    assert!(
        filter.contains("-A FORWARD -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE\n"),
        "{filter}"
    );
    assert!(fw.check().unwrap());

    // Ordinary UDP (a DNS-like exchange): 20 queries, 20 answers.
    let dns = udp_in(&t.srv.0, &format!("{SERVER}:53"));
    let client = udp_in(&t.cli.0, &format!("{CLIENT}:0"));
    t.rtr.run("iptables-legacy", &["-w", "-t", "mangle", "-Z"]);
    echo(&client, &dns, 20, 40);
    let (fast, classify, acks, data) = counters(&t.rtr);
    eprintln!("ordinary UDP, 40 packets: fast-path returns {fast}, classify walks {classify}, queued {acks} + {data}");
    assert_eq!((acks, data), (0, 0), "ordinary UDP must never be queued");
    assert_eq!(classify, 1, "only the flow's first packet is classified");
    assert_eq!(fast, 39, "every other packet leaves at the first rule");
    let ct = conntrack_udp(&t.rtr, "53");
    assert!(ct.contains("mark=0 "), "{ct}");

    // Background UDP (uTP-like): small and large datagrams, both directions queued.
    let peer = udp_in(&t.srv.0, &format!("{SERVER}:6881"));
    t.rtr.run("iptables-legacy", &["-w", "-t", "mangle", "-Z"]);
    echo(&client, &peer, 10, 40);
    echo(&client, &peer, 10, 1000);
    let (fast, classify, acks, data) = counters(&t.rtr);
    eprintln!("background UDP, 40 packets: queued {acks} (ACK queue) + {data} (data queue)");
    assert_eq!(fast, 0);
    assert_eq!(classify, 1);
    assert_eq!(
        (acks, data),
        (20, 20),
        "every packet, both ways, split by length like TCP"
    );
    let ct = conntrack_udp(&t.rtr, "6881");
    assert!(ct.contains("mark=65536 "), "connmark not set to rule 1:\n{ct}");

    // A flow the far end opens (an incoming uTP peer): classed on its first packet from the WAN.
    let lan_peer = udp_in(&t.cli.0, &format!("{CLIENT}:40000"));
    t.rtr.run("iptables-legacy", &["-w", "-t", "mangle", "-Z"]);
    peer.send_to(b"hello", format!("{CLIENT}:40000")).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(lan_peer.recv_from(&mut buf).unwrap().0, 5);
    let (_, classify, acks, _) = counters(&t.rtr);
    assert_eq!(
        (classify, acks),
        (1, 1),
        "an incoming flow's first packet classed and queued"
    );
    let ct = t.rtr.run("conntrack", &["-L", "-p", "udp", "--sport", "6881"]);
    assert!(ct.contains("mark=65536 "), "{ct}");

    // quic = "refuse": UDP/443 refused at the client (the server's socket gets nothing, so the
    // refusal is the router's), twice in a row; TCP/443 of the same rule works.
    let server_443 = udp_in(&t.srv.0, &format!("{SERVER}:443"));
    t.rtr.run("iptables-legacy", &["-w", "-t", "mangle", "-Z"]);
    for _ in 0..2 {
        assert_eq!(
            quic_attempt(&t.cli.0, &server_443),
            Some(ErrorKind::ConnectionRefused)
        );
    }
    let (_, classify, acks, data) = counters(&t.rtr);
    assert_eq!(
        classify, 2,
        "each attempt is classed anew (its conntrack entry went with it)"
    );
    assert_eq!(
        (acks, data),
        (0, 0),
        "refused packets are not queued to the daemon"
    );
    tcp_443_works(&t);

    // A reload without the refusal removes the filter rules (in the same restore) and lets
    // UDP/443 through; one with it puts them back.
    let without = parse(&RULES.replace("quic = \"refuse\"\n", ""), "udp").unwrap();
    fw.replace(&without).unwrap_or_else(|e| panic!("{e}"));
    assert!(!t
        .rtr
        .run("iptables-legacy-save", &["-t", "filter"])
        .contains("SLIPSTREAM"));
    assert_eq!(quic_attempt(&t.cli.0, &server_443), None, "UDP/443 passes");
    assert!(fw.check().unwrap());
    fw.replace(&config).unwrap_or_else(|e| panic!("{e}"));
    assert!(fw.check().unwrap());
    assert_eq!(
        quic_attempt(&t.cli.0, &server_443),
        Some(ErrorKind::ConnectionRefused)
    );

    fw.remove().unwrap_or_else(|e| panic!("{e}"));
    for table in ["mangle", "filter"] {
        let dump = t.rtr.run("iptables-legacy-save", &["-t", table]);
        assert!(
            !dump.contains("SLIPSTREAM"),
            "{table} still has Slipstream's rules:\n{dump}"
        );
    }
    assert_eq!(
        quic_attempt(&t.cli.0, &server_443),
        None,
        "nothing refused once removed"
    );

    // IPv6 too: both families' rules are taken by the kernel and read back as planned.
    let dual = parse(&RULES.replace("ipv6 = false\n", ""), "udp").unwrap();
    let fw = Firewall::install_with(&dual, Backend::IptablesLegacy, t.rtr.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    // A crash (nothing removed) and a new start take the rules over without doubling a jump.
    std::mem::forget(fw);
    let fw = Firewall::install_with(&dual, Backend::IptablesLegacy, t.rtr.runner())
        .unwrap_or_else(|e| panic!("{e}"));
    for save in ["iptables-legacy-save", "ip6tables-legacy-save"] {
        let dump = t.rtr.run(save, &[]);
        for jump in [
            "-A FORWARD -p tcp -j SLIPSTREAM",
            "-A FORWARD -p udp -j SLIPSTREAM",
            "-A FORWARD -p udp -m udp --dport 443 -j SLIPSTREAM_REFUSE",
        ] {
            assert_eq!(
                dump.lines().filter(|l| *l == jump).count(),
                1,
                "{save}: {jump}\n{dump}"
            );
        }
    }
    for p in &plan(&dual, Backend::IptablesLegacy).iptables {
        for (table, chain, lines) in [
            ("mangle", "SLIPSTREAM", &p.main_rules),
            ("filter", "SLIPSTREAM_REFUSE", &p.refuse_rules),
        ] {
            let listed = t.rtr.run(p.family.program(), &["-t", table, "-S", chain]);
            let listed: Vec<&str> = listed.lines().filter(|l| l.starts_with("-A ")).collect();
            assert_eq!(&listed, lines, "{} {table} {chain}", p.family.program());
        }
    }
    assert_eq!(plan(&dual, Backend::IptablesLegacy).iptables.len(), 2);
    assert!(fw.check().unwrap());
    fw.remove().unwrap_or_else(|e| panic!("{e}"));
    let dump = t.rtr.run("ip6tables-legacy-save", &[]);
    assert!(!dump.contains("SLIPSTREAM"), "{dump}");
}

/// The nftables ruleset of the same rules, its queue statements swapped for `accept` (this
/// kernel has no nft queue expression): the kernel takes it, `reject` works in Slipstream's
/// filter-type chains at priority mangle, and ordinary UDP keeps mark 0.
#[test]
#[ignore = "needs root and network namespaces: scripts/test.sh runs it (--ignored)"]
fn nftables_rejects_quic_and_classes_udp() {
    if let Some(why) = skip_reason() {
        panic!("cannot run here: {why}");
    }
    assert!(have("nft") && have("conntrack"), "nft or conntrack not found");
    let t = topology("ssfun");
    let config: Config = parse(RULES, "udp").unwrap();
    let text = plan(&config, Backend::Nftables).nft_ruleset.unwrap();
    let without_queue: String = text
        .lines()
        .map(|l| match l.find("queue num") {
            Some(i) => format!("{}accept\n", &l[..i]),
            None => format!("{l}\n"),
        })
        .collect();
    t.rtr
        .runner()
        .run(&PlannedCommand::new("nft", &["-f", "-"]).with_stdin(without_queue.clone()))
        .unwrap_or_else(|e| panic!("{e}\n{without_queue}"));

    let server_443 = udp_in(&t.srv.0, &format!("{SERVER}:443"));
    assert_eq!(
        quic_attempt(&t.cli.0, &server_443),
        Some(ErrorKind::ConnectionRefused)
    );
    tcp_443_works(&t);
    let client = udp_in(&t.cli.0, &format!("{CLIENT}:0"));
    echo(&client, &udp_in(&t.srv.0, &format!("{SERVER}:53")), 5, 40);
    echo(&client, &udp_in(&t.srv.0, &format!("{SERVER}:6881")), 5, 40);
    assert!(conntrack_udp(&t.rtr, "53").contains("mark=0 "));
    let ct = conntrack_udp(&t.rtr, "6881");
    assert!(ct.contains("mark=65536 "), "{ct}");
    t.rtr.run("nft", &["delete", "table", "inet", "slipstream"]);
}
