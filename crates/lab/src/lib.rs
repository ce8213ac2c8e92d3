//! Slipstream's evaluation lab: the Vulture paper's experiments (Li & Welzl 2017, Sec. 0.4;
//! `/work/shared/papers/vulture-li-welzl-2017.txt`) and a few of our own, run in network
//! namespaces against alternatives (no control, Slipstream, Vulture as in the paper, a fixed
//! window, HTB shaping), with JSON results ([`result`]) and Markdown tables.
//!
//! * [`result`]: the raw JSON schema (`ScenarioReport` / `RunResult` / `Series` / `Metric` / `Table`)
//!   with typed units, roles and paper figures.
//! * [`alternatives`]: what is compared and how it is set up on the router.
//! * [`scenarios`]: `LabContext`, `ScenarioOptions`, one module per scenario.
//! * [`harness`]: one run = topology + alternative + flows + samplers (100 ms).
//! * [`report`]: plots, the committed per-scenario summaries and `docs/lab/README.md`.
//! * [`measure`]: pure parsers (iperf3 intervals, ping lines, `ss -tin`).
//! * [`analysis`]: pure computations (Jain's index, utilization, time to 90%, errors).

pub mod alternatives;
pub mod analysis;
pub mod harness;
pub mod measure;
pub mod result;
pub mod scenarios;

pub mod report;
pub mod web;

pub use alternatives::Alternative;
pub use result::{Metric, Row, RunParams, RunResult, ScenarioReport, Series, Table};
pub use scenarios::{LabContext, ScenarioOptions};
