//! The transport responder fed arbitrary packet sequences (raw, or built around the engine's own
//! QPNs, PSNs, keys and addresses): no panic, no write outside a region or without its right, every
//! packet sent a valid response. The invariants live in `roce::transport::fuzzing::responder`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    roce::transport::fuzzing::responder(data);
});
