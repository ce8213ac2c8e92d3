//! Running the lab's helper binaries (`slipstream-web`, `nfq-accept`) inside testbed
//! namespaces: spawn with piped stdout, wait for their `ready` line, collect the rest of their
//! output, stop them with SIGTERM.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A helper binary of the workspace, checked to exist.
pub fn helper_binary(dir: &Path, name: &str) -> Result<PathBuf> {
    let p = dir.join(name);
    if !p.is_file() {
        bail!(
            "{} not found: build the lab's helpers first (cargo build --release -p slipstream-lab --bins)",
            p.display()
        );
    }
    Ok(p)
}

/// `bin` with the words of `args` as its arguments, to run in namespace `ns` of `tb`
/// (`args` is a plain command line: no quoting, no words with spaces).
pub fn helper_command(
    tb: &slipstream_testbed::Testbed,
    ns: slipstream_testbed::Ns,
    bin: &Path,
    args: &str,
) -> Command {
    let argv: Vec<&std::ffi::OsStr> =
        std::iter::once(bin.as_os_str()).chain(args.split_whitespace().map(std::ffi::OsStr::new)).collect();
    tb.exec(ns, &argv)
}

/// A spawned helper whose stdout is read line by line on a thread.
pub struct Helper {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    /// What runs, for messages.
    pub description: String,
}

impl Helper {
    /// Spawns `c` (stdin null, stdout and stderr piped).
    pub fn spawn(mut c: Command) -> Result<Helper> {
        let description = slipstream_testbed::cmd::describe(&c);
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().with_context(|| format!("spawning `{description}`"))?;
        let out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let stderr = Some(std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        }));
        Ok(Helper { child: Some(child), lines, stderr, description })
    }

    /// Spawns and waits (up to `timeout`) for the first stdout line to be `ready`.
    pub fn spawn_ready(c: Command, timeout: Duration) -> Result<Helper> {
        let mut h = Helper::spawn(c)?;
        match h.lines.recv_timeout(timeout) {
            Ok(l) if l.trim() == "ready" => Ok(h),
            Ok(other) => bail!("`{}` said {other:?} instead of ready", h.description),
            Err(_) => {
                let err = h.kill_and_stderr();
                bail!("`{}` not ready within {timeout:?}: {}", h.description, err.trim())
            }
        }
    }

    /// The process id (`ip netns exec` execs the program, so it is the program's).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        if let Some(pid) = self.pid() {
            slipstream_testbed::cmd::signal(pid, libc::SIGTERM);
        }
    }

    /// Waits up to `timeout` for the exit; returns the remaining stdout lines. Kills it past the
    /// timeout and fails; fails on a non-zero exit (with stderr).
    pub fn wait(mut self, timeout: Duration) -> Result<Vec<String>> {
        let mut child = self.child.take().expect("child present until wait");
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("`{}` did not finish within {timeout:?}", self.description);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = self.stderr.take().and_then(|h| h.join().ok()).unwrap_or_default();
        let lines: Vec<String> = self.lines.try_iter().collect();
        // The reader thread may still be draining the pipe: take what arrives for a moment.
        let mut lines = lines;
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            lines.push(l);
        }
        if !status.success() {
            bail!("`{}` exited with {status}: {}", self.description, err.trim());
        }
        Ok(lines)
    }

    /// SIGTERM, then [`wait`](Self::wait).
    pub fn stop(self, timeout: Duration) -> Result<Vec<String>> {
        self.terminate();
        self.wait(timeout)
    }

    fn kill_and_stderr(&mut self) -> String {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stderr.take().and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The machine-wide CPU counters of `/proc/stat`'s `cpu` line, in seconds (all cores summed).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MachineCpu {
    pub user: f64,
    pub system: f64,
    pub irq: f64,
    pub softirq: f64,
    pub idle: f64,
    /// Everything but idle and iowait.
    pub busy: f64,
}

impl MachineCpu {
    /// Reads `/proc/stat`.
    pub fn read() -> Option<MachineCpu> {
        parse_machine_cpu(&std::fs::read_to_string("/proc/stat").ok()?, clock_ticks())
    }

    /// `self - earlier`, field by field.
    pub fn since(&self, earlier: &MachineCpu) -> MachineCpu {
        MachineCpu {
            user: self.user - earlier.user,
            system: self.system - earlier.system,
            irq: self.irq - earlier.irq,
            softirq: self.softirq - earlier.softirq,
            idle: self.idle - earlier.idle,
            busy: self.busy - earlier.busy,
        }
    }
}

/// Parses the aggregate `cpu` line of `/proc/stat` (ticks divided by `hz`).
pub fn parse_machine_cpu(text: &str, hz: f64) -> Option<MachineCpu> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse::<f64>().map(|t| t / hz))
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice] (guest is in user).
    let g = |i: usize| v.get(i).copied().unwrap_or(0.0);
    let (user, nice, system, idle, iowait, irq, softirq, steal) =
        (g(0), g(1), g(2), g(3), g(4), g(5), g(6), g(7));
    Some(MachineCpu {
        user: user + nice,
        system,
        irq,
        softirq,
        idle: idle + iowait,
        busy: user + nice + system + irq + softirq + steal,
    })
}

/// The pid of the process named `comm` in namespace `ns` (`ip netns pids`), if exactly one.
pub fn pid_in_netns(ns: &str, comm: &str) -> Option<u32> {
    let out = slipstream_testbed::cmd::run("ip", &["netns", "pids", ns]).ok()?;
    let found: Vec<u32> = out
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm))
        .collect();
    match found.as_slice() {
        [p] => Some(*p),
        _ => None,
    }
}

#[cfg(test)]
#[path = "procs_tests.rs"]
mod tests;
