//! The packet and byte counters of every unclassed UDP connection: a call or a game is a UDP
//! flow sending at a steady rate, which the router's interface counters cannot tell from
//! browsing beside it (their sum varies by factors). Conntrack keeps per-connection counters
//! where `net.netfilter.nf_conntrack_acct` is 1 (OpenWrt's default, `sysctl-nf-conntrack.conf`)
//! and exports them as `CTA_COUNTERS_ORIG` / `_REPLY`.
//!
//! The dump asks the kernel to filter: only UDP (`CTA_FILTER` on the original tuple's protocol,
//! Linux 5.8 and later; older kernels ignore the attribute and the parser skips other
//! protocols) and only connections whose mark has no bit of the daemon's mask (`CTA_MARK` /
//! `CTA_MARK_MASK`): the background's own UDP flows (uTP, QUIC the rules class) are not best
//! effort.
//!
//! A dump walks the kernel's whole connection table, every hash bucket, with bottom halves
//! disabled on its CPU (`ctnetlink_dump_table`): packets that CPU would forward wait for the
//! walk. On this machine's table (262,144 buckets, a few entries) `udp_counts` (two walks, IPv4
//! and IPv6) took 12-15 ms, and one every 300 ms cost the lab's calls about 0.7 ms at the 95th
//! percentile. So the dump only
//! finds the flows ([`Conntrack::udp_counts`], seldom), and their counters are read by tuple
//! ([`Conntrack::udp_count_of`]: one hash lookup each, often).

use std::io;
use std::net::SocketAddr;

use netlink_packet_core::{DefaultNla, Nla};
use netlink_packet_netfilter::conntrack::{ConntrackAttribute, ProtoTuple, Protocol, Tuple};

use super::dump::{datagram_entries, dump_request_with};
use super::{parse_message_with, tuple_of, Conntrack, ParseError};

/// `CTA_COUNTERS_ORIG`, `CTA_COUNTERS_REPLY`, `CTA_ID`, `CTA_MARK_MASK`, `CTA_FILTER`
/// (linux/netfilter/nfnetlink_conntrack.h).
const CTA_COUNTERS_ORIG: u16 = 9;
const CTA_COUNTERS_REPLY: u16 = 10;
const CTA_ID: u16 = 12;
const CTA_MARK_MASK: u16 = 21;
const CTA_FILTER: u16 = 25;
/// `CTA_FILTER_ORIG_FLAGS` and its `CTA_FILTER_FLAG_CTA_PROTO_NUM` bit.
const CTA_FILTER_ORIG_FLAGS: u16 = 1;
const FILTER_PROTO_NUM: u32 = 1 << 3;
/// `NLA_F_NESTED`: the kernel parses `CTA_FILTER` strictly and wants the flag.
const NLA_F_NESTED: u16 = 1 << 15;
/// An attribute's type without its flags (`NLA_TYPE_MASK`).
const NLA_TYPE_MASK: u16 = 0x3fff;
/// `CTA_COUNTERS_PACKETS`, `CTA_COUNTERS_BYTES` (u64, big-endian).
const COUNTERS_PACKETS: u16 = 1;
const COUNTERS_BYTES: u16 = 2;

/// One UDP connection's counters, both directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpCount {
    /// Conntrack's id of the connection (`CTA_ID`): unique while it lives.
    pub id: u32,
    /// (source, destination) of the original direction: what [`Conntrack::udp_count_of`] asks
    /// for.
    pub original: (SocketAddr, SocketAddr),
    /// Packets in the original direction (as its first packet went) and in the reply direction.
    pub packets: [u64; 2],
    /// Bytes (IP length) likewise.
    pub bytes: [u64; 2],
}

/// The bytes of a dump request for the UDP connections of one IP family whose mark has no bit
/// of `mask`.
pub fn udp_dump_request(seq: u32, v6: bool, mask: u32) -> Vec<u8> {
    let attributes = vec![
        ConntrackAttribute::CtaTupleOrig(vec![Tuple::Proto(vec![ProtoTuple::Protocol(Protocol::Udp)])]),
        ConntrackAttribute::CtaMark(0),
        ConntrackAttribute::Other(DefaultNla::new(CTA_MARK_MASK, mask.to_be_bytes().to_vec())),
    ];
    let mut bytes = dump_request_with(seq, v6, attributes);
    // CTA_FILTER { CTA_FILTER_ORIG_FLAGS: u32 (host order) }, appended by hand: the kernel
    // parses it strictly and wants NLA_F_NESTED, which the crate's attribute types clear.
    bytes.extend_from_slice(&12u16.to_ne_bytes());
    bytes.extend_from_slice(&(CTA_FILTER | NLA_F_NESTED).to_ne_bytes());
    bytes.extend_from_slice(&8u16.to_ne_bytes());
    bytes.extend_from_slice(&CTA_FILTER_ORIG_FLAGS.to_ne_bytes());
    bytes.extend_from_slice(&FILTER_PROTO_NUM.to_ne_bytes());
    let length = bytes.len() as u32;
    bytes[..4].copy_from_slice(&length.to_ne_bytes());
    bytes
}

