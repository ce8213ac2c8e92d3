//! The daemon under test: `slipstreamd` started in the router namespace, its flows read from its
//! control socket (the typed `slipstream-inspect` client), its metrics scraped there for what
//! only they count, and a clean stop checked (exit status, firewall rules gone).

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use slipstream_inspect::{FlowInfo, Request, Response};

use crate::{Ns, Testbed};

/// A running `slipstreamd` in the testbed's router namespace.
pub struct Daemon {
    child: Option<Child>,
    log_path: PathBuf,
    metrics_url: String,
    control_socket: PathBuf,
}

impl Daemon {
    /// Starts `binary --config config` in the router namespace, logging to `log_path`, and waits
    /// until its metrics endpoint (`metrics_addr`, e.g. "127.0.0.1:9617") answers.
    pub fn start(
        tb: &Testbed,
        binary: &Path,
        config: &Path,
        metrics_addr: &str,
        log_path: &Path,
    ) -> Result<Daemon> {
        if !binary.exists() {
            bail!(
                "{} not found: build it first (cargo build --workspace --bins)",
                binary.display()
            );
        }
        let control_socket = slipstream_config::load(config)
            .map_err(|e| anyhow::anyhow!("{}: {e}", config.display()))?
            .control
            .socket;
        let log =
            std::fs::File::create(log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let mut command = tb.exec(
            Ns::Router,
            &[binary.as_os_str(), "--config".as_ref(), config.as_os_str()],
        );
        command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        let child = command.spawn().context("starting slipstreamd")?;
        let mut daemon = Daemon {
            child: Some(child),
            log_path: log_path.to_path_buf(),
            metrics_url: format!("http://{metrics_addr}/metrics"),
            control_socket,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if daemon.scrape(tb).is_ok() {
                return Ok(daemon);
            }
            if let Some(status) = daemon.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("slipstreamd exited at start ({status}):\n{}", daemon.log());
            }
            if Instant::now() > deadline {
                bail!(
                    "slipstreamd's metrics endpoint did not answer within 10 s:\n{}",
                    daemon.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The daemon's process id (`ip netns exec` execs it, so it is the child's), while it runs:
    /// for its `/proc/<pid>/status` and `stat` (memory, CPU time).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The metrics text, fetched with curl inside the router namespace.
    pub fn scrape(&self, tb: &Testbed) -> Result<String> {
        tb.run_in(Ns::Router, &["curl", "-sf", "--max-time", "2", &self.metrics_url])
    }

    /// The daemon's flows, from its control socket (`{"cmd":"flows"}`). The socket is a file,
    /// so it is reached from outside the router namespace.
    pub fn flows(&self) -> Result<Vec<FlowInfo>> {
        match slipstream_inspect::query(&self.control_socket, &Request::Flows)? {
            Response::Flows(list) => Ok(list.flows),
            other => bail!("unexpected answer to flows: {other:?}"),
        }
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// SIGKILL (`kill -9`: no cleanup at all, the rules stay behind), then waits for the exit.
    pub fn kill(mut self) -> Result<ExitStatus> {
        let mut child = self.child.take().context("daemon already stopped")?;
        // SAFETY: kill(2) on a pid we spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        Ok(child.wait()?)
    }

    /// SIGTERM, then waits up to 10 s for the exit.
    pub fn stop(mut self) -> Result<ExitStatus> {
        let mut child = self.child.take().context("daemon already stopped")?;
        // `ip netns exec` execs the daemon, so the child's pid is the daemon's.
        // SAFETY: kill(2) on a pid we spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                bail!("slipstreamd did not exit within 10 s of SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Memory of a process, from `/proc/<pid>/status`: (`VmRSS`, `VmHWM`) in KiB (resident now, and
/// the most it was resident since it started).
pub fn process_memory_kib(pid: u32) -> Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    parse_memory_kib(&status).with_context(|| format!("no VmRSS/VmHWM in /proc/{pid}/status"))
}

fn parse_memory_kib(status: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        status.lines().find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(':')?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
    };
    Some((field("VmRSS")?, field("VmHWM")?))
}

/// CPU time a process used, user plus system, all its threads, in seconds (`utime` + `stime`
/// of `/proc/<pid>/stat`, in clock ticks).
pub fn process_cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    let ticks = parse_cpu_ticks(&stat).with_context(|| format!("no utime/stime in /proc/{pid}/stat"))?;
    Ok(ticks as f64 / clock_ticks()?)
}

/// Clock ticks per second, the unit of `/proc`'s CPU times (`sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks() -> Result<f64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        bail!("sysconf(_SC_CLK_TCK) = {hz}");
    }
    Ok(hz as f64)
}

fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
    // Field 3 (state) is the first there; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// The value of the first sample of `name` whose labels include every `(label, value)` pair: for
/// what only the metrics count (totals, drops); a flow's state comes from [`Daemon::flows`].
pub fn metric_value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let (label_part, value) = match rest.strip_prefix('{') {
            Some(r) => {
                let end = r.rfind('}')?;
                (&r[..end], r[end + 1..].trim())
            }
            None if rest.starts_with(' ') => ("", rest.trim()),
            None => return None,
        };
        let all = labels
            .iter()
            .all(|(k, v)| label_part.contains(&format!("{k}=\"{v}\"")));
        if all {
            value.split_whitespace().next()?.parse().ok()
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_memory_and_cpu() {
        let status = "Name:\tslipstreamd\nVmPeak:\t  20000 kB\nVmHWM:\t    9000 kB\nVmRSS:\t    8000 kB\n";
        assert_eq!(parse_memory_kib(status), Some((8000, 9000)));
        assert_eq!(parse_memory_kib("VmRSS: 1 kB\n"), None);
        let stat = "1234 (slip (d) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        let spaced = "1234 (slip stream) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_cpu_ticks(spaced), Some(325));
        assert_eq!(parse_cpu_ticks("garbage"), None);
        let own = std::process::id();
        let (rss, hwm) = process_memory_kib(own).unwrap();
        assert!(rss > 0 && hwm >= rss, "{rss} {hwm}");
        assert!(process_cpu_seconds(own).unwrap() >= 0.0);
    }

    #[test]
    fn finds_labelled_samples() {
        let text = "# HELP x\nslipstream_flow_rwnd_bytes{rule=\"bt\",sender=\"10.77.1.2:6881\",receiver=\"10.77.3.2:4\"} 64000\n\
                    slipstream_flow_rwnd_bytes{rule=\"bt\",sender=\"10.77.1.2:5201\",receiver=\"10.77.3.2:5\"} 1\n\
                    slipstream_flows_active 2\n";
        assert_eq!(
            metric_value(
                text,
                "slipstream_flow_rwnd_bytes",
                &[("sender", "10.77.1.2:6881")]
            ),
            Some(64000.0)
        );
        assert_eq!(
            metric_value(
                text,
                "slipstream_flow_rwnd_bytes",
                &[("sender", "10.77.1.2:5201")]
            ),
            Some(1.0)
        );
        assert_eq!(metric_value(text, "slipstream_flows_active", &[]), Some(2.0));
        assert_eq!(metric_value(text, "slipstream_flows", &[]), None);
        assert_eq!(
            metric_value(text, "slipstream_flow_rwnd_bytes", &[("sender", "nope")]),
            None
        );
    }
}
