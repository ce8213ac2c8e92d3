//! `--set cpu_rates=10,100,500,0`: the daemon's CPU per Gbit/s as the download grows, NFQUEUE
//! and eBPF, one daemon per datapath for all rates; the page lists them in the notes
//! (docs/lab/about.md, `datapath`).

use anyhow::Result;
use slipstream_testbed::daemon::process_cpu_seconds;

use super::{setup_mode, teardown_mode, Env, Mode, LOAD_PORT, NAME};
use crate::result::{now_unix, Metric, Role, RunResult, Series, Unit};

/// What x is in the series: the goodput reached, not the rate asked (0 asks for the maximum).
pub const X_MEANING: &str = "download goodput, Mbit/s";

/// CPU seconds per Gbit moved, i.e. cores busy at 1 Gbit/s.
pub fn cores_per_gbit(cpu_s: f64, goodput_mbps: f64, secs: f64) -> f64 {
    cpu_s / (goodput_mbps * secs / 1000.0).max(1e-9)
}

/// The daemon's CPU per Gbit/s at each download rate (Mbit/s, 0 = unlimited), NFQUEUE then eBPF.
pub(super) fn cpu_by_rate(env: &Env, rates: &[f64], notes: &mut Vec<String>) -> Result<Vec<RunResult>> {
    let mut out = Vec::new();
    for (mode, curve) in [(Mode::Slipstreamd, "nfqueue-by-rate"), (Mode::SlipstreamdEbpf, "ebpf-by-rate")] {
        let (active, pid) = setup_mode(env, mode)?;
        let pid = pid.expect("the daemon modes have a process");
        let mut points = Vec::new();
        let mut metrics = Vec::new();
        for &rate in rates {
            let secs = env.measure_s.ceil() as u32;
            let limit = format!("{rate}M");
            let args: Vec<&str> = if rate > 0.0 { vec!["-b", &limit] } else { Vec::new() };
            let c0 = process_cpu_seconds(pid)?;
            let res = env.tb.run_download(LOAD_PORT, secs, &env.opts.cc, &args)?.wait()?;
            let cpu = process_cpu_seconds(pid)? - c0;
            let per_gbit = cores_per_gbit(cpu, res.goodput_mbps, f64::from(secs));
            notes.push(format!(
                "CPU by rate: {} asked {} Mbit/s, got {:.1} Mbit/s: {:.2} s CPU in {secs} s, {:.3} cores per Gbit/s",
                mode.label(),
                if rate > 0.0 { rate.to_string() } else { "max".into() },
                res.goodput_mbps,
                cpu,
                per_gbit
            ));
            points.push((res.goodput_mbps, per_gbit));
            metrics.push(Metric::new(&format!("goodput@{rate}"), Unit::Mbps, res.goodput_mbps).flow("load"));
            metrics.push(Metric::new(&format!("process_cpu_per_gbit@{rate}"), Unit::S, per_gbit));
        }
        teardown_mode(env, active, notes)?;
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let source = "/proc/<pid>/stat utime+stime";
        let series = Series::new("daemon_cpu_per_gbit", Unit::S, "load", Role::Background, source)
            .over(X_MEANING)
            .with_points(points);
        let mut run = RunResult {
            scenario: NAME.into(),
            alternative: curve.into(),
            started_unix: now_unix(),
            series: vec![series],
            metrics,
            ..Default::default()
        };
        // One download per rate, back to back.
        run.params.duration_s = env.measure_s.ceil() * rates.len() as f64;
        run.params.cc = env.opts.cc.clone();
        out.push(run);
    }
    Ok(out)
}

#[cfg(test)]
#[path = "rates_tests.rs"]
mod tests;
