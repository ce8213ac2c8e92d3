//! Household control in the engine: one shared budget per access link for every flow whose rule
//! says `controller = "household"`, run in rounds (about one RTT, or the budget controller's own
//! interval). Each round: the link's queueing-delay samples are filtered into one estimate
//! (`slipstream_household::link_delay`), the budget controller decides the budget (or a
//! coordinated slowdown holds it at its minimum), and the allocator splits it over the flows,
//! whose ACKs then carry their allocation (`HouseholdShare`). A held flow whose turn comes while
//! its receiver has nothing to acknowledge gets a window update the daemon sends.

use slipstream_control::{Duration, Instant};
use slipstream_household::link_delay::{FlowDelay, Slowdown, SlowdownRound};
use slipstream_household::{
    allocate_with, AllocScratch, Allocation, AnyBudget, BestEffort, BudgetController, BudgetPhase,
    FlowDemand, HouseholdConfig, LinkDelay, LinkRound, ShareSpec,
};

use crate::api::WindowUpdate;
use crate::flow_key::FlowKey;
use crate::stats::{LinkDirection, LinkSnapshot};
use ack_room::{ack_cap, AcksQueue, OppositeLink, StandingQueue};
use capacity::Capacity;
use counted::best_effort;
use keys::{host_key, sort_key};
use min_budget::{min_budget, one_floor};
use one_way_probe::OneWayProbe;

mod ack_room;
mod capacity;
mod counted;
mod keys;
mod member;
mod min_budget;
mod one_way_probe;
mod opposite_queue;
pub(crate) use member::{Allocated, MemberRef};

/// A link's budget starts at ten segments (like an initial window) and stays within these bounds.
const INITIAL_SEGMENTS: u64 = 10;
const MAX_BUDGET: u64 = 256 << 20;
/// Round length before any RTT is known.
const DEFAULT_RTT: Duration = Duration::from_millis(100);

/// One access link's household state.
#[derive(Clone, Debug)]
pub(crate) struct Link {
    direction: LinkDirection,
    pub delay: LinkDelay,
    /// The opposite link's queue as this link's flows' ACKs met it (see [`AcksQueue`]).
    pub acks_queue: AcksQueue,
    /// Whether the link's own queue (its one-way samples' view) stands, for the opposite link's
    /// room for its ACKs (see [`StandingQueue`]).
    own_queue: StandingQueue,
    /// The background's rate on the link (bytes/s, its flows' delivery) in its last round, where
    /// its budget was at most one flow's floor: what it keeps there while it yields (see
    /// [`ack_room`]); `None` while it takes more, or has no flows.
    at_floor_rate: Option<f64>,
    slowdown: Slowdown,
    controller: AnyBudget,
    budget: Option<u64>,
    next_round: Option<Instant>,
    round_start: Instant,
    /// Bytes acknowledged by the link's household flows since the round started.
    pub delivered: u64,
    /// The background's own packets on this link since the round started (every classed flow's
    /// data, as the interface counts it), taken off the link's counters to leave best effort's.
    pub background: BestEffort,
    /// The link's household flows' own packets on the opposite link (their ACKs) since the
    /// round started, as `background` counts them (see [`ack_room`]).
    pub acks_across: BestEffort,
    /// The link's interface counters: the latest the shell gave, and those at the round's start.
    counters: Option<LinkCounters>,
    counters_at_round_start: Option<LinkCounters>,
    /// Best effort's traffic as counted in the previous round (see [`best_effort`]).
    best_effort_before: Option<BestEffort>,
    /// The link's capacity as its counters saw it (see [`Capacity`]), and whether the last
    /// round carried [`capacity::FULL_SHARE`] of it (`None` without counters): a link that is not full
    /// holds no queue.
    capacity: Capacity,
    full: Option<bool>,
    last: LinkSnapshot,
    /// The daemon's delay probes as one more flow of the link (their own base), for links whose
    /// flows cannot be timed (QUIC); see `Engine::on_probe_sample`.
    pub probe_delay: FlowDelay,
    /// The halves of the ICMP timestamp probes that cross this link (see `one_way_probe`).
    pub one_way_probe: OneWayProbe,
}

/// What the router's WAN interfaces counted in one direction since they came up: all traffic
/// that crossed the access link, best effort's and the background's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Bytes, with the link layer's header ([`LinkCounters::header_bytes`] per packet).
    pub bytes: u64,
    /// Packets.
    pub packets: u64,
    /// Link-layer header per packet that the byte counter includes (14 for Ethernet, 0 for
    /// PPP): added to each of the background's IP packets before they are taken off.
    pub header_bytes: u64,
}

