//! `slipstream-synflood`: a SYN-flood generator for the flood test (`tests/flood.rs`).
//!
//! Why it exists: Slipstream's flow table is bounded (`limits.max_flows`) and its queues fail
//! open; whether a flood of new flows leaves the router forwarding every packet, the table at its
//! bound and the daemon's memory flat can only be seen with such a flood. This binary sends
//! `--count` TCP SYNs to `--dst`:`--port` through a raw IPv4 socket (`IPPROTO_RAW`, i.e.
//! `IP_HDRINCL`), each from its own spoofed source address and port, so each is a new flow for
//! conntrack and for the daemon.
//!
//! * **Sources** are always in 198.18.0.0/15, the range RFC 2544 reserves for benchmarking:
//!   packet `i` (counted from `--first`) comes from address `i mod 2^17` of the range (scrambled
//!   by an odd multiplier, a bijection) and a port derived from `i / 2^17`, so the first
//!   2^17 x 64512 packets are distinct 4-tuples. No other source is ever written.
//! * **Destinations** must be private (RFC 1918) addresses, and the generator refuses to run
//!   outside a named network namespace (one of `/run/netns/*`, as `ip netns exec` enters): it is
//!   meant for a testbed's namespace, where every packet stays in namespaces the test created.
//! * **Packets** are what Linux sends as a SYN: 20-byte IPv4 header (DF, TTL 64), TCP with MSS
//!   1460, SACK permitted, timestamps and window scale 7 (60 bytes in all), a random initial
//!   sequence number, valid IP and TCP checksums (etherparse).
//! * **Pacing**: `--rate PPS` spreads the packets evenly (sent in small `sendmmsg` batches, at
//!   most 1 ms of packets early); `--rate 0` sends as fast as the kernel takes them.
//!
//! At the end it prints one line on stdout, `sent=N elapsed_s=S pps=R`, and exits 0; a send
//! error other than a full buffer (`ENOBUFS`/`EAGAIN`, retried) ends it with status 1.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use etherparse::{IpNumber, Ipv4Header, TcpHeader, TcpOptionElement};

/// The benchmarking range every source is taken from: 198.18.0.0/15 (RFC 2544).
const SOURCE_NET: u32 = u32::from_be_bytes([198, 18, 0, 0]);
const SOURCE_BITS: u32 = 17;
/// Source ports 1024-65535.
const FIRST_PORT: u32 = 1024;
const PORTS: u32 = 65536 - FIRST_PORT;
/// Odd, so multiplying by it permutes the 2^17 addresses of the range.
const ADDRESS_MIX: u32 = 0x0001_2B35;
/// Prime to `PORTS` (64512 = 2^10 x 3^2 x 7), so it permutes the ports of one address.
const PORT_MIX: u32 = 7919;
/// Packets per `sendmmsg` call.
const BATCH: usize = 64;
/// IPv4 (20) + TCP (20) + options (20).
const PACKET_LEN: usize = 60;

#[derive(Parser, Debug)]
#[command(
    name = "slipstream-synflood",
    about = "Spoofed TCP SYN flood (sources 198.18.0.0/15) for Slipstream's flood test; run it in a test namespace"
)]
struct Args {
    /// Destination address (a private IPv4 address inside the testbed).
    #[arg(long)]
    dst: Ipv4Addr,
    /// Destination TCP port.
    #[arg(long)]
    port: u16,
    /// Number of SYNs to send.
    #[arg(long)]
    count: u64,
    /// Packets per second; 0 = as fast as possible.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Index of the first packet's source (address, port): floods with disjoint
    /// `[first, first + count)` ranges use disjoint source tuples.
    #[arg(long, default_value_t = 0)]
    first: u64,
}

/// Source address and port of packet `i`: distinct for `i < 2^17 * 64512`.
fn source(i: u64) -> (Ipv4Addr, u16) {
    let addresses = 1u64 << SOURCE_BITS;
    let a = (i % addresses) as u32;
    let p = ((i / addresses) % u64::from(PORTS)) as u32;
    let a = a.wrapping_mul(ADDRESS_MIX) & ((1 << SOURCE_BITS) - 1);
    let port = FIRST_PORT + ((u64::from(p) * u64::from(PORT_MIX) + u64::from(a)) % u64::from(PORTS)) as u32;
    (Ipv4Addr::from(SOURCE_NET | a), port as u16)
}

/// The largest count whose sources are all distinct.
fn distinct_sources() -> u64 {
    (1u64 << SOURCE_BITS) * u64::from(PORTS)
}

