//! The JSON result schema every lab scenario writes, `<out>/<scenario>/<timestamp>/result.json`:
//! a [`ScenarioReport`] is one invocation (every alternative and repeat as [`RunResult`]s, plus the
//! summary [`Table`], one column per alternative, the paper's figure per row); a [`RunResult`] is
//! one alternative × repeat (× sub-case in `params.extra`) with its time [`Series`] (t in s since
//! the run's start) and scalar [`Metric`]s. Units, roles and paper figures are typed. Fields are
//! only ever added, with `#[serde(default)]` (an `Option` is `None` when missing anyway).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The unit of a [`Series`], [`Metric`] or [`Row`]; serialized as its symbol (`"Mbit/s"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Megabits per second (goodput, rates).
    #[serde(rename = "Mbit/s")]
    Mbps,
    /// Milliseconds (RTT, delays).
    Ms,
    /// Microseconds (datapath latency).
    Us,
    /// Seconds (times such as time-to-90%).
    S,
    /// Bytes (windows, sizes).
    Bytes,
    /// A dimensionless ratio (utilization, shares, Jain's index).
    #[default]
    Ratio,
    Packets,
    #[serde(rename = "packets/s")]
    PacketsPerS,
    /// A plain count (objects, flows that failed).
    Count,
}

/// The symbol (its serde name), as printed in tables and axis labels.
impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let symbol = serde_json::to_value(self).map_err(|_| std::fmt::Error)?;
        f.write_str(symbol.as_str().unwrap_or_default())
    }
}

/// The role of a flow in [`Series::role`]; serialized in snake case (`"best_effort"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A best-effort flow (matched by no rule; must not suffer).
    BestEffort,
    /// A background flow (classed background by the daemon's rules / HTB's low class).
    Background,
    /// Reverse-direction (upload) traffic that loads the ACK path.
    Reverse,
    /// A latency probe (ping on a best-effort path).
    Probe,
    /// The whole link / all flows together.
    #[default]
    Link,
}

/// As a legend says it: "best effort", "background", ... (its serde name, spaced).
impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = serde_json::to_value(self).map_err(|_| std::fmt::Error)?;
        f.write_str(&name.as_str().unwrap_or_default().replace('_', " "))
    }
}

/// How a paper's figure bounds ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// About this value or within this range ("0.96", "≈20", "5.97–5.98").
    About,
    /// At most ("< 0", "≤ 1.1").
    AtMost,
    /// At least ("≥ 0.93").
    AtLeast,
}

/// The number a paper figure asks of ours: `lo..=hi` (equal when not a range), bounded as `bound`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// How it bounds ours.
    pub bound: Bound,
    pub lo: f64,
    pub hi: f64,
}

impl Target {
    pub const fn about(v: f64) -> Target {
        Target { bound: Bound::About, lo: v, hi: v }
    }
    pub const fn at_most(v: f64) -> Target {
        Target { bound: Bound::AtMost, lo: v, hi: v }
    }
    pub const fn at_least(v: f64) -> Target {
        Target { bound: Bound::AtLeast, lo: v, hi: v }
    }
}

/// A paper's figure (or an issue's target) beside a row: as shown, what it asks as a number
/// (none for a note), and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paper {
    /// As shown in the table, e.g. "0.93", "≥ 0.93", "≈20 (regained ...)".
    pub shown: String,
    /// The number it asks of ours; `None` when it is a note that cannot be compared.
    pub target: Option<Target>,
    /// Where it comes from, e.g. "Vulture Sec. 0.4.4, Fig. 17".
    pub source: String,
}

impl Paper {
    /// A paper figure shown as `shown`.
    pub fn new(shown: impl Into<String>, target: Option<Target>, source: &str) -> Paper {
        Paper { shown: shown.into(), target, source: source.into() }
    }
    /// About `v`, shown with `decimals` decimals.
    pub fn about(v: f64, decimals: usize, source: &str) -> Paper {
        Paper::new(format!("{v:.decimals$}"), Some(Target::about(v)), source)
    }
    /// `target` shown plainly: "0.93", "≥ 0.93", "≤ 1.1" (shortest decimals).
    pub fn target(target: Target, source: &str) -> Paper {
        let shown = match target.bound {
            Bound::About if target.hi > target.lo => format!("{}–{}", target.lo, target.hi),
            Bound::About => format!("{}", target.lo),
            Bound::AtLeast => format!("≥ {}", target.lo),
            Bound::AtMost => format!("≤ {}", target.hi),
        };
        Paper::new(shown, Some(target), source)
    }
    /// A note with no number to compare.
    pub fn note(text: &str, source: &str) -> Paper {
        Paper::new(text, None, source)
    }
}

