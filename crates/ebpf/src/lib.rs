//! The tc eBPF datapath, as thin as it can be: load the kernel program, attach it to the LAN
//! interfaces (clsact ingress and egress, direct action), fill its flow map, read its reports.
//!
//! The program (src/bpf/slipstream.bpf.c, built by build.rs with clang and embedded here) keeps
//! the per-packet work in the kernel: for flows in its `flows` map it reports each packet's
//! headers and kernel time into a ring buffer, and lowers the window of the receiver's ACKs to
//! the target the daemon wrote, applying the safety rules itself. The engine in user space keeps
//! deciding: it reads the reports, as it reads NFQUEUE packets, and says where to aim.
//!
//! Nothing is left behind: on kernels with TCX (6.6+) the attachments are links owned by this
//! process and go with it (`kill -9` included); on older kernels the netlink filters would
//! stay, so the program also checks a heartbeat the daemon renews ([`TcDatapath::heartbeat`])
//! and passes every packet untouched once it is stale.

mod event;
mod maps;

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::tc::{qdisc_add_clsact, SchedClassifier, TcAttachType};
use aya::programs::{TestRun, TestRunOptions};
use aya::{Ebpf, EbpfLoader};

pub use event::{Event, EVENT_BYTES, HEAD_BYTES};
pub use maps::{
    Control, Counters, DirKey, FlowCfg, EDGE_KNOWN, FLOW_CLAMP, FLOW_HOLD, FLOW_SENT_EDGE, OWN_MARK,
};

/// The program, built by build.rs.
static PROGRAM: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/slipstream.bpf.o"));

const INGRESS: &str = "slipstream_ingress";
const EGRESS: &str = "slipstream_egress";

/// Sizes of the kernel side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcConfig {
    /// Flows the maps hold (`limits.max_flows`); each takes two entries, one per direction.
    pub max_flows: u32,
    /// Ring buffer bytes (a power of two, at least a page); each report takes
    /// [`EVENT_BYTES`] plus an 8-byte header.
    pub ring_bytes: u32,
}

impl Default for TcConfig {
    fn default() -> Self {
        TcConfig {
            max_flows: 4096,
            ring_bytes: 4 << 20,
        }
    }
}

/// Which of the two programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// Packets entering from the LAN (sent by LAN hosts).
    Ingress,
    /// Packets leaving to the LAN (received by LAN hosts).
    Egress,
}

/// The loaded program and its maps.
pub struct TcDatapath {
    ebpf: Ebpf,
    flows: HashMap<MapData, DirKey, FlowCfg>,
    edges: HashMap<MapData, DirKey, u64>,
    control: Array<MapData, Control>,
    counters: PerCpuArray<MapData, u64>,
    events: RingBuf<MapData>,
    attached: Vec<String>,
}

impl TcDatapath {
    /// Loads both programs and creates their maps (nothing is attached yet).
    pub fn load(config: TcConfig) -> io::Result<TcDatapath> {
        let entries = config.max_flows.max(1).saturating_mul(2);
        let ring = config.ring_bytes.max(4096).next_power_of_two();
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("flows", entries)
            .map_max_entries("edges", entries)
            .map_max_entries("events", ring)
            .load(PROGRAM)
            .map_err(|e| {
                other(
                    "loading the tc eBPF program (needs CAP_BPF or root and a kernel with BPF)",
                    e,
                )
            })?;
        for name in [INGRESS, EGRESS] {
            program(&mut ebpf, name)?
                .load()
                .map_err(|e| other(&format!("verifying {name}"), e))?;
        }
        let mut take = |name: &str| {
            ebpf.take_map(name)
                .ok_or_else(|| io::Error::other(format!("map {name} missing from the object")))
        };
        let flows = HashMap::try_from(take("flows")?).map_err(|e| other("flows map", e))?;
        let edges = HashMap::try_from(take("edges")?).map_err(|e| other("edges map", e))?;
        let control = Array::try_from(take("control")?).map_err(|e| other("control map", e))?;
        let counters = PerCpuArray::try_from(take("counters")?).map_err(|e| other("counters map", e))?;
        let events = RingBuf::try_from(take("events")?).map_err(|e| other("events map", e))?;
        Ok(TcDatapath {
            ebpf,
            flows,
            edges,
            control,
            counters,
            events,
            attached: Vec::new(),
        })
    }

    /// Attaches both programs to `interface` (ingress and egress). Adds the clsact qdisc where
    /// the kernel needs one (before TCX) and keeps whatever other filters are there.
    pub fn attach(&mut self, interface: &str) -> io::Result<()> {
        // With TCX (6.6+) no qdisc is needed; before it, clsact may already exist (EEXIST).
        let _ = qdisc_add_clsact(interface);
        for (name, hook) in [(INGRESS, TcAttachType::Ingress), (EGRESS, TcAttachType::Egress)] {
            program(&mut self.ebpf, name)?
                .attach(interface, hook)
                .map_err(|e| other(&format!("attaching {name} to {interface}"), e))?;
        }
        if !self.attached.iter().any(|a| a == interface) {
            self.attached.push(interface.to_owned());
        }
        Ok(())
    }

