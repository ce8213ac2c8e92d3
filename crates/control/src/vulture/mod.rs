//! Vulture (Li & Welzl 2017, `shared/papers/vulture-li-welzl-2017.txt`): a receiver-side
//! less-than-best-effort controller that steers a flow's rate through the receive window, run
//! here on the router between the access bottleneck and the receiving host.
//!
//! This module is the glue: configuration, the per-flow [`Vulture`] state, and the order in which
//! the algorithm steps run. One step per file:
//! * `piv` — Alg. 1, PIV measurement with the PSI filter;
//! * `epoch` — Alg. 2 and Alg. 3, per-RTT PIV analysis and the conservative/aggressive mode;
//! * `policy` — Alg. 4, the rwnd moderation policy and `rwndThresh`;
//! * `window` — Alg. 5, applying the policy per ACK;
//! * `cwnd_estimate` — Alg. 6, the sender's cwnd from TSecr.
//!
//! # Life of a flow
//! 1. **Warmup.** Until the engine knows the sender's TSval clock and has an RTT sample, Vulture
//!    leaves the flow alone (`on_ack` returns `None`, mode "warmup"), but already runs Alg. 6.
//! 2. **Turning LBE** (the paper's BE → LBE switch, Sec. 0.3.5, Fig. 13) on the first ACK once
//!    both are known: rwnd := max(cwnd estimate, 2·MSS), policy fix, mode conservative. The
//!    switch is a policy change, so the pause below starts with it.
//! 3. **Epochs.** An epoch starts at the first data arrival after a pause ends and completes at
//!    the first data arrival at least one RTT (`FlowContext::rtt`) after its start. The completing
//!    segment's PIV is *not* part of the completed epoch: that segment starts the next epoch and
//!    its PIV is the first of it (if the analysis changed the policy, a pause starts instead and
//!    the PIV is discarded). At completion Alg. 2-3 pick the mode and counts and Alg. 4 the policy.
//! 4. **Pause** (Sec. 0.3.3, after Alg. 4): after a policy change Vulture "stops analyzing PIVs
//!    until it receives the first data packet that reflects the new policy". The first ACK sent
//!    after the change carries the new window; its receiver TSval is recorded, and the pause ends
//!    at the first data segment whose TSecr is at or after that TSval (serial comparison). That
//!    segment starts the next epoch. If that ACK has no TSval, the pause ends with the first data
//!    segment at least one RTT after the ACK. During the pause PIVs are discarded and no epoch
//!    runs. A policy decided again unchanged is not a change and does not pause.
//! 5. **Loss.** A data segment flagged out-of-order or an ACK reporting a SACK hole sets halve
//!    immediately (Alg. 4, last line); entering halve records `rwndThresh`, and it is a policy
//!    change like any other (pause).
//!
//! Every step runs on a packet, with the packet's time as `now`; Vulture has no use for the
//! engine's timer (`on_tick`). The one-RTT waits above end on the next data segment, not at a
//! time: nothing can be measured before it arrives, since PIVs come only with data.
//!
//! # Behaviour worth knowing (faithful to the paper, seen in the simulation test)
//! Alg. 3 classifies by |PIV|, so a large *negative* PIV (a queue draining) is "high" as well.
//! After a halve drains the queue, the segments still in Alg. 1's queue from the congested period
//! pair with the sparse later ones and yield PIVs of minus the drained delay; the epochs keep
//! deciding halve until those heads are used up, and rwnd can reach 2·MSS before doubling again.
//!
//! # Memory
//! A flow entry must stay under 1 KiB, so nothing here grows with the flow's rate: Alg. 1's packet
//! queue is a 16-entry ring (`PIV_RING`), Alg. 2-3 count instead of storing PIVs, Alg. 6's ack
//! queue is a 16-entry ring (`ACK_RING`), and the configuration is stored as microseconds.
//! `size_of::<Vulture>()` is asserted in the tests.

mod cwnd_estimate;
mod delay_guard;
mod epoch;
mod piv;
mod policy;
mod window;

#[cfg(test)]
mod tests;

pub use cwnd_estimate::ACK_RING;
pub use epoch::Mode;
pub use piv::{round_piv, PIV_RING};
pub use policy::Policy;
pub use window::MAX_RWND;

use crate::controller::{AckSample, Controller, ControllerStats, DataSample, EpochSummary, FlowContext};
use crate::time::{seq_lt, Duration, Instant};
use cwnd_estimate::CwndEstimator;
use epoch::{EpochAccumulator, Thresholds};
use piv::PivMeter;
use policy::PolicyState;
use window::Window;

