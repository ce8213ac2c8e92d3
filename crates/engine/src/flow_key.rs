//! One key for both directions of a TCP connection.
//!
//! The key orders the two endpoints so that a packet and its reply map to the same flow; the
//! [`Side`] says which of the two endpoints sent a given packet.

use std::net::{IpAddr, SocketAddr};

/// One end of a connection as it appears on the wire.
pub(crate) type Endpoint = SocketAddr;

/// Which endpoint of a flow: `Low` is the smaller of the two socket addresses, `High` the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The endpoint with the smaller socket address.
    Low,
    /// The endpoint with the larger socket address.
    High,
}

impl Side {
    /// The flow's other endpoint.
    pub fn other(self) -> Side {
        match self {
            Side::Low => Side::High,
            Side::High => Side::Low,
        }
    }

    /// 0 for `Low`, 1 for `High`: the index of per-side arrays.
    pub fn index(self) -> usize {
        match self {
            Side::Low => 0,
            Side::High => 1,
        }
    }
}

/// Direction-independent key of a TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    low: Endpoint,
    high: Endpoint,
}

impl FlowKey {
    /// The key of the flow a packet from `src` to `dst` belongs to, and which side sent it.
    pub fn from_packet(src: IpAddr, src_port: u16, dst: IpAddr, dst_port: u16) -> (FlowKey, Side) {
        let a = SocketAddr::new(src, src_port);
        let b = SocketAddr::new(dst, dst_port);
        if a <= b {
            (FlowKey { low: a, high: b }, Side::Low)
        } else {
            (FlowKey { low: b, high: a }, Side::High)
        }
    }

    /// The socket address of one side.
    pub fn endpoint(&self, side: Side) -> Endpoint {
        match side {
            Side::Low => self.low,
            Side::High => self.high,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_share_a_key() {
        let c: IpAddr = "10.0.0.2".parse().unwrap();
        let s: IpAddr = "192.0.2.1".parse().unwrap();
        let (k1, s1) = FlowKey::from_packet(c, 40000, s, 443);
        let (k2, s2) = FlowKey::from_packet(s, 443, c, 40000);
        assert_eq!(k1, k2);
        assert_eq!(s1, s2.other());
        assert_eq!(k1.endpoint(s1), SocketAddr::new(c, 40000));
        assert_eq!(k1.endpoint(s2), SocketAddr::new(s, 443));
    }

    #[test]
    fn same_address_different_ports() {
        let a: IpAddr = "::1".parse().unwrap();
        let (k1, s1) = FlowKey::from_packet(a, 1, a, 2);
        let (k2, s2) = FlowKey::from_packet(a, 2, a, 1);
        assert_eq!(k1, k2);
        assert_ne!(s1, s2);
    }
}
