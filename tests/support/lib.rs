//! Shared support for the end-to-end tests in this directory.

use std::path::{Path, PathBuf};

use slipstream_testbed::daemon::Daemon;
use slipstream_testbed::Testbed;

/// The `slipstreamd` binary built beside the test executable (or `$SLIPSTREAMD_BIN`).
pub fn daemon_binary() -> PathBuf {
    slipstream_testbed::workspace_binary("slipstreamd", "SLIPSTREAMD_BIN")
}

/// Panics with the reason when the namespace tests cannot run here. They are `#[ignore]`d, so a
/// plain `cargo test` lists them as ignored; once asked for (`--ignored`, as scripts/test.sh
/// does), a missing prerequisite fails the test instead of letting it pass without running.
pub fn require_netns() {
    if let Err(why) = slipstream_testbed::netns_supported() {
        panic!("cannot run the namespace tests here: {why}");
    }
}

/// Starts the workspace's `slipstreamd` on the testbed's router with `config_path` (whose
/// metrics listen on `config`'s address), logging to `log`; panics if it does not come up.
pub fn start_daemon(
    tb: &Testbed,
    config_path: &Path,
    config: &slipstream_config::Config,
    log: &Path,
) -> Daemon {
    Daemon::start(
        tb,
        &daemon_binary(),
        config_path,
        &config.metrics.listen.to_string(),
        log,
    )
    .expect("slipstreamd starts")
}
