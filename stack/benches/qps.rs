//! Many queue pairs (issue 15): how fast an engine sets RC queue pairs up, what each one
//! costs in memory, and what 10,000 idle ones cost each step of the event loop.
//!
//! `cargo bench -p roce --bench qps`
//!
//! - setup: 1,000 connections between two engines in one thread (each side: `create_qp` and
//!   `modify_qp` through INIT, RTR and RTS), CPU time, as QPs per second on one core;
//! - idle step: one `poll_transmit` and one `poll_timeout` with 1 and with 10,000 queue
//!   pairs connected and idle: the schedule (`transport/sched.rs`) keeps idle ones out of
//!   both, so the two should match;
//! - memory: the process's resident memory before and after 2 x 10,000 queue pairs are set
//!   up (both engines), divided by 20,000: what a queue pair costs the process, allocator
//!   overhead included, before any work request is posted.

mod common;

use common::{CpuTime, median_ns};
use criterion::{BatchSize, Criterion, Throughput, criterion_group};
use roce::time::Instant;
use roce::transport::engine_pair::{ConnectOptions, LinkConfig, Pair};
use roce::transport::{MAX_PACKET_LEN, QpInit, QpType, TransportConfig};

const SETUP_BATCH: u64 = 1_000;
const MANY: usize = 10_000;

fn pair() -> Pair {
    Pair::new(TransportConfig::default(), LinkConfig::default(), 3).expect("a valid link")
}

/// `n` RC connections on shared CQs, brought up and given their first (empty) turn.
fn connected(n: usize) -> Pair {
    let mut p = pair();
    connect(&mut p, n);
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    while p.a.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
    while p.b.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
    p
}

fn connect(p: &mut Pair, n: usize) {
    let cq_a = p.a.create_cq(1024);
    let cq_b = p.b.create_cq(1024);
    for _ in 0..n {
        let a = QpInit::new(QpType::Rc, cq_a);
        let b = QpInit::new(QpType::Rc, cq_b);
        p.connect_with(a, b, &ConnectOptions::default());
    }
}

fn qps(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("qps");
    group.throughput(Throughput::Elements(SETUP_BATCH * 2));
    group.bench_function("setup_1000", |bench| {
        bench.iter_batched(
            pair,
            |mut p| {
                connect(&mut p, SETUP_BATCH as usize);
                p
            },
            BatchSize::PerIteration,
        )
    });
    group.throughput(Throughput::Elements(1));
    for n in [1, MANY] {
        let mut p = connected(n);
        let mut buf = vec![0u8; MAX_PACKET_LEN];
        group.bench_function(format!("idle_step_{n}"), |bench| {
            bench.iter(|| {
                let sent = p.a.poll_transmit(Instant::ZERO, &mut buf);
                (sent, p.a.poll_timeout())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::cpu_criterion(3);
    targets = qps
}

/// Resident memory of this process in bytes (Linux `/proc/self/statm`), if it can be read.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn main() {
    // Memory first, before the benchmarks leave freed memory for the allocator to reuse.
    let before = resident_bytes();
    let p = connected(MANY);
    let after = resident_bytes();
    drop(p);
    benches();
    let dir = common::final_summary();
    println!("\nQueue pairs, two engines in one thread, CPU time (median):");
    if let Some(ns) = median_ns(&dir, "qps/setup_1000") {
        let per_s = (SETUP_BATCH * 2) as f64 / (ns / 1e9);
        println!("  setup: {per_s:9.0} QPs/s per core (create + INIT, RTR, RTS)");
    }
    let idle = [1, MANY].map(|n| median_ns(&dir, &format!("qps/idle_step_{n}")));
    if let [Some(one), Some(many)] = idle {
        println!(
            "  idle step (poll_transmit + poll_timeout): {one:.0} ns with 1 QP, {many:.0} ns \
             with {MANY} ({:.2}x)",
            many / one
        );
    }
    if let (Some(b), Some(a)) = (before, after) {
        let per = a.saturating_sub(b) as f64 / (2 * MANY) as f64;
        println!(
            "  memory: {per:.0} bytes resident per idle RC QP ({} QPs)",
            2 * MANY
        );
    }
}
