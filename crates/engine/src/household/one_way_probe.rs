//! One link's one-way delay probes: the halves of ICMP timestamp exchanges (RFC 792) with the
//! reflector beyond the access link, as `tsping` gives them to cake-autorate.
//!
//! Without TCP timestamps (Windows' default) every sample a flow gives crosses both links'
//! queues, and two links of background each read the sum of both (see `capacity`). An ICMP
//! timestamp reply carries the reflector's clock when the request arrived and when the reply
//! left: the request's trip is the upload link's alone, the reply's the download link's. Each
//! half is measured against two clocks, so it carries their offset; like a TCP timestamp's
//! one-way delay it is taken against its own minimum (a [`FlowDelay`] of the link's base
//! epochs), where the offset cancels. The offset's drift over two base epochs (about a minute)
//! stays in the reading: 1.2 ms at 20 ppm between clocks that no NTP keeps together.

use slipstream_control::Duration;
use slipstream_household::FlowDelay;

/// Where a probe's first half lands on the sample scale: the samples are durations, and a
/// half later measured shorter than the first (the first waited in a queue) must stay positive.
const ORIGIN: Duration = Duration::from_secs(10);
/// A half further than this from the first is a clock that stepped (an NTP correction, a
/// router without a real-time clock setting its time after boot): the base starts again.
const STEP: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug)]
pub(crate) struct OneWayProbe {
    /// The first half measured (µs, on the two clocks' offset), the scale's zero.
    first_us: Option<i64>,
    /// The halves' base, as a flow's. Never calibrated against the link's last queue: that
    /// queue, read by round trips, holds the opposite link's too.
    pub(crate) delay: FlowDelay,
}

impl Default for OneWayProbe {
    fn default() -> Self {
        let mut delay = FlowDelay::default();
        delay.restart();
        OneWayProbe {
            first_us: None,
            delay,
        }
    }
}

impl OneWayProbe {
    /// A half measured `one_way_us` (the reflector's clock less ours, or ours less its):
    /// the sample on this probe's scale, starting the scale again after a clock step.
    pub(crate) fn sample(&mut self, one_way_us: i64) -> Duration {
        let first = *self.first_us.get_or_insert(one_way_us);
        let since_first = one_way_us - first;
        if since_first.unsigned_abs() > STEP.as_micros() as u64 {
            *self = OneWayProbe {
                first_us: Some(one_way_us),
                ..OneWayProbe::default()
            };
            return ORIGIN;
        }
        if since_first >= 0 {
            ORIGIN + Duration::from_micros(since_first as u64)
        } else {
            ORIGIN.saturating_sub(Duration::from_micros(since_first.unsigned_abs()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slipstream_household::LinkDelay;

    #[test]
    fn the_offset_cancels_and_a_clock_step_starts_again() {
        let mut probe = OneWayProbe::default();
        let mut link = LinkDelay::default();
        // Clocks 3 h apart, a 5 ms path; the first probe met a 4 ms queue.
        let offset = 3 * 3600 * 1_000_000i64;
        for (one_way_ms, queue_ms) in [(9, 4), (5, 0), (5, 0), (7, 2), (15, 10)] {
            let sample = probe.sample(offset + one_way_ms * 1000);
            link.on_probe_sample(&mut probe.delay, sample);
            let q = link.end_round().unwrap();
            // The first sample is its own base; later ones read their excess over the path.
            let expected = if one_way_ms == 9 { 0 } else { queue_ms };
            assert_eq!(q, Duration::from_millis(expected), "one-way {one_way_ms} ms");
            assert!(!link.flows_timed_alone(), "probes are not flows");
            assert!(link.own_queue_delay().is_some());
        }
        // The reflector's clock steps by a minute: the scale and the base start again.
        let stepped = probe.sample(offset + 60_000_000 + 5000);
        assert_eq!(stepped, ORIGIN);
        assert_eq!(probe.delay.base(), None);
        link.on_probe_sample(&mut probe.delay, stepped);
        assert_eq!(link.end_round(), Some(Duration::ZERO));
        let later = probe.sample(offset + 60_000_000 + 8000);
        link.on_probe_sample(&mut probe.delay, later);
        assert_eq!(link.end_round(), Some(Duration::from_millis(3)));
    }
}
