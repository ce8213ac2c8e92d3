//! Least privilege: once its sockets are bound, the daemon keeps only CAP_NET_ADMIN and
//! CAP_NET_RAW, and sets no_new_privs.
//!
//! What needs which (tried on Linux 6.18, iptables 1.8.9, nftables 1.0):
//! * CAP_NET_ADMIN: binding and configuring the NFQUEUE queues; every verdict the packet thread
//!   sends afterwards (nfnetlink checks the capability of the sending thread on each message, so
//!   it must stay effective); ctnetlink lookups of window scales; `nft` and `iptables-legacy`
//!   changing rules.
//! * CAP_NET_RAW: the raw sockets window updates go out on (checked when they are opened), the
//!   link-delay prober's raw ICMP socket where `net.ipv4.ping_group_range` allows no
//!   unprivileged one (opened by the packet thread at the first probe, `prober`), and
//!   `iptables-legacy`, `-save` and `-restore`, which open a raw socket to reach the kernel's
//!   tables: with CAP_NET_ADMIN alone they fail with "can't initialize iptables table `mangle':
//!   Permission denied". `nft` needs only CAP_NET_ADMIN.
//!
//! Nothing else is needed after setup: the metrics listener and the control socket are bound
//! before this runs (a metrics port below 1024 needs CAP_NET_BIND_SERVICE only at bind time), and
//! the daemon stays uid 0, so it can still read its config file, unlink its socket and take the
//! xtables lock as the owner of those files, without CAP_DAC_OVERRIDE.
//!
//! Both capabilities stay in the effective, permitted, inheritable and ambient sets, and they are
//! all the bounding set holds: the firewall programs that reloads and the watchdog run get exactly
//! these two (ambient capabilities survive execve of programs without file capabilities), and no
//! program the daemon runs can gain another (bounding set, no_new_privs).
//!
//! Capabilities belong to threads: this runs on the main thread before any other thread exists,
//! so the packet thread, the conntrack thread and tokio's threads start with the reduced sets.
//!
//! A daemon that cannot drop (no CAP_SETPCAP to shrink the bounding set, an old kernel without
//! ambient capabilities) runs on and warns: it works as before, with more privilege than needed.
//! Started by procd with `/etc/capabilities/slipstream.json` it has the two, and for setup
//! CAP_BPF and CAP_PERFMON (loading the eBPF datapath: maps, BTF and the verifier, which refuses
//! the program without CAP_PERFMON) and CAP_SETPCAP (to shrink the bounding set here); those
//! three go. Attaching the programs to interfaces that appear later needs only CAP_NET_ADMIN
//! (TCX links and netlink filters alike), and the loaded maps are used through their descriptors.
//!
//! Except on kernels before 5.19: there `bpf(2)` refuses *every* command, map lookups and
//! updates on a descriptor the daemon already holds included, to a caller without CAP_BPF (or
//! CAP_SYS_ADMIN) while `kernel.unprivileged_bpf_disabled` is set, as OpenWrt and Debian set it
//! (`__sys_bpf` in kernel/bpf/syscall.c up to 5.18; 5.19's "bpf: refactor
//! unprivileged_bpf_disabled logic" narrowed the check to BPF_MAP_CREATE and BPF_PROG_LOAD).
//! The heartbeat and every map write would fail and the programs sit inert. So with the eBPF
//! datapath on such a kernel the daemon keeps CAP_BPF too, in its effective and permitted sets
//! only (no program it runs inherits it; [`bpf_needed_after_setup`]). Every kernel that loads
//! the programs has CAP_BPF (5.8+; the programs need 5.12's atomics), so CAP_SYS_ADMIN is never
//! kept. The daemon then checks a map write (`datapath::setup::check_maps_writable`) and falls
//! back to NFQUEUE, loudly, if it fails.
#![allow(
    unsafe_code,
    reason = "prctl(PR_SET_NO_NEW_PRIVS) has no safe wrapper in libc"
)]

use caps::{CapSet, Capability, CapsHashSet};
use tracing::{info, warn};

