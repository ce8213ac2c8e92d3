//! The NFQUEUE datapath: every packet of a background flow is queued to the daemon and gets its
//! verdict, with the rewritten window when the engine lowered it.

use std::io;
use std::os::fd::RawFd;
use std::time::SystemTime;

use slipstream_config::Hook;
use slipstream_engine::{Engine, PacketCopy, PacketMeta, Verdict, WindowUpdate};
use slipstream_firewall::rule_number_from_mark;
use slipstream_nfqueue::QueueKind;

use super::held::HeldPackets;
use super::{drain_batch, Datapath, Received};
use crate::clock::MonotonicClock;
use crate::kernel_time;
use crate::lan_hosts::source_address;
use crate::lan_side::LanSide;
use crate::window_updates::WindowUpdateSender;
use tracing::info;

/// Packets handled per batch before timers, window updates and commands get their turn.
/// At 7-9 us per packet, verdict included (measured on the 2-core test VM,
/// `crates/nfqueue/tests/kernel_timestamps.rs`), a batch takes about 2 ms: that is how late a
/// tick or a window update can be.
pub(crate) const BATCH: usize = 256;

pub(crate) struct NfqueueDatapath {
    queues: slipstream_nfqueue::Datapath,
    mark_mask: u32,
    /// Tells packets from the LAN by their input interface.
    lan_side: LanSide,
    /// Raw sockets for the engine's window updates; learns where LAN hosts are from their
    /// queued packets.
    window_updates: WindowUpdateSender,
    /// Packets background UDP flows' shapers hold for a later verdict.
    held: HeldPackets<slipstream_nfqueue::Message>,
}

/// The share of a queue's `max_len` that held packets may take: the rest stays for the packets
/// that come meanwhile (a full kernel queue lets packets pass unseen).
const HELD_SHARE_OF_QUEUE: u32 = 4;

impl NfqueueDatapath {
    pub(crate) fn new(
        queues: slipstream_nfqueue::Datapath,
        mark_mask: u32,
        lan_side: LanSide,
        window_updates: WindowUpdateSender,
    ) -> NfqueueDatapath {
        let held = HeldPackets::new((queues.max_len() / HELD_SHARE_OF_QUEUE) as usize);
        NfqueueDatapath {
            queues,
            mark_mask,
            lan_side,
            window_updates,
            held,
        }
    }

    /// [`Datapath::receive`], calling `before_verdict` with the engine, each packet (as it
    /// leaves) and its rule before the packet's verdict.
    pub(crate) fn receive_with(
        &mut self,
        engine: &mut Engine,
        clock: &MonotonicClock,
        scratch: &mut [u8],
        mut before_verdict: impl FnMut(&Engine, &[u8], Option<u16>),
    ) -> Received {
        let mut error = self.release_due(clock).err();
        let (batch, batch_error) = drain_batch(BATCH, || {
            self.handle_one(engine, clock, scratch, &mut before_verdict)
        });
        if let Some(e) = batch_error {
            error.get_or_insert(e);
        }
        // What came due during the batch goes at the next turn: the loop's wait ends at once
        // for it (`Datapath::next_release`).
        if let Err(e) = self.queues.flush_accepts() {
            error.get_or_insert(e);
        }
        Received {
            handled: batch.handled,
            full: batch.full,
            error,
        }
    }

    /// Handles one queued packet; `Ok(false)` when none was waiting.
    fn handle_one(
        &mut self,
        engine: &mut Engine,
        clock: &MonotonicClock,
        scratch: &mut [u8],
        before_verdict: &mut impl FnMut(&Engine, &[u8], Option<u16>),
    ) -> io::Result<bool> {
        let Some((mut msg, stamp)) = self.queues.try_recv_timed()? else {
            return Ok(false);
        };
        let now = clock.now();
        let arrival = stamp.and_then(|stamp| kernel_time::arrival(stamp, SystemTime::now(), now));
        let copy = copy_of(self.queues.kind_of(&msg), msg.get_payload());
        let meta = PacketMeta {
            rule: rule_number_from_mark(msg.get_nfmark(), self.mark_mask),
            copy,
            checksum_ready: msg.is_checksum_ready(),
            from_lan: self.lan_side.classify(msg.get_indev()),
            arrival,
        };
        if meta.from_lan == Some(true) {
            if let (Some(src), Some(hw)) = (source_address(msg.get_payload()), msg.get_hw_addr()) {
                self.window_updates.learn_lan_host(src, msg.get_indev(), hw);
            }
        }
        // The engine works on a copy: asking nfq for the payload mutably would send it back
        // even when unchanged.
        let payload = msg.get_payload();
        let len = payload.len().min(scratch.len());
        scratch[..len].copy_from_slice(&payload[..len]);
        let verdict = if len == payload.len() {
            engine.handle_packet(now, &mut scratch[..len], meta)
        } else {
            Verdict::Accept
        };
        let modified = matches!(
            verdict,
            Verdict::AcceptModified | Verdict::Hold { modified: true, .. }
        );
        if modified {
            msg.get_payload_mut().copy_from_slice(&scratch[..len]);
        }
        before_verdict(engine, msg.get_payload(), meta.rule);
        if let Verdict::Hold { until, .. } = verdict {
            // Over a background UDP flow's rate: kept until its shaper says (or at once, when
            // the store is full).
            msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
            self.queues.hold(&msg);
            if let Err(msg) = self.held.hold(until, msg) {
                self.queues.release(msg)?;
            }
        } else if verdict == Verdict::AcceptModified {
            msg.set_verdict(slipstream_nfqueue::Verdict::Accept);
            self.queues.verdict(msg)?;
        } else if verdict == Verdict::Drop {
            // A background UDP flow over its share (its policer): the one verdict that is not
            // an accept, sent at once like a modified packet's (the batch accepts the rest).
            msg.set_verdict(slipstream_nfqueue::Verdict::Drop);
            self.queues.verdict(msg)?;
        } else {
            // Unchanged packets are accepted together after the batch (one message per queue).
            self.queues.accept_later(msg)?;
        }
        Ok(true)
    }

