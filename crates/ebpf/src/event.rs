//! A packet report from the ring buffer (`struct event` in src/bpf/slipstream.bpf.c).

/// Bytes of each packet reported, from its IP header (`HEAD_BYTES`).
pub const HEAD_BYTES: usize = 128;
/// Size of `struct event`: time, interface, rule, direction, length, head.
pub const EVENT_BYTES: usize = 8 + 4 + 2 + 1 + 1 + HEAD_BYTES;

/// One reported packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event<'a> {
    /// When the program saw the packet: `bpf_ktime_get_ns()`, CLOCK_MONOTONIC.
    pub ktime_ns: u64,
    /// The interface it passed (its index).
    pub ifindex: u32,
    /// The rule number the daemon gave the flow.
    pub rule: u16,
    /// Leaving towards the LAN (its receiver is a LAN host); else it entered from the LAN.
    pub egress: bool,
    /// The packet's IP and TCP headers: a pure ACK whole, a data segment without its payload
    /// (the IP length field still gives the full length); at most [`HEAD_BYTES`].
    pub head: &'a [u8],
}

impl<'a> Event<'a> {
    /// Reads a report; `None` if it is shorter than `struct event` or its length is impossible.
    pub fn parse(bytes: &'a [u8]) -> Option<Event<'a>> {
        if bytes.len() < EVENT_BYTES {
            return None;
        }
        let ktime_ns = u64::from_ne_bytes(bytes[0..8].try_into().ok()?);
        let ifindex = u32::from_ne_bytes(bytes[8..12].try_into().ok()?);
        let rule = u16::from_ne_bytes(bytes[12..14].try_into().ok()?);
        let head_len = usize::from(bytes[15]);
        if head_len > HEAD_BYTES {
            return None;
        }
        Some(Event {
            ktime_ns,
            ifindex,
            rule,
            egress: bytes[14] != 0,
            head: &bytes[16..16 + head_len],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_layout() {
        let mut raw = vec![0u8; EVENT_BYTES];
        raw[0..8].copy_from_slice(&123_456_789u64.to_ne_bytes());
        raw[8..12].copy_from_slice(&7u32.to_ne_bytes());
        raw[12..14].copy_from_slice(&3u16.to_ne_bytes());
        raw[14] = 1;
        raw[15] = 52;
        raw[16] = 0x45;
        let ev = Event::parse(&raw).unwrap();
        assert_eq!(ev.ktime_ns, 123_456_789);
        assert_eq!(ev.ifindex, 7);
        assert_eq!(ev.rule, 3);
        assert!(ev.egress);
        assert_eq!(ev.head.len(), 52);
        assert_eq!(ev.head[0], 0x45);
    }

    #[test]
    fn rejects_short_or_impossible_reports() {
        assert_eq!(Event::parse(&[0u8; 20]), None);
        let mut raw = vec![0u8; EVENT_BYTES];
        raw[15] = 200;
        assert_eq!(Event::parse(&raw), None);
    }
}
