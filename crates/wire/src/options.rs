//! TCP options walker.
//!
//! This module exists because etherparse's TCP options iterator stops with an
//! error at option kinds it does not know (e.g. TCP Fast Open, kind 34, or
//! MPTCP, kind 30), which would hide a timestamps option placed after them.
//! Here options are walked as plain kind/length TLVs (RFC 9293 section 3.1):
//! kind 0 ends the list, kind 1 is a one-byte NOP, every other kind carries a
//! length byte (>= 2, covering kind and length) that must fit in the option
//! space. Any violation makes the whole option list unreadable and yields
//! [`ParseError::BadOptions`].
//!
//! Options of a known kind but with a length that does not match their
//! definition are skipped (left unset), as Linux' `tcp_parse_options` does.
//! Repeated options: the last occurrence wins. Values are reported as they
//! appear on the wire regardless of the SYN flag; the engine decides which
//! ones are meaningful for a given segment.

use crate::parse::ParseError;

/// End of option list.
const KIND_EOL: u8 = 0;
/// No-operation (padding).
const KIND_NOP: u8 = 1;
/// Maximum segment size, length 4.
const KIND_MSS: u8 = 2;
/// Window scale, length 3.
const KIND_WS: u8 = 3;
/// SACK permitted, length 2.
const KIND_SACK_PERMITTED: u8 = 4;
/// SACK blocks, length 2 + 8 * n.
const KIND_SACK: u8 = 5;
/// Timestamps, length 10.
const KIND_TIMESTAMPS: u8 = 8;

/// Up to 4 SACK blocks (left, right) as they appear on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlocks {
    /// Number of valid entries at the start of `blocks` (0..=4).
    pub count: u8,
    /// (left edge, right edge) pairs; entries at `count..` are zero.
    pub blocks: [(u32, u32); 4],
}

impl SackBlocks {
    /// The valid blocks as a slice.
    pub fn as_slice(&self) -> &[(u32, u32)] {
        let n = usize::from(self.count).min(self.blocks.len());
        &self.blocks[..n]
    }
}

/// The TCP options the engine cares about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2).
    pub mss: Option<u16>,
    /// Window scale shift count as on the wire (kind 3). Not capped here; the
    /// engine caps it at 14 (RFC 7323 section 2.3).
    pub window_scale: Option<u8>,
    /// SACK permitted (kind 4).
    pub sack_permitted: bool,
    /// Timestamps (TSval, TSecr) (kind 8).
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks (kind 5).
    pub sack: SackBlocks,
}

fn be_u16(b: &[u8]) -> Option<u16> {
    match b {
        [a, b, ..] => Some(u16::from_be_bytes([*a, *b])),
        _ => None,
    }
}

