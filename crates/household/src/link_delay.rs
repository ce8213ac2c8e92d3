//! One view of an access link's delay, shared by every background flow of the household.
//!
//! Each flow measures the half of its round trip that crosses the access link (for a download
//! the far half, router -> sender -> router; for an upload the near half, router -> receiver ->
//! router) with timestamps or by window release (engine `rtt`). That half is the flow's own base
//! (its server's distance) plus the link's queueing delay, which is the same for every flow at a
//! given moment. So:
//!
//! * each flow keeps its own base: the minimum of its samples ([`FlowDelay`]);
//! * a flow's first [`CALIBRATION_SAMPLES`] samples are corrected by the queueing delay the
//!   household measured in the previous round (unless the flow alone measured it),
//!   `base = min(sample - shared_queue)`: a flow that
//!   starts while a queue stands does not take that queue for its base (LEDBAT's latecomer
//!   problem, which per-flow minima cannot avoid);
//! * every sample's excess over its flow's base is a queueing-delay sample of the *link*, and a
//!   round's samples, from all flows, are filtered together ([`LinkDelay::end_round`]): the 25th
//!   percentile (the minimum below four samples), so one late packet never moves the estimate.
//!
//! Each link is judged on its own queue. A round-trip half crosses both links' queues: a
//! download's far half without timestamps carries the ACK up the upload link, and an upload's
//! near half carries the receiver's ACK down the download link. Where a flow can tell the two
//! apart it does: a download with timestamps measures its data's one-way delay (sender clock),
//! and an upload with timestamps takes off its ACK's one-way excess ([`AckPath`], receiver
//! clock). Those samples are the link's *own* queue ([`LinkDelay::own_queue_delay`]); a
//! round-trip sample of the opposite link is corrected by it ([`LinkDelay::on_round_trip_sample`]),
//! so two background directions no longer yield to each other's queues.
//!
//! The bases are kept true by a coordinated slowdown ([`Slowdown`]): every `interval`, the
//! budget of all background flows of the link drops to its minimum for two rounds at once, so
//! the queue they built drains and the flows that send in it measure their base on an empty
//! queue (LEDBAT++ and RFC 9840 slow down each flow on its own; one household slowdown costs the
//! link two rounds per interval instead of one per flow, and a flow's slowdown cannot be taken
//! by a neighbour's queue). Chosen over active probes (cake-autorate) because it needs no
//! reflector on the internet and measures the flows' own paths.
//!
//! The budget controller sits the slowdown out ([`SlowdownRound`]): it is not asked while the
//! minimum holds, nor in the two rounds after, whose measurements are still the slowdown's; the
//! engine puts the controller's own budget back in force when the hold ends.

use slipstream_control::{Duration, Instant};

/// A flow's first samples are corrected by the shared queueing delay (see the module docs).
pub const CALIBRATION_SAMPLES: u8 = 4;
/// Queueing-delay samples kept per round (a bound on memory; later samples overwrite in turn).
const ROUND_SAMPLES: usize = 128;
/// Of those, the ones that crossed this link's queue alone, kept apart for the opposite link.
const OWN_SAMPLES: usize = 64;

/// The per-flow part: the flow's base on this link, as the minimum of its samples in the current
/// and the previous base epoch (LEDBAT's base history, RFC 6817 Sec. 2.4.2, with one epoch per
/// coordinated slowdown instead of one per minute): a base that was too low (a calibration
/// against an overestimated queue, a shorter route that went away) ages out after two epochs
/// instead of holding the flow down for the rest of its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowDelay {
    /// Minimum of the current epoch's samples, microseconds.
    current_us: Option<u32>,
    /// Minimum of the previous epoch's.
    previous_us: Option<u32>,
    epoch: u32,
    samples: u8,
    /// The link's round ([`LinkDelay`]'s count, from 1) of the flow's last sample.
    last_round: u32,
}

impl FlowDelay {
    /// The flow's base (its path without queues), once measured.
    pub fn base(&self) -> Option<Duration> {
        self.base_us().map(|us| Duration::from_micros(u64::from(us)))
    }

