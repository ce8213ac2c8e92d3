//! TCP window rewrite and Internet checksum arithmetic.
//!
//! This module exists because clamping the receive window is the only change
//! Slipstream makes to a packet, and it must keep the TCP checksum valid
//! without re-summing the whole segment on the hot path. The window field is
//! one aligned 16-bit word, so the checksum is updated incrementally with
//! RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, which (unlike RFC 1141's
//! eqn. 2) never turns a correct `+0` checksum into `-0`. A full from-scratch
//! computation over the pseudo-header is provided for tests and debug
//! assertions.

use std::net::IpAddr;

use crate::parse::{parse, TCP_CHECKSUM_OFFSET, TCP_WINDOW_OFFSET};

/// Why a rewrite was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewriteError {
    /// `tcp_offset + 18` is past the end of the buffer (or overflows).
    OutOfBounds,
}

impl std::fmt::Display for RewriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RewriteError::OutOfBounds => f.write_str("tcp window field out of bounds"),
        }
    }
}

impl std::error::Error for RewriteError {}

/// Fold a wide sum of 16-bit words into a 16-bit one's complement sum
/// (end-around carry). A non-zero input never folds to 0.
fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // The loop leaves sum <= 0xffff.
    sum as u16
}

/// RFC 1624 eqn. 3 on one 16-bit word: the new checksum after the field
/// `old_word` (covered by `old_checksum`) is replaced by `new_word`.
pub fn checksum_adjust(old_checksum: u16, old_word: u16, new_word: u16) -> u16 {
    let sum = u64::from(!old_checksum) + u64::from(!old_word) + u64::from(new_word);
    !fold(sum)
}

/// Set the TCP window field at `tcp_offset` to `new_window` and update the
/// TCP checksum incrementally per RFC 1624 eqn. 3, so a valid checksum stays
/// valid (and an invalid one stays invalid by the same amount). Writing the
/// value already present is a no-op. Only bytes `tcp_offset+14..tcp_offset+18`
/// can change.
pub fn rewrite_window(packet: &mut [u8], tcp_offset: usize, new_window: u16) -> Result<(), RewriteError> {
    let start = tcp_offset
        .checked_add(TCP_WINDOW_OFFSET)
        .ok_or(RewriteError::OutOfBounds)?;
    let end = tcp_offset
        .checked_add(TCP_CHECKSUM_OFFSET + 2)
        .ok_or(RewriteError::OutOfBounds)?;
    let Some([w0, w1, c0, c1]) = packet.get_mut(start..end) else {
        return Err(RewriteError::OutOfBounds);
    };
    let old_window = u16::from_be_bytes([*w0, *w1]);
    if old_window == new_window {
        return Ok(());
    }
    let old_checksum = u16::from_be_bytes([*c0, *c1]);
    let new_checksum = checksum_adjust(old_checksum, old_window, new_window);
    [*w0, *w1] = new_window.to_be_bytes();
    [*c0, *c1] = new_checksum.to_be_bytes();
    Ok(())
}

/// Add `data` as big-endian 16-bit words (odd trailing byte padded with a
/// zero byte) to `sum`.
fn add_words(mut sum: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        if let [a, b] = c {
            sum += u64::from(u16::from_be_bytes([*a, *b]));
        }
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(u16::from_be_bytes([*last, 0]));
    }
    sum
}

/// One's complement sum of the TCP pseudo-header and segment of `packet`
/// (with the checksum field as found), or `None` if the packet does not
/// `parse` strictly.
fn tcp_sum(packet: &[u8], zero_checksum_field: bool) -> Option<u16> {
    let info = parse(packet).ok()?;
    let header_len = usize::from(*packet.get(info.tcp_offset + 12)? >> 4) * 4;
    let seg_len = header_len.checked_add(usize::try_from(info.payload_len).ok()?)?;
    let segment = packet.get(info.tcp_offset..info.tcp_offset.checked_add(seg_len)?)?;

    let mut sum = 0u64;
    match (info.src, info.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            sum = add_words(sum, &s.octets());
            sum = add_words(sum, &d.octets());
            sum += 6; // zero byte + protocol
            sum += u64::try_from(seg_len).ok()?;
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            sum = add_words(sum, &s.octets());
            sum = add_words(sum, &d.octets());
            sum = add_words(sum, &u32::try_from(seg_len).ok()?.to_be_bytes());
            sum += 6; // three zero bytes + next header
        }
        _ => return None,
    }
    sum = add_words(sum, segment);
    if zero_checksum_field {
        let field = segment.get(TCP_CHECKSUM_OFFSET..TCP_CHECKSUM_OFFSET + 2)?;
        sum -= u64::from(u16::from_be_bytes([*field.first()?, *field.get(1)?]));
    }
    Some(fold(sum))
}

/// The TCP checksum computed from scratch (checksum field taken as zero) over
/// the pseudo-header and the whole segment, i.e. the value a sender would
/// write. `None` if the packet does not [`parse`] strictly.
///
/// Note: with an IPv6 routing header the pseudo-header should use the final
/// destination; this function uses the header's destination address.
pub fn tcp_checksum(packet: &[u8]) -> Option<u16> {
    tcp_sum(packet, true).map(|s| !s)
}

/// Writes the TCP checksum computed from scratch ([`tcp_checksum`]) into `packet`, whatever its
/// checksum field held before. For a packet the sender's stack left to the device to sum
/// (`CHECKSUM_PARTIAL`: the field holds only the pseudo-header's sum), as a copy taken in the
/// kernel before the device is, which the incremental [`rewrite_window`] would keep wrong.
/// `None` (and `packet` unchanged) if it does not [`parse`] strictly.
pub fn fill_tcp_checksum(packet: &mut [u8]) -> Option<()> {
    let sum = tcp_checksum(packet)?;
    let at = parse(packet).ok()?.tcp_offset.checked_add(TCP_CHECKSUM_OFFSET)?;
    packet.get_mut(at..at + 2)?.copy_from_slice(&sum.to_be_bytes());
    Some(())
}

