//! Calls and games under browsing, told apart off the packet thread: a worker reads the
//! connection tracker's counters of the unclassed UDP connections every window (300 ms,
//! `slipstream-conntrack`), follows each flow's packet rate (`SteadyFlows`, pure) and publishes
//! how many send steadily; the packet loop reads that number (one atomic load) and tells the
//! engine, and never waits on the worker. The worker rests while no link has household flows (no
//! household rule, or no background running): no round would ask.
//!
//! A dump walks the kernel's whole connection table with the CPU's packet processing held (see
//! `slipstream_conntrack`'s `udp_counts`), so it only finds the flows, every few seconds; each
//! window reads the flows found by their tuples, one hash lookup each.
//!
//! Needs conntrack accounting (`net.netfilter.nf_conntrack_acct=1`, OpenWrt's default). Without
//! it, or without ctnetlink, no flow is ever steady and the household reads best effort from the
//! WAN counters alone, as before.

use std::cmp::Reverse;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use slipstream_conntrack::{Conntrack, UdpCount};
use slipstream_control::Instant;
use slipstream_engine::SteadyFlows;
use tracing::{debug, info, warn};

/// How often the followed flows' counters are read: the steady test's window.
const READ_EVERY: Duration = Duration::from_millis(300);
/// How often a dump looks for new flows: a call is followed within this long after it starts.
/// A dump walks every hash bucket with the CPU's packet processing held; one (two walks of this
/// machine's 262,144 buckets) took 12-15 ms, and one every 300 ms added about 0.7 ms to the
/// lab's calls at the 95th percentile (`docs/household.md`).
const FIND_EVERY: Duration = Duration::from_secs(5);
/// After a dump, the next waits at least this many times what it took (0.5% of a core): at
/// 100,000 connections (`tests/flood.rs`, `syn_flood_100k`) a dump every 300 ms cost the daemon
/// 3.2 s of CPU in 20 s.
const PAUSE_PER_DUMP_TIME: u32 = 200;
/// A flow found with fewer packets than this both ways is not followed: a DNS lookup (a packet
/// or two) is no call, which sends 50 a second each way.
const MIN_PACKETS: u64 = 25;
/// At most this many flows are followed (the busiest): a household's calls and games, each
/// read by its own request every window.
const MAX_FOLLOWED: usize = 64;
/// Longest wait for one datagram of an answer.
const RECEIVE_TIMEOUT: Duration = Duration::from_millis(200);
/// Where the kernel says whether it counts per connection.
const ACCOUNTING: &str = "/proc/sys/net/netfilter/nf_conntrack_acct";

/// The packet loop's end: how many best-effort UDP flows send steadily.
pub(crate) struct SteadyFlowWatch {
    steady: Arc<AtomicUsize>,
    wanted: Arc<AtomicBool>,
}

impl SteadyFlowWatch {
    /// Starts the worker. It ends when this end is dropped, or at once (saying why) when
    /// ctnetlink cannot be opened.
    pub(crate) fn start(mark_mask: u32) -> std::io::Result<SteadyFlowWatch> {
        let steady = Arc::new(AtomicUsize::new(0));
        let wanted = Arc::new(AtomicBool::new(false));
        let (published, asked) = (Arc::clone(&steady), Arc::clone(&wanted));
        std::thread::Builder::new()
            .name("steady-flows".into())
            .spawn(move || worker(mark_mask, &published, &asked))?;
        Ok(SteadyFlowWatch { steady, wanted })
    }

    /// Whether the household has background flows on some link (the packet loop says so with
    /// each snapshot it publishes): the worker dumps only while it does.
    pub(crate) fn set_wanted(&self, wanted: bool) {
        self.wanted.store(wanted, Ordering::Relaxed);
    }

    /// How many best-effort UDP flows send steadily (calls, games).
    pub(crate) fn steady(&self) -> usize {
        self.steady.load(Ordering::Relaxed)
    }
}

