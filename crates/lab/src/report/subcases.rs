//! Sub-cases of a scenario (on/off period, flow count, ...: the `params.extra` keys that vary
//! between runs) and the phase boundaries of a run.

use std::collections::{BTreeMap, BTreeSet};

use super::plot::Marker;
use crate::result::{RunResult, ScenarioReport};

/// The `params.extra` keys whose values differ between runs (or that some runs lack): the
/// sub-case dimensions (on/off period, flow count, ...). `kernel` and the phases are never
/// sub-cases, nor is a key whose value follows from the keys before it (fairness: `hosts` and
/// `stagger_s` follow from `flows`), so labels and file names name each sub-case once.
pub fn subcase_keys(report: &ScenarioReport) -> Vec<String> {
    let value = |r: &RunResult, k: &str| r.params.extra.get(k).map(|v| v.to_string()).unwrap_or_default();
    let keys: BTreeSet<&String> = report.runs.iter().flat_map(|r| r.params.extra.keys()).collect();
    let mut kept: Vec<String> = Vec::new();
    for k in keys.into_iter().filter(|k| *k != "kernel" && *k != "phases") {
        // The values of `k` beside each combination of the keys kept so far.
        let mut values: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
        for r in &report.runs {
            let by = kept.iter().map(|x| value(r, x)).collect();
            values.entry(by).or_default().insert(value(r, k));
        }
        if values.values().any(|v| v.len() > 1) {
            kept.push(k.clone());
        }
    }
    kept
}

/// `key=value, ...` of a run's sub-case (empty if the scenario has none).
pub fn subcase_label(run: &RunResult, keys: &[String]) -> String {
    let plain = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    let pairs = keys.iter().filter_map(|k| Some(format!("{k}={}", plain(run.params.extra.get(k)?))));
    pairs.collect::<Vec<_>>().join(", ")
}

/// Phase boundaries of a run, as vertical markers: `extra["phases"]`, an array of objects with
/// `name` and `start_s` (the first phase's start, t = 0, is not marked).
pub fn phase_markers(run: &RunResult) -> Vec<Marker> {
    let Some(serde_json::Value::Array(phases)) = run.params.extra.get("phases") else {
        return Vec::new();
    };
    let start = |p: &serde_json::Value| p.get("start_s").and_then(serde_json::Value::as_f64);
    let name = |p: &serde_json::Value| p.get("name").and_then(|v| v.as_str()).map(str::to_string);
    phases
        .iter()
        .filter(|p| start(p).is_some_and(|t| t.is_finite() && t > 0.0))
        .map(|p| Marker { at: start(p).unwrap_or(0.0), label: name(p) })
        .collect()
}

/// Runs grouped by sub-case (in first-seen order), each with the first repeat of every
/// alternative.
pub(super) fn groups(report: &ScenarioReport) -> Vec<(String, BTreeMap<String, &RunResult>)> {
    let keys = subcase_keys(report);
    let mut out: Vec<(String, BTreeMap<String, &RunResult>)> = Vec::new();
    for r in &report.runs {
        let label = subcase_label(r, &keys);
        let i = out.iter().position(|(l, _)| *l == label).unwrap_or_else(|| {
            out.push((label, BTreeMap::new()));
            out.len() - 1
        });
        let slot = out[i].1.entry(r.alternative.clone()).or_insert(r);
        if r.params.repeat < slot.params.repeat {
            *slot = r;
        }
    }
    out
}
