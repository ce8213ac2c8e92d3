//! The engine's household rounds: when they run (inline, or deferred to the shell after each
//! batch), and the WAN counters they read.

use slipstream_control::Instant;

use super::{Engine, MAX_PENDING_UPDATES};
use crate::household::{run_round, LinkCounters, MemberRef};
use crate::stats::LinkDirection;

impl Engine {
    /// Household rounds run since start. A kernel datapath re-reads [`Engine::kernel_clamp`] of
    /// its household flows when this moves: a round may hold a flow or give it its turn before
    /// the flow's next ACK.
    pub fn household_rounds(&self) -> u64 {
        self.household_rounds
    }

    /// Runs the household rounds that are due now (`on_tick` also runs them, and so does
    /// `handle_packet` unless [`Engine::defer_rounds`] said otherwise).
    pub fn run_due_rounds(&mut self, now: Instant) {
        self.run_household(now);
    }

    /// With `true`, household rounds no longer run inside [`Engine::handle_packet`] (before the
    /// packet that found one due), only from [`Engine::run_due_rounds`] and [`Engine::on_tick`].
    /// A shell that handles packets in batches calls `run_due_rounds` after each batch's
    /// verdicts: no packet's verdict then waits for a round, and a round starts at most one
    /// batch late (a round lasts about one RTT). Default `false`: rounds run where they fall
    /// due, which is what a caller that never calls `run_due_rounds` needs.
    pub fn defer_rounds(&mut self, defer: bool) {
        self.rounds_deferred = defer;
    }

    /// Runs the household rounds that are due (see `household`).
    pub(super) fn run_household(&mut self, now: Instant) {
        if !self.household.due(now) {
            return;
        }
        let classes = &self.classes;
        let shares = |rule: u16| {
            classes
                .get(usize::from(rule).wrapping_sub(1))
                .map(|c| c.spec.share)
                .unwrap_or_default()
        };
        let mut updates = Vec::new();
        for which in 0..LinkDirection::ALL.len() {
            if self.household.link_due(which, now) {
                self.household_rounds += 1;
                let members = self
                    .table
                    .iter_mut()
                    .map(|(k, f)| (k, f as MemberRef))
                    .chain(self.udp.iter_mut().map(|(k, f)| (k, f as MemberRef)));
                run_round(&mut self.household, which, now, members, &shares, &mut updates);
            }
        }
        for update in updates {
            if self.window_updates.len() < MAX_PENDING_UPDATES {
                self.window_updates.push(update);
            }
        }
    }

    /// The router's WAN interface counters (all traffic over the access link, cumulative),
    /// downlink and uplink: best effort's traffic is what they count beyond the background's
    /// own packets. Give them often (every few milliseconds while packets flow): a round uses the
    /// latest.
    pub fn on_link_counters(&mut self, download: LinkCounters, upload: LinkCounters) {
        self.household.on_link_counters([download, upload]);
    }

    /// How many best-effort UDP flows the router's connection tracker sees sending steadily:
    /// calls and games, told from browsing beside them (see
    /// `slipstream_household::delay_target::steady_flows`). The shell says so after each dump.
    pub fn on_steady_flows(&mut self, count: usize) {
        self.household.steady_flows = count;
    }
}
