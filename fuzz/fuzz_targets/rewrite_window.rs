//! Window clamp and rewrite of an arbitrary packet: after the rewrite the packet still parses to
//! the same fields, only the window and checksum bytes changed, the window never went up and
//! the TCP checksum is exactly as valid as before (full recomputation).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    slipstream_fuzz::wire_checks::check_rewrite(data);
});