/// Vulture's parameters. Defaults are the paper's (Sec. 0.3; jiffy = 4 ms).
#[derive(Clone, Debug, PartialEq)]
pub struct VultureConfig {
    /// Alg. 1 PSI: minimum sender-side spacing of a packet pair (paper: 5 jiffies = 20 ms).
    pub psi: Duration,
    /// Resolution PIVs are rounded to before Alg. 2-3 (the paper's jiffy, 4 ms); zero disables
    /// rounding.
    pub piv_resolution: Duration,
    /// Alg. 3 cLow (1 jiffy = 4 ms).
    pub conservative_low: Duration,
    /// Alg. 3 cHigh (2 jiffies = 8 ms).
    pub conservative_high: Duration,
    /// Alg. 3 aLow (3 jiffies = 12 ms).
    pub aggressive_low: Duration,
    /// Alg. 3 aHigh (5 jiffies = 20 ms).
    pub aggressive_high: Duration,
    /// Alg. 4 alpha (7/8).
    pub alpha: f64,
    /// Slipstream's queueing-delay guard on Alg. 4 (see `delay_guard`); `None` is the paper's
    /// Vulture.
    pub queue_delay_limit: Option<Duration>,
    /// Alg. 3 counts a large negative PIV (a draining queue) as high, as the paper does (`true`);
    /// Slipstream's variant counts it as middle (`false`), see `epoch`.
    pub draining_is_congestion: bool,
    /// Slipstream's variant: each decision doubles or halves rwnd at most once (`true`); the
    /// paper's per-ACK rule keeps going while a decision stays in force (`false`), see `window`.
    pub bounded_steps: bool,
    /// Slipstream's variant: double and increase grow rwnd only while the sender uses at least
    /// half of it (Alg. 6's cwnd estimate, the bytes it sent in the last round), as RFC 7661
    /// validates a sender's cwnd. Without it (`false`, the paper) rwnd keeps growing while the
    /// sender is limited by its own cwnd, the application or the host's window, far above the
    /// window in force, and then takes many RTTs to come down once it binds.
    pub validated_growth: bool,
}

impl Default for VultureConfig {
    fn default() -> Self {
        VultureConfig {
            psi: Duration::from_millis(20),
            piv_resolution: Duration::from_millis(4),
            conservative_low: Duration::from_millis(4),
            conservative_high: Duration::from_millis(8),
            aggressive_low: Duration::from_millis(12),
            aggressive_high: Duration::from_millis(20),
            alpha: 7.0 / 8.0,
            queue_delay_limit: None,
            draining_is_congestion: true,
            bounded_steps: false,
            validated_growth: false,
        }
    }
}

impl VultureConfig {
    /// Vulture exactly as the paper gives it (also `Default`).
    pub fn paper() -> VultureConfig {
        VultureConfig::default()
    }

    /// The paper's parameters with Slipstream's changes: a queueing-delay guard at `limit`,
    /// draining not counted as congestion and bounded steps (each measured in the end-to-end
    /// testbed), and growth only while the sender uses the window.
    pub fn slipstream(limit: Duration) -> VultureConfig {
        VultureConfig {
            queue_delay_limit: Some(limit),
            draining_is_congestion: false,
            bounded_steps: true,
            validated_growth: true,
            ..VultureConfig::default()
        }
    }
}

impl VultureConfig {
    /// Checks the parameters make sense: PSI > 0, cLow <= cHigh, aLow < aHigh, 0 < alpha <= 1, and
    /// every duration below 2^32 µs (they are stored as 32-bit microseconds).
    pub fn validate(&self) -> Result<(), &'static str> {
        let limit = Duration::from_micros(u64::from(u32::MAX));
        let all = [
            self.psi,
            self.piv_resolution,
            self.conservative_low,
            self.conservative_high,
            self.aggressive_low,
            self.aggressive_high,
        ];
        if all.iter().any(|d| *d > limit) {
            return Err("vulture durations must be below 71 minutes");
        }
        if self.psi.is_zero() {
            return Err("vulture psi must be positive");
        }
        if self.conservative_low > self.conservative_high {
            return Err("vulture conservative_low must not exceed conservative_high");
        }
        if self.aggressive_low >= self.aggressive_high {
            return Err("vulture aggressive_low must be below aggressive_high");
        }
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err("vulture alpha must be in (0, 1]");
        }
        Ok(())
    }
}

/// The configuration in the compact form kept per flow.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Params {
    psi_us: u32,
    resolution_us: u32,
    thresholds: Thresholds,
    alpha: f64,
    /// Microseconds; 0 = off.
    queue_delay_limit_us: u32,
    bounded_steps: bool,
    validated_growth: bool,
}

