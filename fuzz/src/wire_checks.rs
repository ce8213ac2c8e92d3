//! The `parse` and `rewrite_window` targets' bodies: wire-crate calls on arbitrary bytes and the
//! properties they must keep. Every violated property panics, which libFuzzer reports as a crash.

use slipstream_engine::window_clamp::{clamp_window, right_edge, ClampRequest};
use slipstream_wire::{
    checksum_adjust, parse, parse_headers, parse_options, rewrite_window, tcp_checksum, tcp_checksum_valid,
    ParseError, TcpPacketInfo, TCP_CHECKSUM_OFFSET, TCP_WINDOW_OFFSET,
};

use crate::packet;

/// TCP header length from the data offset of a parsed packet.
fn tcp_header_len(packet: &[u8], info: &TcpPacketInfo) -> usize {
    usize::from(packet[info.tcp_offset + 12] >> 4) * 4
}

/// `parse` target: both parsers on arbitrary bytes never panic, and agree with each other.
pub fn check_parse(data: &[u8]) {
    let _ = parse_options(data);
    let full = parse(data);
    let headers = parse_headers(data);

    if let Ok(info) = full {
        // A whole packet that parses strictly parses the same way header-only.
        assert_eq!(headers, Ok(info), "parse_headers disagrees with parse");
        let header_len = tcp_header_len(data, &info);
        assert!(header_len >= 20);
        let end = info.tcp_offset + header_len + info.payload_len as usize;
        assert!(
            end <= data.len(),
            "parse accepted a packet shorter than its length fields"
        );
        // The checksum helpers accept what parse accepts, and agree with the recomputation.
        let computed = tcp_checksum(data).expect("tcp_checksum of a parsed packet");
        let valid = tcp_checksum_valid(data);
        assert_eq!(
            Some(valid),
            packet::checksum_valid(data),
            "checksum validity differs"
        );
        let (src, dst, start, end) = packet::segment_bounds(data).expect("bounds");
        assert_eq!(
            computed,
            packet::segment_checksum(src, dst, &data[start..end]),
            "tcp_checksum differs from the independent computation"
        );
    }

    if let Ok(info) = headers {
        let header_len = tcp_header_len(data, &info);
        let cut = info.tcp_offset + header_len;
        assert!(cut <= data.len(), "parse_headers accepted a cut TCP header");
        // The header-only copy the datapath would hand over parses the same.
        assert_eq!(
            parse_headers(&data[..cut]),
            Ok(info),
            "header-only copy parses differently"
        );
        let strict = parse(&data[..cut]);
        if info.payload_len == 0 {
            assert_eq!(
                strict,
                Ok(info),
                "a packet without payload needs no more than its headers"
            );
        } else {
            assert_eq!(strict, Err(ParseError::Truncated), "a cut payload is Truncated");
        }
    } else {
        // What the lax parser refuses, the strict one refuses too.
        assert!(full.is_err());
    }
}

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// One's complement equality (0x0000 and 0xFFFF are both zero).
fn ones_eq(a: u16, b: u16) -> bool {
    a == b || (a == 0 || a == 0xffff) && (b == 0 || b == 0xffff)
}

fn ones_add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// Bytes of the `rewrite_window` target's input before the packet.
pub const REWRITE_HEADER_LEN: usize = 12;

