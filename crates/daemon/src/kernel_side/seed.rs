//! Flows running across a restart: put into the kernel's map from conntrack at start.

use std::sync::atomic::Ordering;
use std::time::Instant as StdInstant;

use slipstream_ebpf::{DirKey, FlowCfg};
use slipstream_engine::FlowKey;
use tracing::warn;

use super::{KernelSide, CONNTRACK_TIMEOUT, TCP_ESTABLISHED};

impl KernelSide {
    /// Puts the classed connections conntrack knows into the map (at start: flows running
    /// across a restart), each direction with its sender's window scale from conntrack. Both
    /// sides of a NATed connection are written (the LAN side is the one the programs see; the
    /// other is removed unclaimed). Flows whose scales conntrack does not know are left out:
    /// they could not be clamped anyway. Returns how many flows were written.
    pub(crate) fn seed_from_conntrack(&mut self, limit: usize) -> usize {
        let marked = slipstream_conntrack::Conntrack::open(CONNTRACK_TIMEOUT)
            .and_then(|mut ct| ct.marked(self.mark_mask, limit));
        let marked = match marked {
            Ok(m) => m,
            Err(e) => {
                warn!("eBPF datapath: reading conntrack for flows running across the restart failed ({e}): they stay unclamped");
                return 0;
            }
        };
        let shift = self.mark_mask.trailing_zeros();
        let mut seeded = 0;
        for m in marked {
            let Ok(rule) = u16::try_from((m.mark & self.mark_mask) >> shift) else {
                continue;
            };
            // Closing and closed connections linger in conntrack for a while: not running.
            if m.entry.tcp.is_none_or(|t| t.state != TCP_ESTABLISHED) {
                continue;
            }
            let (orig, reply) = (m.entry.original, m.entry.reply);
            let mut sides = vec![orig, (reply.1, reply.0)];
            sides.dedup();
            for (src, dst) in sides {
                let Some(slipstream_conntrack::Scales::Known { a, b }) = m.entry.scales_of(src, dst) else {
                    continue;
                };
                let (Some(there), Some(back)) = (DirKey::new(src, dst), DirKey::new(dst, src)) else {
                    continue;
                };
                let written = [(there, a), (back, b)].iter().try_for_each(|(dir, scale)| {
                    self.tc.set_flow(
                        dir,
                        FlowCfg {
                            rule,
                            scale: *scale,
                            ..FlowCfg::default()
                        },
                    )
                });
                match written {
                    Ok(()) => {
                        let (key, _) = FlowKey::from_packet(src.ip(), src.port(), dst.ip(), dst.port());
                        self.mapped.insert(key, StdInstant::now());
                        seeded += 1;
                    }
                    Err(e) => self.warn(&e),
                }
            }
        }
        self.counters.seeded.fetch_add(seeded as u64, Ordering::Relaxed);
        seeded
    }
}
