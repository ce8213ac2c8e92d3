//! Helpers the NFQUEUE namespace tests share.
use std::process::Command;

/// Runs `args[0] args[1..]`; panics with the command and its stderr if it fails.
pub(crate) fn sh(args: &[&str]) {
    if let Err(e) = slipstream_testbed::cmd::run(args[0], &args[1..]) {
        panic!("{e:#}");
    }
}

/// Moves the calling thread into a named network namespace.
pub(crate) fn enter_netns(name: &str) {
    slipstream_testbed::enter_netns(name).expect("enter the namespace");
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
