//! How the periodic samplers run: a thread that takes a sample every 100 ms ([`Periodic`], for
//! `ss` and the daemon's control socket).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::result::now_unix;

/// Time between two samples of a [`Periodic`] sampler, s.
pub const POLL_INTERVAL_S: f64 = 0.1;

/// `(t, sample)` pairs, t in seconds since the run's t = 0, taken when the sample started.
pub(super) type Samples<T> = Vec<(f64, T)>;

/// A thread calling `sample` every [`POLL_INTERVAL_S`] (or as soon as a slower sample ends)
/// until stopped; a `None` sample is skipped.
pub(super) struct Periodic<T> {
    samples: Arc<Mutex<Samples<T>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Periodic<T> {
    /// Starts sampling, inside network namespace `ns` if given (processes the sampler spawns run
    /// there too); times count from `t0_unix`.
    pub(super) fn start(
        ns: Option<String>,
        t0_unix: f64,
        mut sample: impl FnMut() -> Option<T> + Send + 'static,
    ) -> Periodic<T> {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sink, flag) = (Arc::clone(&samples), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            if ns.is_some_and(|ns| slipstream_testbed::enter_netns(&ns).is_err()) {
                return;
            }
            let mut due = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                let t = now_unix() - t0_unix;
                if let Some(s) = sample() {
                    sink.lock().unwrap_or_else(PoisonError::into_inner).push((t, s));
                }
                due += Duration::from_secs_f64(POLL_INTERVAL_S);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
        });
        Periodic { samples, stop, thread: Some(thread) }
    }

    /// The samples so far (also after a sampling thread panicked).
    pub(super) fn samples(&self) -> MutexGuard<'_, Samples<T>> {
        self.samples.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops sampling; the samples.
    pub(super) fn finish(mut self) -> Samples<T> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.samples())
    }
}

impl<T> Drop for Periodic<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
