//! A thin ctnetlink client: the TCP window scales conntrack recorded for one connection.
//!
//! The daemon misses the handshake of flows that were already running when it started (a
//! restart under load): their window scale, which only the SYNs carry, is unknown, so their
//! windows cannot be rewritten. The kernel's connection tracker saw those SYNs (it keeps the
//! scales for its own window checks, `nf_conntrack_proto_tcp.c`, also with
//! `nf_conntrack_tcp_be_liberal`) and exports them over ctnetlink as
//! `CTA_PROTOINFO_TCP_WSCALE_ORIGINAL` / `_REPLY`, with per-direction flags saying whether the
//! SYN carried the option (`IP_CT_TCP_FLAG_WINDOW_SCALE`).
//!
//! Messages are built and parsed with `netlink-packet-netfilter` (rust-netlink's netfilter
//! packet types: conntrack get with tuples and TCP protoinfo, checked parsing); the socket is a
//! plain `NETLINK_NETFILTER` socket with a receive timeout, so a lookup never blocks longer than
//! that. The pure parts ([`get_request`], [`parse_reply`], [`Entry::scales_of`]) are tested on
//! replies captured from the kernel and on arbitrary bytes.
//!
//! # NAT
//!
//! A conntrack entry holds two tuples: the original direction as the first packet entered the
//! router (before NAT) and the reply direction as replies arrive (after NAT). The daemon sees a
//! flow at its hook, e.g. in `FORWARD` with LAN addresses on the LAN side: for a masqueraded
//! download that is the original tuple, for a port-forwarded upload (DNAT) the reply tuple in
//! reverse. The kernel's lookup matches a tuple against both directions, so [`Conntrack::lookup`]
//! asks for `a -> b`, then `b -> a`, and [`Entry::scales_of`] tells from the tuple that matched
//! which endpoint sent in which direction.
#![allow(
    unsafe_code,
    reason = "a netlink socket through libc: socket, setsockopt, sendto, recv"
)]

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use netlink_packet_netfilter::conntrack::{
    ConntrackAttribute, ConntrackMessage, IPTuple, ProtoInfo, ProtoInfoTCP, ProtoTuple, Protocol, Tuple,
};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
};

/// `NETLINK_NETFILTER` (linux/netlink.h).
const NETLINK_NETFILTER: libc::c_int = 12;
/// `IP_CT_TCP_FLAG_WINDOW_SCALE`: the direction's SYN carried a window scale option.
pub const FLAG_WINDOW_SCALE: u8 = 0x01;
/// `IP_CT_TCP_FLAG_BE_LIBERAL`: set on both directions when conntrack picked the connection up
/// mid-stream (it then knows no scale either).
pub const FLAG_BE_LIBERAL: u8 = 0x08;
/// `TCP_CONNTRACK_SYN_RECV`: the reply's SYN (the SYN-ACK) was seen; states from here on have
/// both SYNs behind them, except `SYN_SENT2` (simultaneous open, 9).
const STATE_SYN_RECV: u8 = 2;
const STATE_SYN_SENT2: u8 = 9;
/// RFC 7323 2.3: a shift above 14 is used as 14.
const MAX_SCALE: u8 = 14;
/// One conntrack entry is a few hundred bytes; replies larger than this are not ours.
const RECV_BUFFER: usize = 8192;
/// Netlink message header length.
const NLMSG_HDRLEN: usize = 16;

/// What conntrack knows of a connection's window scales, for the two endpoints asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scales {
    /// Conntrack saw both SYNs: the shift each endpoint applies to the windows it sends
    /// (`a`, `b` as passed to [`Entry::scales_of`]; both 0 when either SYN lacked the option).
    Known {
        /// The shift of the endpoint passed as `a`.
        a: u8,
        /// The shift of the endpoint passed as `b`.
        b: u8,
    },
    /// Conntrack picked the connection up mid-stream itself (after a flush, or loose pickup), or
    /// is still in the handshake: it knows no scale.
    Unknown,
}

/// The TCP part of an entry (`CTA_PROTOINFO_TCP`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// `TCP_CONNTRACK_*` (3: established).
    pub state: u8,
    /// Window-scale shift the original direction's sender announced in its SYN.
    pub wscale_original: u8,
    /// Window-scale shift the reply direction's sender announced in its SYN-ACK.
    pub wscale_reply: u8,
    /// `IP_CT_TCP_FLAG_*` of the original direction's sender.
    pub flags_original: u8,
    /// `IP_CT_TCP_FLAG_*` of the reply direction's sender.
    pub flags_reply: u8,
}