impl Link {
    /// Whether the link's last round had household flows and only round trips timed them:
    /// without one-way probes its queue cannot be told from the opposite link's.
    pub(crate) fn timed_by_round_trips_only(&self) -> bool {
        self.last.flows > 0 && !self.delay.flows_timed_alone()
    }

    /// Whether this link may hold the queue that both links' round trips read: it is full, its
    /// background has members, and none of them timed its queue alone last round (no
    /// timestamps). See [`Link::reads_only_the_opposite_queue`].
    fn holds_the_sum_of_queues(&self) -> bool {
        self.last.flows > 0 && self.full == Some(true) && self.delay.own_queue_delay().is_none()
    }

    /// Whether this link's last round read only round trips (no timestamps) while the link was
    /// not full: it held no queue, so what its round trips met was the opposite link's.
    fn reads_only_the_opposite_queue(&self) -> bool {
        self.full == Some(false) && self.delay.own_queue_delay().is_none()
    }

    fn new(direction: LinkDirection, config: &HouseholdConfig) -> Link {
        Link {
            direction,
            delay: LinkDelay::default(),
            acks_queue: AcksQueue::default(),
            own_queue: StandingQueue::default(),
            at_floor_rate: None,
            slowdown: Slowdown::default(),
            controller: config.budget.build(0),
            budget: None,
            next_round: None,
            round_start: Instant::ZERO,
            delivered: 0,
            background: BestEffort::default(),
            acks_across: BestEffort::default(),
            counters: None,
            counters_at_round_start: None,
            best_effort_before: None,
            capacity: Capacity::default(),
            full: None,
            // Never calibrated against the link's last queue (a latecomer's correction): the
            // probes start with the flow they measure, before its queue, and a base set below
            // the path by a slow start's queue read a phantom queue just under the target,
            // which no rule undid (model, 50 Mbit/s: the QUIC flow held at 0.14 of the link).
            probe_delay: {
                let mut probes = FlowDelay::default();
                probes.restart();
                probes
            },
            one_way_probe: OneWayProbe::default(),
            last: LinkSnapshot::idle(direction, config.budget.kind()),
        }
    }
}

/// Both links and the scratch space of a round.
#[derive(Clone, Debug)]
pub(crate) struct Household {
    pub config: HouseholdConfig,
    pub links: [Link; 2],
    demands: Vec<FlowDemand>,
    held_before: Vec<bool>,
    allocations: Vec<Allocation>,
    scratch: AllocScratch,
    rtts: Vec<Duration>,
    min_rtts: Vec<Duration>,
    /// A round's flows as the table walk finds them, and their keys to sort them by.
    found_demands: Vec<FlowDemand>,
    found_held: Vec<bool>,
    by_key: Vec<(u128, u32)>,
    /// Flows that are not IPv4 (see `sort_key`).
    other_keys: Vec<(FlowKey, u32)>,
    /// Best-effort UDP flows the connection tracker sees sending steadily (calls, games).
    pub steady_flows: usize,
}

impl Household {
    pub(crate) fn new(config: HouseholdConfig) -> Household {
        Household {
            links: [
                Link::new(LinkDirection::Download, &config),
                Link::new(LinkDirection::Upload, &config),
            ],
            config,
            demands: Vec::new(),
            held_before: Vec::new(),
            allocations: Vec::new(),
            scratch: AllocScratch::default(),
            rtts: Vec::new(),
            min_rtts: Vec::new(),
            found_demands: Vec::new(),
            found_held: Vec::new(),
            by_key: Vec::new(),
            other_keys: Vec::new(),
            steady_flows: 0,
        }
    }

    /// New settings (a reload): a new budget controller kind starts from the current budget.
    pub(crate) fn reconfigure(&mut self, config: HouseholdConfig) {
        if config.budget != self.config.budget {
            for link in &mut self.links {
                link.controller = config.budget.build(link.budget.unwrap_or(0));
                link.last.controller = config.budget.kind();
            }
        }
        self.config = config;
    }

