//! Report tests on synthetic reports ([`fixtures`]): plots, tables, summaries and the page.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;

use super::plot::tests::{assert_svg, svg_texts};
use super::*;
use crate::report::summary;
use crate::result::{Cell, Metric, Paper, RowSpec, RunResult, Table, Unit};

mod fixtures;
mod merge;
use fixtures::*;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("slipstream-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn plot<'a>(plots: &'a [Plot], file: &str) -> &'a Plot {
    plots
        .iter()
        .find(|p| p.file == file)
        .unwrap_or_else(|| panic!("no {file} in {:?}", plots.iter().map(|p| &p.file).collect::<Vec<_>>()))
}

fn assert_texts(svg: &str, needles: &[&str]) {
    let texts = svg_texts(svg);
    for n in needles {
        assert!(texts.iter().any(|t| t.contains(n)), "no text containing {n:?} in {texts:?}");
    }
}

#[test]
fn every_kind_renders_well_formed_plots() {
    for rep in all_kinds() {
        let plots = scenario_plots(&rep).unwrap();
        // datapath has only its table (no series); every other kind has figures.
        let has_series = rep.runs.iter().any(|r| !r.series.is_empty());
        assert_eq!(!plots.is_empty(), has_series, "{}: plots without series or none with", rep.scenario);
        for p in &plots {
            assert!(p.file.ends_with(".svg") && !p.file.contains('/'), "{}", p.file);
            assert_svg(&p.svg);
            assert_texts(&p.svg, &[&rep.scenario]);
        }
        let mut files: Vec<&str> = plots.iter().map(|p| p.file.as_str()).collect();
        files.sort();
        files.dedup();
        assert_eq!(files.len(), plots.len(), "{}: duplicate file names", rep.scenario);
    }
}

#[test]
fn goodput_is_head_to_head_per_alternative() {
    let plots = scenario_plots(&cbr()).unwrap();
    let g = plot(&plots, "goodput.svg");
    assert_texts(
        &g.svg,
        &[
            "goodput (Mbit/s)",
            "time (s)",
            "best effort (be)",
            "background (bg)",
            "link 10 Mbit/s",
            "bg start",
        ],
    );
    assert_texts(&g.svg, &ALTS);
    // Background drawn upside down, ticks printed as magnitudes.
    assert!(svg_texts(&g.svg).iter().all(|t| !t.starts_with('-')));
    // The reverse flow is not drawn.
    assert!(!svg_texts(&g.svg).iter().any(|t| t.contains("rev")));
    assert_texts(&plot(&plots, "rtt.svg").svg, &["RTT (ms)", "ping (probe)"]);
    // No PIV series in no-control's run: no panel for it.
    let piv = plot(&plots, "piv.svg");
    assert_texts(&piv.svg, &["PIV sum (ms)"]);
    assert!(piv.figure.panels.iter().all(|p| p.title != "no-control"));
}

#[test]
fn windows_and_missing_series() {
    let plots = scenario_plots(&cwnd()).unwrap();
    let w = plot(&plots, "windows.svg");
    assert_texts(&w.svg, &["window (kB)", "rwnd (advertised)", "cwnd estimate", "cwnd (sender)"]);
    assert!(w.figure.panels.iter().all(|p| p.title != "htb-90"), "htb-90 has no window series");
    // No PIV series anywhere: no PIV plot.
    assert!(plots.iter().all(|p| p.file != "piv.svg"));
    let u = scenario_plots(&udp_square()).unwrap();
    let g = plot(&u, "goodput.svg");
    assert_texts(&g.svg, &["available to background", "best effort (udp)"]);
    assert!(g.figure.panels.iter().all(|p| p.title != "htb-90"), "htb-90 has no goodput series");
}

