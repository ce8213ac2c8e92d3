//! `web`: web-like best-effort traffic beside a background download (Key et al. Sec. 5.3,
//! `../shared/papers/background-transfer-rwnd-key-2004.txt`): the mean response time of web
//! objects per object size, normalised by a plain TCP bulk transfer (no-control, as Key et al.'s
//! Fig. 8) and by a web-only run (same seed, so the same pages): 1.0 means the background flow
//! did not slow the web down. Setup, durations, sessions and metrics:
//! [docs/lab/about.md](../../../../docs/lab/about.md#web).

use std::time::Duration;

use anyhow::Result;
use slipstream_testbed::Ns;

use crate::alternatives::Alternative;
use crate::analysis;
use crate::harness::{run_all, FlowSpec, Run, RunSetup, BG_PORT};
use crate::result::{Metric, Paper, Role, RowSpec, RunResult, ScenarioReport, Series, Table, Unit};
use crate::scenarios::{LabContext, ScenarioOptions};
use crate::web::probe::quantile;
use crate::web::{self, ClientConfig, ObjectRecord};

const NAME: &str = "web";
const WEB_PORT: u16 = 8080;
/// The web server is server 2 and the browsing LAN host is host 2; the background download runs
/// between host 1 and server 1.
const WEB_HOST: u8 = 2;
/// Column label of the baseline.
pub const WEB_ONLY: &str = "web-only";

/// Size-bucket lower bounds, bytes: below 4 kB, powers of two up to 256 kB, 256 kB and above.
pub const EDGES: [u64; 8] = [0, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10];

/// "<4k", "4-8k", "256k+": the label of bucket `i`.
pub fn bucket_label(i: usize) -> String {
    match (EDGES[i] / 1024, EDGES.get(i + 1).map(|e| e / 1024)) {
        (0, Some(hi)) => format!("<{hi}k"),
        (lo, Some(hi)) => format!("{lo}-{hi}k"),
        (lo, None) => format!("{lo}k+"),
    }
}

/// The response times (ms) of the completed objects, per size bucket.
pub fn by_bucket(records: &[ObjectRecord]) -> Vec<Vec<f64>> {
    let mut v = vec![Vec::new(); EDGES.len()];
    for r in records {
        if let Some(rt) = r.response_s {
            v[EDGES.partition_point(|&e| e <= r.size) - 1].push(rt * 1000.0);
        }
    }
    v
}

/// Metrics of one run's records: the mean response time overall and per size bucket, the
/// median and 95th percentile overall, the objects fetched and failed.
pub fn web_metrics(records: &[ObjectRecord]) -> Vec<Metric> {
    let ok: Vec<f64> = records.iter().filter_map(|r| r.response_s).collect();
    let ms: Vec<f64> = ok.iter().map(|s| s * 1000.0).collect();
    let mean = |v: Vec<f64>| analysis::mean(v).unwrap_or(f64::NAN);
    let mut m = vec![
        Metric::new("web_rt_mean", Unit::Ms, mean(ms.clone())).flow("web"),
        Metric::new("web_rt_p50", Unit::Ms, quantile(&ms, 0.5)).flow("web"),
        Metric::new("web_rt_p95", Unit::Ms, quantile(&ms, 0.95)).flow("web"),
        Metric::new("web_objects", Unit::Count, ok.len() as f64).flow("web"),
        Metric::new("web_failed", Unit::Count, (records.len() - ok.len()) as f64).flow("web"),
    ];
    for (i, v) in by_bucket(records).into_iter().enumerate() {
        let label = bucket_label(i);
        let count = v.len() as f64;
        m.push(Metric::new(&format!("web_rt_mean_{label}"), Unit::Ms, mean(v)).flow("web"));
        m.push(Metric::new(&format!("web_count_{label}"), Unit::Count, count).flow("web"));
    }
    m
}

/// The browsing's goodput over `[a, b)` (s on the run's clock; the client started at `t0`),
/// Mbit/s: each completed object's bytes spread evenly over its fetch (connect to last byte), the
/// part inside the window counted. Failed objects count nothing.
pub fn web_goodput_mbit(records: &[ObjectRecord], t0: f64, a: f64, b: f64) -> f64 {
    let bytes: f64 = records
        .iter()
        .filter_map(|r| {
            let (s, rt) = (t0 + r.start_s, r.response_s?);
            let inside = ((s + rt).min(b) - s.max(a)).max(0.0);
            Some(if rt > 0.0 { r.size as f64 * inside / rt } else { 0.0 })
        })
        .sum();
    bytes * 8.0 / (b - a).max(1e-9) / 1e6
}

