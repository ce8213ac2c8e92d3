//! Changing a built testbed's link while it runs (the lab's `link` scenario): the download
//! bottleneck's rate, and the delay element's one-way delays (a route change).

use std::path::PathBuf;

use anyhow::{bail, ensure, Context, Result};

use crate::delay_line::delay_from_ms;
use crate::delay_stats::DelayStats;
use crate::topology::{Ns, ISP_DOWN_IF};
use crate::{cmd, Testbed};

impl Testbed {
    /// Sets the download bottleneck (the tbf on the isp's router-facing egress) to `rate_mbit`
    /// in place (`tc qdisc change`: the packets it holds stay queued). The queue limit stays the
    /// same in bytes, as a modem's buffer does (so its worst delay grows when the rate falls);
    /// the burst is the one a testbed built at the new rate would have. The upload bottleneck
    /// is left alone.
    pub fn set_download_rate(&self, rate_mbit: f64) -> Result<()> {
        ensure!(
            rate_mbit.is_finite() && rate_mbit > 0.0,
            "rate must be positive, got {rate_mbit}"
        );
        let rate = (rate_mbit * 1e6).round() as u64;
        let args = cmd::tbf_change_args(
            ISP_DOWN_IF,
            rate,
            cmd::tbf_burst_bytes(rate),
            self.spec.effective_queue_bytes(),
        );
        cmd::run(
            "tc",
            &[&["-n".to_string(), self.ns_name(Ns::Isp)][..], &args].concat(),
        )
        .with_context(|| format!("setting the download rate to {rate_mbit} Mbit/s"))?;
        Ok(())
    }

    /// The delay element's control file (see `slipstream-delay --control-file`), under the
    /// temporary directory, named after the testbed; written by
    /// [`set_one_way_delays`](Self::set_one_way_delays), removed at teardown.
    pub fn delay_control_file(&self) -> PathBuf {
        std::env::temp_dir().join(format!("{}-delay.ctl", self.spec.name_prefix))
    }

    /// Where the delay element writes its counters at exit (`slipstream-delay --stats-file`),
    /// under the temporary directory, named after the testbed; removed at teardown.
    pub fn delay_stats_file(&self) -> PathBuf {
        std::env::temp_dir().join(format!("{}-delay.stats", self.spec.name_prefix))
    }

    /// Stops the delay element (SIGTERM: it releases every held packet first) and returns its
    /// counters; `None` if this testbed has none. For the end of a run, once its flows are
    /// done: from here on no packet crosses the isp (the NFQUEUE rules have no listener).
    pub fn stop_delay_element(&self) -> Result<Option<DelayStats>> {
        let mut element = {
            let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
            match owned.iter().position(|o| o.label == "slipstream-delay") {
                Some(i) => owned.remove(i),
                None => return Ok(None),
            }
        };
        cmd::signal(element.child.id(), libc::SIGTERM);
        ensure!(
            element.wait_or_kill(),
            "slipstream-delay ignored SIGTERM (killed)"
        );
        let status = element.child.wait().context("waiting for slipstream-delay")?;
        ensure!(status.success(), "slipstream-delay exited with {status}");
        let path = self.delay_stats_file();
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let _ = std::fs::remove_file(&path);
        DelayStats::parse(&text).map(Some)
    }

    /// Sets the delay element's one-way delays, downloads (server → router) and uploads: they
    /// apply to packets arriving from now on; the held ones keep theirs and none is reordered.
    /// Writes the control file (atomically, by rename) and sends the element SIGHUP.
    pub fn set_one_way_delays(&self, down_ms: f64, up_ms: f64) -> Result<()> {
        delay_from_ms(down_ms).context("download delay")?;
        delay_from_ms(up_ms).context("upload delay")?;
        let pid = {
            let owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
            match owned.iter().find(|o| o.label == "slipstream-delay") {
                Some(o) => o.child.id(),
                None => bail!("this testbed has no delay element (its RTT is 0)"),
            }
        };
        let path = self.delay_control_file();
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{down_ms} {up_ms}\n"))
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))?;
        cmd::signal(pid, libc::SIGHUP);
        Ok(())
    }
}