#[test]
fn subcases_get_one_goodput_plot_each() {
    let plots = scenario_plots(&onoff()).unwrap();
    let rep = onoff();
    for t in [1, 3, 5, 10, 30] {
        let p = plot(&plots, &format!("goodput-on-off-t-s-{t}.svg"));
        assert_texts(&p.svg, &[&format!("on_off_T_s={t}")]);
        // Each figure draws its own sub-case's runs: the best-effort flow on and off every T s.
        for alt in ALTS {
            let run =
                rep.runs.iter().find(|r| r.alternative == alt && r.params.extra["on_off_T_s"] == json!(t));
            let panel = p.figure.panels.iter().find(|p| p.title == alt).unwrap();
            let be = &panel.lines.iter().find(|l| l.label == "best effort (be)").unwrap().points;
            assert_eq!(be, &run.unwrap().series("goodput", "be").unwrap().points, "T = {t}, {alt}");
            let on = |x: f64| ((x / t as f64) as u64).is_multiple_of(2);
            assert!(be.iter().all(|&(x, y)| on(x) == (y > 0.0)), "T = {t}, {alt}: on every other {t} s");
        }
    }
    let f = scenario_plots(&fairness()).unwrap();
    assert_texts(&plot(&f, "goodput-flows-4.svg").svg, &["background (bg3)"]);
    assert_texts(&plot(&f, "goodput-flows-16.svg").svg, &["background, 16 flows together"]);
}

#[test]
fn web_draws_its_runs_over_time_only() {
    // Response times are the table's (overall and by object size): no CDF or x-y figure.
    let plots = scenario_plots(&web()).unwrap();
    assert!(!plots.is_empty());
    for p in &plots {
        assert!(["goodput", "windows", "piv", "rtt"].iter().any(|k| p.file.starts_with(k)), "{}", p.file);
        assert_texts(&p.svg, &["time (s)"]);
    }
}

#[test]
fn empty_report_does_not_panic() {
    let rep = ScenarioReport { scenario: "empty".into(), ..Default::default() };
    assert!(scenario_plots(&rep).unwrap().is_empty());
    let md = scenario_markdown(&Summary::of(&rep, &[], ""));
    assert!(md.contains("No summary rows"), "{md}");
    assert!(md.contains("How measured: –"), "{md}");
}

#[test]
fn markdown_table_with_repeats_and_paper() {
    let rep = Summary::of(&cbr(), &scenario_plots(&cbr()).unwrap(), "");
    let md = scenario_markdown(&rep);
    assert!(md.starts_with("# CBR best effort"), "{md}");
    assert!(
        md.contains("| metric | unit | no-control | slipstream | slipstream-paper | htb-90 | paper |"),
        "{md}"
    );
    // Mean and min–max over the two repeats, Mbit/s with 2 decimals.
    assert!(md.contains("| BE goodput, before | Mbit/s | 5.99 (5.97–6.01) |"), "{md}");
    assert!(md.contains("| 5.98 (Vulture Sec. 0.4) |"), "{md}");
    // ms without decimals above 100.
    assert!(md.contains("| BE RTT, background active | ms | 164 (164–164) |"), "{md}");
    assert!(md.contains("How measured: 2023-11-14 22:13 UTC; bottleneck 10 Mbit/s, RTT 100 ms (measured 100.4–100.6 ms), queue 125000 bytes (83 packets); 180 s per run, 2 repeat(s) per alternative; kernel –; sender cc cubic."), "{md}");
    assert!(md.contains("![cbr: goodput (best effort up, background upside down)](goodput.svg)"), "{md}");
    assert!(md.contains("Cells: mean over repeats (min–max)."));
    // Slipstream's BG goodput (3.23 + 0.02) is above the paper's 2.84: better, not listed;
    // slipstream-paper's BE goodput (5.78) is worse than 5.98 by 3%: within tolerance.
    // Cells: scenario, metric, alternative, measured, paper, verdict.
    let diffs = markdown::differences(&rep);
    assert!(diffs.iter().all(|d| d[1] != "BG goodput, background active"), "{diffs:?}");
    // Utilization 0.81 vs 0.83 for slipstream: within 0.02; 0.725 for slipstream-paper: worse.
    let util = ["cbr", "Utilization of spare bandwidth", "slipstream-paper", "0.725"];
    assert!(diffs.iter().any(|d| d[..4] == util && d[5] == "worse (lower)"), "{diffs:?}");
    assert!(!diffs.iter().any(|d| d[1] == util[1] && d[2] == "slipstream"), "{diffs:?}");
    assert!(md.contains("## Not reached / differs from paper"), "{md}");
    let u = scenario_markdown(&Summary::of(&udp_square(), &[], ""));
    assert!(u.contains("| UDP loss, UDP on | ratio | 0.220 | 0.030 | 0.050 | – | – |"), "{u}");
    assert!(u.contains("- htb-90: iperf3 UDP server failed to start"), "{u}");
}

