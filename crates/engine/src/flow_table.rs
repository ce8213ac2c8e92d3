//! The bounded flow table: at most `max_flows` entries, idle flows expire, and a full table makes
//! room only by evicting a flow that has been idle long enough. It never grows past its bound;
//! when it cannot make room, the new flow is simply not tracked (its packets pass untouched).
//!
//! # Eviction in amortised O(1)
//!
//! A full table under a SYN flood is asked for room once per new flow. Rather than scan every
//! flow each time for the longest idle one, one scan keeps the oldest eighth of the table
//! (by last packet) as *candidates*, oldest first. A candidate whose flow was touched since (or
//! is gone) is dropped; the first one left is the longest-idle flow of the whole table (every
//! flow outside the list was newer at the scan and has only got newer), so a newcomer either
//! evicts it or, if it has not been idle `evict_idle_after`, is refused at once. A new scan
//! comes only when the list is used up, after at least an eighth of the table's worth of
//! evictions or dropped candidates: O(1) per new flow on average, however many are refused.

use std::collections::{HashMap, VecDeque};

use slipstream_control::{Duration, Instant};

use crate::flow::Flow;
use crate::flow_key::FlowKey;

/// How long a flow that ended (RST, or FIN both ways) stays, so its last ACKs are still tracked.
pub const CLOSE_LINGER: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableLimits {
    pub max_flows: usize,
    pub idle_timeout: Duration,
    pub evict_idle_after: Duration,
}

/// What happened when a flow was looked up for insertion.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    Existing,
    Inserted { evicted: bool },
    Refused,
}

/// Counts of flows removed by [`FlowTable::expire`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Expired {
    pub idle: u64,
    pub closed: u64,
}

#[derive(Debug)]
pub(crate) struct FlowTable {
    flows: HashMap<FlowKey, Flow>,
    limits: TableLimits,
    /// Eviction candidates (last packet, flow), oldest first; see the module docs.
    candidates: VecDeque<(Instant, FlowKey)>,
    /// Flows looked at by eviction scans, for tests of the cost of a full table.
    scan_visits: u64,
}

/// A scan keeps this fraction of the table (at least [`MIN_CANDIDATES`]) as candidates.
const CANDIDATE_FRACTION: usize = 8;
const MIN_CANDIDATES: usize = 16;

