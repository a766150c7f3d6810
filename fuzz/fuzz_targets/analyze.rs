//! Any file through `roce analyze` as the command runs it (mapped, every frame to the
//! analyser, then both reports), with small limits: after every frame, what the analyser
//! holds stays within them (issue 14: hostile captures must not make it grow without
//! bound), its running count agrees with a fresh one, and nothing panics.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use roce::analysis::{Analyzer, Limits};
use roce::capture::CaptureReader;
use roce_tools::cmd::analyze::{json, text};

/// Frames analysed per input.
const MAX_FRAMES: u64 = 4096;
const LIMITS: Limits = Limits {
    max_flows: 64,
    max_bytes: 1 << 20,
};
/// What one packet may add past the limit: the flows it touches growing to their largest
/// (an opcode and a NAK table, the window of seen PSNs, a latency table, goodput buckets).
const ONE_PACKET: usize = 32 << 10;

fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        std::env::temp_dir().join(format!("roce-fuzz-analyze-{}", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let path = file();
    std::fs::write(path, data).expect("the temporary file is writable");
    let Ok(mut reader) = CaptureReader::open(path) else {
        return;
    };
    let mut analyzer = Analyzer::with_limits(LIMITS);
    while let Ok(Some(frame)) = reader.next_frame() {
        analyzer.frame(&frame);
        let held = analyzer.held_bytes();
        assert!(held <= LIMITS.max_bytes + ONE_PACKET, "{held} bytes held");
        assert!(analyzer.flows() <= LIMITS.max_flows);
        if frame.index % 64 == 0 {
            assert!(analyzer.state_bytes() >= held, "the running count is not behind");
        }
        if frame.index + 1 == MAX_FRAMES {
            break;
        }
    }
    let report = analyzer.report();
    let _ = text::render(Path::new("fuzz.pcap"), &report);
    json::render(&report).expect("the report serialises");
});