/// Topology and run parameters of one [`RunResult`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunParams {
    /// Bottleneck rate, Mbit/s (both directions, or the download's where `upload_rate_mbit` is
    /// set).
    pub rate_mbit: f64,
    /// The upload bottleneck's rate, Mbit/s, on an asymmetric link (`--up-rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_rate_mbit: Option<f64>,
    /// Base RTT set on the delay element, ms.
    pub rtt_ms: f64,
    /// Bottleneck queue limit, bytes (tbf `limit`; the download's where `upload_queue_bytes` is
    /// set).
    pub queue_bytes: u64,
    /// The upload bottleneck's queue limit, bytes, on an asymmetric link: one BDP at its own
    /// rate unless `--queue-bytes` was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_queue_bytes: Option<u64>,
    /// The same in full-size (1514-byte) frames, for reading convenience.
    pub queue_packets: f64,
    /// Measured base RTT (ping on the idle path before the run), ms.
    pub measured_rtt_ms: Option<f64>,
    /// Planned run length, s (after `--scale`).
    pub duration_s: f64,
    /// Sender congestion control of the TCP flows ("cubic", "reno", "bbr").
    pub cc: String,
    /// Repeat index, 0-based.
    pub repeat: u32,
    /// Scenario-specific parameters (e.g. `"on_off_T_s": 5`, `"flows": 8`).
    #[serde(default)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl RunParams {
    /// The upload bottleneck's rate, Mbit/s (`rate_mbit` where symmetric).
    pub fn upload_rate(&self) -> f64 {
        self.upload_rate_mbit.unwrap_or(self.rate_mbit)
    }
}

/// One time series of a run, e.g. the goodput of the background flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Series {
    /// What is measured: `goodput`, `rtt`, `cwnd`, `cwnd_estimate`, `rwnd`, `piv_sum`,
    /// `ss_rtt`, `inflight`, ... (see the harness samplers and the scenario docs).
    pub name: String,
    /// Unit of the values.
    pub unit: Unit,
    /// Which flow: a short label unique within the run ("be", "bg", "bg3", "rev", "ping").
    pub flow: String,
    pub role: Role,
    /// Where it was measured: "receiver", "sender-ss", "daemon", "ping", ...
    #[serde(default)]
    pub source: String,
    /// `(t, value)`: t in seconds since the run's t = 0, ascending; or `(x, value)` when
    /// [`Series::x`] says what x is instead of time.
    pub points: Vec<(f64, f64)>,
    /// What x is when it is not time (e.g. "object size bytes").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
}

impl Series {
    /// A new empty series.
    pub fn new(name: &str, unit: Unit, flow: &str, role: Role, source: &str) -> Series {
        let (name, flow, source) = (name.into(), flow.into(), source.into());
        Series { name, unit, flow, role, source, ..Series::default() }
    }

    /// With x meaning `what` instead of time.
    pub fn over(mut self, what: &str) -> Series {
        self.x = Some(what.into());
        self
    }

    pub fn with_points(mut self, points: Vec<(f64, f64)>) -> Series {
        self.points = points;
        self
    }

    /// Mean of the values with `t0 <= t < t1` (time-unweighted), `None` if there are none.
    pub fn mean_between(&self, t0: f64, t1: f64) -> Option<f64> {
        crate::analysis::mean_between(&self.points, t0, t1)
    }
}

/// One scalar result of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Metric {
    /// Name, e.g. `be_goodput`, `utilization_stable`, `time_to_90pct`, `jain_index`.
    pub name: String,
    pub unit: Unit,
    pub value: f64,
    /// The period it covers, if not the whole run: e.g. "before", "bg-active", "after",
    /// "on", "off", "stable".
    pub period: Option<String>,
    /// The flow it is about, if one ("be", "bg", ...).
    pub flow: Option<String>,
}