impl FlowTable {
    pub(crate) fn new(limits: TableLimits) -> FlowTable {
        FlowTable {
            flows: HashMap::with_capacity(limits.max_flows.min(4096)),
            limits,
            candidates: VecDeque::new(),
            scan_visits: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.flows.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    pub(crate) fn limits(&self) -> TableLimits {
        self.limits
    }

    /// New limits (a reload). Nothing is dropped here: a table over a lowered `max_flows` refuses
    /// new flows and [`FlowTable::shrink_to_limit`] evicts idle flows down to the bound.
    pub(crate) fn set_limits(&mut self, limits: TableLimits) {
        self.limits = limits;
    }

    pub(crate) fn contains(&self, key: &FlowKey) -> bool {
        self.flows.contains_key(key)
    }

    pub(crate) fn get(&self, key: &FlowKey) -> Option<&Flow> {
        self.flows.get(key)
    }

    pub(crate) fn get_mut(&mut self, key: &FlowKey) -> Option<&mut Flow> {
        self.flows.get_mut(key)
    }

    /// Drops `key`'s entry (a connection replaced by a new one on the same 4-tuple).
    pub(crate) fn remove(&mut self, key: &FlowKey) -> bool {
        self.flows.remove(key).is_some()
    }

    /// Makes sure `key` has an entry, creating it with `make` if there is room.
    pub(crate) fn admit(&mut self, key: FlowKey, now: Instant, make: impl FnOnce() -> Flow) -> Admission {
        if self.flows.contains_key(&key) {
            return Admission::Existing;
        }
        let mut evicted = false;
        if self.flows.len() >= self.limits.max_flows {
            if !self.evict_longest_idle(now) {
                return Admission::Refused;
            }
            evicted = true;
        }
        self.flows.insert(key, make());
        Admission::Inserted { evicted }
    }

    /// Evicts the longest-idle flow if it has been idle `evict_idle_after`; false if none has.
    fn evict_longest_idle(&mut self, now: Instant) -> bool {
        loop {
            let Some(&(seen, key)) = self.candidates.front() else {
                if !self.rescan() {
                    return false;
                }
                continue;
            };
            match self.flows.get(&key) {
                Some(flow) if flow.last_seen == seen => {
                    if now.saturating_since(seen) < self.limits.evict_idle_after {
                        return false;
                    }
                    self.candidates.pop_front();
                    self.flows.remove(&key);
                    return true;
                }
                // Touched since the scan, or gone: no longer among the oldest.
                _ => {
                    self.candidates.pop_front();
                }
            }
        }
    }

    /// Refills the candidates with the oldest flows; false if the table is empty.
    fn rescan(&mut self) -> bool {
        let mut all: Vec<(Instant, FlowKey)> = self.flows.iter().map(|(k, f)| (f.last_seen, *k)).collect();
        self.scan_visits += all.len() as u64;
        if all.is_empty() {
            return false;
        }
        let keep = (all.len() / CANDIDATE_FRACTION)
            .max(MIN_CANDIDATES)
            .min(all.len());
        if keep < all.len() {
            all.select_nth_unstable_by_key(keep, |(seen, _)| *seen);
            all.truncate(keep);
        }
        all.sort_unstable_by_key(|(seen, _)| *seen);
        self.candidates = all.into();
        true
    }

    /// Flows looked at by eviction scans so far.
    #[cfg(test)]
    pub(crate) fn scan_visits(&self) -> u64 {
        self.scan_visits
    }

    /// The engine's tick for every flow ([`Flow::on_tick`]: goodput meter, the controller's timer
    /// hook), then drops flows idle past the timeout and closed flows past their linger time.
    pub(crate) fn expire(&mut self, now: Instant) -> Expired {
        let mut expired = Expired::default();
        let idle_timeout = self.limits.idle_timeout;
        self.flows.retain(|_, flow| {
            flow.on_tick(now);
            if flow
                .closing_since
                .is_some_and(|t| now.saturating_since(t) >= CLOSE_LINGER)
            {
                expired.closed += 1;
                false
            } else if now.saturating_since(flow.last_seen) >= idle_timeout {
                expired.idle += 1;
                false
            } else {
                true
            }
        });
        expired
    }

    /// While the table holds more than `max_flows` (after the bound was lowered), evicts the
    /// longest-idle flows that have been idle at least `evict_idle_after`, down to the bound.
    /// Busy flows are never dropped. Returns how many were evicted.
    pub(crate) fn shrink_to_limit(&mut self, now: Instant) -> u64 {
        let excess = self.flows.len().saturating_sub(self.limits.max_flows);
        if excess == 0 {
            return 0;
        }
        let evict_after = self.limits.evict_idle_after;
        let mut idle: Vec<(Instant, FlowKey)> = self
            .flows
            .iter()
            .filter(|(_, f)| now.saturating_since(f.last_seen) >= evict_after)
            .map(|(k, f)| (f.last_seen, *k))
            .collect();
        idle.sort_unstable_by_key(|(seen, _)| *seen);
        let mut evicted = 0;
        for (_, key) in idle.into_iter().take(excess) {
            self.flows.remove(&key);
            evicted += 1;
        }
        evicted
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&FlowKey, &Flow)> {
        self.flows.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&FlowKey, &mut Flow)> {
        self.flows.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u16) -> FlowKey {
        FlowKey::from_packet("10.0.0.1".parse().unwrap(), port, "10.0.0.2".parse().unwrap(), 80).0
    }

    fn limits(max_flows: usize) -> TableLimits {
        TableLimits {
            max_flows,
            idle_timeout: Duration::from_secs(120),
            evict_idle_after: Duration::from_secs(10),
        }
    }

    #[test]
    fn full_table_evicts_only_idle_flows() {
        let mut t = FlowTable::new(limits(2));
        let t0 = Instant::from_millis(0);
        assert_eq!(
            t.admit(key(1), t0, || Flow::new(1, t0)),
            Admission::Inserted { evicted: false }
        );
        let t1 = Instant::from_millis(5_000);
        assert_eq!(
            t.admit(key(2), t1, || Flow::new(1, t1)),
            Admission::Inserted { evicted: false }
        );
        // Flow 1 idle 9 s: not idle enough, the newcomer is refused.
        let t2 = Instant::from_millis(9_000);
        assert_eq!(t.admit(key(3), t2, || Flow::new(1, t2)), Admission::Refused);
        // At 10 s it is: flow 1 (the longest idle) makes room.
        let t3 = Instant::from_millis(10_000);
        assert_eq!(
            t.admit(key(3), t3, || Flow::new(1, t3)),
            Admission::Inserted { evicted: true }
        );
        assert!(t.get_mut(&key(1)).is_none());
        assert_eq!(t.len(), 2);
    }

    fn key_n(n: u32) -> FlowKey {
        let [a, b, c, d] = n.to_be_bytes();
        FlowKey::from_packet(
            [10, b, c, d].into(),
            1024 + u16::from(a),
            "192.0.2.1".parse().unwrap(),
            80,
        )
        .0
    }

    /// A SYN flood against a full table costs O(1) per new flow on average: refused ones while
    /// nothing is idle enough, evicting ones once the flood's own flows age (the old table
    /// scanned every flow for each of them: 4096 x 40000 visits here).
    #[test]
    fn a_flood_against_a_full_table_scans_it_rarely() {
        const N: u32 = 4096;
        let mut t = FlowTable::new(limits(N as usize));
        for i in 0..N {
            let at = Instant::from_millis(u64::from(i));
            t.admit(key_n(i), at, || Flow::new(1, at));
        }
        // Nothing idle 10 s yet: 20000 newcomers are refused after one scan.
        for i in 0..20_000 {
            let at = Instant::from_millis(5_000);
            assert_eq!(t.admit(key_n(N + i), at, || Flow::new(1, at)), Admission::Refused);
        }
        assert_eq!(t.scan_visits(), u64::from(N));
        // Later each newcomer evicts the longest-idle flow, in order of age (one every 3 ms:
        // the flood's own flows are idle 10 s when their turn comes).
        let mut now = 20_000;
        for i in 0..20_000u32 {
            now += 3;
            let at = Instant::from_millis(now);
            let longest_idle = (i % 997 == 0)
                .then(|| t.flows.iter().min_by_key(|(_, f)| f.last_seen).map(|(k, _)| *k))
                .flatten();
            assert_eq!(
                t.admit(key_n(100_000 + i), at, || Flow::new(1, at)),
                Admission::Inserted { evicted: true }
            );
            if let Some(victim) = longest_idle {
                assert!(!t.contains(&victim), "the longest-idle flow went");
            }
        }
        assert_eq!(t.len(), N as usize);
        let visits = t.scan_visits();
        assert!(visits <= u64::from(N) + 9 * 20_000, "{visits} flows looked at");
        eprintln!("{visits} flows looked at for 20000 evictions");
    }

    /// Candidates touched after the scan are not evicted: the longest-idle flow is.
    #[test]
    fn a_busy_candidate_is_passed_over() {
        let mut t = FlowTable::new(limits(2));
        let t0 = Instant::from_millis(0);
        t.admit(key(1), t0, || Flow::new(1, t0));
        t.admit(key(2), Instant::from_millis(1), || {
            Flow::new(1, Instant::from_millis(1))
        });
        assert_eq!(
            t.admit(key(3), Instant::from_millis(2), || Flow::new(1, t0)),
            Admission::Refused
        );
        // Flow 1 gets a packet: flow 2 is now the longest idle.
        t.get_mut(&key(1)).unwrap().last_seen = Instant::from_millis(3);
        let at = Instant::from_millis(10_001);
        assert_eq!(
            t.admit(key(3), at, || Flow::new(1, at)),
            Admission::Inserted { evicted: true }
        );
        assert!(t.contains(&key(1)) && !t.contains(&key(2)));
    }

    #[test]
    fn lowered_bound_keeps_busy_flows_and_evicts_idle_ones_down_to_it() {
        let mut t = FlowTable::new(limits(4));
        let t0 = Instant::from_millis(0);
        for port in 1..=4 {
            t.admit(key(port), t0, || Flow::new(1, t0));
        }
        t.set_limits(limits(2));
        // Nothing idle long enough: all four stay, and a newcomer is refused.
        let t1 = Instant::from_millis(5_000);
        t.get_mut(&key(3)).unwrap().last_seen = t1;
        t.get_mut(&key(4)).unwrap().last_seen = t1;
        assert_eq!(t.shrink_to_limit(t1), 0);
        assert_eq!(t.len(), 4);
        assert_eq!(t.admit(key(5), t1, || Flow::new(1, t1)), Admission::Refused);
        // Flows 1 and 2 idle 10 s: both go (down to the bound of 2), busy flows 3 and 4 stay.
        let t2 = Instant::from_millis(10_000);
        assert_eq!(t.shrink_to_limit(t2), 2);
        assert_eq!(t.len(), 2);
        assert!(t.get_mut(&key(3)).is_some() && t.get_mut(&key(4)).is_some());
        assert_eq!(t.shrink_to_limit(t2), 0);
    }

    #[test]
    fn expiry_of_idle_and_closed_flows() {
        let mut t = FlowTable::new(limits(10));
        let t0 = Instant::from_millis(0);
        t.admit(key(1), t0, || Flow::new(1, t0));
        t.admit(key(2), t0, || Flow::new(1, t0));
        t.get_mut(&key(2)).unwrap().closing_since = Some(t0);
        assert_eq!(t.expire(Instant::from_millis(1_000)), Expired::default());
        assert_eq!(
            t.expire(Instant::from_millis(2_000)),
            Expired { idle: 0, closed: 1 }
        );
        assert_eq!(
            t.expire(Instant::from_millis(120_000)),
            Expired { idle: 1, closed: 0 }
        );
        assert!(t.is_empty());
    }
}
