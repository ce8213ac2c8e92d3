//! `udp-square`: a background download beside an unresponsive UDP square wave (Key et al.
//! Sec. 5.2, `../shared/papers/background-transfer-rwnd-key-2004.txt`).
//!
//! Key et al.: 10 Mbit/s bottleneck, a UDP flow at 6.7 Mbit/s during "on" periods and silent
//! during "off" periods of equal length T (1 to 150 s), beside one background transfer; the
//! background transfer's average bandwidth divided by the average *available* bandwidth
//! ((3.3 + 10) / 2 ≈ 6.7 Mbit/s) is plotted against T (their Fig. 6). A good background scheme
//! uses what the UDP flow leaves, and does so faster the better it tracks capacity changes.
//!
//! Here, per alternative and per T: the background download (server port 6881, classed
//! background) starts at t = 0; after a warm-up (10 s × scale, at least 8 s) the sender of
//! [`crate::web::udp`] sends the square wave server → client (best effort: UDP matches no rule and
//! no HTB background filter) for D = max(4T, 40 s × scale) s, i.e. at least two on/off cycles,
//! starting with an on period; its sink on the client counts what arrives in 100 ms bins. The UDP rate is `0.67 ×` the bottleneck rate (6.7 Mbit/s at 10 Mbit/s) of whole
//! Ethernet frames, as the tbf counts them.
//!
//! **Normalised usage.** Available capacity at time t = the TCP goodput ceiling × (1 − UDP wire
//! rate(t) / link rate), from the *measured* UDP arrivals (so UDP loss caused by the background
//! flow's queue counts as capacity the background flow took). Normalised usage = mean background
//! goodput over the wave's D seconds / mean available capacity over the same seconds; also split
//! into on and off periods. UDP loss (datagrams planned − received, over planned) shows whether
//! the background flow hurt the best-effort UDP flow.
//!
//! **Periods.** T ∈ {1, 5, 15} s, plus 50 s at `--scale` ≥ 1 and 150 s at `--scale` ≥ 3 (a 150 s
//! period needs 600 s per run); `--set periods=1,5,50` picks others. Key et al. ran 1000 s per
//! point; the paper's text gives numbers only for on/off = 50 s (Fig. 7: binary search uses about
//! 90% of the available bandwidth, stochastic approximation about 70%).

use std::net::UdpSocket;
use std::time::Duration;

use anyhow::{Context, Result};
use slipstream_testbed::Ns;

use crate::analysis;
use crate::harness::{run_all, FlowSpec, Run, RunSetup, BG_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Series, Table, Unit};
use crate::scenarios::{LabContext, ScenarioOptions};
use crate::web::udp::{self, SquareWave};
use crate::web::{join, spawn_in};

const NAME: &str = "udp-square";
const UDP_PORT: u16 = 5300;
const BIN_S: f64 = 0.1;

/// The on/off periods to run (see the module docs).
pub fn periods(opts: &ScenarioOptions) -> Result<Vec<f64>> {
    let default = match opts.duration_scale {
        s if s >= 3.0 => "1,5,15,50,150",
        s if s >= 1.0 => "1,5,15,50",
        _ => "1,5,15",
    };
    let v: Vec<f64> = opts.list("periods", default)?;
    if v.iter().any(|t| t.is_nan() || *t <= 0.0) {
        anyhow::bail!("--set periods needs positive seconds, got {v:?}");
    }
    Ok(v)
}

/// Length of the UDP wave for period `t`: at least two on/off cycles.
pub fn wave_seconds(opts: &ScenarioOptions, t: f64) -> f64 {
    (4.0 * t).max(opts.scaled(40.0, 10.0))
}

/// What one run measured, computed from its series (pure, see the tests).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    /// Mean background goodput over the wave, Mbit/s.
    pub bg_mbps: f64,
    /// Mean available capacity (goodput terms) over the wave, Mbit/s.
    pub available_mbps: f64,
    /// `bg_mbps / available_mbps`.
    pub normalized: f64,
    /// The same restricted to on periods and to off periods.
    pub normalized_on: f64,
    pub normalized_off: f64,
    /// Mean measured UDP wire rate during on periods, Mbit/s.
    pub udp_on_mbps: f64,
}

/// Available capacity series: `ceiling × (1 − udp(t) / rate)`, at least 0.
pub fn available_series(udp_wire: &[(f64, f64)], rate_mbit: f64) -> Vec<(f64, f64)> {
    let ceiling = analysis::max_goodput_mbit(rate_mbit);
    udp_wire.iter().map(|&(t, u)| (t, (ceiling * (1.0 - u / rate_mbit)).max(0.0))).collect()
}

