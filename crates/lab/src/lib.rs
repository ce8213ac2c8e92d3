//! Slipstream's evaluation lab: the Vulture paper's experiments (Li & Welzl 2017, Sec. 0.4;
//! `/work/shared/papers/vulture-li-welzl-2017.txt`) and a few of our own, run in network
//! namespaces against alternatives (no control, Slipstream, Vulture as in the paper, a fixed
//! window, HTB shaping), with JSON results ([`result`]) and Markdown tables.
//!
//! [`scenarios`] run [`harness`] runs (topology + [`alternatives`] + flows + 100 ms samplers)
//! into [`result`] reports; [`analysis`] holds the pure computations, [`report`] the plots and
//! `docs/lab/README.md`. Full description: docs/lab/about.md.

pub mod alternatives;
pub mod analysis;
pub mod harness;
pub mod result;
pub mod scenarios;

pub mod report;
pub mod web;

pub use alternatives::Alternative;
pub use result::{Metric, Row, RunParams, RunResult, ScenarioReport, Series, Table};
pub use scenarios::{LabContext, ScenarioOptions};
