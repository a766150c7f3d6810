//! Writes large captures for the analysis benchmarks (tests/bench/analyze_vs_tshark.sh,
//! tests/bench/analyze_hostile.sh):
//! - the frames of the real captures in DIR repeated in rounds (see `roce_tests::bench`)
//!   until there are FRAMES of them;
//! - `--1k`: the same from pcaps/rc_write_64k.pcap alone (1090-byte frames), every round a
//!   connection of its own (destination QPs moved);
//! - `--flows`, `--cnp`, `--cm`, `--fat`: the hostile shapes of `roce_tests::hostile` with N
//!   frames, N CNPs, N REQs, or N flows of five frames.
//!
//! `cargo run --release -p roce-tests --example bench_capture -- [--1k|--flows|--cnp|--cm|--fat] OUT.pcap N [DIR]`

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use roce::io::pcap;
use roce_tests::hostile;

fn write(
    out: &Path,
    frames: impl Iterator<Item = Result<(u64, Vec<u8>), String>>,
) -> Result<u64, String> {
    let mut writer = pcap::create(out).map_err(|e| e.to_string())?;
    let mut n = 0;
    for item in frames {
        let (at, frame) = item?;
        writer
            .write_frame(roce::time::Instant::from_nanos(at), &frame)
            .map_err(|e| e.to_string())?;
        n += 1;
    }
    writer.flush().map_err(|e| e.to_string())?;
    Ok(n)
}

fn run(mode: &str, out: &Path, n: usize, dir: &Path) -> Result<u64, String> {
    let pcaps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps");
    match mode {
        "" => write(out, roce_tests::bench::rounds(dir)?.take(n)),
        "--1k" => {
            let source = [pcaps.join("rc_write_64k.pcap")];
            write(out, roce_tests::bench::rounds_of(&source, true)?.take(n))
        }
        "--flows" => write(out, hostile::one_packet_flows(n).map(Ok)),
        "--cnp" => write(out, hostile::cnp_flood(n).map(Ok)),
        "--cm" => write(out, hostile::cm_flood(n).map(Ok)),
        "--fat" => write(out, hostile::fat_flows(n).map(Ok)),
        other => Err(format!("unknown mode {other}")),
    }
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mode = if args.first().is_some_and(|a| a.starts_with("--")) {
        args.remove(0)
    } else {
        String::new()
    };
    let (Some(out), Some(Ok(n))) = (args.first(), args.get(1).map(|n| n.parse::<usize>())) else {
        eprintln!(
            "usage: bench_capture [--1k|--flows|--cnp|--cm|--fat] OUT.pcap N [DIR (default pcaps/)]"
        );
        return ExitCode::FAILURE;
    };
    let dir = args.get(2).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps"),
        PathBuf::from,
    );
    match run(&mode, Path::new(out), n, &dir) {
        Ok(frames) => {
            println!("bench_capture: wrote {frames} frames to {out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_capture: {e}");
            ExitCode::FAILURE
        }
    }
}
