//! What a link's WAN counters counted in a round: all traffic, and best effort's part of it.

use slipstream_household::BestEffort;

use super::LinkCounters;

impl LinkCounters {
    /// What was counted from `start` to these counters; `None` if they went back (the
    /// interface came up again).
    pub(super) fn since(self, start: LinkCounters) -> Option<LinkCounters> {
        Some(LinkCounters {
            bytes: self.bytes.checked_sub(start.bytes)?,
            packets: self.packets.checked_sub(start.packets)?,
            header_bytes: self.header_bytes,
        })
    }
}

/// Best effort's traffic in what the link's counters counted between two readings (`all`):
/// all of it less the background's packets (with the link-layer header each).
pub(super) fn best_effort(all: LinkCounters, background: BestEffort) -> BestEffort {
    let background_bytes = background.bytes + background.packets * all.header_bytes;
    BestEffort {
        bytes: all.bytes.saturating_sub(background_bytes),
        packets: all.packets.saturating_sub(background.packets),
    }
}
