//! The `slipstreamd` control socket, as both ends see it.
//!
//! # Protocol
//!
//! A Unix stream socket (`[control] socket`, default `/var/run/slipstream.sock`, mode 0600). The
//! client sends one JSON request on one line and reads one JSON response line; then the daemon
//! closes the connection.
//!
//! ```text
//! -> {"cmd":"status"}
//! <- {"status":{"version":"0.1.0","pid":1234,...}}
//! -> {"cmd":"flows"}
//! <- {"flows":{"active":2,"max":4096,"flows":[{"rule":"bittorrent",...}]}}
//! <- {"error":"..."}                       (an unknown command, or the packet thread is gone)
//! ```
//!
//! Field names are stable (the CLI's `--json` prints them as they come); units are in the names
//! (`_bytes`, `_bps` = bits per second, `_ms`, `_unix` = seconds since the epoch). Fields that are
//! not known yet are `null`.
//!
//! [`query`] is a small blocking client; [`render_flows`] and [`render_status`] are the pure text
//! views of the `slipstream` CLI.

mod client;
pub mod live;
mod protocol;
mod render;

pub use client::{query, QueryError};
pub use protocol::{
    FirewallStatus, FlowInfo, FlowList, LinkStatus, NameSetStatus, PivSummary, PolicerInfo, ProbeStatus,
    Request, Response, RuleStatus, Status, DEFAULT_SOCKET, MAX_REQUEST_BYTES,
};
pub use render::{fmt_bytes, fmt_duration, fmt_ms, fmt_rate, lan_and_remote, render_flows, render_status};

#[cfg(test)]
mod tests;
