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
//! process and go with it (`kill -9` included). On older kernels they are netlink filters on a
//! clsact qdisc at a fixed priority and handle ([`NETLINK_PRIORITY`], [`NETLINK_HANDLE`]),
//! which a killed daemon leaves behind with their maps: the program then checks a heartbeat
//! the daemon renews ([`TcDatapath::heartbeat`]) and passes every packet untouched once it is
//! stale, and the next start ([`TcDatapath::attach`]) or `--cleanup` ([`remove_leftovers`])
//! removes every filter of the programs' names on the interface first, so one set is attached.
//! Either kind of attachment can vanish under the daemon (sqm-scripts deletes the ingress qdisc,
//! with every filter on it, before adding its own): [`TcDatapath::recheck`] finds and replaces
//! it.

mod event;
mod maps;
mod qdisc;

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::tc::{
    qdisc_add_clsact, qdisc_detach_program, NlOptions, SchedClassifier, TcAttachOptions, TcAttachType,
    TcError, TcHandle,
};
use aya::programs::{LinkOrder, ProgramError, TestRun, TestRunOptions};
use aya::{Ebpf, EbpfLoader};

pub use event::{Event, EVENT_BYTES, HEAD_BYTES};
pub use maps::{
    Control, Counters, DirKey, FlowCfg, EDGE_KNOWN, FLOW_CLAMP, FLOW_HOLD, FLOW_SENT_EDGE, OWN_MARK,
};

/// The program, built by build.rs.
static PROGRAM: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/slipstream.bpf.o"));

const INGRESS: &str = "slipstream_ingress";
const EGRESS: &str = "slipstream_egress";

/// Priority of the netlink filters (kernels before 6.6): fixed, so that a start finds a killed
/// daemon's filter where it left it, and low (runs first), so that each packet is seen before
/// a filter that takes it away (sqm-scripts' redirect to its IFB sits at priority 10).
pub const NETLINK_PRIORITY: u16 = 1;
/// Handle of the netlink filters ("SS").
pub const NETLINK_HANDLE: u32 = 0x5353;

/// How the programs are attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttachMode {
    /// TCX links where the kernel has them (6.6+), netlink filters on clsact before.
    #[default]
    Auto,
    /// Netlink filters on clsact whatever the kernel, as before 6.6: for tests of the old
    /// kernels' path on a new kernel (`SLIPSTREAM_TC_ATTACH=netlink`).
    Netlink,
}

impl AttachMode {
    /// `SLIPSTREAM_TC_ATTACH=netlink` forces netlink filters; anything else is [`AttachMode::Auto`].
    pub fn from_env() -> AttachMode {
        match std::env::var("SLIPSTREAM_TC_ATTACH").as_deref() {
            Ok("netlink") => AttachMode::Netlink,
            _ => AttachMode::Auto,
        }
    }

    fn tcx(self) -> bool {
        self == AttachMode::Auto && tcx_available()
    }
}

/// Whether this kernel attaches tc programs as TCX links (Linux 6.6+).
pub fn tcx_available() -> bool {
    aya::util::KernelVersion::current().is_ok_and(|v| v >= aya::util::KernelVersion::new(6, 6, 0))
}

/// What [`TcDatapath::recheck`] found on one interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recheck {
    /// Both programs are still attached.
    Present,
    /// One or both were gone and are attached again.
    Reattached,
}

/// Sizes of the kernel side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcConfig {
    /// Flows the maps hold (`limits.max_flows`); each takes two entries, one per direction.
    pub max_flows: u32,
    /// Ring buffer bytes (a power of two, at least a page); each report takes
    /// [`EVENT_BYTES`] plus an 8-byte header.
    pub ring_bytes: u32,
    /// TCX links or netlink filters.
    pub attach: AttachMode,
}

