//! The whole engine: `handle_packet` over structured sequences of TCP segments of a few
//! connections (handshakes, data, ACKs), raw bytes, ticks, learned window scales, snapshots and
//! reloads, with its safety promises checked after every step (`slipstream_fuzz::engine_run`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slipstream_fuzz::engine_run::{run, EngineInput};

fuzz_target!(|input: EngineInput| {
    run(&input);
});
