//! Markdown for one scenario's [`Summary`]: the number formatter every table uses, the summary
//! table (alternatives side by side, then the paper with its citation) and the rows where
//! Slipstream differs from the paper.

use super::summary::Summary;
use crate::result::{Bound, Cell, Paper, Row, Unit};

/// The missing-value mark.
pub const MISSING: &str = "–";

/// A value with a precision suited to its unit: Mbit/s 2 decimals, ms and s 1 decimal below 100
/// and none above, us 1 decimal, ratios 3 decimals, bytes / packets / counts as integers.
pub fn fmt_value(v: f64, unit: Unit) -> String {
    if !v.is_finite() {
        return MISSING.into();
    }
    let s = match unit {
        Unit::Mbps => format!("{v:.2}"),
        Unit::Ms | Unit::S if v.abs() >= 100.0 => format!("{v:.0}"),
        Unit::Ms | Unit::S | Unit::Us => format!("{v:.1}"),
        Unit::Ratio => format!("{v:.3}"),
        Unit::Bytes | Unit::Packets | Unit::Count => {
            if (v - v.round()).abs() < 1e-9 || v.abs() >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        }
        Unit::PacketsPerS if v.abs() >= 100.0 => format!("{v:.0}"),
        Unit::PacketsPerS => format!("{v:.2}"),
    };
    // No "-0.00".
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

/// One table cell: "mean", "mean (min–max)", or [`MISSING`].
pub fn cell_text(cell: Option<&Cell>, unit: Unit) -> String {
    let Some(c) = cell else {
        return MISSING.into();
    };
    let mean = fmt_value(c.mean, unit);
    match c.range {
        Some((lo, hi)) => format!("{mean} ({}–{})", fmt_value(lo, unit), fmt_value(hi, unit)),
        None => mean,
    }
}

/// The paper cell: figure and citation, or [`MISSING`].
pub fn paper_cell(paper: Option<&Paper>) -> String {
    match paper {
        Some(p) if !p.source.is_empty() => format!("{} ({})", p.shown, p.source),
        Some(p) => p.shown.clone(),
        None => MISSING.into(),
    }
}

/// `s` safe inside a table cell.
pub fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A Markdown table: `header`, then `rows`, every cell escaped; the columns in `right`
/// (numbers) right-aligned.
pub fn grid(header: &[&str], right: std::ops::Range<usize>, rows: &[Vec<String>]) -> String {
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        format!("| {} |\n", cells.map(escape).collect::<Vec<_>>().join(" | "))
    };
    let mut s = line(&mut header.iter().copied());
    s.push('|');
    s.extend((0..header.len()).map(|i| if right.contains(&i) { "---:|" } else { "---|" }));
    s.push('\n');
    for r in rows {
        s.push_str(&line(&mut r.iter().map(String::as_str)));
    }
    s
}

/// A table row's cells: `lead` (if any), its metric and unit, `cells`, its paper figure.
pub fn row_cells(lead: Option<String>, row: &Row, cells: impl Iterator<Item = String>) -> Vec<String> {
    let named = lead.into_iter().chain([row.metric.clone(), row.unit.to_string()]);
    named.chain(cells).chain([paper_cell(row.paper.as_ref())]).collect()
}

/// The summary table: `metric | unit | <columns> | paper`.
pub fn table(summary: &Summary) -> String {
    if summary.rows.is_empty() {
        return "_No summary rows: the scenario produced no table._\n".into();
    }
    let cols = summary.columns.iter().map(String::as_str);
    let header: Vec<&str> = ["metric", "unit"].into_iter().chain(cols).chain(["paper"]).collect();
    let rows: Vec<Vec<String>> = summary
        .rows
        .iter()
        .map(|r| {
            let cells = (0..summary.columns.len())
                .map(|i| cell_text(r.cells.get(i).and_then(Option::as_ref), r.unit));
            row_cells(None, r, cells)
        })
        .collect();
    let mut s = grid(&header, 2..2 + summary.columns.len(), &rows);
    if summary.repeats > 1 {
        s.push_str("\nCells: mean over repeats (min–max).\n");
    }
    s
}

