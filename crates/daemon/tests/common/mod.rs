//! Helpers the daemon's namespace tests share (each test file uses a part of them).
#![allow(
    dead_code,
    reason = "compiled into every test file, each of which uses a part"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use slipstream_testbed::{unique_prefix, Testbed, TopologySpec};

/// Runs `args[0] args[1..]` and returns its stdout; panics with the command and its stderr if
/// it fails.
pub(crate) fn sh(args: &[&str]) -> String {
    slipstream_testbed::cmd::run(args[0], &args[1..]).unwrap_or_else(|e| panic!("{e}"))
}

/// Two namespaces joined by a veth pair, deleted on drop: `a` (the daemon's, `<subnet>.1` on
/// `vA`) and `b` (the server's, `<subnet>.2` on `vB`), named `<prefix>a<pid>` and `<prefix>b<pid>`.
pub(crate) struct Pair {
    /// The daemon's namespace.
    pub(crate) a: String,
    /// The server's namespace.
    pub(crate) b: String,
}

impl Pair {
    /// Creates both namespaces (removing leftovers of the same name first) and the link.
    pub(crate) fn create(prefix: &str, subnet: &str) -> Pair {
        let pid = std::process::id();
        let pair = Pair {
            a: format!("{prefix}a{pid}"),
            b: format!("{prefix}b{pid}"),
        };
        for ns in [&pair.a, &pair.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        sh(&[
            "ip", "-n", &pair.a, "link", "add", "vA", "type", "veth", "peer", "name", "vB", "netns", &pair.b,
        ]);
        sh(&[
            "ip",
            "-n",
            &pair.a,
            "addr",
            "add",
            &format!("{subnet}.1/24"),
            "dev",
            "vA",
        ]);
        sh(&[
            "ip",
            "-n",
            &pair.b,
            "addr",
            "add",
            &format!("{subnet}.2/24"),
            "dev",
            "vB",
        ]);
        sh(&["ip", "-n", &pair.a, "link", "set", "vA", "up"]);
        sh(&["ip", "-n", &pair.b, "link", "set", "vB", "up"]);
        pair
    }

    /// Adds `<subnet6>::1/64` on `vA` and `<subnet6>::2/64` on `vB` (no duplicate address
    /// detection: usable at once).
    pub(crate) fn add_v6(&self, subnet6: &str) {
        for (ns, dev, host) in [(&self.a, "vA", 1), (&self.b, "vB", 2)] {
            let addr = format!("{subnet6}::{host}/64");
            sh(&["ip", "-n", ns, "addr", "add", &addr, "dev", dev, "nodad"]);
        }
    }

    /// `args` as a command inside namespace `ns`.
    pub(crate) fn exec(ns: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).args(args);
        c
    }

    /// Runs `args` in the daemon's namespace; panics with its stderr if it fails.
    pub(crate) fn run_a(&self, args: &[&str]) -> String {
        let out = Self::exec(&self.a, args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// A started daemon, killed on drop (a failed assertion leaves no daemon behind).
pub(crate) struct Daemon(pub(crate) Option<Child>);

impl Daemon {
    /// Runs `argv` in namespace `ns` with `RUST_LOG=info` (the daemon's default), stdout and
    /// stderr to `log`. `ip netns exec` execs it: the child's pid is the program's.
    pub(crate) fn start(ns: &str, argv: &[&str], log: &Path) -> (Daemon, u32) {
        let logfile = std::fs::File::create(log).unwrap();
        let child = Pair::exec(ns, argv)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(logfile.try_clone().unwrap())
            .stderr(logfile)
            .spawn()
            .unwrap();
        let pid = child.id();
        (Daemon(Some(child)), pid)
    }

    /// Sends SIGTERM to `pid` (the daemon) and waits up to 10 s for it to exit: its exit code.
    pub(crate) fn terminate(&mut self, pid: u32) -> Option<i32> {
        slipstream_testbed::cmd::signal(pid, libc::SIGTERM);
        let mut child = self.0.take().expect("the daemon runs");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "no exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The `slipstream` CLI: a symlink named `slipstream` to the `slipstreamd` under test, which runs
/// the CLI when started under that name (one binary, as the package installs it).
pub(crate) fn cli_binary() -> PathBuf {
    let daemon = Path::new(env!("CARGO_BIN_EXE_slipstreamd"));
    let dir = daemon.parent().unwrap().join("multicall");
    let link = dir.join("slipstream");
    std::fs::create_dir_all(&dir).unwrap();
    // Replaced each time: a link of another name or target left behind must not be used.
    let tmp = dir.join(format!("slipstream.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(daemon, &tmp).unwrap();
    std::fs::rename(&tmp, &link).unwrap();
    link
}

/// Polls `pred` every 100 ms for up to 15 s; on timeout panics with `what` and the daemon's log.
pub(crate) fn wait_until(what: &str, log: &Path, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !pred() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; daemon log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A fresh directory `<tmp>/ssd-<name>-<pid>` for one test's config, socket and log.
pub(crate) struct TestDir {
    /// The directory.
    pub(crate) dir: PathBuf,
    /// `slipstream.sock` in it.
    pub(crate) socket: PathBuf,
    /// `slipstream.toml` in it.
    pub(crate) cfg: PathBuf,
    /// `daemon.log` in it.
    pub(crate) log: PathBuf,
}

impl TestDir {
    /// Creates the directory, removing a leftover of the same name first.
    pub(crate) fn new(name: &str) -> TestDir {
        let dir = std::env::temp_dir().join(format!("ssd-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir {
            socket: dir.join("slipstream.sock"),
            cfg: dir.join("slipstream.toml"),
            log: dir.join("daemon.log"),
            dir,
        }
    }
}

/// The namespace testbed (server - isp - router - LAN client) with no delay element (these tests
/// need no RTT, so no `slipstream-delay` binary either) and no IPv6, named `<prefix>...`.
pub(crate) fn forward_testbed(prefix: &str) -> Testbed {
    let spec = TopologySpec {
        one_way_delay_ms: 0.0,
        ipv6: false,
        ..TopologySpec::with_prefix(unique_prefix(prefix))
    };
    Testbed::build(spec).expect("testbed")
}

/// Starts `slipstreamd` on the testbed's router (`forward` hook, iptables, one rule "bt" for
/// ports 6881-6882, metrics on 127.0.0.1:9617, socket in `dir`) with `lan_interfaces` (TOML
/// array items) and `datapath` (more `[datapath]` lines, may be empty).
pub(crate) fn start_router_daemon(
    tb: &Testbed,
    dir: &TestDir,
    lan_interfaces: &str,
    datapath: &str,
) -> slipstream_testbed::daemon::Daemon {
    std::fs::write(
        &dir.cfg,
        format!(
            "[datapath]\nlan_interfaces = [{lan_interfaces}]\nhook = \"forward\"\n{datapath}\
             firewall = \"iptables\"\nipv6 = false\n\
             [metrics]\nlisten = \"127.0.0.1:9617\"\n\
             [control]\nsocket = \"{}\"\n\
             [[rules]]\nname = \"bt\"\nremote_ports = [\"6881-6882\"]\n",
            dir.socket.display()
        ),
    )
    .unwrap();
    slipstream_testbed::daemon::Daemon::start(
        tb,
        Path::new(env!("CARGO_BIN_EXE_slipstreamd")),
        &dir.cfg,
        "127.0.0.1:9617",
        &dir.dir.join("slipstreamd.log"),
    )
    .expect("slipstreamd starts")
}
