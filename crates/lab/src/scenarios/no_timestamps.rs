//! `no-timestamps`: household control of LAN hosts without TCP timestamps (Windows' default). The
//! Vulture controller needs timestamps, so `slipstream` leaves these flows unclamped; household
//! control measures them at the router instead. N background downloads (`--set flows=1,4`,
//! default 1) on min(N, 2) LAN hosts, best effort from a host of its own; every host runs
//! without timestamps. Phases and metrics: [`super::phases`].

use anyhow::Result;

use super::phases::{counts, run_mixes, Mix};
use super::{LabContext, ScenarioOptions};
use crate::result::ScenarioReport;

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let mixes: Vec<Mix> = counts(opts, "flows", "1")?
        .into_iter()
        .map(|n| {
            let mut m = Mix::spread(&format!("N = {n}"), n, n.min(2) as u8, opts);
            m.timestamps_off = (1..=m.be_host).collect();
            m
        })
        .collect();
    let title =
        "no-timestamps: background downloads of LAN hosts without TCP timestamps, alone and beside best effort";
    run_mixes(ctx, opts, "no-timestamps", title, &mixes)
}