impl Params {
    fn new(c: &VultureConfig) -> Self {
        let us = |d: Duration| d.as_micros().min(u128::from(u32::MAX)) as u32;
        Params {
            psi_us: us(c.psi),
            resolution_us: us(c.piv_resolution),
            thresholds: Thresholds {
                draining_is_high: c.draining_is_congestion,
                ..Thresholds::from_durations(
                    c.conservative_low,
                    c.conservative_high,
                    c.aggressive_low,
                    c.aggressive_high,
                )
            },
            alpha: c.alpha,
            queue_delay_limit_us: c.queue_delay_limit.map_or(0, |d| us(d).max(1)),
            bounded_steps: c.bounded_steps,
            validated_growth: c.validated_growth,
        }
    }

    fn config(&self) -> VultureConfig {
        let d = |us: u32| Duration::from_micros(u64::from(us));
        VultureConfig {
            psi: d(self.psi_us),
            piv_resolution: d(self.resolution_us),
            conservative_low: d(self.thresholds.c_low),
            conservative_high: d(self.thresholds.c_high),
            aggressive_low: d(self.thresholds.a_low),
            aggressive_high: d(self.thresholds.a_high),
            alpha: self.alpha,
            queue_delay_limit: (self.queue_delay_limit_us > 0).then(|| d(self.queue_delay_limit_us)),
            draining_is_congestion: self.thresholds.draining_is_high,
            bounded_steps: self.bounded_steps,
            validated_growth: self.validated_growth,
        }
    }
}

/// Where the pause after a policy change stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Pause {
    /// Analysing PIVs.
    #[default]
    Off,
    /// Policy changed; waiting for the first ACK carrying the new window.
    AwaitAck,
    /// Waiting for data echoing this receiver TSval or a later one.
    AwaitData { ack_tsval: u32 },
    /// That ACK had no TSval: waiting one RTT after it was sent.
    AwaitTime { ack_sent: Instant },
}

/// The Vulture controller for one flow.
#[derive(Clone, Debug)]
pub struct Vulture {
    params: Params,
    /// Alg. 1.
    piv: PivMeter,
    /// Alg. 2-3 counts of the running epoch.
    epoch: EpochAccumulator,
    /// Start of the running epoch; `None` while no epoch runs.
    epoch_start: Option<Instant>,
    last_epoch: Option<EpochSummary>,
    /// Alg. 6.
    cwnd: CwndEstimator,
    /// Alg. 5.
    window: Window,
    /// Alg. 4.
    policy: PolicyState,
    mode: Mode,
    pause: Pause,
}

impl Vulture {
    /// A controller in warm-up (no window asked for yet), with the rule's parameters.
    pub fn new(config: VultureConfig) -> Self {
        Vulture {
            params: Params::new(&config),
            piv: PivMeter::default(),
            epoch: EpochAccumulator::default(),
            epoch_start: None,
            last_epoch: None,
            cwnd: CwndEstimator::default(),
            window: Window::default(),
            policy: PolicyState::default(),
            mode: Mode::Warmup,
            pause: Pause::Off,
        }
    }

    /// The configuration (as stored: microsecond resolution).
    pub fn config(&self) -> VultureConfig {
        self.params.config()
    }

    /// Whether the flow has turned LBE (left warmup).
    pub fn is_lbe(&self) -> bool {
        self.mode != Mode::Warmup
    }

