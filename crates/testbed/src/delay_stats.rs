//! The delay element's own accuracy (`slipstream-delay --stats-file`): per queue, how many
//! packets it held and how late it released them (verdict time less due time).
//!
//! Why the lab records it: a delay-based controller reads the element's lateness as queueing
//! delay. With the browsing target at 1.2 ms, a run whose element released packets a mean of
//! 1.5-6 ms late (the CPU time stolen from this machine's 2 cores, 2026-12-01) gave the
//! background a fifth to a tenth of the share a punctual run gave it. The file is written at
//! exit, one line per queue of `key=value` fields, so a reader never sees half a report.

use std::time::Duration;

use anyhow::{bail, Context, Result};

/// One queue's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneStats {
    pub queue: u16,
    pub packets: u64,
    /// Sum and maximum of the packets' lateness, microseconds.
    pub late_sum_us: u64,
    pub late_max_us: u64,
    /// Packets released more than 1 ms late.
    pub late_over_1ms: u64,
}

/// The element's report: one entry per queue it served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelayStats {
    pub lanes: Vec<LaneStats>,
}

impl DelayStats {
    /// The report as written to the stats file.
    pub fn to_text(&self) -> String {
        self.lanes
            .iter()
            .map(|l| {
                format!(
                    "queue={} packets={} late_sum_us={} late_max_us={} late_over_1ms={}\n",
                    l.queue, l.packets, l.late_sum_us, l.late_max_us, l.late_over_1ms
                )
            })
            .collect()
    }

    /// Reads a stats file's text; every field of every line must be there.
    pub fn parse(text: &str) -> Result<DelayStats> {
        let mut lanes = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let field = |key: &str| -> Result<u64> {
                let value = line
                    .split_whitespace()
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                    .with_context(|| format!("no {key} in {line:?}"))?;
                value
                    .parse()
                    .with_context(|| format!("{key}={value:?} is not a count"))
            };
            let queue = field("queue")?;
            if queue > u64::from(u16::MAX) {
                bail!("queue {queue} is out of range");
            }
            lanes.push(LaneStats {
                queue: queue as u16,
                packets: field("packets")?,
                late_sum_us: field("late_sum_us")?,
                late_max_us: field("late_max_us")?,
                late_over_1ms: field("late_over_1ms")?,
            });
        }
        Ok(DelayStats { lanes })
    }

    fn packets(&self) -> u64 {
        self.lanes.iter().map(|l| l.packets).sum()
    }

    /// The mean lateness over every queue's packets; `None` if it held none.
    pub fn mean_lateness(&self) -> Option<Duration> {
        let packets = self.packets();
        let sum: u64 = self.lanes.iter().map(|l| l.late_sum_us).sum();
        (packets > 0).then(|| Duration::from_micros(sum / packets))
    }

    /// The share of the packets released more than 1 ms late; `None` if it held none.
    pub fn late_share(&self) -> Option<f64> {
        let packets = self.packets();
        let late: u64 = self.lanes.iter().map(|l| l.late_over_1ms).sum();
        (packets > 0).then(|| late as f64 / packets as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_totals() {
        // The household phase of a run on a busy machine (2026-12-01): 33392 and 30150 packets,
        // means 5485 and 6071 us.
        let stats = DelayStats {
            lanes: vec![
                LaneStats {
                    queue: 1,
                    packets: 33392,
                    late_sum_us: 33392 * 5485,
                    late_max_us: 96812,
                    late_over_1ms: 17547,
                },
                LaneStats {
                    queue: 2,
                    packets: 30150,
                    late_sum_us: 30150 * 6071,
                    late_max_us: 98423,
                    late_over_1ms: 15885,
                },
            ],
        };
        assert_eq!(DelayStats::parse(&stats.to_text()).unwrap(), stats);
        // (33392 * 5485 + 30150 * 6071) / 63542 = 5763.05 us.
        assert_eq!(stats.mean_lateness(), Some(Duration::from_micros(5763)));
        let share = stats.late_share().unwrap();
        assert!((share - 33432.0 / 63542.0).abs() < 1e-12, "{share}");
        assert_eq!(DelayStats::default().mean_lateness(), None);
        assert_eq!(DelayStats::default().late_share(), None);
    }

    #[test]
    fn a_report_missing_a_field_is_an_error() {
        let err = DelayStats::parse("queue=1 packets=3 late_sum_us=9 late_max_us=4\n").unwrap_err();
        assert!(format!("{err:#}").contains("late_over_1ms"), "{err:#}");
        assert!(
            DelayStats::parse("queue=70000 packets=1 late_sum_us=0 late_max_us=0 late_over_1ms=0").is_err()
        );
        assert!(DelayStats::parse("queue=1 packets=x late_sum_us=0 late_max_us=0 late_over_1ms=0").is_err());
        assert_eq!(DelayStats::parse("").unwrap(), DelayStats::default());
    }
}