impl Metric {
    /// A metric over the whole run.
    pub fn new(name: &str, unit: Unit, value: f64) -> Metric {
        Metric { name: name.into(), unit, value, period: None, flow: None }
    }

    pub fn period(mut self, period: &str) -> Metric {
        self.period = Some(period.into());
        self
    }

    pub fn flow(mut self, flow: &str) -> Metric {
        self.flow = Some(flow.into());
        self
    }
}

/// One alternative × one repeat (× one sub-case) of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunResult {
    /// Scenario name ("alone", "cbr", ...).
    pub scenario: String,
    /// Alternative label as on the command line ("no-control", "slipstream", "htb-90", ...).
    pub alternative: String,
    /// Wall-clock start, Unix seconds.
    pub started_unix: f64,
    pub params: RunParams,
    pub series: Vec<Series>,
    pub metrics: Vec<Metric>,
    /// Free-text notes (warnings, what was skipped).
    #[serde(default)]
    pub notes: Vec<String>,
    /// When each flow instance carried data (a label started several times has several).
    #[serde(default)]
    pub flow_spans: Vec<FlowSpan>,
}

/// The time one flow instance carried data: from the start of its first goodput interval to the
/// end of its last, s since the run's t = 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct FlowSpan {
    pub flow: String,
    pub start_s: f64,
    pub end_s: f64,
}

impl RunResult {
    /// The spans of flow `flow`, in start order.
    pub fn spans(&self, flow: &str) -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> =
            self.flow_spans.iter().filter(|s| s.flow == flow).map(|s| (s.start_s, s.end_s)).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    }

    /// The value of metric `name` for `period` (`None` = whole run), first match.
    pub fn metric(&self, name: &str, period: Option<&str>) -> Option<f64> {
        self.metrics.iter().find(|m| m.name == name && m.period.as_deref() == period).map(|m| m.value)
    }

    /// The series `name` of flow `flow`.
    pub fn series(&self, name: &str, flow: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.name == name && s.flow == flow)
    }
}

/// One row of the summary table (also a row of the committed summary, `crate::report::Summary`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Row {
    /// Human-readable metric name, e.g. "BE goodput, background active".
    pub metric: String,
    pub unit: Unit,
    /// One cell per entry of [`Table::columns`]; `None` = not measured.
    pub cells: Vec<Option<Cell>>,
    /// The paper's figure, `None` if it reports none.
    pub paper: Option<Paper>,
}

/// One table cell: the mean over repeats, with their range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Mean over repeats.
    pub mean: f64,
    /// Lowest and highest repeat, when there are several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<(f64, f64)>,
}

/// The summary table of a scenario: alternatives side by side, plus the paper's values.
///
/// Rendered as: `metric | unit | columns[0] | columns[1] | ... | paper`. `columns` are the
/// alternative labels (the paper column is not in it: it comes from [`Row::paper`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Table {
    /// Column headers: alternative labels, in run order.
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
}

/// A row to aggregate into a [`Table`] ([`Table::add_rows`]): label, unit, the metric's name and
/// period, the paper's figure.
#[derive(Debug, Clone)]
pub struct RowSpec {
    label: String,
    unit: Unit,
    name: String,
    period: Option<String>,
    paper: Option<Paper>,
}

impl RowSpec {
    /// The row `label` (in `unit`) of metric `name`, whole run, no paper figure.
    pub fn new(label: impl Into<String>, unit: Unit, name: impl Into<String>) -> RowSpec {
        RowSpec { label: label.into(), unit, name: name.into(), period: None, paper: None }
    }

    pub fn period(mut self, period: &str) -> RowSpec {
        self.period = Some(period.into());
        self
    }

    pub fn paper(mut self, paper: impl Into<Option<Paper>>) -> RowSpec {
        self.paper = paper.into();
        self
    }
}

impl Table {
    /// A table over `columns` with `rows` aggregated from `runs`.
    pub fn of(columns: Vec<String>, runs: &[RunResult], rows: impl IntoIterator<Item = RowSpec>) -> Table {
        let mut t = Table::new(columns);
        t.add_rows(&runs.iter().collect::<Vec<_>>(), rows);
        t
    }

