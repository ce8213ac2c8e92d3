//! The prober's ICMP echo socket: non-blocking, receive timestamps on.
//!
//! For IPv4 a raw ICMP socket is tried first: only it may send timestamp requests (the one-way
//! probes, `timestamp`). For IPv6, and where no raw socket can be had, an unprivileged ICMP
//! socket (`SOCK_DGRAM`/`IPPROTO_ICMP`, where `net.ipv4.ping_group_range` holds the daemon's
//! group): the kernel sets the identifier, computes the checksum and hands it only the replies
//! to that identifier. A raw socket needs CAP_NET_RAW
//! (the daemon keeps it, `privileges`); its filter (`ICMP_FILTER`, `ICMP6_FILTER`) lets only
//! echo and timestamp replies through, and the prober matches them itself (`echo`).
//!
//! `SO_TIMESTAMPNS` makes the kernel stamp each reply when it arrives (wall clock), so the time
//! the packet thread takes to read it does not add to the sample.
#![allow(
    unsafe_code,
    reason = "socket(2), setsockopt(2), sendto(2) and recvmsg(2) with its control messages have no safe wrapper in libc"
)]

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::echo::Framing;
use super::timestamp::TIMESTAMP_REPLY;

/// `ICMP_FILTER` (linux/icmp.h), an option of `SOL_RAW`: a mask of the ICMPv4 types dropped.
const ICMP_FILTER: libc::c_int = 1;
/// `ICMP6_FILTER` (linux/icmpv6.h), an option of `IPPROTO_ICMPV6`: eight words, a set bit
/// drops that ICMPv6 type.
const ICMP6_FILTER: libc::c_int = 1;

pub(crate) struct EchoSocket {
    fd: OwnedFd,
    /// Whether the socket is `AF_INET6`.
    pub(crate) v6: bool,
    /// How received messages come.
    pub(crate) framing: Framing,
    /// Whether the kernel sets the identifier and filters replies by it (`SOCK_DGRAM`).
    pub(crate) kernel_matches_id: bool,
}

impl EchoSocket {
    /// An ICMP socket of `v6`'s family: raw first for IPv4, unprivileged first for IPv6. The
    /// error is the raw socket's (the unprivileged one's is expected where pings are
    /// restricted).
    pub(crate) fn open(v6: bool) -> io::Result<EchoSocket> {
        let (family, protocol) = if v6 {
            (libc::AF_INET6, libc::IPPROTO_ICMPV6)
        } else {
            (libc::AF_INET, libc::IPPROTO_ICMP)
        };
        let unprivileged = || {
            socket(family, libc::SOCK_DGRAM, protocol).map(|fd| EchoSocket {
                fd,
                v6,
                framing: Framing::Message,
                kernel_matches_id: true,
            })
        };
        let raw = || -> io::Result<EchoSocket> {
            let fd = socket(family, libc::SOCK_RAW, protocol)?;
            if v6 {
                let mut blocked = [u32::MAX; 8];
                blocked[129 >> 5] &= !(1 << (129 & 31));
                set_option(&fd, libc::IPPROTO_ICMPV6, ICMP6_FILTER, &blocked)?;
            } else {
                let blocked: u32 = !(1 << 0 | 1 << TIMESTAMP_REPLY);
                set_option(&fd, libc::SOL_RAW, ICMP_FILTER, &blocked)?;
            }
            Ok(EchoSocket {
                fd,
                v6,
                framing: if v6 { Framing::Message } else { Framing::Ipv4Header },
                kernel_matches_id: false,
            })
        };
        // IPv4: raw first, the only kind that may send timestamp requests (one-way probes).
        let socket = if v6 {
            unprivileged().or_else(|_| raw())?
        } else {
            raw().or_else(|e| unprivileged().map_err(|_| e))?
        };
        set_option(
            &socket.fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &1 as &libc::c_int,
        )?;
        Ok(socket)
    }

    /// Whether it may send ICMP timestamp requests: a raw IPv4 socket (an unprivileged one
    /// sends echoes only, and ICMPv6 has no timestamps).
    pub(crate) fn sends_timestamps(&self) -> bool {
        !self.v6 && !self.kernel_matches_id
    }