#[test]
fn min_max_per_subcase() {
    // Two repeats per flow count, the same metric key in every sub-case (as the fairness
    // scenario records it): min–max must come from the row's own sub-case.
    let mut runs = Vec::new();
    for (n, vals) in [(2, [0.90, 0.94]), (4, [0.97, 0.99])] {
        for (repeat, v) in vals.iter().enumerate() {
            let mut r = run(
                "fairness",
                "slipstream",
                repeat as u32,
                BTreeMap::from([("flows".to_string(), json!(n))]),
            );
            r.metrics.push(Metric::new("jain_index", Unit::Ratio, *v));
            runs.push(r);
        }
    }
    let mut table = Table::new(vec!["slipstream".into()]);
    for n in [2, 4] {
        let refs: Vec<&RunResult> = runs.iter().filter(|r| r.params.extra["flows"] == json!(n)).collect();
        table.add_rows(&refs, [RowSpec::new(format!("N = {n}: Jain's index"), Unit::Ratio, "jain_index")]);
    }
    let rep = ScenarioReport { scenario: "fairness".into(), runs, table, ..Default::default() };
    let md = markdown::table(&Summary::of(&rep, &[], ""));
    assert!(md.contains("| N = 2: Jain's index | ratio | 0.920 (0.900–0.940) | – |"), "{md}");
    assert!(md.contains("| N = 4: Jain's index | ratio | 0.980 (0.970–0.990) | – |"), "{md}");
    assert_eq!(summary::repeats(&rep), 2);
}

#[test]
fn differences_cover_missing_and_direction() {
    let mut rep = Summary::of(&alone(), &[], "");
    let cell = |mean| Some(crate::result::Cell { mean, range: None });
    rep.rows.push(crate::result::Row {
        metric: "Time to 90% of the link".into(),
        unit: Unit::S,
        cells: vec![cell(1.0), cell(30.0), None, cell(2.0)],
        paper: Some(Paper::about(20.0, 0, "Vulture Sec. 0.4.5")),
    });
    let d = markdown::differences(&rep);
    let time = ["alone", "Time to 90% of the link", "slipstream", "30.0 s", "20 (Vulture Sec. 0.4.5)"];
    assert!(d.iter().any(|d| d[..5] == time && d[5] == "worse (higher)"), "{d:?}");
    assert!(d.iter().any(|d| d[2] == "slipstream-paper" && d[3] == "–" && d[5] == "not measured"), "{d:?}");
    assert!(d.iter().all(|d| d[2].starts_with("slipstream")));
}

