//! Markdown for one scenario: the "how measured" line, the summary table (alternatives side by
//! side, then the paper with its citation) and the rows where Slipstream differs from the paper.

use std::collections::BTreeSet;

#[cfg(test)]
use super::figures::paper_range;
use super::figures::{alternatives, parse_paper, Bound};
use crate::result::{timestamp_dirname, units, Row, RunResult, ScenarioReport};

/// The missing-value mark.
pub const MISSING: &str = "–";

/// A value with a precision suited to its unit: Mbit/s 2 decimals, ms 1 decimal below 100 and
/// none above, % 1 decimal, ratios 3 decimals, bytes / packets / counts as integers.
pub fn fmt_value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return MISSING.into();
    }
    let s = match unit {
        units::MBPS => format!("{v:.2}"),
        units::MS | units::S => {
            if v.abs() >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        }
        "%" | "us" | "µs" => format!("{v:.1}"),
        units::RATIO => format!("{v:.3}"),
        units::BYTES | units::PACKETS | units::COUNT => {
            if (v - v.round()).abs() < 1e-9 || v.abs() >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        }
        _ => {
            if v.abs() >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        }
    };
    if s == "-0" || s.starts_with("-0.") && s.trim_start_matches("-0.").chars().all(|c| c == '0') {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// A value and its unit as in running text: "5.98 Mbit/s", "93.3%", "0.986" (ratios bare).
pub fn with_unit(v: f64, unit: &str) -> String {
    let n = fmt_value(v, unit);
    match unit {
        "" | units::RATIO => n,
        "%" => format!("{n}%"),
        u => format!("{n} {u}"),
    }
}

/// `name` and `period` of a row's metric key (`"name/period"` or `"name"`).
fn split_key(key: &str) -> (&str, Option<&str>) {
    match key.rsplit_once('/') {
        Some((n, p)) => (n, Some(p)),
        None => (key, None),
    }
}

/// The per-repeat values behind cell `col` of `row`: the row's metric in the runs of that
/// alternative, taken from all of them or from the one sub-case (on/off period, flow count, ...)
/// whose mean is the cell's value. `None` if no such set is found.
pub fn repeat_values(report: &ScenarioReport, row: &Row, col: usize) -> Option<Vec<f64>> {
    let key = row.key.as_deref()?;
    let alt = report.table.columns.get(col)?;
    let mean = row.values.get(col).copied().flatten()?;
    let (name, period) = split_key(key);
    let keys = super::figures::subcase_keys(report);
    let mut sets: Vec<(String, Vec<f64>)> = vec![(String::from("\u{0}all"), Vec::new())];
    for r in report.runs_of(alt) {
        let Some(v) = r.metric(name, period).filter(|v| v.is_finite()) else {
            continue;
        };
        sets[0].1.push(v);
        let label = super::figures::subcase_label(r, &keys);
        match sets.iter_mut().skip(1).find(|(l, _)| *l == label) {
            Some((_, vals)) => vals.push(v),
            None => sets.push((label, vec![v])),
        }
    }
    sets.into_iter().map(|(_, v)| v).find(|v| {
        crate::analysis::mean(v.iter().copied())
            .is_some_and(|m| (m - mean).abs() <= 1e-9 * mean.abs().max(1.0))
    })
}

/// One table cell: the mean, with min–max over repeats when there are several (± standard
/// deviation when the repeats cannot be told apart), or [`MISSING`].
pub fn cell(report: &ScenarioReport, row: &Row, col: usize) -> String {
    let Some(v) = row.values.get(col).copied().flatten().filter(|v| v.is_finite()) else {
        return MISSING.into();
    };
    let mean = fmt_value(v, &row.unit);
    if let Some(vals) = repeat_values(report, row, col).filter(|v| v.len() > 1) {
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        return format!(
            "{mean} ({}–{})",
            fmt_value(lo, &row.unit),
            fmt_value(hi, &row.unit)
        );
    }
    match row.spread.get(col).copied().flatten() {
        Some(sd) if sd.is_finite() => format!("{mean} ± {}", fmt_value(sd, &row.unit)),
        _ => mean,
    }
}

/// The paper cell: value and citation, or [`MISSING`].
pub fn paper_cell(row: &Row) -> String {
    match (&row.paper, &row.paper_source) {
        (Some(p), Some(src)) if !src.is_empty() => format!("{p} ({src})"),
        (Some(p), _) => p.clone(),
        _ => MISSING.into(),
    }
}

fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Repeats per alternative (the largest count over alternatives and sub-cases).
pub fn repeats(report: &ScenarioReport) -> u32 {
    let mut seen: BTreeSet<(String, String, u32)> = BTreeSet::new();
    let keys = super::figures::subcase_keys(report);
    for r in &report.runs {
        seen.insert((
            r.alternative.clone(),
            super::figures::subcase_label(r, &keys),
            r.params.repeat,
        ));
    }
    let mut counts: std::collections::BTreeMap<(String, String), u32> = Default::default();
    for (a, s, _) in seen {
        *counts.entry((a, s)).or_default() += 1;
    }
    counts.values().copied().max().unwrap_or(0)
}

/// `2023-11-14 22:13 UTC` for a Unix time.
pub fn date(unix: f64) -> String {
    let t = timestamp_dirname(unix);
    // YYYYMMDDTHHMMSSZ
    if t.len() >= 15 {
        format!(
            "{}-{}-{} {}:{} UTC",
            &t[0..4],
            &t[4..6],
            &t[6..8],
            &t[9..11],
            &t[11..13]
        )
    } else {
        t
    }
}

fn distinct<T: ToString>(values: impl Iterator<Item = T>) -> String {
    let mut v: Vec<String> = Vec::new();
    for x in values {
        let s = x.to_string();
        if !s.is_empty() && !v.contains(&s) {
            v.push(s);
        }
    }
    if v.is_empty() {
        MISSING.into()
    } else {
        v.join(" / ")
    }
}

/// The kernel a run was measured on: `params.extra["kernel"]`, else a note mentioning it.
pub fn kernel(run: &RunResult) -> Option<String> {
    if let Some(k) = run.params.extra.get("kernel").and_then(|v| v.as_str()) {
        return Some(k.to_string());
    }
    run.notes
        .iter()
        .find_map(|n| n.strip_prefix("kernel ").or_else(|| n.strip_prefix("kernel: ")))
        .map(|k| k.trim().to_string())
}

/// The "how measured" line: date, rate, RTT, queue, duration, repeats, kernel, cc.
pub fn how_measured(report: &ScenarioReport) -> String {
    let runs = &report.runs;
    let started = if report.started_unix > 0.0 {
        report.started_unix
    } else {
        runs.iter().map(|r| r.started_unix).fold(f64::INFINITY, f64::min)
    };
    let date = if started.is_finite() && started > 0.0 {
        date(started)
    } else {
        MISSING.into()
    };
    let rate = distinct(
        runs.iter()
            .map(|r| format!("{} Mbit/s", super::plot::tick(r.params.rate_mbit))),
    );
    let rtt = distinct(runs.iter().map(|r| match r.params.measured_rtt_ms {
        Some(m) => format!("{} ms (measured {:.1} ms)", super::plot::tick(r.params.rtt_ms), m),
        None => format!("{} ms", super::plot::tick(r.params.rtt_ms)),
    }));
    let rtt = if runs.iter().filter_map(|r| r.params.measured_rtt_ms).count() > 1 {
        // Several measurements: show their range instead of listing each.
        let m: Vec<f64> = runs.iter().filter_map(|r| r.params.measured_rtt_ms).collect();
        let lo = m.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = m.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let set = distinct(
            runs.iter()
                .map(|r| format!("{} ms", super::plot::tick(r.params.rtt_ms))),
        );
        if hi - lo < 0.05 {
            format!("{set} (measured {lo:.1} ms)")
        } else {
            format!("{set} (measured {lo:.1}–{hi:.1} ms)")
        }
    } else {
        rtt
    };
    let queue = distinct(runs.iter().map(|r| {
        format!(
            "{} bytes ({:.0} packets)",
            r.params.queue_bytes, r.params.queue_packets
        )
    }));
    let duration = distinct(
        runs.iter()
            .map(|r| format!("{} s", super::plot::tick(r.params.duration_s))),
    );
    let kernel = distinct(runs.iter().filter_map(kernel));
    let cc = distinct(runs.iter().map(|r| r.params.cc.clone()));
    let command = if report.command.is_empty() {
        String::new()
    } else {
        format!(" Command: `{}`.", report.command)
    };
    // A scenario without a bottleneck (datapath) has no rate, RTT or queue to speak of.
    let link = if !runs.is_empty() && runs.iter().all(|r| r.params.rate_mbit <= 0.0) {
        "no bottleneck, no delay element".to_string()
    } else {
        format!("bottleneck {rate}, RTT {rtt}, queue {queue}")
    };
    format!(
        "How measured: {date}; {link}; {duration} per run, {} repeat(s) per alternative; \
         kernel {kernel}; sender cc {cc}.{command}",
        repeats(report)
    )
}

/// The summary table: `metric | unit | <alternatives> | paper`.
pub fn table(report: &ScenarioReport) -> String {
    let t = &report.table;
    if t.rows.is_empty() {
        return "_No summary rows: the scenario produced no table._\n".into();
    }
    let mut s = String::from("| metric | unit |");
    for c in &t.columns {
        s.push_str(&format!(" {} |", escape(c)));
    }
    s.push_str(" paper |\n|---|---|");
    for _ in &t.columns {
        s.push_str("---:|");
    }
    s.push_str("---|\n");
    for r in &t.rows {
        s.push_str(&format!("| {} | {} |", escape(&r.metric), escape(&r.unit)));
        for i in 0..t.columns.len() {
            s.push_str(&format!(" {} |", cell(report, r, i)));
        }
        s.push_str(&format!(" {} |\n", escape(&paper_cell(r))));
    }
    if repeats(report) > 1 {
        s.push_str("\nCells: mean over repeats (min–max).\n");
    }
    s
}

/// Notes of the report and (deduplicated) of its runs, prefixed by alternative.
pub fn notes(report: &ScenarioReport) -> Vec<String> {
    let mut out: Vec<String> = report.notes.clone();
    for r in &report.runs {
        for n in &r.notes {
            if n.starts_with("kernel") {
                continue;
            }
            let line = format!("{}: {n}", r.alternative);
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    out
}

/// How Slipstream's figure compares with the paper's, for one row and one column.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// The scenario.
    pub scenario: String,
    /// The row's metric.
    pub metric: String,
    /// The unit.
    pub unit: String,
    /// The column (alternative) compared.
    pub alternative: String,
    /// Measured value, `None` if not measured.
    pub measured: Option<f64>,
    /// The paper's text.
    pub paper: String,
    /// What went wrong: "not measured", "worse", "differs".
    pub verdict: &'static str,
}

/// Whether larger is better for a row (`None`: can't tell, e.g. a share).
pub fn higher_is_better(row: &Row) -> Option<bool> {
    let m = row.metric.to_lowercase();
    let lower_words = [
        "rtt", "delay", "latency", "response", "time", "loss", "drop", "queue", "error",
    ];
    let higher_words = [
        "goodput",
        "utiliz",
        "utilis",
        "jain",
        "fairness",
        "throughput",
        "correlation",
    ];
    if higher_words.iter().any(|w| m.contains(w)) && !m.contains("time") {
        return Some(true);
    }
    if lower_words.iter().any(|w| m.contains(w)) || row.unit == units::MS || row.unit == units::S {
        return Some(false);
    }
    None
}

/// Columns that are Slipstream (`slipstream`, `slipstream-paper`, ...).
pub fn slipstream_columns(report: &ScenarioReport) -> Vec<usize> {
    report
        .table
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.starts_with("slipstream"))
        .map(|(i, _)| i)
        .collect()
}

/// Rows where a Slipstream column misses the paper's figure: not measured, worse than the paper
/// beyond a tolerance (5% relative, or 0.02 for ratios), or, where the better direction is
/// unclear, off by more than 10%.
pub fn differences(report: &ScenarioReport) -> Vec<Difference> {
    let mut out = Vec::new();
    for row in &report.table.rows {
        let Some(paper) = row.paper.as_deref() else {
            continue;
        };
        let Some(pv) = parse_paper(paper) else {
            continue;
        };
        let (lo, hi) = (pv.lo, pv.hi);
        for col in slipstream_columns(report) {
            let measured = row.values.get(col).copied().flatten().filter(|v| v.is_finite());
            let tol_abs = if row.unit == units::RATIO { 0.02 } else { 0.0 };
            let tol = |x: f64, rel: f64| (x.abs() * rel).max(tol_abs);
            let verdict = match measured {
                None => Some("not measured"),
                Some(v) => match (pv.bound, higher_is_better(row)) {
                    (Bound::AtMost, _) if v > hi + tol(hi, 0.05) => Some("worse (higher)"),
                    (Bound::AtLeast, _) if v < lo - tol(lo, 0.05) => Some("worse (lower)"),
                    (Bound::About, Some(true)) if v < lo - tol(lo, 0.05) => Some("worse (lower)"),
                    (Bound::About, Some(false)) if v > hi + tol(hi, 0.05) => Some("worse (higher)"),
                    (Bound::About, None) if v < lo - tol(lo, 0.10) || v > hi + tol(hi, 0.10) => {
                        Some("differs")
                    }
                    _ => None,
                },
            };
            if let Some(verdict) = verdict {
                out.push(Difference {
                    scenario: report.scenario.clone(),
                    metric: row.metric.clone(),
                    unit: row.unit.clone(),
                    alternative: report.table.columns[col].clone(),
                    measured,
                    paper: paper_cell(row),
                    verdict,
                });
            }
        }
    }
    out
}

/// The Markdown section of one scenario. `plots` are `(relative link, title)` pairs.
pub fn scenario_section(report: &ScenarioReport, heading: &str, plots: &[(String, String)]) -> String {
    let title = if report.title.is_empty() {
        report.scenario.clone()
    } else {
        report.title.clone()
    };
    let mut s = format!("{heading} {}\n\n", escape(&title));
    s.push_str(&how_measured(report));
    s.push_str("\n\n");
    let alts = alternatives(report);
    if !alts.is_empty() {
        s.push_str(&format!("Alternatives: {}.\n\n", alts.join(", ")));
    }
    s.push_str(&table(report));
    let notes = notes(report);
    if !notes.is_empty() {
        s.push_str("\nNotes:\n\n");
        for n in notes.iter().take(20) {
            s.push_str(&format!("- {}\n", n.replace('\n', " ")));
        }
        if notes.len() > 20 {
            s.push_str(&format!("- … and {} more (see result.json)\n", notes.len() - 20));
        }
    }
    if !plots.is_empty() {
        s.push('\n');
        for (link, title) in plots {
            s.push_str(&format!("![{}]({link})\n\n", escape(title)));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_unit() {
        assert_eq!(fmt_value(5.976, units::MBPS), "5.98");
        assert_eq!(fmt_value(104.4, units::MS), "104");
        assert_eq!(fmt_value(4.44, units::MS), "4.4");
        assert_eq!(fmt_value(93.26, "%"), "93.3");
        assert_eq!(fmt_value(0.9861, units::RATIO), "0.986");
        assert_eq!(fmt_value(62500.0, units::BYTES), "62500");
        assert_eq!(fmt_value(-0.0001, units::MBPS), "0.00");
        assert_eq!(fmt_value(f64::NAN, units::MBPS), MISSING);
    }

    #[test]
    fn paper_ranges() {
        assert_eq!(paper_range("0.96"), Some((0.96, 0.96)));
        assert_eq!(paper_range("5.97–5.98"), Some((5.97, 5.98)));
        assert_eq!(paper_range("~2.84 Mbit/s"), Some((2.84, 2.84)));
        assert_eq!(paper_range("0.11 to 0.23"), Some((0.11, 0.23)));
        assert_eq!(paper_range("not reported"), None);
        assert_eq!(paper_range("consistent (Fig. 11)"), None);
        assert_eq!(paper_range("≈ 40"), Some((40.0, 40.0)));
        assert_eq!(paper_range("≈20"), Some((20.0, 20.0)));
        assert_eq!(paper_range("40%"), Some((40.0, 40.0)));
        assert_eq!(paper_range("146 ms (Fig. 16)"), Some((146.0, 146.0)));
        assert_eq!(paper_range("~0.9 binary search, ~0.7 stoch. approx."), None);
        assert_eq!(paper_range("≈1 (tracks changes)"), Some((1.0, 1.0)));
        let p = parse_paper("< 0").unwrap();
        assert_eq!((p.lo, p.bound), (0.0, Bound::AtMost));
        assert_eq!(parse_paper("≥ 0.9").map(|p| p.bound), Some(Bound::AtLeast));
        assert_eq!(super::super::figures::paper_number("0.11–0.23"), Some(0.17));
    }

    #[test]
    fn dates() {
        assert_eq!(date(1_700_000_000.0), "2023-11-14 22:13 UTC");
    }
}
