//! The engine's snapshot: counters, rules and the busiest flows of both tables, for metrics,
//! `slipstream flows` and the live page.

use super::{Engine, Flow};
use crate::flow_key::FlowKey;
use crate::stats::{EngineSnapshot, FlowSnapshot, RuleSnapshot};
use crate::udp::UdpFlow;

impl Engine {
    /// A consistent picture for metrics and `slipstream flows`: counters, per-rule figures and the
    /// `top_flows` busiest flows by goodput (`usize::MAX`: every flow).
    ///
    /// `rules` lists the configured rules in config order (so `rules[n - 1]` is rule number n),
    /// then removed rules that still have (released) flows; [`Engine::configured_rules`] says
    /// where the first ones end. A flow's `rule` is its 1-based index into `rules`.
    pub fn snapshot(&self, top_flows: usize) -> EngineSnapshot {
        self.snapshot_keyed(top_flows).0
    }

    /// [`Engine::snapshot`] plus each listed flow's key (`keys[i]` is `flows[i]`'s), for views
    /// that show flows whose bulk direction is not known yet.
    pub fn snapshot_keyed(&self, top_flows: usize) -> (EngineSnapshot, Vec<FlowKey>) {
        let mut active = vec![0usize; self.classes.len()];
        for rule in self.flow_rules() {
            if let Some(n) = active.get_mut(usize::from(rule).wrapping_sub(1)) {
                *n += 1;
            }
        }
        let mut number = vec![0u16; self.classes.len()];
        let mut rules: Vec<RuleSnapshot> = Vec::with_capacity(self.classes.len());
        for (i, class) in self.classes.iter().enumerate() {
            if !class.configured && active[i] == 0 {
                continue;
            }
            rules.push(RuleSnapshot {
                name: class.spec.name.clone(),
                controller: class.spec.controller.kind(),
                active_flows: active[i],
                flows_started: class.counters.flows_started,
                acked_bytes: class.counters.acked_bytes,
                rewritten: class.counters.rewritten,
            });
            number[i] = rules.len() as u16;
        }
        /// A flow of either table, to rank them together.
        enum Listed<'a> {
            Tcp(&'a Flow),
            Udp(&'a UdpFlow),
        }
        let rate = |f: &Listed| match f {
            Listed::Tcp(f) => (f.goodput_bits_per_second(), f.acked_bytes()),
            Listed::Udp(f) => (f.goodput_bits_per_second(), f.forwarded_bytes()),
        };
        let mut busiest: Vec<(&FlowKey, Listed)> = self
            .table
            .iter()
            .map(|(k, f)| (k, Listed::Tcp(f)))
            .chain(self.udp.iter().map(|(k, f)| (k, Listed::Udp(f))))
            .collect();
        busiest.sort_by(|a, b| {
            rate(&b.1)
                .partial_cmp(&rate(&a.1))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        busiest.truncate(top_flows);
        let keys = busiest.iter().map(|(k, _)| **k).collect();
        let snapshot = EngineSnapshot {
            counters: self.counters.clone(),
            active_flows: self.active_flows(),
            max_flows: self.table.limits().max_flows,
            rules,
            flows: busiest
                .into_iter()
                .map(|(k, f)| {
                    let mut snap: FlowSnapshot = match f {
                        Listed::Tcp(f) => f.snapshot(k),
                        Listed::Udp(f) => f.flow_snapshot(k),
                    };
                    snap.rule = number
                        .get(usize::from(snap.rule).wrapping_sub(1))
                        .copied()
                        .unwrap_or(0);
                    snap
                })
                .collect(),
            links: self.household.snapshot(),
            steady_flows: self.household.steady_flows,
        };
        (snapshot, keys)
    }
}
