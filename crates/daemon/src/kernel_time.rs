//! The kernel's receive timestamp of a packet on the engine's clock (`PacketMeta::arrival`).
//!
//! Measurements are better taken when the packet reached the router than when the daemon read
//! it: the difference is the time it waited in the NFQUEUE plus the packet thread's delays
//! (a batch in progress, a tick, the scheduler), which otherwise add to every RTT sample. Under
//! a flood on the test VM that wait was 2.2 ms at the median and 11-15 ms at the 99th
//! percentile (`cost_of_timestamps_under_a_flood` in the nfqueue tests).
//!
//! NFQUEUE hands the timestamp over as wall-clock time (`CLOCK_REALTIME`), and only if the
//! kernel stamped the packet, which it does while some socket asks for receive timestamps:
//! `Datapath::enable_timestamps` keeps one open (see `slipstream_nfqueue::RxTimestamps`;
//! measured in `crates/nfqueue/tests/kernel_timestamps.rs`: without it forwarded packets carry
//! no timestamp on a host where nothing else asked, with it all do, and locally sent packets
//! never do). The stamp is carried onto the monotonic clock by its age, wall clock now minus
//! stamp, read next to the monotonic reading. A stamp from the future or older than
//! [`MAX_AGE`] is not trusted (the wall clock stepped, e.g. NTP setting a router's clock after
//! boot, or a stamp that is not a receive time): the packet then counts as arriving when read.

use std::time::SystemTime;

use slipstream_control::{Duration, Instant};

/// Oldest stamp taken as the arrival time. A packet does not wait a second in the queue: an
/// older stamp means the wall clock moved.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(1);

/// The arrival time on the monotonic clock of a packet stamped `stamp` (wall clock), given the
/// two clocks read together now. `None` if the stamp is in the future, older than [`MAX_AGE`],
/// or from before the monotonic clock's origin.
pub(crate) fn arrival(stamp: SystemTime, wall_now: SystemTime, mono_now: Instant) -> Option<Instant> {
    let age = wall_now.duration_since(stamp).ok()?;
    if age > MAX_AGE || age.as_micros() > u128::from(mono_now.as_micros()) {
        return None;
    }
    Some(mono_now - age)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WALL: u64 = 1_750_000_000;

    fn wall(micros: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(WALL) + Duration::from_micros(micros)
    }

    #[test]
    fn age_carries_over() {
        let mono_now = Instant::from_micros(5_000_000);
        assert_eq!(
            arrival(wall(1_000), wall(1_750), mono_now),
            Some(Instant::from_micros(5_000_000 - 750))
        );
        assert_eq!(arrival(wall(1_000), wall(1_000), mono_now), Some(mono_now));
    }

    #[test]
    fn future_and_stale_stamps_are_rejected() {
        let mono_now = Instant::from_micros(5_000_000);
        assert_eq!(
            arrival(wall(1_001), wall(1_000), mono_now),
            None,
            "from the future"
        );
        assert_eq!(
            arrival(wall(0), wall(1_000_000), mono_now),
            Some(Instant::from_micros(4_000_000)),
            "exactly the limit"
        );
        assert_eq!(
            arrival(wall(0), wall(1_000_001), mono_now),
            None,
            "older than a second"
        );
        // A monotonic stamp mistaken for wall time reads as 1970: far too old.
        assert_eq!(
            arrival(
                SystemTime::UNIX_EPOCH + Duration::from_secs(3600),
                wall(0),
                mono_now
            ),
            None
        );
    }

    #[test]
    fn stamps_before_the_clock_origin_are_rejected() {
        assert_eq!(arrival(wall(0), wall(500), Instant::from_micros(100)), None);
        assert_eq!(
            arrival(wall(0), wall(500), Instant::from_micros(500)),
            Some(Instant::ZERO)
        );
    }
}
