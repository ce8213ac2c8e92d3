//! Reports of lab runs: SVG plots like the Vulture paper's figures ([`figures`], drawn by
//! [`plot`] with `plotters`' SVG backend, so no fonts are needed), Markdown tables with the paper's
//! values beside ours ([`markdown`]), and the page `docs/lab/README.md` ([`page`]) rendered from
//! each scenario's committed [`Summary`] alone.
//!
//! * [`write_scenario_outputs`]: a run directory's `result.json`, `table.md` and `*.svg`.
//! * [`gather`]: `slipstream-lab report`: the latest run of each scenario → `docs/lab/<scenario>/`
//!   (plots and summary `result.json`), then the page from every committed summary.

pub mod figures;
pub mod markdown;
pub mod page;
pub mod plot;
pub mod subcases;
pub mod summary;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use figures::{scenario_plots, Plot};
pub use summary::Summary;

use crate::result::ScenarioReport;

/// The result file of a run directory (raw) and of a scenario under `docs/lab/` (summary).
pub const RESULT_JSON: &str = "result.json";
/// The scenario's Markdown table in its run directory.
pub const TABLE_MD: &str = "table.md";

/// The kernel this process runs on (`/proc/sys/kernel/osrelease`), if readable.
pub fn running_kernel() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The Markdown page of one scenario (as written to `table.md`), plots linked by file name.
pub fn scenario_markdown(summary: &Summary) -> String {
    let mut s = markdown::scenario_section(summary, "#", "");
    let diffs = markdown::differences_table(&markdown::differences(summary));
    if !diffs.is_empty() {
        s.push_str("\n## Not reached / differs from paper\n\n");
        s.push_str(&diffs);
    }
    s
}

/// Writes a scenario's outputs into its run directory `dir` (created if needed): `result.json`
/// (with `params.extra["kernel"]` filled in from the running kernel where a run lacks it),
/// `table.md` and every plot as `<name>.svg`. Returns the paths written, `result.json` first:
/// it is written before anything is plotted, so a plotting problem can never lose the measurement.
pub fn write_scenario_outputs(dir: &Path, report: &ScenarioReport) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut report = report.clone();
    // JSON has no NaN: serde_json would write null, which does not read back as a number.
    report.runs.iter_mut().for_each(|r| r.metrics.retain(|m| m.value.is_finite()));
    if let Some(k) = running_kernel() {
        for r in &mut report.runs {
            r.params.extra.entry("kernel".to_string()).or_insert_with(|| k.clone().into());
        }
    }
    let (json, table) = (dir.join(RESULT_JSON), dir.join(TABLE_MD));
    write(&json, serde_json::to_string_pretty(&report)?)?;
    let plots = scenario_plots(&report).context("rendering plots")?;
    let svgs = write_plots(dir, &plots)?;
    write(&table, scenario_markdown(&Summary::of(&report, &plots, "")))?;
    Ok([json, table].into_iter().chain(svgs).collect())
}

