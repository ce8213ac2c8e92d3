//! Web-like best-effort traffic for the `web` scenario: a tiny object server and a client that
//! fetches "pages" of objects as in the web model of Key et al. Sec. 5.3
//! (`../shared/papers/background-transfer-rwnd-key-2004.txt`) and records every object's
//! response time. Bulk iperf3 flows cannot show how much a background download slows short,
//! interactive transfers down; Key et al. judge that by the mean response time per object size.
//! The model's values, our deviations from it and the protocol are in
//! [docs/lab/about.md](../../../docs/lab/about.md#traffic-generators).
//!
//! All generators here (object server, client, [`udp`] square wave and sink, [`probe`], the
//! [`owd`] one-way delay probe) run as
//! threads of the lab moved into their testbed namespace with [`spawn_in`]: the same sockets
//! as a helper process, without one.

pub mod owd;
pub mod probe;
pub mod udp;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp, Pareto};
use slipstream_testbed::{Ns, Testbed};

/// Runs `f` on a new thread inside namespace `ns` of `tb` (setns(2) is per thread); threads it
/// spawns and sockets it makes stay there.
pub fn spawn_in<T: Send + 'static>(
    tb: &Testbed,
    ns: Ns,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> JoinHandle<Result<T>> {
    let name = tb.ns_name(ns);
    std::thread::spawn(move || {
        slipstream_testbed::enter_netns(&name)?;
        f()
    })
}

/// The result of a generator thread (a panic is an error).
pub fn join<T>(handle: JoinHandle<Result<T>>) -> Result<T> {
    handle.join().map_err(|_| anyhow::anyhow!("generator thread panicked"))?
}

/// Largest object the server sends (a bound against runaway clients).
pub const MAX_OBJECT_BYTES: u64 = 64 * 1024 * 1024;

/// Objects per page (Key et al.: "each web page contains 10 objects").
pub const OBJECTS: usize = 10;
/// Mean gap between object launches within a page, s (Key et al.: exponential, 1 ms).
const INTER_OBJECT_MEAN_S: f64 = 0.001;
/// Pareto shape of object sizes (Key et al.: 1.2).
const SIZE_SHAPE: f64 = 1.2;
/// Mean object size and the clamp, bytes (our choices: the paper gives neither).
pub const SIZE_MEAN: f64 = 12_000.0;
pub const SIZE_CAP: f64 = 1_000_000.0;
/// Objects of one page in flight at once, each on its own connection (our choice, like a
/// browser's connection limit).
const PARALLEL: usize = 4;
/// Objects still in flight this long after the client's duration are abandoned (failed).
const GRACE: Duration = Duration::from_secs(15);

/// Mean of `min(X, cap)` for X ~ Pareto(scale, shape), shape > 1, cap >= scale:
/// `scale·a/(a−1) − scale^a·cap^(1−a)/(a−1)`.
pub fn clamped_pareto_mean(scale: f64, shape: f64, cap: f64) -> f64 {
    if cap <= scale {
        return cap;
    }
    let a = shape;
    scale * a / (a - 1.0) - scale.powf(a) * cap.powf(1.0 - a) / (a - 1.0)
}

/// The Pareto scale whose sizes, clamped at [`SIZE_CAP`], have the mean [`SIZE_MEAN`]. The
/// clamped mean grows monotonically with the scale (from 0 to the cap): bisect.
pub fn size_scale() -> f64 {
    let (mut lo, mut hi) = (0.0_f64, SIZE_CAP);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if clamped_pareto_mean(mid, SIZE_SHAPE, SIZE_CAP) < SIZE_MEAN {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// One planned page: each object's launch time after the page start (s) and size (bytes), and
/// the think time after the page completes (s).
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedPage {
    pub objects: Vec<(f64, u64)>,
    pub think_s: f64,
}

/// Deterministic page sequence of one session.
pub struct SessionPlan {
    rng: StdRng,
    sizes: Pareto<f64>,
    think: Exp<f64>,
    gap: Exp<f64>,
}

impl SessionPlan {
    /// The pages of session `session` for `seed` (each session has its own stream).
    pub fn new(seed: u64, session: u32, think_mean_s: f64) -> SessionPlan {
        let stream = seed ^ (u64::from(session) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        SessionPlan {
            rng: StdRng::seed_from_u64(stream),
            sizes: Pareto::new(size_scale(), SIZE_SHAPE).expect("a valid Pareto"),
            think: Exp::new(1.0 / think_mean_s).expect("a positive mean think time"),
            gap: Exp::new(1.0 / INTER_OBJECT_MEAN_S).expect("a positive mean gap"),
        }
    }

    /// One think time (the stagger before a session's first page).
    pub fn think_s(&mut self) -> f64 {
        self.think.sample(&mut self.rng)
    }

    pub fn next_page(&mut self) -> PlannedPage {
        let mut t = 0.0;
        let objects = (0..OBJECTS)
            .map(|i| {
                if i > 0 {
                    t += self.gap.sample(&mut self.rng);
                }
                let size = self.sizes.sample(&mut self.rng).min(SIZE_CAP).ceil() as u64;
                (t, size.max(1))
            })
            .collect();
        PlannedPage { objects, think_s: self.think_s() }
    }
}

/// One fetched (or failed) object.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectRecord {
    /// Requested size, bytes.
    pub size: u64,
    /// When the fetch started (connect), seconds since the client started.
    pub start_s: f64,
    /// Connect start to last byte, s (`None` if the fetch failed).
    pub response_s: Option<f64>,
}

// ---------------------------------------------------------------------------------------------
// Server: a request is the object size as 8 bytes big-endian; the answer is that many bytes.

/// Serves one connection: answers requests until EOF or a size above [`MAX_OBJECT_BYTES`].
pub fn serve_connection(mut stream: TcpStream) -> Result<()> {
    stream.set_nodelay(true).ok();
    let mut request = [0u8; 8];
    while stream.read_exact(&mut request).is_ok() {
        let size = u64::from_be_bytes(request);
        if size > MAX_OBJECT_BYTES {
            bail!("size {size} exceeds {MAX_OBJECT_BYTES}");
        }
        io::copy(&mut io::repeat(0x5a).take(size), &mut stream)?;
    }
    Ok(())
}

/// Accepts connections on `listener` until `stop` is set (checked every 5 ms), one thread per
/// connection.
pub fn serve(listener: TcpListener, stop: Arc<AtomicBool>) -> Result<()> {
    listener.set_nonblocking(true)?;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                std::thread::spawn(move || serve_connection(stream));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => sleep(Duration::from_millis(5)),
            Err(e) => return Err(e).context("accept"),
        }
    }
    Ok(())
}