/// The parts of a conntrack entry the daemon uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// (source, destination) of the original direction, as its first packet entered.
    pub original: (SocketAddr, SocketAddr),
    /// (source, destination) of the reply direction, after NAT.
    pub reply: (SocketAddr, SocketAddr),
    /// `None` for an entry without TCP protoinfo (not TCP).
    pub tcp: Option<TcpInfo>,
}

impl Entry {
    /// The window scales of endpoints `a` and `b` of a flow, if `a -> b` or `b -> a` is one of
    /// the entry's tuples (see the crate docs on NAT). `None` if neither is, or if the entry has
    /// no TCP information.
    pub fn scales_of(&self, a: SocketAddr, b: SocketAddr) -> Option<Scales> {
        let tcp = self.tcp?;
        // Does `a` send in the original direction?
        let a_original = if self.original == (a, b) || self.reply == (b, a) {
            true
        } else if self.reply == (a, b) || self.original == (b, a) {
            false
        } else {
            return None;
        };
        let handshake_seen = tcp.state >= STATE_SYN_RECV && tcp.state != STATE_SYN_SENT2;
        let ws_original = tcp.flags_original & FLAG_WINDOW_SCALE != 0;
        let ws_reply = tcp.flags_reply & FLAG_WINDOW_SCALE != 0;
        let liberal = (tcp.flags_original | tcp.flags_reply) & FLAG_BE_LIBERAL != 0;
        let (original, reply) = if !handshake_seen {
            return Some(Scales::Unknown);
        } else if ws_original && ws_reply {
            (
                tcp.wscale_original.min(MAX_SCALE),
                tcp.wscale_reply.min(MAX_SCALE),
            )
        } else if ws_original || ws_reply || !liberal {
            // A SYN without the option: scaling is off both ways (RFC 7323 2.2), and conntrack
            // set both shifts to 0. No flag at all and not liberal: neither SYN offered it.
            (0, 0)
        } else {
            // Picked up mid-stream: conntrack marks both directions liberal and knows no scale.
            return Some(Scales::Unknown);
        };
        Some(if a_original {
            Scales::Known {
                a: original,
                b: reply,
            }
        } else {
            Scales::Known {
                a: reply,
                b: original,
            }
        })
    }
}

/// What a GET answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The kernel's entry for the tuple.
    Entry(Entry),
    /// No entry for the tuple (`ENOENT`).
    NotFound,
}

/// A reply that is not what ctnetlink sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed ctnetlink reply: {}", self.0)
    }
}

impl std::error::Error for ParseError {}

fn family(addr: &IpAddr) -> NetfilterProtoFamily {
    match addr {
        IpAddr::V4(_) => NetfilterProtoFamily::IPv4,
        IpAddr::V6(_) => NetfilterProtoFamily::IPv6,
    }
}

/// The bytes of a ctnetlink GET (`IPCTNL_MSG_CT_GET`, no dump) for the TCP tuple `src -> dst`
/// with sequence number `seq`. `None` if the two addresses are of different families.
pub fn get_request(seq: u32, src: SocketAddr, dst: SocketAddr) -> Option<Vec<u8>> {
    get_request_for(seq, Protocol::Tcp, src, dst)
}

/// [`get_request`] for a tuple of `protocol`: one hash lookup in the kernel, whatever the size
/// of its table (a dump walks all of it).
pub(crate) fn get_request_for(
    seq: u32,
    protocol: Protocol,
    src: SocketAddr,
    dst: SocketAddr,
) -> Option<Vec<u8>> {
    if src.is_ipv4() != dst.is_ipv4() {
        return None;
    }
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST;
    header.sequence_number = seq;
    let tuple = vec![
        Tuple::Ip(vec![
            IPTuple::SourceAddress(src.ip()),
            IPTuple::DestinationAddress(dst.ip()),
        ]),
        Tuple::Proto(vec![
            ProtoTuple::Protocol(protocol),
            ProtoTuple::SourcePort(src.port()),
            ProtoTuple::DestinationPort(dst.port()),
        ]),
    ];
    let mut message = NetlinkMessage::new(
        header,
        NetlinkPayload::from(NetfilterMessage::new(
            NetfilterHeader::new(family(&src.ip()), 0, 0),
            ConntrackMessage::Get(vec![ConntrackAttribute::CtaTupleOrig(tuple)]),
        )),
    );
    message.finalize();
    let mut bytes = vec![0u8; message.buffer_len()];
    message.serialize(&mut bytes);
    Some(bytes)
}

