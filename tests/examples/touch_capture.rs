//! The floor under any analysis that checks every frame's ICRC: reads a capture through the
//! project's reader (`roce::capture`, mapped as `roce analyze` maps it) and adds up every
//! byte of every frame, eight at a time, with nothing else. `tests/bench/analyze_vs_tshark.sh`
//! times it beside `roce analyze` in the same run, as the ceiling of the frame rate.
//!
//! `cargo run --release -p roce-tests --example touch_capture -- FILE`

use std::path::Path;
use std::process::ExitCode;

use roce::capture::CaptureReader;

fn run(path: &Path) -> Result<(u64, u64), String> {
    let mut reader = CaptureReader::open(path).map_err(|e| e.to_string())?;
    let (mut frames, mut sum) = (0u64, 0u64);
    while let Some(frame) = reader.next_frame().map_err(|e| e.to_string())? {
        frames += 1;
        let words = frame.data.chunks_exact(8);
        let tail = words.remainder().iter().map(|&b| u64::from(b)).sum::<u64>();
        sum = words.fold(sum.wrapping_add(tail), |s, w| {
            s.wrapping_add(u64::from_le_bytes(w.try_into().unwrap_or_default()))
        });
    }
    Ok((frames, sum))
}

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: touch_capture FILE");
        return ExitCode::FAILURE;
    };
    match run(Path::new(&path)) {
        Ok((frames, sum)) => {
            println!("touch_capture: {frames} frames, sum {sum:#x}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("touch_capture: {e}");
            ExitCode::FAILURE
        }
    }
}
