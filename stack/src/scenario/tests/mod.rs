//! The demo's tests: runs with and without faults, determinism, bounded captures; and, in
//! `cnp`, DCQCN end to end judged from a capture.

mod cnp;

use super::*;

/// A few megabytes: enough for every operation and, with faults, every kind of recovery.
fn small(faults: bool) -> DemoConfig {
    let mut c = DemoConfig::default().with_seed(7);
    c.traffic.total_bytes = 4 << 20;
    c.traffic.max_message = 64 << 10;
    c.traffic.atomic_every = 8;
    if !faults {
        c.net.loss = 0.0;
        c.net.reorder = 0.0;
        c.net.bottleneck = None;
        c.traffic.recv_hold = Duration::ZERO;
    }
    c
}

fn run_ok(c: &DemoConfig) -> Report {
    run::<Vec<u8>>(c, None).expect("the run verifies").0
}

#[test]
fn lossless_run_verifies_without_recovery() {
    let r = run_ok(&small(false));
    assert!(r.ops.total_bytes() >= 4 << 20);
    for op in Op::ALL {
        assert!(r.ops.messages(op) > 0, "{op:?} ran");
    }
    assert_eq!(r.retransmitted_packets(), 0);
    assert_eq!(
        r.a.naks_received + r.a.rnr_naks_received,
        r.a.rnr_naks_received
    );
    assert_eq!(r.host_b.ce_received + r.link_a_to_b.dropped, 0);
}

#[test]
fn faulty_run_verifies_and_recovers() {
    let r = run_ok(&small(true));
    assert!(r.ops.total_bytes() >= 4 << 20);
    assert!(r.link_a_to_b.dropped > 0 && r.link_a_to_b.reordered > 0);
    assert!(r.retransmitted_packets() > 0);
    assert!(r.b.seq_naks_sent > 0);
    assert!(
        r.b.rnr_naks_sent > 0,
        "the slow receiver ran out of receives"
    );
    assert!(r.host_b.ce_received > 0, "the bottleneck marked CE");
    assert_eq!(r.host_a.drops.total() + r.host_b.drops.total(), 0);
    assert!(r.host_b.cnps_sent > 0 && r.host_a.cnps_received > 0);
    let dcqcn = r.dcqcn_a.expect("DCQCN is on");
    assert!(
        dcqcn.rate_cuts > 0 && dcqcn.min_rate_bps < 100e9,
        "{dcqcn:?}"
    );
}

#[test]
fn same_seed_same_run_and_capture() {
    let c = small(true);
    let (r1, p1) = run(&c, Some(Vec::new())).unwrap();
    let (r2, p2) = run(&c, Some(Vec::new())).unwrap();
    assert_eq!(r1, r2);
    assert_eq!(p1, p2);
    let other = run_ok(&c.with_seed(8));
    assert_ne!(other.a, r1.a, "another seed, another run");
}

#[test]
fn capture_is_bounded() {
    let mut c = small(true);
    c.capture = CaptureWindow { first: 10, last: 5 };
    let (r, pcap) = run(&c, Some(Vec::new())).unwrap();
    let summary = r.capture.unwrap();
    assert_eq!(summary.written, 15);
    assert_eq!(summary.seen, summary.written + summary.skipped);
    assert_eq!(
        summary.seen,
        r.host_b.frames_sent + r.host_b.frames_received
    );
    assert!(pcap.unwrap().len() < 15 * 5000);
}

#[test]
fn undelivered_data_fails_verification() {
    // Complete A's first work request without running the link: its destination still holds
    // the poison, so verification must refuse it.
    let c = small(false);
    let mut net = Network::<Vec<u8>>::new(&c.net, c.transport, None, Side::B).unwrap();
    let addrs = [net.addr(Side::A), net.addr(Side::B)];
    let (a, b) = net.hosts_mut();
    let mut t = Traffic::new(c.traffic, c.mtu, a.engine_mut(), b.engine_mut(), addrs).unwrap();
    t.pump(Instant::ZERO, a.engine_mut(), b.engine_mut())
        .unwrap();
    let err = t
        .complete_first_unchecked(net.a.engine(), net.b.engine())
        .unwrap_err();
    assert!(
        matches!(
            err,
            TrafficError::Mismatch { .. } | TrafficError::AtomicResult { .. }
        ),
        "{err}"
    );
}
