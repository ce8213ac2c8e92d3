//! A scenario's [`Summary`]: what the lab's page shows of its latest run, small enough to commit
//! as `docs/lab/<scenario>/result.json` beside the plots. The page is rendered from these files
//! alone, so re-running one scenario never needs the others' raw results (which stay in the
//! gitignored results directory).

use serde::{Deserialize, Serialize};

use super::figures::Plot;
use super::plot::tick;
use crate::result::{rfc3339, Cell, Row, ScenarioReport};

/// Between a merged summary's kept columns and the "how measured" of their run.
const EARLIER_RUN: &str = " from an earlier run: ";

/// At most this many notes are kept; the rest are counted in a last note.
const MAX_NOTES: usize = 20;

/// The summary of one scenario run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Summary {
    /// Scenario name ("alone", ...).
    pub scenario: String,
    /// Section title.
    pub title: String,
    /// The "how measured" sentence: date, link, durations, repeats, kernel, cc, command.
    pub how_measured: String,
    /// Table columns (alternatives, or datapath's modes).
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
    /// Repeats per alternative (cells are means over them when more than one).
    pub repeats: u32,
    /// Notes of the report and its runs (at most [`MAX_NOTES`], then a count of the rest).
    pub notes: Vec<String>,
    /// The plots beside this file.
    pub plots: Vec<PlotRef>,
    /// The run directory under the results directory (`alone/20261123T090622Z`).
    pub run: String,
}

/// A plot file beside the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlotRef {
    /// File name (`goodput.svg`).
    pub file: String,
    /// What it shows.
    pub title: String,
}

impl Summary {
    /// The summary of `report`, whose plots are `plots`, run directory `run`.
    pub fn of(report: &ScenarioReport, plots: &[Plot], run: &str) -> Summary {
        let mut notes = notes(report);
        if notes.len() > MAX_NOTES {
            let more = notes.len() - MAX_NOTES;
            notes.truncate(MAX_NOTES);
            notes.push(format!("… and {more} more (see result.json)"));
        }
        Summary {
            scenario: report.scenario.clone(),
            title: if report.title.is_empty() { report.scenario.clone() } else { report.title.clone() },
            how_measured: how_measured(report),
            columns: report.table.columns.clone(),
            rows: report.table.rows.clone(),
            repeats: repeats(report),
            notes,
            plots: plots.iter().map(|p| PlotRef { file: p.file.clone(), title: p.title.clone() }).collect(),
            run: run.to_string(),
        }
    }

    /// This (new) summary with the columns of `committed` that it lacks kept beside its own:
    /// a run of some alternatives (say, `household` alone) joins the page without re-running the
    /// others. Rows are matched by metric; the new run's columns come first, and "how measured"
    /// says which columns come from which run. Plots: `committed`'s, then this run's.
    pub fn merged_with(self, committed: Summary) -> Summary {
        let kept: Vec<usize> =
            (0..committed.columns.len()).filter(|&i| !self.columns.contains(&committed.columns[i])).collect();
        if kept.is_empty() {
            return self;
        }
        let kept_names: Vec<String> = kept.iter().map(|&i| committed.columns[i].clone()).collect();
        let old_cells = |row: Option<&Row>| -> Vec<Option<Cell>> {
            kept.iter().map(|&i| row.and_then(|r| r.cells.get(i).copied().flatten())).collect()
        };
        let width = self.columns.len();
        let mut rows: Vec<Row> = Vec::new();
        // The committed rows in their order, then rows only the new run has.
        for old in &committed.rows {
            let new = self.rows.iter().find(|r| r.metric == old.metric);
            let mut cells = new.map_or_else(|| vec![None; width], |r| r.cells.clone());
            cells.resize(width, None);
            cells.extend(old_cells(Some(old)));
            let paper = old.paper.clone().or_else(|| new.and_then(|r| r.paper.clone()));
            rows.push(Row { metric: old.metric.clone(), unit: old.unit, cells, paper });
        }
        for new in self.rows.iter().filter(|r| !committed.rows.iter().any(|o| o.metric == r.metric)) {
            let mut cells = new.cells.clone();
            cells.resize(width, None);
            cells.extend(old_cells(None));
            rows.push(Row { cells, ..new.clone() });
        }
        // Merged again over earlier columns that all came from one earlier run: name that run,
        // not the merge in between (which measured none of them).
        let earlier = match committed.how_measured.split_once(" Columns ") {
            Some((_, tail)) => match tail.split_once(EARLIER_RUN) {
                Some((names, text)) if kept_names.iter().all(|k| names.split(", ").any(|n| n == k)) => {
                    text.to_string()
                }
                _ => committed.how_measured.clone(),
            },
            None => committed.how_measured.clone(),
        };
        let mut plots = committed.plots;
        plots.retain(|p| !self.plots.iter().any(|n| n.file == p.file));
        plots.extend(self.plots);
        Summary {
            how_measured: format!(
                "{} Columns {}{EARLIER_RUN}{earlier}",
                self.how_measured,
                kept_names.join(", ")
            ),
            columns: self.columns.into_iter().chain(kept_names).collect(),
            rows,
            repeats: self.repeats.max(committed.repeats),
            notes: super::unique(self.notes.into_iter().chain(committed.notes))
                .into_iter()
                .take(MAX_NOTES + 1)
                .collect(),
            plots,
            ..self
        }
    }
}

