//! Keys of a round's flows: the order the allocator sees them in, and the LAN host a flow's
//! share belongs to.

use std::net::{IpAddr, SocketAddr};

use crate::flow_key::{FlowKey, Side};

/// A number that sorts as `key` among IPv4 flows, below every other flow's: the two endpoints
/// packed (address, port, address, port; `FlowKey` compares them in that order). `None` for
/// IPv6, which sort after (a connection's two ends are of one family).
pub(super) fn sort_key(key: &FlowKey) -> Option<u128> {
    match (key.endpoint(Side::Low), key.endpoint(Side::High)) {
        (SocketAddr::V4(low), SocketAddr::V4(high)) => Some(
            u128::from(low.ip().to_bits()) << 80
                | u128::from(low.port()) << 64
                | u128::from(high.ip().to_bits()) << 16
                | u128::from(high.port()),
        ),
        _ => None,
    }
}

/// The LAN host's key (flows of one host share the host's part; only equality matters): an
/// IPv4 address itself, a hash of an IPv6 address with the top bit set.
pub(super) fn host_key(key: &FlowKey, lan_side: Side) -> u64 {
    use std::hash::{Hash, Hasher};
    match key.endpoint(lan_side).ip() {
        IpAddr::V4(ip) => u64::from(ip.to_bits()),
        ip => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            ip.hash(&mut h);
            h.finish() | 1 << 63
        }
    }
}
