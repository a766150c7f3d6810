//! Writes a large capture for tests/bench/analyze_vs_tshark.sh: the frames of the real
//! captures repeated in rounds (see `roce_tests::bench`) until there are FRAMES of them.
//!
//! `cargo run --release -p roce-tests --example bench_capture -- OUT.pcap FRAMES [DIR]`

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use roce::io::pcap;

fn run(out: &Path, frames: usize, dir: &Path) -> Result<(), String> {
    let mut writer = pcap::create(out).map_err(|e| e.to_string())?;
    for item in roce_tests::bench::rounds(dir)?.take(frames) {
        let (at, frame) = item?;
        writer
            .write_frame(roce::time::Instant::from_nanos(at), &frame)
            .map_err(|e| e.to_string())?;
    }
    writer.flush().map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(out), Some(Ok(frames))) = (args.first(), args.get(1).map(|n| n.parse::<usize>()))
    else {
        eprintln!("usage: bench_capture OUT.pcap FRAMES [DIR (default pcaps/)]");
        return ExitCode::FAILURE;
    };
    let dir = args.get(2).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps"),
        PathBuf::from,
    );
    match run(Path::new(out), frames, &dir) {
        Ok(()) => {
            println!("bench_capture: wrote {frames} frames to {out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_capture: {e}");
            ExitCode::FAILURE
        }
    }
}
