//! Slipstream's pure packet layer.
//!
//! This crate exists so that everything that touches raw packet bytes lives in
//! one place that does no I/O and reads no clock, and can therefore be tested
//! exhaustively with fixtures and property tests. It:
//!
//! * parses an IP packet as NFQUEUE delivers it (starting at the IP header, no
//!   link layer) into a small, `Copy` [`TcpPacketInfo`] ([`parse`] for whole
//!   packets that may be rewritten, [`parse_headers`] for header-only copies);
//! * walks TCP options itself ([`parse_options`]) so unknown option kinds never
//!   hide the timestamps option;
//! * rewrites the TCP window field with an RFC 1624 incremental checksum
//!   update ([`rewrite_window`], [`checksum_adjust`]) and can verify a TCP
//!   checksum from scratch ([`tcp_checksum_valid`]).
//!
//! No function in this crate panics on any input: malformed, truncated,
//! fragmented or non-TCP input yields a [`ParseError`] and the caller passes
//! the packet through unmodified.

mod checksum;
mod options;
mod parse;
mod udp;
mod utp;

pub use checksum::{
    checksum_adjust, fill_tcp_checksum, rewrite_window, tcp_checksum, tcp_checksum_valid, RewriteError,
};
pub use options::{parse_options, SackBlocks, TcpOptions};
pub use parse::{
    is_complete, parse, parse_headers, IpVersion, ParseError, TcpFlags, TcpPacketInfo, TCP_CHECKSUM_OFFSET,
    TCP_WINDOW_OFFSET,
};
pub use udp::{parse_udp, parse_udp_headers, set_ce, Ecn, MarkError, UdpPacketInfo, UDP_HEADER_LEN};
pub use utp::{lower_utp_window, parse_utp, UtpHeader, UtpRewriteError, UtpType, UTP_HEADER_LEN};
