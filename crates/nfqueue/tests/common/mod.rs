//! Helpers the NFQUEUE namespace tests share.
#![allow(
    unsafe_code,
    reason = "setns(2) moves the calling thread into a test namespace"
)]

use std::os::fd::AsRawFd;
use std::process::Command;

/// Runs `args[0] args[1..]`; panics with the command and its stderr if it fails.
pub(crate) fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("run command");
    assert!(
        out.status.success(),
        "command failed: {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Moves the calling thread into a named network namespace.
pub(crate) fn enter_netns(name: &str) {
    let file = std::fs::File::open(format!("/var/run/netns/{name}")).expect("open netns");
    // SAFETY: setns on a valid namespace descriptor affects only the calling thread.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {name}");
}

/// Network namespaces deleted on drop.
pub(crate) struct Namespaces(pub(crate) Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}