    /// Forgets the base: the flow's samples so far were measured on another scale (its
    /// one-way delays against a sender clock estimate that has since changed; a minimum of
    /// samples that drifted down with a clock read too slow would stay far too low, and the
    /// flow would read a queue of hundreds of milliseconds on an empty link). The new base is
    /// learned from the next samples without calibration: the shared queue it would subtract
    /// was built from this flow's own rescaled samples. A base too high (a queue standing now)
    /// comes down with the first lower sample, at the latest in the next coordinated slowdown.
    pub fn restart(&mut self) {
        self.current_us = None;
        self.previous_us = None;
        self.samples = CALIBRATION_SAMPLES;
    }

    fn base_us(&self) -> Option<u32> {
        match (self.current_us, self.previous_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The shared view of one link.
#[derive(Clone, Debug)]
pub struct LinkDelay {
    samples: [u32; ROUND_SAMPLES],
    count: usize,
    /// The filtered queueing delay of the last round that had samples.
    queue_delay: Option<Duration>,
    /// Base epoch: advanced by each coordinated slowdown.
    epoch: u32,
    /// The last round had samples: its queueing delay is current enough to calibrate a new flow
    /// against (a value left from flows that ended would make the next flow's base too low).
    fresh: bool,
    /// Rounds ended so far.
    round: u32,
    /// Flows with samples in the current round and in the last one.
    flows_this_round: u32,
    flows_last_round: u32,
    /// This round's samples that crossed this link's queue alone (one-way, or corrected by
    /// their ACK's path), and how many were taken.
    own_samples: [u32; OWN_SAMPLES],
    own_count: usize,
    /// The filtered queueing delay of the last round's own samples; `None` if it had none.
    own_queue_delay: Option<Duration>,
    /// This round's own samples that were the router's delay probes, not a flow's.
    probe_count: usize,
    /// The last round had own samples from flows (timestamps, uTP), not only from probes.
    flows_timed_alone: bool,
}

impl Default for LinkDelay {
    fn default() -> Self {
        LinkDelay {
            samples: [0; ROUND_SAMPLES],
            count: 0,
            queue_delay: None,
            epoch: 0,
            fresh: false,
            round: 0,
            flows_this_round: 0,
            flows_last_round: 0,
            own_samples: [0; OWN_SAMPLES],
            own_count: 0,
            own_queue_delay: None,
            probe_count: 0,
            flows_timed_alone: false,
        }
    }
}

fn micros(d: Duration) -> u32 {
    d.as_micros().min(u128::from(u32::MAX)) as u32
}

impl LinkDelay {
    /// A flow measured `sample`, a delay that crossed this link's queue and no other (a one-way
    /// delay, or a round trip less its ACK's one-way excess). Updates the flow's base and
    /// records the queueing-delay sample it gives, also as one of the link's own.
    pub fn on_sample(&mut self, flow: &mut FlowDelay, sample: Duration) {
        let excess = self.record(flow, sample, Duration::ZERO);
        self.own_samples[self.own_count % OWN_SAMPLES] = excess;
        self.own_count += 1;
    }

    /// The router's delay probe measured `sample`, a one-way delay across this link alone (an
    /// ICMP timestamp's half): one of the link's own samples, as [`LinkDelay::on_sample`], but
    /// not a flow's ([`LinkDelay::flows_timed_alone`]).
    pub fn on_probe_sample(&mut self, probe: &mut FlowDelay, sample: Duration) {
        self.on_sample(probe, sample);
        self.probe_count += 1;
    }

    /// A flow measured `sample`, a round-trip half that crossed this link's queue and the
    /// opposite link's: `opposite` is that link's own queueing delay
    /// ([`LinkDelay::own_queue_delay`]), taken off where known. Without it the sample stands as
    /// it is, the opposite queue included (the best this flow can do: no timestamps, and no
    /// flow of the other link that measures its queue alone).
    ///
    /// The correction is a round's filtered value, not the queue this sample's packet met: past
    /// the flow's calibration its base is the minimum of the samples as measured, which no
    /// queue can take below the path. A minimum of corrected samples keeps the correction's
    /// largest error: in the opposite link's coordinated slowdown its queue drains while the
    /// correction still subtracts the round before's, and each such sample set the base that
    /// much too low for two epochs (lab `home` at 50 Mbit/s / 20 ms: a download without
    /// timestamps read a phantom 3-7 ms for the whole run and sat at its floors, 0.025 of
    /// the capacity best effort left free).
    pub fn on_round_trip_sample(
        &mut self,
        flow: &mut FlowDelay,
        sample: Duration,
        opposite: Option<Duration>,
    ) {
        self.record(flow, sample, opposite.unwrap_or(Duration::ZERO));
    }

    /// A flow's handshake crossed this link before its data: `half` is the round-trip half it
    /// measured (the SYN or SYN-ACK out, the answer back), on the scale of the flow's round-trip
    /// samples. The flow's base is no higher than `half + slack`: a bound in its current epoch,
    /// which ages out with it, not a sample (no queueing delay, no calibration). `slack` is the
    /// full-size data packets' serialization the handshake's small ones did not have.
    ///
    /// Why: the calibration above needs a queue the link measured already. Flows that all start
    /// at once (48 uploads, a backup's parallel connections) measure their first data behind the
    /// queue their initial windows build, every base is that much too high, and the round's
    /// 25th percentile reads no queue at all; the budget grew to 1.3 MB on a 10 Mbit/s link
    /// and the queue stood at 100 ms for good (the eBPF upload test, in CI and in 2 runs of 12
    /// on a loaded machine). A coordinated slowdown did not mend it: at its minimum budget most flows are
    /// held and measure nothing.
    pub fn on_handshake(&mut self, flow: &mut FlowDelay, half: Duration, slack: Duration) {
        self.sync_epoch(flow);
        let bound = micros(half + slack);
        flow.current_us = Some(flow.current_us.map_or(bound, |b| b.min(bound)));
    }

    /// Moves the flow's minima on to the link's current base epoch.
    fn sync_epoch(&self, flow: &mut FlowDelay) {
        if flow.epoch != self.epoch {
            flow.previous_us = if self.epoch.wrapping_sub(flow.epoch) == 1 {
                flow.current_us
            } else {
                None
            };
            flow.current_us = None;
            flow.epoch = self.epoch;
        }
    }

    /// Updates the flow's base with `sample` and records its excess less `opposite` (the
    /// opposite link's queue, zero for a sample that crossed this link alone); returns the
    /// excess (us). Calibration subtracts `opposite` (a flow starting beside a standing queue
    /// there must not take it for its base); later samples update the base as measured.
    fn record(&mut self, flow: &mut FlowDelay, sample: Duration, opposite: Duration) -> u32 {
        let measured_us = micros(sample);
        let sample_us = measured_us.saturating_sub(micros(opposite));
        self.sync_epoch(flow);
        // Whether the last round's queue was this flow's view alone (see the calibration below).
        let own_view = flow.last_round != 0 && flow.last_round == self.round && self.flows_last_round <= 1;
        if flow.last_round != self.round.wrapping_add(1) {
            flow.last_round = self.round.wrapping_add(1);
            self.flows_this_round += 1;
        }
        let candidate = if flow.samples < CALIBRATION_SAMPLES {
            flow.samples += 1;
            // The standing queue the link's flows measured. Not when the flow alone measured
            // it: its own excess (a slow start's burst) subtracted from its own samples set its
            // base that much too low, a phantom queue that held the background alone at its
            // floor (lab no-timestamps, 1 run in 3-5).
            let standing = if self.fresh && !own_view {
                self.queue_delay.map_or(0, micros)
            } else {
                0
            };
            sample_us.saturating_sub(standing)
        } else {
            measured_us
        };
        flow.current_us = Some(flow.current_us.map_or(candidate, |b| b.min(candidate)));
        let base = flow.base_us().unwrap_or(candidate);
        let excess = sample_us.saturating_sub(base);
        self.samples[self.count % ROUND_SAMPLES] = excess;
        self.count += 1;
        excess
    }

    /// Ends a round: the filtered queueing delay of its samples, or `None` if it had none (the
    /// last value stays available through [`LinkDelay::queue_delay`]).
    pub fn end_round(&mut self) -> Option<Duration> {
        let n = self.count.min(ROUND_SAMPLES);
        self.count = 0;
        self.round = self.round.wrapping_add(1);
        self.flows_last_round = std::mem::take(&mut self.flows_this_round);
        self.fresh = n > 0;
        let own = self.own_count.min(OWN_SAMPLES);
        self.flows_timed_alone = self.own_count > self.probe_count;
        self.own_count = 0;
        self.probe_count = 0;
        self.own_queue_delay = filtered(&mut self.own_samples[..own]);
        let delay = filtered(&mut self.samples[..n])?;
        self.queue_delay = Some(delay);
        Some(delay)
    }

    /// The last round's filtered queueing delay.
    pub fn queue_delay(&self) -> Option<Duration> {
        self.queue_delay
    }

    /// The last round's filtered queueing delay of this link's queue alone (its one-way and
    /// ACK-corrected samples); `None` if the last round had none. For the opposite link's
    /// round-trip samples ([`LinkDelay::on_round_trip_sample`]).
    pub fn own_queue_delay(&self) -> Option<Duration> {
        self.own_queue_delay
    }

    /// Whether the last round had own samples from flows (one-way delays, ACK-corrected round
    /// trips), not only from the router's probes: then no probe is needed to tell the link's
    /// queue from the opposite link's.
    pub fn flows_timed_alone(&self) -> bool {
        self.flows_timed_alone
    }

    /// A coordinated slowdown starts: flows begin a new base epoch.
    pub fn next_epoch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
    }
}

/// The round's filter: the 25th percentile (the minimum below four samples); `None` for none.
fn filtered(samples: &mut [u32]) -> Option<Duration> {
    let n = samples.len();
    if n == 0 {
        return None;
    }
    samples.sort_unstable();
    let value = if n < 4 { samples[0] } else { samples[n / 4] };
    Some(Duration::from_micros(u64::from(value)))
}

/// An upload's ACK path: the one-way delay of the receiver's ACKs from the receiver to the router
/// (by the receiver's TSval clock, on an arbitrary origin), as its minimum over the last one to
/// two [`ACK_PATH_EPOCH`]s. An ACK's excess over that minimum is the queue it met on the download
/// link; the upload's round trip less that excess is a delay that crossed the upload link's
/// queue alone. A route change on the ACK path moves the round trip and the ACK's delay alike,
/// so it cancels out; the epochs only let a drifting receiver clock age out. They are the path's
/// own, not the upload link's base epochs: the upload link's slowdowns (and a stale base's two
/// epochs at once) do not drain the download link, and a minimum forgotten while best effort
/// queues there would be taken on its queue, which the upload would then yield to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckPath {
    current_us: Option<u32>,
    previous_us: Option<u32>,
    /// When the current epoch began.
    epoch_start: Option<Instant>,
}

/// The length of an [`AckPath`] epoch: the minimum spans one to two of them.
pub const ACK_PATH_EPOCH: Duration = Duration::from_secs(60);

impl AckPath {
    /// The excess of an ACK that arrived `now` and whose one-way delay read `one_way` over the
    /// path's minimum.
    pub fn excess(&mut self, now: Instant, one_way: Duration) -> Duration {
        let us = micros(one_way);
        let start = *self.epoch_start.get_or_insert(now);
        let age = now.saturating_since(start);
        if age >= ACK_PATH_EPOCH {
            self.previous_us = if age < 2 * ACK_PATH_EPOCH {
                self.current_us
            } else {
                None
            };
            self.current_us = None;
            self.epoch_start = Some(now);
        }
        let current = self.current_us.map_or(us, |m| m.min(us));
        self.current_us = Some(current);
        let min = self.previous_us.map_or(current, |p| p.min(current));
        Duration::from_micros(u64::from(us - min))
    }

