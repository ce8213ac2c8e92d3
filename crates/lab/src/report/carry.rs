//! Carrying scenarios over from the previous `docs/lab/README.md`.
//!
//! `slipstream-lab report` renders each scenario from its latest `result.json` under the results
//! directory. That directory is scratch space (gitignored, often on another machine), so
//! re-running one scenario on a fresh checkout would otherwise erase every other scenario from
//! the committed page. A scenario that has no run under the results directory therefore keeps
//! its part of the previous page verbatim, marked as carried over, with its plots left in place.
//!
//! The page is the one [`super::readme`] writes; its parts are found by the same markers it
//! writes: `- **name**:` in the per-scenario list, `| [name](#name) |` rows under a headline
//! table's header, `| name |` rows of the differences table, and `<a id="name"></a>` opening
//! the scenario's section (which runs to the next such anchor or the page's end).

/// Marks a carried-over scenario's line in the per-scenario list and its section.
pub const MARK: &str =
    "_Carried over from the previous report: this scenario's run is no longer under the results directory._";

/// One scenario's parts of a previous page.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CarriedScenario {
    pub scenario: String,
    /// Its line in the per-scenario list, marked.
    pub params: Option<String>,
    /// Its headline rows, each with the header (two lines: names and alignment) of its table.
    pub headline: Vec<(String, String)>,
    /// Its rows of the "not reached / differs from paper" table.
    pub differences: Vec<String>,
    /// Its section: the anchor line to the end of the section, marked.
    pub section: String,
}

/// The scenarios of `previous_page` not in `fresh` (the scenarios rendered anew), in page order.
pub fn carried_over(previous_page: &str, fresh: &[&str]) -> Vec<CarriedScenario> {
    let lines: Vec<&str> = previous_page.lines().collect();
    let mut found: Vec<CarriedScenario> = Vec::new();
    let entry = |found: &mut Vec<CarriedScenario>, name: &str| -> usize {
        match found.iter().position(|c| c.scenario == name) {
            Some(i) => i,
            None => {
                found.push(CarriedScenario {
                    scenario: name.to_string(),
                    ..Default::default()
                });
                found.len() - 1
            }
        }
    };
    let mut heading = "";
    let mut table_header: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(name) = anchor(line) {
            // The section runs to the next anchor or the page's end.
            let end = (i + 1..lines.len())
                .find(|&j| anchor(lines[j]).is_some())
                .unwrap_or(lines.len());
            let mut section = String::from(line);
            section.push_str("\n\n");
            if !lines[i + 1..end].iter().any(|l| l.trim() == MARK) {
                section.push_str(MARK);
                section.push_str("\n\n");
            }
            let body = lines[i + 1..end].join("\n");
            section.push_str(body.trim_matches('\n'));
            section.push_str("\n\n");
            let k = entry(&mut found, name);
            found[k].section = section;
            i = end;
            continue;
        }
        if line.starts_with("## ") {
            heading = line;
            table_header = None;
        } else if line.starts_with("| scenario |") && i + 1 < lines.len() {
            table_header = Some(format!("{line}\n{}", lines[i + 1]));
            i += 2;
            continue;
        } else if let Some(name) = list_entry(line) {
            let k = entry(&mut found, name);
            let mut params = line.to_string();
            if !params.contains(MARK) {
                params.push(' ');
                params.push_str(MARK);
            }
            found[k].params = Some(params);
        } else if heading == "## Headline" {
            if let (Some(name), Some(header)) = (headline_row(line), &table_header) {
                let k = entry(&mut found, name);
                found[k].headline.push((header.clone(), line.to_string()));
            }
        } else if heading.starts_with("## Not reached") {
            if let Some(name) = difference_row(line) {
                let k = entry(&mut found, name);
                found[k].differences.push(line.to_string());
            }
        }
        i += 1;
    }
    found.retain(|c| !fresh.contains(&c.scenario.as_str()) && !c.section.is_empty());
    found
}

/// `<a id="name"></a>` → `name`.
fn anchor(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix("<a id=\"")?
        .strip_suffix("\"></a>")
        .filter(|n| !n.is_empty())
}

/// `- **name**: ...` → `name`.
fn list_entry(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("- **")?;
    let (name, after) = rest.split_once("**")?;
    after.starts_with(':').then_some(name)
}

/// `| [name](#name) | ...` → `name`.
fn headline_row(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("| [")?;
    let (name, after) = rest.split_once("](#")?;
    after.starts_with(&format!("{name}) |")).then_some(name)
}

