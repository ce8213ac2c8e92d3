//! Which qdisc holds an interface's ingress hook: clsact (what netlink-attached tc programs
//! need, with its ingress and egress hooks) or `ingress` (what sqm-scripts adds for its IFB
//! redirect; it has no egress hook). Only one of the two can exist. It matters before Linux 6.6:
//! a filter added for egress (parent ffff:fff3) to an `ingress` qdisc is put on its one block
//! and so runs on ingress (tried on 6.18 with `tc filter add dev X egress ...`: the filter is
//! listed under ingress), so the egress program must not be attached there.
//!
//! Asked with one RTM_GETQDISC for the ingress parent naming the kind: the kernel answers with
//! the qdisc if it is of that kind and with EINVAL if not (`tc_get_qdisc`, net/sched/sch_api.c:
//! "Invalid qdisc name"), so nothing needs to be dumped or parsed.
//!
//! Also whether one filter exists ([`filter_exists`]): one RTM_GETTFILTER for its parent,
//! priority, protocol and handle, answered with the filter or an error (`tc_get_tfilter`).
#![allow(
    unsafe_code,
    reason = "a NETLINK_ROUTE socket through libc: socket, sendto, recv"
)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `TC_H_INGRESS` / `TC_H_CLSACT`: the parent of the ingress and clsact qdiscs.
const TC_H_INGRESS: u32 = 0xffff_fff1;
const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const RTM_NEWTFILTER: u16 = 44;
const RTM_GETTFILTER: u16 = 46;
/// `ETH_P_ALL` in network order, as the filters are added.
const ETH_P_ALL_BE: u16 = 0x0003u16.to_be();
const NLMSG_ERROR: u16 = 2;
const TCA_KIND: u16 = 1;

/// Whether `ifindex` (in the calling thread's network namespace) has a qdisc of `kind` at its
/// ingress parent.
pub(crate) fn ingress_parent_is(ifindex: u32, kind: &str) -> io::Result<bool> {
    ask(
        &request(RTM_GETQDISC, ifindex, 0, TC_H_INGRESS, 0, kind),
        RTM_NEWQDISC,
    )
}

/// Whether the filter at `parent` (ffff:fff2 ingress, ffff:fff3 egress), `priority` and
/// `handle`, for all protocols, of kind `bpf`, exists on `ifindex`.
pub(crate) fn filter_exists(ifindex: u32, parent: u32, priority: u16, handle: u32) -> io::Result<bool> {
    let info = (u32::from(priority) << 16) | u32::from(ETH_P_ALL_BE);
    ask(
        &request(RTM_GETTFILTER, ifindex, handle, parent, info, "bpf"),
        RTM_NEWTFILTER,
    )
}

/// Sends `request`; true if the kernel answers with a message of type `found`, false on EINVAL
/// or ENOENT.
fn ask(request: &[u8], found: u16) -> io::Result<bool> {
    // SAFETY: plain socket(2); the descriptor is owned from here on.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just opened and is ours.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: a zeroed sockaddr_nl addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: the buffer and the address are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let timeout = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: setsockopt with a timeval of the right size on our socket.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    let mut buffer = vec![0u8; 8192];
    let mut seen = false;
    // The qdisc (if of that kind) and the ACK may come in one datagram or two.
    for _ in 0..4 {
        // SAFETY: recv writes at most buffer.len() bytes into the buffer.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let (qdisc, done) = answer(&buffer[..n as usize], found)?;
        seen |= qdisc;
        if done {
            return Ok(seen);
        }
    }
    Ok(seen)
}

/// Reads the messages of one datagram: whether one is the qdisc (of the kind asked), and
/// whether the answer is over (the ACK, or EINVAL for another kind, ENOENT for none).
fn answer(reply: &[u8], found: u16) -> io::Result<(bool, bool)> {
    let mut qdisc = false;
    let mut offset = 0;
    while reply.len().saturating_sub(offset) >= 16 {
        let m = &reply[offset..];
        let len = u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize;
        if len < 16 || len > m.len() {
            return Err(io::Error::other("bad netlink length"));
        }
        match u16::from_ne_bytes([m[4], m[5]]) {
            t if t == found => qdisc = true,
            NLMSG_ERROR if len >= 20 => {
                let code = i32::from_ne_bytes([m[16], m[17], m[18], m[19]]);
                return match -code {
                    0 => Ok((qdisc, true)),
                    libc::EINVAL | libc::ENOENT => Ok((false, true)),
                    errno => Err(io::Error::from_raw_os_error(errno)),
                };
            }
            other => return Err(io::Error::other(format!("unexpected netlink message {other}"))),
        }
        offset += len.div_ceil(4) * 4;
    }
    Ok((qdisc, false))
}

/// nlmsghdr + tcmsg + TCA_KIND.
fn request(kind_of_message: u16, ifindex: u32, handle: u32, parent: u32, info: u32, kind: &str) -> Vec<u8> {
    let mut attr = Vec::new();
    let name_len = kind.len() + 1;
    attr.extend_from_slice(&((4 + name_len) as u16).to_ne_bytes());
    attr.extend_from_slice(&TCA_KIND.to_ne_bytes());
    attr.extend_from_slice(kind.as_bytes());
    attr.push(0);
    while attr.len() % 4 != 0 {
        attr.push(0);
    }
    let len = 16 + 20 + attr.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind_of_message.to_ne_bytes());
    // Without ECHO the kernel (6.18) answers a GET for one qdisc with nothing at all; with it,
    // the qdisc, then the ACK.
    m.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_ECHO) as u16).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel
                                              // tcmsg: family and padding, ifindex, handle (any), parent, info.
    m.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
    m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    m.extend_from_slice(&handle.to_ne_bytes());
    m.extend_from_slice(&parent.to_ne_bytes());
    m.extend_from_slice(&info.to_ne_bytes());
    m.extend_from_slice(&attr);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_names_the_ingress_parent_and_the_kind() {
        let m = request(RTM_GETQDISC, 7, 0, TC_H_INGRESS, 0, "ingress");
        assert_eq!(m.len(), 16 + 20 + 12);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize, m.len());
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), RTM_GETQDISC);
        assert_eq!(i32::from_ne_bytes(m[20..24].try_into().unwrap()), 7);
        assert_eq!(u32::from_ne_bytes(m[28..32].try_into().unwrap()), TC_H_INGRESS);
        assert_eq!(&m[40..48], b"ingress\0");
    }

    #[test]
    fn answers_are_read_by_type_and_error_code() {
        let mut qdisc = vec![0u8; 36];
        qdisc[0..4].copy_from_slice(&36u32.to_ne_bytes());
        qdisc[4..6].copy_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        assert_eq!(answer(&qdisc, RTM_NEWQDISC).unwrap(), (true, false));
        let mut ack = vec![0u8; 36];
        ack[0..4].copy_from_slice(&36u32.to_ne_bytes());
        ack[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        assert_eq!(answer(&ack, RTM_NEWQDISC).unwrap(), (false, true));
        let both: Vec<u8> = qdisc.iter().chain(&ack).copied().collect();
        assert_eq!(answer(&both, RTM_NEWQDISC).unwrap(), (true, true));
        let mut error = ack.clone();
        error[16..20].copy_from_slice(&(-libc::EINVAL).to_ne_bytes());
        assert_eq!(answer(&error, RTM_NEWQDISC).unwrap(), (false, true));
        error[16..20].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        assert!(answer(&error, RTM_NEWQDISC).is_err());
        assert_eq!(answer(&[0; 4], RTM_NEWQDISC).unwrap(), (false, false));
    }
}