    /// Sends the verdicts of the held packets that are due.
    fn release_due(&mut self, clock: &MonotonicClock) -> io::Result<()> {
        let now = clock.now();
        while let Some(msg) = self.held.pop_due(now) {
            match self.queues.release(msg) {
                // The kernel let the packet go meanwhile (its interface went down, which drops
                // what it queued): nothing is left to release.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// When the next held packet is due.
    pub(crate) fn next_release(&self) -> Option<slipstream_control::Instant> {
        self.held.next_due()
    }

    /// Lets every held packet go on.
    fn release_held(&mut self) {
        let held: Vec<_> = self.held.drain().collect();
        for msg in held {
            let _ = self.queues.release(msg);
        }
    }

    /// Lets every held packet go on (at stop).
    pub(crate) fn release_all(&mut self) {
        self.release_held();
        if self.held.overflowed() > 0 {
            info!(
                "shaper: {} packets found the held store full and went on at once",
                self.held.overflowed()
            );
        }
    }

    /// The queues' descriptor.
    pub(crate) fn fd(&self) -> RawFd {
        self.queues.fd()
    }

    /// Sends a window update through the raw sockets (failures counted by the sender).
    pub(crate) fn send(&mut self, packet: &[u8]) {
        let _ = self.window_updates.send(packet);
    }
}

impl Datapath for NfqueueDatapath {
    fn fds(&self) -> [Option<RawFd>; 2] {
        [Some(self.fd()), None]
    }

    fn receive(&mut self, engine: &mut Engine, clock: &MonotonicClock, scratch: &mut [u8]) -> Received {
        self.receive_with(engine, clock, scratch, |_, _, _| {})
    }

    fn send_window_update(&mut self, _engine: &Engine, update: &WindowUpdate) {
        self.send(&update.packet);
    }

    fn on_tick(&mut self, _engine: &Engine) {
        self.lan_side.expire(std::time::Instant::now());
    }

    fn reconfigure(&mut self, hook: Hook, lan_interfaces: Vec<String>) {
        self.lan_side.reconfigure(hook, lan_interfaces);
    }

    fn next_release(&self) -> Option<slipstream_control::Instant> {
        NfqueueDatapath::next_release(self)
    }

    fn release_all(&mut self) {
        NfqueueDatapath::release_all(self);
    }
}

impl Drop for NfqueueDatapath {
    /// Held packets go on before the queues are unbound (unbinding drops what waits).
    fn drop(&mut self) {
        self.release_held();
    }
}

/// How much of a queued packet the daemon holds: the ACK queue copies whole packets; the data
/// queue copies `data_copy_bytes`, which is the whole packet when it is that short or the range
/// is raised. A whole packet may be handed back rewritten: in a flow with data both ways
/// (BitTorrent) the receiver's ACKs carry data and go to the data queue.
fn copy_of(kind: QueueKind, payload: &[u8]) -> PacketCopy {
    match kind {
        QueueKind::Ack => PacketCopy::Full,
        QueueKind::Data if slipstream_wire::is_complete(payload) => PacketCopy::Full,
        QueueKind::Data => PacketCopy::HeaderOnly,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1500-byte IPv4 packet as the data queue hands it over with a copy range of `copy`.
    fn data_packet(copy: usize) -> Vec<u8> {
        let mut packet = vec![0u8; 1500];
        packet[0] = 0x45;
        packet[2..4].copy_from_slice(&1500u16.to_be_bytes());
        packet.truncate(copy);
        packet
    }

    /// A data-carrying ACK copied whole from the data queue can be rewritten; a header-only copy
    /// cannot (every data-queue packet was header-only before, so a two-way flow's receiver
    /// ACKs that carry data went out with the host's whole window).
    #[test]
    fn whole_packets_from_the_data_queue_may_be_rewritten() {
        assert_eq!(copy_of(QueueKind::Data, &data_packet(1500)), PacketCopy::Full);
        assert_eq!(
            copy_of(QueueKind::Data, &data_packet(128)),
            PacketCopy::HeaderOnly
        );
        assert_eq!(copy_of(QueueKind::Ack, &data_packet(80)), PacketCopy::Full);
    }
}
