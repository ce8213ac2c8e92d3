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
        let excess = self.record(flow, sample);
        self.own_samples[self.own_count % OWN_SAMPLES] = excess;
        self.own_count += 1;
    }

    /// A flow measured `sample`, a round-trip half that crossed this link's queue and the
    /// opposite link's: `opposite` is that link's own queueing delay
    /// ([`LinkDelay::own_queue_delay`]), taken off where known. Without it the sample stands as
    /// it is, the opposite queue included (the best this flow can do: no timestamps, and no
    /// flow of the other link that measures its queue alone).
    pub fn on_round_trip_sample(
        &mut self,
        flow: &mut FlowDelay,
        sample: Duration,
        opposite: Option<Duration>,
    ) {
        self.record(flow, sample.saturating_sub(opposite.unwrap_or(Duration::ZERO)));
    }

    /// Updates the flow's base with `sample` and records its excess; returns the excess (us).
    fn record(&mut self, flow: &mut FlowDelay, sample: Duration) -> u32 {
        let sample_us = micros(sample);
        if flow.epoch != self.epoch {
            flow.previous_us = if self.epoch.wrapping_sub(flow.epoch) == 1 {
                flow.current_us
            } else {
                None
            };
            flow.current_us = None;
            flow.epoch = self.epoch;
        }
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
            sample_us
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
        self.own_count = 0;
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
/// the hold does measured the minimum budget, and in the next the data acknowledged was sent
/// while the minimum held (the flows' windows open again one RTT after the budget does).
const RESUME_ROUNDS: u8 = 2;

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
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn base_is_the_minimum_and_queue_the_excess() {
        let mut link = LinkDelay::default();
        let mut f = FlowDelay::default();
        link.on_sample(&mut f, ms(100));
        link.on_sample(&mut f, ms(130));
        assert_eq!(f.base(), Some(ms(100)));
        // Samples 0 and 30 ms: fewer than four, the minimum.
        assert_eq!(link.end_round(), Some(ms(0)));
        for q in [40, 10, 30, 20, 50, 60, 70, 80] {
            link.on_sample(&mut f, ms(100 + q));
        }
        // Sorted 10..80, 8 samples: the 25th percentile is index 2 = 30 ms.
        assert_eq!(link.end_round(), Some(ms(30)));
        assert_eq!(link.end_round(), None, "a round without samples");
        assert_eq!(link.queue_delay(), Some(ms(30)));
    }

    #[test]
    fn latecomer_does_not_take_the_standing_queue_for_its_base() {
        let mut link = LinkDelay::default();
        let mut old = FlowDelay::default();
        link.on_sample(&mut old, ms(50));
        for _ in 0..4 {
            link.on_sample(&mut old, ms(90)); // a 40 ms queue stands
        }
        assert_eq!(link.end_round(), Some(ms(40)));
        // A new flow to another server (base 20 ms) starts now: its samples read 60 ms.
        let mut new = FlowDelay::default();
        link.on_sample(&mut new, ms(60));
        assert_eq!(new.base(), Some(ms(20)), "60 - the shared 40 ms");
        // A round without samples: the next new flow is not calibrated against a stale value.
        link.on_sample(&mut old, ms(90));
        link.on_sample(&mut new, ms(60));
        assert_eq!(link.end_round(), Some(ms(40)));
        assert_eq!(link.end_round(), None);
        let mut late = FlowDelay::default();
        link.on_sample(&mut late, ms(60));
        assert_eq!(late.base(), Some(ms(60)));
    }

    #[test]
    fn a_flow_alone_is_not_calibrated_against_its_own_queue() {
        // Lab no-timestamps, the background alone (its window-release samples, 2026-11-25):
        // 100.4 ms, then two samples of the sender's first burst, 127.4 and 127.2 ms.
        let mut link = LinkDelay::default();
        let mut f = FlowDelay::default();
        link.on_sample(&mut f, Duration::from_micros(100_425));
        assert_eq!(link.end_round(), Some(Duration::ZERO));
        link.on_sample(&mut f, Duration::from_micros(127_350));
        link.on_sample(&mut f, Duration::from_micros(127_177));
        assert_eq!(link.end_round(), Some(Duration::from_micros(26_752)));
        // The fourth sample, 108.1 ms, is still calibrated, but not against the 26.8 ms of the
        // flow's own burst (it alone measured that round): before, its base fell to 81.4 ms,
        // and every later sample of an empty link (100.2-101.4 ms) read as 19 ms of queue: the
        // background alone held at its floor for the whole phase.
        link.on_sample(&mut f, Duration::from_micros(108_129));
        assert_eq!(f.base(), Some(Duration::from_micros(100_425)));
        link.on_sample(&mut f, Duration::from_micros(100_165));
        link.on_sample(&mut f, Duration::from_micros(101_429));
        assert_eq!(link.end_round(), Some(Duration::ZERO));
    }

    #[test]
    fn each_link_is_judged_on_its_own_queue() {
        // Background both ways, 100 ms base. The upload link's queue is 12 ms, the download
        // link's 8 ms. An upload with timestamps: a round trip of 120 ms whose ACK met 8 ms
        // (its one-way excess) is 112 ms on the upload link alone.
        let (mut up, mut down) = (LinkDelay::default(), LinkDelay::default());
        let mut path = AckPath::default();
        let mut upload = FlowDelay::default();
        // Empty queues first: the bases (round trip 100 ms, ACK one-way 50 ms).
        assert_eq!(path.excess(Instant::ZERO, ms(50)), Duration::ZERO);
        up.on_sample(&mut upload, ms(100));
        assert_eq!(up.end_round(), Some(Duration::ZERO));
        let excess = path.excess(Instant::from_millis(100), ms(58));
        assert_eq!(excess, ms(8));
        up.on_sample(&mut upload, ms(120) - excess);
        assert_eq!(up.end_round(), Some(ms(12)));
        assert_eq!(up.own_queue_delay(), Some(ms(12)));
        // A download without timestamps: its far half (ACK up, data down) reads 120 ms, less
        // the upload link's own 12 ms: the download link sees its own 8 ms.
        let mut download = FlowDelay::default();
        // Its base first: 112 ms while only the upload link queued.
        down.on_round_trip_sample(&mut download, ms(112), up.own_queue_delay());
        assert_eq!(download.base(), Some(ms(100)));
        down.end_round();
        down.on_round_trip_sample(&mut download, ms(120), up.own_queue_delay());
        assert_eq!(down.end_round(), Some(ms(8)));
        // Round-trip samples are not the link's own: the upload link cannot correct by them.
        assert_eq!(down.own_queue_delay(), None);
        // Where the opposite link measured nothing alone, the round trip stands as it is.
        down.on_round_trip_sample(&mut download, ms(120), None);
        assert_eq!(down.end_round(), Some(ms(20)));
    }

    #[test]
    fn the_ack_path_minimum_ages_with_its_own_epochs_and_restarts() {
        let at = |s: u64| Instant::from_millis(s * 1000);
        let mut path = AckPath::default();
        assert_eq!(path.excess(at(0), ms(40)), Duration::ZERO);
        assert_eq!(path.excess(at(61), ms(45)), ms(5));
        // Two epochs on, the 40 ms minimum is gone (a clock that drifted).
        assert_eq!(path.excess(at(122), ms(45)), Duration::ZERO);
        assert_eq!(path.excess(at(123), ms(50)), ms(5));
        // After a silence of two epochs nothing old is kept.
        assert_eq!(path.excess(at(300), ms(70)), Duration::ZERO);
        path.restart();
        assert_eq!(path.excess(at(301), ms(90)), Duration::ZERO);
    }

    #[test]
    fn after_calibration_the_base_is_a_plain_minimum() {
        let mut link = LinkDelay::default();
        let mut f = FlowDelay::default();
        for _ in 0..CALIBRATION_SAMPLES {
            link.on_sample(&mut f, ms(100));
        }
        link.end_round();
        // A shared estimate no longer moves this flow's base.
        link.queue_delay = Some(ms(30));
        link.on_sample(&mut f, ms(110));
        assert_eq!(f.base(), Some(ms(100)));
        link.on_sample(&mut f, ms(95));
        assert_eq!(f.base(), Some(ms(95)));
    }

    #[test]
    fn a_base_too_low_ages_out_after_two_epochs() {
        let mut link = LinkDelay::default();
        let mut f = FlowDelay::default();
        link.queue_delay = Some(ms(90)); // an overestimated shared queue
        link.fresh = true;
        link.on_sample(&mut f, ms(100));
        assert_eq!(f.base(), Some(ms(10)));
        link.queue_delay = None;
        link.next_epoch();
        link.on_sample(&mut f, ms(100));
        assert_eq!(f.base(), Some(ms(10)), "the previous epoch still counts");
        link.next_epoch();
        for _ in 0..CALIBRATION_SAMPLES {
            link.on_sample(&mut f, ms(100));
        }
        assert_eq!(f.base(), Some(ms(100)));
    }

    #[test]
    fn a_restarted_flow_learns_its_base_afresh_without_calibration() {
        let mut link = LinkDelay::default();
        let mut f = FlowDelay::default();
        // Samples that drifted down (a sender clock read too slow) left a base 500 ms too low.
        link.on_sample(&mut f, ms(9_500));
        for _ in 0..4 {
            link.on_sample(&mut f, ms(10_080));
        }
        assert_eq!(link.end_round(), Some(ms(580)), "an 80 ms queue read as 580 ms");
        f.restart();
        // Rescaled samples: 80 ms of queue stands; the fresh 580 ms is not subtracted.
        link.on_sample(&mut f, ms(10_080));
        assert_eq!(f.base(), Some(ms(10_080)));
        assert_eq!(link.end_round(), Some(ms(0)));
        // The queue empties: the base comes down to the path's.
        link.on_sample(&mut f, ms(10_000));
        assert_eq!(f.base(), Some(ms(10_000)));
        link.on_sample(&mut f, ms(10_001));
        link.on_sample(&mut f, ms(10_002));
        assert_eq!(link.end_round(), Some(ms(0)));
    }

    #[test]
    fn slowdown_schedule() {
        use SlowdownRound::{Hold, Normal, Resume, Start};
        let mut s = Slowdown::default();
        let mut d = LinkDelay::default();
        let t = |v: u64| Instant::from_millis(v);
        let round = ms(100);
        let every = Duration::from_secs(30);
        assert_eq!(s.round(t(0), every, round, &mut d), Normal); // first due at 2 s
        assert_eq!(s.round(t(1900), every, round, &mut d), Normal);
        // Two rounds at the minimum: the one that starts at 2 s and the next.
        assert_eq!(s.round(t(2000), every, round, &mut d), Start);
        assert_eq!(d.epoch, 1, "a slowdown starts a base epoch");
        assert_eq!(s.round(t(2100), every, round, &mut d), Hold);
        // Then two rounds that measured the slowdown, with the controller's budget back.
        assert_eq!(s.round(t(2200), every, round, &mut d), Resume);
        assert_eq!(s.round(t(2300), every, round, &mut d), Resume);
        assert_eq!(s.round(t(2400), every, round, &mut d), Normal);
        assert_eq!((s.count, d.epoch), (1, 1));
        assert_eq!(s.round(t(32_100), every, round, &mut d), Normal);
        assert_eq!(s.round(t(32_200), every, round, &mut d), Start);
        assert_eq!(d.epoch, 2);
        assert_eq!(
            Slowdown::default().round(t(0), Duration::ZERO, round, &mut d),
            Normal,
            "off"
        );
        assert!(Start.holds() && Hold.holds() && !Resume.holds() && !Normal.holds());
        assert!(Start.measured() && Normal.measured() && !Hold.measured() && !Resume.measured());
    }

    #[test]
    fn slowdowns_age_out_a_base_too_low() {
        let mut s = Slowdown::default();
        let mut link = LinkDelay::default();
        let mut f = FlowDelay::default();
        let t = |v: u64| Instant::from_millis(v);
        let (round, every) = (ms(100), Duration::from_secs(2));
        // Calibrated against an overestimated shared queue: a base 90 ms too low, which read
        // every later sample of an empty queue as 90 ms (the budget at its floor for good).
        link.queue_delay = Some(ms(90));
        link.fresh = true;
        link.on_sample(&mut f, ms(100));
        assert_eq!(f.base(), Some(ms(10)));
        let mut now = 0;
        let mut run_until = |slowdowns: u64, f: &mut FlowDelay| {
            while s.count < slowdowns {
                s.round(t(now), every, round, &mut link);
                link.on_sample(f, ms(100));
                now += 100;
            }
        };
        run_until(1, &mut f);
        assert_eq!(f.base(), Some(ms(10)), "the previous epoch still holds it");
        run_until(2, &mut f);
        assert_eq!(f.base(), Some(ms(100)), "two slowdowns later it is gone");
    }

    #[test]
    fn a_fresh_base_slowdown_forgets_the_old_base_at_once() {
        let mut s = Slowdown::default();
        let mut link = LinkDelay::default();
        let mut f = FlowDelay::default();
        let t = |v: u64| Instant::from_millis(v);
        let (round, every) = (ms(100), Duration::from_secs(30));
        // The flow's base is 50 ms; then the route gets 30 ms longer.
        link.on_sample(&mut f, ms(50));
        assert_eq!(s.round(t(0), every, round, &mut link), SlowdownRound::Normal);
        link.on_sample(&mut f, ms(80));
        assert_eq!(f.base(), Some(ms(50)));
        // The controller asks: the next round starts a slowdown (not due for 30 s)...
        s.fresh_base();
        assert_eq!(s.round(t(100), every, round, &mut link), SlowdownRound::Start);
        // ...and the samples in it set the base: nothing of the old epoch is kept.
        link.on_sample(&mut f, ms(80));
        assert_eq!(f.base(), Some(ms(80)));
        assert_eq!(s.round(t(200), every, round, &mut link), SlowdownRound::Hold);
        assert_eq!(s.round(t(300), every, round, &mut link), SlowdownRound::Resume);
        assert_eq!(s.count, 1);
    }
}
