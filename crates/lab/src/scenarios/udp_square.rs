//! `udp-square`: a background download beside an unresponsive UDP square wave (Key et al.
//! Sec. 5.2, `../shared/papers/background-transfer-rwnd-key-2004.txt`): a good background
//! scheme uses what the UDP flow leaves, and the faster it tracks capacity changes, the more.
//! Per alternative and on/off period T, the background download's goodput is divided by the
//! capacity the measured UDP arrivals leave (their Fig. 6). Setup, periods and the definition
//! of available capacity: [docs/lab/about.md](../../../../docs/lab/about.md#udp-square).

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

/// Available capacity series: `ceiling × (1 − udp(t) / rate)`, at least 0.
pub fn available_series(udp_wire: &[(f64, f64)], rate_mbit: f64) -> Vec<(f64, f64)> {
    let ceiling = analysis::max_goodput_mbit(rate_mbit);
    udp_wire.iter().map(|&(t, u)| (t, (ceiling * (1.0 - u / rate_mbit)).max(0.0))).collect()
}

/// Mean of a rate series (points at their interval's midpoint) over the wave
/// `[t_udp, t_udp + d)`, in its on periods (`Some(true)`), off periods or all of it; NaN if empty.
pub fn wave_mean(pts: &[(f64, f64)], wave: &SquareWave, t_udp: f64, d: f64, on: Option<bool>) -> f64 {
    let since = |t: f64| t - t_udp;
    let inside = |t: f64| (0.0..d).contains(&since(t)) && on.is_none_or(|on| wave.is_on(since(t)) == on);
    analysis::mean(pts.iter().filter(|p| inside(p.0)).map(|p| p.1)).unwrap_or(f64::NAN)
}

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let periods = periods(opts)?;
    let udp_mbit = 0.67 * opts.rate_mbit;
    let warm = opts.scaled(10.0, 8.0);
    let mut waves = Vec::new();
    for &period in &periods {
        waves.push((SquareWave { rate_bps: udp_mbit * 1e6, period_s: period }, wave_seconds(opts, period)));
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

    // Datagrams per bin as the wire rate of whole frames, each point at its bin's midpoint.
    let udp_wire: Vec<(f64, f64)> = (bins.iter().enumerate())
        .map(|(i, &n)| (t_sink + (i as f64 + 0.5) * BIN_S, (n * udp::FRAME_BYTES * 8) as f64 / BIN_S / 1e6))
        .collect();
    let available = available_series(&udp_wire, r.params.rate_mbit);
    let bg = r.series("goodput", "bg").map(|s| s.points.clone()).unwrap_or_default();
    let mean = |pts: &[(f64, f64)], on| wave_mean(pts, wave, t_udp, d, on);
    let usage = |on| mean(&bg, on) / mean(&available, on);
    let planned = wave.send_times(d).count() as f64;
    let received: u64 = bins.iter().sum();
    let loss = (1.0 - received as f64 / planned).max(0.0);
    let tl = wave.period_s; // "1", "2.5": f64 prints no ".0"
    r.metrics.extend([
        Metric::new(&format!("bg_usage_norm_T{tl}"), Unit::Ratio, usage(None)),
        Metric::new(&format!("bg_usage_norm_on_T{tl}"), Unit::Ratio, usage(Some(true))).period("on"),
        Metric::new(&format!("bg_usage_norm_off_T{tl}"), Unit::Ratio, usage(Some(false))).period("off"),
        Metric::new(&format!("bg_goodput_T{tl}"), Unit::Mbps, mean(&bg, None)).flow("bg"),
        Metric::new(&format!("available_T{tl}"), Unit::Mbps, mean(&available, None)),
        Metric::new(&format!("udp_on_rate_T{tl}"), Unit::Mbps, mean(&udp_wire, Some(true)))
            .period("on")
            .flow("udp"),
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
        for &tl in periods {
            for &(label, unit, name, period) in group {
                let mut row =
                    RowSpec::new(format!("{label}, on/off = {tl} s"), unit, format!("{name}_T{tl}"));
                if let Some(period) = period {
                    row = row.period(period);
                }
                rows.push(row.paper((name == "bg_usage_norm" && tl == 50.0).then(|| paper.clone())));
            }
        }
    }
    let mut table = Table::of(opts.alternative_labels(), runs, rows);
    table.add_machine_rows(&runs.iter().collect::<Vec<_>>(), None);
    table
}

#[cfg(test)]
#[path = "udp_square_tests.rs"]
mod tests;
