//! Calls and games under browsing, told apart off the packet thread: a worker dumps the
//! connection tracker's counters of the unclassed UDP connections every window (300 ms,
//! `slipstream-conntrack`), follows each flow's packet rate (`SteadyFlows`, pure) and publishes
//! how many send steadily; the packet loop reads that number (one atomic load) and tells the
//! engine. The dump is filtered in the kernel (UDP, no background mark), a few hundred bytes per
//! connection; the packet loop never waits on it.
//!
//! Needs conntrack accounting (`net.netfilter.nf_conntrack_acct=1`, OpenWrt's default). Without
//! it, or without ctnetlink, no flow is ever steady and the household reads best effort from the
//! WAN counters alone, as before.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use slipstream_conntrack::Conntrack;
use slipstream_control::Instant;
use slipstream_engine::SteadyFlows;
use tracing::{debug, info, warn};

/// How often the counters are dumped: the steady test's window.
const DUMP_EVERY: Duration = Duration::from_millis(300);
/// The kernel walks its whole table for a dump, filtered or not: at 100,000 connections
/// (`tests/flood.rs`, `syn_flood_100k`) a dump every 300 ms cost the daemon 3.2 s of CPU in 20 s.
/// Between dumps the worker waits at least this many times what the last one took (2% of a
/// core); the steady test then judges longer windows.
const PAUSE_PER_DUMP_TIME: u32 = 50;
/// Longest wait for one datagram of a dump.
const RECEIVE_TIMEOUT: Duration = Duration::from_millis(200);
/// Where the kernel says whether it counts per connection.
const ACCOUNTING: &str = "/proc/sys/net/netfilter/nf_conntrack_acct";

/// The packet loop's end: how many best-effort UDP flows send steadily.
pub(crate) struct SteadyFlowWatch {
    steady: Arc<AtomicUsize>,
}

impl SteadyFlowWatch {
    /// Starts the worker. It ends when this end is dropped, or at once (saying why) when
    /// ctnetlink cannot be opened.
    pub(crate) fn start(mark_mask: u32) -> std::io::Result<SteadyFlowWatch> {
        let steady = Arc::new(AtomicUsize::new(0));
        let published = Arc::clone(&steady);
        std::thread::Builder::new()
            .name("steady-flows".into())
            .spawn(move || worker(mark_mask, &published))?;
        Ok(SteadyFlowWatch { steady })
    }

    /// How many best-effort UDP flows send steadily (calls, games).
    pub(crate) fn steady(&self) -> usize {
        self.steady.load(Ordering::Relaxed)
    }
}

fn worker(mask: u32, steady: &Arc<AtomicUsize>) {
    let mut conntrack = match Conntrack::open(RECEIVE_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            warn!("no conntrack dump ({e}): calls and games under browsing are not told apart");
            return;
        }
    };
    if std::fs::read_to_string(ACCOUNTING).is_ok_and(|v| v.trim() == "0") {
        info!(
            "conntrack accounting is off (net.netfilter.nf_conntrack_acct=0): calls and games under browsing are not told apart"
        );
    }
    let start = StdInstant::now();
    let mut flows = SteadyFlows::new();
    let mut failures = 0u64;
    // The packet loop holds the other reference; when it is gone, so is the worker.
    let mut pause = DUMP_EVERY;
    while Arc::strong_count(steady) > 1 {
        std::thread::sleep(pause);
        let dump_start = StdInstant::now();
        let now = Instant::from_micros(dump_start.duration_since(start).as_micros() as u64);
        let dumped = conntrack.udp_counts(mask, SteadyFlows::MAX_FLOWS);
        pause = DUMP_EVERY.max(dump_start.elapsed() * PAUSE_PER_DUMP_TIME);
        match dumped {
            Ok(counts) => {
                let before = flows.steady();
                let n = flows.on_dump(now, counts.iter().map(|c| (c.id, c.packets)));
                if n != before {
                    debug!("steady best-effort UDP flows: {n} (of {} followed)", counts.len());
                }
                steady.store(n, Ordering::Relaxed);
            }
            Err(e) => {
                steady.store(0, Ordering::Relaxed);
                failures += 1;
                if failures.is_power_of_two() {
                    warn!("conntrack dump failed ({e}; {failures} so far): no call told apart meanwhile");
                }
            }
        }
    }
}
