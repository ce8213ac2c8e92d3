//! What a datapath that lowers windows in the kernel (the tc eBPF program) needs of a flow: the
//! receiver's window scale, the sender's MSS and the controller's target. The kernel applies the
//! same safety rules as `window_clamp` to every ACK itself; the engine only says where to aim.

use slipstream_control::AnyController;

use super::{Flow, INITIAL_WINDOW_SEGMENTS};
use crate::flow_key::Side;

/// The clamp a kernel datapath applies to the ACKs `receiver` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelClamp {
    /// The endpoint whose ACKs are lowered (the bulk data's receiver, or a household flow's LAN
    /// host before the bulk direction is known).
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
    /// The window-scale shifts the handshake negotiated, by side index.
    pub(crate) fn window_scales(&self) -> Option<[u8; 2]> {
        self.negotiated.map(|n| n.window_scale)
    }

    /// The clamp for this flow's receiver, once the handshake and the bulk direction are known;
    /// `None` while nothing may be lowered (released flows, no handshake, unknown direction).
    ///
    /// `household`: the flow's rule is under household control. Such a flow's LAN host is held
    /// to an initial window until the bulk direction is known, as `on_ack` does for NFQUEUE.
    pub(crate) fn kernel_clamp(&self, household: bool) -> Option<KernelClamp> {
        if self.released {
            return None;
        }
        let negotiated = self.negotiated?;
        let Some(sender) = self.bulk_sender else {
            let lan = self.lan_side.filter(|_| household)?;
            let mss = self.early_mss(lan);
            return Some(KernelClamp {
                receiver: lan,
                scale: negotiated.window_scale[lan.index()],
                mss,
                target_bytes: Some(INITIAL_WINDOW_SEGMENTS * mss),
                hold: false,
            });
        };
        let receiver = sender.other();
        // A household flow's target is its allocation now (what its next ACK would be given,
        // `HouseholdShare::on_ack`): a round that just gave a held flow its turn, or a flow whose
        // receiver has not ACKed since its direction became known, is written as it stands.
        let (target_bytes, hold) = match self.control.as_ref().map(|c| &c.controller) {
            Some(AnyController::Household(share)) => (share.target(), share.is_held()),
            Some(_) => (self.last_target.map(|(bytes, _)| bytes), false),
            None => (None, false),
        };
        Some(KernelClamp {
            receiver,
            scale: negotiated.window_scale[receiver.index()],
            mss: self.sender_mss(),
            target_bytes,
            hold,
        })
    }
}
