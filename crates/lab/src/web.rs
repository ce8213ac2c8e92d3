//! Web-like best-effort traffic for the lab: a tiny object server and a client that fetches
//! "pages" of objects the way the web model of Key et al. Sec. 5.3
//! (`../shared/papers/background-transfer-rwnd-key-2004.txt`, taken from the TCP-LP evaluation)
//! does, and records every object's response time.
//!
//! Why it exists: the `web` scenario asks how much a background download slows short,
//! interactive transfers down, which bulk iperf3 flows cannot show. Key et al. judge a
//! background-transfer scheme by the mean response time of web objects per object size,
//! normalised to a reference run; this generator produces those objects on a real TCP path.
//!
//! **The model** ([`WebModel::key2004`]): a session fetches pages one after another; each page
//! has 10 objects (Key et al.: "each web page contains 10 objects"); objects of a page are
//! launched with exponential gaps of mean 1 ms ("inter-object ... exponential with mean 1 msec");
//! between pages the session thinks for an exponential time of mean 1 s ("inter-page ... mean 1
//! sec"); object sizes are Pareto with shape 1.2 (as in the paper). The paper gives no mean
//! object size and no cap: we use a mean of 12 kB (a standard web-model value, our choice) and
//! clamp sizes at 1 MB so that a run's load is bounded; the Pareto scale is solved so that the
//! *clamped* distribution has that mean ([`SizeDist::with_mean`]). Our deviations, also our
//! choices: the think time starts when the page's last object arrived (closed loop, so a slow
//! path is not flooded with pages), and at most [`WebModel::parallel`] objects (default 4) of a
//! page are in flight at once, like a browser's connection limit; each object is fetched over
//! its own TCP connection (as in ns-2's web traffic model), so its response time includes the
//! handshake.
//!
//! **Protocol**: the client sends one line `GET <size>\n`; the server answers with exactly
//! `<size>` bytes (at most [`MAX_OBJECT_BYTES`]) and then serves the next request line on the
//! same connection until the client closes it. Anything else closes the connection.
//!
//! **Records**: one [`ObjectRecord`] per object: session, page, object, size, when it started
//! (seconds since the client started) and the response time (connect start to last byte; none
//! if the fetch failed). Everything random comes from one seed, so two runs with the same seed ask for the same pages in the same order
//! (their timing differs, so a shorter run fetches a prefix of them).
//!
//! **Where they run**: the generators here (object server, client, [`udp`] square wave and sink,
//! [`probe`]) run as threads of the lab itself, each moved into its testbed namespace with
//! [`spawn_in`] (setns(2) is per thread, and a socket stays in the namespace it was made in):
//! the same sockets and the same code paths as a helper process, without one.

pub mod probe;
pub mod udp;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp, Pareto};
use slipstream_testbed::{Ns, Testbed};

/// Runs `f` on a new thread inside namespace `ns` of `tb`; threads it spawns and sockets it
/// makes stay there.
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

/// Largest object the server sends (a bound against typos and runaway clients).
pub const MAX_OBJECT_BYTES: u64 = 64 * 1024 * 1024;

/// Longest request line the server reads.
const MAX_LINE: usize = 64;

/// Mean of `min(X, cap)` for X ~ Pareto(scale, shape), shape > 1, cap >= scale:
/// `scale·a/(a−1) − scale^a·cap^(1−a)/(a−1)`.
pub fn clamped_pareto_mean(scale: f64, shape: f64, cap: f64) -> f64 {
    if cap <= scale {
        return cap;
    }
    let a = shape;
    scale * a / (a - 1.0) - scale.powf(a) * cap.powf(1.0 - a) / (a - 1.0)
}

/// Object sizes: Pareto(scale, shape) clamped at `cap`, in bytes (rounded up, at least 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeDist {
    /// Pareto scale (the smallest size), bytes.
    pub scale: f64,
    /// Pareto shape (tail index).
    pub shape: f64,
    /// Sizes above this are clamped to it, bytes.
    pub cap: f64,
}