impl Default for TcConfig {
    fn default() -> Self {
        TcConfig {
            max_flows: 4096,
            ring_bytes: 4 << 20,
            attach: AttachMode::Auto,
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
    attach: AttachMode,
    /// The link of each program on each interface, as aya keeps it: dropped from aya's books
    /// before the program is attached there again (aya refuses a second link of the same
    /// priority and handle, and the refused one, dropped, detached the filter just added).
    links: std::collections::HashMap<(String, &'static str), aya::programs::tc::SchedClassifierLinkId>,
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
            attach: config.attach,
            links: std::collections::HashMap::new(),
        })
    }

    /// Attaches both programs to `interface` (ingress and egress), after removing any filter of
    /// theirs a killed daemon left there, and keeps whatever other filters are there. With TCX
    /// no qdisc is added (an `ingress` qdisc, such as sqm-scripts', stays usable beside the
    /// links); netlink filters need clsact, which an `ingress` qdisc excludes: then this fails
    /// rather than put the egress program on the ingress qdisc, which would run it on ingress.
    pub fn attach(&mut self, interface: &str) -> io::Result<()> {
        remove_leftovers(interface)?;
        if !self.attach.tcx() {
            prepare_clsact(interface)?;
        }
        for (name, hook) in [(INGRESS, TcAttachType::Ingress), (EGRESS, TcAttachType::Egress)] {
            self.attach_one(interface, name, hook)
                .map_err(|e| other(&format!("attaching {name} to {interface}"), e))?;
        }
        if !self.attached.iter().any(|a| a == interface) {
            self.attached.push(interface.to_owned());
        }
        Ok(())
    }

    fn attach_one(
        &mut self,
        interface: &str,
        name: &'static str,
        hook: TcAttachType,
    ) -> Result<(), ProgramError> {
        let options = if self.attach.tcx() {
            TcAttachOptions::TcxOrder(LinkOrder::default())
        } else {
            TcAttachOptions::Netlink(NlOptions {
                priority: NETLINK_PRIORITY,
                handle: TcHandle::from(NETLINK_HANDLE),
                classid: None,
            })
        };
        let prog = program(&mut self.ebpf, name).map_err(|e| ProgramError::IOError(io::Error::other(e)))?;
        if let Some(old) = self.links.remove(&(interface.to_owned(), name)) {
            // Gone already (its qdisc or interface deleted): this only clears aya's books.
            let _ = prog.detach(old);
        }
        let id = prog.attach_with_options(interface, hook, options)?;
        self.links.insert((interface.to_owned(), name), id);
        Ok(())
    }

