//! Window scales of flows the engine saw without their handshake, looked up in conntrack off the
//! packet thread.
//!
//! After a restart under load every running flow is new to the engine, and without its SYNs
//! its window scale is unknown (`FlowEvent::HandshakeMissed`). Conntrack saw those SYNs. The
//! packet thread hands each such flow's key to a worker thread through a bounded queue (a full
//! queue drops the request: that flow stays unclamped, as it would without the lookup), the
//! worker asks ctnetlink (`slipstream-conntrack`, each receive bounded by a timeout) and sends
//! the answer back; the packet thread takes answers without waiting and passes the scales to
//! the engine (`Engine::learn_window_scales`). The packet loop never blocks on conntrack.

use std::net::SocketAddr;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::Duration;

use slipstream_conntrack::{Conntrack, Scales};
use slipstream_engine::{FlowKey, Side};
use tracing::{debug, warn};

/// Lookups waiting for the worker; more are dropped.
const QUEUE: usize = 1024;
/// Longest wait for one ctnetlink answer.
const RECEIVE_TIMEOUT: Duration = Duration::from_millis(200);

/// What conntrack said about a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The shifts of `key.endpoint(Side::Low)` and of the other endpoint.
    Scales { low: u8, high: u8 },
    /// The entry exists but conntrack itself picked the flow up mid-stream: no scale.
    NoScale,
    /// No entry for the flow.
    NotFound,
    /// The lookup failed (logged).
    Failed,
}

/// The packet thread's end of the worker.
pub(crate) struct ScaleLookups {
    requests: SyncSender<FlowKey>,
    answers: Receiver<(FlowKey, Outcome)>,
    dropped: u64,
    /// The worker is gone (ctnetlink unusable): no more requests.
    disabled: bool,
}

impl ScaleLookups {
    /// Starts the worker thread. If ctnetlink cannot be opened the worker says why once and
    /// ends; flows seen mid-stream then stay unclamped, as before the lookup existed.
    pub(crate) fn start() -> std::io::Result<ScaleLookups> {
        let (requests, queue) = mpsc::sync_channel::<FlowKey>(QUEUE);
        let (reply, answers) = mpsc::channel();
        std::thread::Builder::new()
            .name("conntrack".into())
            .spawn(move || worker(queue, reply))?;
        Ok(ScaleLookups {
            requests,
            answers,
            dropped: 0,
            disabled: false,
        })
    }

    /// Asks for `key`'s scales; never blocks. False if the request was dropped.
    pub(crate) fn request(&mut self, key: FlowKey) -> bool {
        if self.disabled {
            return false;
        }
        match self.requests.try_send(key) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.dropped += 1;
                if self.dropped.is_power_of_two() {
                    warn!(
                        "conntrack lookups: queue full, {} flows seen mid-stream left unclamped so far",
                        self.dropped
                    );
                }
                false
            }
            Err(TrySendError::Disconnected(_)) => {
                self.disabled = true;
                false
            }
        }
    }

    /// The next answer, if one is waiting.
    pub(crate) fn answer(&mut self) -> Option<(FlowKey, Outcome)> {
        match self.answers.try_recv() {
            Ok(answer) => Some(answer),
            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => None,
        }
    }
}

fn worker(queue: Receiver<FlowKey>, reply: mpsc::Sender<(FlowKey, Outcome)>) {
    let mut conntrack = match Conntrack::open(RECEIVE_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            warn!(
                "conntrack lookups unavailable ({e}): flows seen mid-stream (after a restart) stay unclamped; \
                 needs CAP_NET_ADMIN and nf_conntrack_netlink (OpenWrt: kmod-nf-conntrack-netlink)"
            );
            return;
        }
    };
    for key in queue {
        let outcome = lookup(&mut conntrack, key);
        if reply.send((key, outcome)).is_err() {
            return;
        }
    }
}

fn lookup(conntrack: &mut Conntrack, key: FlowKey) -> Outcome {
    let (low, high): (SocketAddr, SocketAddr) = (key.endpoint(Side::Low), key.endpoint(Side::High));
    match conntrack.lookup(low, high) {
        Ok(Some(Scales::Known { a, b })) => Outcome::Scales { low: a, high: b },
        Ok(Some(Scales::Unknown)) => Outcome::NoScale,
        Ok(None) => Outcome::NotFound,
        Err(e) => {
            debug!("conntrack lookup of {low} <-> {high}: {e}");
            Outcome::Failed
        }
    }
}