/// Finds the answer to request `seq` in one datagram from the socket: `Ok(None)` if the
/// datagram holds no message for `seq` (a late answer to an earlier request). Never panics and
/// reads nothing outside `bytes`.
pub fn parse_reply(bytes: &[u8], seq: u32) -> Result<Option<Reply>, ParseError> {
    message_for(bytes, seq)?.map(parse_message).transpose()
}

/// The message answering request `seq` in one datagram (`Ok(None)`: none does).
pub(crate) fn message_for(bytes: &[u8], seq: u32) -> Result<Option<&[u8]>, ParseError> {
    let mut offset = 0usize;
    while bytes.len().saturating_sub(offset) >= NLMSG_HDRLEN {
        let rest = &bytes[offset..];
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            return Err(ParseError(format!(
                "message length {len} with {} bytes left",
                rest.len()
            )));
        }
        let message_seq = u32::from_ne_bytes([rest[8], rest[9], rest[10], rest[11]]);
        if message_seq == seq {
            return Ok(Some(&rest[..len]));
        }
        // Messages are 4-byte aligned within a datagram.
        offset += len.div_ceil(4) * 4;
    }
    Ok(None)
}

fn parse_message(bytes: &[u8]) -> Result<Reply, ParseError> {
    Ok(parse_message_with(bytes, entry)?.map_or(Reply::NotFound, Reply::Entry))
}

/// An answer to a GET: the entry's attributes read by `read`, or `None` for no entry (`ENOENT`).
pub(crate) fn parse_message_with<T>(
    bytes: &[u8],
    read: impl Fn(&[ConntrackAttribute]) -> Result<T, ParseError>,
) -> Result<Option<T>, ParseError> {
    let message =
        NetlinkMessage::<NetfilterMessage>::deserialize(bytes).map_err(|e| ParseError(e.to_string()))?;
    match message.payload {
        NetlinkPayload::Error(error) => {
            let code = error.raw_code();
            if code == -libc::ENOENT {
                Ok(None)
            } else {
                Err(ParseError(format!("error {code}")))
            }
        }
        NetlinkPayload::InnerMessage(NetfilterMessage {
            inner:
                NetfilterMessageInner::Conntrack(
                    ConntrackMessage::New(attributes) | ConntrackMessage::Get(attributes),
                ),
            ..
        }) => read(&attributes).map(Some),
        other => Err(ParseError(format!("unexpected message {other:?}"))),
    }
}

/// The (source, destination) of a TCP tuple.
fn tuple(parts: &[Tuple]) -> Option<(SocketAddr, SocketAddr)> {
    tuple_of(parts, Protocol::Tcp)
}

