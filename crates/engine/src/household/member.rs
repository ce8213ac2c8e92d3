//! What a household round needs of a flow, whatever holds it to its allocation: a TCP flow's
//! window, a UDP flow's policer or uTP window.

use slipstream_control::{Duration, HouseholdShare, Instant};
use slipstream_household::BudgetPhase;

use crate::api::WindowUpdate;
use crate::flow::{Flow, HouseholdFlow};
use crate::flow_key::Side;
use crate::stats::LinkDirection;
use crate::udp::UdpFlow;

/// A household flow as a round sees it: a TCP flow, held to its allocation by the window of its
/// ACKs, or a UDP flow, held to it by a policer.
pub(crate) trait Member {
    /// The link its bulk data crosses, once known.
    fn link(&self) -> Option<LinkDirection>;
    /// The smallest allocation a flow with a turn gets (two packets).
    fn floor(&self) -> u32;
    /// Bytes its receiver's windows still let the sender send (0 where there is no window).
    fn open_window(&self) -> u64;
    fn rtt_estimate(&self) -> Option<Duration>;
    /// Its path without queues (its smallest round trip), where it measures one.
    fn min_rtt(&self) -> Option<Duration>;
    fn lan_side(&self) -> Side;
    fn rule(&self) -> u16;
    /// Held to its allocation by a policer (a UDP flow), not by a window.
    fn policed(&self) -> bool;
    fn household_mut(&mut self) -> Option<(&mut HouseholdFlow, &mut HouseholdShare)>;
    /// The round's allocation (already in its share, see [`Allocated`]). Returns the window
    /// update a TCP flow whose turn came needs.
    fn allocated(&mut self, round: &Allocated) -> Option<WindowUpdate>;
}

impl Member for Flow {
    fn link(&self) -> Option<LinkDirection> {
        Flow::link(self)
    }
    fn floor(&self) -> u32 {
        Flow::floor(self)
    }
    fn open_window(&self) -> u64 {
        Flow::open_window(self)
    }
    fn rtt_estimate(&self) -> Option<Duration> {
        Flow::rtt_estimate(self)
    }
    fn min_rtt(&self) -> Option<Duration> {
        Flow::min_rtt(self)
    }
    fn lan_side(&self) -> Side {
        Flow::lan_side(self)
    }
    fn rule(&self) -> u16 {
        self.rule
    }
    fn policed(&self) -> bool {
        false
    }
    fn household_mut(&mut self) -> Option<(&mut HouseholdFlow, &mut HouseholdShare)> {
        Flow::household_mut(self)
    }
    fn allocated(&mut self, round: &Allocated) -> Option<WindowUpdate> {
        match (round.was_held, round.window) {
            (true, Some(w)) => self.window_update(round.now, w),
            _ => None,
        }
    }
}

impl Member for UdpFlow {
    fn link(&self) -> Option<LinkDirection> {
        UdpFlow::link(self)
    }
    fn floor(&self) -> u32 {
        UdpFlow::floor(self)
    }
    fn open_window(&self) -> u64 {
        0
    }
    fn rtt_estimate(&self) -> Option<Duration> {
        UdpFlow::rtt_estimate(self)
    }
    fn min_rtt(&self) -> Option<Duration> {
        // Its RTT is a probe's or the handshake's, smoothed: no minimum to add.
        None
    }
    fn lan_side(&self) -> Side {
        UdpFlow::lan_side(self)
    }
    fn rule(&self) -> u16 {
        self.rule
    }
    fn policed(&self) -> bool {
        true
    }
    fn household_mut(&mut self) -> Option<(&mut HouseholdFlow, &mut HouseholdShare)> {
        UdpFlow::household_mut(self)
    }
    fn allocated(&mut self, round: &Allocated) -> Option<WindowUpdate> {
        self.apply_allocation(round);
        None
    }
}

/// One member's allocation in a round.
pub(crate) struct Allocated {
    pub now: Instant,
    /// Bytes per RTT; `None`: held (time-sharing).
    pub window: Option<u32>,
    pub was_held: bool,
    /// The RTT the allocator used for the flow.
    pub rtt: Duration,
    /// What the link's budget is doing this round (`Slowdown` during a coordinated slowdown).
    pub phase: BudgetPhase,
    /// The link's queue is over twice the delay target and best effort's (it came): see
    /// `Link::queue_is_backgrounds`.
    pub best_effort_queue: bool,
    /// The link's queue is under half the delay target: nothing to hold back yet (a `Hold`
    /// round of a link that has not seen enough low rounds to probe).
    pub queue_low: bool,
    /// How a UDP member without a window is held to `window` (`household.udp`).
    pub udp: slipstream_household::UdpEnforcement,
}

/// A member as the table walk hands it over.
pub(crate) type MemberRef<'f> = &'f mut (dyn Member + 'f);
