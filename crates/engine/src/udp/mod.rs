//! Background UDP flows (QUIC, uTP): tracked, measured and held to their household allocation
//! by a shaper (or a policer), since they have no window to lower.
//!
//! A UDP flow of a household rule is a household flow like a TCP one: it has a LAN host, a link
//! (the one its bulk data crosses), a rule with weight, priority and minimum rate, and each
//! round the allocator gives it bytes in flight. Its packets in the bulk direction then pass
//! through a [`policer::TokenBucket`] at `allocation / RTT`; what exceeds it waits at the router
//! up to one allocation of bytes (`household.udp = "shape"`, the default) and beyond that is
//! dropped, or CE-marked where the packet is ECN-capable. The other direction (ACKs) always passes.
//!
//! What the router measures without reading an encrypted payload:
//! * the RTT of the path beyond it, once, from the flow's opening exchange: the LAN host's first
//!   packet out and the first answer in (a QUIC Initial and the server's reply, a uTP SYN and
//!   its STATE);
//! * the delivered rate, from the bytes it forwards;
//! * uTP's one-way delays (`utp`); a QUIC flow gives none, and the link is then measured by the
//!   daemon's delay probes (`Engine::probe_interval`).

pub(crate) mod policer;
pub(crate) mod utp;

use std::collections::HashMap;

use slipstream_control::{Duration, HouseholdShare, Instant};

use crate::flow::HouseholdFlow;
use crate::flow_key::{FlowKey, Side};
use crate::goodput::GoodputMeter;
use crate::household::Allocated;
use crate::stats::{FlowSnapshot, LinkDirection, PassReason, UdpSnapshot};
use policer::TokenBucket;
use slipstream_household::{BudgetPhase, UdpEnforcement};
use utp::{UdpKind, UtpTracker};

/// Payload bytes one side must have sent before it can be taken for the bulk sender, and how
/// much more than the other: a QUIC handshake or a few uTP requests decide nothing.
const BULK_MIN_BYTES: u64 = 32 * 1024;
const BULK_RATIO: u64 = 4;
/// While the link's budget is free to grow, a flow's policer lets through at least this much
/// more than it sent last round (see [`UdpFlow::apply_allocation`]).
const HEADROOM: f64 = 2.0;
/// A yielding link cuts a UDP flow's rate by at most this factor per round (Cubic's β, RFC 9438).
const YIELD_STEP: f64 = 0.7;
/// A yielding link takes a step off a UDP flow's rate at most once in this many round trips
/// (unless its queue is well above the target).
const YIELD_ROUNDS: u32 = 3;
/// The largest UDP payload counted as one full-size packet for the flow's floor.
const FULL_SIZE: u32 = 1500;

/// One background UDP flow.
#[derive(Clone, Debug)]
pub(crate) struct UdpFlow {
    pub rule: u16,
    pub last_seen: Instant,
    lan_side: Option<Side>,
    /// Payload bytes each side sent (by [`Side::index`]).
    sent: [u64; 2],
    first_packet: [Option<Instant>; 2],
    /// The far half of the opening exchange (router → server → router).
    rtt: Option<Duration>,
    bulk_sender: Option<Side>,
    /// The largest IP packet the bulk sender sent.
    largest: u32,
    pub utp: UtpTracker,
    /// Household state and allocation; `None` for a rule that is not household control (its UDP
    /// flows are only counted).
    pub household: Option<(HouseholdFlow, HouseholdShare)>,
    pub policer: TokenBucket,
    forwarded: GoodputMeter,
    /// Bulk bytes forwarded (or held to be) since the last allocation, and when that was.
    round_forwarded: u64,
    round_start: Instant,
    /// The link's phase at the last allocation outside a slowdown, and whether the current
    /// slowdown has halved the flow already.
    last_phase: BudgetPhase,
    halved_for_slowdown: bool,
    /// The last yield step taken off the flow's rate.
    last_cut: Option<Instant>,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    pub marked_packets: u64,
    /// Packets the shaper held for a while.
    pub delayed_packets: u64,
    /// The flow had an allocation before.
    allocated_before: bool,
    /// Bytes waiting in the shaper at the last allocation: what the flow forwarded in a round is
    /// what it sent less what still waits.
    round_backlog: u64,
    /// The rule was removed by a reload: every packet passes.
    released: bool,
}

impl UdpFlow {
    pub(crate) fn new(rule: u16, now: Instant, household: bool) -> UdpFlow {
        UdpFlow {
            rule,
            last_seen: now,
            lan_side: None,
            sent: [0; 2],
            first_packet: [None; 2],
            rtt: None,
            bulk_sender: None,
            largest: 0,
            utp: UtpTracker::default(),
            household: household.then(Default::default),
            policer: TokenBucket::default(),
            forwarded: GoodputMeter::default(),
            round_forwarded: 0,
            round_start: now,
            last_phase: BudgetPhase::Start,
            halved_for_slowdown: false,
            last_cut: None,
            dropped_packets: 0,
            dropped_bytes: 0,
            marked_packets: 0,
            delayed_packets: 0,
            round_backlog: 0,
            allocated_before: false,
            released: false,
        }
    }

