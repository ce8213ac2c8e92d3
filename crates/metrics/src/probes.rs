//! The link-delay prober's counters (ICMP timestamp or echo requests to a reflector beyond the
//! access link): probes sent, answered and lost, the last round-trip time and the target. The
//! packet thread writes them as it probes; the collector reads them at scrape time, `slipstream
//! status` through [`ProbeCounters::target`].

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::{Registry, Unit};

use crate::families::{counter, gauge, gauge_family};

/// The prober's counters, shared (in an `Arc`) with the collector and the control socket.
#[derive(Debug, Default)]
pub struct ProbeCounters {
    /// Requests sent, timestamp or echo (a send that failed counts, and is lost).
    pub sent: AtomicU64,
    /// Requests answered in time.
    pub answered: AtomicU64,
    /// Requests unanswered in time, pushed out of the table of waiting probes, or not sent.
    pub lost: AtomicU64,
    /// The round-trip time of the last answered request, microseconds (0: none yet).
    pub last_rtt_us: AtomicU64,
    /// Where probes go: an address, `off`, or why there is none.
    target: Mutex<String>,
}

impl ProbeCounters {
    /// Sets what [`ProbeCounters::target`] says.
    pub fn set_target(&self, target: String) {
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = target;
    }

    /// Where probes go: `192.0.2.1 (gateway via wan)`, `off`, `none: ...` (empty before the
    /// packet thread looked).
    pub fn target(&self) -> String {
        self.target.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The last round-trip time in seconds, if any probe was answered.
    pub fn last_rtt_seconds(&self) -> Option<f64> {
        match self.last_rtt_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(us as f64 / 1e6),
        }
    }
}

/// Adds the prober's counters to a registry made by [`crate::registry`]:
/// `slipstream_probes_{sent,answered,lost}_total`, `slipstream_probe_rtt_seconds` (once a probe
/// was answered) and `slipstream_probe_target_info{target}`.
pub fn register_probe_counters(registry: &mut Registry, counters: Arc<ProbeCounters>) {
    registry.register_collector(Box::new(ProbeCollector { counters }));
}

#[derive(Debug)]
struct ProbeCollector {
    counters: Arc<ProbeCounters>,
}

impl Collector for ProbeCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
        let c = &self.counters;
        let get = |v: &AtomicU64| v.load(Ordering::Relaxed);
        for (name, help, value) in [
            (
                "probes_sent",
                "Link-delay probes (ICMP timestamp or echo requests to the reflector) sent while the engine \
                 wanted them (flows nothing else times, such as QUIC).",
                &c.sent,
            ),
            (
                "probes_answered",
                "Link-delay probes answered in time.",
                &c.answered,
            ),
            (
                "probes_lost",
                "Link-delay probes lost: unanswered in time, or not sent (an error).",
                &c.lost,
            ),
        ] {
            counter(&mut enc, name, help, None, get(value))?;
        }
        if let Some(rtt) = c.last_rtt_seconds() {
            gauge(
                &mut enc,
                "probe_rtt",
                "Round-trip time of the last answered link-delay probe: the link's base delay \
                 plus its queueing delay.",
                Some(&Unit::Seconds),
                rtt,
            )?;
        }
        let target = c.target();
        gauge_family(
            &mut enc,
            "probe_target_info",
            "Where link-delay probes go: the reflector's address, off, or none and why.",
            None,
            (!target.is_empty()).then_some(([("target", target)], 1u32)),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_counters_render() {
        let counters = Arc::new(ProbeCounters::default());
        let mut registry = crate::registry(crate::SharedSnapshot::default());
        register_probe_counters(&mut registry, counters.clone());
        let text = crate::render(&registry);
        assert!(text.contains("slipstream_probes_sent_total 0"), "{text}");
        assert!(
            !text.contains("probe_rtt_seconds"),
            "no RTT before an answer:\n{text}"
        );
        assert!(!text.contains("probe_target_info"), "{text}");
        counters.sent.store(5, Ordering::Relaxed);
        counters.answered.store(3, Ordering::Relaxed);
        counters.lost.store(1, Ordering::Relaxed);
        counters.last_rtt_us.store(12_500, Ordering::Relaxed);
        counters.set_target("192.0.2.1 (gateway via wan)".into());
        let text = crate::render(&registry);
        for line in [
            "slipstream_probes_sent_total 5",
            "slipstream_probes_answered_total 3",
            "slipstream_probes_lost_total 1",
            "slipstream_probe_rtt_seconds 0.0125",
            "slipstream_probe_target_info{target=\"192.0.2.1 (gateway via wan)\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
