//! The whole machine's CPU time from `/proc/stat`: the datapath scenario's machine figures.

/// The machine-wide CPU counters of `/proc/stat`'s `cpu` line, in seconds (all cores summed).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MachineCpu {
    pub user: f64,
    pub system: f64,
    pub softirq: f64,
    /// Everything but idle and iowait.
    pub busy: f64,
}

impl MachineCpu {
    /// Reads `/proc/stat`.
    pub fn read() -> Option<MachineCpu> {
        let hz = slipstream_testbed::daemon::clock_ticks().ok()?;
        parse_machine_cpu(&std::fs::read_to_string("/proc/stat").ok()?, hz)
    }

    /// `self - earlier`, field by field.
    pub fn since(&self, earlier: &MachineCpu) -> MachineCpu {
        MachineCpu {
            user: self.user - earlier.user,
            system: self.system - earlier.system,
            softirq: self.softirq - earlier.softirq,
            busy: self.busy - earlier.busy,
        }
    }
}

/// Parses the aggregate `cpu` line of `/proc/stat` (ticks divided by `hz`).
pub fn parse_machine_cpu(text: &str, hz: f64) -> Option<MachineCpu> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse::<f64>().map(|t| t / hz))
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice] (guest is in user).
    let g = |i: usize| v.get(i).copied().unwrap_or(0.0);
    let (user, nice, system, irq, softirq, steal) = (g(0), g(1), g(2), g(5), g(6), g(7));
    Some(MachineCpu {
        user: user + nice,
        system,
        softirq,
        busy: user + nice + system + irq + softirq + steal,
    })
}

#[cfg(test)]
#[path = "cpu_tests.rs"]
mod tests;