/// The capabilities the daemon keeps after setup.
pub(crate) const KEPT: [Capability; 2] = [Capability::CAP_NET_ADMIN, Capability::CAP_NET_RAW];

/// Whether the eBPF datapath needs CAP_BPF after setup on this kernel: before 5.19 every
/// `bpf(2)` command, a map write too, needs it while unprivileged BPF is disabled.
pub(crate) fn bpf_needed_after_setup() -> bool {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
        .map_or(true, |v| v.trim() != "0");
    disabled && kernel_before(5, 19)
}

/// Whether the running kernel is older than `major.minor` (unknown counts as older).
fn kernel_before(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']).map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b) < (major, minor),
        _ => true,
    }
}

/// Drops every capability but [`KEPT`] from all five sets of the calling thread (call it before
/// other threads start) and sets no_new_privs; with `keep_bpf`, CAP_BPF stays in the effective
/// and permitted sets (see the module docs). Logs once what is kept; anything that could not be
/// dropped is a warning, never an error.
pub(crate) fn drop_privileges(keep_bpf: bool) {
    let own: &[Capability] = if keep_bpf { &[Capability::CAP_BPF] } else { &[] };
    let problems = restrict(&KEPT, own);
    let status = std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| CapStatus::parse(&s));
    let kept_mask = KEPT.iter().fold(0, |m, c| m | c.bitmask());
    let own_mask = own.iter().fold(0, |m, c| m | c.bitmask());
    match status {
        Some(s) if problems.is_empty() && s.is_restricted_to(kept_mask, own_mask) => info!(
            "privileges: keeping {} (effective, permitted, inheritable, ambient and bounding sets){}; \
             every other capability dropped, no_new_privs set",
            names(s.effective & !own_mask),
            if keep_bpf {
                " and CAP_BPF (effective and permitted only: this kernel, before 5.19, refuses the \
                 eBPF datapath's map writes without it)"
            } else {
                ""
            }
        ),
        Some(s) => warn!(
            "privileges: COULD NOT DROP ALL CAPABILITIES; running with more privilege than needed \
             ({}). Now: effective {}; permitted {}; inheritable {}; ambient {}; bounding {}; \
             no_new_privs {}",
            problems.join("; "),
            names(s.effective),
            names(s.permitted),
            names(s.inheritable),
            names(s.ambient),
            names(s.bounding),
            s.no_new_privs
        ),
        None => warn!(
            "privileges: cannot read /proc/thread-self/status to check the capabilities kept{}{}",
            if problems.is_empty() { "" } else { "; " },
            problems.join("; ")
        ),
    }
}

/// Restricts every set to `keep` (those of them that are permitted now), and the effective and
/// permitted sets to `keep` and `own`; returns what failed.
pub(crate) fn restrict(keep: &[Capability], own: &[Capability]) -> Vec<String> {
    let mut problems = Vec::new();
    let permitted = match caps::read(None, CapSet::Permitted) {
        Ok(p) => p,
        Err(e) => return vec![format!("reading the permitted set: {e}")],
    };
    let keep: CapsHashSet = keep.iter().copied().filter(|c| permitted.contains(c)).collect();
    let mut keep_own = keep.clone();
    keep_own.extend(own.iter().copied().filter(|c| permitted.contains(c)));
    // The bounding set first: shrinking it takes CAP_SETPCAP, which goes with the effective set.
    match caps::read(None, CapSet::Bounding) {
        Ok(bounding) => {
            let mut failed: Vec<String> = Vec::new();
            let mut reason = String::new();
            for cap in bounding.difference(&keep) {
                if let Err(e) = caps::drop(None, CapSet::Bounding, *cap) {
                    failed.push(cap.to_string());
                    reason = e.to_string();
                }
            }
            if !failed.is_empty() {
                failed.sort();
                problems.push(format!(
                    "{} left in the bounding set: {reason} (dropping needs CAP_SETPCAP)",
                    failed.join(", ")
                ));
            }
        }
        Err(e) => problems.push(format!("reading the bounding set: {e}")),
    }
    if let Err(e) = caps::set(None, CapSet::Inheritable, &keep) {
        problems.push(format!("setting the inheritable set: {e}"));
    }
    // Ambient capabilities must be permitted and inheritable: raised after the inheritable set.
    let ambient = caps::clear(None, CapSet::Ambient).and_then(|()| {
        keep.iter()
            .try_for_each(|cap| caps::raise(None, CapSet::Ambient, *cap))
    });
    if let Err(e) = ambient {
        problems.push(format!(
            "setting the ambient set: {e} (the firewall programs may lack capabilities)"
        ));
    }
    // Effective before permitted: the effective set must stay within the permitted one.
    for set in [CapSet::Effective, CapSet::Permitted] {
        if let Err(e) = caps::set(None, set, &keep_own) {
            problems.push(format!("setting the {set:?} set: {e}"));
        }
    }
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integer arguments and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        problems.push(format!(
            "setting no_new_privs: {}",
            std::io::Error::last_os_error()
        ));
    }
    problems
}

