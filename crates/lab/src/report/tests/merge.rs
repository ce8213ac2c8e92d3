//! `slipstream-lab report --merge`.

use super::*;

/// `report --merge`: a run of one alternative joins the committed summary; the committed
/// columns it lacks stay, rows matched by metric, the new column first, plots side by side, and
/// "how measured" names each column's run. Without `--merge` the run replaces the summary.
#[test]
fn merge_keeps_the_committed_columns_a_run_lacks() {
    let root = temp_dir("gather-merge");
    let docs = root.join("docs");
    let first = root.join("first");
    write_scenario_outputs(&first.join("cbr/20231114T221320Z"), &cbr()).unwrap();
    gather(&first, &docs, Publish::Replace).unwrap();
    let committed: Summary = read_result(&docs.join("lab/cbr")).unwrap();
    assert!(committed.columns.len() >= 2, "{:?}", committed.columns);

    // A later run of the committed second column alone, every value changed.
    let only = committed.columns[1].clone();
    let mut fresh = cbr();
    fresh.started_unix = 1_731_622_400.0; // a year after the fixture's 2023-11-14 22:13 UTC
    fresh.runs.retain(|r| r.alternative == only);
    let at = fresh.table.columns.iter().position(|c| *c == only).unwrap();
    fresh.table.columns = vec![only.clone()];
    for row in &mut fresh.table.rows {
        let shifted = row.cells[at]
            .map(|c| Cell { mean: c.mean + 1000.0, range: c.range.map(|(a, b)| (a + 1000.0, b + 1000.0)) });
        row.cells = vec![shifted];
    }
    let second = root.join("second");
    write_scenario_outputs(&second.join("cbr/20241114T221320Z"), &fresh).unwrap();
    gather(&second, &docs, Publish::Merge).unwrap();
    let merged: Summary = read_result(&docs.join("lab/cbr")).unwrap();

    let mut expected_columns = vec![only.clone()];
    expected_columns.extend(committed.columns.iter().filter(|c| **c != only).cloned());
    assert_eq!(merged.columns, expected_columns);
    assert_eq!(merged.rows.len(), committed.rows.len());
    for (old, new) in committed.rows.iter().zip(&merged.rows) {
        assert_eq!(old.metric, new.metric);
        assert_eq!(old.paper, new.paper);
        for (i, c) in committed.columns.iter().enumerate() {
            let at = merged.columns.iter().position(|m| m == c).unwrap();
            let (was, now) = (old.cells[i], new.cells[at]);
            if *c == only {
                // The new run's value, not the committed one.
                assert_eq!(now.map(|x| x.mean), was.map(|x| x.mean + 1000.0), "{}", old.metric);
            } else {
                assert_eq!(now, was, "{} {c}", old.metric);
            }
        }
    }
    assert!(merged.how_measured.starts_with("2024-11-14 22:13 UTC"), "{}", merged.how_measured);
    assert!(
        merged.how_measured.contains(" from an earlier run: 2023-11-14 22:13 UTC"),
        "{}",
        merged.how_measured
    );
    assert_eq!(merged.run, "cbr/20241114T221320Z");
    // Both runs' plots, each file present.
    assert!(merged.plots.iter().any(|p| p.file == "goodput.svg"), "{:?}", merged.plots);
    assert!(merged.plots.iter().any(|p| p.file == format!("{only}-goodput.svg")), "{:?}", merged.plots);
    let page = std::fs::read_to_string(docs.join("lab/README.md")).unwrap();
    assert_linked_svgs_exist(&page, &docs);

    // Merged again: the earlier columns still name their own run, once.
    let again = root.join("again");
    fresh.started_unix += 86_400.0;
    write_scenario_outputs(&again.join("cbr/20241115T221320Z"), &fresh).unwrap();
    gather(&again, &docs, Publish::Merge).unwrap();
    let twice: Summary = read_result(&docs.join("lab/cbr")).unwrap();
    assert_eq!(twice.columns, merged.columns);
    assert!(twice.how_measured.starts_with("2024-11-15 22:13 UTC"), "{}", twice.how_measured);
    assert_eq!(twice.how_measured.matches("from an earlier run").count(), 1, "{}", twice.how_measured);
    assert!(twice.how_measured.ends_with(&committed.how_measured), "{}", twice.how_measured);

    // A run of two columns, one of them earlier: the two left still name their own run, not the
    // merges in between.
    let other = merged.columns[1].clone();
    let mut pair = cbr();
    pair.started_unix = fresh.started_unix + 86_400.0;
    pair.runs.retain(|r| r.alternative == only || r.alternative == other);
    let at: Vec<usize> =
        [&only, &other].iter().map(|c| pair.table.columns.iter().position(|x| x == *c).unwrap()).collect();
    pair.table.columns = vec![only.clone(), other.clone()];
    for row in &mut pair.table.rows {
        row.cells = at.iter().map(|&i| row.cells[i]).collect();
    }
    let fourth = root.join("fourth");
    write_scenario_outputs(&fourth.join("cbr/20241116T221320Z"), &pair).unwrap();
    gather(&fourth, &docs, Publish::Merge).unwrap();
    let thrice: Summary = read_result(&docs.join("lab/cbr")).unwrap();
    assert_eq!(thrice.columns.len(), committed.columns.len());
    assert!(thrice.how_measured.starts_with("2024-11-16 22:13 UTC"), "{}", thrice.how_measured);
    assert_eq!(thrice.how_measured.matches("from an earlier run").count(), 1, "{}", thrice.how_measured);
    assert!(thrice.how_measured.ends_with(&committed.how_measured), "{}", thrice.how_measured);

    // Replace drops the other columns.
    let third = root.join("third");
    write_scenario_outputs(&third.join("cbr/20251114T221320Z"), &fresh).unwrap();
    gather(&third, &docs, Publish::Replace).unwrap();
    let replaced: Summary = read_result(&docs.join("lab/cbr")).unwrap();
    assert_eq!(replaced.columns, vec![only]);
    let _ = std::fs::remove_dir_all(&root);
}
