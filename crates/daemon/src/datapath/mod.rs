//! The one interface the packet loop has to the kernel, whichever way packets reach the engine.
//!
//! A [`Datapath`] is the thin I/O shell around the sans-I/O engine: it hands the engine packets
//! (with the kernel's arrival time) and carries the engine's decisions back to the kernel. Two
//! implement it:
//!
//! * [`nfqueue::NfqueueDatapath`]: every packet of a background flow is queued to the daemon,
//!   and each decision is a verdict, with the rewritten window when the engine lowered it;
//! * [`ebpf::EbpfDatapath`]: handshakes still come through NFQUEUE, every other packet is a
//!   report from the tc program, and the decisions are writes to the program's flow map (the
//!   kernel lowers each ACK itself).
//!
//! The loop (`packet_loop`) is the same for both: wait, receive a batch, apply, timers, the
//! engine's window updates, commands. Dispatch is static (the loop is generic over the
//! datapath), as quinn and smoltcp keep their per-packet paths free of virtual calls.

#[cfg(feature = "ebpf")]
#[allow(
    clippy::incompatible_msrv,
    reason = "the eBPF datapath needs Rust 1.87 (aya), the rest 1.85"
)]
pub(crate) mod ebpf;
pub(crate) mod held;
pub(crate) mod nfqueue;
pub(crate) mod setup;

use std::io;
use std::os::fd::RawFd;

use slipstream_config::Hook;
use slipstream_engine::{Engine, WindowUpdate};

use crate::clock::MonotonicClock;

/// How packets reach the engine and its decisions reach the packets.
pub(crate) trait Datapath {
    /// Called once, before the first [`Datapath::receive`], with the loop's clock.
    fn start(&mut self, _clock: &MonotonicClock) {}

    /// The descriptors that become readable when packets wait (at most two).
    fn fds(&self) -> [Option<RawFd>; 2];

    /// Feeds the waiting packets to `engine`, at most one batch of each kind, and applies the
    /// decisions that belong to each packet (NFQUEUE: its verdict).
    fn receive(&mut self, engine: &mut Engine, clock: &MonotonicClock, scratch: &mut [u8]) -> Received;

    /// After each batch: the decisions that are not per packet (eBPF: targets into the kernel's
    /// flow map). Runs before the engine's window updates are sent.
    fn apply(&mut self, _engine: &Engine) {}

    /// Sends a window update the engine made. A datapath that lowers windows in the kernel
    /// records its right edge first, so that no later ACK goes left of it.
    fn send_window_update(&mut self, engine: &Engine, update: &WindowUpdate);

    /// Every tick (250 ms): heartbeats, caches, interfaces that appeared, flows the engine
    /// forgot.
    fn on_tick(&mut self, engine: &Engine);

    /// The engine learned a flow's window scales from conntrack (it was seen mid-stream).
    fn on_scales_learned(&mut self, _engine: &Engine, _key: slipstream_engine::FlowKey) {}

    /// At stop, after the engine's final window updates went out: nothing lowered any more.
    fn release_all(&mut self) {}

    /// A reload: the hook and the LAN interfaces.
    fn reconfigure(&mut self, hook: Hook, lan_interfaces: Vec<String>);

    /// How long to pause before waiting again after a batch that was not full (the ring buffer
    /// wakes its reader per report; see `ebpf::KERNEL_PAUSE`). The loop waits on the first of
    /// [`Datapath::fds`] meanwhile, so a handshake ends the pause.
    fn pause(&self) -> Option<std::time::Duration> {
        None
    }

    /// When the next packet held for a later verdict is due (the loop wakes by then).
    fn next_release(&self) -> Option<slipstream_control::Instant> {
        None
    }

    /// Logs what the datapath counted (at exit).
    fn log_totals(&self) {}
}

/// What one [`Datapath::receive`] did.
#[derive(Debug)]
pub(crate) struct Received {
    /// Packets (and reports) handled.
    pub handled: usize,
    /// A batch stopped at its limit: more may be waiting, so do not wait for them.
    pub full: bool,
    /// The receive or verdict error that ended a batch.
    pub error: Option<io::Error>,
}

/// What one batch of packets did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    pub handled: usize,
    /// The batch stopped at its limit: more packets may be waiting, so do not wait for them.
    pub full: bool,
}

/// Handles packets with `next` until it reports the queue empty (`Ok(false)`), fails, or
/// `limit` packets were handled.
pub(crate) fn drain_batch(
    limit: usize,
    mut next: impl FnMut() -> io::Result<bool>,
) -> (Batch, Option<io::Error>) {
    let mut handled = 0;
    while handled < limit {
        match next() {
            Ok(true) => handled += 1,
            Ok(false) => return (Batch { handled, full: false }, None),
            Err(e) => return (Batch { handled, full: false }, Some(e)),
        }
    }
    (Batch { handled, full: true }, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BATCH: usize = 256;

    /// A queue holding `n` packets: `next` handles one per call.
    fn queue(n: usize) -> impl FnMut() -> io::Result<bool> {
        let mut left = n;
        move || {
            if left == 0 {
                return Ok(false);
            }
            left -= 1;
            Ok(true)
        }
    }

    #[test]
    fn a_short_queue_is_drained_in_one_batch() {
        let (batch, error) = drain_batch(BATCH, queue(10));
        assert_eq!(
            batch,
            Batch {
                handled: 10,
                full: false
            }
        );
        assert!(error.is_none());
    }

    #[test]
    fn a_long_queue_is_handled_in_bounded_batches() {
        let mut next = queue(BATCH * 2 + 5);
        let mut batches = Vec::new();
        loop {
            let (batch, _) = drain_batch(BATCH, &mut next);
            let full = batch.full;
            batches.push(batch.handled);
            if !full {
                break;
            }
        }
        assert_eq!(batches, [BATCH, BATCH, 5]);
    }

    #[test]
    fn an_error_ends_the_batch() {
        let mut calls = 0;
        let (batch, error) = drain_batch(BATCH, || {
            calls += 1;
            if calls == 4 {
                Err(io::Error::other("verdict failed"))
            } else {
                Ok(true)
            }
        });
        assert_eq!(
            batch,
            Batch {
                handled: 3,
                full: false
            }
        );
        assert_eq!(error.unwrap().to_string(), "verdict failed");
    }

    #[test]
    fn a_full_batch_stops_exactly_at_its_limit() {
        let mut calls = 0;
        let (batch, _) = drain_batch(3, || {
            calls += 1;
            Ok(true)
        });
        assert_eq!(
            batch,
            Batch {
                handled: 3,
                full: true
            }
        );
        assert_eq!(calls, 3, "no packet is taken from the queue beyond the limit");
    }
}