/// Reads one datagram of a UDP dump into `out`, at most `limit` entries in all; true when the
/// dump is over. Entries of other protocols, with a mark bit of `mask`, without counters or
/// that do not parse are skipped.
pub fn parse_udp_dump(bytes: &[u8], mask: u32, limit: usize, out: &mut Vec<UdpCount>) -> io::Result<bool> {
    datagram_entries(bytes, |attributes| {
        if out.len() < limit {
            if let Some(count) = udp_count(attributes, mask) {
                out.push(count);
            }
        }
    })
}

/// The answer (one message) to [`Conntrack::udp_count_of`]'s GET: the connection's counters,
/// `None` for no entry (`ENOENT`) and for an entry that is not an unclassed UDP connection with
/// counters.
pub fn parse_udp_reply(message: &[u8], mask: u32) -> Result<Option<UdpCount>, ParseError> {
    Ok(parse_message_with(message, |attributes| Ok(udp_count(attributes, mask)))?.flatten())
}

fn udp_count(attributes: &[ConntrackAttribute], mask: u32) -> Option<UdpCount> {
    let (mut id, mut original, mut packets, mut bytes, mut counted) =
        (None, None, [0u64; 2], [0u64; 2], false);
    for attribute in attributes {
        match attribute {
            ConntrackAttribute::CtaTupleOrig(parts) => original = tuple_of(parts, Protocol::Udp),
            ConntrackAttribute::CtaMark(mark) if mark & mask != 0 => return None,
            ConntrackAttribute::Other(nla) => {
                let mut value = vec![0u8; nla.value_len()];
                nla.emit_value(&mut value);
                // The kernel sets NLA_F_NESTED on the counters.
                match nla.kind() & NLA_TYPE_MASK {
                    CTA_ID => {
                        id = value
                            .get(..4)
                            .map(|v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
                    }
                    kind @ (CTA_COUNTERS_ORIG | CTA_COUNTERS_REPLY) => {
                        let direction = usize::from(kind == CTA_COUNTERS_REPLY);
                        let (p, b) = counters(&value)?;
                        (packets[direction], bytes[direction], counted) = (p, b, true);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    counted.then_some(UdpCount {
        id: id?,
        original: original?,
        packets,
        bytes,
    })
}

/// (packets, bytes) of a nested `CTA_COUNTERS_*` attribute.
fn counters(mut nested: &[u8]) -> Option<(u64, u64)> {
    let (mut packets, mut bytes) = (None, None);
    while nested.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([nested[0], nested[1]]));
        let kind = u16::from_ne_bytes([nested[2], nested[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > nested.len() {
            return None;
        }
        let value = &nested[4..len];
        if let Ok(v) = <[u8; 8]>::try_from(value) {
            match kind {
                COUNTERS_PACKETS => packets = Some(u64::from_be_bytes(v)),
                COUNTERS_BYTES => bytes = Some(u64::from_be_bytes(v)),
                _ => {}
            }
        }
        let step = (len.div_ceil(4) * 4).min(nested.len());
        nested = &nested[step..];
    }
    Some((packets?, bytes?))
}

impl Conntrack {
    /// The unclassed UDP connections' counters (IPv4 and IPv6), at most `limit`.
    pub fn udp_counts(&mut self, mask: u32, limit: usize) -> io::Result<Vec<UdpCount>> {
        let mut out = Vec::new();
        for v6 in [false, true] {
            self.seq = self.seq.wrapping_add(1);
            let request = udp_dump_request(self.seq, v6, mask);
            self.run_dump(&request, |datagram| {
                parse_udp_dump(datagram, mask, limit, &mut out)
            })?;
        }
        Ok(out)
    }

    /// The counters of the UDP connection whose original tuple is `original` (a
    /// [`UdpCount::original`]): `Ok(None)` once it is gone, or if its mark now has a bit of
    /// `mask` (a rule classed it).
    pub fn udp_count_of(
        &mut self,
        original: (SocketAddr, SocketAddr),
        mask: u32,
    ) -> io::Result<Option<UdpCount>> {
        self.ask(Protocol::Udp, original, |message| parse_udp_reply(message, mask))
    }
}