    /// Forgets the minimum: the receiver's clock estimate changed, and with it the scale.
    pub fn restart(&mut self) {
        *self = AckPath::default();
    }
}

/// Rounds after a slowdown whose measurements are still the slowdown's: the one that ends as
/// the hold does measured the minimum budget, in the next the data acknowledged was sent
/// while the minimum held (the flows' windows open again one RTT after the budget does), and
/// the third measures the restart: a window-limited sender answers the reopened window with
/// the whole budget at once, a burst of about one BDP at line rate. Timed flows read each of
/// its segments' queue (54 ms at 10 Mbit/s / 130 ms), and the controller yielded to it: in the
/// engine model with timestamps the window fell to 0.66 of the budget after every slowdown,
/// and a route change's fresh-base slowdown cost a second more under 90% of the link (its
/// false yield 4 s, lab `link` 4.0 and 2.0 s). Without timestamps the model's rounds read no
/// queue in it (the far half's samples missed the burst).
const RESUME_ROUNDS: u8 = 3;

/// What a round is to the link's budget controller around a coordinated slowdown
/// ([`Slowdown::round`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowdownRound {
    /// No slowdown: the round measured the controller's budget and the controller decides.
    Normal,
    /// A slowdown starts: the round that ended measured the controller's budget (the controller
    /// decides from it), but the next one runs at the minimum budget.
    Start,
    /// A slowdown runs: the round measured the minimum budget, and the next one runs at it too.
    Hold,
    /// The slowdown is over and the controller's budget is back, but the round measured the
    /// slowdown ([`RESUME_ROUNDS`]): it says nothing of the budget in force.
    Resume,
}