    /// Whether a round of some link is due (cheap; called per packet).
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.links.iter().any(|l| l.next_round.is_none_or(|t| now >= t))
    }

    /// The base RTT the link's last round used (the median of its flows').
    pub(crate) fn base_rtt(&self, which: usize) -> Option<Duration> {
        self.links[which].last.base_rtt
    }

    pub(crate) fn snapshot(&self) -> Vec<LinkSnapshot> {
        self.links.iter().map(|l| l.last.clone()).collect()
    }

    /// A flow that is no household flow opened: each link with household flows hears of it (the
    /// SYN does not say which way its data will flow).
    pub(crate) fn on_competitor(&mut self, now: Instant) {
        for link in &mut self.links {
            if link.last.flows > 0 {
                link.controller.on_competitor(now);
            }
        }
    }

    /// A flow whose SYN was reported by [`Household::on_competitor`] was classed as background
    /// at its SYN-ACK: the links take it back.
    pub(crate) fn on_competitor_retracted(&mut self) {
        for link in &mut self.links {
            if link.last.flows > 0 {
                link.controller.on_competitor_retracted();
            }
        }
    }

    /// The WAN interfaces' counters, downlink then uplink (the shell reads them often).
    pub(crate) fn on_link_counters(&mut self, counters: [LinkCounters; 2]) {
        for (link, c) in self.links.iter_mut().zip(counters) {
            if link
                .counters
                .is_some_and(|old| c.bytes < old.bytes || c.packets < old.packets)
            {
                // Counters went back (an interface came up again): start over.
                link.counters_at_round_start = None;
            }
            link.counters = Some(c);
        }
    }

    /// Whether link `which`'s round is due.
    pub(crate) fn link_due(&self, which: usize, now: Instant) -> bool {
        self.links[which].next_round.is_none_or(|t| now >= t)
    }
}