/// `| name | metric | ...` (a differences row, not its header) → `name`.
fn difference_row(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("| ")?;
    let (name, _) = rest.split_once(" | ")?;
    let plain = !name.is_empty()
        && name != "scenario"
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    plain.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# Slipstream lab results

Generated ...

## Testbed

Network namespaces ...

Per scenario:

- **alone**: 2026-11-23 09:06 UTC; 90 s.
- **cbr**: 2026-11-23 09:34 UTC; 90 s.

## Headline

| scenario | metric | unit | no-control | slipstream | paper |
|---|---|---|---:|---:|---|
| [alone](#alone) | utilization | ratio | 0.997 | 0.987 | 0.93 |
| [cbr](#cbr) | BE goodput | Mbit/s | 5.17 | 6.00 | 5.98 |

| scenario | metric | unit | kernel | nfq-accept | paper |
|---|---|---|---:|---:|---|
| [datapath](#datapath) | Packets/s | ratio | 1.000 | 0.338 | – |

## Not reached / differs from paper

Slipstream columns ...

| scenario | metric | alternative | measured | paper | verdict |
|---|---|---|---:|---|---|
| alone | BG goodput | slipstream-paper | 7.04 Mbit/s | 8.76 | worse (lower) |
| cbr | BE RTT | slipstream-paper | 159 ms | 146 | worse (higher) |

<a id=\"alone\"></a>

## alone: one background download alone

| metric | a |
|---|---|
| x | 1 |

![alone: goodput](alone/goodput.svg)

Run: `alone/20261123T090600Z` (under the results directory).

<a id=\"cbr\"></a>

## cbr: CBR beside

Run: `cbr/x`.

<a id=\"datapath\"></a>

## datapath

Run: `datapath/x`.
";

    #[test]
    fn takes_every_part_of_the_scenarios_not_run_anew() {
        let carried = carried_over(PAGE, &["cbr"]);
        let names: Vec<&str> = carried.iter().map(|c| c.scenario.as_str()).collect();
        assert_eq!(names, ["alone", "datapath"]);
        let alone = &carried[0];
        assert_eq!(
            alone.params.as_deref(),
            Some(format!("- **alone**: 2026-11-23 09:06 UTC; 90 s. {MARK}").as_str())
        );
        assert_eq!(alone.headline.len(), 1);
        assert!(alone.headline[0]
            .0
            .starts_with("| scenario | metric | unit | no-control |"));
        assert!(alone.headline[0].0.ends_with("\n|---|---|---|---:|---:|---|"));
        assert_eq!(
            alone.headline[0].1,
            "| [alone](#alone) | utilization | ratio | 0.997 | 0.987 | 0.93 |"
        );
        assert_eq!(
            alone.differences,
            ["| alone | BG goodput | slipstream-paper | 7.04 Mbit/s | 8.76 | worse (lower) |"]
        );
        assert!(alone
            .section
            .starts_with(&format!("<a id=\"alone\"></a>\n\n{MARK}\n\n## alone:")));
        assert!(alone.section.contains("![alone: goodput](alone/goodput.svg)"));
        assert!(alone.section.ends_with("(under the results directory).\n\n"));
        assert!(!alone.section.contains("cbr"));
        let datapath = &carried[1];
        assert!(datapath.headline[0].0.contains("| kernel | nfq-accept |"));
        assert!(datapath.differences.is_empty());
        assert!(datapath.params.is_none());
        assert!(datapath.section.ends_with("Run: `datapath/x`.\n\n"));
    }

    #[test]
    fn carrying_twice_marks_once() {
        let once = carried_over(PAGE, &[]);
        let params: Vec<String> = once.iter().filter_map(|c| c.params.clone()).collect();
        let sections: String = once.iter().map(|c| c.section.as_str()).collect();
        let page = format!("Per scenario:\n\n{}\n\n{sections}", params.join("\n"));
        let twice = carried_over(&page, &[]);
        assert_eq!(twice.len(), 3);
        assert_eq!(twice[0].params, once[0].params);
        assert_eq!(twice[0].section, once[0].section);
        assert_eq!(twice[0].section.matches(MARK).count(), 1);
    }

    #[test]
    fn nothing_from_an_empty_or_foreign_page() {
        assert!(carried_over("", &[]).is_empty());
        assert!(carried_over("# Some page\n\n| a | b |\n|---|---|\n| x | y |\n", &[]).is_empty());
    }
}
