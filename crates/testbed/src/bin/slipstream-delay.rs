//! `slipstream-delay`: a fixed-delay element built on NFQUEUE.
//!
//! Why it exists: the testbed kernel has no `netem`, yet Slipstream's behaviour depends on a
//! realistic path RTT (the receive-window clamp is a bandwidth-delay product). This binary binds
//! one or two NFQUEUE queues, holds every packet's verdict for a fixed one-way delay and then
//! accepts it, preserving FIFO order per queue. The testbed runs one instance in the `isp`
//! namespace serving both directions (`--queue`/`--delay-ms` for downloads, `--queue2`/`--delay2-ms`
//! for uploads), fed by `iptables-legacy -t mangle -A FORWARD -i <if> -j NFQUEUE --queue-num N`.
//!
//! Design: one netlink socket bound to all queues (the kernel tags each message with its queue
//! number), nonblocking `recv`, a `VecDeque` of `(due, Message)` per queue, and `ppoll(2)` on
//! the socket plus a CLOCK_MONOTONIC timerfd armed for the next due time (a timerfd's hrtimer
//! has no select()-style slack; the task's timer slack is also lowered to 1 ns). No busy-spinning:
//! the host may have only two cores and the daemon under test needs them.
//! It switches itself to SCHED_FIFO (`--rt-priority`, default 10) so wake-ups stay punctual while
//! the host is busy; it reports its own lateness (verdict time minus due time) at exit.
//! Only packet metadata is copied to user space (copy range 0): the element never reads payloads.
//!
//! After binding it prints one line `ready` on stdout (the testbed waits for it before installing
//! the iptables rules, since NFQUEUE without a listener drops). On SIGTERM/SIGINT it accepts every
//! held packet, unbinds and exits 0, printing counters on stderr.
//!
//! Changing the delays at run time (a route change, the lab's `link` scenario): with
//! `--control-file PATH`, SIGHUP makes it re-read PATH, one line `DELAY_MS [DELAY2_MS]`. A new
//! delay applies to packets arriving after it; held packets keep their due times and none is
//! reordered (after a shorter delay, a packet still leaves after the ones before it; see
//! `slipstream_testbed::delay_line`). A file it cannot read or parse leaves the delays as they
//! were (a warning on stderr). Without `--control-file`, SIGHUP keeps its default action.
//!
//! With `--stats-file PATH` it writes its counters there at exit (`slipstream_testbed::delay_stats`;
//! the lab records its lateness per run). With `--stall-every-ms`/`--stall-ms` it stops
//! releasing for a while at random moments (`slipstream_testbed::stalls`), jitter on purpose;
//! the lateness it reports is then counted from each stall's end, so it stays the host's.

use std::io::{ErrorKind, Write};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use nfq::{Message, Queue, Verdict};
use slipstream_testbed::delay_line::{delay_from_ms, parse_control, DelayLine};
use slipstream_testbed::delay_stats::{DelayStats, LaneStats};
use slipstream_testbed::stalls::Stalls;