    /// The current rwnd moderation policy (fix during warmup).
    pub fn policy(&self) -> Policy {
        self.policy.policy
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The current rwnd, `None` during warmup.
    pub fn rwnd(&self) -> Option<u32> {
        self.is_lbe().then_some(self.window.rwnd)
    }

    /// Alg. 4's `rwndThresh` (`u32::MAX` until the first halve).
    pub fn rwnd_thresh(&self) -> u32 {
        self.policy.rwnd_thresh
    }

    /// The Alg. 6 cwnd estimate in bytes.
    pub fn cwnd_estimate(&self) -> u32 {
        self.cwnd.estimate()
    }

    /// Whether PIV analysis is paused after a policy change.
    pub fn is_paused(&self) -> bool {
        self.pause != Pause::Off
    }

    /// Data segments Alg. 1 could not record because its 16-entry ring was full.
    pub fn piv_ring_drops(&self) -> u32 {
        self.piv.ring_drops()
    }

    /// Switches policy; a change starts the pause and abandons the running epoch.
    fn change_policy(&mut self, new: Policy) {
        if self.policy.set(new, self.window.rwnd) {
            self.pause = Pause::AwaitAck;
            self.epoch_start = None;
            self.epoch = EpochAccumulator::default();
            if self.params.bounded_steps {
                self.window.bound_step(new);
            }
        }
    }

    /// Alg. 2-4 at the end of an epoch; starts the next epoch at `now` unless the policy changed.
    fn complete_epoch(&mut self, now: Instant, ctx: &FlowContext) {
        let outcome = self.epoch.finish();
        self.last_epoch = Some(outcome.summary);
        self.mode = outcome.mode;
        let new = policy::decide(
            outcome.classes,
            outcome.summary.piv_count,
            self.params.alpha,
            self.window.rwnd,
            self.policy.rwnd_thresh,
        );
        let limit = self.params.queue_delay_limit_us;
        let limit = (limit > 0).then(|| Duration::from_micros(u64::from(limit)));
        let decided_by_pivs = new;
        let new = delay_guard::guard(new, ctx.queue_delay, limit);
        self.epoch = EpochAccumulator::default();
        self.epoch_start = Some(now);
        self.change_policy(new);
        if self.params.bounded_steps {
            // A decision repeated by a new epoch is a new step. A halve that only the guard
            // asked for drains the measured queue rather than halving outright.
            match (
                decided_by_pivs != Policy::Halve && new == Policy::Halve,
                ctx.base_rtt,
                ctx.queue_delay,
            ) {
                (true, Some(base), Some(queue)) => {
                    // The drained window is the path's estimated BDP: growth past it from here on
                    // is "increase" (one MSS per RTT), not "double", as after a TCP loss.
                    self.policy.rwnd_thresh = self.window.bound_drain(base, queue);
                }
                _ => self.window.bound_step(new),
            }
        }
    }

    /// The BE -> LBE switch (Sec. 0.3.5, Fig. 13): rwnd := cwnd estimate.
    fn turn_lbe(&mut self, mss: u32) {
        self.window = Window::new(self.cwnd.estimate(), mss);
        self.mode = Mode::Conservative;
        self.policy = PolicyState::default();
        self.epoch_start = None;
        self.epoch = EpochAccumulator::default();
        self.pause = Pause::AwaitAck;
    }
}

impl Controller for Vulture {
    fn on_data(&mut self, now: Instant, ctx: &FlowContext, data: &DataSample) {
        let Some(ts) = data.timestamps else {
            // Vulture needs timestamps for everything it measures.
            return;
        };
        self.cwnd.on_data(ts.tsecr, data.payload_len);
        // Alg. 1 runs on every segment so its queue is primed; PIVs outside an epoch are dropped.
        let piv = ctx.sender_clock.and_then(|clock| {
            self.piv
                .on_packet(
                    now,
                    ts.tsval,
                    clock,
                    Duration::from_micros(u64::from(self.params.psi_us)),
                )
                .map(|p| round_piv(p, Duration::from_micros(u64::from(self.params.resolution_us))))
        });
        if !self.is_lbe() {
            return;
        }
        if data.out_of_order {
            self.change_policy(Policy::Halve);
        }
        match self.pause {
            Pause::AwaitData { ack_tsval } if !seq_lt(ts.tsecr, ack_tsval) => self.pause = Pause::Off,
            Pause::AwaitTime { ack_sent }
                if ctx.rtt.is_some_and(|rtt| now.saturating_since(ack_sent) >= rtt) =>
            {
                self.pause = Pause::Off
            }
            _ => {}
        }
        if self.pause != Pause::Off {
            return;
        }
        match self.epoch_start {
            None => {
                self.epoch_start = Some(now);
                self.epoch = EpochAccumulator::default();
            }
            Some(start) => {
                if ctx.rtt.is_some_and(|rtt| now.saturating_since(start) >= rtt) {
                    self.complete_epoch(now, ctx);
                }
            }
        }
        if self.pause == Pause::Off {
            if let Some(p) = piv {
                self.epoch.add(p, &self.params.thresholds);
            }
        }
    }

    fn on_ack(&mut self, now: Instant, ctx: &FlowContext, ack: &AckSample) -> Option<u32> {
        if let Some(tsval) = ack.tsval {
            self.cwnd.on_ack(tsval, ack.acked_bytes);
        }
        if !self.is_lbe() {
            if ctx.sender_clock.is_none() || ctx.rtt.is_none() {
                return None;
            }
            self.turn_lbe(ctx.mss);
        }
        if ack.reports_loss {
            self.change_policy(Policy::Halve);
        }
        let in_use = self.params.validated_growth.then(|| self.cwnd.estimate());
        self.window
            .on_ack(self.policy.policy, ack.acked_bytes, ctx.mss, now, ctx.rtt, in_use);
        if self.pause == Pause::AwaitAck {
            self.pause = match ack.tsval {
                Some(ack_tsval) => Pause::AwaitData { ack_tsval },
                None => Pause::AwaitTime { ack_sent: now },
            };
        }
        Some(window::clamp(self.window.rwnd, ctx.mss))
    }

    fn stats(&self) -> ControllerStats {
        ControllerStats {
            target_window: self.rwnd(),
            cwnd_estimate: Some(self.cwnd.estimate()),
            mode: self.mode.into(),
            policy: self.policy.policy.into(),
            last_epoch: self.last_epoch,
        }
    }
}