    /// Checks that both netlink filters are still on `interface` and attaches what is gone
    /// (deleting the clsact qdisc, as `tc qdisc del dev X clsact` or a tool that rebuilds its
    /// qdiscs does, deletes our filters with it). TCX links need no check (see `is_attached`).
    /// Call every few seconds.
    pub fn recheck(&mut self, interface: &str) -> io::Result<Recheck> {
        let missing: Vec<(&'static str, TcAttachType)> =
            [(INGRESS, TcAttachType::Ingress), (EGRESS, TcAttachType::Egress)]
                .into_iter()
                .filter(|(_, hook)| !self.is_attached(interface, *hook))
                .collect();
        if missing.is_empty() {
            return Ok(Recheck::Present);
        }
        if !self.attach.tcx() {
            prepare_clsact(interface)?;
        }
        for (name, hook) in missing {
            self.attach_one(interface, name, hook)
                .map_err(|e| other(&format!("attaching {name} to {interface} again"), e))?;
        }
        Ok(Recheck::Reattached)
    }

    /// Whether the program `name` runs at `hook` of `interface`. A TCX link stays attached
    /// whatever happens to the interface's qdiscs (the kernel keeps TCX programs apart from
    /// them) until the interface goes, which the daemon notices by its index: it counts as
    /// attached (asking the kernel by name would need CAP_SYS_ADMIN, BPF_PROG_GET_FD_BY_ID,
    /// which the daemon no longer has). Our netlink filter is asked for by its parent, priority
    /// and handle (RTM_GETTFILTER).
    fn is_attached(&self, interface: &str, hook: TcAttachType) -> bool {
        if self.attach.tcx() {
            return true;
        }
        let parent = match hook {
            TcAttachType::Egress => 0xffff_fff3,
            _ => 0xffff_fff2,
        };
        interface_index(interface)
            .and_then(|index| qdisc::filter_exists(index, parent, NETLINK_PRIORITY, NETLINK_HANDLE))
            .unwrap_or(false)
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

    /// What the map holds for one direction, if anything.
    pub fn flow(&self, key: &DirKey) -> Option<FlowCfg> {
        self.flows.get(key, 0).ok()
    }

    /// Forgets the right edge kept for one direction (recorded in units that were wrong).
    pub fn forget_edge(&mut self, key: &DirKey) -> io::Result<()> {
        match self.edges.remove(key) {
            Ok(()) => Ok(()),
            Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(other("removing an edge", e)),
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
            edge_lost: sum(4),
            stale_forgotten: sum(5),
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

/// Removes every filter of the programs' names from `interface` (netlink filters a killed daemon
/// left, at any priority): at start, before attaching, and for `--cleanup`. Returns how many
/// hooks had one. TCX links need nothing: they went with the process that held them.
pub fn remove_leftovers(interface: &str) -> io::Result<usize> {
    let mut removed = 0;
    for (name, hook) in [(INGRESS, TcAttachType::Ingress), (EGRESS, TcAttachType::Egress)] {
        match qdisc_detach_program(interface, hook, name) {
            Ok(()) => removed += 1,
            Err(TcError::IoError(e)) if e.kind() == io::ErrorKind::NotFound => {}
            // No clsact qdisc (nothing of ours can be there) or no such interface.
            Err(TcError::NetlinkError(_)) => {}
            Err(e) => return Err(other(&format!("removing {name} from {interface}"), e)),
        }
    }
    Ok(removed)
}

/// Adds the clsact qdisc netlink filters need, unless there; fails on an `ingress` qdisc (only
/// one of the two can exist, and the egress program has no hook on `ingress`).
fn prepare_clsact(interface: &str) -> io::Result<()> {
    if qdisc_add_clsact(interface).is_ok() {
        return Ok(());
    }
    let index = interface_index(interface)?;
    if qdisc::ingress_parent_is(index, "clsact")? {
        return Ok(());
    }
    let why = if qdisc::ingress_parent_is(index, "ingress")? {
        "an `ingress` qdisc (sqm-scripts adds one for its ingress shaping) holds the hook clsact \
         needs; before Linux 6.6 the tc programs and it cannot share an interface"
    } else {
        "clsact could not be added"
    };
    Err(io::Error::other(format!("{interface}: {why}")))
}

fn interface_index(interface: &str) -> io::Result<u32> {
    let name = std::ffi::CString::new(interface).map_err(io::Error::other)?;
    // SAFETY: a NUL-terminated name; if_nametoindex reads nothing else.
    #[allow(unsafe_code, reason = "if_nametoindex(3) through libc")]
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(index)
}

/// The maps program `id` uses (any loaded program, by its kernel id). For tests and
/// diagnostics: a leaked filter keeps its program and the program its maps.
pub fn program_map_ids(id: u32) -> io::Result<Vec<u32>> {
    for info in aya::programs::loaded_programs() {
        let info = info.map_err(|e| other("listing programs", e))?;
        if info.id() == id {
            return Ok(info
                .map_ids()
                .map_err(|e| other("program maps", e))?
                .unwrap_or_default());
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("no program {id}"),
    ))
}

/// Whether a map with kernel id `id` exists.
pub fn map_exists(id: u32) -> bool {
    aya::maps::MapInfo::from_id(id).is_ok()
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
