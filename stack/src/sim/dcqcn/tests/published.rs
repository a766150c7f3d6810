//! The published behaviour of DCQCN (SIGCOMM 2015; CoNEXT 2016 fluid model), reproduced with
//! the paper's parameters (docs/congestion.md, "DCQCN") in the packet-level simulation.
//!
//! The fluid model describes mean rates. A packet-level run adds the noise of random marking:
//! each flow hears ~2 CNPs per ms, and since a lone CNP only dents R_C (R_T keeps the rate
//! before the cut and fast recovery returns to it), a flow's level moves in rare large steps.
//! Single runs wander around the fair share by ~7 % rms over 10 ms and ~5 % over 50 ms (two
//! flows at 40 Gb/s), with excursions past 2 Gb/s, while the mean over runs follows the fluid
//! model. So the convergence claims are checked on the mean over 16 seeded runs, and
//! per-run only what holds run by run: utilisation, fairness over 100 ms, queue and stability.

use crate::sim::dcqcn::*;

fn ms(n: u64) -> Time {
    Time::from_millis(n)
}

/// Flows at 0 and 10 ms, a third at 100 ms, 40 Gb/s: the joining-flow experiment.
#[test]
fn two_flows_share_then_a_third_joins() {
    const SEEDS: u64 = 16;
    let mut two = [0.0; 2];
    let mut three = [0.0; 3];
    for seed in 1..=SEEDS {
        let mut cfg = SimConfig::paper(3, 40);
        cfg.seed = seed;
        cfg.duration = ms(200);
        cfg.flow_starts = vec![ms(0), ms(10), ms(100)];
        let r = run(&cfg).unwrap();
        // The second half of each 100 ms phase.
        let phase2: Vec<f64> = (0..2)
            .map(|f| r.mean_throughput(f, ms(50), ms(100)))
            .collect();
        let phase3: Vec<f64> = (0..3)
            .map(|f| r.mean_throughput(f, ms(150), ms(200)))
            .collect();
        for (sum, x) in two.iter_mut().zip(&phase2) {
            *sum += x / SEEDS as f64;
        }
        for (sum, x) in three.iter_mut().zip(&phase3) {
            *sum += x / SEEDS as f64;
        }
        assert!(
            phase2.iter().sum::<f64>() >= 0.95 * 40e9,
            "seed {seed}: {phase2:?}"
        );
        assert!(
            phase3.iter().sum::<f64>() >= 0.95 * 40e9,
            "seed {seed}: {phase3:?}"
        );
        assert!(
            r.flows.iter().all(|f| f.cnps > 0),
            "seed {seed}: every flow was throttled"
        );
    }
    for x in two {
        assert!((x - 20e9).abs() <= 1e9, "two flows: {two:?}");
    }
    for x in three {
        assert!((x - 40e9 / 3.0).abs() <= 1e9, "three flows: {three:?}");
    }
}

/// Ten flows from time 0; the summary covers all but the first 50 ms.
fn ten_flows(link_gbps: u64, delay_us: u64, duration_ms: u64) -> (SimConfig, SimReport) {
    let mut cfg = SimConfig::paper(10, link_gbps);
    cfg.duration = ms(duration_ms);
    cfg.window = ms(duration_ms - 50);
    cfg.feedback_delay = Time::from_micros(delay_us);
    let r = run(&cfg).unwrap();
    (cfg, r)
}

fn assert_fair_full_and_queued(cfg: &SimConfig, r: &SimReport) {
    assert!(r.summary.jain >= 0.99, "Jain {}", r.summary.jain);
    assert!(
        r.summary.utilisation >= 0.95,
        "utilisation {}",
        r.summary.utilisation
    );
    let (kmin, kmax) = (cfg.marker.kmin_bytes(), cfg.marker.kmax_bytes());
    assert!(
        r.summary.queue_mean_bytes > kmin as f64 && r.summary.queue_mean_bytes < kmax as f64,
        "queue {}",
        r.summary.queue_mean_bytes
    );
}

#[test]
fn ten_flows_at_100g_settle_at_the_fluid_fixed_point() {
    let (cfg, r) = ten_flows(100, 4, 150);
    assert_fair_full_and_queued(&cfg, &r);
    let Control::Dcqcn(params) = cfg.control else {
        unreachable!()
    };
    let fp = crate::cc::fluid::fixed_point(
        &params,
        &cfg.marker,
        cfg.link_bps as f64,
        10,
        cfg.wire_bytes(),
        cfg.cnp_interval,
    )
    .unwrap();
    let error = (r.summary.queue_mean_bytes - fp.queue_bytes).abs() / fp.queue_bytes;
    assert!(
        error <= 0.25,
        "queue {} vs fixed point {}",
        r.summary.queue_mean_bytes,
        fp.queue_bytes
    );
    // Settled: the summed rate holds within a few percent of capacity. Single flows still
    // swing by their own cuts (~10 %), which cancel in the sum.
    let cv = r.aggregate_rate_cv(ms(130), ms(150));
    assert!(cv < 0.05, "aggregate rate CV {cv}");
}

#[test]
fn a_long_feedback_delay_makes_the_loop_oscillate() {
    // The stability check above can fail: with a 300 us loop the flows cut and recover
    // together and the summed rate swings by a sixth of capacity.
    let (_, r) = ten_flows(100, 300, 80);
    let cv = r.aggregate_rate_cv(ms(60), ms(80));
    assert!(cv > 0.1, "aggregate rate CV {cv}");
    assert!(
        r.summary.utilisation < 0.95,
        "utilisation {}",
        r.summary.utilisation
    );
}

/// At the paper's 40 Gb/s the fluid fixed point (135 KB) lies 2/3 up the RED slope; the
/// packet-level queue's random excursions reach Kmax, where every flow is cut at once, and the
/// loop falls into a 1.8 ms sawtooth between an empty queue and Kmax (the fluid model itself
/// is stable there). Fairness, utilisation and the queue range still hold.
#[test]
fn ten_flows_at_40g_are_fair_and_keep_the_link_full() {
    let (cfg, r) = ten_flows(40, 4, 150);
    assert_fair_full_and_queued(&cfg, &r);
}
