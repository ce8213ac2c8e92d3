//! Time as the core sees it: a monotonic microsecond count handed in by the caller.
//!
//! The core never reads a clock (sans-I/O); the I/O shell converts its clock readings into
//! [`Instant`]s, and tests step a virtual clock.

use std::ops::{Add, Sub};
pub use std::time::Duration;

/// A point in time, in microseconds since an arbitrary origin chosen by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The origin of the caller's clock.
    pub const ZERO: Instant = Instant(0);

    /// An instant `micros` microseconds after the caller's origin.
    pub const fn from_micros(micros: u64) -> Instant {
        Instant(micros)
    }

    /// An instant `millis` milliseconds after the caller's origin.
    pub const fn from_millis(millis: u64) -> Instant {
        Instant(millis * 1000)
    }

    /// Microseconds since the caller's origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    /// Signed difference `self - other` in microseconds.
    pub fn signed_micros_since(self, other: Instant) -> i64 {
        self.0 as i64 - other.0 as i64
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.as_micros() as u64))
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.as_micros() as u64))
    }
}

/// Signed difference `a - b` of two 32-bit TCP counters (sequence numbers, TSvals), modulo 2^32.
pub fn wrapping_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// `a` is before `b` in 32-bit serial number arithmetic (RFC 1982, as TCP uses it).
pub fn seq_lt(a: u32, b: u32) -> bool {
    wrapping_diff(a, b) < 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instant_arithmetic() {
        let t = Instant::from_millis(5);
        assert_eq!((t + Duration::from_millis(3)).as_micros(), 8000);
        assert_eq!(t.saturating_since(Instant::from_millis(7)), Duration::ZERO);
        assert_eq!(Instant::from_millis(7).signed_micros_since(t), 2000);
        assert_eq!(t.signed_micros_since(Instant::from_millis(7)), -2000);
    }

    #[test]
    fn serial_arithmetic_wraps() {
        assert_eq!(wrapping_diff(5, u32::MAX - 4), 10);
        assert!(seq_lt(u32::MAX - 1, 3));
        assert!(!seq_lt(3, u32::MAX - 1));
    }
}
