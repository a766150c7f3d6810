//! Shared receive queues end to end (IBA 10.2.9, 11.2.3): several queue pairs drawing from
//! one pool, the limit event, an empty pool (RNR), overflow and the verbs' refusals.

use super::*;
use crate::transport::engine_pair::ConnectOptions;
use crate::transport::{
    CqId, Event, ModifyQp, PdId, QpInit, QpState, QpType, SrqId, SrqInit, TransportError, WcStatus,
};

/// `n` more RC connections whose B ends draw from one shared receive queue of `max_wr`.
fn on_srq(s: &mut Setup, n: usize, max_wr: u32) -> (SrqId, CqId, Vec<Connection>) {
    let srq = s
        .pair
        .b
        .create_srq(SrqInit::new(PdId::DEFAULT, max_wr))
        .unwrap();
    let cq_a = s.pair.a.create_cq(1024);
    let cq_b = s.pair.b.create_cq(1024);
    let conns = (0..n)
        .map(|_| {
            let init_a = QpInit::new(QpType::Rc, cq_a);
            let init_b = QpInit {
                srq: Some(srq),
                ..QpInit::new(QpType::Rc, cq_b)
            };
            s.pair
                .connect_with(init_a, init_b, &ConnectOptions::default())
        })
        .collect();
    (srq, cq_b, conns)
}

fn srq_recv(s: &mut Setup, srq: SrqId, wr_id: u64, offset: u64) -> Result<(), TransportError> {
    let wr = RecvWr::new(wr_id, vec![s.dst_b(offset, 256)]);
    s.pair.b.post_srq_recv(srq, wr)
}

fn send_on(s: &mut Setup, conn: &Connection, wr_id: u64, len: u32) {
    let wr = SendWr::new(wr_id, SendOp::Send, vec![s.src_a(0, len)]);
    s.pair.a.post_send(conn.qp_a, wr).unwrap();
}

fn drain_cq(s: &mut Setup, cq: CqId, n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let limit = later(&s.pair, 2);
    s.pair.run_until(limit, |p| {
        out.extend(std::iter::from_fn(|| p.b.poll_completion(cq)));
        out.len() >= n
    });
    out
}

fn events(s: &mut Setup) -> Vec<Event> {
    std::iter::from_fn(|| s.pair.b.poll_event()).collect()
}

#[test]
fn several_queue_pairs_share_one_pool() {
    let mut s = Setup::rc();
    let (srq, cq_b, conns) = on_srq(&mut s, 3, 16);
    for i in 0..6 {
        srq_recv(&mut s, srq, i, i * 256).unwrap();
    }
    for (i, conn) in conns.iter().enumerate() {
        send_on(&mut s, conn, i as u64, 100 + i as u32);
    }
    let wcs = drain_cq(&mut s, cq_b, 3);
    assert_eq!(wcs.len(), 3);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    let mut qps: Vec<_> = wcs.iter().map(|w| w.qp_num.value()).collect();
    qps.sort();
    let mut want: Vec<_> = conns.iter().map(|c| c.qp_b.value()).collect();
    want.sort();
    assert_eq!(
        qps, want,
        "each message completes on the queue pair it came to"
    );
    // The receives were taken in posting order, whichever queue pair took them.
    let mut ids: Vec<_> = wcs.iter().map(|w| w.wr_id).collect();
    ids.sort();
    assert_eq!(ids, [0, 1, 2]);
    assert_eq!(s.pair.b.query_srq(srq).unwrap().posted, 3);
}