    /// An empty table with these alternative columns.
    pub fn new(columns: Vec<String>) -> Table {
        Table { columns, rows: Vec::new() }
    }

    /// The machine's rows, each where any of `runs` measured it: the share of the CPU time the
    /// hypervisor stole while each ran (`cpu_stolen`, see `harness::machine`) and how late the
    /// testbed's delay element released packets (`path_lateness`, `path_late_share`, see
    /// `slipstream_testbed::delay_stats`): the first things to read before comparing two
    /// columns. `case` prefixes the labels ("case: machine: ...").
    pub fn add_machine_rows(&mut self, runs: &[&RunResult], case: Option<&str>) {
        let rows = [
            ("machine: CPU time stolen by the hypervisor", Unit::Ratio, "cpu_stolen"),
            ("machine: the delay element's lateness, mean", Unit::Ms, "path_lateness"),
            ("machine: packets the delay element released > 1 ms late", Unit::Ratio, "path_late_share"),
        ];
        for (what, unit, name) in rows {
            if runs.iter().any(|r| r.metric(name, None).is_some()) {
                let label = case.map_or(what.to_string(), |c| format!("{c}: {what}"));
                self.add_rows(runs, [RowSpec::new(label, unit, name)]);
            }
        }
    }

    /// Adds a row per spec, aggregating its metric of `runs` per column (mean and range over the
    /// runs of that alternative that have it).
    pub fn add_rows(&mut self, runs: &[&RunResult], rows: impl IntoIterator<Item = RowSpec>) {
        for spec in rows {
            let cell = |col: &String| {
                let v: Vec<f64> = runs
                    .iter()
                    .filter(|r| &r.alternative == col)
                    .filter_map(|r| r.metric(&spec.name, spec.period.as_deref()))
                    .filter(|v| v.is_finite())
                    .collect();
                let range = crate::analysis::min_max(v.iter().copied()).filter(|_| v.len() > 1);
                Some(Cell { mean: crate::analysis::mean(v)?, range })
            };
            let cells = self.columns.iter().map(cell).collect();
            self.rows.push(Row { metric: spec.label, unit: spec.unit, cells, paper: spec.paper });
        }
    }
}

/// Everything one scenario invocation produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ScenarioReport {
    /// Scenario name ("alone", "cbr", "cwnd", "onoff", "fairness", "smoke", "web", ...).
    pub scenario: String,
    /// One-line description of what was run.
    #[serde(default)]
    pub title: String,
    /// Wall-clock start, Unix seconds.
    #[serde(default)]
    pub started_unix: f64,
    /// Every run (alternative × repeat × sub-case).
    pub runs: Vec<RunResult>,
    pub table: Table,
    /// Free-text notes (deviations from the paper setup, caveats).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The `slipstream-lab` command line that produced it (empty when run from a test).
    #[serde(default)]
    pub command: String,
}

impl ScenarioReport {
    /// The report of `scenario` started now, without runs yet.
    pub fn starting(scenario: &str) -> ScenarioReport {
        ScenarioReport { scenario: scenario.into(), started_unix: now_unix(), ..Default::default() }
    }

    /// Runs of the sub-case whose `params.extra[key]` is `value`.
    pub fn runs_with(&self, key: &str, value: impl Into<serde_json::Value>) -> Vec<&RunResult> {
        let value = Some(value.into());
        self.runs.iter().filter(|r| r.params.extra.get(key) == value.as_ref()).collect()
    }
}

/// Current time as Unix seconds.
pub fn now_unix() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// RFC 3339 in UTC, to the second, for a Unix time (`2023-11-14T22:13:20Z`; humantime).
pub fn rfc3339(unix: f64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(unix.max(0.0).floor());
    humantime::format_rfc3339_seconds(t).to_string()
}

/// `YYYYMMDDTHHMMSSZ` (UTC) for a Unix time: the run directory name.
pub fn timestamp_dirname(unix: f64) -> String {
    rfc3339(unix).replace(['-', ':'], "")
}

#[cfg(test)]
#[path = "result_tests.rs"]
mod tests;
