//! The transport completer fed arbitrary responses while READs, WRITEs and atomics are outstanding:
//! no panic, nothing written outside the result buffers, never more completions than work
//! requests. The invariants live in `roce::transport::fuzzing::completer`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    roce::transport::fuzzing::completer(data);
});
