//! A sampling process: its stdout read line by line on a thread; killed when stopped or dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use slipstream_testbed::{Ns, Testbed};

use crate::measure::{poll_script, BlockSplitter};

/// Period of the shell polling loops: the loop's fork and exec overhead (~3 ms) comes on top,
/// so a sample is taken at least every 100 ms.
pub const POLL_INTERVAL_S: f64 = 0.095;

/// A running sampling process and the thread reading it.
pub(super) struct Poller {
    child: Child,
    reader: Option<JoinHandle<()>>,
}

impl Poller {
    /// Spawns `command`, handing each line of its stdout to `on_line`.
    pub(super) fn spawn(
        mut command: Command,
        what: &str,
        mut on_line: impl FnMut(&str) + Send + 'static,
    ) -> Result<Poller> {
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = command.spawn().with_context(|| format!("starting {what}"))?;
        let out = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                on_line(&line);
            }
        });
        Ok(Poller { child, reader: Some(reader) })
    }

    /// Runs `command` in `ns` every [`POLL_INTERVAL_S`] (one shell loop, not a process per
    /// sample), handing each output block to `on_block` with its Unix time.
    pub(super) fn every_interval(
        tb: &Testbed,
        ns: Ns,
        command: &str,
        mut on_block: impl FnMut(f64, &str) + Send + 'static,
    ) -> Result<Poller> {
        let script = poll_script(command, POLL_INTERVAL_S);
        let mut split = BlockSplitter::default();
        Poller::spawn(tb.exec(ns, &["sh", "-c", &script]), command, move |line| {
            if let Some((unix, text)) = split.push_line(line) {
                on_block(unix, &text);
            }
        })
    }

    /// Kills the process and waits for the reader to see the end of its output.
    pub(super) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop();
    }
}
