//! The daemon's view of each flow, from its control socket (`{"cmd":"flows"}`, the typed
//! `slipstream-inspect` client) about every 100 ms: `rwnd`, `cwnd_estimate` (bytes) and `piv_sum`
//! (ms) of the flow whose server endpoint is the flow's port (what the window plots show). The socket is a file, so the lab reaches it from outside
//! the router namespace: no process per sample.

use std::path::PathBuf;

use slipstream_inspect::{FlowInfo, Request, Response};

use super::poller::{Periodic, Samples};
use super::ss::port_of;
use crate::result::{Role, Series, Unit};

/// `(t, flows)` samples.
pub(super) type DaemonSamples = Samples<Vec<FlowInfo>>;

/// Queries `socket` every 100 ms; times count from `t0_unix`. A failed query is skipped (the
/// daemon may be between restarts).
pub(super) fn start(socket: PathBuf, t0_unix: f64) -> Periodic<Vec<FlowInfo>> {
    Periodic::start(None, t0_unix, move || match slipstream_inspect::query(&socket, &Request::Flows) {
        Ok(Response::Flows(list)) => Some(list.flows),
        _ => None,
    })
}

/// The daemon's series of the flow `label` on server `port` (the busiest daemon flow with an
/// endpoint on that port, at each sample).
pub(super) fn flow_series(samples: &DaemonSamples, label: &str, role: Role, port: u16) -> Vec<Series> {
    let (mut rwnd, mut est, mut piv) = (Vec::new(), Vec::new(), Vec::new());
    for (t, flows) in samples {
        let on_port = flows
            .iter()
            .filter(|f| [&f.sender, &f.receiver].iter().any(|e| e.as_deref().map(port_of) == Some(port)));
        let Some(f) = on_port.max_by_key(|f| f.acked_bytes) else {
            continue;
        };
        let t = *t;
        rwnd.extend(f.rwnd_bytes.map(|v| (t, f64::from(v))));
        est.extend(f.cwnd_estimate_bytes.map(|v| (t, f64::from(v))));
        piv.extend(f.piv.map(|p| (t, p.sum_ms)));
    }
    [("rwnd", Unit::Bytes, rwnd), ("cwnd_estimate", Unit::Bytes, est), ("piv_sum", Unit::Ms, piv)]
        .into_iter()
        .filter(|(_, _, pts)| !pts.is_empty())
        .map(|(name, unit, pts)| Series::new(name, unit, label, role, "daemon").with_points(pts))
        .collect()
}

#[cfg(test)]
#[path = "daemon_tests.rs"]
mod tests;