fn sessions_default(rate_mbit: f64) -> u32 {
    ((0.4 * rate_mbit).round() as u32).max(1)
}

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let warm = opts.scaled(10.0, 8.0);
    let d = opts.scaled(60.0, 20.0);
    let sessions: u32 = opts.extra_or("sessions", sessions_default(opts.rate_mbit))?;
    let setup = |&background: &bool, alt| RunSetup {
        // The household: LAN host 1 downloads from server 1 in the background while
        // LAN host 2 browses server 2.
        servers: 2,
        clients: 2,
        ping: false,
        ..RunSetup::new(alt, warm + d)
            .param("sessions", sessions)
            .param("warmup_s", warm)
            .param("web_s", d)
            .param("background", background)
    };
    let body = |run: Run, &background: &bool| {
        let r = one_run(run, background, warm, d, sessions)?;
        ctx.progress.log(&format!(
            "[{NAME}] {}: {} objects, mean response {:.0} ms",
            r.alternative,
            r.metric("web_objects", None).unwrap_or(0.0),
            r.metric("web_rt_mean", None).unwrap_or(f64::NAN),
        ));
        Ok(r)
    };
    let mut report = ScenarioReport::starting(NAME);
    // The web-only runs first (nothing on the router: no-control), then each alternative with
    // the background download.
    let web_only = ScenarioOptions { alternatives: vec![Alternative::NoControl], ..opts.clone() };
    run_all(ctx, &web_only, &mut report, &[false], setup, body)?;
    run_all(ctx, opts, &mut report, &[true], setup, body)?;
    normalise(&mut report.runs, WEB_ONLY, "web_rt_norm");
    normalise(&mut report.runs, &Alternative::NoControl.label(), "web_rt_vs_tcp");
    let mut columns = vec![WEB_ONLY.to_string()];
    columns.extend(opts.alternative_labels());
    report.title = "Web-like best-effort traffic beside a background download (Key et al. Sec. 5.3)".into();
    report.table = table(columns, &report.runs);
    report.notes = vec![
        format!(
            "Web model: 10 objects/page, exp. inter-object 1 ms, exp. think time 1 s, Pareto(1.2) sizes \
             (Key et al. Sec. 5.3); mean 12 kB clamped at 1 MB, 4 parallel connections, one TCP connection \
             per object, think time after page completion: our choices. {sessions} sessions, {d:.0} s of web \
             after {warm:.0} s of background warm-up."
        ),
        "Response times are normalised two ways, within a repeat (same seed: same pages): by the \
         run with a plain TCP bulk transfer (no-control), as Key et al.'s Fig. 8, and by the web-only run."
            .into(),
        "Key et al. (1.5 Mbit/s) give bulk throughputs of 0.69 (TCP), 0.53 (TCP-LP), 0.46 (binary search), \
         0.35 (stoch. approx.) Mbit/s, i.e. 46/35/31/23% of the link; Fig. 8's response times are not in the text. \
         BG share here = BG goodput / link rate (not the TCP goodput ceiling), like theirs."
            .into(),
    ];
    ctx.write_report(report)
}

/// One run: the web client for `d` s (after a warm-up of `warm` s of the background download,
/// if there is one), seeded with 1 + the repeat index.
fn one_run(mut run: Run, background: bool, warm: f64, d: f64, sessions: u32) -> Result<RunResult> {
    let seed = 1 + u64::from(run.params().repeat);
    let server = web::Server::start(run.tb(), Ns::server(WEB_HOST), WEB_PORT)?;
    if background {
        run.start_flow(FlowSpec::download("bg", Role::Background, BG_PORT, warm + d + 2.0))?;
        run.wait_until(warm)?;
    }
    let t_web = run.t();
    let server_addr = (run.tb().server_addr_of(WEB_HOST, false), WEB_PORT).into();
    let duration = Duration::from_secs_f64(d);
    let cfg = ClientConfig { server: server_addr, seed, sessions, duration, think_mean_s: 1.0 };
    let client = web::spawn_in(run.tb(), Ns::client(WEB_HOST), move || Ok(web::run_client(&cfg)));
    run.wait_until(t_web + d)?;
    let records = web::join(client)?;
    let t_end = run.t();
    drop(server);
    let mut r = run.finish()?;
    r.params.extra.insert("seed".into(), seed.into());
    let (a, b) = (t_web, t_end.min(t_web + d));
    let web_goodput = web_goodput_mbit(&records, t_web, a, b);
    r.metrics.push(Metric::new("web_goodput", Unit::Mbps, web_goodput).flow("web").period("web"));
    if background {
        let bg = r.series("goodput", "bg").map(|s| s.points.clone()).unwrap_or_default();
        if let Some(g) = analysis::mean_between(&bg, a, b) {
            r.metrics.push(Metric::new("bg_goodput", Unit::Mbps, g).flow("bg").period("web"));
            let share = g / r.params.rate_mbit;
            r.metrics.push(Metric::new("bg_share", Unit::Ratio, share).flow("bg").period("web"));
            let free = analysis::max_goodput_mbit(r.params.rate_mbit) - web_goodput;
            let free_share = g / free.max(1e-9);
            r.metrics.push(Metric::new("bg_free_share", Unit::Ratio, free_share).flow("bg").period("web"));
        }
    } else {
        r.alternative = WEB_ONLY.into();
    }
    r.metrics.extend(web_metrics(&records));
    let mut pts: Vec<(f64, f64)> =
        records.iter().filter_map(|o| o.response_s.map(|rt| (t_web + o.start_s, rt * 1000.0))).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    r.series.push(Series::new("web_response", Unit::Ms, "web", Role::BestEffort, "client").with_points(pts));
    let by_size: Vec<(f64, f64)> = (EDGES.iter().zip(by_bucket(&records)))
        .filter_map(|(&lo, v)| Some((lo as f64, analysis::mean(v)?)))
        .collect();
    r.series.push(
        Series::new("web_rt_by_size", Unit::Ms, "web", Role::BestEffort, "client")
            .over("object size bytes")
            .with_points(by_size),
    );
    Ok(r)
}

