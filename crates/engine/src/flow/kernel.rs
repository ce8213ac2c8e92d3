//! What a datapath that lowers windows in the kernel (the tc eBPF program) needs of a flow: the
//! receiver's window scale, the sender's MSS and the controller's target. The kernel applies the
//! same safety rules as `window_clamp` to every ACK itself; the engine only says where to aim.

use super::Flow;
use crate::flow_key::Side;

/// The clamp a kernel datapath applies to the ACKs `receiver` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelClamp {
    /// The endpoint whose ACKs are lowered (the bulk data's receiver).
    pub receiver: Side,
    /// The receiver's window scale shift (the unit of the window field it sends).
    pub scale: u8,
    /// The sender's segment size: the floor is two of them.
    pub mss: u32,
    /// Window wanted, bytes; `None`: no target (the ACKs pass with the host's window).
    pub target_bytes: Option<u32>,
    /// Household hold: no two-segment floor, only the right edge already advertised.
    pub hold: bool,
}

impl Flow {
    /// The clamp for this flow's receiver, once the handshake and the bulk direction are known;
    /// `None` while nothing may be lowered (released flows, no handshake, unknown direction).
    pub(crate) fn kernel_clamp(&self) -> Option<KernelClamp> {
        if self.released {
            return None;
        }
        let negotiated = self.negotiated?;
        let receiver = self.bulk_sender?.other();
        let target = self.last_target.filter(|_| self.control.is_some());
        Some(KernelClamp {
            receiver,
            scale: negotiated.window_scale[receiver.index()],
            mss: self.sender_mss(),
            target_bytes: target.map(|(bytes, _)| bytes),
            hold: target.is_some_and(|(_, hold)| hold),
        })
    }
}
