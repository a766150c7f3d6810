//! Writes the builder's sample frames (every RC, UC and UD opcode and the CNP, IPv4 and IPv6,
//! with and without an 802.1Q tag, every pad count; the same opcodes as RoCEv1; PAUSE and PFC
//! frames) to a pcap file, for cross-checks with other decoders:
//! `cargo run -p roce-tests --example sample_pcap -- OUT.pcap [SEED]`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: sample_pcap OUT.pcap [SEED]");
        return ExitCode::FAILURE;
    };
    let seed = match args.next().map(|s| s.parse::<u64>()) {
        None => 1,
        Some(Ok(seed)) => seed,
        Some(Err(e)) => {
            eprintln!("sample_pcap: bad seed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut frames = roce::wire::sample::frames(seed);
    frames.extend(roce::wire::sample::roce_v1_frames(seed));
    frames.extend(roce::wire::sample::mac_control_frames());
    match std::fs::write(&path, roce_tests::pcap_bytes(&frames)) {
        Ok(()) => {
            println!("sample_pcap: wrote {} frames to {path}", frames.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sample_pcap: cannot write {path}: {e}");
            ExitCode::FAILURE
        }
    }
}