    /// Learns the LAN side from the first packet that says where it came from.
    pub(crate) fn note_lan_side(&mut self, side: Side, from_lan: Option<bool>) {
        if self.lan_side.is_none() {
            self.lan_side = from_lan.map(|lan| if lan { side } else { side.other() });
        }
    }

    /// The LAN endpoint: the one a packet said, else the flow's lower address.
    pub(crate) fn lan_side(&self) -> Side {
        self.lan_side.unwrap_or(Side::Low)
    }

    /// A packet of `payload` bytes (`ip_len` with headers) from `side` arrived at `at`.
    pub(crate) fn on_packet(&mut self, side: Side, at: Instant, payload: u32, ip_len: u32) {
        let i = side.index();
        self.sent[i] += u64::from(payload);
        if self.first_packet[i].is_none() {
            self.first_packet[i] = Some(at);
            // The answer to the LAN host's opening packet: the far half of a round trip.
            if side != self.lan_side() {
                if let Some(opened) = self.first_packet[side.other().index()] {
                    self.rtt = Some(at.saturating_since(opened)).filter(|d| !d.is_zero());
                }
            }
        }
        let (mine, theirs) = (self.sent[i], self.sent[side.other().index()]);
        if self.bulk_sender != Some(side) && mine >= BULK_MIN_BYTES && mine > BULK_RATIO * theirs {
            self.bulk_sender = Some(side);
        }
        if self.bulk_sender == Some(side) {
            self.largest = self.largest.max(ip_len.min(FULL_SIZE));
        }
    }

    pub(crate) fn bulk_sender(&self) -> Option<Side> {
        self.bulk_sender
    }

    /// Which access link the flow loads, once its bulk direction is known.
    pub(crate) fn link(&self) -> Option<LinkDirection> {
        let sender = self.bulk_sender?;
        Some(if sender == self.lan_side() {
            LinkDirection::Upload
        } else {
            LinkDirection::Download
        })
    }

    /// Two full-size packets: the smallest allocation a flow with a turn gets.
    pub(crate) fn floor(&self) -> u32 {
        2 * self.largest.max(1200)
    }

    pub(crate) fn rtt_estimate(&self) -> Option<Duration> {
        self.rtt
    }

    /// Bulk bytes forwarded (they passed the policer).
    pub(crate) fn on_forwarded(&mut self, now: Instant, bytes: u32) {
        self.forwarded.on_acked(now, bytes);
        self.round_forwarded += u64::from(bytes);
    }

    pub(crate) fn forwarded_bytes(&self) -> u64 {
        self.forwarded.total_acked()
    }

    pub(crate) fn goodput_bits_per_second(&self) -> f64 {
        self.forwarded.bits_per_second()
    }

    pub(crate) fn on_tick(&mut self, now: Instant) {
        self.forwarded.roll(now);
    }

    pub(crate) fn release(&mut self) {
        self.released = true;
        self.household = None;
        self.policer.stop();
    }

    pub(crate) fn is_released(&self) -> bool {
        self.released
    }

    pub(crate) fn household_mut(&mut self) -> Option<(&mut HouseholdFlow, &mut HouseholdShare)> {
        self.household.as_mut().map(|(state, share)| (state, share))
    }

