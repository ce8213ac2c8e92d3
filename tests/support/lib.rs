//! Shared support for the end-to-end tests in this directory.

use std::path::PathBuf;

/// The `slipstreamd` binary built beside the test executable (or `$SLIPSTREAMD_BIN`).
pub fn daemon_binary() -> PathBuf {
    slipstream_testbed::workspace_binary("slipstreamd", "SLIPSTREAMD_BIN")
}