/// Whether larger is better for a row (`None`: can't tell, e.g. a share).
pub fn higher_is_better(row: &Row) -> Option<bool> {
    let m = row.metric.to_lowercase();
    let lower_words = ["rtt", "delay", "latency", "response", "time", "loss", "drop", "queue", "error"];
    let higher_words = ["goodput", "utiliz", "utilis", "jain", "fairness", "throughput", "correlation"];
    if higher_words.iter().any(|w| m.contains(w)) && !m.contains("time") {
        return Some(true);
    }
    if lower_words.iter().any(|w| m.contains(w)) || row.unit == Unit::Ms || row.unit == Unit::S {
        return Some(false);
    }
    None
}

/// The header of [`differences`]' rows.
const DIFFERENCES: [&str; 6] = ["scenario", "metric", "alternative", "measured", "paper", "verdict"];

/// Rows (as [`DIFFERENCES`] names their cells) where a Slipstream column misses the paper's
/// figure: not measured, worse than the paper beyond a tolerance (5% relative, or 0.02 for
/// ratios), or, where the better direction is unclear, off by more than 10%.
pub fn differences(summary: &Summary) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let slipstream = summary.columns.iter().enumerate().filter(|(_, c)| c.starts_with("slipstream"));
    let slipstream: Vec<(usize, &String)> = slipstream.collect();
    for row in &summary.rows {
        let Some(paper) = &row.paper else { continue };
        let Some(t) = paper.target else { continue };
        for &(col, alternative) in &slipstream {
            let measured = row.cells.get(col).copied().flatten().map(|c| c.mean);
            let tol_abs = if row.unit == Unit::Ratio { 0.02 } else { 0.0 };
            let tol = |x: f64, rel: f64| (x.abs() * rel).max(tol_abs);
            let (lo, hi) = (t.lo, t.hi);
            let verdict = match measured {
                None => "not measured",
                Some(v) => match (t.bound, higher_is_better(row)) {
                    (Bound::AtMost, _) if v > hi + tol(hi, 0.05) => "worse (higher)",
                    (Bound::AtLeast, _) if v < lo - tol(lo, 0.05) => "worse (lower)",
                    (Bound::About, Some(true)) if v < lo - tol(lo, 0.05) => "worse (lower)",
                    (Bound::About, Some(false)) if v > hi + tol(hi, 0.05) => "worse (higher)",
                    (Bound::About, None) if v < lo - tol(lo, 0.10) || v > hi + tol(hi, 0.10) => "differs",
                    _ => continue,
                },
            };
            let measured = match (measured, row.unit) {
                (None, _) => MISSING.into(),
                (Some(v), Unit::Ratio) => fmt_value(v, Unit::Ratio),
                (Some(v), unit) => format!("{} {unit}", fmt_value(v, unit)),
            };
            let cells = [&summary.scenario, &row.metric, alternative, &measured, &paper_cell(Some(paper))];
            out.push(cells.into_iter().cloned().chain([verdict.to_string()]).collect());
        }
    }
    out
}

/// The [`differences`] of one or more scenarios as a table; empty if none.
pub fn differences_table(rows: &[Vec<String>]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    grid(&DIFFERENCES, 3..4, rows)
}

/// The Markdown section of one scenario; plot links are prefixed with `link_prefix`.
pub fn scenario_section(summary: &Summary, heading: &str, link_prefix: &str) -> String {
    let mut s = format!("{heading} {}\n\n", escape(&summary.title));
    s.push_str(&format!("How measured: {}\n\n", summary.how_measured));
    s.push_str(&table(summary));
    if !summary.notes.is_empty() {
        s.push_str("\nNotes:\n\n");
        for n in &summary.notes {
            s.push_str(&format!("- {}\n", n.replace('\n', " ")));
        }
    }
    if !summary.plots.is_empty() {
        s.push('\n');
        for p in &summary.plots {
            s.push_str(&format!("![{}]({link_prefix}{})\n\n", escape(&p.title), p.file));
        }
    }
    s
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;