#[test]
fn write_outputs_into_run_dir() {
    let dir = temp_dir("outputs");
    let mut rep = cbr();
    // A metric that could not be computed (web: an empty size bucket) is left out, not written
    // as a JSON null that cannot be read back.
    rep.runs[0].metrics.push(Metric::new("nan", Unit::Ms, f64::NAN));
    let written = write_scenario_outputs(&dir.join("cbr/20231114T221320Z"), &rep).unwrap();
    assert!(written[0].ends_with("result.json") && written[1].ends_with("table.md"), "{written:?}");
    let back =
        serde_json::from_str::<ScenarioReport>(&std::fs::read_to_string(&written[0]).unwrap()).unwrap();
    assert_eq!(back.runs.len(), rep.runs.len());
    assert_eq!(back.runs[0].metric("nan", None), None);
    if let Some(k) = running_kernel() {
        assert_eq!(back.runs[0].params.extra.get("kernel"), Some(&json!(k)));
        let md = std::fs::read_to_string(&written[1]).unwrap();
        assert!(md.contains(&format!("kernel {k}")), "{md}");
    }
    for f in ["goodput.svg", "rtt.svg", "piv.svg"] {
        let svg = std::fs::read_to_string(dir.join("cbr/20231114T221320Z").join(f)).unwrap();
        assert_svg(&svg);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gather_takes_latest_run_of_each_scenario() {
    let root = temp_dir("gather");
    let results = root.join("lab-results");
    let docs = root.join("docs");
    // An older cbr run that must not be used.
    let mut old = cbr();
    old.title = "OLD RUN".into();
    write_scenario_outputs(&results.join("cbr/20200101T000000Z"), &old).unwrap();
    for rep in all_kinds() {
        write_scenario_outputs(&results.join(&rep.scenario).join("20231114T221320Z"), &rep).unwrap();
    }
    // A broken result and a directory without one.
    std::fs::create_dir_all(results.join("broken/20231114T221320Z")).unwrap();
    std::fs::write(results.join("broken/20231114T221320Z/result.json"), "{not json").unwrap();
    std::fs::create_dir_all(results.join("nothing/20231114T221320Z")).unwrap();
    // A stale plot in docs.
    std::fs::create_dir_all(docs.join("lab/cbr")).unwrap();
    std::fs::write(docs.join("lab/cbr/stale.svg"), "<svg></svg>").unwrap();

    let readme = gather(&results, &docs, Publish::Replace).unwrap();
    assert_eq!(readme, docs.join("lab/README.md"));
    let page = std::fs::read_to_string(&readme).unwrap();
    assert!(page.starts_with("# Slipstream lab results"), "{page}");
    assert!(!page.contains("OLD RUN"));
    for section in [
        "## Testbed",
        "## Headline",
        "## Not reached / differs from paper",
        "## Runs that could not be reported",
    ] {
        assert!(page.contains(section), "no {section}");
    }
    assert!(page.contains("broken: "), "{page}");
    assert!(page.contains("How measured: 2023-11-14 22:13 UTC; no bottleneck, no delay element;"), "{page}");
    assert!(page.contains("How measured: 2023-11-14 22:13 UTC; bottleneck 10 Mbit/s, RTT 100 ms"), "{page}");
    assert!(!page.contains("nothing"), "{page}");
    // Scenarios in lab order, each with its table and plots.
    assert_sections_in_lab_order(&page);
    assert!(page.contains("| [cbr](#cbr) | BE goodput, background active | Mbit/s |"), "{page}");
    assert!(
        page.contains("| [datapath](#datapath) | Added latency, p99 | us | 4.0 | 38.0 | – | – | – |"),
        "{page}"
    );
    assert!(
        page.contains("| alone | Utilization, whole background period | slipstream | 0.740 | 0.93 (Vulture Sec. 0.4) | worse (lower) |"),
        "{page}"
    );
    assert!(!page.contains("| cwnd | Cwnd estimate correlation"), "{page}");
    assert!(
        page.contains("![cbr: goodput (best effort up, background upside down)](cbr/goodput.svg)"),
        "{page}"
    );
    assert!(!docs.join("lab/cbr/stale.svg").exists());
    for (dir, file) in [
        ("cbr", "goodput.svg"),
        ("cwnd", "windows.svg"),
        ("fairness", "goodput-flows-4.svg"),
        ("onoff", "goodput-on-off-t-s-5.svg"),
    ] {
        let svg = std::fs::read_to_string(docs.join("lab").join(dir).join(file)).unwrap();
        assert_svg(&svg);
    }
    assert_linked_svgs_exist(&page, &docs);
    let _ = std::fs::remove_dir_all(&root);
}

/// Every SVG image `page` links exists under `<docs>/lab`.
fn assert_linked_svgs_exist(page: &str, docs: &std::path::Path) {
    let links = page.split("](").skip(1).filter_map(|s| s.split_once(')'));
    for (link, _) in links.filter(|(l, _)| l.ends_with(".svg")) {
        assert!(docs.join("lab").join(link).is_file(), "missing {link}");
    }
}

/// Every scenario of the lab has a section on `page`, in the lab's order.
fn assert_sections_in_lab_order(page: &str) {
    let pos = |s: &str| page.find(&format!("<a id=\"{s}\">")).unwrap_or_else(|| panic!("no section {s}"));
    let names: Vec<&str> = crate::scenarios::all().map(|s| s.name).collect();
    for w in names.windows(2) {
        assert!(pos(w[0]) < pos(w[1]), "{w:?} out of order");
    }
}

#[test]
fn gather_keeps_committed_summaries_of_scenarios_without_a_run() {
    let root = temp_dir("gather-keep");
    let docs = root.join("docs");
    let first = root.join("first");
    for rep in all_kinds() {
        write_scenario_outputs(&first.join(&rep.scenario).join("20231114T221320Z"), &rep).unwrap();
    }
    let before = std::fs::read_to_string(gather(&first, &docs, Publish::Replace).unwrap()).unwrap();
    // The committed summaries alone rebuild the same page.
    let none = root.join("none");
    let rebuilt = std::fs::read_to_string(gather(&none, &docs, Publish::Replace).unwrap()).unwrap();
    assert_eq!(rebuilt, before);
    // A fresh results directory with only a new cbr run: every other scenario stays.
    let second = root.join("second");
    let mut fresh = cbr();
    fresh.title = "NEW CBR RUN".into();
    write_scenario_outputs(&second.join("cbr/20241114T221320Z"), &fresh).unwrap();
    let page = std::fs::read_to_string(gather(&second, &docs, Publish::Replace).unwrap()).unwrap();
    assert!(page.contains("NEW CBR RUN"), "{page}");
    assert_sections_in_lab_order(&page);
    for line in before.lines().filter(|l| l.starts_with("| [alone](#alone) |") || l.starts_with("| alone |"))
    {
        assert!(page.contains(line), "lost {line}");
    }
    let datapath_row = "| [datapath](#datapath) | Added latency, p99 | us | 4.0 | 38.0 | – | – | – |";
    assert!(page.contains(datapath_row), "{page}");
    assert_linked_svgs_exist(&page, &docs);
    // An older run does not replace a committed later one.
    write_scenario_outputs(&second.join("cbr/20001114T221320Z"), &cbr()).unwrap();
    std::fs::remove_dir_all(second.join("cbr/20241114T221320Z")).unwrap();
    let again = std::fs::read_to_string(gather(&second, &docs, Publish::Replace).unwrap()).unwrap();
    assert_eq!(again, page);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn gather_without_results_or_summaries_says_so() {
    let root = temp_dir("gather-none");
    let page =
        std::fs::read_to_string(gather(&root.join("nope"), &root.join("docs"), Publish::Replace).unwrap())
            .unwrap();
    assert!(page.contains("_No runs found._"), "{page}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Writes every plot of every synthetic kind under `$SLIPSTREAM_REPORT_DUMP` (default: a temporary
/// directory) for looking at them: `cargo test -p slipstream-lab dump -- --ignored`.
#[test]
#[ignore = "writes plots for a person to look at; checks nothing the other tests do not"]
fn dump_synthetic_reports() {
    let dir = std::env::var("SLIPSTREAM_REPORT_DUMP").map(PathBuf::from).unwrap_or_else(|_| temp_dir("dump"));
    eprintln!("writing under {}", dir.display());
    for rep in all_kinds() {
        let run_dir = dir.join("results").join(&rep.scenario).join("20231114T221320Z");
        write_scenario_outputs(&run_dir, &rep).unwrap();
    }
    gather(&dir.join("results"), &dir.join("docs"), Publish::Replace).unwrap();
}

#[test]
fn subcases_are_named_by_their_independent_keys() {
    let case = |flows: u64, hosts: u64, stagger: f64, cc: &str| {
        let mut e = BTreeMap::new();
        e.insert("flows".to_string(), json!(flows));
        e.insert("hosts".to_string(), json!(hosts));
        e.insert("stagger_s".to_string(), json!(stagger));
        e.insert("cc".to_string(), json!(cc));
        run("fairness", "slipstream", 0, e)
    };
    // hosts and stagger follow from flows: one key names the sub-case.
    let mut r = ScenarioReport {
        scenario: "fairness".into(),
        runs: vec![case(2, 2, 20.0, "cubic"), case(8, 4, 60.0 / 7.0, "cubic")],
        ..Default::default()
    };
    assert_eq!(subcases::subcase_keys(&r), vec!["flows".to_string()]);
    assert_eq!(subcases::subcase_label(&r.runs[1], &subcases::subcase_keys(&r)), "flows=8");
    // A second independent dimension stays.
    r.runs.push(case(2, 2, 20.0, "reno"));
    assert_eq!(subcases::subcase_keys(&r), vec!["cc".to_string(), "flows".to_string()]);
}

/// The goodput figure draws each alternative's measured series: best effort as measured,
/// background upside down, in that alternative's own panel.
#[test]
fn goodput_plot_draws_the_measured_series() {
    let rep = cbr();
    let plots = scenario_plots(&rep).unwrap();
    let fig = &plot(&plots, "goodput.svg").figure;
    let panels: Vec<&str> = fig.panels.iter().map(|p| p.title.as_str()).collect();
    assert_eq!(panels, ALTS);
    for alt in ALTS {
        let run = rep.runs.iter().find(|r| r.alternative == alt && r.params.repeat == 0).unwrap();
        let panel = fig.panels.iter().find(|p| p.title == alt).unwrap();
        assert!(panel.mirrored);
        let line = |label: &str| &panel.lines.iter().find(|l| l.label == label).unwrap().points;
        let be = &run.series("goodput", "be").unwrap().points;
        let bg = &run.series("goodput", "bg").unwrap().points;
        assert_eq!(line("best effort (be)"), be, "{alt}");
        assert_eq!(line("background (bg)"), &plot::negate(bg), "{alt}");
        assert!(bg.iter().any(|p| p.1 > 0.0), "{alt}: a background flow to draw");
        // The reverse flow is not drawn; the bottleneck rate is marked at ±10 Mbit/s.
        assert!(panel.lines.iter().all(|l| !l.label.contains("rev")));
        let marks: Vec<f64> = panel.hlines.iter().map(|m| m.at).collect();
        assert!(marks.contains(&10.0) && marks.contains(&-10.0), "{marks:?}");
    }
}

/// The window, PIV and RTT figures draw each run's own series, in kB and ms, with the phase
/// boundaries marked; an alternative without the series has no panel.
#[test]
fn window_piv_and_rtt_plots_draw_the_measured_series() {
    let kb = |p: &[(f64, f64)]| p.iter().map(|(t, v)| (*t, v * 1e-3)).collect::<Vec<_>>();
    let ms = |p: &[(f64, f64)]| p.iter().map(|(t, v)| (*t, v * 1e3)).collect::<Vec<_>>();
    let rep = cwnd();
    let plots = scenario_plots(&rep).unwrap();
    let fig = &plot(&plots, "windows.svg").figure;
    for alt in ALTS {
        let run = rep.runs.iter().find(|r| r.alternative == alt).unwrap();
        let Some(panel) = fig.panels.iter().find(|p| p.title == alt) else {
            let windows = ["rwnd", "cwnd_estimate", "cwnd"];
            assert!(windows.iter().all(|n| run.series(n, "bg").is_none()), "{alt}: windows not drawn");
            continue;
        };
        let line = |label: &str| panel.lines.iter().find(|l| l.label == label).map(|l| &l.points);
        for (name, label) in
            [("rwnd", "rwnd (advertised)"), ("cwnd_estimate", "cwnd estimate"), ("cwnd", "cwnd (sender)")]
        {
            let want = run.series(name, "bg").map(|s| kb(&s.points));
            assert_eq!(line(label), want.as_ref(), "{alt}: {name}");
        }
        assert!(!panel.lines.is_empty(), "{alt}: a panel only where there are windows");
        let marks: Vec<f64> = panel.vlines.iter().map(|m| m.at).collect();
        assert_eq!(marks, [45.0, 135.0], "{alt}");
    }
    let rep = cbr();
    let plots = scenario_plots(&rep).unwrap();
    let (piv, rtt) = (&plot(&plots, "piv.svg").figure, &plot(&plots, "rtt.svg").figure);
    for alt in ALTS {
        let run = rep.runs.iter().find(|r| r.alternative == alt && r.params.repeat == 0).unwrap();
        let lines = |fig: &plot::Figure| {
            fig.panels.iter().find(|p| p.title == alt).map(|p| p.lines.clone()).unwrap_or_default()
        };
        let rtt_lines = lines(rtt);
        assert_eq!(rtt_lines.len(), 1, "{alt}");
        assert_eq!(rtt_lines[0].points, run.series("rtt", "ping").unwrap().points, "{alt}");
        let piv_lines: Vec<Vec<(f64, f64)>> = lines(piv).into_iter().map(|l| l.points).collect();
        let want: Vec<Vec<(f64, f64)>> =
            run.series("piv_sum", "bg").map(|s| ms(&s.points)).into_iter().collect();
        assert_eq!(piv_lines, want, "{alt}");
    }
}

/// Sixteen background flows are drawn as their sum, UDP's available bandwidth upside down, and
/// every goodput panel shares one symmetric y range.
#[test]
fn sum_and_available_plot_the_measured_values() {
    let rep = fairness();
    let plots = scenario_plots(&rep).unwrap();
    let fig = &plot(&plots, "goodput-flows-16.svg").figure;
    for alt in ALTS {
        let run =
            rep.runs.iter().find(|r| r.alternative == alt && r.params.extra["flows"] == json!(16)).unwrap();
        let flows: Vec<&[(f64, f64)]> = run.series.iter().map(|s| s.points.as_slice()).collect();
        assert_eq!(flows.len(), 16);
        // Every flow is sampled on the same grid: the total is the sum at each index.
        let total: Vec<(f64, f64)> = (0..flows[0].len())
            .map(|i| (flows[0][i].0, -flows.iter().map(|f| f[i].1).sum::<f64>()))
            .collect();
        let panel = fig.panels.iter().find(|p| p.title == alt).unwrap();
        assert_eq!(panel.lines.len(), 1, "{alt}: one line for all flows");
        assert_eq!(panel.lines[0].label, "background, 16 flows together");
        for (got, want) in panel.lines[0].points.iter().zip(&total) {
            assert!(got.0 == want.0 && (got.1 - want.1).abs() < 1e-9, "{alt}: {got:?} vs {want:?}");
        }
        assert_eq!(panel.lines[0].points.len(), total.len());
    }
    // One symmetric y range over all panels: 8% above the largest magnitude drawn or the link rate.
    let extent = fig
        .panels
        .iter()
        .flat_map(|p| &p.lines)
        .flat_map(|l| &l.points)
        .map(|p| p.1.abs())
        .fold(10.0, f64::max);
    for p in &fig.panels {
        assert_eq!(p.y_range, Some((-extent * 1.08, extent * 1.08)), "{}", p.title);
    }

    let rep = udp_square();
    let plots = scenario_plots(&rep).unwrap();
    let fig = &plot(&plots, "goodput.svg").figure;
    for alt in ALTS {
        let panel = fig.panels.iter().find(|p| p.title == alt);
        let run = rep.runs.iter().find(|r| r.alternative == alt).unwrap();
        let Some(available) = run.series("available", "link") else {
            assert!(panel.is_none(), "{alt}: no data, no panel");
            continue;
        };
        let panel = panel.unwrap();
        let line = panel.lines.iter().find(|l| l.label == "available to background").unwrap();
        assert_eq!(line.points, plot::negate(&available.points), "{alt}");
        let udp = panel.lines.iter().find(|l| l.label == "best effort (udp)").unwrap();
        assert_eq!(udp.points, run.series("udp_rate", "udp").unwrap().points, "{alt}");
    }
}

/// The committed `docs/lab/README.md` is what `slipstream-lab report` rebuilds from the committed
/// summaries `docs/lab/*/result.json` alone, byte for byte: no number on the page is hand-edited
/// or lost when the report code changes.
#[test]
fn committed_page_rebuilds_from_committed_summaries() {
    let lab = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/lab");
    let docs = temp_dir("committed").join("docs");
    for dir in entries(&lab).into_iter().filter(|d| d.join(RESULT_JSON).is_file()) {
        let out = docs.join("lab").join(dir.file_name().unwrap());
        std::fs::create_dir_all(&out).unwrap();
        std::fs::copy(dir.join(RESULT_JSON), out.join(RESULT_JSON)).unwrap();
    }
    let rebuilt =
        std::fs::read_to_string(gather(&docs.join("no-results"), &docs, Publish::Replace).unwrap()).unwrap();
    let committed = std::fs::read_to_string(lab.join("README.md")).unwrap();
    let page = docs.join("lab/README.md");
    assert!(rebuilt == committed, "docs/lab/README.md differs from the rebuilt {}", page.display());
    assert_linked_svgs_exist(&committed, &lab.join(".."));
    let _ = std::fs::remove_dir_all(docs.parent().unwrap());
}
