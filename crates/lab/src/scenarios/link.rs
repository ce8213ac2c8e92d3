//! `link`: a link that changes. The download bottleneck's rate halves for 10 s and comes back
//! (beside best effort: does best effort keep its fair capacity, what it gets alone at that
//! rate? the background alone: how far does the queue overshoot after the fall, how soon does
//! the background fill the link after the rise?), the rate doubles (how soon is the new rate
//! filled?), and the base RTT steps +30 ms and back (a route change: does the background yield
//! to a queue that is not there?). Rates change in place (`tc qdisc change`, the queue limit kept
//! in bytes), delays through the delay element's control file
//! ([`slipstream_testbed::Testbed::set_one_way_delays`]). Timeline and metrics:
//! [docs/lab/about.md](../../../../docs/lab/about.md#link).

use anyhow::Result;
use serde_json::json;

use super::{LabContext, ScenarioOptions};
use crate::alternatives::Alternative;
use crate::analysis::{self, max_goodput_mbit};
use crate::harness::{run_all, FlowSpec, Run, RunSetup, BE_PORT, BG_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Table, Target, Unit};
use crate::web::probe::quantile;

const NAME: &str = "link";
/// Column label of the reference: best effort alone through the same rate change (no-control).
pub const BE_ALONE: &str = "be-alone";
const TARGETS: &str = "link issue target";
/// The household controller's queueing-delay target (`[household.budget] target`'s default).
pub const DELAY_TARGET_MS: f64 = 10.0;
/// The route change: base RTT added, ms (half in each direction).
pub const RTT_STEP_MS: f64 = 30.0;
/// "Fills the link": this share of its TCP goodput ceiling.
pub const FILL: f64 = 0.9;
/// Best effort's seconds after the first of the halved period keep at least this share of what
/// it gets alone.
pub const BE_KEPT: f64 = 0.95;
/// Measured before a change: at most this many seconds before it.
const BEFORE_S: f64 = 5.0;

/// Phase names (the run's `phases`, the plots' markers).
const HALVED: &str = "halved";
const RESTORED: &str = "restored";
const DOUBLED: &str = "doubled";
const STEPPED: &str = "RTT +30 ms";
const BACK: &str = "RTT back";

/// Phase lengths, s.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    /// Before the first change.
    pub warm: f64,
    /// The halved rate: the 10 s whatever `--scale` (as long as household control's
    /// memory of the link rate, the largest delivery rate of the last 10 s).
    pub halved: f64,
    /// After the rate came back, beside best effort.
    pub after: f64,
    /// The background alone: the rate back, then doubled.
    pub restored: f64,
    pub doubled: f64,
    /// The base RTT +30 ms, then back.
    pub stepped: f64,
    pub back: f64,
}

impl Times {
    /// The phases of `opts` (`--scale`).
    pub fn of(opts: &ScenarioOptions) -> Times {
        Times {
            warm: opts.scaled(10.0, 8.0),
            halved: 10.0,
            after: opts.scaled(8.0, 5.0),
            restored: opts.scaled(12.0, 8.0),
            doubled: opts.scaled(12.0, 8.0),
            stepped: opts.scaled(30.0, 10.0),
            back: opts.scaled(8.0, 5.0),
        }
    }
}

/// One run's workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// A background and a best-effort download; the rate halves and comes back. Without the
    /// background: the reference, best effort alone.
    Halve { background: bool },
    /// The background alone: the rate halves, comes back, then doubles.
    Rates,
    /// The background alone: the base RTT steps +30 ms, then back.
    Rtt,
}

/// A change of the link: the rate as a factor of `--rate`, or ms added to `--rtt`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    Rate(f64),
    Rtt(f64),
}