/// The (source, destination) of a tuple of `protocol` (`None` for another protocol).
pub(crate) fn tuple_of(parts: &[Tuple], protocol: Protocol) -> Option<(SocketAddr, SocketAddr)> {
    let (mut src, mut dst, mut sport, mut dport, mut proto) = (None, None, None, None, None);
    for part in parts {
        match part {
            Tuple::Ip(ips) => {
                for ip in ips {
                    match ip {
                        IPTuple::SourceAddress(a) => src = Some(*a),
                        IPTuple::DestinationAddress(a) => dst = Some(*a),
                        _ => {}
                    }
                }
            }
            Tuple::Proto(protos) => {
                for p in protos {
                    match p {
                        ProtoTuple::Protocol(p) => proto = Some(*p),
                        ProtoTuple::SourcePort(p) => sport = Some(*p),
                        ProtoTuple::DestinationPort(p) => dport = Some(*p),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if proto != Some(protocol) {
        return None;
    }
    Some((SocketAddr::new(src?, sport?), SocketAddr::new(dst?, dport?)))
}

fn entry(attributes: &[ConntrackAttribute]) -> Result<Entry, ParseError> {
    let (mut original, mut reply, mut tcp) = (None, None, None);
    for attribute in attributes {
        match attribute {
            ConntrackAttribute::CtaTupleOrig(parts) => original = tuple(parts),
            ConntrackAttribute::CtaTupleReply(parts) => reply = tuple(parts),
            ConntrackAttribute::CtaProtoInfo(infos) => {
                for info in infos {
                    if let ProtoInfo::TCP(fields) = info {
                        let mut t = TcpInfo::default();
                        for field in fields {
                            match field {
                                ProtoInfoTCP::State(s) => t.state = *s,
                                ProtoInfoTCP::OriginalWindowScale(s) => t.wscale_original = *s,
                                ProtoInfoTCP::ReplyWindowScale(s) => t.wscale_reply = *s,
                                ProtoInfoTCP::OriginalFlags(f) => t.flags_original = f.flags,
                                ProtoInfoTCP::ReplyFlags(f) => t.flags_reply = f.flags,
                                _ => {}
                            }
                        }
                        tcp = Some(t);
                    }
                }
            }
            _ => {}
        }
    }
    match (original, reply) {
        (Some(original), Some(reply)) => Ok(Entry { original, reply, tcp }),
        _ => Err(ParseError("entry without TCP tuples".into())),
    }
}

/// A ctnetlink socket for lookups, one at a time (blocking, bounded by the receive timeout).
pub struct Conntrack {
    fd: OwnedFd,
    seq: u32,
    buffer: Vec<u8>,
}

impl Conntrack {
    /// Opens the socket; each receive waits at most `timeout`. Needs CAP_NET_ADMIN; the kernel
    /// loads `nf_conntrack_netlink` on the first request where it can (OpenWrt:
    /// kmod-nf-conntrack-netlink).
    pub fn open(timeout: Duration) -> io::Result<Conntrack> {
        // SAFETY: plain socket(2); the descriptor is owned from here on.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let tv = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: timeout.subsec_micros().max(1) as libc::suseconds_t,
        };
        // SAFETY: setsockopt with a timeval of the right size on our socket.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Conntrack {
            fd,
            seq: 0,
            buffer: vec![0u8; RECV_BUFFER],
        })
    }

    /// Sends one netlink request to the kernel.
    fn send_request(&self, request: &[u8]) -> io::Result<()> {
        // SAFETY: an all-zero sockaddr_nl with the family set addresses the kernel.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: sendto with a valid buffer and address of the given sizes.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                request.as_ptr() as *const libc::c_void,
                request.len(),
                0,
                &kernel as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The entry holding the TCP tuple `src -> dst` in either direction.
    pub fn get(&mut self, src: SocketAddr, dst: SocketAddr) -> io::Result<Reply> {
        self.ask(Protocol::Tcp, (src, dst), parse_message)
    }

    /// Sends a GET for the `protocol` tuple `src -> dst` and reads the answer with `parse`.
    pub(crate) fn ask<T>(
        &mut self,
        protocol: Protocol,
        (src, dst): (SocketAddr, SocketAddr),
        parse: impl Fn(&[u8]) -> Result<T, ParseError>,
    ) -> io::Result<T> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let request = get_request_for(seq, protocol, src, dst)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "addresses of two families"))?;
        self.send_request(&request)?;
        // Late answers to earlier (timed-out) requests are skipped; a few at most.
        for _ in 0..8 {
            // SAFETY: recv into our buffer of its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buffer.as_mut_ptr() as *mut libc::c_void,
                    self.buffer.len(),
                    0,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let bytes = &self.buffer[..n as usize];
            let invalid = |e: ParseError| io::Error::new(io::ErrorKind::InvalidData, e);
            if let Some(message) = message_for(bytes, seq).map_err(invalid)? {
                return parse(message).map_err(invalid);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no answer to the conntrack request",
        ))
    }

    /// The window scales of the flow between `a` and `b` as the daemon sees it (whichever NAT
    /// side), `Ok(None)` if conntrack has no entry for it.
    pub fn lookup(&mut self, a: SocketAddr, b: SocketAddr) -> io::Result<Option<Scales>> {
        for (src, dst) in [(a, b), (b, a)] {
            if let Reply::Entry(entry) = self.get(src, dst)? {
                if let Some(scales) = entry.scales_of(a, b) {
                    return Ok(Some(scales));
                }
            }
        }
        Ok(None)
    }
}

mod dump;
pub use dump::{dump_request, parse_dump, Marked};
mod udp_counts;
pub use udp_counts::{parse_udp_dump, parse_udp_reply, udp_dump_request, UdpCount};

#[cfg(test)]
mod tests;