/// The capability sets of a thread, as `/proc/<pid>/task/<tid>/status` shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CapStatus {
    inheritable: u64,
    permitted: u64,
    effective: u64,
    bounding: u64,
    ambient: u64,
    no_new_privs: bool,
}

impl CapStatus {
    fn parse(status: &str) -> Option<CapStatus> {
        let mut s = CapStatus::default();
        let mut seen = 0;
        for line in status.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            let mask = || u64::from_str_radix(value, 16).ok();
            match key {
                "CapInh" => s.inheritable = mask()?,
                "CapPrm" => s.permitted = mask()?,
                "CapEff" => s.effective = mask()?,
                "CapBnd" => s.bounding = mask()?,
                "CapAmb" => s.ambient = mask()?,
                "NoNewPrivs" => s.no_new_privs = value == "1",
                _ => continue,
            }
            seen += 1;
        }
        (seen == 6).then_some(s)
    }

    /// Every set is within `mask` (the effective and permitted sets within `mask | own`) and
    /// no_new_privs is on.
    fn is_restricted_to(&self, mask: u64, own: u64) -> bool {
        [self.inheritable, self.bounding, self.ambient]
            .iter()
            .all(|set| set & !mask == 0)
            && [self.permitted, self.effective]
                .iter()
                .all(|set| set & !(mask | own) == 0)
            && self.no_new_privs
    }
}

