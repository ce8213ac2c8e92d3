//! Goodput of a flow: bytes the receiver acknowledged per second, over windows of about a second.

use slipstream_control::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GoodputMeter {
    total_acked: u64,
    mark: Option<(Instant, u64)>,
    /// The rate over the last closed window; `None` until one closed.
    bits_per_second: Option<f64>,
}

impl GoodputMeter {
    pub(crate) fn on_acked(&mut self, now: Instant, bytes: u32) {
        self.total_acked += u64::from(bytes);
        self.roll(now);
    }

    /// Closes the current window if it is over (also called from the timer, so an idle flow
    /// decays to zero).
    pub(crate) fn roll(&mut self, now: Instant) {
        match self.mark {
            None => self.mark = Some((now, self.total_acked)),
            Some((start, at_start)) => {
                let elapsed = now.saturating_since(start);
                if elapsed >= WINDOW {
                    let bytes = self.total_acked - at_start;
                    self.bits_per_second = Some(bytes as f64 * 8.0 / elapsed.as_secs_f64());
                    self.mark = Some((now, self.total_acked));
                }
            }
        }
    }

    /// The rate over the last closed window, 0 until one closed.
    pub(crate) fn bits_per_second(&self) -> f64 {
        self.bits_per_second.unwrap_or(0.0)
    }

    /// The rate over the last closed window, `None` until one closed.
    pub(crate) fn measured(&self) -> Option<f64> {
        self.bits_per_second
    }

    pub(crate) fn total_acked(&self) -> u64 {
        self.total_acked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_over_a_window() {
        let mut g = GoodputMeter::default();
        g.on_acked(Instant::from_millis(0), 0);
        assert_eq!(g.measured(), None);
        for i in 1..=10 {
            g.on_acked(Instant::from_millis(i * 100), 12_500);
        }
        // 125000 bytes in 1 s = 1 Mbit/s.
        assert!((g.bits_per_second() - 1_000_000.0).abs() < 1.0);
        assert_eq!(g.measured(), Some(g.bits_per_second()));
        g.roll(Instant::from_millis(3000));
        assert_eq!(g.bits_per_second(), 0.0);
        assert_eq!(g.total_acked(), 125_000);
    }
}
