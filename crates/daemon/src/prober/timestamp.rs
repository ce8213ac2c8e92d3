//! ICMP timestamp messages (RFC 792, types 13 and 14): the one-way probes of the prober.
//!
//! A request carries our clock at sending (the originate timestamp); the reflector answers with
//! its clock when the request arrived (receive) and when the reply left (transmit), each in
//! milliseconds since midnight UTC. The request's trip is the upload link's, the reply's the
//! download link's, each measured against two clocks: it carries their offset, which the
//! engine takes off against its minimum. Linux answers them in the kernel, as do most routers;
//! cake-autorate's `tsping` measures one-way delays the same way. There is no ICMPv6
//! timestamp: IPv6 targets get echoes.
//!
//! A timestamp message has no room for the echo's cookie. A reply is ours if its identifier,
//! its sequence number (a probe still waiting) and its originate timestamp (the milliseconds we
//! sent) are ours.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use slipstream_engine::OneWayDelays;

use super::echo::{checksum, icmp_message, Framing};

/// Bytes of a timestamp request and of its reply.
pub(crate) const MESSAGE_LEN: usize = 20;

const TIMESTAMP_REQUEST: u8 = 13;
pub(crate) const TIMESTAMP_REPLY: u8 = 14;
const DAY_US: i64 = 86_400_000_000;
/// RFC 792: a time that is not milliseconds since midnight UTC has this bit set.
const NON_STANDARD: u32 = 1 << 31;

/// Microseconds since midnight UTC of `time`.
pub(crate) fn micros_of_day(time: SystemTime) -> i64 {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    (since.as_micros() % DAY_US as u128) as i64
}

/// A timestamp request, sent at `sent_us_of_day` (its milliseconds are the originate field).
pub(crate) fn request(id: u16, seq: u16, sent_us_of_day: i64) -> [u8; MESSAGE_LEN] {
    let mut m = [0u8; MESSAGE_LEN];
    m[0] = TIMESTAMP_REQUEST;
    m[4..6].copy_from_slice(&id.to_be_bytes());
    m[6..8].copy_from_slice(&seq.to_be_bytes());
    m[8..12].copy_from_slice(&originate(sent_us_of_day).to_be_bytes());
    let sum = checksum(&m);
    m[2..4].copy_from_slice(&sum.to_be_bytes());
    m
}

fn originate(sent_us_of_day: i64) -> u32 {
    (sent_us_of_day / 1000) as u32
}

/// A timestamp reply's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) seq: u16,
    pub(crate) originate: u32,
    pub(crate) receive: u32,
    pub(crate) transmit: u32,
}

/// `received` as a timestamp reply with identifier `id`, if it is one.
pub(crate) fn parse_reply(received: &[u8], framing: Framing, id: u16) -> Option<Reply> {
    let m = icmp_message(received, framing)?;
    if m.len() < MESSAGE_LEN || m[0] != TIMESTAMP_REPLY || m[1] != 0 || m[4..6] != id.to_be_bytes() {
        return None;
    }
    let word = |at: usize| u32::from_be_bytes([m[at], m[at + 1], m[at + 2], m[at + 3]]);
    Some(Reply {
        seq: u16::from_be_bytes([m[6], m[7]]),
        originate: word(8),
        receive: word(12),
        transmit: word(16),
    })
}

impl Reply {
    /// Whether this answers the request sent at `sent_us_of_day`.
    pub(crate) fn answers(&self, sent_us_of_day: i64) -> bool {
        self.originate == originate(sent_us_of_day)
    }

    /// The two halves, sent and received at these microseconds of the day (ours); `None` where
    /// the reflector's times are not standard (no common scale with ours). Each is taken within
    /// half a day either way: the two clocks' offset, wrapped at midnight.
    pub(crate) fn halves(&self, sent_us_of_day: i64, received_us_of_day: i64) -> Option<OneWayDelays> {
        if (self.receive | self.transmit) & NON_STANDARD != 0 {
            return None;
        }
        let wrap = |us: i64| (us + DAY_US / 2).rem_euclid(DAY_US) - DAY_US / 2;
        Some(OneWayDelays {
            up_us: wrap(i64::from(self.receive) * 1000 - sent_us_of_day),
            down_us: wrap(received_us_of_day - i64::from(self.transmit) * 1000),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reflector's answer to `request`: the reply type, its receive and transmit times.
    fn reply_to(request: &[u8], receive: u32, transmit: u32) -> Vec<u8> {
        let mut r = request.to_vec();
        r[0] = TIMESTAMP_REPLY;
        r[12..16].copy_from_slice(&receive.to_be_bytes());
        r[16..20].copy_from_slice(&transmit.to_be_bytes());
        r
    }

    #[test]
    fn a_request_carries_our_milliseconds_and_checksums_to_zero() {
        let m = request(0x1234, 9, 45_296_789_500);
        assert_eq!(m[0], 13);
        assert_eq!(checksum(&m), 0);
        assert_eq!(u32::from_be_bytes([m[8], m[9], m[10], m[11]]), 45_296_789);
        assert_eq!(m[12..], [0; 8]);
    }

    #[test]
    fn a_reply_gives_both_halves() {
        // Sent at 12:34:56.789500; the reflector's clock is 2 s ahead; 7 ms up, 11 ms down.
        let sent = 45_296_789_500;
        let m = request(7, 3, sent);
        let receive = 45_296_789 + 2000 + 7;
        let transmit = receive;
        let received_at = sent + 7_000 + 11_000;
        let r = parse_reply(&reply_to(&m, receive, transmit), Framing::Message, 7).unwrap();
        assert_eq!((r.seq, r.answers(sent)), (3, true));
        assert!(!r.answers(sent + 1000), "another millisecond: not our request");
        let halves = r.halves(sent, received_at).unwrap();
        // Up: the reflector's milliseconds less our exact send time (its clock truncates).
        assert_eq!(halves.up_us, 2_007_000 - 500);
        assert_eq!(halves.down_us, 18_000 + 500 - 2_007_000);
        // Behind an IPv4 header; another identifier; an echo reply; non-standard times.
        let mut ip = vec![0x45];
        ip.extend_from_slice(&[0; 19]);
        let framed = [ip, reply_to(&m, receive, transmit)].concat();
        assert_eq!(parse_reply(&framed, Framing::Ipv4Header, 7), Some(r));
        assert_eq!(
            parse_reply(&reply_to(&m, receive, transmit), Framing::Message, 8),
            None
        );
        let mut echo = reply_to(&m, receive, transmit);
        echo[0] = 0;
        assert_eq!(parse_reply(&echo, Framing::Message, 7), None);
        assert_eq!(parse_reply(&echo[..19], Framing::Message, 7), None);
        let odd = parse_reply(
            &reply_to(&m, receive | NON_STANDARD, transmit),
            Framing::Message,
            7,
        );
        assert_eq!(odd.unwrap().halves(sent, received_at), None);
    }

    #[test]
    fn midnight_between_the_clocks_wraps() {
        // Sent at 23:59:59.999 by our clock; the reflector's already reads 00:00:00.004.
        let sent = DAY_US - 1_000;
        let m = request(1, 1, sent);
        let r = parse_reply(&reply_to(&m, 4, 4), Framing::Message, 1).unwrap();
        let halves = r.halves(sent, 3_000).unwrap();
        assert_eq!(halves.up_us, 5_000);
        assert_eq!(halves.down_us, -1_000);
    }
}
