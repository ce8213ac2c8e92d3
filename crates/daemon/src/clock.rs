//! The daemon's only clock: monotonic time since start, converted into the core's `Instant`.

use slipstream_control::Instant;

pub(crate) struct MonotonicClock {
    origin: std::time::Instant,
}

impl MonotonicClock {
    pub(crate) fn start() -> MonotonicClock {
        MonotonicClock {
            origin: std::time::Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Instant {
        Instant::from_micros(self.origin.elapsed().as_micros() as u64)
    }
}
