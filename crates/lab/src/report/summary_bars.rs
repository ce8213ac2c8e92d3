//! The summary table as grouped bars, one chart per unit (with the paper's figures in grey).

use anyhow::Result;

use super::bars::{BarGroup, Bars};
use super::figures::{alt_color, slug, Plot};
use super::plot::{Marker, PAPER_COLOR};
use crate::result::{Paper, ScenarioReport, Unit};

/// Grouped bars of the summary table, one chart per unit: one group per row, one bar per
/// alternative, plus the paper's value in grey where it gives a number (e.g. Jain's index per
/// flow count, normalized response time per size bucket).
pub fn table_bar_plots(report: &ScenarioReport) -> Result<Vec<Plot>> {
    let t = &report.table;
    let mut by_unit: Vec<(Unit, Vec<usize>)> = Vec::new();
    for (i, r) in t.rows.iter().enumerate() {
        match by_unit.iter_mut().find(|(u, _)| *u == r.unit) {
            Some((_, v)) => v.push(i),
            None => by_unit.push((r.unit, vec![i])),
        }
    }
    let mut plots = Vec::new();
    for (unit, rows) in by_unit {
        for (chunk_no, chunk) in rows.chunks(10).enumerate() {
            let part = if rows.len() > 10 {
                format!(" ({}/{})", chunk_no + 1, rows.len().div_ceil(10))
            } else {
                String::new()
            };
            let title = format!("{}: summary, {}{part}", report.scenario, unit_name(unit));
            let mut bars = Bars::new(&title, unit_axis(unit));
            bars.categories = chunk.iter().map(|&i| short(&t.rows[i].metric, 48)).collect();
            for (ci, col) in t.columns.iter().enumerate() {
                bars.groups.push(BarGroup {
                    label: col.clone(),
                    color: alt_color(ci),
                    values: chunk
                        .iter()
                        .map(|&i| t.rows[i].values.get(ci).copied().flatten())
                        .collect(),
                });
            }
            let paper: Vec<Option<f64>> = chunk
                .iter()
                .map(|&i| t.rows[i].paper.as_ref().and_then(Paper::midpoint))
                .collect();
            if paper.iter().any(Option::is_some) {
                bars.groups.push(BarGroup {
                    label: "paper".into(),
                    color: PAPER_COLOR,
                    values: paper,
                });
            }
            if unit == Unit::Ratio {
                let top = bars
                    .groups
                    .iter()
                    .flat_map(|g| g.values.iter().flatten())
                    .fold(1.0f64, |a, v| a.max(*v));
                bars.value_range = Some((0.0, top * 1.05));
                bars.refs.push(Marker::new(1.0, None));
            }
            let suffix = if rows.len() > 10 {
                format!("-{}", chunk_no + 1)
            } else {
                String::new()
            };
            let file = format!("summary-{}{suffix}.svg", slug(&unit_name(unit)));
            plots.push(Plot::bars(file, title, bars)?);
        }
    }
    Ok(plots)
}

pub(super) fn unit_name(unit: Unit) -> String {
    match unit {
        Unit::Percent => "percent".into(),
        Unit::Ratio => "ratios".into(),
        other => other.to_string(),
    }
}

pub(super) fn unit_axis(unit: Unit) -> String {
    match unit {
        Unit::Percent => "percent".into(),
        other => other.to_string(),
    }
}

pub(super) fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max - 1).collect();
        out.push('…');
        out
    }
}