/// Usage over the wave `[t_udp, t_udp + d]`. `bg`, `available` and `udp_wire` are series of
/// rates over short intervals, each point at its interval's midpoint.
pub fn usage(
    bg: &[(f64, f64)],
    available: &[(f64, f64)],
    udp_wire: &[(f64, f64)],
    wave: &SquareWave,
    t_udp: f64,
    d: f64,
) -> Usage {
    let sel = |pts: &[(f64, f64)], phase: Option<bool>| -> Option<f64> {
        analysis::mean(pts.iter().filter_map(|&(t, v)| {
            let since = t - t_udp;
            if !(0.0..d).contains(&since) {
                return None;
            }
            match phase {
                Some(on) if wave.is_on(since) != on => None,
                _ => Some(v),
            }
        }))
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => a / b,
        _ => f64::NAN,
    };
    let bg_all = sel(bg, None);
    let av_all = sel(available, None);
    Usage {
        bg_mbps: bg_all.unwrap_or(f64::NAN),
        available_mbps: av_all.unwrap_or(f64::NAN),
        normalized: ratio(bg_all, av_all),
        normalized_on: ratio(sel(bg, Some(true)), sel(available, Some(true))),
        normalized_off: ratio(sel(bg, Some(false)), sel(available, Some(false))),
        udp_on_mbps: sel(udp_wire, Some(true)).unwrap_or(f64::NAN),
    }
}

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let periods = periods(opts)?;
    let udp_mbit = 0.67 * opts.rate_mbit;
    let warm = opts.scaled(10.0, 8.0);
    let mut waves = Vec::new();
    for &period in &periods {
        let wave = SquareWave { rate_bps: udp_mbit * 1e6, period_s: period, payload: udp::MAX_PAYLOAD };
        wave.validate()?;
        waves.push((wave, wave_seconds(opts, period)));
    }
    let setup = |&(wave, d): &(SquareWave, f64), alt| {
        let s = RunSetup::new(alt, warm + d + 1.0).param("on_off_T_s", wave.period_s);
        let s = s.param("udp_mbit", udp_mbit).param("warmup_s", warm).param("wave_s", d);
        RunSetup { ping: false, ..s }
    };
    let mut report = ScenarioReport::starting(NAME);
    run_all(ctx, opts, &mut report, &waves, setup, |run, &(wave, d)| {
        let tl = wave.period_s; // "1", "2.5": f64 prints no ".0"
        let r = one_run(run, &wave, warm, d).with_context(|| format!("on/off = {tl} s"))?;
        let m = |name: &str| r.metric(&format!("{name}_T{tl}"), None).unwrap_or(f64::NAN);
        ctx.progress.log(&format!(
            "[{NAME}] {}, on/off = {tl} s: background {:.2} Mbit/s of {:.2} available = {:.2}",
            r.alternative,
            m("bg_goodput"),
            m("available"),
            m("bg_usage_norm"),
        ));
        Ok(r)
    })?;
    report.title = format!(
        "Background download beside a {udp_mbit} Mbit/s UDP square wave (Key et al. Sec. 5.2), on/off = {} s",
        periods.iter().map(f64::to_string).collect::<Vec<_>>().join(", ")
    );
    report.table = table(opts, &periods, &report.runs);
    report.notes = vec![
        format!(
            "UDP at {udp_mbit} Mbit/s of Ethernet frames (1514 bytes) in on periods, silence in off periods; \
             warm-up {warm:.0} s of background alone, then max(4T, {:.0} s) of wave per run (Key et al.: 1000 s).",
            opts.scaled(40.0, 10.0)
        ),
        "available = TCP goodput ceiling x (1 - measured UDP wire rate / link rate); \
         normalized usage = mean background goodput / mean available over the wave."
            .into(),
        "Key et al. Fig. 6 has no values in the text; for on/off = 50 s the text (Fig. 7, control \
         interval T = 0.2 s) gives ~0.9 (binary search) and ~0.7 (stochastic approximation). \
         (Key et al.'s T is their control interval, not the on/off duration.)"
            .into(),
    ];
    ctx.write_report(report)
}