/// `CAP_NET_ADMIN, CAP_NET_RAW` for a mask (`none` if empty; unknown bits as `cap_<n>`).
fn names(mask: u64) -> String {
    let all = caps::all();
    let names: Vec<String> = (0..64)
        .filter(|bit| mask & (1 << bit) != 0)
        .map(|bit| {
            all.iter()
                .find(|c| u32::from(c.index()) == bit)
                .map_or_else(|| format!("cap_{bit}"), ToString::to_string)
        })
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tslipstreamd\nUmask:\t0022\nState:\tS (sleeping)\n\
                          CapInh:\t0000000000003000\nCapPrm:\t0000000000003000\n\
                          CapEff:\t0000000000003000\nCapBnd:\t0000000000003000\n\
                          CapAmb:\t0000000000003000\nNoNewPrivs:\t1\nSeccomp:\t0\n";

    #[test]
    fn parses_the_capability_lines_of_proc_status() {
        let s = CapStatus::parse(STATUS).unwrap();
        assert_eq!(s.effective, 0x3000);
        assert!(s.no_new_privs);
        assert!(s.is_restricted_to(0x3000, 0));
        assert!(!s.is_restricted_to(1 << 12, 0));
        let full = STATUS.replace("CapBnd:\t0000000000003000", "CapBnd:\t000001ffffffffff");
        assert!(!CapStatus::parse(&full).unwrap().is_restricted_to(0x3000, 0));
        let no_nnp = STATUS.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0");
        assert!(!CapStatus::parse(&no_nnp).unwrap().is_restricted_to(0x3000, 0));
        // CAP_BPF (39) kept in the effective and permitted sets only.
        let bpf = STATUS
            .replace("CapPrm:\t0000000000003000", "CapPrm:\t0000008000003000")
            .replace("CapEff:\t0000000000003000", "CapEff:\t0000008000003000");
        let bpf = CapStatus::parse(&bpf).unwrap();
        assert!(bpf.is_restricted_to(0x3000, 1 << 39));
        assert!(!bpf.is_restricted_to(0x3000, 0));
        let inherited = STATUS.replace("CapAmb:\t0000000000003000", "CapAmb:\t0000008000003000");
        assert!(!CapStatus::parse(&inherited)
            .unwrap()
            .is_restricted_to(0x3000, 1 << 39));
        assert_eq!(CapStatus::parse("Name:\tx\nCapEff:\t0\n"), None);
    }

    /// The capability sets of the calling thread.
    fn own_status() -> CapStatus {
        CapStatus::parse(&std::fs::read_to_string("/proc/thread-self/status").unwrap()).unwrap()
    }

    /// Loads the tc program with every privilege, drops them on a fresh thread exactly as the
    /// daemon does (`restrict` with what `drop_privileges` keeps on this kernel, then with CAP_BPF
    /// kept as on kernels before 5.19), and writes the maps there: the heartbeat, a flow entry,
    /// and reads the counters back. On this kernel (6.18) the write works without CAP_BPF too
    /// (only BPF_MAP_CREATE and BPF_PROG_LOAD check it since 5.19); before 5.19 only the CAP_BPF
    /// variant would (see the module docs).
    #[test]
    #[ignore = "needs root and BPF: scripts/test.sh runs it (--ignored)"]
    fn maps_are_writable_after_dropping_privileges_as_the_daemon_does() {
        if let Some(why) = slipstream_testbed::missing_prerequisite(&[]) {
            panic!("cannot run here: {why}");
        }
        let needed = bpf_needed_after_setup();
        for keep_bpf in [needed, true] {
            let tc = slipstream_ebpf::TcDatapath::load(slipstream_ebpf::TcConfig {
                max_flows: 16,
                ring_bytes: 1 << 16,
                ..Default::default()
            })
            .expect("load with every privilege");
            let (status, written) = std::thread::spawn(move || {
                let mut tc = tc;
                let own: &[Capability] = if keep_bpf { &[Capability::CAP_BPF] } else { &[] };
                let problems = restrict(&KEPT, own);
                assert!(problems.is_empty(), "{problems:?}");
                let key = slipstream_ebpf::DirKey::new(
                    "192.168.1.10:40000".parse().unwrap(),
                    "93.184.216.34:443".parse().unwrap(),
                )
                .unwrap();
                let written = tc
                    .heartbeat(std::time::Duration::from_secs(1))
                    .and_then(|()| tc.start_flow(&key, 1))
                    .map(|()| tc.flow(&key).map(|cfg| cfg.rule));
                (own_status(), written.map_err(|e| e.to_string()))
            })
            .join()
            .unwrap();
            let bpf = if keep_bpf {
                Capability::CAP_BPF.bitmask()
            } else {
                0
            };
            assert_eq!(status.effective, 0x3000 | bpf, "keep_bpf {keep_bpf}");
            assert_eq!(status.permitted, 0x3000 | bpf);
            assert_eq!((status.ambient, status.bounding), (0x3000, 0x3000));
            assert!(status.no_new_privs);
            assert_eq!(
                written,
                Ok(Some(1)),
                "keep_bpf {keep_bpf}: map writes after the drop"
            );
            eprintln!(
                "CAP_BPF kept: {keep_bpf} (this kernel needs it: {needed}); effective {:#x}; \
                 heartbeat and flow entry written and read back",
                status.effective
            );
        }
    }

    #[test]
    fn kernel_versions_compare_by_major_and_minor() {
        assert!(!kernel_before(0, 0));
        assert!(kernel_before(u32::MAX, 0));
    }

    #[test]
    fn kept_capabilities_are_net_admin_and_net_raw() {
        let mask = KEPT.iter().fold(0, |m, c| m | c.bitmask());
        assert_eq!(mask, 0x3000);
        assert_eq!(names(mask), "CAP_NET_ADMIN, CAP_NET_RAW");
        assert_eq!(names(0), "none");
        assert_eq!(names(1 << 63), "cap_63");
    }
}
