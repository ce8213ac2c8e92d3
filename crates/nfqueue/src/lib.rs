//! The NFQUEUE datapath, as thin as it can be: open the queues Slipstream reads, set them up to
//! fail open, and move packets between the kernel and the engine.
//!
//! Two queues share one netlink socket:
//! - the ACK queue gets handshakes and ACKs of background flows with a full copy, because a
//!   rewritten packet is handed back whole;
//! - the data queue gets the flows' data segments, copied as `data_copy_bytes` says, and is
//!   answered at once: the engine needs their arrival time, TSval and length, and rewrites only
//!   the ACKs among them (flows with data both ways).
//!
//! Both are fail-open (the kernel accepts packets when the queue is full) and the firewall rules
//! that feed them use `--queue-bypass` (packets flow on when no daemon is bound).
//!
//! The socket's receive buffer is sized to hold both queues full ([`receive_buffer_bytes`]): with
//! the kernel's default (`rmem_default`, 208 KiB, about 256 queued packets) it overflows long
//! before a queue reaches `max_len`, and a fail-open queue then lets packets pass unseen, so
//! `max_len` would be a bound in name only (measured with a SYN flood: every bypassed packet was a
//! socket overrun, none a full queue).
#![allow(
    unsafe_code,
    reason = "the NFQUEUE socket's options (buffer size, poll) are set through libc"
)]

mod batch;
mod timestamps;

use std::collections::BTreeSet;
use std::io;
use std::os::fd::RawFd;
use std::time::SystemTime;

pub use nfq::{Message, Verdict};
pub use timestamps::{parse_packet_head, PacketHead, RxTimestamps};

/// Queue numbers and sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Queue number of handshakes and ACKs (whole packets copied).
    pub ack_queue: u16,
    /// Queue number of data packets.
    pub data_queue: u16,
    /// Packets the kernel holds per queue before failing open.
    pub max_len: u32,
    /// Bytes of each data packet copied to user space (the default, 65535, copies it whole).
    pub data_copy_bytes: u16,
}

impl QueueConfig {
    /// The queues a config's `[datapath]` section asks for (what `slipstreamd` and the lab's
    /// `nfq-accept` bind).
    pub fn from_config(datapath: &slipstream_config::Datapath) -> QueueConfig {
        QueueConfig {
            ack_queue: datapath.ack_queue,
            data_queue: datapath.data_queue,
            max_len: datapath.queue_max_len,
            data_copy_bytes: datapath.data_copy_bytes,
        }
    }
}

/// Kernel memory one queued packet takes in the socket's receive buffer: the netlink message
/// with a full-size packet, counted at its buffer's true size (about 2 KiB for a 1500-byte packet).
const BYTES_PER_QUEUED_PACKET: usize = 2048;
/// The receive buffer never goes above this, whatever `max_len` says (router memory).
const MAX_RECEIVE_BUFFER: usize = 64 << 20;

/// The receive buffer that holds both queues full: `max_len` packets each.
pub fn receive_buffer_bytes(max_len: u32) -> usize {
    (max_len as usize)
        .saturating_mul(2 * BYTES_PER_QUEUED_PACKET)
        .min(MAX_RECEIVE_BUFFER)
}

/// Which of the two queues a message came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// The handshake and ACK queue.
    Ack,
    /// The data queue.
    Data,
}

impl QueueKind {
    fn index(self) -> usize {
        match self {
            QueueKind::Ack => 0,
            QueueKind::Data => 1,
        }
    }
}

/// The two bound queues.
pub struct Datapath {
    queue: nfq::Queue,
    config: QueueConfig,
    fd: RawFd,
    /// Set by [`Datapath::enable_timestamps`]: keeps the kernel stamping packets.
    stamping: Option<RxTimestamps>,
    /// Where the head of the next datagram is peeked at for its timestamp.
    peeked: Vec<u8>,
    /// The socket's receive buffer as the kernel granted it, bytes (`SO_RCVBUF` reads back twice
    /// what was asked, the kernel's bookkeeping share included).
    receive_buffer: usize,
    /// Unmodified packets accepted by [`Datapath::accept_later`], not yet sent.
    pending: batch::Pending,
    /// Ids of the packets held for a later verdict ([`Datapath::hold`]), per queue (ack, data):
    /// a batch verdict must not reach them.
    held: [BTreeSet<u32>; 2],
}