impl Case {
    /// The sub-case (`params.extra["case"]`): the reference shares its case's.
    pub fn name(self) -> &'static str {
        match self {
            Case::Halve { .. } => "halve",
            Case::Rates => "rates",
            Case::Rtt => "rtt",
        }
    }

    /// The changes `(at, phase name, change)`, in order.
    pub fn changes(self, t: &Times) -> Vec<(f64, &'static str, Change)> {
        let fall = (t.warm, HALVED, Change::Rate(0.5));
        let rise = (t.warm + t.halved, RESTORED, Change::Rate(1.0));
        match self {
            Case::Halve { .. } => vec![fall, rise],
            Case::Rates => vec![fall, rise, (rise.0 + t.restored, DOUBLED, Change::Rate(2.0))],
            Case::Rtt => vec![
                (t.warm, STEPPED, Change::Rtt(RTT_STEP_MS)),
                (t.warm + t.stepped, BACK, Change::Rtt(0.0)),
            ],
        }
    }

    /// The names of its phases after the warm-up, in order.
    pub fn phase_names(self) -> &'static [&'static str] {
        match self {
            Case::Halve { .. } => &[HALVED, RESTORED],
            Case::Rates => &[HALVED, RESTORED, DOUBLED],
            Case::Rtt => &[STEPPED, BACK],
        }
    }

    /// Run length, s.
    pub fn duration(self, t: &Times) -> f64 {
        t.warm
            + match self {
                Case::Halve { .. } => t.halved + t.after,
                Case::Rates => t.halved + t.restored + t.doubled,
                Case::Rtt => t.stepped + t.back,
            }
    }
}

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let t = Times::of(opts);
    let setup = |c: &Case, alt| RunSetup {
        server_ports: vec![BG_PORT, BE_PORT],
        ..RunSetup::new(alt, c.duration(&t)).param("case", c.name())
    };
    let body = |run: Run, c: &Case| {
        let r = one_run(run, *c, &t)?;
        ctx.progress.log(&format!("[{NAME}] {} {}: {}", r.alternative, c.name(), progress(&r)));
        Ok(r)
    };
    let mut report = ScenarioReport::starting(NAME);
    let alone = ScenarioOptions { alternatives: vec![Alternative::NoControl], ..opts.clone() };
    run_all(ctx, &alone, &mut report, &[Case::Halve { background: false }], setup, body)?;
    let cases = [Case::Halve { background: true }, Case::Rates, Case::Rtt];
    run_all(ctx, opts, &mut report, &cases, setup, body)?;
    against_alone(&mut report.runs);
    let mut columns = vec![BE_ALONE.to_string()];
    columns.extend(opts.alternative_labels());
    report.title = format!(
        "link: a link that changes (rate halved for 10 s, doubled; base RTT +{RTT_STEP_MS} ms), \
         {} Mbit/s, {} ms RTT, {} byte queue",
        opts.rate_mbit,
        opts.rtt_ms,
        opts.effective_queue_bytes()
    );
    report.table = table(columns, &report);
    report.notes = notes(&t);
    ctx.write_report(report)
}

/// One run: the downloads of `case` for its whole length, its changes at their times.
fn one_run(mut run: Run, case: Case, t: &Times) -> Result<RunResult> {
    let total = case.duration(t);
    if case != (Case::Halve { background: false }) {
        run.start_flow(FlowSpec::download("bg", Role::Background, BG_PORT, total))?;
    }
    if let Case::Halve { .. } = case {
        run.start_flow(FlowSpec::download("be", Role::BestEffort, BE_PORT, total))?;
    }
    let (rate, one_way) = (run.params().rate_mbit, run.params().rtt_ms / 2.0);
    let mut phases = vec![json!({"name": "warm-up", "start_s": 0.0})];
    for (at, name, change) in case.changes(t) {
        run.wait_until(at)?;
        match change {
            Change::Rate(f) => run.tb().set_download_rate(rate * f)?,
            Change::Rtt(ms) => run.tb().set_one_way_delays(one_way + ms / 2.0, one_way + ms / 2.0)?,
        }
        phases.push(json!({"name": name, "start_s": run.t()}));
    }
    run.wait_until(total)?;
    let mut r = run.finish()?;
    if case == (Case::Halve { background: false }) {
        r.alternative = BE_ALONE.into();
    }
    r.params.extra.insert("phases".into(), phases.into());
    Ok(with_metrics(r, case))
}