    /// Interfaces the programs are attached to.
    pub fn attached(&self) -> &[String] {
        &self.attached
    }

    /// Lets the program act until `valid_for` from now (CLOCK_MONOTONIC, as bpf_ktime_get_ns).
    pub fn heartbeat(&mut self, valid_for: Duration) -> io::Result<()> {
        let until = monotonic_ns().saturating_add(valid_for.as_nanos() as u64);
        self.control
            .set(
                0,
                Control {
                    alive_until_ns: until,
                },
                0,
            )
            .map_err(|e| other("writing the heartbeat", e))
    }

    /// Sets what the program does with one direction's packets; a new flow's edge is forgotten.
    pub fn set_flow(&mut self, key: &DirKey, cfg: FlowCfg) -> io::Result<()> {
        self.flows
            .insert(key, cfg, 0)
            .map_err(|e| other("writing the flows map", e))
    }

    /// Starts a flow of `rule` afresh in both directions: reported, nothing lowered, no edge
    /// known.
    pub fn start_flow(&mut self, key: &DirKey, rule: u16) -> io::Result<()> {
        for dir in [*key, key.reversed()] {
            let _ = self.edges.remove(&dir);
            self.set_flow(
                &dir,
                FlowCfg {
                    rule,
                    ..FlowCfg::default()
                },
            )?;
        }
        Ok(())
    }

    /// Forgets a flow in both directions (its packets pass unreported and untouched).
    pub fn remove_flow(&mut self, key: &DirKey) {
        for dir in [*key, key.reversed()] {
            let _ = self.flows.remove(&dir);
            let _ = self.edges.remove(&dir);
        }
    }

    /// The right edge the program last advertised in this direction, if any.
    pub fn edge(&self, key: &DirKey) -> Option<u32> {
        let word = self.edges.get(key, 0).ok()?;
        (word & EDGE_KNOWN != 0).then_some(word as u32)
    }

    /// The next report, copied into `f`; `false` when none is waiting.
    pub fn next_event(&mut self, f: impl FnOnce(Option<Event<'_>>)) -> bool {
        match self.events.next() {
            Some(item) => {
                f(Event::parse(&item));
                true
            }
            None => false,
        }
    }

    /// The ring buffer's descriptor, readable when reports wait.
    pub fn fd(&self) -> RawFd {
        self.events.as_raw_fd()
    }

    /// The program's counters, summed over CPUs.
    pub fn counters(&self) -> Counters {
        let sum = |i: u32| {
            self.counters
                .get(&i, 0)
                .map(|values| values.iter().sum())
                .unwrap_or(0)
        };
        Counters {
            events: sum(0),
            ringbuf_full: sum(1),
            rewritten: sum(2),
            no_daemon: sum(3),
        }
    }

    /// Runs one program once on `frame` (an Ethernet frame) with BPF_PROG_TEST_RUN; returns the
    /// program's verdict and the frame as the program left it. For tests.
    pub fn test_run(&mut self, hook: Hook, frame: &[u8]) -> io::Result<(u32, Vec<u8>)> {
        let name = match hook {
            Hook::Ingress => INGRESS,
            Hook::Egress => EGRESS,
        };
        let mut out = vec![0u8; frame.len() + 256];
        let mut opts = TestRunOptions::new();
        opts.data_in = Some(frame);
        opts.data_out = Some(&mut out);
        let result = program(&mut self.ebpf, name)?
            .test_run(opts)
            .map_err(|e| other("BPF_PROG_TEST_RUN", e))?;
        out.truncate(result.data_size_out as usize);
        Ok((result.return_value, out))
    }
}

/// Names of the programs TCX runs at `hook` of `interface` (kernels 6.6+; the kernel keeps the
/// first 15 bytes of a name), in the calling thread's network namespace. For tests and
/// diagnostics: which interfaces the daemon's programs are on.
pub fn tcx_programs(interface: &str, hook: Hook) -> io::Result<Vec<String>> {
    let attach = match hook {
        Hook::Ingress => TcAttachType::Ingress,
        Hook::Egress => TcAttachType::Egress,
    };
    let (_, programs) =
        SchedClassifier::query_tcx(interface, attach).map_err(|e| other("querying TCX", e))?;
    Ok(programs
        .iter()
        .map(|p| p.name_as_str().unwrap_or_default().to_owned())
        .collect())
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> io::Result<&'a mut SchedClassifier> {
    ebpf.program_mut(name)
        .ok_or_else(|| io::Error::other(format!("program {name} missing from the object")))?
        .try_into()
        .map_err(|e| other(name, e))
}

fn other(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns()`.
#[allow(unsafe_code, reason = "clock_gettime(2) through libc")]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}