impl SizeDist {
    /// The distribution with the given shape and cap whose clamped mean is `mean`.
    /// Fails unless `shape > 1` and `0 < mean < cap`.
    pub fn with_mean(shape: f64, mean: f64, cap: f64) -> Result<SizeDist> {
        if !(shape > 1.0 && shape.is_finite()) {
            bail!("Pareto shape must be > 1 for a finite mean, got {shape}");
        }
        if !(mean > 0.0 && mean < cap && cap.is_finite()) {
            bail!("need 0 < mean < cap, got mean {mean}, cap {cap}");
        }
        // The clamped mean grows monotonically with the scale (from 0 to `cap`): bisect.
        let (mut lo, mut hi) = (0.0_f64, cap);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if clamped_pareto_mean(mid, shape, cap) < mean {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(SizeDist { scale: 0.5 * (lo + hi), shape, cap })
    }

    /// One size in bytes.
    pub fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let pareto = Pareto::new(self.scale, self.shape).expect("validated parameters");
        let x: f64 = pareto.sample(rng);
        (x.min(self.cap).ceil() as u64).max(1)
    }
}

/// The page model (see the module docs for where each value comes from).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WebModel {
    /// Objects per page (Key et al.: 10).
    pub objects: u32,
    pub sizes: SizeDist,
    /// Mean think time between a page's completion and the next page, seconds (exponential).
    pub think_mean_s: f64,
    /// Mean gap between object launches within a page, seconds (exponential).
    pub inter_object_mean_s: f64,
    /// Objects of one page in flight at once (each on its own connection).
    pub parallel: usize,
}

impl WebModel {
    /// Key et al. Sec. 5.3: 10 objects a page, 1 ms / 1 s exponential gaps, Pareto 1.2 sizes;
    /// our choices: mean 12 kB clamped at 1 MB, 4 parallel connections.
    pub fn key2004() -> WebModel {
        WebModel {
            objects: 10,
            sizes: SizeDist::with_mean(1.2, 12_000.0, 1_000_000.0).expect("valid constants"),
            think_mean_s: 1.0,
            inter_object_mean_s: 0.001,
            parallel: 4,
        }
    }
}

/// One object of a planned page.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlannedObject {
    /// Launch time relative to the page start, seconds.
    pub offset_s: f64,
    pub size: u64,
}

/// One planned page and the think time after it.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedPage {
    pub objects: Vec<PlannedObject>,
    /// Think time after the page completes, seconds.
    pub think_s: f64,
}

/// Deterministic page sequence of one session.
pub struct SessionPlan {
    rng: StdRng,
    model: WebModel,
    think: Exp<f64>,
    gap: Exp<f64>,
}

impl SessionPlan {
    /// The pages of session `session` for `seed` (each session has its own stream).
    pub fn new(model: WebModel, seed: u64, session: u32) -> SessionPlan {
        let stream = seed ^ (u64::from(session) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        SessionPlan {
            rng: StdRng::seed_from_u64(stream),
            model,
            think: Exp::new(1.0 / model.think_mean_s).expect("a positive mean think time"),
            gap: Exp::new(1.0 / model.inter_object_mean_s).expect("a positive mean gap"),
        }
    }

    pub fn next_page(&mut self) -> PlannedPage {
        let k = self.model.objects;
        let mut t = 0.0;
        let mut objects = Vec::with_capacity(k as usize);
        for i in 0..k {
            if i > 0 {
                t += self.gap.sample(&mut self.rng);
            }
            objects.push(PlannedObject { offset_s: t, size: self.model.sizes.sample(&mut self.rng) });
        }
        PlannedPage { objects, think_s: self.think.sample(&mut self.rng) }
    }
}

/// One fetched (or failed) object.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectRecord {
    pub session: u32,
    pub page: u32,
    pub object: u32,
    /// Requested size, bytes.
    pub size: u64,
    /// When the fetch started (connect), seconds since the client started.
    pub start_s: f64,
    /// Connect start to last byte, s (`None` if the fetch failed).
    pub response_s: Option<f64>,
}

