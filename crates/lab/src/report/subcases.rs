//! Sub-cases of a scenario (on/off period, flow count, ...: the `params.extra` keys that vary
//! between runs) and the phase boundaries of a run.

use std::collections::{BTreeMap, BTreeSet};

use super::plot::Marker;
use crate::result::{RunResult, ScenarioReport};

/// The `params.extra` keys whose values differ between runs: the sub-case dimensions (on/off
/// period, flow count, ...). `kernel` and the phases are never sub-cases, nor is a key
/// whose value follows from the keys before it (fairness: `hosts` and `stagger_s` follow from
/// `flows`), so labels and file names name each sub-case once.
pub fn subcase_keys(report: &ScenarioReport) -> Vec<String> {
    let mut kept: Vec<String> = Vec::new();
    for k in varying_keys(report) {
        let mut value_of: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
        for r in &report.runs {
            let by: Vec<String> = kept
                .iter()
                .map(|x| r.params.extra.get(x).map(|v| v.to_string()).unwrap_or_default())
                .collect();
            let v = r.params.extra.get(&k).map(|v| v.to_string()).unwrap_or_default();
            value_of.entry(by).or_default().insert(v);
        }
        let follows = !kept.is_empty() && value_of.values().all(|vals| vals.len() == 1);
        if !follows {
            kept.push(k);
        }
    }
    kept
}

/// The `params.extra` keys whose values differ between runs (or that some runs lack).
pub(super) fn varying_keys(report: &ScenarioReport) -> Vec<String> {
    let mut seen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for r in &report.runs {
        for (k, v) in &r.params.extra {
            if k == "kernel" || k == "phases" {
                continue;
            }
            seen.entry(k).or_default().insert(v.to_string());
        }
    }
    let n = report.runs.len();
    seen.into_iter()
        .filter(|(k, vals)| {
            vals.len() > 1 || report.runs.iter().filter(|r| r.params.extra.contains_key(*k)).count() < n
        })
        .map(|(k, _)| k.to_string())
        .collect()
}

/// `key=value, ...` of a run's sub-case (empty if the scenario has none).
pub fn subcase_label(run: &RunResult, keys: &[String]) -> String {
    keys.iter()
        .filter_map(|k| run.params.extra.get(k).map(|v| format!("{k}={}", json_plain(v))))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn json_plain(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
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
        if !out.iter().any(|(l, _)| *l == label) {
            out.push((label.clone(), BTreeMap::new()));
        }
        let group = out.iter_mut().find(|(l, _)| *l == label).map(|(_, g)| g);
        let slot = group.expect("pushed above").entry(r.alternative.clone()).or_insert(r);
        if r.params.repeat < slot.params.repeat {
            *slot = r;
        }
    }
    out
}
