//! `many-flows`: N background downloads (`--set flows=4,16,64`) over H LAN hosts (H = N / 4
//! within 1-4), unevenly: host 1 runs one flow, the other hosts share the
//! rest, so the split shows whether each host gets its share or each flow does. One best-effort
//! download from a host of its own. Phases and metrics: [`super::phases`]; with many flows the
//! household budget falls below two segments a flow and flows take turns (time-sharing).

use anyhow::Result;

use super::phases::{counts, run_mixes, Mix};
use super::{LabContext, ScenarioOptions};
use crate::result::ScenarioReport;

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let list = counts(opts, "flows", "4,16,64")?;
    let mixes: Vec<Mix> = list
        .iter()
        .map(|&n| {
            let hosts = (n / 4).clamp(1, 4) as u8;
            let plural = if hosts == 1 { "" } else { "s" };
            Mix::spread(&format!("N = {n} over {hosts} host{plural}"), n, hosts, opts)
        })
        .collect();
    let title = format!(
        "many-flows: N = {list:?} background downloads of several LAN hosts beside one best-effort download"
    );
    run_mixes(ctx, opts, "many-flows", &title, &mixes)
}
