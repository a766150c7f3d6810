//! Any file, as `roce decode`, `analyze`, `ladder` and `view` open it: a regular file, so
//! mapped (the `capture` target reads the same bytes as a stream). Both readers must agree:
//! the same frames (index, time, link, lengths, bytes) in the same order, and the same damage
//! (place and words) where the stream finds it, reported once. No panic.
#![no_main]

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use roce::capture::CaptureReader;

/// Frames compared per input.
const MAX_FRAMES: u64 = 256;

/// The file this process writes each input to (one per process: fuzz jobs run side by side).
fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| std::env::temp_dir().join(format!("roce-fuzz-mapped-{}", std::process::id())))
}

fuzz_target!(|data: &[u8]| {
    let path = file();
    std::fs::write(path, data).expect("the temporary file is writable");
    let mapped = CaptureReader::open(path);
    let streamed = CaptureReader::new(Cursor::new(data.to_vec()));
    let (mut mapped, mut streamed) = match (mapped, streamed) {
        (Ok(m), Ok(s)) => (m, s),
        (Err(_), Err(_)) => return,
        (m, s) => panic!("one reader took the file, the other not: {m:?} / {s:?}"),
    };
    assert_eq!(mapped.format(), streamed.format());
    for _ in 0..MAX_FRAMES {
        match (mapped.next_frame(), streamed.next_frame()) {
            (Ok(Some(m)), Ok(Some(s))) => {
                assert_eq!(
                    (m.index, m.timestamp_ns, m.link, m.orig_len, m.data),
                    (s.index, s.timestamp_ns, s.link, s.orig_len, s.data)
                );
            }
            (Ok(None), Ok(None)) => return,
            (Err(m), Err(s)) => {
                assert_eq!(m.to_string(), s.to_string(), "the same damage");
                assert!(matches!(mapped.next_frame(), Ok(None)), "damage once");
                return;
            }
            (m, s) => panic!(
                "the readers disagree: mapped {:?}, streamed {:?}",
                m.map(|f| f.map(|f| f.index)),
                s.map(|f| f.map(|f| f.index))
            ),
        }
    }
});