#[derive(Parser, Debug)]
#[command(
    name = "slipstream-delay",
    about = "Fixed-delay element on NFQUEUE (netem substitute)"
)]
struct Args {
    /// NFQUEUE queue number to serve.
    #[arg(long)]
    queue: u16,
    /// One-way delay applied to packets of `--queue`, in milliseconds (fractions allowed).
    #[arg(long)]
    delay_ms: f64,
    /// Optional second queue (typically the other direction).
    #[arg(long, requires = "delay2_ms")]
    queue2: Option<u16>,
    /// Delay for `--queue2`, in milliseconds.
    #[arg(long, requires = "queue2")]
    delay2_ms: Option<f64>,
    /// Kernel queue length limit per queue (packets waiting for a verdict).
    #[arg(long, default_value_t = 20000)]
    max_len: u32,
    /// SCHED_FIFO priority (0 = stay SCHED_OTHER). Real-time scheduling keeps wake-ups punctual
    /// when the host is busy (e.g. compiling); the element uses little CPU.
    #[arg(long, default_value_t = 10)]
    rt_priority: i32,
    /// On SIGHUP, re-read the delays from this file: one line `DELAY_MS [DELAY2_MS]` (for
    /// `--queue` and, if given, `--queue2`); they apply to packets arriving after it.
    #[arg(long)]
    control_file: Option<PathBuf>,
    /// At exit, write each queue's counters (packets, lateness) to this file
    /// (`slipstream_testbed::delay_stats`), for the lab's record of the element's accuracy.
    #[arg(long)]
    stats_file: Option<PathBuf>,
    /// Stalls on purpose (`slipstream_testbed::stalls`): every so often, on average this many
    /// ms apart (exponential gaps), the element releases nothing for `--stall-ms`.
    #[arg(long, requires = "stall_ms")]
    stall_every_ms: Option<f64>,
    /// The length of each stall, ms.
    #[arg(long, requires = "stall_every_ms")]
    stall_ms: Option<f64>,
    /// The seed of the stalls' gaps (one seed, one schedule).
    #[arg(long, default_value_t = 1)]
    stall_seed: u64,
}

/// Switches to SCHED_FIFO at `prio`; failure is only a warning (accuracy degrades under load).
fn set_realtime(prio: i32) {
    if prio <= 0 {
        return;
    }
    let param = libc::sched_param { sched_priority: prio };
    // SAFETY: sched_setscheduler on ourselves with a valid param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        eprintln!(
            "slipstream-delay: warning: SCHED_FIFO {prio}: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// SIGTERM/SIGINT set the returned flag (signal-hook; a blocked ppoll returns EINTR whatever
/// SA_RESTART says, see signal(7)).
fn install_signal_handlers() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("installing signal handlers")?;
    }
    Ok(stop)
}

/// With a control file, SIGHUP sets the returned flag; without one, SIGHUP is left alone.
fn install_reload_handler(control_file: Option<&Path>) -> Result<Option<Arc<AtomicBool>>> {
    if control_file.is_none() {
        return Ok(None);
    }
    let reload = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&reload))
        .context("installing the SIGHUP handler")?;
    Ok(Some(reload))
}

/// Applies the control file's delays to the lanes (the first to `--queue`, the second, if
/// given, to `--queue2`); on an error the delays stay as they were.
fn reload_delays(path: &Path, lanes: &mut [Lane]) {
    let parsed = std::fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))
        .and_then(|text| parse_control(&text));
    match parsed {
        Ok((first, second)) => {
            for (lane, delay) in lanes.iter_mut().zip([Some(first), second]) {
                if let Some(d) = delay {
                    lane.held.set_delay(d);
                    lane.changes += 1;
                }
            }
            let now: Vec<String> = lanes
                .iter()
                .map(|l| format!("queue {} {:?}", l.queue_num, l.held.delay()))
                .collect();
            eprintln!("slipstream-delay: delays now {}", now.join(", "));
        }
        Err(e) => eprintln!("slipstream-delay: warning: delays unchanged: {e:#}"),
    }
}

/// Opens the NFQUEUE socket and recovers its file descriptor (see
/// `slipstream_nfqueue::open_queue_with_fd`; the process is single-threaded at that point).
fn open_queue_with_fd() -> Result<(Queue, RawFd)> {
    slipstream_nfqueue::open_queue_with_fd().context("opening NFQUEUE netlink socket (need CAP_NET_ADMIN)")
}

struct Lane {
    queue_num: u16,
    /// The held packets and the delay applied to new ones.
    held: DelayLine<Message>,
    /// Delay changes from the control file.
    changes: u64,
    packets: u64,
    max_held: usize,
    /// Sum and maximum of (verdict time - due time), to report the element's own accuracy.
    late_sum: Duration,
    late_max: Duration,
    late_over_1ms: u64,
}

