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
const NLMSG_ERROR: u16 = 2;
const TCA_KIND: u16 = 1;

/// Whether `ifindex` (in the calling thread's network namespace) has a qdisc of `kind` at its
/// ingress parent.
pub(crate) fn ingress_parent_is(ifindex: u32, kind: &str) -> io::Result<bool> {
    let request = request(ifindex, kind);
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
    let mut buffer = vec![0u8; 8192];
    // SAFETY: recv writes at most buffer.len() bytes into the buffer.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    answer(&buffer[..n as usize])
}

/// nlmsghdr + tcmsg + TCA_KIND.
fn request(ifindex: u32, kind: &str) -> Vec<u8> {
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
    m.extend_from_slice(&RTM_GETQDISC.to_ne_bytes());
    m.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel
                                              // tcmsg: family, two pad bytes... then ifindex, handle (any), parent, info.
    m.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
    m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&TC_H_INGRESS.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&attr);
    m
}

/// A qdisc message: it is of the kind asked; EINVAL (other kind) or ENOENT (none): it is not.
fn answer(reply: &[u8]) -> io::Result<bool> {
    if reply.len() < 16 {
        return Err(io::Error::other("short RTM_GETQDISC reply"));
    }
    match u16::from_ne_bytes([reply[4], reply[5]]) {
        RTM_NEWQDISC => Ok(true),
        NLMSG_ERROR if reply.len() >= 20 => {
            let code = i32::from_ne_bytes([reply[16], reply[17], reply[18], reply[19]]);
            match -code {
                libc::EINVAL | libc::ENOENT => Ok(false),
                0 => Ok(true),
                errno => Err(io::Error::from_raw_os_error(errno)),
            }
        }
        other => Err(io::Error::other(format!("unexpected netlink message {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_names_the_ingress_parent_and_the_kind() {
        let m = request(7, "ingress");
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
        qdisc[4..6].copy_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        assert!(answer(&qdisc).unwrap());
        let mut error = vec![0u8; 36];
        error[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        error[16..20].copy_from_slice(&(-libc::EINVAL).to_ne_bytes());
        assert!(!answer(&error).unwrap());
        error[16..20].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        assert!(answer(&error).is_err());
        assert!(answer(&[0; 4]).is_err());
    }
}
