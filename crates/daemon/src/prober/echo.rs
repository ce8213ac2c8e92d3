//! ICMP echo messages of the prober: the request it sends and the test a reply must pass to be
//! one of its own answers.
//!
//! A request carries the prober's identifier, a sequence number and an 8-byte cookie drawn at
//! start. A raw socket sees every echo reply the host receives (another `ping` on the router,
//! a reply to a probe of a previous run), so a reply counts only if its identifier, where the
//! socket does not set it itself, and its cookie are ours; its sequence number then finds the
//! probe in the outstanding table. An unprivileged ICMP socket (`SOCK_DGRAM`) gets only the
//! replies to its own identifier, which the kernel sets (the socket's "port").

use std::net::IpAddr;

/// Bytes of a request and of a reply: the 8-byte ICMP header and the cookie.
pub(crate) const MESSAGE_LEN: usize = 16;

const ECHO_REQUEST_V4: u8 = 8;
const ECHO_REPLY_V4: u8 = 0;
const ECHO_REQUEST_V6: u8 = 128;
const ECHO_REPLY_V6: u8 = 129;

/// How a socket hands over what it received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// The ICMP message alone (`SOCK_DGRAM` of either family, raw ICMPv6).
    Message,
    /// The IPv4 header, then the message (raw ICMPv4).
    Ipv4Header,
}

/// An echo request to `target`'s family. The checksum is computed for IPv4 (raw ICMPv4 sockets
/// send it as given); for ICMPv6 the kernel computes it (it covers a pseudo-header the socket
/// knows), and `SOCK_DGRAM` sockets of both families overwrite it, with the identifier.
pub(crate) fn request(target: IpAddr, id: u16, seq: u16, cookie: [u8; 8]) -> [u8; MESSAGE_LEN] {
    let mut m = [0u8; MESSAGE_LEN];
    m[0] = if target.is_ipv4() {
        ECHO_REQUEST_V4
    } else {
        ECHO_REQUEST_V6
    };
    m[4..6].copy_from_slice(&id.to_be_bytes());
    m[6..8].copy_from_slice(&seq.to_be_bytes());
    m[8..].copy_from_slice(&cookie);
    if target.is_ipv4() {
        let sum = checksum(&m);
        m[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    m
}

/// The sequence number of `received` if it is an echo reply to one of our requests: the reply
/// type of `v6`'s family, our `cookie`, and identifier `id` if given (raw sockets; `None` where
/// the kernel matched it).
pub(crate) fn our_reply(
    received: &[u8],
    framing: Framing,
    v6: bool,
    id: Option<u16>,
    cookie: [u8; 8],
) -> Option<u16> {
    let message = icmp_message(received, framing)?;
    if message.len() < MESSAGE_LEN {
        return None;
    }
    let reply = if v6 { ECHO_REPLY_V6 } else { ECHO_REPLY_V4 };
    if message[0] != reply || message[1] != 0 || message[8..MESSAGE_LEN] != cookie {
        return None;
    }
    if id.is_some_and(|id| message[4..6] != id.to_be_bytes()) {
        return None;
    }
    Some(u16::from_be_bytes([message[6], message[7]]))
}

/// The ICMP message in what a socket of `framing` received (past a raw socket's IPv4 header).
pub(crate) fn icmp_message(received: &[u8], framing: Framing) -> Option<&[u8]> {
    match framing {
        Framing::Message => Some(received),
        Framing::Ipv4Header => {
            let ihl = usize::from(*received.first()? & 0x0f) * 4;
            if received.first()? >> 4 != 4 || ihl < 20 {
                return None;
            }
            received.get(ihl..)
        }
    }
}

/// The Internet checksum (RFC 1071) of `bytes`.
pub(crate) fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOKIE: [u8; 8] = *b"slipstrm";
    const V4: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));

    /// What the reflector sends back: the request with the reply type (checksum not checked).
    fn reply_to(request: &[u8], reply_type: u8) -> Vec<u8> {
        let mut r = request.to_vec();
        r[0] = reply_type;
        r
    }

    #[test]
    fn the_ipv4_request_checksums_to_zero() {
        let m = request(V4, 0x1234, 7, COOKIE);
        assert_eq!(m[0], 8);
        assert_eq!(checksum(&m), 0, "a message with its checksum sums to 0");
        assert_ne!(m[2..4], [0, 0]);
        // ICMPv6: type 128, checksum left to the kernel.
        let m6 = request("2001:db8::1".parse().unwrap(), 0x1234, 7, COOKIE);
        assert_eq!((m6[0], &m6[2..4]), (128, &[0u8, 0][..]));
        // The checksum of a known message (RFC 1071's example words).
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
    }

    #[test]
    fn a_reply_to_our_request_gives_its_sequence_number() {
        let m = request(V4, 0x1234, 515, COOKIE);
        let reply = reply_to(&m, 0);
        assert_eq!(
            our_reply(&reply, Framing::Message, false, Some(0x1234), COOKIE),
            Some(515)
        );
        assert_eq!(
            our_reply(&reply, Framing::Message, false, None, COOKIE),
            Some(515)
        );
        // Behind a 20-byte IPv4 header, and one with options (IHL 6).
        let mut ip = vec![0x45; 1];
        ip.extend_from_slice(&[0; 19]);
        assert_eq!(
            our_reply(
                &[ip.clone(), reply.clone()].concat(),
                Framing::Ipv4Header,
                false,
                Some(0x1234),
                COOKIE
            ),
            Some(515)
        );
        let mut ip6 = vec![0x46; 1];
        ip6.extend_from_slice(&[0; 23]);
        assert_eq!(
            our_reply(
                &[ip6, reply.clone()].concat(),
                Framing::Ipv4Header,
                false,
                Some(0x1234),
                COOKIE
            ),
            Some(515)
        );
        // ICMPv6.
        let m6 = request("2001:db8::1".parse().unwrap(), 9, 3, COOKIE);
        assert_eq!(
            our_reply(&reply_to(&m6, 129), Framing::Message, true, Some(9), COOKIE),
            Some(3)
        );
    }

    #[test]
    fn other_messages_are_not_ours() {
        let m = request(V4, 0x1234, 1, COOKIE);
        let reply = reply_to(&m, 0);
        let not = |bytes: &[u8], framing, v6, id| assert_eq!(our_reply(bytes, framing, v6, id, COOKIE), None);
        // Another program's ping: another identifier; or our identifier and another cookie.
        not(&reply, Framing::Message, false, Some(0x4321));
        assert_eq!(
            our_reply(&reply, Framing::Message, false, Some(0x1234), *b"otherrun"),
            None
        );
        // Our own request (looped back), an ICMPv6 reply type on IPv4, an error message.
        not(&m, Framing::Message, false, Some(0x1234));
        not(&reply, Framing::Message, true, Some(0x1234));
        not(&reply_to(&m, 3), Framing::Message, false, Some(0x1234));
        // Cut short, empty, a bad IP header.
        not(&reply[..15], Framing::Message, false, Some(0x1234));
        not(&[], Framing::Ipv4Header, false, Some(0x1234));
        not(
            &[[0x65u8; 1].as_slice(), &[0; 19], &reply].concat(),
            Framing::Ipv4Header,
            false,
            Some(0x1234),
        );
        not(
            &[[0x44u8; 1].as_slice(), &[0; 19], &reply].concat(),
            Framing::Ipv4Header,
            false,
            Some(0x1234),
        );
    }
}
