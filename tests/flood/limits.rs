//! Kernel limits the flood test sets for its run and puts back: conntrack's table size, a CPU cap.

use super::*;

/// The host's `nf_conntrack_max` (global: the router namespace cannot set it), raised for the
/// test if needed and put back when dropped.
pub(crate) struct ConntrackMax {
    pub(crate) restore: Option<u64>,
}

pub(crate) const CONNTRACK_MAX: &str = "/proc/sys/net/netfilter/nf_conntrack_max";

impl ConntrackMax {
    /// Makes room for `entries` more conntrack entries in one namespace, plus 16 Ki (the
    /// download's and anything else's).
    pub(crate) fn ensure(entries: u64) -> ConntrackMax {
        let current: u64 = std::fs::read_to_string(CONNTRACK_MAX)
            .expect("nf_conntrack loaded (the router namespace uses it)")
            .trim()
            .parse()
            .expect("a number");
        let need = entries + 16_384;
        if current >= need {
            eprintln!(
                "nf_conntrack_max {current} (host-wide) leaves room for {entries} flood entries: unchanged"
            );
            return ConntrackMax { restore: None };
        }
        std::fs::write(CONNTRACK_MAX, need.to_string()).expect("raise nf_conntrack_max");
        eprintln!("nf_conntrack_max raised host-wide from {current} to {need} (restored at the end)");
        ConntrackMax {
            restore: Some(current),
        }
    }
}

impl Drop for ConntrackMax {
    fn drop(&mut self) {
        if let Some(v) = self.restore {
            match std::fs::write(CONNTRACK_MAX, v.to_string()) {
                Ok(()) => eprintln!("nf_conntrack_max restored to {v}"),
                Err(e) => eprintln!("could not restore nf_conntrack_max to {v}: {e}"),
            }
        }
    }
}

/// A CPU cap on a process: a cgroup of its own with `fraction` of one CPU per 10 ms period
/// (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us`). Dropping it moves the process back and
/// removes the cgroup.
pub(crate) struct CpuCap {
    pub(crate) dir: PathBuf,
    pub(crate) origin: PathBuf,
    pub(crate) pid: u32,
}

pub(crate) const CAP_PERIOD_US: u64 = 10_000;

impl CpuCap {
    pub(crate) fn apply(pid: u32, fraction: f64) -> Result<CpuCap, String> {
        let quota = ((fraction * CAP_PERIOD_US as f64) as u64).max(1000);
        let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).map_err(|e| e.to_string())?;
        let name = format!("slipstream-flood-{}", std::process::id());
        let v2_root = Path::new("/sys/fs/cgroup");
        let v1_root = Path::new("/sys/fs/cgroup/cpu");
        let (root, rel, limits): (&Path, &str, Vec<(&str, String)>) =
            if v2_root.join("cgroup.controllers").is_file() {
                let controllers =
                    std::fs::read_to_string(v2_root.join("cgroup.controllers")).unwrap_or_default();
                if !controllers.split_whitespace().any(|c| c == "cpu") {
                    return Err("cgroup v2 without the cpu controller".into());
                }
                let _ = std::fs::write(v2_root.join("cgroup.subtree_control"), "+cpu");
                let rel = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("/");
                (
                    v2_root,
                    rel,
                    vec![("cpu.max", format!("{quota} {CAP_PERIOD_US}"))],
                )
            } else if v1_root.join("cgroup.procs").is_file() {
                let rel = own
                    .lines()
                    .find_map(|l| {
                        let mut f = l.splitn(3, ':');
                        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
                        controllers.split(',').any(|c| c == "cpu").then_some(path)
                    })
                    .unwrap_or("/");
                (
                    v1_root,
                    rel,
                    vec![
                        ("cpu.cfs_period_us", CAP_PERIOD_US.to_string()),
                        ("cpu.cfs_quota_us", quota.to_string()),
                    ],
                )
            } else {
                return Err("no cgroup CPU controller mounted".into());
            };
        let dir = root.join(&name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let cap = CpuCap {
            origin: root.join(rel.trim_start_matches('/')),
            dir,
            pid,
        };
        for (file, value) in limits {
            std::fs::write(cap.dir.join(file), &value)
                .map_err(|e| format!("{}/{file} = {value}: {e}", cap.dir.display()))?;
        }
        std::fs::write(cap.dir.join("cgroup.procs"), pid.to_string())
            .map_err(|e| format!("moving {pid} into {}: {e}", cap.dir.display()))?;
        Ok(cap)
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        let _ = std::fs::write(self.origin.join("cgroup.procs"), self.pid.to_string());
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("could not remove cgroup {}", self.dir.display());
    }
}
