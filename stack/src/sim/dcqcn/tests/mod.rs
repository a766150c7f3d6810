//! Smoke tests of the simulator itself; the published-behaviour tests are in `published.rs`.

mod published;

use super::*;

#[test]
fn jain_index_extremes() {
    assert_eq!(jain_index(&[5.0, 5.0, 5.0]), 1.0);
    assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    assert_eq!(jain_index(&[]), 0.0);
}

#[test]
fn one_flow_alone_fills_the_link_with_no_queue() {
    let mut cfg = SimConfig::paper(1, 40);
    cfg.duration = Time::from_millis(5);
    cfg.window = Time::from_millis(1);
    let r = run(&cfg).unwrap();
    assert_eq!(r.summary.marks, 0);
    assert_eq!(r.summary.queue_peak_bytes, 0);
    assert!(r.summary.utilisation > 0.999, "{}", r.summary.utilisation);
    assert_eq!(r.flows[0].final_rate_bps, 40e9);
}

#[test]
fn without_control_two_flows_grow_the_queue_without_bound() {
    let mut cfg = SimConfig::paper(2, 40);
    cfg.control = Control::None;
    cfg.duration = Time::from_millis(2);
    cfg.window = Time::from_millis(1);
    let r = run(&cfg).unwrap();
    // 2 x 40 Gb/s into 40 Gb/s for 2 ms: 10 MB waiting at the end.
    assert!(
        r.summary.queue_peak_bytes > 9_000_000,
        "{}",
        r.summary.queue_peak_bytes
    );
    assert_eq!(
        r.summary.cnps,
        r.summary.cnps.min(2 * 41),
        "at most one CNP per flow per 50 us"
    );
}

#[test]
fn same_seed_same_run() {
    let mut cfg = SimConfig::paper(3, 40);
    cfg.duration = Time::from_millis(3);
    cfg.window = Time::from_millis(1);
    assert_eq!(run(&cfg).unwrap(), run(&cfg).unwrap());
    let other = SimConfig {
        seed: 2,
        ..cfg.clone()
    };
    assert_ne!(
        run(&cfg).unwrap().summary.marks,
        run(&other).unwrap().summary.marks
    );
}

#[test]
fn bad_configs_are_refused() {
    let mut cfg = SimConfig::paper(2, 40);
    cfg.flow_starts.clear();
    assert!(run(&cfg).is_err());
    let mut cfg = SimConfig::paper(2, 40);
    cfg.window = Time::from_millis(200);
    assert!(run(&cfg).is_err());
    let mut cfg = SimConfig::paper(2, 40);
    cfg.link_bps = 0;
    assert!(run(&cfg).is_err());
    let mut cfg = SimConfig::paper(2, 40);
    cfg.payload_bytes = 0;
    assert!(run(&cfg).is_err());
}