/// Writes SYN number `i` (ISN `isn`, timestamp `tsval`) into `buf`.
fn build_syn(buf: &mut [u8; PACKET_LEN], i: u64, dst: Ipv4Addr, dport: u16, isn: u32, tsval: u32) {
    let (src, sport) = source(i);
    let mut tcp = TcpHeader::new(sport, dport, isn, 64240);
    tcp.syn = true;
    tcp.set_options(&[
        TcpOptionElement::MaximumSegmentSize(1460),
        TcpOptionElement::SelectiveAcknowledgementPermitted,
        TcpOptionElement::Timestamp(tsval, 0),
        TcpOptionElement::Noop,
        TcpOptionElement::WindowScale(7),
    ])
    .expect("20 bytes of options fit");
    let mut ip = Ipv4Header::new(
        tcp.header_len_u16(),
        64,
        IpNumber::TCP,
        src.octets(),
        dst.octets(),
    )
    .expect("a SYN fits in an IPv4 packet");
    ip.identification = i as u16;
    ip.header_checksum = ip.calc_header_checksum();
    tcp.checksum = tcp.calc_checksum_ipv4(&ip, &[]).expect("no payload to overflow");
    let mut out = &mut buf[..];
    ip.write(&mut out).expect("buffer holds the IP header");
    tcp.write(&mut out).expect("buffer holds the TCP header");
    debug_assert!(out.is_empty());
}

/// xorshift64*: initial sequence numbers need not be good, only varied.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }
}

fn private(a: Ipv4Addr) -> bool {
    a.is_private()
}

/// The name of the `ip netns` namespace this process runs in (one of `/run/netns/*`), if any.
fn named_netns() -> Result<Option<String>> {
    use std::os::unix::fs::MetadataExt;
    let own = std::fs::metadata("/proc/self/ns/net").context("reading /proc/self/ns/net")?;
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return Ok(None);
    };
    for entry in entries.flatten() {
        if let Ok(m) = std::fs::metadata(entry.path()) {
            if m.ino() == own.ino() && m.dev() == own.dev() {
                return Ok(Some(entry.file_name().to_string_lossy().into_owned()));
            }
        }
    }
    Ok(None)
}

struct RawSocket(libc::c_int);

impl RawSocket {
    fn open() -> Result<RawSocket> {
        // SAFETY: plain socket(2) call; the fd is owned by the returned value.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("raw socket (needs root / CAP_NET_RAW)");
        }
        let sock = RawSocket(fd);
        let on: libc::c_int = 1;
        // SAFETY: setsockopt with a pointer to a live c_int and its size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_IP,
                libc::IP_HDRINCL,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("IP_HDRINCL");
        }
        Ok(sock)
    }

    /// Sends `packets` to `dst`; returns how many the kernel took (at least 1), or the error.
    fn send_batch(
        &self,
        packets: &mut [[u8; PACKET_LEN]],
        dst: &libc::sockaddr_in,
    ) -> std::io::Result<usize> {
        let mut iovs: Vec<libc::iovec> = packets
            .iter_mut()
            .map(|p| libc::iovec {
                iov_base: p.as_mut_ptr().cast(),
                iov_len: PACKET_LEN,
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: an all-zero msghdr is valid (no control data, no flags).
                let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
                hdr.msg_name = (dst as *const libc::sockaddr_in).cast_mut().cast();
                hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                hdr.msg_iov = iov;
                hdr.msg_iovlen = 1;
                libc::mmsghdr {
                    msg_hdr: hdr,
                    msg_len: 0,
                }
            })
            .collect();
        // SAFETY: msgs points to `len` initialised mmsghdrs whose buffers outlive the call.
        let n = unsafe { libc::sendmmsg(self.0, msgs.as_mut_ptr(), msgs.len() as libc::c_uint, 0) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        // SAFETY: closing the fd this value owns.
        unsafe { libc::close(self.0) };
    }
}

