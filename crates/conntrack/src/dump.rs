//! Every TCP connection whose conntrack mark has bits of a mask set: the flows the firewall
//! classed. The eBPF datapath learns a flow from its handshake (NFQUEUE), so after a restart it
//! would never see the flows already running; a dump at start puts them back into its map.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_netfilter::conntrack::{ConntrackAttribute, ConntrackMessage};
use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterMessageInner};

use super::{entry, family, Conntrack, Entry};

/// Netlink message types that end or fail a dump.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// A dump datagram holds many entries; the kernel fills up to about a page or two.
const DUMP_BUFFER: usize = 64 * 1024;

/// One classed connection: its entry and its whole conntrack mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marked {
    /// Tuples and TCP state.
    pub entry: Entry,
    /// The connection's mark (all 32 bits).
    pub mark: u32,
}

/// The bytes of a dump request for the connections of one IP family.
pub fn dump_request(seq: u32, v6: bool) -> Vec<u8> {
    dump_request_with(seq, v6, vec![])
}

/// The bytes of a dump request for the connections of one IP family, with `attributes` (the
/// kernel's filters).
pub(crate) fn dump_request_with(seq: u32, v6: bool, attributes: Vec<ConntrackAttribute>) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = seq;
    let any: IpAddr = if v6 {
        IpAddr::from([0u16; 8])
    } else {
        IpAddr::from([0u8; 4])
    };
    let mut message = NetlinkMessage::new(
        header,
        NetlinkPayload::from(NetfilterMessage::new(
            NetfilterHeader::new(family(&any), 0, 0),
            ConntrackMessage::Get(attributes),
        )),
    );
    message.finalize();
    let mut bytes = vec![0u8; message.buffer_len()];
    message.serialize(&mut bytes);
    bytes
}

/// Reads one datagram of a dump: the TCP entries whose mark has a bit of `mask` set go to
/// `out`; true when the dump is over. Other messages (other protocols, unparsable ones) are
/// skipped.
pub fn parse_dump(bytes: &[u8], mask: u32, out: &mut Vec<Marked>) -> io::Result<bool> {
    datagram_entries(bytes, |attributes| {
        let mark = attributes.iter().find_map(|a| match a {
            ConntrackAttribute::CtaMark(m) => Some(*m),
            _ => None,
        });
        if let (Some(mark), Ok(entry)) = (mark, entry(attributes)) {
            if mark & mask != 0 && entry.tcp.is_some() {
                out.push(Marked { entry, mark });
            }
        }
    })
}

/// Hands each conntrack entry of one dump datagram to `each`; true when the dump is over.
/// Messages that do not parse are skipped; an error message ends the dump with its error.
pub(crate) fn datagram_entries(
    bytes: &[u8],
    mut each: impl FnMut(&[ConntrackAttribute]),
) -> io::Result<bool> {
    let mut offset = 0usize;
    while bytes.len().saturating_sub(offset) >= 16 {
        let rest = &bytes[offset..];
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len < 16 || len > rest.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad netlink length"));
        }
        match u16::from_ne_bytes([rest[4], rest[5]]) {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let code = rest
                    .get(16..20)
                    .map_or(0, |c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
                return if code == 0 {
                    Ok(true)
                } else {
                    Err(io::Error::from_raw_os_error(-code))
                };
            }
            _ => {}
        }
        if let Ok(message) = NetlinkMessage::<NetfilterMessage>::deserialize(&rest[..len]) {
            if let NetlinkPayload::InnerMessage(NetfilterMessage {
                inner:
                    NetfilterMessageInner::Conntrack(
                        ConntrackMessage::New(attributes) | ConntrackMessage::Get(attributes),
                    ),
                ..
            }) = message.payload
            {
                each(&attributes);
            }
        }
        offset += len.div_ceil(4) * 4;
    }
    Ok(false)
}

impl Conntrack {
    /// The TCP connections (IPv4 and IPv6) whose mark has a bit of `mask` set, at most `limit`.
    pub fn marked(&mut self, mask: u32, limit: usize) -> io::Result<Vec<Marked>> {
        let mut out = Vec::new();
        for v6 in [false, true] {
            self.seq = self.seq.wrapping_add(1);
            let request = dump_request(self.seq, v6);
            self.run_dump(&request, |datagram| parse_dump(datagram, mask, &mut out))?;
        }
        out.truncate(limit);
        Ok(out)
    }

    /// Sends a dump request and hands each datagram of the answer to `datagram` until it says
    /// the dump is over.
    #[allow(unsafe_code, reason = "recv on the netlink socket")]
    pub(crate) fn run_dump(
        &mut self,
        request: &[u8],
        mut datagram: impl FnMut(&[u8]) -> io::Result<bool>,
    ) -> io::Result<()> {
        let mut buffer = vec![0u8; DUMP_BUFFER];
        self.send_request(request)?;
        loop {
            // SAFETY: recv into our buffer of its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr() as *mut libc::c_void,
                    buffer.len(),
                    0,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if datagram(&buffer[..n as usize])? {
                return Ok(());
            }
        }
    }
}
