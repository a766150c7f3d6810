//! Simulator speed: the target is >= 10 million packet events per second on one core,
//! so 100 ms of 10 flows at 100 Gb/s runs well under a second. Criterion reports elements/s,
//! one element per event (packet sends, link departures, CC timers, CNPs, samples).
//!
//! `cargo bench -p roce --bench dcqcn`
//!
//! Times are the benchmark thread's CPU time, not wall time: the target is per core, and on a
//! shared machine wall time counts the time other processes hold the core.

use std::hint::black_box;
use std::time::Duration;

use cpu_time::ThreadTime;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roce::cc::Time;
use roce::sim::dcqcn::{SimConfig, run};

/// CPU time of `iters` runs of `cfg`.
fn cpu_time(cfg: &SimConfig, iters: u64) -> Duration {
    let start = ThreadTime::now();
    for _ in 0..iters {
        black_box(run(black_box(cfg)).expect("valid config"));
    }
    start.elapsed()
}

fn ten_flows_100g_100ms(c: &mut Criterion) {
    let cfg = SimConfig::paper(10, 100);
    let events = run(&cfg).expect("valid config").summary.events;
    let mut group = c.benchmark_group("dcqcn");
    group.sample_size(10);
    group.throughput(Throughput::Elements(events));
    group.bench_function("10 flows, 100 Gb/s, 100 ms", |b| {
        b.iter_custom(|iters| cpu_time(&cfg, iters))
    });
    group.finish();
}

fn two_flows_40g_10ms(c: &mut Criterion) {
    let mut cfg = SimConfig::paper(2, 40);
    cfg.duration = Time::from_millis(10);
    cfg.window = Time::from_millis(1);
    let events = run(&cfg).expect("valid config").summary.events;
    let mut group = c.benchmark_group("dcqcn");
    group.throughput(Throughput::Elements(events));
    group.bench_function("2 flows, 40 Gb/s, 10 ms", |b| {
        b.iter_custom(|iters| cpu_time(&cfg, iters))
    });
    group.finish();
}

criterion_group!(benches, ten_flows_100g_100ms, two_flows_40g_10ms);
criterion_main!(benches);
