//! Many queue pairs on one engine: 10,000 RC connections set up, idle ones cost nothing
//! (no deadline, no turn to send), busy ones are the only ones looked at, and what a queue
//! pair holds has a fixed part of bounded size.

use core::mem::size_of;

use super::*;
use crate::transport::qp::QueuePair;
use crate::transport::{QpInit, QpType, WcStatus};

const QPS: usize = 10_000;

#[test]
fn ten_thousand_idle_queue_pairs_cost_nothing_per_step() {
    let mut s = Setup::rc();
    let cq_a = s.pair.a.create_cq(1 << 16);
    let cq_b = s.pair.b.create_cq(1 << 16);
    let conns: Vec<Connection> = (0..QPS)
        .map(|_| {
            let a = QpInit::new(QpType::Rc, cq_a);
            let b = QpInit::new(QpType::Rc, cq_b);
            s.pair.connect_with(a, b, &ConnectOptions::default())
        })
        .collect();
    // Bringing them up gave each a turn; one pass finds nothing to send.
    s.pair.run_until(later(&s.pair, 1), |_| false);
    assert_eq!(s.pair.a.scheduled(), (0, 0));
    assert_eq!(s.pair.b.scheduled(), (0, 0));
    assert_eq!(s.pair.a.poll_timeout(), None);

    // 100 of them busy: at most those have a timer or a turn, at every step.
    let busy: Vec<&Connection> = conns.iter().step_by(QPS / 100).collect();
    for (i, conn) in busy.iter().enumerate() {
        let op = SendOp::Write {
            remote_addr: DST_VA + i as u64 * 64,
            rkey: s.dst_b,
        };
        let wr = SendWr::new(i as u64, op, vec![s.src_a(i as u64 * 64, 64)]);
        s.pair.a.post_send(conn.qp_a, wr).unwrap();
    }
    let mut done = Vec::new();
    let mut most = (0, 0);
    s.pair.run_until(later(&s.pair, 2), |p| {
        let (t, r) = p.a.scheduled();
        most = (most.0.max(t), most.1.max(r));
        done.extend(std::iter::from_fn(|| p.a.poll_completion(cq_a)));
        done.len() == busy.len()
    });
    assert_eq!(done.len(), busy.len());
    assert!(done.iter().all(|w| w.status == WcStatus::Success));
    assert!(most.0 <= busy.len() && most.1 <= busy.len(), "{most:?}");
    for (i, _) in busy.iter().enumerate() {
        let at = i * 64;
        assert_eq!(
            s.b_bytes(s.dst_b)[at..at + 64],
            s.a_bytes(s.src_a)[at..at + 64]
        );
    }
}

#[test]
fn the_fixed_part_of_a_queue_pair_is_small() {
    // Everything else a queue pair holds grows with what is posted or what the peer has
    // outstanding, each bounded (see `QpUsage`): send and receive work requests by
    // max_send_wr and max_recv_wr, responses by 2 max_dest_rd_atomic + 1, remembered
    // READs and atomics by max(atomic_results, max_dest_rd_atomic).
    let fixed = size_of::<QueuePair>();
    eprintln!("QueuePair: {fixed} bytes");
    assert!(fixed <= 1024, "a queue pair's fixed part is {fixed} bytes");
}
