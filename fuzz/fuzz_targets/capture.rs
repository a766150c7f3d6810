//! Any file, as a capture: the pcap/pcapng reader and then `roce decode`'s JSON and annotated
//! output for every frame it yields. No panic; frames come numbered in order; damage is
//! reported once and ends the capture.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use roce::capture::CaptureReader;
use roce_tools::cmd::decode::describe;

/// Frames read per input: enough to reach past a few records.
const MAX_FRAMES: u64 = 32;

/// Pause quanta read at `roce decode`'s default link speed.
const LINK: u64 = roce::analysis::pfc::DEFAULT_LINK_GBPS * 1_000_000_000;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = CaptureReader::new(Cursor::new(data.to_vec())) else {
        return;
    };
    let mut frames = 0;
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                assert_eq!(frame.index, frames, "frames are numbered in order");
                assert!(frame.data.len() <= data.len());
                let _ = (describe(&frame, true, LINK), describe(&frame, false, LINK));
                frames += 1;
                if frames == MAX_FRAMES {
                    break;
                }
            }
            Ok(None) => break,
            Err(_) => {
                assert!(
                    matches!(reader.next_frame(), Ok(None)),
                    "damage is reported once, then the end"
                );
                break;
            }
        }
    }
});