fn run(args: &Args) -> Result<()> {
    if !private(args.dst) {
        bail!(
            "destination {} is not a private (RFC 1918) address; this generator only floods testbeds",
            args.dst
        );
    }
    if named_netns()?.is_none() {
        bail!("refusing to flood outside a named network namespace: run it with `ip netns exec <testbed namespace>`");
    }
    let end = args
        .first
        .checked_add(args.count)
        .context("--first + --count overflows")?;
    if end > distinct_sources() {
        bail!(
            "--first + --count = {end} exceeds the {} distinct sources of 198.18.0.0/15 x ports 1024-65535",
            distinct_sources()
        );
    }
    let sock = RawSocket::open()?;
    let dst = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(args.dst).to_be(),
        },
        sin_zero: [0; 8],
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    let mut rng = Rng(seed);
    let mut batch = vec![[0u8; PACKET_LEN]; BATCH];
    let start = Instant::now();
    let mut sent: u64 = 0;
    let mut retries: u64 = 0;
    while sent < args.count {
        let due = if args.rate == 0 {
            args.count
        } else {
            // Packets due by now, plus up to 1 ms early.
            let t = start.elapsed().as_secs_f64() + 1e-3;
            ((t * args.rate as f64) as u64).clamp(sent + 1, args.count)
        };
        while sent < due {
            let n = (due - sent).min(BATCH as u64) as usize;
            let tsval = start.elapsed().as_millis() as u32;
            for (k, buf) in batch[..n].iter_mut().enumerate() {
                build_syn(
                    buf,
                    args.first + sent + k as u64,
                    args.dst,
                    args.port,
                    rng.next(),
                    tsval,
                );
            }
            let mut done = 0;
            while done < n {
                match sock.send_batch(&mut batch[done..n], &dst) {
                    Ok(k) => done += k,
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN)) => {
                        retries += 1;
                        std::thread::yield_now();
                    }
                    Err(e) => {
                        return Err(e)
                            .with_context(|| format!("sendmmsg after {} packets", sent + done as u64))
                    }
                }
            }
            sent += n as u64;
        }
        if args.rate > 0 && sent < args.count {
            let next = Duration::from_secs_f64((sent + 1) as f64 / args.rate as f64);
            if let Some(wait) = (start + next).checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "sent={sent} elapsed_s={elapsed:.6} pps={:.0} retries={retries}",
        sent as f64 / elapsed.max(1e-9)
    );
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("slipstream-synflood: {e:#}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    use std::collections::HashSet;

    #[test]
    fn sources_are_distinct_and_in_the_benchmarking_range() {
        let mut seen = HashSet::new();
        // Two full sweeps of the address range, plus a stretch far out.
        for i in (0..2 * (1u64 << SOURCE_BITS)).chain(1_000_000..1_050_000) {
            let (a, p) = source(i);
            assert!(in_benchmarking_range(a), "{a} outside 198.18.0.0/15");
            assert!(p >= 1024, "port {p}");
            assert!(seen.insert((a, p)), "packet {i}: {a}:{p} repeats");
        }
        assert_eq!(source(distinct_sources() - 1).0.octets()[0], 198);
    }

    fn in_benchmarking_range(a: Ipv4Addr) -> bool {
        u32::from(a) >> (32 - 15) == SOURCE_NET >> (32 - 15)
    }

    #[test]
    fn syn_is_valid_with_checksums() {
        let mut buf = [0u8; PACKET_LEN];
        let dst = Ipv4Addr::new(10, 77, 3, 2);
        build_syn(&mut buf, 12345, dst, 6881, 0xdead_beef, 777);
        let p = SlicedPacket::from_ip(&buf).expect("parses");
        let Some(NetSlice::Ipv4(ip)) = p.net else {
            panic!("not IPv4")
        };
        let h = ip.header().to_header();
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        assert_eq!(usize::from(h.total_len), PACKET_LEN);
        assert_eq!(h.destination, dst.octets());
        assert_eq!((Ipv4Addr::from(h.source), 0), (source(12345).0, 0));
        let Some(TransportSlice::Tcp(tcp)) = p.transport else {
            panic!("not TCP")
        };
        assert!(tcp.syn() && !tcp.ack() && !tcp.rst() && !tcp.fin());
        assert_eq!(tcp.destination_port(), 6881);
        assert_eq!(tcp.source_port(), source(12345).1);
        assert_eq!(tcp.sequence_number(), 0xdead_beef);
        let th = tcp.to_header();
        assert_eq!(th.checksum, th.calc_checksum_ipv4(&h, &[]).unwrap());
        assert_eq!(tcp.header_len(), 40);
    }

    #[test]
    fn only_private_destinations() {
        assert!(private(Ipv4Addr::new(10, 77, 3, 2)));
        assert!(!private(Ipv4Addr::new(8, 8, 8, 8)));
        assert!(!private(Ipv4Addr::new(198, 18, 0, 1)));
    }
}
