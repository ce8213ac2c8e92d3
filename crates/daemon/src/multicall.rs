//! One binary, two programs, as busybox does it: the package installs this binary as
//! `/usr/sbin/slipstreamd` and a symlink to it as `/usr/bin/slipstream`, and the name it was
//! started under picks the program. Two binaries each carried their own std, clap, serde_json
//! and control-socket client; one file keeps a single copy of each on the router's flash.

use std::ffi::OsStr;
use std::path::Path;

/// The name under which the binary is the CLI (`slipstream status`, `slipstream flows`, ...).
pub(crate) const CLI_NAME: &str = "slipstream";

/// True when `argv0` (the program name the binary was started under) names the CLI. Only the
/// file name counts; any other name, or none, is the daemon.
pub(crate) fn called_as_cli(argv0: Option<&OsStr>) -> bool {
    argv0.and_then(|a| Path::new(a).file_name()) == Some(OsStr::new(CLI_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(argv0: &str) -> bool {
        called_as_cli(Some(OsStr::new(argv0)))
    }

    #[test]
    fn the_cli_by_its_installed_name_with_or_without_a_path() {
        assert!(cli("slipstream"));
        assert!(cli("/usr/bin/slipstream"));
        assert!(cli("./slipstream"));
    }

    #[test]
    fn the_daemon_under_every_other_name() {
        assert!(!cli("slipstreamd"));
        assert!(!cli("/usr/sbin/slipstreamd"));
        assert!(!cli("/tmp/slipstream/slipstreamd"));
        assert!(!cli("slipstream-cli"));
        assert!(!cli(""));
        assert!(!called_as_cli(None));
    }
}
