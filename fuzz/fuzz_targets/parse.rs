//! Wire parsing (strict and header-only) of arbitrary bytes: never panics, and the two parsers,
//! the header-only cut and the checksum helpers agree (`slipstream_fuzz::wire_checks`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    slipstream_fuzz::wire_checks::check_parse(data);
});