impl ObjectRecord {
    pub fn ok(&self) -> bool {
        self.response_s.is_some()
    }
}

// ---------------------------------------------------------------------------------------------
// Server

/// Parses a request line `GET <size>` (trailing `\r\n`/`\n` allowed).
pub fn parse_request(line: &str) -> Result<u64> {
    let line = line.trim_end_matches(['\r', '\n']);
    let Some(n) = line.strip_prefix("GET ") else {
        bail!("request must be `GET <size>`, got {line:?}");
    };
    let n: u64 = n.trim().parse().with_context(|| format!("bad size in {line:?}"))?;
    if n > MAX_OBJECT_BYTES {
        bail!("size {n} exceeds {MAX_OBJECT_BYTES}");
    }
    Ok(n)
}

/// The request line for an object of `size` bytes.
pub fn request_line(size: u64) -> String {
    format!("GET {size}\n")
}

/// Serves one connection: answers request lines until EOF or a bad request.
pub fn serve_connection(stream: TcpStream) -> Result<u64> {
    stream.set_nodelay(true).ok();
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let chunk = vec![0x5a_u8; 64 * 1024];
    let mut served = 0u64;
    loop {
        let mut line = String::new();
        let n = (&mut reader).take(MAX_LINE as u64).read_line(&mut line)?;
        if n == 0 {
            return Ok(served);
        }
        if !line.ends_with('\n') {
            bail!("request line too long or truncated");
        }
        let mut left = parse_request(&line)?;
        while left > 0 {
            let k = left.min(chunk.len() as u64) as usize;
            writer.write_all(&chunk[..k])?;
            left -= k as u64;
        }
        served += 1;
    }
}

/// Accepts connections on `listener` until `stop` is set (checked every 100 ms), one thread
/// per connection.
pub fn serve(listener: TcpListener, stop: Arc<AtomicBool>) -> Result<()> {
    listener.set_nonblocking(true)?;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                std::thread::spawn(move || {
                    let _ = serve_connection(stream);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
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
    pub model: WebModel,
    pub seed: u64,
    /// Concurrent independent sessions.
    pub sessions: u32,
    /// No page starts after this long.
    pub duration: Duration,
    /// Objects still in flight this long after `duration` are abandoned (recorded as errors).
    pub grace: Duration,
}

/// Fetches one object on a new connection; returns the response time (connect start to last
/// byte), s. `deadline` bounds the whole fetch.
pub fn fetch_object(server: SocketAddr, size: u64, deadline: Instant) -> Result<f64> {
    let t0 = Instant::now();
    let left = |now: Instant| deadline.saturating_duration_since(now).max(Duration::from_millis(1));
    let mut stream = TcpStream::connect_timeout(&server, left(t0)).context("connect")?;
    stream.set_nodelay(true).ok();
    stream.write_all(request_line(size).as_bytes()).context("send request")?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0u64;
    while got < size {
        let now = Instant::now();
        if now >= deadline {
            bail!("deadline passed after {got} of {size} bytes");
        }
        stream.set_read_timeout(Some(left(now)))?;
        let want = (size - got).min(buf.len() as u64) as usize;
        match stream.read(&mut buf[..want]) {
            Ok(0) => bail!("connection closed after {got} of {size} bytes"),
            Ok(n) => got += n as u64,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("receive"),
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Runs the sessions; the records, in the order the objects completed.
pub fn run_client(cfg: &ClientConfig) -> Vec<ObjectRecord> {
    let started = Instant::now();
    let stop_pages = started + cfg.duration;
    let hard_deadline = stop_pages + cfg.grace;
    let (tx, rx) = mpsc::channel::<ObjectRecord>();
    std::thread::scope(|s| {
        for session in 0..cfg.sessions {
            let tx = tx.clone();
            s.spawn(move || run_session(cfg, session, started, stop_pages, hard_deadline, &tx));
        }
    });
    drop(tx);
    rx.into_iter().collect()
}

fn run_session(
    cfg: &ClientConfig,
    session: u32,
    started: Instant,
    stop_pages: Instant,
    hard_deadline: Instant,
    tx: &mpsc::Sender<ObjectRecord>,
) {
    let mut plan = SessionPlan::new(cfg.model, cfg.seed, session);
    let mut page_no = 0u32;
    // Sessions start staggered by one think time, as if the user had just been reading.
    let mut next_start = Instant::now();
    let mut first = true;
    loop {
        let page = plan.next_page();
        if first {
            next_start += Duration::from_secs_f64(page.think_s);
            first = false;
        }
        if next_start >= stop_pages {
            return;
        }
        std::thread::sleep(next_start.saturating_duration_since(Instant::now()));
        let page_start = Instant::now();
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..cfg.model.parallel.min(page.objects.len()) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(obj) = page.objects.get(i) else { return };
                    let planned = page_start + Duration::from_secs_f64(obj.offset_s);
                    std::thread::sleep(planned.saturating_duration_since(Instant::now()));
                    let start_s = started.elapsed().as_secs_f64();
                    let _ = tx.send(ObjectRecord {
                        session,
                        page: page_no,
                        object: i as u32,
                        size: obj.size,
                        start_s,
                        // A failed fetch (refused, reset, past the deadline) has no response time.
                        response_s: fetch_object(cfg.server, obj.size, hard_deadline).ok(),
                    });
                });
            }
        });
        page_no += 1;
        if Instant::now() >= hard_deadline {
            return;
        }
        next_start = Instant::now() + Duration::from_secs_f64(page.think_s);
    }
}