/// One round of link `which` over the table's flows; window updates are pushed to `updates`.
pub(crate) fn run_round<'f>(
    hh: &mut Household,
    which: usize,
    now: Instant,
    flows: impl Iterator<Item = (&'f FlowKey, MemberRef<'f>)>,
    shares: &dyn Fn(u16) -> ShareSpec,
    updates: &mut Vec<WindowUpdate>,
) {
    let Household {
        config,
        links,
        demands,
        held_before,
        allocations,
        scratch,
        rtts,
        min_rtts,
        found_demands,
        found_held,
        by_key,
        other_keys,
        steady_flows,
    } = hh;
    let opposite = &links[1 - which];
    let opposite_holds_the_sum = opposite.holds_the_sum_of_queues();
    let opposite = OppositeLink::of(opposite, now);
    let link = &mut links[which];
    let opposite = opposite.with_acks_queue(link.acks_queue.end_round());
    // The link's flows in the table's order (memory order: at 10,000 flows the walk over them is
    // most of a round), then in key order below.
    found_demands.clear();
    found_held.clear();
    by_key.clear();
    other_keys.clear();
    let mut found: Vec<Option<MemberRef<'f>>> = Vec::new();
    rtts.clear();
    min_rtts.clear();
    let mut in_flight_total = 0u64;
    let mut floors = 0u64;
    let mut mss = 0u32;
    let mut policed_members = false;
    let interval = now.saturating_since(link.round_start);
    for (key, flow) in flows {
        if flow.link() != Some(link.direction) {
            continue;
        }
        let floor = flow.floor();
        let outstanding = flow.open_window();
        let rtt = flow.rtt_estimate();
        if let Some(min_rtt) = flow.min_rtt() {
            min_rtts.push(min_rtt);
        }
        policed_members |= flow.policed();
        let host = host_key(key, flow.lan_side());
        let rule = flow.rule();
        let Some((state, share)) = flow.household_mut() else {
            continue;
        };
        // What the flow had in flight on average: its delivery rate times its RTT. The router
        // cannot read it off sequence numbers for downloads (it sits next to the receiver).
        let acked = std::mem::take(&mut state.round_acked);
        let in_flight = match (rtt, interval.is_zero()) {
            (Some(rtt), false) => (acked as f64 * rtt.as_secs_f64() / interval.as_secs_f64()) as u64,
            _ => acked,
        };
        // A flow using less than half its window is limited by its sender (cwnd, application):
        // it may grow to twice what it uses, not claim the rest of the budget.
        let demand = match share.window() {
            Some(w) if !share.is_held() && in_flight * 2 < u64::from(w) => 2 * in_flight + u64::from(floor),
            _ => u64::MAX,
        };
        match sort_key(key) {
            Some(k) => by_key.push((k, found.len() as u32)),
            None => other_keys.push((*key, found.len() as u32)),
        }
        found_held.push(share.is_held());
        found_demands.push(FlowDemand {
            host,
            rule,
            share: shares(rule),
            rtt: rtt.unwrap_or(DEFAULT_RTT),
            floor,
            demand,
            outstanding,
            credit: state.credit,
            turn_since: state.turn_since,
            held_since: state.held_since,
        });
        if let Some(r) = rtt {
            rtts.push(r);
        }
        in_flight_total += in_flight;
        floors += u64::from(floor);
        mss = mss.max(floor / 2);
        found.push(Some(flow));
    }
    // Key order: the allocator breaks ties by position, and the flow table's hash order differs
    // from run to run (with it, turns and rounding went to other flows each run). Keys are
    // sorted as values, not through the table (a cache miss per comparison), and IPv4 keys as
    // 96-bit numbers (at 10,000 flows 0.6 ms where comparing socket addresses took 1.5).
    other_keys.sort_unstable();
    by_key.extend(
        other_keys
            .iter()
            .enumerate()
            .map(|(rank, &(_, j))| (1 << 127 | rank as u128, j)),
    );
    by_key.sort_unstable();
    demands.clear();
    demands.extend(by_key.iter().map(|&(_, j)| found_demands[j as usize]));
    held_before.clear();
    held_before.extend(by_key.iter().map(|&(_, j)| found_held[j as usize]));
    let members: Vec<MemberRef<'f>> = by_key
        .iter()
        .filter_map(|&(_, j)| found[j as usize].take())
        .collect();
    link.round_start = now;
    let delivered = std::mem::take(&mut link.delivered);
    let acks_across = std::mem::take(&mut link.acks_across);
    let background = std::mem::take(&mut link.background);
    // What the counters counted in the round, all traffic.
    let round_counts = link
        .counters
        .zip(link.counters_at_round_start)
        .and_then(|(end, start)| end.since(start));
    let counted = round_counts.map(|all| best_effort(all, background));
    let carried = round_counts.map(|all| all.bytes);
    link.counters_at_round_start = link.counters;
    // What lasted two rounds: the interface counts a packet when it arrives, the engine when the
    // daemon reads it, and a backlog that grows in one round (and drains in the next) reads as
    // best effort's traffic in the first. A best effort that is really there is there in both.
    let best_effort = match (
        counted,
        link.best_effort_before.replace(counted.unwrap_or_default()),
    ) {
        (Some(now), Some(before)) => Some(BestEffort {
            bytes: now.bytes.min(before.bytes),
            packets: now.packets.min(before.packets),
        }),
        (now, _) => now,
    };
    if counted.is_none() {
        link.best_effort_before = None;
    }
    let target = config.budget.delay_target();
    let queue_delay = link.delay.end_round();
    link.own_queue.on_round(link.delay.own_queue_delay());
    let base_rtt = median(rtts);
    let min_rtt = median(min_rtts);
    let round_length = config.budget.round_length(base_rtt);
    link.next_round = Some(now + round_length);
    // Also without members: whether a link's queue is best effort's matters to the other link.
    link.last.best_effort_bits_per_second = best_effort
        .filter(|_| !interval.is_zero())
        .map(|be| be.bytes as f64 * 8.0 / interval.as_secs_f64());
    let carried_rate = carried
        .filter(|_| !interval.is_zero())
        .map(|b| b as f64 / interval.as_secs_f64());
    link.full = carried_rate.map(|rate| link.capacity.is_full(now, rate));
    if members.is_empty() {
        link.last.flows = 0;
        link.last.held_flows = 0;
        link.last.in_flight_bytes = 0;
        link.last.goodput_bits_per_second = 0.0;
        link.at_floor_rate = None;
        link.last.phase = BudgetPhase::Idle;
        link.last.targets = None;
        return;
    }
    // Without timestamps both links' round trips read the sum of their queues; a link that is
    // not full holds none of it (see `capacity`), so up to the target is the opposite link's.
    let queue_delay = match queue_delay {
        Some(q) if opposite_holds_the_sum && link.reads_only_the_opposite_queue() => {
            Some(q.saturating_sub(target))
        }
        q => q,
    };
    // A UDP flow's share is a rate (its shaper's or policer's), which a turn's stops and starts
    // would turn into drops: with one on the link the budget keeps one floor.
    let min_budget = if policed_members {
        one_floor(mss)
    } else {
        let bdp = link.capacity.rate(now).zip(min_rtt.or(base_rtt));
        min_budget(
            mss,
            members.len(),
            bdp.map(|(rate, rtt)| rate * rtt.as_secs_f64()),
        )
    };
    // What the controller decides, within the room the opposite link leaves the flows' ACKs.
    let ack_cap =
        ack_cap(opposite, delivered, acks_across, interval, min_rtt.or(base_rtt)).unwrap_or(u64::MAX);
    // A slowdown measures the bases: one flow at its floor at all times, not a duty cycle.
    let slowdown_budget = one_floor(mss);
    let in_force = *link.budget.get_or_insert(u64::from(mss) * INITIAL_SEGMENTS);
    let round = LinkRound {
        now,
        interval,
        queue_delay,
        base_rtt,
        delivered_bytes: delivered,
        budget_in_force: in_force,
        in_flight: in_flight_total,
        mss,
        active_flows: members.len(),
        floors,
        members_follow_budget: !policed_members,
        min_rtt,
        best_effort,
        steady_flow: *steady_flows > 0,
    };
    // A slowdown also starts a base epoch of the link's delay view (a base measured too low ages
    // out after two instead of holding the flows at their floors for the rest of their lives).
    // The controller decides from the rounds that measured its budget; the rounds that measured
    // the slowdown are its to skip, and its budget is back in force when the hold ends.
    let slowdown = link
        .slowdown
        .round(now, config.slowdown_interval, round_length, &mut link.delay);
    if slowdown == SlowdownRound::Start {
        // The ACKs' bases age by the same epochs (a route that got longer, a clock that drifted).
        link.acks_queue.next_epoch();
    }
    if slowdown.measured() {
        link.budget = Some(
            link.controller
                .on_round(&round)
                .min(ack_cap)
                .clamp(min_budget, MAX_BUDGET),
        );
        // A queue the budget's cuts did not explain means a stale base where every member
        // follows the budget within a round (a window; `LinkRound::members_follow_budget`). A
        // policed UDP flow follows it by at most one step per few rounds
        // (`UdpFlow::apply_allocation`): its queue outlasts the cuts, and the fresh base's
        // slowdown would cut it again for nothing (lab utp: a slowdown every 6 s, fill 0.57).
        if link.controller.take_stale_base() {
            link.slowdown.fresh_base();
        }
    } else if slowdown == SlowdownRound::Resume {
        link.budget = Some(
            link.controller
                .on_slowdown_round(&round)
                .min(ack_cap)
                .clamp(min_budget, MAX_BUDGET),
        );
    }
    let slowing = slowdown.holds();
    let budget = if slowing {
        slowdown_budget
    } else {
        link.budget.unwrap_or(min_budget)
    };
    let stats = link.controller.stats();
    if slowdown == SlowdownRound::Resume || (!slowing && stats.phase == BudgetPhase::Recover) {
        // Taking a freed link back (a recovery, or the end of a slowdown): every flow was held
        // below what it used before, and what it acknowledged in the last round shows the held
        // window, not its demand.
        for demand in demands.iter_mut() {
            demand.demand = u64::MAX;
        }
    }
    allocate_with(scratch, budget, demands, now, config.turn, allocations);
    let phase = if slowing {
        BudgetPhase::Slowdown
    } else {
        stats.phase
    };
    // Best effort's queue: over twice the target while best effort carries a tenth of the
    // link or more (or is not counted). The background's own overshoot is not.
    let best_effort_queue = queue_delay.is_some_and(|q| q > target * 2) && !link.queue_is_backgrounds();
    let queue_low = queue_delay.is_some_and(|q| q < target / 2);
    let mut held = 0;
    for (i, flow) in members.into_iter().enumerate() {
        let allocation = allocations[i];
        let demand = demands[i];
        let was_held = held_before[i];
        let window = match allocation {
            Allocation::Window(w) => Some(w),
            Allocation::Hold => None,
        };
        if let Some((state, share)) = flow.household_mut() {
            state.credit = demand.credit;
            state.turn_since = demand.turn_since;
            state.held_since = demand.held_since;
            share.set_allocation(window.or(share.window()), window.is_none());
        }
        if window.is_none() {
            held += 1;
        }
        let round = Allocated {
            now,
            window,
            was_held,
            rtt: demand.rtt,
            phase,
            best_effort_queue,
            queue_low,
            udp: config.udp,
        };
        if let Some(update) = flow.allocated(&round) {
            updates.push(update);
            link.last.window_updates += 1;
        }
    }
    link.last.phase = phase;
    link.last.targets = stats.targets;
    link.last.budget_bytes = budget;
    link.last.queue_delay = link.delay.queue_delay();
    link.last.base_rtt = base_rtt;
    link.last.flows = demands.len();
    link.last.held_flows = held;
    link.last.in_flight_bytes = in_flight_total;
    link.last.goodput_bits_per_second = round.delivery_rate() * 8.0;
    if !slowing {
        link.at_floor_rate = (budget <= one_floor(mss)).then(|| round.delivery_rate());
    }
    link.last.slowdowns = link.slowdown.count;
}

/// The median (the upper one of an even count) of `values`, reordering them: a selection, O(n),
/// not a sort.
fn median(values: &mut [Duration]) -> Option<Duration> {
    if values.is_empty() {
        return None;
    }
    let middle = values.len() / 2;
    Some(*values.select_nth_unstable(middle).1)
}

#[cfg(test)]
mod tests;
