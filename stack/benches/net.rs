//! `roce sim net` speed (issue 18), on one core, in CPU time (see common/mod.rs):
//! - (b) 2:1 incast at 40 Gb/s, DCQCN and PFC, 1 s simulated: target < 1 s (ns-3: minutes);
//! - a 4x4x16 leaf-spine (64 hosts, 100 Gb/s links), WebSearch at 30 % load, DCQCN, 10 ms
//!   simulated (the 100 ms target run, < 60 s, is tests/bench/sim_net.sh's: criterion would
//!   take ten of them); events per second reported.
//!
//! `cargo bench -p roce --bench net` (add `-- incast` for the first alone).

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{CpuTime, median_ns};
use criterion::{Criterion, Throughput, criterion_group};
use roce::cc::{DcqcnParams, Marker, Time};
use roce::sim::net::{Cdf, Control, NetConfig, Topology, Workload, run};

/// (b): two senders and a receiver on one switch, 40 Gb/s, the DCQCN paper's parameters and
/// marking, PFC with dynamic thresholds, for a simulated second; an ACK every 256 packets, as
/// the DCQCN authors' ns-3 configuration of this run (L2_ACK_INTERVAL 256).
fn incast() -> NetConfig {
    let mut cfg = NetConfig::new(Topology::Incast { senders: 2 }, 40);
    cfg.control = Control::Dcqcn(DcqcnParams::paper(40e9));
    cfg.marker = Marker::paper();
    cfg.ack_every = 256;
    cfg.duration = Time::from_millis(1000);
    cfg.window = Time::from_millis(500);
    cfg.sample_interval = Time::from_millis(1);
    cfg
}

/// A 4x4x16 leaf-spine at 100 Gb/s, WebSearch at 30 % load, DCQCN as the HPCC authors ran
/// it, 10 ms.
fn leaf_spine() -> NetConfig {
    let topology = Topology::LeafSpine {
        leaves: 4,
        spines: 4,
        hosts_per_leaf: 16,
    };
    let mut cfg = NetConfig::new(topology, 100);
    cfg.control = Control::Dcqcn(DcqcnParams::hpcc_ns3(100e9));
    cfg.cnp_interval = Time::from_micros(4);
    cfg.workload = Workload::Poisson {
        cdf: Cdf::websearch(),
        load: 0.3,
        until: None,
    };
    cfg.duration = Time::from_millis(10);
    cfg.sample_interval = Time::from_micros(20);
    cfg
}

fn bench(c: &mut Criterion<CpuTime>, name: &str, cfg: &NetConfig, samples: usize) {
    let events = run(cfg, &mut ()).expect("a valid config").events;
    let mut group = c.benchmark_group("sim_net");
    group.sample_size(samples);
    group.measurement_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(events));
    group.bench_function(name, |b| {
        b.iter(|| black_box(run(black_box(cfg), &mut ()).expect("a valid config")))
    });
    group.finish();
}

fn benches(c: &mut Criterion<CpuTime>) {
    bench(c, "incast_2to1_40g_dcqcn_pfc_1s", &incast(), 10);
    bench(
        c,
        "leafspine_4x4x16_100g_websearch30_10ms",
        &leaf_spine(),
        10,
    );
}

criterion_group! {
    name = group;
    config = common::cpu_criterion(1);
    targets = benches
}

fn main() {
    group();
    let dir = common::final_summary();
    println!("\nroce sim net, one core, CPU time (median of criterion's samples):");
    for (id, cfg, target) in [
        ("incast_2to1_40g_dcqcn_pfc_1s", incast(), 1.0),
        ("leafspine_4x4x16_100g_websearch30_10ms", leaf_spine(), 6.0),
    ] {
        let Some(ns) = median_ns(&dir, &format!("sim_net/{id}")) else {
            continue;
        };
        let events = run(&cfg, &mut ()).expect("a valid config").events;
        let s = ns / 1e9;
        println!(
            "  {id}: {s:.3} s for {:.0} ms simulated (target pro rata < {target} s), {events} events, {:.1} M events/s",
            cfg.duration.as_millis_f64(),
            events as f64 / s / 1e6
        );
    }
}