fn be_u32(b: &[u8]) -> Option<u32> {
    match b {
        [a, b, c, d, ..] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// Walk the option bytes of a TCP header (everything after the fixed 20-byte
/// header, up to the data offset) and extract the options the engine uses.
///
/// Errors with [`ParseError::BadOptions`] if an option other than EOL/NOP has
/// no length byte, a length below 2, or a length running past `options`.
pub fn parse_options(options: &[u8]) -> Result<TcpOptions, ParseError> {
    let mut out = TcpOptions::default();
    let mut rest = options;
    loop {
        let (kind, after_kind) = match rest {
            [] => break,
            [kind, after @ ..] => (*kind, after),
        };
        match kind {
            KIND_EOL => break,
            KIND_NOP => {
                rest = after_kind;
                continue;
            }
            _ => {}
        }
        let len = match after_kind.first() {
            Some(&len) => usize::from(len),
            None => return Err(ParseError::BadOptions),
        };
        if len < 2 || len > rest.len() {
            return Err(ParseError::BadOptions);
        }
        let (option, remaining) = rest.split_at(len);
        // Option data after kind and length; `len >= 2` so this cannot fail.
        let data = option.get(2..).unwrap_or_default();
        match (kind, len) {
            (KIND_MSS, 4) => out.mss = be_u16(data),
            (KIND_WS, 3) => out.window_scale = data.first().copied(),
            (KIND_SACK_PERMITTED, 2) => out.sack_permitted = true,
            (KIND_TIMESTAMPS, 10) => {
                if let (Some(tsval), Some(tsecr)) = (be_u32(data), data.get(4..).and_then(be_u32)) {
                    out.timestamps = Some((tsval, tsecr));
                }
            }
            (KIND_SACK, _) if data.len() % 8 == 0 && (1..=4).contains(&(data.len() / 8)) => {
                let mut sack = SackBlocks::default();
                for (slot, chunk) in sack.blocks.iter_mut().zip(data.chunks_exact(8)) {
                    if let (Some(left), Some(right)) = (be_u32(chunk), chunk.get(4..).and_then(be_u32)) {
                        *slot = (left, right);
                        sack.count += 1;
                    }
                }
                out.sack = sack;
            }
            // Unknown kinds (TFO, MPTCP, MD5, ...) and known kinds with a
            // length that does not match their definition are skipped.
            _ => {}
        }
        rest = remaining;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TS: [u8; 10] = [8, 10, 0, 0, 0, 1, 0, 0, 0, 2];

    #[test]
    fn linux_syn_order() {
        // MSS 1460, SACKOK, TS(0x11223344, 0), NOP, WS 7.
        let opts = [
            2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 1, 3, 3, 7,
        ];
        let o = parse_options(&opts).unwrap();
        assert_eq!(o.mss, Some(1460));
        assert!(o.sack_permitted);
        assert_eq!(o.timestamps, Some((0x1122_3344, 0)));
        assert_eq!(o.window_scale, Some(7));
        assert_eq!(o.sack.count, 0);
    }

    #[test]
    fn unknown_kinds_before_timestamps_are_skipped() {
        let mut opts = vec![34, 10, 1, 2, 3, 4, 5, 6, 7, 8]; // TFO cookie
        opts.extend_from_slice(&[30, 4, 0x10, 0x00]); // MPTCP
        opts.extend_from_slice(&[1, 1]);
        opts.extend_from_slice(&TS);
        let o = parse_options(&opts).unwrap();
        assert_eq!(o.timestamps, Some((1, 2)));
        assert_eq!(o.mss, None);
    }

    #[test]
    fn length_zero_or_one_is_bad() {
        for len in [0u8, 1] {
            let mut opts = vec![1, 1, 34, len];
            opts.extend_from_slice(&TS);
            assert_eq!(parse_options(&opts), Err(ParseError::BadOptions), "len {len}");
        }
    }

    #[test]
    fn length_past_end_is_bad() {
        assert_eq!(parse_options(&[1, 1, 8, 10, 0, 0]), Err(ParseError::BadOptions));
        // Exactly fitting is fine.
        assert!(parse_options(&[1, 1, 34, 2]).is_ok());
        assert_eq!(parse_options(&[1, 1, 34, 3]), Err(ParseError::BadOptions));
    }

    #[test]
    fn missing_length_byte_is_bad() {
        assert_eq!(parse_options(&[1, 1, 1, 2]), Err(ParseError::BadOptions));
        assert_eq!(parse_options(&[8]), Err(ParseError::BadOptions));
    }

    #[test]
    fn eol_stops_walk() {
        // Garbage after EOL (including an invalid length) is ignored.
        let mut opts = vec![2, 4, 0x05, 0xb4, 0, 8, 1];
        opts.extend_from_slice(&TS);
        let o = parse_options(&opts).unwrap();
        assert_eq!(o.mss, Some(1460));
        assert_eq!(o.timestamps, None);
    }

    #[test]
    fn empty_and_nop_only() {
        assert_eq!(parse_options(&[]), Ok(TcpOptions::default()));
        assert_eq!(parse_options(&[1, 1, 1, 1]), Ok(TcpOptions::default()));
    }

    #[test]
    fn sack_blocks() {
        let mut opts = vec![1, 1, 5, 26];
        for v in [10u32, 20, 30, 40, 50, 60] {
            opts.extend_from_slice(&v.to_be_bytes());
        }
        let o = parse_options(&opts).unwrap();
        assert_eq!(o.sack.count, 3);
        assert_eq!(o.sack.as_slice(), &[(10, 20), (30, 40), (50, 60)]);
        assert_eq!(o.sack.blocks[3], (0, 0));
    }

    #[test]
    fn wrong_length_known_kinds_are_ignored() {
        // MSS with length 3, WS with length 4, TS with length 8, SACK with 2+7.
        let opts = [
            2, 3, 0, 3, 4, 0, 0, 8, 8, 0, 0, 0, 0, 0, 0, 5, 9, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(parse_options(&opts), Ok(TcpOptions::default()));
    }

    #[test]
    fn last_occurrence_wins() {
        let opts = [2, 4, 0, 100, 2, 4, 0, 200];
        assert_eq!(parse_options(&opts).unwrap().mss, Some(200));
    }
}
