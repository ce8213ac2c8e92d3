//! Helpers the daemon's namespace tests share (each test file uses a part of them).
#![allow(
    dead_code,
    reason = "compiled into every test file, each of which uses a part"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

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

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The `slipstream` binary beside this test's target directory (built if missing).
pub(crate) fn cli_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let mut dir = exe.parent().unwrap().to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let bin = dir.join("slipstream");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut c = Command::new(cargo);
        c.args(["build", "-p", "slipstream-cli", "--bin", "slipstream"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        let status = c.status().expect("cargo build -p slipstream-cli");
        assert!(status.success() && bin.exists(), "building {}", bin.display());
    }
    bin
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
