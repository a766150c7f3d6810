//! Seeds the fuzz corpora (fuzz/corpus/<target>/, never committed) from real captures and
//! from the builder's sample frames:
//! `cargo run -p roce-tests --example fuzz_seeds -- pcaps fuzz/corpus`.
//!
//! decode: each frame; capture: each small capture file whole; roundtrip: each Ethernet frame;
//! icrc: two bytes of flip position, then each RoCE frame's IP packet; cm: each MAD sent to
//! QP1. For the decapsulation, decode and roundtrip also get sample frames in every outer
//! layer the slicer takes off, and capture, mapped and analyze rc_send_only.pcap so wrapped.

use std::path::Path;
use std::process::ExitCode;

use roce::capture::{CaptureReader, Link};
use roce::wire::decap::wrap::{Wrapping, wrap};
use roce::wire::{LinkHeader, Qpn, RocePacket, sample};

/// Frames taken from each capture: the corpora stay small, the fuzzer mutates the rest.
const FRAMES_PER_CAPTURE: u64 = 40;
/// Sample frames put in each wrapping.
const WRAPPED_SAMPLES: usize = 4;
/// Captures up to this size seed `capture`.
const WHOLE_CAPTURE_BYTES: u64 = 8 << 10;

struct Corpus<'a> {
    dir: &'a Path,
    written: usize,
}

impl Corpus<'_> {
    fn put(&mut self, target: &str, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let dir = self.dir.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(name), bytes)?;
        self.written += 1;
        Ok(())
    }

    fn frame(&mut self, name: &str, link: Link, data: &[u8]) -> std::io::Result<()> {
        self.put("decode", name, data)?;
        let parsed = match link {
            Link::Ethernet => {
                self.put("roundtrip", name, data)?;
                RocePacket::parse(data)
            }
            _ => RocePacket::parse_ip(data),
        };
        if let Ok(pkt) = parsed {
            if pkt.bth().dest_qp == Qpn::GSI {
                self.put("cm", name, pkt.payload())?;
            }
            let mut seed = vec![0u8, 0];
            seed.extend_from_slice(pkt.ip_packet());
            self.put("icrc", name, &seed)?;
        }
        Ok(())
    }
}

fn seed(pcaps: &Path, corpus: &mut Corpus<'_>) -> Result<(), String> {
    let mut captures: Vec<_> = std::fs::read_dir(pcaps)
        .map_err(|e| format!("{}: {e}", pcaps.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    captures.sort();
    if captures.is_empty() {
        return Err(format!("no captures in {}", pcaps.display()));
    }
    let io = |e: std::io::Error| e.to_string();
    for path in &captures {
        let stem = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if std::fs::metadata(path).is_ok_and(|m| m.len() <= WHOLE_CAPTURE_BYTES) {
            let bytes = std::fs::read(path).map_err(io)?;
            for target in ["capture", "mapped", "analyze"] {
                corpus.put(target, &stem, &bytes).map_err(io)?;
            }
        }
        let mut reader = CaptureReader::open(path).map_err(|e| e.to_string())?;
        while let Ok(Some(frame)) = reader.next_frame() {
            if frame.index >= FRAMES_PER_CAPTURE {
                break;
            }
            let name = format!("{stem}-{}", frame.index);
            corpus.frame(&name, frame.link, frame.data).map_err(io)?;
        }
    }
    for (i, frame) in sample::frames(1).iter().enumerate() {
        corpus
            .frame(&format!("sample-{i}"), Link::Ethernet, frame)
            .map_err(io)?;
    }
    // The decapsulation: a few sample frames and a small capture in every wrapping.
    let small = pcaps.join("rc_send_only.pcap");
    for how in Wrapping::ALL {
        for (i, frame) in sample::frames(2).iter().take(WRAPPED_SAMPLES).enumerate() {
            let Some(wrapped) = wrap(frame, how, i as u32) else {
                continue;
            };
            let name = format!("wrapped-{}-{i}", how.name());
            corpus.put("decode", &name, &wrapped).map_err(io)?;
            if how.link() == LinkHeader::Ethernet {
                corpus.put("roundtrip", &name, &wrapped).map_err(io)?;
            }
        }
        if small.exists() {
            let bytes = roce_tests::wrap::wrap_capture(&small, how);
            for target in ["capture", "mapped", "analyze"] {
                let name = format!("rc_send_only-{}", how.name());
                corpus.put(target, &name, &bytes).map_err(io)?;
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [pcaps, dir] = args.as_slice() else {
        eprintln!("usage: fuzz_seeds PCAPS_DIR CORPUS_DIR");
        return ExitCode::FAILURE;
    };
    let mut corpus = Corpus {
        dir: Path::new(dir),
        written: 0,
    };
    match seed(Path::new(pcaps), &mut corpus) {
        Ok(()) => {
            println!("fuzz_seeds: {} seeds in {dir}", corpus.written);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fuzz_seeds: {e}");
            ExitCode::FAILURE
        }
    }
}