/// Unmodified packets accepted by one batch verdict at most: at 5-10 us of handling per packet
/// (the 2-core test VM), none is held more than about 0.3 ms for its verdict.
pub const BATCH_VERDICT_EVERY: u32 = 32;

/// A full copy of the largest packet we will rewrite (an ACK; 64 KiB covers any IP packet).
const FULL_COPY: u16 = u16::MAX;

impl Datapath {
    /// Binds both queues. Fails with a message naming what is missing (module, permission).
    pub fn open(config: QueueConfig) -> io::Result<Datapath> {
        let (mut queue, fd) = open_queue_with_fd()?;
        for (num, copy, gso) in [
            (config.ack_queue, FULL_COPY, false),
            (config.data_queue, config.data_copy_bytes, true),
        ] {
            queue
                .bind(num)
                .map_err(|e| explain(&format!("binding NFQUEUE {num}"), e))?;
            queue.set_fail_open(num, true)?;
            queue.set_queue_max_len(num, config.max_len)?;
            queue.set_copy_range(num, copy)?;
            // The data queue only reads headers: let the kernel hand GSO packets over whole
            // instead of segmenting them first. The ACK queue keeps the default, under which the
            // kernel finalises checksums before queueing, so a rewrite can patch them.
            queue.set_recv_gso(num, gso)?;
        }
        queue.set_nonblocking(true);
        let receive_buffer = set_receive_buffer(fd, receive_buffer_bytes(config.max_len))?;
        Ok(Datapath {
            queue,
            config,
            fd,
            stamping: None,
            peeked: Vec::new(),
            receive_buffer,
            pending: batch::Pending::default(),
            held: [BTreeSet::new(), BTreeSet::new()],
        })
    }

    /// From now on, [`Datapath::try_recv_timed`] returns the kernel's receive timestamp of
    /// packets: turns stamping on host-wide (see [`RxTimestamps`]) and reads each message's
    /// head once more (one `recv(MSG_PEEK)` per packet) because nfq cannot read the timestamp
    /// soundly (see the `timestamps` module).
    pub fn enable_timestamps(&mut self) -> io::Result<()> {
        if self.stamping.is_none() {
            self.stamping = Some(RxTimestamps::enable()?);
            self.peeked = vec![0; timestamps::PEEK_BYTES];
        }
        Ok(())
    }

    /// The next queued packet and, after [`Datapath::enable_timestamps`], the kernel's
    /// timestamp of it (wall clock; `None` if the packet was not stamped). Never calls nfq's
    /// `Message::get_timestamp`.
    pub fn try_recv_timed(&mut self) -> io::Result<Option<(Message, Option<SystemTime>)>> {
        if self.stamping.is_none() {
            return Ok(self.try_recv()?.map(|msg| (msg, None)));
        }
        let n = timestamps::peek(self.fd, &mut self.peeked)?;
        let head = parse_packet_head(&self.peeked[..n]);
        let Some(msg) = self.try_recv()? else {
            return Ok(None);
        };
        // One packet message per datagram, so the peeked one is the message nfq just read;
        // the id check keeps a wrong timestamp out should that ever not hold.
        let timestamp = head
            .filter(|h| h.packet_id == msg.get_packet_id())
            .and_then(|h| h.timestamp);
        Ok(Some((msg, timestamp)))
    }

    /// Packets the kernel holds per queue before failing open.
    pub fn max_len(&self) -> u32 {
        self.config.max_len
    }

