//! Goodput per flow at the receiver: iperf3 `-J --interval 0.1` (downloads: the client's own
//! series; uploads: the server's, via `--get-server-output`). Series `goodput`, each point at
//! its interval's midpoint, on the run's clock: iperf3's intervals count from its test start,
//! which comes ~0.5 s after the client is spawned (process start, control exchange, data
//! connection), so a flow's t = 0 is taken from the server's `ss` samples, where its data
//! connection first carries data. Each flow's span (first to last interval) is kept in
//! [`RunResult::flow_spans`].

use slipstream_testbed::iperf::IperfResult;
use slipstream_testbed::Interval;

use super::ss::{self, SsSamples};
use super::FlowRun;
use crate::result::{FlowSpan, RunResult, Series, Unit};

/// Time from spawning an iperf3 client to its first data, assumed where it cannot be measured:
/// the control connection, parameter exchange and data connection take about 3 RTTs at 100 ms.
pub const IPERF_SETUP_GUESS_S: f64 = 0.3;

/// Adds the goodput series and spans of `flows` to `result`, placed in time where the
/// sender-side samples `ss` show each flow's data connection start (see
/// [`ss::data_start`]); the spawn time plus [`IPERF_SETUP_GUESS_S`] where they cannot (no
/// `ss` sampling, a flow to another server). `down_delay_s` is the one-way download delay.
pub(super) fn add_goodput_series(
    flows: &[FlowRun],
    ss: &SsSamples,
    down_delay_s: f64,
    result: &mut RunResult,
) {
    let mut guessed = 0;
    for f in flows {
        let Some(res) = &f.result else { continue };
        let counted = |iv: &&Interval| !iv.omitted && iv.end > iv.start;
        let first = res.intervals.iter().find(counted);
        // Server side, the data socket's peer is the client's data connection. A download's
        // receiver (the client) sees its first data one downstream delay after the server sent
        // it; an upload's series is the receiving server's own.
        let measured = match (f.spec.ends.server, res.local_port, f.spec.download) {
            _ if f.series_start_s.is_some() => None,
            (1, Some(peer), true) => {
                ss::data_start(ss, f.spec.port, peer, f.offset_s, |s| s.bytes_sent).map(|t| t + down_delay_s)
            }
            (1, Some(peer), false) => ss::data_start(ss, f.spec.port, peer, f.offset_s, |s| s.bytes_received),
            _ => None,
        };
        let start = f.series_start_s.or(measured).unwrap_or_else(|| {
            guessed += 1;
            f.offset_s + IPERF_SETUP_GUESS_S
        });
        // Interval times are relative to iperf3's test start, when data starts flowing.
        let offset = start - first.map_or(0.0, |iv| iv.start);
        let pts = iperf_goodput_series(res, offset);
        if let (Some(a), Some(b)) = (pts.first(), pts.last()) {
            let half = |i: Option<&Interval>| i.map_or(0.0, |iv| (iv.end - iv.start) / 2.0);
            let last = res.intervals.iter().rev().find(counted);
            result.flow_spans.push(FlowSpan {
                flow: f.spec.label.clone(),
                start_s: a.0 - half(first),
                end_s: b.0 + half(last),
            });
        }
        match result.series.iter_mut().find(|s| s.name == "goodput" && s.flow == f.spec.label) {
            Some(s) => s.points.extend(pts),
            None => result.series.push(
                Series::new("goodput", Unit::Mbps, &f.spec.label, f.spec.role, "receiver").with_points(pts),
            ),
        }
    }
    if guessed > 0 {
        result.notes.push(format!(
            "{guessed} flow(s) placed in time at spawn + {IPERF_SETUP_GUESS_S} s (no sender-side samples)"
        ));
    }
}

/// Receiver goodput series (Mbit/s) of an iperf3 run: `(offset + interval midpoint, rate)` for
/// every non-omitted interval. (A rate over an interval belongs to the interval's middle: a
/// window `[t0, t1)` then takes the intervals that lie in it.)
fn iperf_goodput_series(r: &IperfResult, offset_s: f64) -> Vec<(f64, f64)> {
    r.intervals
        .iter()
        .filter(|iv| !iv.omitted && iv.end > iv.start)
        .map(|iv| (offset_s + (iv.start + iv.end) / 2.0, iv.bytes as f64 * 8.0 / (iv.end - iv.start) / 1e6))
        .collect()
}

#[cfg(test)]
#[path = "goodput_tests.rs"]
mod tests;
