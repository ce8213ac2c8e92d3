//! Helpers the firewall's namespace tests share (each test file uses a part of them).
#![allow(
    dead_code,
    reason = "compiled into every test file, each of which uses a part"
)]

use slipstream_firewall::{CommandRunner, PlannedCommand};
use std::process::Command;

/// Whether `program -V` runs.
pub(crate) fn have(program: &str) -> bool {
    Command::new(program).arg("-V").output().is_ok()
}

/// Why the test cannot run here, if it cannot: not root, or an iptables-legacy tool missing.
pub(crate) fn skip_reason() -> Option<String> {
    slipstream_testbed::missing_prerequisite(&[
        "ip",
        "iptables-legacy",
        "iptables-legacy-restore",
        "ip6tables-legacy",
    ])
}

/// A network namespace deleted on drop.
pub(crate) struct Netns(pub(crate) String);

impl Netns {
    /// Creates namespace `name<pid>` (removing a leftover of that name first).
    pub(crate) fn create(name: &str) -> Netns {
        let name = format!("{name}{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let out = Command::new("ip").args(["netns", "add", &name]).output().unwrap();
        assert!(
            out.status.success(),
            "ip netns add: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Netns(name)
    }

    /// Runs firewall commands inside the namespace.
    pub(crate) fn runner(&self) -> CommandRunner {
        CommandRunner::in_netns(&self.0)
    }

    /// Runs `program args` inside the namespace; panics with the error if it fails.
    pub(crate) fn run(&self, program: &str, args: &[&str]) -> String {
        self.runner()
            .run(&PlannedCommand::new(program, args))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The mangle table as `program` (`iptables-legacy-save`, ...) prints it.
    pub(crate) fn save(&self, program: &str) -> String {
        self.run(program, &["-t", "mangle"])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A LAN host, a router and a server in three namespaces `<prefix>c`, `<prefix>r`, `<prefix>s`:
/// veth `lan` between host and router (10.`net`.1.0/24, the router .1), veth `wan` between router
/// and server (10.`net`.2.0/24, the router .1), default routes through the router, forwarding on.
pub(crate) struct Routed {
    pub(crate) cli: Netns,
    pub(crate) rtr: Netns,
    pub(crate) srv: Netns,
}

pub(crate) fn routed(prefix: &str, lan: &str, wan: &str, net: u8) -> Routed {
    let t = Routed {
        cli: Netns::create(&format!("{prefix}c")),
        rtr: Netns::create(&format!("{prefix}r")),
        srv: Netns::create(&format!("{prefix}s")),
    };
    let ip = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let (c, r, s) = (t.cli.0.as_str(), t.rtr.0.as_str(), t.srv.0.as_str());
    ip(&[
        "link", "add", lan, "netns", c, "type", "veth", "peer", "name", lan, "netns", r,
    ]);
    ip(&[
        "link", "add", wan, "netns", s, "type", "veth", "peer", "name", wan, "netns", r,
    ]);
    let addr = |link: u8, host: u8| format!("10.{net}.{link}.{host}");
    for (ns, dev, a) in [
        (c, lan, addr(1, 2)),
        (r, lan, addr(1, 1)),
        (r, wan, addr(2, 1)),
        (s, wan, addr(2, 2)),
    ] {
        ip(&["-n", ns, "addr", "add", &format!("{a}/24"), "dev", dev]);
        ip(&["-n", ns, "link", "set", dev, "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
    }
    ip(&["-n", c, "route", "add", "default", "via", &addr(1, 1)]);
    ip(&["-n", s, "route", "add", "default", "via", &addr(2, 1)]);
    t.rtr.run("sysctl", &["-qw", "net.ipv4.ip_forward=1"]);
    t
}