impl SlowdownRound {
    /// Whether the next round runs at the minimum budget.
    pub fn holds(self) -> bool {
        matches!(self, SlowdownRound::Start | SlowdownRound::Hold)
    }

    /// Whether the round that ended measured the controller's own budget.
    pub fn measured(self) -> bool {
        matches!(self, SlowdownRound::Normal | SlowdownRound::Start)
    }
}

/// The coordinated slowdown's schedule for one link.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slowdown {
    /// When the current slowdown ends (`Some` while one runs).
    until: Option<Instant>,
    /// When the next one is due.
    next: Option<Instant>,
    /// [`SlowdownRound::Resume`] rounds left after the one that ended the hold.
    resume: u8,
    /// Slowdowns run so far.
    pub count: u64,
    /// The next round starts a slowdown that forgets the bases ([`Slowdown::fresh_base`]).
    fresh_base_due: bool,
}

impl Slowdown {
    /// Called at each round's end while the link has flows: what the round is to the budget
    /// controller. `interval` zero turns slowdowns off. Each slowdown starts a base epoch of
    /// `delay` (see [`FlowDelay`]): a base too low ages out after two.
    pub fn round(
        &mut self,
        now: Instant,
        interval: Duration,
        round: Duration,
        delay: &mut LinkDelay,
    ) -> SlowdownRound {
        if interval.is_zero() {
            self.until = None;
            self.resume = 0;
            return SlowdownRound::Normal;
        }
        if let Some(until) = self.until {
            if now < until {
                return SlowdownRound::Hold;
            }
            self.until = None;
            self.next = Some(now + interval);
            self.resume = RESUME_ROUNDS - 1;
            return SlowdownRound::Resume;
        }
        if self.resume > 0 {
            self.resume -= 1;
            return SlowdownRound::Resume;
        }
        if std::mem::take(&mut self.fresh_base_due) {
            // Two epochs at once: the flows keep no minimum from before, and measure their
            // bases afresh on the queue the hold drains.
            self.count += 1;
            delay.next_epoch();
            delay.next_epoch();
            self.until = Some(now + round * 2);
            return SlowdownRound::Start;
        }
        match self.next {
            None => {
                // The first one comes after a few rounds of measurement.
                self.next = Some(now + interval.min(Duration::from_secs(2).max(round * 10)));
                SlowdownRound::Normal
            }
            Some(next) if now >= next => {
                self.count += 1;
                delay.next_epoch();
                self.until = Some(now + round * 2);
                SlowdownRound::Start
            }
            Some(_) => SlowdownRound::Normal,
        }
    }

    /// Asks for a slowdown at the next round that forgets the flows' bases instead of keeping
    /// the previous epoch's minimum: the path got longer (a route change, a new cell), and the
    /// old bases, too low now, would read its extra delay as a queue for two slowdown intervals.
    /// Ignored while slowdowns are off.
    pub fn fresh_base(&mut self) {
        self.fresh_base_due = true;
    }

    /// Whether a coordinated slowdown is in progress (base delays are being measured afresh).
    pub fn running(&self) -> bool {
        self.until.is_some()
    }
}

#[cfg(test)]
mod tests;
