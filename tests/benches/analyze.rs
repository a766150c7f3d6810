//! Replay-analysis throughput in frames per second on one core (issue 7: >= 5 M frames/s),
//! over frames of the real captures in pcaps/ repeated in rounds (`roce_tests::bench`):
//! - `frames`: the analyser alone (slicing, ICRC check, flow state) over frames in memory;
//! - `file`: what `roce analyze` does, reading the same frames from a pcap file in target/.
//!
//! `cargo bench -p roce-tests --bench analyze` (criterion's `thrpt` is M frames/s)
//! tests/bench/analyze_vs_tshark.sh runs the whole command on a million frames beside tshark.
//!
//! Times are the benchmark thread's CPU time (user and system), not wall time: the target is
//! per core, and on a shared machine wall time counts the time other processes hold the core.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cpu_time::ThreadTime;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roce::analysis::Analyzer;
use roce::capture::{CaptureReader, Frame, Link};

const FRAMES: usize = 200_000;

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

fn frames() -> Vec<(u64, Vec<u8>)> {
    let pcaps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps");
    roce_tests::bench::rounds(&pcaps)
        .expect("pcaps/ has RoCEv2 captures")
        .take(FRAMES)
        .collect::<Result<_, _>>()
        .expect("frames rebuild")
}

fn analyse_in_memory(frames: &[(u64, Vec<u8>)]) -> u64 {
    let mut a = Analyzer::new();
    for (i, (ts, data)) in frames.iter().enumerate() {
        a.frame(&Frame::whole(i as u64, *ts, Link::Ethernet, data));
    }
    a.report().roce_packets
}

fn analyse_file(path: &Path) -> u64 {
    let mut reader = CaptureReader::open(path).expect("the bench capture");
    let mut a = Analyzer::new();
    while let Some(frame) = reader.next_frame().expect("undamaged") {
        a.frame(&frame);
    }
    a.report().roce_packets
}

fn cpu_time(iters: u64, mut f: impl FnMut() -> u64) -> Duration {
    let start = ThreadTime::now();
    for _ in 0..iters {
        black_box(f());
    }
    start.elapsed()
}

fn analysis(c: &mut Criterion) {
    let frames = frames();
    let path = target_dir().join("bench/analyze-200k.pcap");
    std::fs::create_dir_all(path.parent().expect("a directory")).expect("target/bench");
    let mut writer = roce::io::pcap::create(&path).expect("a file in target/");
    for (at, f) in &frames {
        writer
            .write_frame(roce::time::Instant::from_nanos(*at), f)
            .expect("written");
    }
    writer.flush().expect("flushed");
    drop(writer);

    let mut group = c.benchmark_group("analyze");
    group.sample_size(10);
    group.throughput(Throughput::Elements(frames.len() as u64));
    group.bench_function("frames", |b| {
        b.iter_custom(|iters| cpu_time(iters, || analyse_in_memory(&frames)))
    });
    group.bench_function("file", |b| {
        b.iter_custom(|iters| cpu_time(iters, || analyse_file(&path)))
    });
    group.finish();
}

criterion_group!(benches, analysis);
criterion_main!(benches);
