//! The host side: named namespaces (list, delete, clean up after a killed run), where the
//! workspace's binaries are, and whether testbeds can be built here at all.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::cmd;

/// Names of all named network namespaces (`ip netns list`).
pub fn list_netns() -> Result<Vec<String>> {
    let out = cmd::run("ip", &["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// SIGKILLs every process in namespace `name`, then deletes it.
pub(crate) fn delete_netns(name: &str) -> Result<()> {
    let pids = |n: &str| -> Vec<u32> {
        cmd::run("ip", &["netns", "pids", n])
            .map(|o| o.split_whitespace().filter_map(|p| p.parse().ok()).collect())
            .unwrap_or_default()
    };
    for pid in pids(name) {
        cmd::signal(pid, libc::SIGKILL);
    }
    cmd::wait_until(Duration::from_secs(2), || {
        pids(name).into_iter().all(|p| !cmd::pid_alive(p))
    });
    cmd::run("ip", &["netns", "del", name]).map(|_| ())
}

/// Removes every namespace whose name starts with `prefix` (processes inside are killed), e.g.
/// leftovers of a run that was SIGKILLed before its `Drop` ran. Returns the names removed.
/// Careful: this also removes namespaces of a *running* testbed with that prefix.
pub fn cleanup_stale(prefix: &str) -> Result<Vec<String>> {
    if prefix.is_empty() {
        bail!("cleanup_stale needs a non-empty prefix");
    }
    let mut removed = Vec::new();
    for name in list_netns()?.into_iter().filter(|n| n.starts_with(prefix)) {
        delete_netns(&name)?;
        removed.push(name);
    }
    Ok(removed)
}

/// Path of the `slipstream-delay` binary: `$SLIPSTREAM_DELAY_BIN` if set, else
/// `slipstream-delay` next to the current executable, or in its parent directory when the
/// executable lives in `target/<profile>/deps/` (test binaries). The caller must have built it:
/// `cargo build -p slipstream-testbed --bins` (same profile as the tests).
pub fn delay_binary() -> PathBuf {
    workspace_binary("slipstream-delay", "SLIPSTREAM_DELAY_BIN")
}

/// A binary of this workspace built beside the running executable (`target/<profile>/`, also
/// from `target/<profile>/deps/` where tests run), unless `env_var` names another path.
pub fn workspace_binary(name: &str, env_var: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env_var) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    binary_near(&exe, name)
}

pub(crate) fn binary_near(exe: &std::path::Path, name: &str) -> PathBuf {
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    dir.join(name)
}

/// Checks whether this process can build testbeds (root, `ip netns` usable, tools present).
/// Returns `Err(reason)` otherwise, for tests that skip themselves.
pub fn netns_supported() -> std::result::Result<(), String> {
    let tools = [
        "ip",
        "tc",
        "ethtool",
        "sysctl",
        "iptables-legacy",
        "ping",
        "iperf3",
    ];
    if let Some(why) = missing_prerequisite(&tools) {
        return Err(why);
    }
    if let Err(e) = list_netns() {
        return Err(format!("`ip netns` unusable: {e:#}"));
    }
    Ok(())
}

/// Why a namespace test cannot run here, if it cannot: not root, or one of `programs` is not in
/// `PATH`. The one root-and-tools check every crate's kernel tests use.
pub fn missing_prerequisite(programs: &[&str]) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    let in_path = |p: &&str| {
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
    };
    programs
        .iter()
        .find(|p| !in_path(p))
        .map(|p| format!("`{p}` not found in PATH"))
}

/// Moves the calling thread (only it: setns(2) is per thread) into the named network namespace
/// `name`, as `ip netns add` made it (`/var/run/netns/<name>`).
pub fn enter_netns(name: &str) -> Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(format!("/var/run/netns/{name}"))
        .map_err(|e| anyhow::anyhow!("opening namespace {name}: {e}"))?;
    // SAFETY: setns on a valid namespace descriptor affects only the calling thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!("setns {name}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}
