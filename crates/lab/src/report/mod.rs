//! Reports of lab runs: SVG plots like the Vulture paper's figures, Markdown tables with the
//! paper's values beside ours, and the one-page summary `docs/lab/README.md`.
//!
//! * [`write_scenario_outputs`]: after a run, into its run directory: `result.json`, `table.md`
//!   (how measured, table, notes, plot links) and every plot as `*.svg`.
//! * [`gather`]: `slipstream-lab report`: the latest run of each scenario under the results
//!   directory → `docs/lab/<scenario>/*.svg` and `docs/lab/README.md`; scenarios without a run
//!   there keep their part of the previous page ([`carry`]).
//! * [`figures`]: which plots a report yields (goodput head to head with the background flow
//!   upside down, windows, PIV sums, RTT, CDFs, summary bars); [`plot`]: the SVG primitives;
//!   [`markdown`]: number formatting, tables, the "differs from paper" list.
//!
//! Plots are SVG only, drawn with `plotters`' SVG backend: text stays `<text>`, so neither the
//! build nor the rendering needs font files, freetype or fontconfig. Missing series never fail a
//! report: their panel carries a note, or the plot is left out.

pub mod carry;
pub mod figures;
pub mod markdown;
pub mod plot;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use figures::{scenario_plots, Plot};

use crate::result::ScenarioReport;

/// File names written into a run directory besides the plots.
pub const RESULT_JSON: &str = "result.json";
/// The scenario's Markdown table.
pub const TABLE_MD: &str = "table.md";

/// The kernel this process runs on (`/proc/sys/kernel/osrelease`), if readable.
pub fn running_kernel() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The Markdown page of one scenario (as written to `table.md`), linking `plots` by file name.
pub fn scenario_markdown(report: &ScenarioReport, plots: &[Plot]) -> String {
    let links: Vec<(String, String)> = plots.iter().map(|p| (p.file.clone(), p.title.clone())).collect();
    let mut s = markdown::scenario_section(report, "#", &links);
    let diffs = markdown::differences(report);
    if !diffs.is_empty() {
        s.push_str("\n## Not reached / differs from paper\n\n");
        s.push_str(&differences_table(&diffs, false));
    }
    s
}

/// Writes a scenario's outputs into its run directory `dir` (created if needed): `result.json`
/// (with `params.extra["kernel"]` filled in from the running kernel where a run lacks it),
/// `table.md` and every plot as `<name>.svg`. Returns the paths written, `result.json` first.
///
/// A plot that fails to render is skipped and noted in `table.md`; `result.json` is always
/// written first so a plotting problem can never lose the measurement.
pub fn write_scenario_outputs(dir: &Path, report: &ScenarioReport) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut report = report.clone();
    if let Some(k) = running_kernel() {
        for r in &mut report.runs {
            r.params
                .extra
                .entry("kernel".to_string())
                .or_insert_with(|| serde_json::Value::String(k.clone()));
        }
    }
    let mut written = Vec::new();
    let json = dir.join(RESULT_JSON);
    std::fs::write(&json, report.to_json()?).with_context(|| format!("writing {}", json.display()))?;
    written.push(json);
    let (plots, problem) = match scenario_plots(&report) {
        Ok(p) => (p, None),
        Err(e) => (Vec::new(), Some(format!("plots could not be rendered: {e:#}"))),
    };
    for p in &plots {
        let path = dir.join(&p.file);
        std::fs::write(&path, &p.svg).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    let mut md = scenario_markdown(&report, &plots);
    if let Some(problem) = problem {
        md.push_str(&format!("\n_{problem}_\n"));
    }
    let table = dir.join(TABLE_MD);
    std::fs::write(&table, md).with_context(|| format!("writing {}", table.display()))?;
    written.insert(1, table);
    Ok(written)
}

