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
