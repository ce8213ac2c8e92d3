//! A plain Markdown rendering of a scenario's table: printed by `slipstream-lab` after each
//! scenario, and written as `table.md` when the report module (which renders the real
//! `table.md` and the plots) is not built in.

use crate::result::ScenarioReport;

/// Formats a value with a precision suited to its unit.
pub fn fmt_value(v: f64, unit: &str) -> String {
    match unit {
        "ratio" => format!("{v:.3}"),
        "bytes" | "packets" | "count" => format!("{v:.0}"),
        "ms" | "s" => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// `| metric | unit | alt1 | alt2 | ... | paper |` plus notes.
pub fn markdown_table(report: &ScenarioReport) -> String {
    let t = &report.table;
    let mut s = format!(
        "## {}\n\n",
        if report.title.is_empty() {
            &report.scenario
        } else {
            &report.title
        }
    );
    s.push_str("| metric | unit |");
    for c in &t.columns {
        s.push_str(&format!(" {c} |"));
    }
    s.push_str(" paper |\n|---|---|");
    for _ in &t.columns {
        s.push_str("---:|");
    }
    s.push_str("---|\n");
    for r in &t.rows {
        s.push_str(&format!("| {} | {} |", r.metric, r.unit));
        for (i, v) in r.values.iter().enumerate() {
            let cell = match (v, r.spread.get(i).copied().flatten()) {
                (Some(v), Some(sd)) => format!("{} ± {}", fmt_value(*v, &r.unit), fmt_value(sd, &r.unit)),
                (Some(v), None) => fmt_value(*v, &r.unit),
                (None, _) => "–".into(),
            };
            s.push_str(&format!(" {cell} |"));
        }
        let paper = match (&r.paper, &r.paper_source) {
            (Some(p), Some(src)) => format!("{p} ({src})"),
            (Some(p), None) => p.clone(),
            _ => "–".into(),
        };
        s.push_str(&format!(" {paper} |\n"));
    }
    if !report.notes.is_empty() {
        s.push('\n');
        for n in &report.notes {
            s.push_str(&format!("- {n}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Row, Table};

    #[test]
    fn renders() {
        let rep = ScenarioReport {
            scenario: "cbr".into(),
            table: Table {
                columns: vec!["no-control".into(), "slipstream".into()],
                rows: vec![Row {
                    metric: "BE goodput".into(),
                    unit: "Mbit/s".into(),
                    values: vec![Some(4.0), None],
                    spread: vec![Some(0.5), None],
                    paper: Some("5.98".into()),
                    paper_source: Some("Vulture Sec. 0.4.3".into()),
                    key: None,
                }],
            },
            notes: vec!["short run".into()],
            ..Default::default()
        };
        let md = markdown_table(&rep);
        assert!(
            md.contains("| metric | unit | no-control | slipstream | paper |"),
            "{md}"
        );
        assert!(
            md.contains("| BE goodput | Mbit/s | 4.00 ± 0.50 | – | 5.98 (Vulture Sec. 0.4.3) |"),
            "{md}"
        );
        assert!(md.contains("- short run"));
    }
}