/// Repeats per alternative: the highest repeat index, plus one (sub-cases such as web's seed
/// or datapath's round may follow the repeat; they do not divide it).
pub fn repeats(report: &ScenarioReport) -> u32 {
    report.runs.iter().map(|r| r.params.repeat + 1).max().unwrap_or(0)
}

/// `2023-11-14 22:13 UTC` for a Unix time.
pub fn date(unix: f64) -> String {
    let t = rfc3339(unix);
    format!("{} {} UTC", &t[..10], &t[11..16])
}

/// Distinct non-empty values joined by " / ", or "–".
fn distinct<T: ToString>(values: impl Iterator<Item = T>) -> String {
    let v = super::unique(values.map(|x| x.to_string()).filter(|s| !s.is_empty()));
    if v.is_empty() {
        super::markdown::MISSING.into()
    } else {
        v.join(" / ")
    }
}

/// The "how measured" sentence: date, rate, RTT, queue, duration, repeats, kernel, cc.
pub fn how_measured(report: &ScenarioReport) -> String {
    let runs = &report.runs;
    let started = report.started_unix;
    let date = if started > 0.0 { date(started) } else { super::markdown::MISSING.into() };
    let rate = distinct(runs.iter().map(|r| match r.params.upload_rate_mbit {
        Some(up) => format!("{}/{} Mbit/s", tick(r.params.rate_mbit), tick(up)),
        None => format!("{} Mbit/s", tick(r.params.rate_mbit)),
    }));
    let set = distinct(runs.iter().map(|r| format!("{} ms", tick(r.params.rtt_ms))));
    // Measured RTTs as their range, not one by one.
    let rtt = match crate::analysis::min_max(runs.iter().filter_map(|r| r.params.measured_rtt_ms)) {
        Some((lo, hi)) if hi - lo < 0.05 => format!("{set} (measured {lo:.1} ms)"),
        Some((lo, hi)) => format!("{set} (measured {lo:.1}–{hi:.1} ms)"),
        None => set,
    };
    let queue = distinct(
        runs.iter()
            .map(|r| format!("{} bytes ({:.0} packets)", r.params.queue_bytes, r.params.queue_packets)),
    );
    let duration = distinct(runs.iter().map(|r| format!("{} s", tick(r.params.duration_s))));
    let kernel = distinct(runs.iter().filter_map(|r| r.params.extra.get("kernel")?.as_str()));
    let cc = distinct(runs.iter().map(|r| r.params.cc.clone()));
    let command =
        if report.command.is_empty() { String::new() } else { format!(" Command: `{}`.", report.command) };
    // A scenario without a bottleneck (datapath) has no rate, RTT or queue to speak of.
    let link = if !runs.is_empty() && runs.iter().all(|r| r.params.rate_mbit <= 0.0) {
        "no bottleneck, no delay element".to_string()
    } else {
        format!("bottleneck {rate}, RTT {rtt}, queue {queue}")
    };
    format!(
        "{date}; {link}; {duration} per run, {} repeat(s) per alternative; kernel {kernel}; \
         sender cc {cc}.{command}",
        repeats(report)
    )
}

/// Notes of the report and of its runs (prefixed by alternative), each once.
pub fn notes(report: &ScenarioReport) -> Vec<String> {
    let runs = report.runs.iter().flat_map(|r| r.notes.iter().map(|n| format!("{}: {n}", r.alternative)));
    super::unique(report.notes.iter().cloned().chain(runs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(date(1_700_000_000.0), "2023-11-14 22:13 UTC");
    }
}