#[test]
fn the_limit_event_fires_once_when_the_pool_runs_low() {
    let mut s = Setup::rc();
    let (srq, cq_b, conns) = on_srq(&mut s, 1, 8);
    for i in 0..8 {
        srq_recv(&mut s, srq, i, i * 256).unwrap();
    }
    s.pair.b.modify_srq(srq, None, Some(4)).unwrap();
    for i in 0..4 {
        send_on(&mut s, &conns[0], i, 10);
    }
    drain_cq(&mut s, cq_b, 4);
    assert!(events(&mut s).is_empty(), "4 left: not below the limit");
    send_on(&mut s, &conns[0], 4, 10);
    drain_cq(&mut s, cq_b, 1);
    assert_eq!(events(&mut s), [Event::SrqLimitReached { srq }]);
    assert_eq!(s.pair.b.query_srq(srq).unwrap().limit, 0, "disarmed");
    send_on(&mut s, &conns[0], 5, 10);
    drain_cq(&mut s, cq_b, 1);
    assert!(events(&mut s).is_empty(), "once per arming");
}

#[test]
fn an_empty_pool_is_an_rnr_nak_until_a_receive_is_posted() {
    let mut s = Setup::rc();
    let (srq, cq_b, conns) = on_srq(&mut s, 1, 4);
    send_on(&mut s, &conns[0], 1, 10);
    let limit = later(&s.pair, 0) + core::time::Duration::from_millis(5);
    s.pair.run_until(limit, |_| false);
    assert!(s.pair.b.stats().rnr_naks_sent > 0);
    srq_recv(&mut s, srq, 9, 0).unwrap();
    let wcs = drain_cq(&mut s, cq_b, 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (9, WcStatus::Success));
}

#[test]
fn overflow_and_bad_attributes_are_refused() {
    let mut s = Setup::rc();
    let (srq, _, conns) = on_srq(&mut s, 1, 2);
    srq_recv(&mut s, srq, 1, 0).unwrap();
    srq_recv(&mut s, srq, 2, 256).unwrap();
    assert!(matches!(
        srq_recv(&mut s, srq, 3, 512),
        Err(TransportError::SrqFull { .. })
    ));
    assert_eq!(s.pair.b.query_srq(srq).unwrap().posted, 2, "nothing posted");
    let two_sges = RecvWr::new(4, vec![s.dst_b(0, 8), s.dst_b(8, 8)]);
    assert!(s.pair.b.post_srq_recv(srq, two_sges).is_err(), "max_sge 1");
    assert!(
        s.pair.b.modify_srq(srq, Some(1), None).is_err(),
        "below what is posted"
    );
    assert!(
        s.pair.b.modify_srq(srq, None, Some(3)).is_err(),
        "limit above max_wr"
    );
    assert!(s.pair.b.modify_srq(srq, Some(4), Some(3)).is_ok());
    let own = RecvWr::new(5, vec![s.dst_b(0, 8)]);
    assert!(matches!(
        s.pair.b.post_recv(conns[0].qp_b, own),
        Err(TransportError::BadWr { .. })
    ));
    assert!(matches!(
        s.pair.b.destroy_srq(srq),
        Err(TransportError::SrqInUse(_))
    ));
    s.pair.b.destroy_qp(conns[0].qp_b).unwrap();
    s.pair.b.destroy_srq(srq).unwrap();
    let huge = SrqInit::new(PdId::DEFAULT, u32::MAX);
    assert!(s.pair.b.create_srq(huge).is_err());
}

#[test]
fn an_erroring_queue_pair_leaves_the_pool_to_the_others() {
    let mut s = Setup::rc();
    let (srq, cq_b, conns) = on_srq(&mut s, 2, 8);
    for i in 0..4 {
        srq_recv(&mut s, srq, i, i * 256).unwrap();
    }
    let qp = conns[0].qp_b;
    s.pair.b.modify_qp(qp, &ModifyQp::to(QpState::Err)).unwrap();
    let evs = events(&mut s);
    assert!(
        evs.contains(&Event::QpLastWqeReached { qpn: qp }),
        "{evs:?}"
    );
    assert_eq!(
        s.pair.b.query_srq(srq).unwrap().posted,
        4,
        "nothing flushed"
    );
    send_on(&mut s, &conns[1], 7, 10);
    let wcs = drain_cq(&mut s, cq_b, 1);
    assert_eq!(
        (wcs[0].qp_num, wcs[0].status),
        (conns[1].qp_b, WcStatus::Success)
    );
}
