//! Batched verdicts (`NFQNL_MSG_VERDICT_BATCH`): one netlink message accepts every packet of a
//! queue up to a packet id, instead of one `sendmsg` per packet.
//!
//! The kernel's `nfqnl_recv_verdict_batch` (net/netfilter/nfnetlink_queue.c) takes every entry
//! of the queue whose id is at most the given one (ids grow per queue) and reinjects it with
//! the verdict. A packet whose payload was rewritten still gets its own verdict first, which
//! takes it off the queue before the batch covers its id. nfq 0.2.5 has no batch verdict, so
//! the message is built here (32 bytes) and sent on the queue's socket.

use std::io;
use std::os::fd::RawFd;

/// `NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_VERDICT_BATCH` (linux/netfilter/nfnetlink*.h).
const MSG_TYPE: u16 = (3 << 8) | 3;
/// `NFQA_VERDICT_HDR`.
const ATTR_VERDICT_HDR: u16 = 2;
/// `NF_ACCEPT`.
const NF_ACCEPT: u32 = 1;
/// nlmsghdr (16) + nfgenmsg (4) + nlattr (4) + nfqnl_msg_verdict_hdr (8).
pub(crate) const MESSAGE_BYTES: usize = 32;

/// The message accepting every packet of `queue` with an id up to `id`.
pub(crate) fn accept_up_to_message(queue: u16, id: u32) -> [u8; MESSAGE_BYTES] {
    let mut m = [0u8; MESSAGE_BYTES];
    // nlmsghdr, host order: length, type, flags (NLM_F_REQUEST, no ACK asked), seq, port id.
    m[0..4].copy_from_slice(&(MESSAGE_BYTES as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&MSG_TYPE.to_ne_bytes());
    m[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    // nfgenmsg: family AF_UNSPEC, version NFNETLINK_V0, the queue number in network order.
    m[18..20].copy_from_slice(&queue.to_be_bytes());
    // nlattr: length (header + verdict header), type.
    m[20..22].copy_from_slice(&12u16.to_ne_bytes());
    m[22..24].copy_from_slice(&ATTR_VERDICT_HDR.to_ne_bytes());
    // nfqnl_msg_verdict_hdr: verdict and id, both network order.
    m[24..28].copy_from_slice(&NF_ACCEPT.to_be_bytes());
    m[28..32].copy_from_slice(&id.to_be_bytes());
    m
}

/// Sends the batch verdict on the queue's netlink socket (its default peer is the kernel).
#[allow(unsafe_code, reason = "send(2) on the queue's socket through libc")]
pub(crate) fn send_accept_up_to(fd: RawFd, queue: u16, id: u32) -> io::Result<()> {
    let m = accept_up_to_message(queue, id);
    // SAFETY: send reads `m.len()` bytes from a live buffer.
    let n = unsafe { libc::send(fd, m.as_ptr().cast(), m.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The highest id seen per queue since the last flush: what one batch verdict accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) ack: Option<u32>,
    pub(crate) data: Option<u32>,
    /// Packets accepted since the last flush.
    pub(crate) count: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_laid_out_as_the_kernel_reads_it() {
        let m = accept_up_to_message(0x0102, 0xa0b0_c0d0);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 32);
        // NFNL_SUBSYS_QUEUE (3) in the high byte, NFQNL_MSG_VERDICT_BATCH (3) in the low one.
        assert_eq!(u16::from_ne_bytes(m[4..6].try_into().unwrap()), 0x0303);
        assert_eq!(u16::from_ne_bytes(m[6..8].try_into().unwrap()), 1);
        assert_eq!(&m[16..20], &[0, 0, 0x01, 0x02]);
        assert_eq!(u16::from_ne_bytes(m[20..22].try_into().unwrap()), 12);
        assert_eq!(u16::from_ne_bytes(m[22..24].try_into().unwrap()), 2);
        assert_eq!(&m[24..28], &[0, 0, 0, 1]);
        assert_eq!(&m[28..32], &[0xa0, 0xb0, 0xc0, 0xd0]);
    }
}
