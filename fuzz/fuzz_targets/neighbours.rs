//! ARP and neighbour discovery frames (raw, or built around the host's own addresses) fed to
//! a host, with resolutions started and timers run in between: no panic, and the neighbour
//! cache and the frames waiting stay bounded. The body lives in
//! `roce::endpoint::fuzzing::neighbours`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    roce::endpoint::fuzzing::neighbours(data);
});