    /// What the logs call it.
    pub(crate) fn kind(&self) -> &'static str {
        if self.kernel_matches_id {
            "unprivileged ICMP socket"
        } else {
            "raw ICMP socket"
        }
    }

    /// Sends `message` to `target` (its scope id for a link-local IPv6 address); never waits.
    pub(crate) fn send(&self, target: SocketAddr, message: &[u8]) -> io::Result<()> {
        // SAFETY: all-zero sockaddr_in / sockaddr_in6 are valid values.
        let (mut v4, mut v6): (libc::sockaddr_in, libc::sockaddr_in6) = unsafe { std::mem::zeroed() };
        let (addr, len): (*const libc::sockaddr, usize) = match target {
            SocketAddr::V4(t) => {
                v4.sin_family = libc::AF_INET as libc::sa_family_t;
                v4.sin_addr.s_addr = u32::from_ne_bytes(t.ip().octets());
                ((&raw const v4).cast(), size_of::<libc::sockaddr_in>())
            }
            SocketAddr::V6(t) => {
                v6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                v6.sin6_addr.s6_addr = t.ip().octets();
                v6.sin6_scope_id = t.scope_id();
                ((&raw const v6).cast(), size_of::<libc::sockaddr_in6>())
            }
        };
        // SAFETY: sendto reads `message.len()` bytes of `message` and `len` bytes of the
        // sockaddr `addr` points to, both alive for the call.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                message.as_ptr().cast(),
                message.len(),
                libc::MSG_DONTWAIT,
                addr,
                len as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The next message waiting, with the kernel's receive stamp if it gave one; `None` when
    /// nothing waits. Never waits.
    pub(crate) fn receive(&self, buf: &mut [u8]) -> io::Result<Option<(usize, Option<SystemTime>)>> {
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is valid (no name, no buffers) before the fields are set.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&control) as _;
        // SAFETY: msg points at `iov` (into `buf`) and `control`, both alive and writable for
        // the call; recvmsg writes at most their lengths.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some((n as usize, receive_stamp(&msg))))
    }
}

/// The `SCM_TIMESTAMPNS` control message of a received message, if any. Its two fields are
/// read in the width the kernel wrote (the data length tells): 32-bit systems with a 64-bit
/// `time_t` do not all agree with the kernel on which one `SO_TIMESTAMPNS` gives.
fn receive_stamp(msg: &libc::msghdr) -> Option<SystemTime> {
    // SAFETY: msg is a msghdr recvmsg filled; CMSG_FIRSTHDR/CMSG_NXTHDR stay within
    // msg_control/msg_controllen and return null past the end.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        // SAFETY: cmsg is non-null and points at a complete header inside the control buffer.
        let header = unsafe { &*cmsg };
        if header.cmsg_level == libc::SOL_SOCKET && header.cmsg_type == libc::SCM_TIMESTAMPNS {
            // SAFETY: CMSG_LEN(0) has no preconditions; CMSG_DATA points at the data that
            // follows the header, `data_len` bytes long within the buffer (the kernel wrote them).
            let data_len = (header.cmsg_len as usize).saturating_sub(unsafe { libc::CMSG_LEN(0) } as usize);
            // SAFETY: as above; cmsg points at a complete control message.
            let data = unsafe { libc::CMSG_DATA(cmsg) };
            let (secs, nanos) = match data_len {
                // SAFETY: 16 bytes of data, read unaligned.
                16 => unsafe {
                    let words = data.cast::<[i64; 2]>().read_unaligned();
                    (words[0], words[1])
                },
                // SAFETY: 8 bytes of data, read unaligned.
                8 => unsafe {
                    let words = data.cast::<[i32; 2]>().read_unaligned();
                    (i64::from(words[0]), i64::from(words[1]))
                },
                _ => return None,
            };
            let (secs, nanos) = (u64::try_from(secs).ok()?, u32::try_from(nanos).ok()?);
            return UNIX_EPOCH.checked_add(Duration::new(secs, nanos));
        }
        // SAFETY: as for CMSG_FIRSTHDR.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    None
}

/// A non-blocking, close-on-exec socket.
fn socket(family: libc::c_int, kind: libc::c_int, protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket has no memory preconditions; the result is checked before use.
    let fd = unsafe { libc::socket(family, kind | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn set_option<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: setsockopt reads size_of::<T>() bytes from `value`, alive for the call.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
