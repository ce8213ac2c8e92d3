//! The lab's page, `docs/lab/README.md`, rendered from the scenarios' committed [`Summary`]s:
//! a link to the testbed, headline tables, what differs from the paper, each scenario.

use super::markdown;
use super::summary::Summary;
use crate::result::Row;

/// Scenario order on the page: the lab's order (`all`), then `smoke`, then anything else
/// alphabetically.
pub fn order_key(name: &str) -> (usize, String) {
    let pos = crate::scenarios::SCENARIOS.iter().position(|s| s.name == name).unwrap_or(usize::MAX);
    (pos, name.to_string())
}

/// The testbed is described once, in `docs/lab/about.md` beside the page.
const TESTBED: &str = "Network namespaces on one Linux host, the paper's topology and link in software: \
    see [about.md](about.md#testbed) (topology, offloads, buffers, and how the Vulture paper's \
    three machines differ).";

/// The rows a scenario shows in the headline, by row label: what a reader of the paper looks
/// for first (how much best effort keeps, how much spare the background flow uses, how fair,
/// how costly).
const HEADLINE: [(&str, &[&str]); 14] = [
    ("alone", &["utilization, whole run", "utilization, stable (2nd half)", "ping RTT beside BG, stable"]),
    ("cbr", &["BE goodput, BG active", "BE RTT (ping), BG active", "BG use of spare capacity"]),
    ("cwnd", &["reno: cwnd estimate bias", "cubic: estimate vs in-flight MARE"]),
    (
        "onoff",
        &["T = 5 s: BE on: BE BW share", "T = 5 s: BE off: LBE BW util.", "T = 30 s: BE off: LBE BW util."],
    ),
    ("fairness", &["N = 8: Jain's index", "N = 64: Jain's index"]),
    ("udp-square", &["BG usage / available, on/off = 5 s", "BG usage / available, on/off = 50 s"]),
    (
        "web",
        &[
            "Web response time, all objects / with plain TCP bulk (no-control)",
            "Web response time, p95 / web-only",
            "BG share of the link while web runs",
            "BG share of the capacity web leaves free",
        ],
    ),
    (
        "home",
        &[
            "web: p95 / without background",
            "video call, down: p95 one-way delay / without background",
            "game, up (30 Hz): p95 one-way delay / without background",
            "background download / capacity best effort leaves free",
            "background upload / capacity best effort leaves free",
            "TCP resets while measured",
        ],
    ),
    ("no-timestamps", &["N = 1: BE kept beside BG", "N = 1: BG alone / BE alone"]),
    (
        "many-flows",
        &[
            "N = 16 over 4 hosts: BE kept beside BG",
            "N = 16 over 4 hosts: host share ratio (max/min), BG alone",
            "N = 64 over 4 hosts: BE kept beside BG",
            "N = 64 over 4 hosts: Jain's index (host-fair), BG alone",
        ],
    ),
    ("weights", &["weights 1:3: w3 / w1 goodput, BG alone", "min_rate 2mbit: BG goodput beside BE"]),
    (
        "link",
        &[
            "rate halved 10 s, BE beside BG: BE / alone, min over seconds 2-10",
            "BG alone, rate halved: time until the queueing delay is under 10 ms",
            "BG alone, rate restored: time to 90% of the link",
            "BG alone, rate doubled: time to 90% of the new rate",
            "BG alone, base RTT +30 ms: longest run under 90% of the link (false yield)",
        ],
    ),
    (
        "both",
        &[
            "timestamps: BE download kept beside BG both ways",
            "timestamps: BE upload kept beside BG both ways",
            "timestamps: BG alone, download link delivered / BE alone's",
            "timestamps: BG alone, upload link delivered / BE alone's",
            "no timestamps: BE download kept beside BG both ways",
            "no timestamps: BE upload kept beside BG both ways",
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
pub fn headline_rows(summary: &Summary) -> Vec<&Row> {
    let rows = &summary.rows;
    let named: Vec<&Row> = HEADLINE
        .iter()
        .filter(|(scenario, _)| *scenario == summary.scenario)
        .flat_map(|(_, labels)| labels.iter())
        .filter_map(|l| rows.iter().find(|r| r.metric == *l))
        .collect();
    if !named.is_empty() {
        return named;
    }
    rows.iter().find(|r| r.paper.is_some()).or_else(|| rows.first()).into_iter().collect()
}

/// A headline table over `reports` (in page order), a column per alternative any of them has,
/// followed by a blank line.
fn headline_table(reports: &[&Summary]) -> String {
    let cols = super::unique(reports.iter().flat_map(|r| &r.columns).map(String::as_str));
    let header: Vec<&str> =
        ["scenario", "metric", "unit"].into_iter().chain(cols.iter().copied()).chain(["paper"]).collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in reports {
        let link = format!("[{0}](#{0})", r.scenario);
        for row in headline_rows(r) {
            let cells = cols.iter().map(|c| {
                let cell = r.columns.iter().position(|x| x == c).and_then(|i| row.cells.get(i)?.as_ref());
                markdown::cell_text(cell, row.unit)
            });
            rows.push(markdown::row_cells(Some(link.clone()), row, cells));
        }
    }
    markdown::grid(&header, 3..3 + cols.len(), &rows) + "\n"
}

/// The page over `summaries` (in page order); `broken` lists results that could not be read.
pub fn render(summaries: &[Summary], broken: &[String]) -> String {
    let mut s = String::from("# Slipstream lab results\n\n");
    s.push_str(
        "Generated by `slipstream-lab report` from each scenario's `result.json` beside its plots \
         under `docs/lab/<scenario>/` (the summary of its latest run); numbers are as measured, \
         including where they miss the paper.\n\n",
    );
    s.push_str("## Testbed\n\n");
    s.push_str(TESTBED);
    s.push_str("\n\n");

    // Headline tables: the scenarios that compare alternatives in one table (a column per
    // alternative); a scenario with columns of its own (datapath's modes) in a table of its own.
    s.push_str("## Headline\n\n");
    let labels: Vec<String> = crate::alternatives::Alternative::ALL.iter().map(|a| a.label()).collect();
    let compares = |r: &Summary| r.columns.iter().any(|c| labels.contains(c));
    let (shared, own): (Vec<&Summary>, Vec<&Summary>) = summaries.iter().partition(|r| compares(r));
    let mut tables: Vec<Vec<&Summary>> = own.into_iter().map(|r| vec![r]).collect();
    if !shared.is_empty() {
        tables.push(shared);
    }
    if tables.is_empty() {
        s.push_str("_No runs found._\n\n");
    }
    // Tables in the order of their first scenario.
    tables.sort_by_key(|t| order_key(&t[0].scenario));
    for t in tables {
        s.push_str(&headline_table(&t));
    }

    // Differences from the paper, all scenarios.
    let differences: Vec<Vec<String>> = summaries.iter().flat_map(markdown::differences).collect();
    s.push_str("## Not reached / differs from paper\n\n");
    if differences.is_empty() {
        s.push_str("Nothing: every Slipstream figure with a paper counterpart is within tolerance (worse by at most 5%, or 0.02 for ratios).\n\n");
    } else {
        s.push_str("Slipstream columns whose value is worse than the paper's by more than 5% (0.02 for ratios), differs by more than 10% where better/worse is not obvious, or was not measured:\n\n");
        s.push_str(&markdown::differences_table(&differences));
        s.push('\n');
    }
    if !broken.is_empty() {
        s.push_str("## Runs that could not be reported\n\n");
        for b in broken {
            s.push_str(&format!("- {b}\n"));
        }
        s.push('\n');
    }

    for r in summaries {
        s.push_str(&format!("<a id=\"{}\"></a>\n\n", r.scenario));
        let prefix = format!("{}/", r.scenario);
        s.push_str(&markdown::scenario_section(r, "##", &prefix));
        s.push_str(&format!("\nRun: `{}` (under the results directory).\n\n", r.run));
    }
    s
}
