//! `weights`: the rules' claims on the household budget, each case in the phases of
//! [`super::phases`]:
//! * `weights 1:3`: two background downloads of one LAN host under two rules, `weight = 1` and
//!   `weight = 3`; `weight_ratio` (bg-alone) = goodput of the second / the first (target 3);
//! * `min_rate 2mbit`: one background download under a rule with `min_rate = "2mbit"`, which it
//!   should keep beside best effort (`bg_goodput` in `together`, target ≥ 2 Mbit/s).
//!
//! Only the `household` alternative writes the shares into its rules (the only controller that
//! reads them); the others run the same rules without.

use anyhow::Result;

use super::phases::{run_mixes, Mix};
use super::{LabContext, ScenarioOptions};
use crate::alternatives::LabRule;
use crate::harness::BG_PORT;
use crate::result::{ScenarioReport, Target, Unit};

fn rule(name: &str, port: u16, key: &str, value: &str) -> LabRule {
    LabRule { name: name.into(), ports: vec![port], share: vec![(key.into(), value.into())] }
}

/// Runs the scenario.
pub fn run(ctx: &LabContext, opts: &ScenarioOptions) -> Result<ScenarioReport> {
    let mut weights = Mix::spread("weights 1:3", 2, 1, opts);
    for (f, name) in weights.flows.iter_mut().zip(["w1", "w3"]) {
        f.label = name.into();
    }
    weights.rules = vec![rule("w1", BG_PORT, "weight", "1"), rule("w3", BG_PORT + 1, "weight", "3")];
    weights.ratio = Some(("w1", "w3"));
    let ratio =
        ("w3 / w1 goodput, BG alone", Unit::Ratio, "weight_ratio", "bg-alone", Some(Target::about(3.0)));
    weights.rows = vec![ratio];
    let mut min_rate = Mix::spread("min_rate 2mbit", 1, 1, opts);
    min_rate.rules = vec![rule("min-rate", BG_PORT, "min_rate", "\"2mbit\"")];
    let kept = ("BG goodput beside BE", Unit::Mbps, "bg_goodput", "together", Some(Target::at_least(2.0)));
    min_rate.rows = vec![kept];
    let title = "weights: rules with weight 1 and 3, and a rule with min_rate 2mbit, beside best effort";
    run_mixes(ctx, opts, "weights", title, &[weights, min_rate])
}
