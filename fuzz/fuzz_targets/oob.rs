//! The out-of-band exchanges' parsers (ibv_*_pingpong's address, perftest's version, system
//! data, MTU, keys and results) on any bytes: no panic, and what parses re-emits to bytes
//! that parse to the same value. The body lives in `roce::endpoint::fuzzing::oob`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    roce::endpoint::fuzzing::oob(data);
});