/// The latest run directory of each scenario under `results_dir`
/// (`<results_dir>/<scenario>/<timestamp>/result.json`; timestamps sort by time), by scenario
/// name.
pub fn latest_runs(results_dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(results_dir).with_context(|| format!("reading {}", results_dir.display()))?;
    let mut scenario_dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    scenario_dirs.sort();
    for sdir in scenario_dirs {
        let Some(name) = sdir.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        let Ok(runs) = std::fs::read_dir(&sdir) else {
            continue;
        };
        let latest = runs
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.join(RESULT_JSON).is_file())
            .max_by(|a, b| a.file_name().cmp(&b.file_name()));
        if let Some(run) = latest {
            out.push((name, run));
        }
    }
    Ok(out)
}

/// Scenario order on the page: the lab's order (`all`), then `smoke`, then anything else
/// alphabetically.
fn order_key(name: &str) -> (usize, String) {
    let pos = crate::scenarios::ALL
        .iter()
        .chain(&["smoke"])
        .position(|n| *n == name)
        .unwrap_or(usize::MAX);
    (pos, name.to_string())
}

/// `slipstream-lab report`: finds the latest run of each scenario under `results_dir`, renders
/// its plots into `<docs_dir>/lab/<scenario>/*.svg` (removing stale SVGs there) and writes
/// `<docs_dir>/lab/README.md`: testbed, headline table, each scenario's table and plots, and
/// what is not reached or differs from the paper. Returns the README's path.
///
/// A `result.json` that cannot be read is listed on the page instead of failing the report. A
/// scenario on the previous page with no readable run now keeps its part of that page, marked
/// ([`carry`]), so that re-running one scenario does not erase the others.
pub fn gather(results_dir: &Path, docs_dir: &Path) -> Result<PathBuf> {
    let lab_dir = docs_dir.join("lab");
    std::fs::create_dir_all(&lab_dir).with_context(|| format!("creating {}", lab_dir.display()))?;
    let mut runs = latest_runs(results_dir)?;
    runs.sort_by_key(|(name, _)| order_key(name));

    let mut loaded: Vec<(ScenarioReport, PathBuf, Vec<Plot>)> = Vec::new();
    let mut broken: Vec<String> = Vec::new();
    for (name, run_dir) in &runs {
        let path = run_dir.join(RESULT_JSON);
        let report = match std::fs::read_to_string(&path)
            .map_err(anyhow::Error::from)
            .and_then(|t| ScenarioReport::from_json(&t))
        {
            Ok(r) => r,
            Err(e) => {
                broken.push(format!("{name}: {} could not be read: {e:#}", path.display()));
                continue;
            }
        };
        let out = lab_dir.join(name);
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        if let Ok(entries) = std::fs::read_dir(&out) {
            for e in entries.filter_map(|e| e.ok()) {
                if e.path().extension().is_some_and(|x| x == "svg") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let plots = match scenario_plots(&report) {
            Ok(p) => p,
            Err(e) => {
                broken.push(format!("{name}: plots could not be rendered: {e:#}"));
                Vec::new()
            }
        };
        for p in &plots {
            let f = out.join(&p.file);
            std::fs::write(&f, &p.svg).with_context(|| format!("writing {}", f.display()))?;
        }
        loaded.push((report, run_dir.clone(), plots));
    }

    let readme_path = lab_dir.join("README.md");
    let fresh: Vec<&str> = loaded.iter().map(|(r, _, _)| r.scenario.as_str()).collect();
    let carried = match std::fs::read_to_string(&readme_path) {
        Ok(previous) => carry::carried_over(&previous, &fresh),
        Err(_) => Vec::new(),
    };
    let page = readme(results_dir, &loaded, &carried, &broken);
    std::fs::write(&readme_path, page).with_context(|| format!("writing {}", readme_path.display()))?;
    Ok(readme_path)
}

fn differences_table(diffs: &[markdown::Difference], with_scenario: bool) -> String {
    let mut s = String::new();
    if with_scenario {
        s.push_str(DIFFERENCES_HEADER);
    } else {
        s.push_str("| metric | alternative | measured | paper | verdict |\n|---|---|---:|---|---|\n");
    }
    for d in diffs {
        let measured = match d.measured {
            Some(v) => markdown::with_unit(v, &d.unit),
            None => markdown::MISSING.into(),
        };
        if with_scenario {
            s.push_str(&format!("| {} ", d.scenario));
        }
        s.push_str(&format!(
            "| {} | {} | {measured} | {} | {} |\n",
            d.metric.replace('|', "\\|"),
            d.alternative,
            d.paper.replace('|', "\\|"),
            d.verdict
        ));
    }
    s
}

/// The header of the page's differences table (with a scenario column).
const DIFFERENCES_HEADER: &str =
    "| scenario | metric | alternative | measured | paper | verdict |\n|---|---|---|---:|---|---|\n";

/// The rows a scenario shows in the headline, by row label: what a reader of the paper looks
/// for first (how much best effort keeps, how much spare the background flow uses, how fair,
/// how costly).
const HEADLINE: [(&str, &[&str]); 11] = [
    (
        "alone",
        &[
            "utilization, whole run",
            "utilization, stable (2nd half)",
            "ping RTT beside BG, stable",
        ],
    ),
    (
        "cbr",
        &[
            "BE goodput, BG active",
            "BE RTT (ping), BG active",
            "BG use of spare capacity",
        ],
    ),
    (
        "cwnd",
        &["reno: cwnd estimate bias", "cubic: estimate vs in-flight MARE"],
    ),
    (
        "onoff",
        &[
            "T = 5 s: BE on: BE BW share",
            "T = 5 s: BE off: LBE BW util.",
            "T = 30 s: BE off: LBE BW util.",
        ],
    ),
    ("fairness", &["N = 8: Jain's index", "N = 64: Jain's index"]),
    (
        "udp-square",
        &[
            "BG usage / available, on/off = 5 s",
            "BG usage / available, on/off = 50 s",
        ],
    ),
    (
        "web",
        &[
            "Web response time, all objects / with plain TCP bulk (no-control)",
            "BG share of the link while web runs",
        ],
    ),
    (
        "no-timestamps",
        &["N = 1: BE kept beside BG", "N = 1: BG alone / BE alone"],
    ),
    (
        "many-flows",
        &[
            "N = 16 over 4 hosts: BE kept beside BG",
            "N = 16 over 4 hosts: host share ratio (max/min), BG alone",
            "N = 64 over 4 hosts: BE kept beside BG",
            "N = 64 over 4 hosts: Jain's index (host-fair), BG alone",
        ],
    ),
    (
        "weights",
        &[
            "weights 1:3: w3 / w1 goodput, BG alone",
            "min_rate 2mbit: BG goodput beside BE",
        ],
    ),
    (
        "datapath",
        &[
            "Packets/s relative to kernel forwarding (same round)",
            "User-space process CPU per million packets",
            "Probe RTT median added vs kernel (2 queued packets)",
        ],
    ),
];

/// The headline rows of a scenario: those [`HEADLINE`] names that it has, else the first row
/// with a paper value, else the first row.
pub fn headline_rows(report: &ScenarioReport) -> Vec<&crate::result::Row> {
    let rows = &report.table.rows;
    let named: Vec<&crate::result::Row> = HEADLINE
        .iter()
        .filter(|(scenario, _)| *scenario == report.scenario)
        .flat_map(|(_, labels)| labels.iter())
        .filter_map(|l| rows.iter().find(|r| r.metric == *l))
        .collect();
    if !named.is_empty() {
        return named;
    }
    rows.iter()
        .find(|r| r.paper.is_some())
        .or_else(|| rows.first())
        .into_iter()
        .collect()
}

/// A headline table: its header (names and alignment lines) and rows, each with its scenario.
struct HeadlineTable {
    header: String,
    rows: Vec<(String, String)>,
}

impl HeadlineTable {
    /// One table over `reports`, a column per alternative any of them has.
    fn over(reports: &[&ScenarioReport]) -> Self {
        let mut cols: Vec<String> = Vec::new();
        for r in reports {
            for c in &r.table.columns {
                if !cols.contains(c) {
                    cols.push(c.clone());
                }
            }
        }
        let mut header = String::from("| scenario | metric | unit |");
        for c in &cols {
            header.push_str(&format!(" {c} |"));
        }
        header.push_str(" paper |\n|---|---|---|");
        for _ in &cols {
            header.push_str("---:|");
        }
        header.push_str("---|");
        let mut rows = Vec::new();
        for r in reports {
            let chosen = headline_rows(r);
            if chosen.is_empty() {
                let mut line = format!("| [{0}](#{0}) | _no table_ | |", r.scenario);
                for _ in &cols {
                    line.push_str(" – |");
                }
                line.push_str(" – |");
                rows.push((r.scenario.clone(), line));
            }
            for row in chosen {
                let mut line = format!(
                    "| [{0}](#{0}) | {1} | {2} |",
                    r.scenario,
                    row.metric.replace('|', "\\|"),
                    row.unit
                );
                for c in &cols {
                    let cell = match r.table.columns.iter().position(|x| x == c) {
                        Some(i) => markdown::cell(r, row, i),
                        None => markdown::MISSING.into(),
                    };
                    line.push_str(&format!(" {cell} |"));
                }
                line.push_str(&format!(" {} |", markdown::paper_cell(row).replace('|', "\\|")));
                rows.push((r.scenario.clone(), line));
            }
        }
        HeadlineTable { header, rows }
    }

    /// Adds a carried-over row to the table among `tables` with the same header, or to a new one.
    fn add_carried(tables: &mut Vec<HeadlineTable>, scenario: &str, header: &str, row: &str) {
        let entry = (scenario.to_string(), row.to_string());
        match tables.iter_mut().find(|t| t.header == header) {
            Some(t) => t.rows.push(entry),
            None => tables.push(HeadlineTable {
                header: header.to_string(),
                rows: vec![entry],
            }),
        }
    }

    /// The table in Markdown, rows in the lab's scenario order, followed by a blank line.
    fn render(mut self) -> String {
        self.rows.sort_by_key(|(scenario, _)| order_key(scenario));
        let mut s = self.header;
        s.push('\n');
        for (_, row) in self.rows {
            s.push_str(&row);
            s.push('\n');
        }
        s.push('\n');
        s
    }
}

fn readme(
    results_dir: &Path,
    loaded: &[(ScenarioReport, PathBuf, Vec<Plot>)],
    carried: &[carry::CarriedScenario],
    broken: &[String],
) -> String {
    let mut s = String::from("# Slipstream lab results\n\n");
    s.push_str("Generated by `slipstream-lab report` from the latest run of each scenario under `");
    s.push_str(&results_dir.display().to_string());
    s.push_str("`; numbers are as measured, including where they miss the paper.");
    if !carried.is_empty() {
        s.push_str(
            " Scenarios marked as carried over keep their part of the previous page: their runs \
             are no longer under the results directory.",
        );
    }
    s.push_str("\n\n");
    s.push_str("## Testbed\n\n");
    s.push_str(
        "Network namespaces on one Linux host (`crates/testbed`): `server` (and `server2`, ...: \
         iperf3 senders, on a bridge) → `isp` (delay element `slipstream-delay` on NFQUEUE, half \
         the RTT each way; download bottleneck: `tbf` on its router-facing egress, queue one BDP \
         unless noted) → `router` (upload bottleneck: `tbf` on its WAN side; `slipstreamd` on \
         its LAN side, or the alternative's shaping) → LAN bridge `br-lan` → `client` (and \
         `client2`, ...: receivers). `fairness` spreads its flows over four LAN hosts; in `web` \
         LAN host 2 browses server 2 beside LAN host 1's background download from server 1. \
         TSO/GSO/GRO off, `tcp_no_metrics_save=1`, 8 MiB TCP buffers. The Vulture paper \
         (Li & Welzl 2017, Sec. 0.4.1) used three machines, a 10 Mbit/s link (9.41 Mbit/s goodput), \
         100 ms RTT, an 86-packet pfifo queue and a modified receiver kernel; Slipstream does the \
         same from the router by rewriting the window in passing ACKs.\n\n",
    );
    let mut params: Vec<(String, String)> = loaded
        .iter()
        .map(|(r, _, _)| {
            let line = format!(
                "- **{}**: {}",
                r.scenario,
                markdown::how_measured(r).trim_start_matches("How measured: ")
            );
            (r.scenario.clone(), line)
        })
        .collect();
    params.extend(
        carried
            .iter()
            .filter_map(|c| Some((c.scenario.clone(), c.params.clone()?))),
    );
    params.sort_by_key(|(scenario, _)| order_key(scenario));
    if !params.is_empty() {
        s.push_str("Per scenario:\n\n");
        for (_, line) in &params {
            s.push_str(line);
            s.push('\n');
        }
        s.push('\n');
    }

    // Headline tables: the scenarios that compare alternatives in one table (a column per
    // alternative); a scenario with columns of its own (datapath's modes) in a table of its own.
    s.push_str("## Headline\n\n");
    let mut tables: Vec<HeadlineTable> = Vec::new();
    let labels: Vec<String> = crate::alternatives::Alternative::ALL
        .iter()
        .map(|a| a.label())
        .collect();
    let compares = |r: &ScenarioReport| r.table.columns.iter().any(|c| labels.contains(c));
    let with_alternatives: Vec<&ScenarioReport> =
        loaded.iter().map(|(r, _, _)| r).filter(|r| compares(r)).collect();
    if !with_alternatives.is_empty() {
        tables.push(HeadlineTable::over(&with_alternatives));
    }
    for (r, _, _) in loaded.iter().filter(|(r, _, _)| !compares(r)) {
        tables.push(HeadlineTable::over(&[r]));
    }
    for c in carried {
        for (header, row) in &c.headline {
            HeadlineTable::add_carried(&mut tables, &c.scenario, header, row);
        }
    }
    if tables.is_empty() {
        s.push_str("_No runs found._\n\n");
    }
    // Tables in the order of their first scenario.
    tables.sort_by_key(|t| t.rows.iter().map(|(scenario, _)| order_key(scenario)).min());
    for t in tables {
        s.push_str(&t.render());
    }

    // Differences from the paper, all scenarios.
    let mut differences: Vec<(String, String)> = Vec::new();
    for (r, _, _) in loaded {
        let diffs = markdown::differences(r);
        let table = differences_table(&diffs, true);
        let rows = table.lines().skip(2).map(|l| (r.scenario.clone(), l.to_string()));
        differences.extend(rows);
    }
    for c in carried {
        differences.extend(c.differences.iter().map(|l| (c.scenario.clone(), l.clone())));
    }
    differences.sort_by_key(|(scenario, _)| order_key(scenario));
    s.push_str("## Not reached / differs from paper\n\n");
    if differences.is_empty() {
        s.push_str("Nothing: every Slipstream figure with a paper counterpart is within tolerance (worse by at most 5%, or 0.02 for ratios).\n\n");
    } else {
        s.push_str("Slipstream columns whose value is worse than the paper's by more than 5% (0.02 for ratios), differs by more than 10% where better/worse is not obvious, or was not measured:\n\n");
        s.push_str(DIFFERENCES_HEADER);
        for (_, row) in &differences {
            s.push_str(row);
            s.push('\n');
        }
        s.push('\n');
    }
    if !broken.is_empty() {
        s.push_str("## Runs that could not be reported\n\n");
        for b in broken {
            s.push_str(&format!("- {b}\n"));
        }
        s.push('\n');
    }

    // Each scenario.
    let mut sections: Vec<(String, String)> = Vec::new();
    for (r, run_dir, plots) in loaded {
        let links: Vec<(String, String)> = plots
            .iter()
            .map(|p| (format!("{}/{}", r.scenario, p.file), p.title.clone()))
            .collect();
        let mut section = format!("<a id=\"{}\"></a>\n\n", r.scenario);
        section.push_str(&markdown::scenario_section(r, "##", &links));
        let shown = run_dir.strip_prefix(results_dir).unwrap_or(run_dir);
        section.push_str(&format!(
            "\nRun: `{}` (under the results directory).\n\n",
            shown.display()
        ));
        sections.push((r.scenario.clone(), section));
    }
    sections.extend(carried.iter().map(|c| (c.scenario.clone(), c.section.clone())));
    sections.sort_by_key(|(scenario, _)| order_key(scenario));
    for (_, section) in sections {
        s.push_str(&section);
    }
    s
}

#[cfg(test)]
mod tests;