fn worker(mask: u32, steady: &Arc<AtomicUsize>, wanted: &AtomicBool) {
    let mut reader = match CounterReader::open(mask) {
        Ok(reader) => reader,
        Err(e) => {
            warn!("no conntrack socket ({e}): calls and games under browsing are not told apart");
            return;
        }
    };
    let start = StdInstant::now();
    let mut flows = SteadyFlows::new();
    // The packet loop holds the other reference; when it is gone, so is the worker.
    while Arc::strong_count(steady) > 1 {
        std::thread::sleep(READ_EVERY);
        if !wanted.load(Ordering::Relaxed) {
            // Counters from before the rest would judge one long window: start over.
            reader.forget();
            flows = SteadyFlows::new();
            steady.store(0, Ordering::Relaxed);
            continue;
        }
        let at = StdInstant::now();
        let counts = reader.read(at);
        let now = Instant::from_micros(at.duration_since(start).as_micros() as u64);
        let before = flows.steady();
        let n = flows.on_dump(now, counts.iter().map(|c| (c.id, c.packets)));
        if n != before {
            debug!("steady best-effort UDP flows: {n} (of {} followed)", counts.len());
        }
        steady.store(n, Ordering::Relaxed);
    }
}

/// The followed flows' counters, window after window.
struct CounterReader {
    conntrack: Conntrack,
    mask: u32,
    /// The flows the last dump found, as it found them (id and tuple).
    followed: Vec<UdpCount>,
    /// When the next dump is due (`None`: at once).
    next_find: Option<StdInstant>,
    failures: u64,
}

impl CounterReader {
    fn open(mask: u32) -> std::io::Result<CounterReader> {
        let conntrack = Conntrack::open(RECEIVE_TIMEOUT)?;
        if std::fs::read_to_string(ACCOUNTING).is_ok_and(|v| v.trim() == "0") {
            info!(
                "conntrack accounting is off (net.netfilter.nf_conntrack_acct=0): calls and games under browsing are not told apart"
            );
        }
        Ok(CounterReader {
            conntrack,
            mask,
            followed: Vec::new(),
            next_find: None,
            failures: 0,
        })
    }

    /// Forgets the flows; the next read dumps.
    fn forget(&mut self) {
        self.followed.clear();
        self.next_find = None;
    }

    /// This window's counters of the flows followed: a dump's when one is due (it finds them
    /// afresh), else each flow's by its tuple. A flow that is gone, or whose tuple now names
    /// another connection, is dropped.
    fn read(&mut self, at: StdInstant) -> Vec<UdpCount> {
        if self.next_find.is_none_or(|due| at >= due) {
            let dumped = self.conntrack.udp_counts(self.mask, SteadyFlows::MAX_FLOWS);
            self.next_find = Some(at + FIND_EVERY.max(at.elapsed() * PAUSE_PER_DUMP_TIME));
            let mut found = match dumped {
                Ok(found) => found,
                Err(e) => {
                    self.failed("dump", &e);
                    Vec::new()
                }
            };
            found.retain(|c| c.packets.iter().any(|&p| p >= MIN_PACKETS));
            found.sort_unstable_by_key(|c| Reverse(c.packets[0] + c.packets[1]));
            found.truncate(MAX_FOLLOWED);
            self.followed.clone_from(&found);
            return found;
        }
        let (conntrack, mask) = (&mut self.conntrack, self.mask);
        let mut read = Vec::with_capacity(self.followed.len());
        let mut error = None;
        self.followed
            .retain(|flow| match conntrack.udp_count_of(flow.original, mask) {
                Ok(Some(now)) if now.id == flow.id => {
                    read.push(now);
                    true
                }
                Ok(_) => false,
                Err(e) => {
                    error = Some(e);
                    true
                }
            });
        if let Some(e) = error {
            self.failed("read", &e);
        }
        read
    }

    fn failed(&mut self, what: &str, e: &std::io::Error) {
        self.failures += 1;
        if self.failures.is_power_of_two() {
            warn!(
                "conntrack {what} failed ({e}; {} failures so far): no call told apart meanwhile",
                self.failures
            );
        }
    }
}
