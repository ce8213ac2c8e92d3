//! The kernel's receive timestamp of queued packets.
//!
//! Two things stand between NFQUEUE and a packet's arrival time:
//!
//! * **The kernel stamps packets only on demand.** `skb->tstamp` is set at receipt only while
//!   some socket on the host asked for receive timestamps (the global `netstamp_needed_key`,
//!   switched on by `SO_TIMESTAMP*`); NFQUEUE adds `NFQA_TIMESTAMP` only to stamped packets. On
//!   a host where nothing asked, forwarded packets come without one (`tests/kernel_timestamps.rs`
//!   measures it). [`RxTimestamps`] asks, for as long as it lives.
//! * **nfq 0.2.5 cannot read it soundly.** `Message::get_timestamp` dereferences the attribute
//!   as a `u64` struct, but netlink attributes are only 4-byte aligned: a misaligned read,
//!   undefined behaviour, which debug builds abort on (`misaligned pointer dereference`) about
//!   every other packet. Fixed upstream since (nfq-rs 1ba7241), but not released. So the
//!   datapath never calls it: it peeks at the head of the next netlink datagram itself
//!   ([`peek`], `MSG_PEEK`: the datagram stays for nfq to read) and parses the attribute from
//!   bytes ([`parse_packet_head`]), matched to nfq's message by packet id. That costs a
//!   syscall per packet (about 1.3 us on the test VM, some 15% of the reader's time per packet
//!   under a flood); with an nfq whose `get_timestamp` reads unaligned, the peek can go.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, SystemTime};

/// Keeps the kernel time-stamping every received packet while it lives.
///
/// An unbound UDP socket with `SO_TIMESTAMPNS` set: it receives nothing and needs no privilege;
/// its only effect is the host-wide switch. The cost is one clock read per received packet.
pub struct RxTimestamps {
    _socket: OwnedFd,
}

impl RxTimestamps {
    /// Asks the kernel to timestamp received packets (queued packets then carry the time).
    pub fn enable() -> io::Result<RxTimestamps> {
        // SAFETY: socket has no memory preconditions; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads `len` bytes from the int we pass.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RxTimestamps { _socket: socket })
    }
}

/// What the head of a queued packet's netlink message says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketHead {
    /// The id the verdict must name.
    pub packet_id: u32,
    /// When the kernel received the packet, if it stamped it.
    pub timestamp: Option<SystemTime>,
}

/// Bytes peeked per datagram: the attributes up to the timestamp (packet header, mark,
/// priority, four interfaces, hardware address) end by byte 116.
pub(crate) const PEEK_BYTES: usize = 256;

/// Copies the head of the next datagram on `fd` into `buf` without consuming it.
/// `Ok(0)`: nothing waiting.
pub(crate) fn peek(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recv writes at most `buf.len()` bytes into `buf`.
    let n = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        let err = io::Error::last_os_error();
        return match err.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(err),
        };
    }
    Ok(n as usize)
}