impl Lane {
    fn new(queue_num: u16, delay: Duration) -> Lane {
        Lane {
            queue_num,
            held: DelayLine::new(delay),
            changes: 0,
            packets: 0,
            max_held: 0,
            late_sum: Duration::ZERO,
            late_max: Duration::ZERO,
            late_over_1ms: 0,
        }
    }
}

/// A CLOCK_MONOTONIC timerfd used as the wake-up for the next due packet.
///
/// Why not just a `ppoll` timeout: `ppoll` adds timer slack proportional to the timeout
/// (0.1 %, i.e. 50 us for a 50 ms wait) on top of the task's slack; a timerfd's hrtimer fires
/// without slack.
struct Timer {
    fd: RawFd,
}

impl Timer {
    fn new() -> Result<Timer> {
        // SAFETY: plain syscall.
        let fd =
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("timerfd_create");
        }
        Ok(Timer { fd })
    }

    /// Arms the timer `after` from now (a zero duration disarms, so use at least 1 ns).
    fn arm(&self, after: Duration) -> Result<()> {
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as _,
            },
        };
        // SAFETY: valid itimerspec; old value not requested.
        if unsafe { libc::timerfd_settime(self.fd, 0, &spec, std::ptr::null_mut()) } < 0 {
            return Err(std::io::Error::last_os_error()).context("timerfd_settime");
        }
        Ok(())
    }

    /// Consumes a pending expiry, if any (nonblocking).
    fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into buf.
        unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}