    /// The allocator's decision, as the policer's rate: the allocation per RTT (the RTT the
    /// allocator used). A loss-based sender loses half its rate at each drop and gets it back
    /// one packet per round trip, where a TCP sender held by its window loses nothing; so:
    /// * while the budget grows (its queue well below the target: `Probe`, `Recover`, or before
    ///   it has decided), the rate is at least [`HEADROOM`] times what the flow sent last round,
    ///   so a sender in slow start is not cut while the link has room; the flow's first
    ///   allocation sets no rate at all unless the link yields;
    /// * near the target (`Hold`), the allocation, but not below what the flow sent: it may not
    ///   grow, and is not cut;
    /// * above it (`Yield`), the allocation, but at least [`YIELD_STEP`] of what the flow sent
    ///   and at most what it sent:
    ///   one step per [`YIELD_ROUNDS`] rounds, as a loss makes a sender take, or every round
    ///   while best effort's queue is over twice the target;
    /// * a round that measured nothing (`Idle`) changes nothing;
    /// * during a coordinated slowdown, if the link's last round held or yielded (a queue near
    ///   the target stands), half of what the flow sent: one loss, one halving, and the queue
    ///   drains for the base measurement (the allocation's two packets would make the sender
    ///   lose a window per round trip and start over from nothing); if the budget was growing,
    ///   the queue is empty already and the rate stays;
    /// * a held flow (time-sharing) gets two packets per RTT.
    ///
    /// Shaped (`household.udp = "shape"`, the default), what is over the rate waits instead of
    /// being dropped, and four rules differ, each from a lab trace of a real QUIC sender that
    /// one mark at the wrong moment cost seconds of regrowth: the flow's first allocation sets
    /// no rate; nothing is held back while the budget grows or holds with under half the
    /// target queued; the flow's first yield keeps twice what it sent; a slowdown leaves room
    /// for twice what it sent to wait (see `docs/udp.md`).
    pub(crate) fn apply_allocation(&mut self, round: &Allocated) {
        // What went on to the link: what arrived, less what the shaper holds on to.
        let backlog = self.policer.backlog(round.now);
        let arrived = std::mem::take(&mut self.round_forwarded);
        let sent = (arrived + std::mem::replace(&mut self.round_backlog, backlog)).saturating_sub(backlog);
        let interval = round
            .now
            .saturating_since(std::mem::replace(&mut self.round_start, round.now));
        let used = if interval.is_zero() {
            0
        } else {
            (sent as f64 * round.rtt.as_secs_f64() / interval.as_secs_f64()) as u64
        };
        let floor = u64::from(self.floor() / 2);
        let first = !std::mem::replace(&mut self.allocated_before, true);
        let growing = |phase| {
            matches!(
                phase,
                BudgetPhase::Start | BudgetPhase::Probe | BudgetPhase::Recover
            )
        };
        if round.phase == BudgetPhase::Slowdown {
            // Drain a queue that stands, once per slowdown; an empty one needs nothing.
            if growing(self.last_phase) || self.halved_for_slowdown {
                return;
            }
            self.halved_for_slowdown = true;
            // Shaped, the half it may not send waits for the slowdown's two rounds instead of
            // being marked: the sender keeps its window, the bottleneck's queue drains all the
            // same (lab quic: a slowdown's mark and a yield's step together took a third of
            // the link away for 7 s). The room is twice what it sent: two rounds at half the
            // rate hold back one round's worth, and a round is not exactly one round trip (lab
            // quic at 50 Mbit/s: room for one round's worth got one mark per slowdown).
            self.policer
                .set_with_queue(round.now, (used / 2).max(floor), round.rtt, 2 * used);
            return;
        }
        self.last_phase = round.phase;
        self.halved_for_slowdown = false;
        let per_rtt = match (round.window, round.phase) {
            // The flow's first allocation comes while it starts, often before the budget has
            // grown to its two packets (time-sharing): what it sent so far includes its
            // handshake's round trip, and it may be in slow start, which a drop or mark ends
            // for good (lab quic: 25 CE marks in its first half second, then 7 s of linear
            // growth from 3.3 to 9.4 Mbit/s; the link's first round may even yield, for want
            // of a rate measured). Unless best effort's queue is on the link, it is left alone.
            (_, _) if first && !round.best_effort_queue => return,
            // The round measured nothing: nothing to act on (a budget that has not measured
            // anything yet holds every flow for want of two packets each).
            (_, BudgetPhase::Idle) => return,
            (None, _) => floor,
            // Shaping while the budget grows, or holds on a link with no queue to speak of:
            // nothing to hold back (the link has room), and a wait or a mark in slow start ends
            // it for good (lab quic: one CE mark at 0.6 s, a Hold round before the link had
            // probed, then 7 s of linear growth from 3.4 to 9.4 Mbit/s).
            (Some(_), phase)
                if round.udp == UdpEnforcement::Shape
                    && (growing(phase) || (phase == BudgetPhase::Hold && round.queue_low)) =>
            {
                self.policer.stop();
                return;
            }
            (Some(w), phase) if growing(phase) => u64::from(w).max((used as f64 * HEADROOM) as u64),
            // Holding: not below what the flow sends (it may not grow).
            (Some(w), BudgetPhase::Hold) => u64::from(w).max(used),
            // Yielding: at most [`YIELD_STEP`] of what it sends per step. The sender takes 0.5
            // (Reno) or 0.7 (Cubic) of its rate at the first drop or mark of a round trip by
            // itself, and the queue its overshoot built drains for a round trip or two after
            // that: a step every round before then compounds to nothing (lab utp: 9.6 to 0.2
            // Mbit/s in a second, from a 23 ms queue). So a step every [`YIELD_ROUNDS`] rounds,
            // unless best effort arrived (its queue, over twice the target): then every round,
            // about a second from the whole link to the floor.
            (Some(w), BudgetPhase::Yield) => {
                let recently = self
                    .last_cut
                    .is_some_and(|t| round.now.saturating_since(t) < round.rtt * YIELD_ROUNDS);
                if recently && !round.best_effort_queue {
                    return;
                }
                let first_cut = self.last_cut.is_none();
                self.last_cut = Some(round.now);
                if first_cut && round.udp == UdpEnforcement::Shape && !round.best_effort_queue {
                    // The flow's first yield is to its own slow start's queue: what it sent last
                    // round is half what it sends now, and a cut to it (one CE mark) leaves a
                    // sender growing a packet per round trip from a third of the link (lab quic:
                    // 3.3 to 9.4 Mbit/s in 7 s). Held at twice that instead, its overshoot
                    // waits in the shaper until one mark ends the slow start with a window that
                    // fills its share.
                    return self.policer.set(
                        round.now,
                        u64::from(w).max((used as f64 * HEADROOM) as u64),
                        round.rtt,
                    );
                }
                // Never above what it sends: a budget that grew past the flow's use (a
                // sender that grows a packet per round trip lags a budget that probes) would
                // otherwise take many rounds of cuts before one reached the flow.
                // (A round it sent nothing in says nothing of its use.)
                let sending = if used == 0 { u64::MAX } else { used };
                u64::from(w)
                    .min(sending)
                    .max((used as f64 * YIELD_STEP) as u64)
                    .max(floor)
            }
            // Key et al.'s controllers: the allocation as it is.
            (Some(w), _) => u64::from(w),
        };
        self.policer.set(round.now, per_rtt, round.rtt);
    }