/// An object server on `0.0.0.0:port` in namespace `ns`, listening when this returns; it
/// stops accepting when dropped.
pub struct Server {
    stop: Arc<AtomicBool>,
}

impl Server {
    pub fn start(tb: &Testbed, ns: Ns, port: u16) -> Result<Server> {
        let listener = join(spawn_in(tb, ns, move || {
            TcpListener::bind(("0.0.0.0", port)).with_context(|| format!("binding port {port}"))
        }))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        std::thread::spawn(move || serve(listener, flag));
        Ok(Server { stop })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------------
// Client

/// What the client does.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub server: SocketAddr,
    pub seed: u64,
    /// Concurrent independent sessions.
    pub sessions: u32,
    /// No page starts after this long.
    pub duration: Duration,
    /// Mean think time between pages, s (Key et al.: 1 s).
    pub think_mean_s: f64,
}

/// Fetches one object on a new connection; returns the response time (connect start to last
/// byte), s. A fetch not done by `deadline` fails.
pub fn fetch_object(server: SocketAddr, size: u64, deadline: Instant) -> Result<f64> {
    let t0 = Instant::now();
    let left = deadline.saturating_duration_since(t0).max(Duration::from_millis(1));
    let mut stream = TcpStream::connect_timeout(&server, left).context("connect")?;
    stream.set_nodelay(true).ok();
    stream.set_read_timeout(Some(left))?;
    stream.write_all(&size.to_be_bytes()).context("send request")?;
    let got = io::copy(&mut (&stream).take(size), &mut io::sink()).context("receive")?;
    if got < size || Instant::now() > deadline {
        bail!("{got} of {size} bytes by the deadline");
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Runs the sessions; the records, in the order the objects completed.
pub fn run_client(cfg: &ClientConfig) -> Vec<ObjectRecord> {
    let started = Instant::now();
    let (tx, rx) = mpsc::channel::<ObjectRecord>();
    std::thread::scope(|s| {
        for session in 0..cfg.sessions {
            let tx = tx.clone();
            s.spawn(move || run_session(cfg, session, started, &tx));
        }
    });
    drop(tx);
    rx.into_iter().collect()
}

/// One session: pages one after another, the think time starting when a page's last object
/// arrived (closed loop, so a slow path is not flooded with pages).
fn run_session(cfg: &ClientConfig, session: u32, started: Instant, tx: &mpsc::Sender<ObjectRecord>) {
    let stop_pages = started + cfg.duration;
    let deadline = stop_pages + GRACE;
    let mut plan = SessionPlan::new(cfg.seed, session, cfg.think_mean_s);
    // Sessions start staggered by one think time, as if the user had just been reading.
    let mut next_start = started + Duration::from_secs_f64(plan.think_s());
    while next_start < stop_pages && Instant::now() < deadline {
        sleep(next_start.saturating_duration_since(Instant::now()));
        let page = plan.next_page();
        let page_start = Instant::now();
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..PARALLEL {
                s.spawn(|| {
                    while let Some(&(offset_s, size)) = page.objects.get(next.fetch_add(1, Ordering::Relaxed))
                    {
                        let planned = page_start + Duration::from_secs_f64(offset_s);
                        sleep(planned.saturating_duration_since(Instant::now()));
                        let start_s = started.elapsed().as_secs_f64();
                        // A failed fetch (refused, reset, past the deadline) has no response time.
                        let response_s = fetch_object(cfg.server, size, deadline).ok();
                        let _ = tx.send(ObjectRecord { size, start_s, response_s });
                    }
                });
            }
        });
        next_start = Instant::now() + Duration::from_secs_f64(page.think_s);
    }
}

#[cfg(test)]
mod tests;
