//! Shared support for the end-to-end tests in this directory.

use std::path::PathBuf;

use slipstream_testbed::scenario::RwndSample;

/// The `slipstreamd` binary built beside the test executable (or `$SLIPSTREAMD_BIN`).
pub fn daemon_binary() -> PathBuf {
    slipstream_testbed::workspace_binary("slipstreamd", "SLIPSTREAMD_BIN")
}

/// Prints a trace of the daemon's view of a flow, one line a second.
pub fn print_trace(title: &str, trace: &[RwndSample]) {
    eprintln!("{title} (t s: rwnd B / host window B / cwnd estimate B / rtt ms)");
    let mut next = 0.0;
    for s in trace {
        if s.t >= next {
            eprintln!(
                "  {:5.1}: {:8.0} / {:>9} / {:>8} / {:>5}",
                s.t,
                s.rwnd_bytes,
                s.host_window_bytes.map_or("-".into(), |v| format!("{v:.0}")),
                s.cwnd_estimate_bytes.map_or("-".into(), |v| format!("{v:.0}")),
                s.rtt_seconds.map_or("-".into(), |v| format!("{:.0}", v * 1000.0)),
            );
            next = s.t + 1.0;
        }
    }
}
