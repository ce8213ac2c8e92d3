//! Shared support for the end-to-end tests in this directory.

use std::path::PathBuf;

/// The `slipstreamd` binary built beside the test executable (or `$SLIPSTREAMD_BIN`).
pub fn daemon_binary() -> PathBuf {
    slipstream_testbed::workspace_binary("slipstreamd", "SLIPSTREAMD_BIN")
}

/// Whether namespace tests can run here. A test that cannot run must not pass as if it had: this
/// panics with the reason, unless `SLIPSTREAM_SKIP_NETNS=1` says skipping is intended (then it
/// prints the reason and returns false).
pub fn netns_or_skip() -> bool {
    match slipstream_testbed::netns_supported() {
        Ok(()) => true,
        Err(why) if std::env::var("SLIPSTREAM_SKIP_NETNS").as_deref() == Ok("1") => {
            eprintln!("skipped (SLIPSTREAM_SKIP_NETNS=1): {why}");
            false
        }
        Err(why) => panic!("cannot run the namespace tests: {why} (SLIPSTREAM_SKIP_NETNS=1 skips them)"),
    }
}
