//! The safety rules every rewritten window obeys, as one pure function.
//!
//! Whatever a controller asks for, the forwarded window
//! - is never larger than what the host advertised (Slipstream only ever lowers a window),
//! - never moves the right edge (ACK + window) left of a right edge already advertised in the
//!   flow (no window shrinking, RFC 9293 3.8.6.2.2),
//! - is never below two segments, and rounding to the window-scale unit rounds up, so a clamp
//!   can never produce a zero window; except for a flow *held* by household time-sharing, whose
//!   right edge is kept exactly where it is (its window closes as its data is acknowledged, and
//!   reopens with its turn).

use slipstream_control::time::wrapping_diff;

/// Everything needed to decide the window field of one ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClampRequest {
    /// The window field as the host wrote it.
    pub host_field: u16,
    /// The host's window scale shift (RFC 7323), 0..=14.
    pub scale: u8,
    /// The ACK number of the segment.
    pub ack: u32,
    /// The furthest right edge already advertised to the sender in this flow, if any.
    pub right_edge: Option<u32>,
    /// The window the controller wants, in bytes.
    pub target_bytes: u32,
    /// The sender's MSS in bytes (floor: two of them).
    pub mss: u32,
    /// Hold the right edge: no floor of two segments, only the edge already advertised.
    pub hold: bool,
}

/// Returns the window field to forward; equal to `host_field` when no lowering is allowed.
pub fn clamp_window(req: ClampRequest) -> u16 {
    let scale = u32::from(req.scale.min(14));
    let host_bytes = u64::from(req.host_field) << scale;
    let edge_floor = req
        .right_edge
        .map(|edge| wrapping_diff(edge, req.ack).max(0) as u64)
        .unwrap_or(0);
    let segments = if req.hold { 0 } else { 2 * u64::from(req.mss) };
    let floor = edge_floor.max(segments);
    let wanted = u64::from(req.target_bytes).max(floor);
    if wanted >= host_bytes {
        return req.host_field;
    }
    let unit = 1u64 << scale;
    let field = wanted.div_ceil(unit);
    field.min(u64::from(req.host_field)) as u16
}

/// The right edge a forwarded window field advertises.
pub fn right_edge(ack: u32, field: u16, scale: u8) -> u32 {
    ack.wrapping_add(u32::from(field) << u32::from(scale.min(14)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn req(host_field: u16, scale: u8, target: u32) -> ClampRequest {
        ClampRequest {
            host_field,
            scale,
            ack: 1000,
            right_edge: None,
            target_bytes: target,
            mss: 1448,
            hold: false,
        }
    }

    #[test]
    fn hold_keeps_the_edge_and_may_close_the_window() {
        let held = |ack: u32| ClampRequest {
            ack,
            right_edge: Some(101_000),
            hold: true,
            ..req(60000, 2, 0)
        };
        assert_eq!(clamp_window(held(1000)), 25000, "edge stays at 101000");
        assert_eq!(clamp_window(held(101_000)), 0, "all acknowledged: zero window");
        // Scale rounding up: 1001 bytes left at scale 2 -> 251 units (1004 bytes).
        assert_eq!(clamp_window(held(99_999)), 251);
    }

    #[test]
    fn lowers_to_target_in_scale_units_rounding_up() {
        // 64000 bytes wanted at scale 7 (128-byte units): ceil(64000/128) = 500.
        assert_eq!(clamp_window(req(20000, 7, 64000)), 500);
        // 64001 bytes: ceil -> 501, never below the target.
        assert_eq!(clamp_window(req(20000, 7, 64001)), 501);
    }

    #[test]
    fn never_raises() {
        assert_eq!(clamp_window(req(100, 0, 1_000_000)), 100);
        assert_eq!(
            clamp_window(req(0, 7, 1)),
            0,
            "a zero window from the host stays zero"
        );
    }

    #[test]
    fn floors_at_two_segments() {
        // target 1 byte, scale 7: two MSS = 2896 -> ceil(2896/128) = 23.
        assert_eq!(clamp_window(req(20000, 7, 1)), 23);
        // scale 14 (16 KiB units): the floor rounds up to one unit, never zero.
        assert_eq!(clamp_window(req(100, 14, 1)), 1);
    }

    #[test]
    fn keeps_the_right_edge() {
        // Already advertised up to ack 1000 + 100000; the target would pull it back to 1000 + 10000.
        let r = ClampRequest {
            right_edge: Some(101_000),
            ..req(60000, 2, 10000)
        };
        let field = clamp_window(r);
        assert_eq!(field, 25000, "ceil(100000/4)");
        assert!(wrapping_diff(right_edge(1000, field, 2), 101_000) >= 0);
    }

    #[test]
    fn right_edge_across_sequence_wrap() {
        let r = ClampRequest {
            ack: u32::MAX - 100,
            right_edge: Some(5000),
            ..req(60000, 0, 3000)
        };
        // edge - ack = 5101 bytes must stay open.
        assert_eq!(clamp_window(r), 5101);
    }

    proptest! {
        #[test]
        fn clamp_invariants(
            host_field in any::<u16>(),
            scale in 0u8..=14,
            ack in any::<u32>(),
            edge_ahead in proptest::option::of(0u32..(1 << 30)),
            target in any::<u32>(),
            mss in 1u32..9000,
            hold in any::<bool>(),
        ) {
            let r = ClampRequest {
                host_field, scale, ack,
                right_edge: edge_ahead.map(|d| ack.wrapping_add(d)),
                target_bytes: target, mss, hold,
            };
            let out = clamp_window(r);
            // Never raises the window.
            prop_assert!(out <= host_field);
            // Never shrinks the right edge, unless the host itself advertised less.
            if let Some(edge) = r.right_edge {
                let host_edge = right_edge(ack, host_field, scale);
                if wrapping_diff(host_edge, edge) >= 0 {
                    prop_assert!(wrapping_diff(right_edge(ack, out, scale), edge) >= 0);
                }
            }
            // Never zero unless the host said zero or the flow is held with nothing left open.
            let open_edge = edge_ahead.unwrap_or(0);
            if host_field > 0 && (!hold || open_edge > 0) { prop_assert!(out > 0); }
            // Never below two segments unless the host offered less or the flow is held.
            let host_bytes = u64::from(host_field) << scale;
            let out_bytes = u64::from(out) << scale;
            if !hold {
                prop_assert!(out_bytes >= (2 * u64::from(mss)).min(host_bytes));
            }
        }
    }
}
