//! The per-host view: each LAN host's background flows (as `slipstream flows` shows them: the
//! LAN endpoint of [`lan_and_remote`]) beside its best effort, with its lease name.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use super::{HostList, HostRates, Prefix};
use crate::{lan_and_remote, FlowInfo};

/// Hosts listed at most (busiest first).
pub const MAX_HOSTS: usize = 64;

/// The hosts of `flows` and of `best_effort` (each LAN host's rate of its traffic through the
/// router outside the background flows, from [`ConntrackRates`](super::ConntrackRates); `None`
/// when not counted), named from `names` (address -> lease name). A flow's LAN host is its end
/// in a `lan` prefix when exactly one end is, else the LAN end `slipstream flows` shows.
pub fn host_list(
    flows: &[FlowInfo],
    names: &BTreeMap<IpAddr, String>,
    lan: &[Prefix],
    best_effort: Option<&BTreeMap<IpAddr, f64>>,
    note: Option<String>,
) -> HostList {
    let mut hosts: BTreeMap<IpAddr, HostRates> = BTreeMap::new();
    for flow in flows {
        let Some(addr) = lan_host(flow, lan) else { continue };
        let h = host(&mut hosts, names, addr);
        h.background_bps += flow.goodput_bps;
        h.background_flows += 1;
        h.held_flows += usize::from(flow.held);
    }
    if let Some(rates) = best_effort {
        for h in hosts.values_mut() {
            h.best_effort_bps = Some(0.0);
        }
        for (addr, bps) in rates.iter().filter(|(_, bps)| **bps > 0.0) {
            host(&mut hosts, names, *addr).best_effort_bps = Some(*bps);
        }
    }
    let mut list: Vec<HostRates> = hosts.into_values().collect();
    let load = |h: &HostRates| h.background_bps + h.best_effort_bps.unwrap_or(0.0);
    list.sort_by(|a, b| {
        load(b)
            .total_cmp(&load(a))
            .then_with(|| a.address.cmp(&b.address))
    });
    list.truncate(MAX_HOSTS);
    HostList {
        best_effort_counted: best_effort.is_some(),
        note,
        hosts: list,
    }
}

fn host<'a>(
    hosts: &'a mut BTreeMap<IpAddr, HostRates>,
    names: &BTreeMap<IpAddr, String>,
    addr: IpAddr,
) -> &'a mut HostRates {
    hosts.entry(addr).or_insert_with(|| HostRates {
        address: addr.to_string(),
        name: names.get(&addr).cloned(),
        ..HostRates::default()
    })
}

fn lan_host(flow: &FlowInfo, lan: &[Prefix]) -> Option<IpAddr> {
    let in_lan = |ip: &Option<IpAddr>| ip.is_some_and(|ip| lan.iter().any(|p| p.contains(ip)));
    let [a, b] = flow.endpoints.each_ref().map(|e| address_of(e));
    match (in_lan(&a), in_lan(&b)) {
        (true, false) => a,
        (false, true) => b,
        _ => address_of(&lan_and_remote(flow).0),
    }
}

/// The address of an `addr:port` endpoint (`[v6]:port` too).
fn address_of(endpoint: &str) -> Option<IpAddr> {
    endpoint
        .parse::<SocketAddr>()
        .map(|s| s.ip())
        .or_else(|_| endpoint.parse::<IpAddr>())
        .ok()
}