/// Full verification of the TCP checksum over the pseudo-header (for tests
/// and debug asserts): the one's complement sum over pseudo-header, header
/// (including the checksum field) and payload must be `-0` (0xFFFF). Returns
/// false if the packet does not [`parse`] strictly.
pub fn tcp_checksum_valid(packet: &[u8]) -> bool {
    tcp_sum(packet, false) == Some(0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1141 eqn. 2, `HC' = HC + m + ~m'` in one's complement arithmetic,
    /// kept here only to show where it differs from eqn. 3.
    fn eqn2(hc: u16, m: u16, m_new: u16) -> u16 {
        fold(u64::from(hc) + u64::from(m) + u64::from(!m_new))
    }

    /// RFC 1624 section 4: a field m = 0x5555 changes to m' = 0x3285, the
    /// one's complement sum of all other header octets is 0xCD7A.
    #[test]
    fn rfc1624_section4_example() {
        let other = 0xCD7Au16;
        let m = 0x5555u16;
        let m_new = 0x3285u16;

        // HC = ~(0xCD7A + 0x5555) = ~0x22D0 = 0xDD2F
        let sum_old = fold(u64::from(other) + u64::from(m));
        assert_eq!(sum_old, 0x22D0);
        let hc = !sum_old;
        assert_eq!(hc, 0xDD2F);

        // From scratch: HC' = ~(0xCD7A + 0x3285) = ~0xFFFF = 0x0000
        let scratch = !fold(u64::from(other) + u64::from(m_new));
        assert_eq!(scratch, 0x0000);

        // Eqn. 2 (RFC 1141): 0xDD2F - 0xAAAA - 0x3285 gives -0 = 0xFFFF, wrong.
        assert_eq!(eqn2(hc, m, m_new), 0xFFFF);

        // Eqn. 3: ~(0x22D0 + 0xAAAA + 0x3285) = ~0xFFFF = 0x0000, correct.
        assert_eq!(checksum_adjust(hc, m, m_new), 0x0000);
        assert_eq!(checksum_adjust(hc, m, m_new), scratch);
    }

    /// RFC 1624 erratum 4782 worried that eqn. 3 turns HC = 0 into 0xFFFF
    /// when m' == m; with a correct end-around carry it does not.
    #[test]
    fn unchanged_word_keeps_zero_checksum() {
        assert_eq!(checksum_adjust(0x0000, 0x5555, 0x5555), 0x0000);
        for hc in [0x0000u16, 0x1234, 0xFFFE] {
            for m in [0u16, 1, 0x5555, 0xFFFF] {
                assert_eq!(checksum_adjust(hc, m, m), hc, "hc {hc:#x} m {m:#x}");
            }
        }
        // The one case that normalises: a stored -0 (0xFFFF, which a sender
        // computing ~sum never writes) becomes +0. Both verify equally;
        // rewrite_window skips unchanged words anyway.
        assert_eq!(checksum_adjust(0xFFFF, 0x5555, 0x5555), 0x0000);
    }

    /// Erratum 5864's multiple-carry example: 0x5555 -> 0x5556, HC = 0.
    #[test]
    fn double_carry() {
        // ~(0xFFFF + 0xAAAA + 0x5556) = ~(0x1FFFF -> 0x10000 -> 0x0001) = 0xFFFE
        assert_eq!(checksum_adjust(0x0000, 0x5555, 0x5556), 0xFFFE);
    }

    #[test]
    fn fold_never_yields_zero_for_nonzero() {
        assert_eq!(fold(0), 0);
        assert_eq!(fold(0xFFFF), 0xFFFF);
        assert_eq!(fold(0x1_0000), 0x0001);
        assert_eq!(fold(0x1_FFFE), 0xFFFF);
        assert_eq!(fold(u64::from(u32::MAX)), 0xFFFF);
    }

    #[test]
    fn add_words_odd_length() {
        assert_eq!(add_words(0, &[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(add_words(0, &[]), 0);
    }

    #[test]
    fn rewrite_out_of_bounds() {
        let mut buf = [0u8; 17];
        assert_eq!(rewrite_window(&mut buf, 0, 1), Err(RewriteError::OutOfBounds));
        let mut buf = [0u8; 18];
        assert_eq!(rewrite_window(&mut buf, 1, 1), Err(RewriteError::OutOfBounds));
        assert_eq!(
            rewrite_window(&mut buf, usize::MAX, 1),
            Err(RewriteError::OutOfBounds)
        );
        assert_eq!(
            rewrite_window(&mut buf, usize::MAX - 15, 1),
            Err(RewriteError::OutOfBounds)
        );
        assert_eq!(rewrite_window(&mut buf, 0, 1), Ok(()));
        assert_eq!(&buf[14..18], &[0x00, 0x01, 0xFF, 0xFE]);
    }

    #[test]
    fn rewrite_same_value_is_noop() {
        let mut buf = [0u8; 20];
        buf[14] = 0x12;
        buf[15] = 0x34;
        // checksum 0x0000 must stay 0x0000 (not become 0xFFFF)
        assert_eq!(rewrite_window(&mut buf, 0, 0x1234), Ok(()));
        assert_eq!(&buf[14..18], &[0x12, 0x34, 0, 0]);
    }
}