fn one_run(mut run: Run, wave: &SquareWave, warm: f64, d: f64) -> Result<RunResult> {
    let total = warm + d + 1.0;
    run.start_flow(FlowSpec::download("bg", Role::Background, BG_PORT, total))?;
    run.wait_until(warm - 1.0)?;
    let sock = join(spawn_in(run.tb(), Ns::Client, || Ok(UdpSocket::bind(("0.0.0.0", UDP_PORT))?)))?;
    let sink_s = Duration::from_secs_f64(d + 3.0);
    let t_sink = run.t();
    let sink = std::thread::spawn(move || udp::run_sink(&sock, sink_s, Duration::from_secs_f64(BIN_S)));
    run.wait_until(warm)?;
    let dst = (run.tb().client_addr(false), UDP_PORT).into();
    let (w, wave_s) = (*wave, Duration::from_secs_f64(d));
    let sender = spawn_in(run.tb(), Ns::Server, move || udp::send_square_wave(dst, &w, wave_s));
    let t_udp = run.t();
    run.wait_until(t_udp + d)?;
    join(sender).context("UDP sender")?;
    let bins = join(sink).context("UDP sink")?;
    let mut r = run.finish()?;

    let udp_wire: Vec<(f64, f64)> = udp::wire_rate_series(&bins, BIN_S, wave.payload)
        .into_iter()
        .map(|(t, v)| (t_sink + t + BIN_S / 2.0, v))
        .collect();
    let available = available_series(&udp_wire, r.params.rate_mbit);
    let bg = r.series("goodput", "bg").map(|s| s.points.clone()).unwrap_or_default();
    let u = usage(&bg, &available, &udp_wire, wave, t_udp, d);
    let planned = wave.send_times(d).count() as f64;
    let received: u64 = bins.iter().map(|b| b.packets).sum();
    let loss = (1.0 - received as f64 / planned).max(0.0);
    let tl = wave.period_s; // "1", "2.5": f64 prints no ".0"
    r.metrics.extend([
        Metric::new(&format!("bg_usage_norm_T{tl}"), Unit::Ratio, u.normalized),
        Metric::new(&format!("bg_usage_norm_on_T{tl}"), Unit::Ratio, u.normalized_on).period("on"),
        Metric::new(&format!("bg_usage_norm_off_T{tl}"), Unit::Ratio, u.normalized_off).period("off"),
        Metric::new(&format!("bg_goodput_T{tl}"), Unit::Mbps, u.bg_mbps).flow("bg"),
        Metric::new(&format!("available_T{tl}"), Unit::Mbps, u.available_mbps),
        Metric::new(&format!("udp_on_rate_T{tl}"), Unit::Mbps, u.udp_on_mbps).period("on").flow("udp"),
        Metric::new(&format!("udp_loss_T{tl}"), Unit::Ratio, loss).flow("udp"),
    ]);
    r.series.push(Series::new("udp_rate", Unit::Mbps, "udp", Role::BestEffort, "sink").with_points(udp_wire));
    r.series
        .push(Series::new("available", Unit::Mbps, "link", Role::Link, "computed").with_points(available));
    r.notes.push(format!(
        "UDP wave from t = {t_udp:.2} s for {d:.0} s: {received} of {planned:.0} datagrams arrived"
    ));
    Ok(r)
}

fn table(opts: &ScenarioOptions, periods: &[f64], runs: &[RunResult]) -> Table {
    let paper = Paper::note(
        "~0.9 binary search, ~0.7 stoch. approx. (control interval 0.2 s)",
        "Key et al. Sec. 5.2 (Fig. 7 text)",
    );
    // Row groups, each over every period: (label, unit, metric name before `_T<period>`, period).
    type Row = (&'static str, Unit, &'static str, Option<&'static str>);
    let groups: [&[Row]; 3] = [
        &[("BG usage / available", Unit::Ratio, "bg_usage_norm", None)],
        &[
            ("BG usage / available in on periods", Unit::Ratio, "bg_usage_norm_on", Some("on")),
            ("BG usage / available in off periods", Unit::Ratio, "bg_usage_norm_off", Some("off")),
        ],
        &[("BG goodput", Unit::Mbps, "bg_goodput", None), ("UDP loss", Unit::Ratio, "udp_loss", None)],
    ];
    let mut rows = Vec::new();
    for group in groups {
        for &p in periods {
            let tl = p;
            for &(label, unit, name, period) in group {
                let mut row =
                    RowSpec::new(format!("{label}, on/off = {tl} s"), unit, format!("{name}_T{tl}"));
                if let Some(period) = period {
                    row = row.period(period);
                }
                rows.push(row.paper((name == "bg_usage_norm" && p == 50.0).then(|| paper.clone())));
            }
        }
    }
    Table::of(opts.alternative_labels(), runs, rows)
}

#[cfg(test)]
#[path = "udp_square_tests.rs"]
mod tests;