const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;
/// `NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_PACKET`.
const NFQNL_PACKET_MSG_TYPE: u16 = 3 << 8;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_TIMESTAMP: u16 = 4;
const NFQA_PAYLOAD: u16 = 10;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Parses the packet id and timestamp from the head of an NFQUEUE packet message (netlink
/// header, `nfgenmsg`, attributes up to the payload). `None` if it is not a packet message or
/// has no packet header within `buf`. Reads bytes only, so alignment does not matter.
pub fn parse_packet_head(buf: &[u8]) -> Option<PacketHead> {
    let u16_at = |at: usize| buf.get(at..at + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let u32_at = |at: usize| {
        buf.get(at..at + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
    };
    let be64_at = |at: usize| {
        buf.get(at..at + 8)
            .map(|b| u64::from_be_bytes(b.try_into().unwrap()))
    };
    let msg_len = u32_at(0)? as usize;
    if u16_at(4)? != NFQNL_PACKET_MSG_TYPE || msg_len < NLMSG_HDRLEN + NFGENMSG_LEN {
        return None;
    }
    let end = msg_len.min(buf.len());
    let mut at = NLMSG_HDRLEN + NFGENMSG_LEN;
    let mut packet_id = None;
    let mut timestamp = None;
    while at + 4 <= end {
        let len = u16_at(at)? as usize;
        let kind = u16_at(at + 2)? & NLA_TYPE_MASK;
        if len < 4 {
            break;
        }
        let value = at + 4;
        match kind {
            NFQA_PACKET_HDR if len >= 4 + 4 => {
                packet_id = buf
                    .get(value..value + 4)
                    .map(|b| u32::from_be_bytes(b.try_into().unwrap()));
            }
            NFQA_TIMESTAMP if len >= 4 + 16 => {
                if let (Some(sec), Some(usec)) = (be64_at(value), be64_at(value + 8)) {
                    timestamp = SystemTime::UNIX_EPOCH
                        .checked_add(Duration::from_secs(sec))
                        .and_then(|t| t.checked_add(Duration::from_micros(usec)));
                }
            }
            NFQA_PAYLOAD => break,
            _ => {}
        }
        at += (len + 3) & !3;
    }
    Some(PacketHead {
        packet_id: packet_id?,
        timestamp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        while a.len() % 4 != 0 {
            a.push(0);
        }
        a
    }

    /// A packet message as the kernel builds it: header, mark, indev, hwaddr, timestamp,
    /// payload.
    fn message(id: u32, timestamp: Option<(u64, u64)>) -> Vec<u8> {
        let mut attrs = Vec::new();
        let mut hdr = id.to_be_bytes().to_vec();
        hdr.extend_from_slice(&0x0800u16.to_be_bytes());
        hdr.push(2); // NF_INET_FORWARD
        attrs.extend(attr(NFQA_PACKET_HDR, &hdr));
        attrs.extend(attr(3, &7u32.to_be_bytes()));
        attrs.extend(attr(5, &4u32.to_be_bytes()));
        attrs.extend(attr(9, &[0, 6, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0]));
        if let Some((sec, usec)) = timestamp {
            let mut ts = sec.to_be_bytes().to_vec();
            ts.extend_from_slice(&usec.to_be_bytes());
            attrs.extend(attr(NFQA_TIMESTAMP, &ts));
        }
        attrs.extend(attr(NFQA_PAYLOAD, &[0x45; 40]));
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + NFGENMSG_LEN + attrs.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&NFQNL_PACKET_MSG_TYPE.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&[2, 0, 0x21, 0x16]);
        m.extend(attrs);
        m
    }

    #[test]
    fn packet_id_and_timestamp() {
        let m = message(77, Some((1_700_000_000, 123_456)));
        let head = parse_packet_head(&m).unwrap();
        assert_eq!(head.packet_id, 77);
        assert_eq!(
            head.timestamp,
            Some(
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_micros(123_456)
            )
        );
    }

    #[test]
    fn no_timestamp_attribute() {
        let head = parse_packet_head(&message(5, None)).unwrap();
        assert_eq!(
            head,
            PacketHead {
                packet_id: 5,
                timestamp: None
            }
        );
    }

    #[test]
    fn truncated_peek_keeps_what_it_saw() {
        let m = message(9, Some((1, 2)));
        // Cut inside the timestamp attribute: the id is known, the timestamp is not.
        let cut = parse_packet_head(&m[..60]).unwrap();
        assert_eq!(
            cut,
            PacketHead {
                packet_id: 9,
                timestamp: None
            }
        );
        assert_eq!(parse_packet_head(&m[..22]), None);
    }

    #[test]
    fn other_messages_are_ignored() {
        let mut m = message(1, Some((1, 2)));
        m[4..6].copy_from_slice(&0x0002u16.to_ne_bytes()); // NLMSG_ERROR
        assert_eq!(parse_packet_head(&m), None);
        assert_eq!(parse_packet_head(&[]), None);
    }

    #[test]
    fn zero_length_attribute_stops_the_walk() {
        let mut m = message(3, Some((1, 2)));
        // Corrupt the mark attribute's length to 0: no infinite loop, id already read.
        let mark_at = NLMSG_HDRLEN + NFGENMSG_LEN + 12;
        m[mark_at..mark_at + 2].copy_from_slice(&0u16.to_ne_bytes());
        assert_eq!(
            parse_packet_head(&m),
            Some(PacketHead {
                packet_id: 3,
                timestamp: None
            })
        );
    }
}