/// Each background run's mean response times (overall and per size bucket, `web_rt_mean*`) and
/// its median and 95th percentile (`web_rt_p50`, `web_rt_p95`) divided by those of the
/// `reference` run of the same repeat (same seed: the same pages), as `<prefix>*` and
/// `<prefix>_p50`, `<prefix>_p95`: `web_rt_norm` by the web-only run, `web_rt_vs_tcp` by the
/// `no-control` run (a plain TCP bulk transfer, Key et al.'s Fig. 8). Nothing is added without
/// a reference run.
pub fn normalise(runs: &mut [RunResult], reference: &str, prefix: &str) {
    let reference: Vec<(u32, Vec<Metric>)> = runs
        .iter()
        .filter(|r| r.alternative == reference)
        .map(|r| (r.params.repeat, r.metrics.clone()))
        .collect();
    for r in runs.iter_mut().filter(|r| r.alternative != WEB_ONLY) {
        let Some((_, base)) = reference.iter().find(|(rep, _)| *rep == r.params.repeat) else {
            continue;
        };
        let mut added = Vec::new();
        for m in &r.metrics {
            let name = match m.name.strip_prefix("web_rt_") {
                Some(q @ ("p50" | "p95")) => format!("{prefix}_{q}"),
                Some(rest) if rest.starts_with("mean") => m.name.replacen("web_rt_mean", prefix, 1),
                _ => continue,
            };
            let Some(b) = base.iter().find(|x| x.name == m.name) else {
                continue;
            };
            added.push(Metric::new(&name, Unit::Ratio, m.value / b.value).flow("web"));
        }
        r.metrics.extend(added);
    }
}

fn table(columns: Vec<String>, runs: &[RunResult]) -> Table {
    const SRC: &str = "Key et al. Sec. 5.3";
    let vs_tcp =
        "TCP = 1 by definition; TCP-LP and rwnd schemes \"much lower than 1 for most object sizes\" (Fig. 8)";
    let share = "0.69 / 0.53 / 0.46 / 0.35 Mbit/s of 1.5 for TCP / TCP-LP / binary search / stoch. approx. \
                 (= 0.46 / 0.35 / 0.31 / 0.23)";
    let mut rows = vec![
        RowSpec::new(
            "Web response time, all objects / with plain TCP bulk (no-control)",
            Unit::Ratio,
            "web_rt_vs_tcp",
        )
        .paper(Paper::note(vs_tcp, SRC)),
        RowSpec::new("Web response time, all objects / web-only", Unit::Ratio, "web_rt_norm"),
        RowSpec::new("Web response time, median / web-only", Unit::Ratio, "web_rt_norm_p50"),
        RowSpec::new("Web response time, p95 / web-only", Unit::Ratio, "web_rt_norm_p95"),
        RowSpec::new("Web response time, mean", Unit::Ms, "web_rt_mean"),
        RowSpec::new("Web response time, median", Unit::Ms, "web_rt_p50"),
        RowSpec::new("Web response time, p95", Unit::Ms, "web_rt_p95"),
    ];
    let buckets: Vec<String> = (0..EDGES.len()).map(bucket_label).collect();
    for (what, unit, name) in [
        (" / with plain TCP bulk", Unit::Ratio, "web_rt_vs_tcp"),
        (" / web-only", Unit::Ratio, "web_rt_norm"),
        (", mean", Unit::Ms, "web_rt_mean"),
    ] {
        rows.extend(
            buckets
                .iter()
                .map(|l| RowSpec::new(format!("Web response time {l}B{what}"), unit, format!("{name}_{l}"))),
        );
    }
    rows.extend([
        RowSpec::new("BG goodput while web runs", Unit::Mbps, "bg_goodput").period("web"),
        RowSpec::new("BG share of the link while web runs", Unit::Ratio, "bg_share")
            .period("web")
            .paper(Paper::note(share, SRC)),
        RowSpec::new("Web goodput while web runs", Unit::Mbps, "web_goodput").period("web"),
        RowSpec::new("BG share of the capacity web leaves free", Unit::Ratio, "bg_free_share").period("web"),
        RowSpec::new("Web objects fetched", Unit::Count, "web_objects"),
        RowSpec::new("Web objects failed", Unit::Count, "web_failed"),
    ]);
    let mut table = Table::of(columns, runs, rows);
    // A delay-based controller under a 1.2 ms browsing target reads the testbed's own late
    // delay verdicts as queue: read this row before comparing two runs (docs/household.md).
    table.add_machine_rows(&runs.iter().collect::<Vec<_>>(), None);
    table
}

#[cfg(test)]
#[path = "web_tests.rs"]
mod tests;
