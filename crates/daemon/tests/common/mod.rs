//! Helpers the daemon's namespace tests share.

/// Why a namespace test cannot run here: not root, or one of `programs` is not in `PATH`.
pub(crate) fn missing_prerequisite(programs: &[&str]) -> Option<String> {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        return Some("not root".into());
    }
    programs
        .iter()
        .find(|p| {
            !std::env::var_os("PATH")
                .map(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
                .unwrap_or(false)
        })
        .map(|p| format!("{p} not found"))
}

/// Runs `args[0] args[1..]` and returns its stdout; panics with the command and its stderr if
/// it fails.
pub(crate) fn sh(args: &[&str]) -> String {
    slipstream_testbed::cmd::run(args[0], &args[1..]).unwrap_or_else(|e| panic!("{e}"))
}