// ---------------------------------------------------------------------------------------------
// Summaries

/// Mean response time of the objects in one size bucket `[lo, hi)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BucketStat {
    /// Lower size bound, bytes (inclusive).
    pub lo: u64,
    /// Upper size bound, bytes (exclusive; `u64::MAX` for the last bucket).
    pub hi: u64,
    /// Completed objects in the bucket.
    pub count: u64,
    /// Mean response time, s (NaN if empty).
    pub mean_s: f64,
}

/// Bucket edges: powers of two from `first` up to `last` (bytes), then one open bucket.
/// `[0, first)`, `[first, 2·first)`, ..., `[last, inf)`.
pub fn log2_edges(first: u64, last: u64) -> Vec<u64> {
    let mut edges = vec![0];
    let mut e = first.max(1);
    while e <= last {
        edges.push(e);
        e = e.saturating_mul(2);
    }
    edges
}

/// Per-bucket mean response times of the completed objects.
/// `edges` are the lower bounds, ascending (as [`log2_edges`] makes them); buckets without
/// objects are kept (count 0, NaN times) so that runs line up bucket by bucket.
pub fn bucket_stats(records: &[ObjectRecord], edges: &[u64]) -> Vec<BucketStat> {
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); edges.len()];
    for r in records {
        if let Some(rt) = r.response_s {
            times[edges.partition_point(|&e| e <= r.size).saturating_sub(1)].push(rt);
        }
    }
    edges
        .iter()
        .zip(times)
        .enumerate()
        .map(|(i, (&lo, v))| BucketStat {
            lo,
            hi: edges.get(i + 1).copied().unwrap_or(u64::MAX),
            count: v.len() as u64,
            mean_s: crate::analysis::mean(v).unwrap_or(f64::NAN),
        })
        .collect()
}

/// Mean response time of all completed objects, s (NaN if none).
pub fn mean_response(records: &[ObjectRecord]) -> f64 {
    crate::analysis::mean(records.iter().filter_map(|r| r.response_s)).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests;