fn write(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

/// Writes each plot as `dir/<file>`; returns the paths.
fn write_plots(dir: &Path, plots: &[Plot]) -> Result<Vec<PathBuf>> {
    let paths: Vec<PathBuf> = plots.iter().map(|p| dir.join(&p.file)).collect();
    plots.iter().zip(&paths).try_for_each(|(p, path)| write(path, &p.svg))?;
    Ok(paths)
}

/// `dir/result.json`, parsed.
fn read_result<T: serde::de::DeserializeOwned>(dir: &Path) -> Result<T> {
    let path = dir.join(RESULT_JSON);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The distinct items of `items`, in first-seen order.
fn unique<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for x in items {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// The entries of `dir`, sorted (none if it cannot be read).
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
    v.sort();
    v
}

/// The latest run directory of each scenario under `results_dir`
/// (`<results_dir>/<scenario>/<timestamp>/result.json`; timestamps sort by time), by scenario
/// name. A missing `results_dir` has none.
pub fn latest_runs(results_dir: &Path) -> Vec<(String, PathBuf)> {
    let scenario_dirs = entries(results_dir).into_iter().filter(|p| p.is_dir());
    let latest = |sdir: PathBuf| {
        let run = entries(&sdir).into_iter().rfind(|p| p.join(RESULT_JSON).is_file())?;
        Some((sdir.file_name()?.to_str()?.to_string(), run))
    };
    scenario_dirs.filter_map(latest).collect()
}

/// How a run joins a scenario's committed summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Publish {
    /// The run's summary and plots replace the committed ones.
    #[default]
    Replace,
    /// The committed columns the run lacks are kept beside its own ([`Summary::merged_with`]),
    /// and its plots join the committed ones, named after its columns (`household-goodput.svg`).
    Merge,
}

/// Renders `run_dir`'s report into `lab_dir/<scenario>/`: its plots and its summary, replacing
/// or merged with the committed ones (`how`). A committed summary of a later run is kept.
fn publish_run(lab_dir: &Path, results_dir: &Path, run_dir: &Path, how: Publish) -> Result<()> {
    let report: ScenarioReport = read_result(run_dir)?;
    let out = lab_dir.join(&report.scenario);
    let run = run_dir.strip_prefix(results_dir).unwrap_or(run_dir).display().to_string();
    let committed = read_result::<Summary>(&out).ok();
    if committed.as_ref().is_some_and(|c| c.run > run) {
        return Ok(());
    }
    let mut plots = scenario_plots(&report).context("rendering plots")?;
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let summary = match (how, committed) {
        (Publish::Merge, Some(committed)) => {
            let prefix = report.table.columns.join("+");
            for p in &mut plots {
                p.file = format!("{prefix}-{}", p.file);
                p.title = format!("{} ({prefix})", p.title);
            }
            Summary::of(&report, &plots, &run).merged_with(committed)
        }
        _ => {
            for svg in entries(&out).into_iter().filter(|p| p.extension().is_some_and(|x| x == "svg")) {
                std::fs::remove_file(svg)?;
            }
            Summary::of(&report, &plots, &run)
        }
    };
    write_plots(&out, &plots)?;
    write(&out.join(RESULT_JSON), serde_json::to_string_pretty(&summary)? + "\n")
}

/// `slipstream-lab report`: publishes the latest run of each scenario under `results_dir` (if
/// any) into `<docs_dir>/lab/<scenario>/` (plots and summary `result.json`, as `how` says), then
/// writes `<docs_dir>/lab/README.md` from every summary there. Returns the README's path.
///
/// A run or summary that cannot be read is listed on the page instead of failing the report.
pub fn gather(results_dir: &Path, docs_dir: &Path, how: Publish) -> Result<PathBuf> {
    let lab_dir = docs_dir.join("lab");
    std::fs::create_dir_all(&lab_dir).with_context(|| format!("creating {}", lab_dir.display()))?;
    let mut broken: Vec<String> = Vec::new();
    for (name, run_dir) in latest_runs(results_dir) {
        if let Err(e) = publish_run(&lab_dir, results_dir, &run_dir, how) {
            broken.push(format!("{name}: {} could not be reported: {e:#}", run_dir.display()));
        }
    }
    let mut summaries: Vec<Summary> = Vec::new();
    for dir in entries(&lab_dir).into_iter().filter(|p| p.join(RESULT_JSON).is_file()) {
        match read_result(&dir) {
            Ok(s) => summaries.push(s),
            Err(e) => broken.push(format!("{e:#}")),
        }
    }
    summaries.sort_by_key(|s| page::order_key(&s.scenario));
    let readme_path = lab_dir.join("README.md");
    write(&readme_path, page::render(&summaries, &broken))?;
    Ok(readme_path)
}

#[cfg(test)]
mod tests;
