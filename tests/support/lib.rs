//! Shared support for the end-to-end tests in this directory.

use std::path::PathBuf;

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