    /// The socket's receive buffer in bytes, as granted.
    pub fn receive_buffer(&self) -> usize {
        self.receive_buffer
    }

    /// The socket to poll for readability.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// The next queued packet, or `None` when none is waiting.
    pub fn try_recv(&mut self) -> io::Result<Option<Message>> {
        match self.queue.recv() {
            Ok(msg) => Ok(Some(msg)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Which queue a message came from, by its queue number.
    pub fn kind_of(&self, msg: &Message) -> QueueKind {
        if msg.get_queue_num() == self.config.data_queue {
            QueueKind::Data
        } else {
            QueueKind::Ack
        }
    }

    /// Sends the message's verdict (and its payload, if it was modified).
    pub fn verdict(&mut self, msg: Message) -> io::Result<()> {
        self.queue.verdict(msg)
    }

    /// Accepts an unmodified packet with a later batch verdict (one message per queue instead of
    /// one per packet): sent by [`Datapath::flush_accepts`], or here once [`BATCH_VERDICT_EVERY`]
    /// packets wait, which bounds how long a packet is held to that many packets' handling. A
    /// rewritten packet must go through [`Datapath::verdict`] (at once), which takes it off the
    /// queue before the batch covers its id.
    ///
    /// While a packet of the queue is held ([`Datapath::hold`]), a later packet gets its own
    /// verdict at once instead: a batch verdict would release the held one with it.
    pub fn accept_later(&mut self, mut msg: Message) -> io::Result<()> {
        let id = msg.get_packet_id();
        let kind = self.kind_of(&msg);
        // Ids grow per queue: a packet that comes while another is held is after it.
        if !self.held[kind.index()].is_empty() {
            msg.set_verdict(Verdict::Accept);
            return self.queue.verdict(msg);
        }
        let slot = match kind {
            QueueKind::Ack => &mut self.pending.ack,
            QueueKind::Data => &mut self.pending.data,
        };
        // Ids grow per queue (modulo 2^32, as the kernel compares them); keep the latest.
        *slot = Some(match *slot {
            Some(old) if (id.wrapping_sub(old) as i32) < 0 => old,
            _ => id,
        });
        self.pending.count += 1;
        if self.pending.count >= BATCH_VERDICT_EVERY {
            self.flush_accepts()?;
        }
        Ok(())
    }

    /// Sends the batch verdicts of the packets passed to [`Datapath::accept_later`]; returns
    /// the number of messages sent (0 when none waited). A queue whose message failed keeps its
    /// id, so the next flush (or the drop) retries it rather than leaving its packets held.
    pub fn flush_accepts(&mut self) -> io::Result<usize> {
        let mut sent = 0;
        let mut failed = None;
        for (queue, slot) in [
            (self.config.ack_queue, &mut self.pending.ack),
            (self.config.data_queue, &mut self.pending.data),
        ] {
            let Some(id) = *slot else { continue };
            match batch::send_accept_up_to(self.fd, queue, id) {
                Ok(()) => {
                    *slot = None;
                    sent += 1;
                }
                Err(e) => failed = Some(explain(&format!("batch verdict on NFQUEUE {queue}"), e)),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => {
                self.pending.count = 0;
                Ok(sent)
            }
        }
    }

    /// Keeps a packet waiting in the kernel's queue for a verdict later, through
    /// [`Datapath::release`] (a shaper holds it): the batch verdicts leave it alone meanwhile.
    /// The caller keeps the message and bounds how many it holds: held packets count against
    /// the queue's `max_len`, beyond which the kernel lets packets pass unseen (fail-open).
    pub fn hold(&mut self, msg: &Message) {
        self.held[self.kind_of(msg).index()].insert(msg.get_packet_id());
    }

    /// Sends the verdict of a packet kept by [`Datapath::hold`] (accept, unless the message
    /// says otherwise).
    pub fn release(&mut self, msg: Message) -> io::Result<()> {
        let kind = self.kind_of(&msg);
        self.held[kind.index()].remove(&msg.get_packet_id());
        self.queue.verdict(msg)
    }

    /// Waits until a packet may be ready or `timeout_ms` passed.
    pub fn wait_readable(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(err);
        }
        Ok(n > 0)
    }
}

impl Drop for Datapath {
    fn drop(&mut self) {
        // Packets still waiting for their batch verdict are accepted, not dropped at unbind.
        let _ = self.flush_accepts();
        for num in [self.config.ack_queue, self.config.data_queue] {
            let _ = self.queue.unbind(num);
        }
    }
}

/// Asks for a receive buffer of `bytes` on `fd`: `SO_RCVBUFFORCE` (CAP_NET_ADMIN, which binding
/// the queues needs anyway) may exceed `net.core.rmem_max`; without it `SO_RCVBUF` gets what the
/// limit allows. Returns the size granted.
fn set_receive_buffer(fd: RawFd, bytes: usize) -> io::Result<usize> {
    let asked = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let set = |option: libc::c_int| {
        // SAFETY: setsockopt reads one c_int of the given size.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                option,
                (&asked as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if set(libc::SO_RCVBUFFORCE) != 0 && set(libc::SO_RCVBUF) != 0 {
        return Err(explain(
            "sizing the netlink socket's receive buffer",
            io::Error::last_os_error(),
        ));
    }
    let mut granted: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `granted`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut granted as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(granted).unwrap_or(0))
}

/// Opens an `nfq::Queue` and finds its socket's file descriptor, for polling.
///
/// nfq 0.2.5 keeps its socket private and does not implement `AsRawFd`. Rather than rely on the
/// struct's layout, this compares our NETLINK_NETFILTER sockets before and after `Queue::open`
/// (opens through this function are serialised; other code must not open netfilter sockets
/// concurrently): the new one is the queue's. The fd must only be polled, never read or closed.
pub fn open_queue_with_fd() -> io::Result<(nfq::Queue, RawFd)> {
    static OPENING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = OPENING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let before = netfilter_sockets();
    let queue = nfq::Queue::open().map_err(|e| explain("opening the netfilter queue socket", e))?;
    let new: Vec<RawFd> = netfilter_sockets()
        .into_iter()
        .filter(|fd| !before.contains(fd))
        .collect();
    match new.as_slice() {
        [fd] => Ok((queue, *fd)),
        other => Err(io::Error::other(format!(
            "cannot tell the NFQUEUE netlink socket among our descriptors (new ones: {other:?})"
        ))),
    }
}

fn netfilter_sockets() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()))
        .filter(|fd| is_netfilter_socket(*fd))
        .collect()
}

fn is_netfilter_socket(fd: RawFd) -> bool {
    let mut domain: libc::c_int = 0;
    let mut protocol: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the ints we pass.
    let ok = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut domain as *mut libc::c_int).cast(),
            &mut len,
        ) == 0
            && libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PROTOCOL,
                (&mut protocol as *mut libc::c_int).cast(),
                &mut len,
            ) == 0
    };
    ok && domain == libc::AF_NETLINK && protocol == libc::NETLINK_NETFILTER
}

fn explain(what: &str, e: io::Error) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) => " (needs root or CAP_NET_ADMIN)",
        Some(libc::EBUSY) => " (another process is bound to this queue number)",
        Some(libc::EINVAL) | Some(libc::ENOENT) => {
            " (is nfnetlink_queue loaded? modprobe nfnetlink_queue / kmod-nfnetlink-queue on OpenWrt)"
        }
        _ => "",
    };
    io::Error::new(e.kind(), format!("{what}: {e}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_buffer_holds_both_queues_full_within_a_cap() {
        // The default 4096 packets per queue: 16 MiB.
        assert_eq!(receive_buffer_bytes(4096), 16 << 20);
        assert_eq!(receive_buffer_bytes(1), 4096);
        assert_eq!(receive_buffer_bytes(u32::MAX), MAX_RECEIVE_BUFFER);
    }
}