/// Waits until the queue socket is readable, the timer fires, or a signal arrives. A 100 ms cap
/// makes sure a signal that raced the stop check is still noticed.
fn wait_readable(sock: RawFd, timer: &Timer) -> Result<()> {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    let mut pfds = [
        libc::pollfd {
            fd: sock,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: timer.fd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: valid pollfd array, valid timespec, no signal mask change.
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() != ErrorKind::Interrupted {
            return Err(err).context("ppoll");
        }
    }
    if pfds[1].revents & libc::POLLIN != 0 {
        timer.clear();
    }
    Ok(())
}

fn run(args: Args) -> Result<()> {
    let mut lanes = vec![Lane::new(args.queue, delay_from_ms(args.delay_ms)?)];
    if let (Some(q2), Some(d2)) = (args.queue2, args.delay2_ms) {
        if q2 == args.queue {
            bail!("--queue2 must differ from --queue");
        }
        lanes.push(Lane::new(q2, delay_from_ms(d2)?));
    }

    let stop = install_signal_handlers()?;
    let reload = install_reload_handler(args.control_file.as_deref())?;
    set_realtime(args.rt_priority);
    // Timer slack defaults to 50 us; make ppoll wake as close to the due time as possible.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };

    let (mut queue, fd) = open_queue_with_fd()?;
    for lane in &lanes {
        let q = lane.queue_num;
        queue
            .bind(q)
            .with_context(|| format!("binding queue {q} (is another process bound?)"))?;
        // Metadata only: we never look at payloads, and it keeps each held message small.
        queue.set_copy_range(q, 0)?;
        queue.set_queue_max_len(q, args.max_len)?;
        queue.set_fail_open(q, false)?;
    }
    queue.set_nonblocking(true);
    let mut stalls = match (args.stall_every_ms, args.stall_ms) {
        (Some(every), Some(length)) => {
            let (every, length) = (delay_from_ms(every)?, delay_from_ms(length)?);
            if every.is_zero() {
                bail!("--stall-every-ms must be positive");
            }
            Some(Stalls::new(every, length, args.stall_seed, Instant::now()))
        }
        _ => None,
    };
    // The end of the last stall: a packet due in it is late only past that end (the lateness
    // reported is the host's, not the stalls asked for).
    let mut last_stall_end: Option<Instant> = None;
    let timer = Timer::new()?;
    // The due time the timer is currently armed for (re-arming on every loop is wasteful).
    let mut armed_for: Option<Instant> = None;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready")?;
        out.flush()?;
    }

    while !stop.load(Ordering::Relaxed) {
        // 0. New delays, if asked (they apply to the packets received from now on).
        if let (Some(flag), Some(path)) = (&reload, &args.control_file) {
            if flag.swap(false, Ordering::Relaxed) {
                reload_delays(path, &mut lanes);
            }
        }
        // 1. Pull everything the kernel has for us (bounded, so verdicts are never starved).
        for _ in 0..4096 {
            match queue.recv() {
                Ok(msg) => {
                    let now = Instant::now();
                    let qn = msg.get_queue_num();
                    match lanes.iter_mut().find(|l| l.queue_num == qn) {
                        Some(lane) => {
                            lane.held.push(now, msg);
                            lane.packets += 1;
                            lane.max_held = lane.max_held.max(lane.held.len());
                        }
                        None => {
                            let mut msg = msg;
                            msg.set_verdict(Verdict::Accept);
                            queue.verdict(msg)?;
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("nfqueue recv"),
            }
        }
        // 2. Release everything that is due, in order (nothing in a stall).
        let now = Instant::now();
        let stalled = stalls.as_mut().and_then(|s| s.stalled_until(now));
        if stalled.is_some() {
            last_stall_end = stalled;
        }
        for lane in lanes.iter_mut().filter(|_| stalled.is_none()) {
            while let Some((due, mut msg)) = lane.held.pop_due(now) {
                msg.set_verdict(Verdict::Accept);
                queue.verdict(msg)?;
                let due = last_stall_end.map_or(due, |end| due.max(end.min(now)));
                let late = Instant::now().saturating_duration_since(due);
                lane.late_sum += late;
                lane.late_max = lane.late_max.max(late);
                lane.late_over_1ms += u64::from(late > Duration::from_millis(1));
            }
        }
        // 3. Sleep until the next due time or until packets arrive.
        let next_due = lanes.iter().filter_map(|l| l.held.next_due()).min();
        let next_due = next_due.map(|d| stalled.map_or(d, |end| d.max(end)));
        match next_due.map(|d| d.saturating_duration_since(Instant::now())) {
            Some(Duration::ZERO) => continue,
            Some(t) if armed_for != next_due => {
                timer.arm(t)?;
                armed_for = next_due;
            }
            _ => {}
        }
        wait_readable(fd, &timer)?;
    }

    // Shutdown: accept every held packet (oldest first per lane), then unbind.
    for lane in &mut lanes {
        for mut msg in lane.held.drain() {
            msg.set_verdict(Verdict::Accept);
            queue.verdict(msg)?;
        }
    }
    for lane in &lanes {
        let _ = queue.unbind(lane.queue_num);
        let mean_late = lane.late_sum.as_secs_f64() * 1e6 / lane.packets.max(1) as f64;
        let changed = match lane.changes {
            0 => String::new(),
            n => format!(" (changed {n} times)"),
        };
        eprintln!(
            "slipstream-delay: queue {} delay {:?}{changed}: {} packets, max held {}, \
             lateness mean {:.0} us max {:.0} us, {} late > 1 ms",
            lane.queue_num,
            lane.held.delay(),
            lane.packets,
            lane.max_held,
            mean_late,
            lane.late_max.as_secs_f64() * 1e6,
            lane.late_over_1ms
        );
    }
    if let Some(path) = &args.stats_file {
        let stats = DelayStats {
            lanes: lanes
                .iter()
                .map(|l| LaneStats {
                    queue: l.queue_num,
                    packets: l.packets,
                    late_sum_us: l.late_sum.as_micros() as u64,
                    late_max_us: l.late_max.as_micros() as u64,
                    late_over_1ms: l.late_over_1ms,
                })
                .collect(),
        };
        std::fs::write(path, stats.to_text()).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("slipstream-delay: error: {e:#}");
        std::process::exit(1);
    }
}