/// `rewrite_window` target. Input layout: `[mode, scale, target u32, edge offset u32, mss u16]`
/// then the packet. Mode bit 0: set the packet's TCP checksum right first; bit 1: hold; bit 2:
/// a right edge (ack + edge offset) is known; bit 3: rewrite arbitrary bytes at offset `scale`
/// to the low 16 bits of `target` instead (bounds and checksum arithmetic only).
pub fn check_rewrite(data: &[u8]) {
    if data.len() < REWRITE_HEADER_LEN {
        return;
    }
    let (head, packet) = data.split_at(REWRITE_HEADER_LEN);
    let mode = head[0];
    let scale = head[1];
    let target_bytes = be_u32(&head[2..6]);
    let edge_offset = be_u32(&head[6..10]);
    let mss = u32::from(be_u16(&head[10..12]));
    let mut packet = packet.to_vec();

    if mode & 8 != 0 {
        raw_rewrite(&mut packet, usize::from(scale), target_bytes as u16);
        return;
    }
    let Ok(info) = parse(&packet) else {
        return;
    };
    if mode & 1 != 0 {
        assert!(packet::fix_checksum(&mut packet));
        assert!(
            tcp_checksum_valid(&packet),
            "wire rejects the independently computed checksum"
        );
    }
    let before = packet.clone();
    let valid_before = packet::checksum_valid(&before).expect("parsed");
    assert_eq!(valid_before, tcp_checksum_valid(&before));
    let exact_before = tcp_checksum(&before) == Some(packet::checksum_field(&before, info.tcp_offset));

    let hold = mode & 2 != 0;
    let edge = (mode & 4 != 0).then(|| info.ack.wrapping_add(edge_offset));
    let req = ClampRequest {
        host_field: info.window,
        scale,
        ack: info.ack,
        right_edge: edge,
        target_bytes,
        mss,
        hold,
    };
    let field = clamp_window(req);
    check_clamp(req, field);

    rewrite_window(&mut packet, info.tcp_offset, field).expect("a parsed packet's window is in bounds");

    // Only the window and checksum bytes changed.
    let window_at = info.tcp_offset + TCP_WINDOW_OFFSET;
    let checksum_end = info.tcp_offset + TCP_CHECKSUM_OFFSET + 2;
    assert_eq!(packet.len(), before.len());
    assert_eq!(
        packet[..window_at],
        before[..window_at],
        "bytes before the window changed"
    );
    assert_eq!(
        packet[checksum_end..],
        before[checksum_end..],
        "bytes after the checksum changed"
    );
    if field == info.window {
        assert_eq!(packet, before, "rewriting the same window changed the packet");
    }

    // It still parses, to the same fields but the window, which never went up.
    let after = parse(&packet).expect("a rewritten packet parses");
    assert!(after.window <= info.window, "the window went up");
    assert_eq!(after.window, field);
    assert_eq!(
        TcpPacketInfo {
            window: info.window,
            ..after
        },
        info
    );
    assert_eq!(parse_headers(&packet), Ok(after));

    // The checksum is as valid as before (full recomputation, two implementations).
    let valid_after = packet::checksum_valid(&packet).expect("parsed");
    assert_eq!(valid_after, valid_before, "checksum validity changed");
    assert_eq!(tcp_checksum_valid(&packet), valid_after);
    if exact_before {
        // A sender's from-scratch checksum stays exactly the from-scratch value (+0, never -0).
        assert_eq!(
            tcp_checksum(&packet),
            Some(packet::checksum_field(&packet, info.tcp_offset)),
            "incremental checksum differs from the recomputed one"
        );
    }
}

/// The window-clamp rules (`slipstream_engine::window_clamp`'s module docs) for one request.
fn check_clamp(req: ClampRequest, field: u16) {
    assert!(field <= req.host_field, "clamp raised the window");
    if field == req.host_field {
        return;
    }
    let scale = u32::from(req.scale.min(14));
    let bytes = u64::from(field) << scale;
    assert!(bytes >= u64::from(req.target_bytes), "clamped below the target");
    if !req.hold {
        assert!(bytes >= 2 * u64::from(req.mss), "clamped below two segments");
        assert!(
            field > 0 || req.mss == 0 && req.target_bytes == 0,
            "clamp closed the window"
        );
    }
    if let Some(edge) = req.right_edge {
        // An edge ahead of the ACK is never taken back (an edge behind it is no constraint).
        if slipstream_control::time::wrapping_diff(edge, req.ack) >= 0 {
            let new_edge = right_edge(req.ack, field, req.scale);
            assert!(
                slipstream_control::time::wrapping_diff(new_edge, edge) >= 0,
                "clamp moved the right edge left"
            );
        }
    }
}

/// `rewrite_window` on arbitrary bytes at an arbitrary offset: in bounds exactly when the four
/// bytes fit, touches only them, and keeps window + checksum constant in one's complement.
fn raw_rewrite(buf: &mut [u8], offset: usize, new_window: u16) {
    let before = buf.to_vec();
    let fits = offset + TCP_CHECKSUM_OFFSET + 2 <= buf.len();
    let result = rewrite_window(buf, offset, new_window);
    assert_eq!(result.is_ok(), fits, "bounds check wrong");
    if !fits {
        assert_eq!(buf, &before[..]);
        return;
    }
    let w = offset + TCP_WINDOW_OFFSET;
    let c = offset + TCP_CHECKSUM_OFFSET;
    assert_eq!(buf[..w], before[..w]);
    assert_eq!(buf[c + 2..], before[c + 2..]);
    let (old_w, old_c) = (be_u16(&before[w..]), be_u16(&before[c..]));
    let (new_w, new_c) = (be_u16(&buf[w..]), be_u16(&buf[c..]));
    assert_eq!(new_w, new_window);
    if old_w == new_window {
        assert_eq!(new_c, old_c);
    } else {
        assert_eq!(new_c, checksum_adjust(old_c, old_w, new_w));
        // HC' + m' == HC + m in one's complement (RFC 1624: the covered sum is unchanged).
        assert!(
            ones_eq(ones_add(new_c, new_w), ones_add(old_c, old_w)),
            "checksum update does not balance the window change"
        );
    }
}
