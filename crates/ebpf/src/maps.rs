//! The maps' key and value layouts, byte for byte as src/bpf/slipstream.bpf.c declares them.
#![allow(
    unsafe_code,
    reason = "aya::Pod is an unsafe trait: each layout below is plain old data, as the kernel reads it"
)]

use std::net::{IpAddr, SocketAddr};

/// One direction of a flow (`struct flow_key`): the packets from `src` to `dst`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DirKey {
    family: u8,
    pad: [u8; 3],
    saddr: [u8; 16],
    daddr: [u8; 16],
    /// Network byte order, as in the TCP header.
    sport: [u8; 2],
    dport: [u8; 2],
}

// SAFETY: plain old data without padding (every byte is a named field), as the kernel reads it.
unsafe impl aya::Pod for DirKey {}

impl DirKey {
    /// The direction from `src` to `dst`; `None` if the families differ.
    pub fn new(src: SocketAddr, dst: SocketAddr) -> Option<DirKey> {
        let (family, saddr, daddr) = match (src.ip(), dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => (4, v4(s.octets()), v4(d.octets())),
            (IpAddr::V6(s), IpAddr::V6(d)) => (6, s.octets(), d.octets()),
            _ => return None,
        };
        Some(DirKey {
            family,
            pad: [0; 3],
            saddr,
            daddr,
            sport: src.port().to_be_bytes(),
            dport: dst.port().to_be_bytes(),
        })
    }

    /// The other direction of the same flow.
    pub fn reversed(&self) -> DirKey {
        DirKey {
            saddr: self.daddr,
            daddr: self.saddr,
            sport: self.dport,
            dport: self.sport,
            ..*self
        }
    }
}

/// IPv4 addresses take the first word of the key's address fields.
fn v4(octets: [u8; 4]) -> [u8; 16] {
    let mut out = [0; 16];
    out[..4].copy_from_slice(&octets);
    out
}

/// Lower the window of this direction's ACKs (`FLOW_CLAMP`).
pub const FLOW_CLAMP: u8 = 1;
/// Household hold: no two-segment floor (`FLOW_HOLD`).
pub const FLOW_HOLD: u8 = 2;
/// [`FlowCfg::sent_edge`] holds the right edge of the daemon's own window update (`FLOW_SENT_EDGE`).
pub const FLOW_SENT_EDGE: u8 = 4;

/// `skb->mark` of the frames the daemon sends itself (`OWN_MARK`): the program passes them
/// untouched and unreported. Set with SO_MARK on the socket they go out on.
pub const OWN_MARK: u32 = 0x536c_7053;

/// What the program does with one direction's packets (`struct flow_cfg`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCfg {
    /// Window wanted for this direction's ACKs, bytes (only with [`FLOW_CLAMP`]).
    pub target_bytes: u32,
    /// The data sender's MSS (the floor is two of them).
    pub mss: u32,
    /// Window scale shift of the host sending in this direction.
    pub scale: u8,
    /// [`FLOW_CLAMP`], [`FLOW_HOLD`], [`FLOW_SENT_EDGE`].
    pub flags: u8,
    /// The flow's rule number, carried into its reports.
    pub rule: u16,
    /// The right edge of a window update the daemon sent in this direction (with
    /// [`FLOW_SENT_EDGE`]): no later ACK goes left of it.
    pub sent_edge: u32,
}

// SAFETY: plain old data, no implicit padding (4 + 4 + 1 + 1 + 2 + 4 bytes).
unsafe impl aya::Pod for FlowCfg {}

/// The daemon's heartbeat (`struct control`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Control {
    /// The programs act until this CLOCK_MONOTONIC time (ns) and pass every packet after it:
    /// a daemon that stopped leaves the traffic untouched.
    pub alive_until_ns: u64,
}

// SAFETY: one u64.
unsafe impl aya::Pod for Control {}

/// The right edge word (`struct flow_edge`): bit 32 set when known, edge in the low 32 bits.
pub const EDGE_KNOWN: u64 = 1 << 32;

/// Indices of the per-CPU `counters` array (`enum counter`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets reported to the daemon.
    pub events: u64,
    /// Packets not reported because the ring buffer was full.
    pub ringbuf_full: u64,
    /// ACKs whose window was lowered.
    pub rewritten: u64,
    /// Packets of known flows passed untouched because the daemon's heartbeat was stale.
    pub no_daemon: u64,
    /// ACKs passed unlowered because other CPUs kept moving the right edge (compare-and-swap
    /// gave up).
    pub edge_lost: u64,
    /// Map entries of an earlier connection dropped at a LAN host's opening SYN on the same
    /// ports.
    pub stale_forgotten: u64,
}