    /// The flow as `slipstream flows` and the metrics list flows (`rule` is its class index,
    /// which the engine renumbers).
    pub(crate) fn flow_snapshot(&self, key: &FlowKey) -> FlowSnapshot {
        let share = self.household.as_ref().map(|(_, share)| share);
        FlowSnapshot {
            rule: self.rule,
            sender: self.bulk_sender.map(|s| key.endpoint(s)),
            receiver: self.bulk_sender.map(|s| key.endpoint(s.other())),
            controller: None,
            rtt: self.rtt,
            goodput_bits_per_second: self.goodput_bits_per_second(),
            acked_bytes: self.forwarded_bytes(),
            host_window: None,
            forwarded_window: None,
            unclamped_reason: match (self.released, &self.household, self.policer.rate()) {
                (true, _, _) => Some(PassReason::RuleRemoved),
                (false, None, _) => Some(PassReason::Observed),
                (false, Some(_), None) => Some(PassReason::NoTarget),
                (false, Some(_), Some(_)) => None,
            },
            allocation: share.and_then(|s| s.window()),
            held: share.is_some_and(|s| s.is_held()),
            link: self.link(),
            udp: Some(self.snapshot()),
        }
    }

    fn snapshot(&self) -> UdpSnapshot {
        UdpSnapshot {
            kind: match self.utp.kind {
                UdpKind::Utp => "utp",
                UdpKind::Other | UdpKind::Unknown => "udp",
            },
            policed_bits_per_second: self.policer.rate().map(|r| r * 8.0),
            dropped_packets: self.dropped_packets,
            dropped_bytes: self.dropped_bytes,
            marked_packets: self.marked_packets,
            delayed_packets: self.delayed_packets,
        }
    }
}

/// The UDP flows, bounded like the TCP table: a full table refuses new flows (their packets pass
/// unpoliced), idle flows expire.
#[derive(Debug, Default)]
pub(crate) struct UdpTable {
    flows: HashMap<FlowKey, UdpFlow>,
}

impl UdpTable {
    pub(crate) fn len(&self) -> usize {
        self.flows.len()
    }

    pub(crate) fn contains(&self, key: &FlowKey) -> bool {
        self.flows.contains_key(key)
    }

    /// The flow of `key`, created with `make` if the table has room; `None` if it has not.
    /// The bool says whether it was created.
    pub(crate) fn admit(
        &mut self,
        key: FlowKey,
        max_flows: usize,
        make: impl FnOnce() -> UdpFlow,
    ) -> Option<(&mut UdpFlow, bool)> {
        if self.flows.contains_key(&key) {
            return self.flows.get_mut(&key).map(|f| (f, false));
        }
        if self.flows.len() >= max_flows {
            return None;
        }
        Some((self.flows.entry(key).or_insert_with(make), true))
    }

    /// Ticks every flow; drops those idle for `idle_timeout`. Returns how many went.
    pub(crate) fn expire(&mut self, now: Instant, idle_timeout: Duration) -> u64 {
        let before = self.flows.len();
        self.flows.retain(|_, flow| {
            flow.on_tick(now);
            now.saturating_since(flow.last_seen) < idle_timeout
        });
        (before - self.flows.len()) as u64
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&FlowKey, &UdpFlow)> {
        self.flows.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&FlowKey, &mut UdpFlow)> {
        self.flows.iter_mut()
    }
}

#[cfg(test)]
mod tests;