/// When phase `name` of run `r` began (`params.extra["phases"]`), s.
pub fn phase_start(r: &RunResult, name: &str) -> Option<f64> {
    let phases = r.params.extra.get("phases")?.as_array()?;
    let phase = phases.iter().find(|p| p.get("name").and_then(|n| n.as_str()) == Some(name))?;
    phase.get("start_s")?.as_f64()
}

/// Means of `points` over the `n` whole seconds from `from`: `[from + k, from + k + 1)`
/// (`None` for a second without samples).
pub fn per_second(points: &[(f64, f64)], from: f64, n: usize) -> Vec<Option<f64>> {
    (0..n).map(|k| analysis::mean_between(points, from + k as f64, from + k as f64 + 1.0)).collect()
}

/// The longest run of consecutive seconds under `threshold`; a second without samples counts
/// as under (nothing arrived).
pub fn longest_run_below(seconds: &[Option<f64>], threshold: f64) -> usize {
    let (mut longest, mut run) = (0, 0);
    for s in seconds {
        run = if s.is_none_or(|v| v < threshold) { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// Seconds from `from` to the first sample time `t` whose window `[t, t + window)`, inside
/// `[from, until)` and holding at least `min_samples` samples, satisfies `ok`; `None` if none.
pub fn first_window(
    points: &[(f64, f64)],
    (from, until): (f64, f64),
    window: f64,
    min_samples: usize,
    ok: impl Fn(&[f64]) -> bool,
) -> Option<f64> {
    let starts = points.iter().map(|p| p.0).filter(|t| *t >= from && *t + window <= until + 1e-9);
    starts
        .filter(|&t| {
            let v: Vec<f64> = points.iter().filter(|p| p.0 >= t && p.0 < t + window).map(|p| p.1).collect();
            v.len() >= min_samples && ok(&v)
        })
        .map(|t| t - from)
        .next()
}

/// A time that may not have come within a period of `limit` s: the time, or `limit` and a
/// note saying so.
fn within(time: Option<f64>, limit: f64, what: &str, notes: &mut Vec<String>) -> f64 {
    time.unwrap_or_else(|| {
        notes.push(format!("{what}: not within the {limit:.0} s period (recorded as {limit:.0} s)"));
        limit
    })
}

/// Adds the metrics of `case` (docs/lab/about.md, `link`).
pub fn with_metrics(mut r: RunResult, case: Case) -> RunResult {
    let rate = r.params.rate_mbit;
    let link = |factor: f64| max_goodput_mbit(rate * factor);
    let points = |flow: &str| r.series("goodput", flow).map(|s| s.points.clone()).unwrap_or_default();
    let (be, bg) = (points("be"), points("bg"));
    let base = r.params.measured_rtt_ms.unwrap_or(r.params.rtt_ms);
    let ping = r.series("rtt", "ping").map(|s| s.points.clone()).unwrap_or_default();
    let delay: Vec<(f64, f64)> = ping.iter().map(|&(t, v)| (t, v - base)).collect();
    let values = |pts: &[(f64, f64)], a: f64, b: f64| -> Vec<f64> {
        pts.iter().filter(|p| p.0 >= a && p.0 < b).map(|p| p.1).collect()
    };
    let median = |pts: &[(f64, f64)], a, b| Some(quantile(&values(pts, a, b), 0.5)).filter(|v| v.is_finite());
    let end = r.params.duration_s;
    let mut m = Vec::new();
    let mut notes = Vec::new();
    let names = case.phase_names();
    let starts: Vec<f64> = names.iter().filter_map(|n| phase_start(&r, n)).collect();
    if starts.len() != names.len() {
        r.notes.push(format!("the run lacks one of the phases {names:?}: no metrics"));
        return r;
    }
    let before = |at: f64| (at - BEFORE_S.min(at / 2.0), at);
    let ratio = |name: &str, v: Option<f64>, of: f64, period: &str| {
        v.map(|v| Metric::new(name, Unit::Ratio, v / of).period(period))
    };
    match case {
        Case::Halve { .. } => {
            let (fall, rise) = (starts[0], starts[1]);
            let n = (rise - fall).round() as usize;
            let (a, b) = before(fall);
            for (period, a, b) in [("before", a, b), (HALVED, fall + 1.0, rise), ("after", rise + 2.0, end)] {
                for (flow, pts) in [("be", &be), ("bg", &bg)] {
                    if let Some(v) = analysis::mean_between(pts, a, b) {
                        m.push(
                            Metric::new(&format!("{flow}_goodput"), Unit::Mbps, v).period(period).flow(flow),
                        );
                    }
                }
            }
            for (k, v) in per_second(&be, fall, n).into_iter().enumerate() {
                let v = v.unwrap_or(0.0);
                m.push(Metric::new("be_goodput", Unit::Mbps, v).period(&format!("s{}", k + 1)).flow("be"));
            }
        }
        Case::Rates => {
            let (fall, rise, double) = (starts[0], starts[1], starts[2]);
            let (a, b) = before(fall);
            m.extend(median(&delay, a, b).map(|v| Metric::new("delay_median", Unit::Ms, v).period("before")));
            m.extend(
                median(&delay, fall + 1.0, rise)
                    .map(|v| Metric::new("delay_median", Unit::Ms, v).period(HALVED)),
            );
            if let Some((_, peak)) = analysis::min_max(values(&delay, fall, rise)) {
                m.push(Metric::new("delay_peak", Unit::Ms, peak).period(HALVED));
            }
            // A ping under the target, and the 0.5 s from it under it by their median: one ping
            // between two spikes is not "back under".
            let under = |v: &[f64]| v[0] <= DELAY_TARGET_MS && quantile(v, 0.5) <= DELAY_TARGET_MS;
            let what = "queueing delay under the target after the fall";
            let settle =
                within(first_window(&delay, (fall, rise), 0.5, 3, under), rise - fall, what, &mut notes);
            m.push(Metric::new("delay_settle", Unit::S, settle).period(HALVED));
            m.extend(ratio("bg_util", analysis::mean_between(&bg, fall + 1.0, rise), link(0.5), HALVED));
            for (period, from, until, factor) in [(RESTORED, rise, double, 1.0), (DOUBLED, double, end, 2.0)]
            {
                // As alone's time_to_90pct: the 1 s moving average, within the period.
                let inside: Vec<(f64, f64)> = bg.iter().copied().filter(|p| p.0 < until).collect();
                let reached = analysis::time_to_reach(&inside, from, FILL * link(factor), 1.0);
                let what = format!("background filling the {period} link");
                let fill = within(reached, until - from, &what, &mut notes);
                m.push(Metric::new("fill_time", Unit::S, fill).period(period));
            }
            let half = double + (end - double) / 2.0;
            m.extend(ratio("bg_util", analysis::mean_between(&bg, half, end), link(2.0), DOUBLED));
        }
        Case::Rtt => {
            let (step, back) = (starts[0], starts[1]);
            let (a, b) = before(step);
            m.extend(ratio("bg_util", analysis::mean_between(&bg, a, b), link(1.0), "before"));
            for (period, from, until) in [(STEPPED, step, back), (BACK, back, end)] {
                let seconds = per_second(&bg, from, (until - from).floor() as usize);
                let run = longest_run_below(&seconds, FILL * link(1.0)) as f64;
                m.push(Metric::new("false_yield", Unit::S, run).period(period));
                m.extend(ratio("bg_util", analysis::mean_between(&bg, from, until), link(1.0), period));
                m.extend(
                    median(&ping, from + 1.0, until)
                        .map(|v| Metric::new("ping_rtt", Unit::Ms, v).period(period)),
                );
            }
        }
    }
    r.metrics.extend(m);
    r.notes.extend(notes);
    r
}

/// Best effort beside background against the reference of the same repeat (best effort alone
/// through the same change): `be_fair` per second of the halved period and before the fall, the
/// reference's mean over seconds 2-10 of its halved period being what it gets alone at that
/// rate; `be_fair_min` over the seconds after the first. The reference gets its own.
pub fn against_alone(runs: &mut [RunResult]) {
    let halve = |r: &RunResult| r.params.extra.get("case").and_then(|c| c.as_str()) == Some("halve");
    let reference: Vec<RunResult> =
        runs.iter().filter(|r| r.alternative == BE_ALONE && halve(r)).cloned().collect();
    for r in runs.iter_mut().filter(|r| halve(r)) {
        let Some(base) = reference.iter().find(|b| b.params.repeat == r.params.repeat) else {
            continue;
        };
        let Some(fair) = base.metric("be_goodput", Some(HALVED)).filter(|v| *v > 0.0) else {
            continue;
        };
        let mut m = Vec::new();
        if let (Some(v), Some(b)) =
            (r.metric("be_goodput", Some("before")), base.metric("be_goodput", Some("before")))
        {
            m.push(Metric::new("be_fair", Unit::Ratio, v / b).period("before"));
        }
        let seconds: Vec<f64> =
            (1..).map_while(|k| r.metric("be_goodput", Some(&format!("s{k}")))).map(|v| v / fair).collect();
        for (k, v) in seconds.iter().enumerate() {
            m.push(Metric::new("be_fair", Unit::Ratio, *v).period(&format!("s{}", k + 1)));
        }
        if let Some((min, _)) = analysis::min_max(seconds.iter().skip(1).copied()) {
            m.push(Metric::new("be_fair_min", Unit::Ratio, min).period(HALVED));
        }
        r.metrics.extend(m);
    }
}

/// The progress line of a finished run.
fn progress(r: &RunResult) -> String {
    let m = |name: &str, period: &str| r.metric(name, Some(period)).unwrap_or(f64::NAN);
    match r.params.extra.get("case").and_then(|c| c.as_str()) {
        Some("halve") => {
            format!(
                "BE {:.2} Mbit/s before, {:.2} while halved",
                m("be_goodput", "before"),
                m("be_goodput", HALVED)
            )
        }
        Some("rates") => format!(
            "delay peak {:.0} ms, under {DELAY_TARGET_MS} ms after {:.1} s; fill after the rise {:.1} s, \
             after doubling {:.1} s",
            m("delay_peak", HALVED),
            m("delay_settle", HALVED),
            m("fill_time", RESTORED),
            m("fill_time", DOUBLED)
        ),
        _ => format!(
            "longest run under {FILL} of the link after the RTT step {:.0} s",
            m("false_yield", STEPPED)
        ),
    }
}

fn table(columns: Vec<String>, report: &ScenarioReport) -> Table {
    let target = |t| Some(Paper::target(t, TARGETS));
    let mut table = Table::new(columns);
    let halve = "rate halved 10 s, BE beside BG";
    let mut rows = vec![
        RowSpec::new(format!("{halve}: BE goodput before the fall"), Unit::Mbps, "be_goodput")
            .period("before"),
        RowSpec::new(format!("{halve}: BE / alone, before the fall"), Unit::Ratio, "be_fair")
            .period("before"),
    ];
    for k in 1..=10 {
        let label = format!("{halve}: BE / alone at the halved rate, second {k}");
        rows.push(RowSpec::new(label, Unit::Ratio, "be_fair").period(&format!("s{k}")));
    }
    rows.extend([
        RowSpec::new(format!("{halve}: BE / alone, min over seconds 2-10"), Unit::Ratio, "be_fair_min")
            .period(HALVED)
            .paper(target(Target::at_least(BE_KEPT))),
        RowSpec::new(format!("{halve}: BE goodput, seconds 2-10"), Unit::Mbps, "be_goodput").period(HALVED),
        RowSpec::new(format!("{halve}: BG goodput, seconds 2-10"), Unit::Mbps, "bg_goodput").period(HALVED),
        RowSpec::new(format!("{halve}: BE goodput after the rise"), Unit::Mbps, "be_goodput").period("after"),
    ]);
    table.add_rows(&report.runs_with("case", "halve"), rows);
    let (fall, rtt) = ("BG alone, rate halved", format!("BG alone, base RTT +{RTT_STEP_MS} ms"));
    let rows = [
        RowSpec::new(format!("{fall}: queueing delay before the fall, median"), Unit::Ms, "delay_median")
            .period("before"),
        RowSpec::new(format!("{fall}: queueing delay peak"), Unit::Ms, "delay_peak").period(HALVED),
        RowSpec::new(
            format!("{fall}: time until the queueing delay is under {DELAY_TARGET_MS} ms"),
            Unit::S,
            "delay_settle",
        )
        .period(HALVED)
        .paper(target(Target::at_most(2.0))),
        RowSpec::new(format!("{fall}: queueing delay, seconds 2-10, median"), Unit::Ms, "delay_median")
            .period(HALVED),
        RowSpec::new(format!("{fall}: BG use of the halved link, seconds 2-10"), Unit::Ratio, "bg_util")
            .period(HALVED),
        RowSpec::new("BG alone, rate restored: time to 90% of the link", Unit::S, "fill_time")
            .period(RESTORED)
            .paper(target(Target::at_most(5.0))),
        RowSpec::new("BG alone, rate doubled: time to 90% of the new rate", Unit::S, "fill_time")
            .period(DOUBLED)
            .paper(target(Target::at_most(5.0))),
        RowSpec::new("BG alone, rate doubled: BG use of the link, second half", Unit::Ratio, "bg_util")
            .period(DOUBLED),
    ];
    table.add_rows(&report.runs_with("case", "rates"), rows);
    let rows = [
        RowSpec::new(format!("{rtt}: BG use of the link before the step"), Unit::Ratio, "bg_util")
            .period("before"),
        RowSpec::new(format!("{rtt}: ping RTT, median"), Unit::Ms, "ping_rtt").period(STEPPED),
        RowSpec::new(
            format!("{rtt}: longest run under 90% of the link (false yield)"),
            Unit::S,
            "false_yield",
        )
        .period(STEPPED)
        .paper(target(Target::at_most(2.0))),
        RowSpec::new(format!("{rtt}: BG use of the link"), Unit::Ratio, "bg_util").period(STEPPED),
        RowSpec::new(format!("{rtt}, back: longest run under 90% of the link"), Unit::S, "false_yield")
            .period(BACK),
    ];
    table.add_rows(&report.runs_with("case", "rtt"), rows);
    let all: Vec<&RunResult> = report.runs.iter().collect();
    table.add_machine_rows(&all, None);
    if report.runs.iter().any(|r| r.metric("flows_failed", None).is_some()) {
        table.add_rows(&all, [RowSpec::new("iperf3 flows that failed", Unit::Count, "flows_failed")]);
    }
    table
}

fn notes(t: &Times) -> Vec<String> {
    vec![
        format!(
            "Runs, each on a fresh testbed: halve (a background and a best-effort download; the rate halved \
             at {w:.0} s for {h:.0} s, then back for {a:.0} s; reference {BE_ALONE}: best effort alone, \
             no-control), rates (the background alone; halved at {w:.0} s for {h:.0} s, back for {r:.0} s, \
             then doubled for {d:.0} s), rtt (the background alone; base RTT +{RTT_STEP_MS} ms at {w:.0} s \
             for {s:.0} s, then back for {b:.0} s).",
            w = t.warm,
            h = t.halved,
            a = t.after,
            r = t.restored,
            d = t.doubled,
            s = t.stepped,
            b = t.back
        ),
        "Rate: `tc qdisc change` of the download tbf (queued packets stay; the limit stays the same in bytes, \
         so a halved rate doubles the queue's worst delay, as in a modem's buffer). Base RTT: the delay \
         element's one-way delays + half the step each way, for packets arriving after it."
            .into(),
        format!(
            "BE / alone: best effort's goodput per second of the halved period over what it gets alone at \
             that rate (the reference's mean over seconds 2-10). Queueing delay: ping RTT minus the idle \
             RTT; back under the target: the first ping after the fall at most {DELAY_TARGET_MS} ms whose \
             0.5 s from it have a median at most that. Time to 90%: until the 1 s moving average of the \
             goodput reaches 90% of the link's TCP goodput ceiling. False yield: the longest run of whole \
             seconds with the background under 90% of it."
        ),
    ]
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;
