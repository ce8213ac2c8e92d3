//! How much of the machine the run had: the share of CPU time the hypervisor gave to others
//! (`steal` in `/proc/stat`) while the run ran, metric `cpu_stolen`.
//!
//! Why: the testbed's links, delay element and senders all run on this machine's cores. On
//! 2026-12-01 a 20 Mbit/s link delivered 10-12 Mbit/s for seconds with a queue standing, and
//! right after that run 31% of the CPU time was stolen (4% since boot); the runs whose link
//! fell short were the ones with the most stolen (12-18% against 2-6%). A ratio from such a
//! run measures the host, not the controller.

/// The CPU time counters of `/proc/stat`'s first line, in clock ticks: all of them summed, and
/// the stolen part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    total: u64,
    stolen: u64,
}

impl CpuTimes {
    /// The machine's counters now; `None` where `/proc/stat` cannot be read.
    pub fn now() -> Option<CpuTimes> {
        parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The share of the CPU time since `before` that was stolen; `None` if no time passed.
    pub fn stolen_since(&self, before: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(before.total).filter(|&t| t > 0)?;
        Some(self.stolen.saturating_sub(before.stolen) as f64 / total as f64)
    }
}

/// Parses `/proc/stat`: "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
/// (guest time is counted in user time already, so it is left out of the sum).
pub fn parse(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let stolen = *fields.get(7)?;
    let total = fields.iter().take(8).sum();
    Some(CpuTimes { total, stolen })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stolen_share_of_the_time_between_two_reads() {
        let before =
            parse("cpu  837042 91 181431 1823114 5272 0 47516 112778 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n");
        let after = parse("cpu  837086 91 181898 1823972 5272 0 47673 113393 0 0\n");
        let (before, after) = (before.unwrap(), after.unwrap());
        // 44 + 467 + 858 + 157 + 615 ticks passed, 615 of them stolen.
        let share = after.stolen_since(&before).unwrap();
        assert!((share - 615.0 / 2141.0).abs() < 1e-12, "{share}");
        assert_eq!(before.stolen_since(&before), None);
        assert_eq!(parse("cpu  1 2 3"), None, "a kernel without a steal column");
    }
}
