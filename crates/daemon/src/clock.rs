//! The daemon's only clock: monotonic time since start, converted into the core's `Instant`.

use slipstream_control::Instant;

pub struct MonotonicClock {
    origin: std::time::Instant,
}

impl MonotonicClock {
    pub fn start() -> MonotonicClock {
        MonotonicClock {
            origin: std::time::Instant::now(),
        }
    }

    pub fn now(&self) -> Instant {
        Instant::from_micros(self.origin.elapsed().as_micros() as u64)
    }
}
