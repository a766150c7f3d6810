//! Golden tests over the real captures in pcaps/ (rdma_rxe traffic, see pcaps/README.md): every
//! RoCEv2 frame's ICRC verifies, and every frame rebuilt by the builder from its parsed form is
//! byte for byte the captured one, ICRC included. Failures name the file and frame index; a
//! pcaps/ without captures fails.

use std::path::{Path, PathBuf};

use roce::capture::CaptureReader;

fn pcaps_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps")
}

/// What one capture held, and everything wrong with it.
#[derive(Default)]
struct Outcome {
    roce: usize,
    other: usize,
    failures: Vec<String>,
}

fn check(path: &Path) -> Outcome {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut out = Outcome::default();
    let mut reader = match CaptureReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            out.failures.push(format!("{name}: {e}"));
            return out;
        }
    };
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                out.failures.push(format!("{name}: {e}"));
                break;
            }
        };
        let at = format!("{name} frame {}", frame.index);
        let pkt = match frame.roce() {
            Ok(pkt) => pkt,
            Err(e) if e.is_not_roce() => {
                out.other += 1;
                continue;
            }
            Err(e) => {
                out.failures.push(format!("{at}: {e}"));
                continue;
            }
        };
        out.roce += 1;
        if !pkt.icrc_ok() {
            out.failures.push(format!(
                "{at}: ICRC {:#010x}, computed {:#010x}",
                pkt.icrc(),
                pkt.computed_icrc()
            ));
        }
        match pkt.repr().to_vec() {
            Ok(rebuilt) if rebuilt == pkt.packet_bytes() => {}
            Ok(rebuilt) => {
                let first = rebuilt
                    .iter()
                    .zip(pkt.packet_bytes())
                    .position(|(a, b)| a != b)
                    .unwrap_or(rebuilt.len().min(pkt.packet_bytes().len()));
                out.failures.push(format!(
                    "{at}: rebuilt frame differs from byte {first} ({} vs {} bytes)",
                    rebuilt.len(),
                    pkt.packet_bytes().len()
                ));
            }
            Err(e) => out.failures.push(format!("{at}: cannot rebuild: {e}")),
        }
    }
    out
}

#[test]
fn every_capture_verifies_and_rebuilds_byte_for_byte() {
    let captures = roce_tests::captures_in(&pcaps_dir());
    assert!(
        !captures.is_empty(),
        "no .pcap or .pcapng files in {}: the golden tests need the real captures",
        pcaps_dir().display()
    );
    let mut failures = Vec::new();
    let mut total_roce = 0;
    for path in &captures {
        let outcome = check(path);
        println!(
            "{}: {} RoCEv2 frames, {} others, {} failures",
            path.display(),
            outcome.roce,
            outcome.other,
            outcome.failures.len()
        );
        if outcome.roce == 0 && outcome.failures.is_empty() {
            failures.push(format!("{}: no RoCEv2 frame at all", path.display()));
        }
        total_roce += outcome.roce;
        failures.extend(outcome.failures);
    }
    assert!(
        failures.is_empty(),
        "{} of {total_roce} RoCEv2 frames failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
