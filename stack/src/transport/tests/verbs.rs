//! The verbs around the protocol: state rules for posting, SQD, UC gaps, UD Q_Keys, and what
//! a READ returns when a later request overwrites its source.

use super::*;
use crate::transport::engine_pair::{ADDR_B, ConnectOptions, LinkConfig, Side};
use crate::transport::{
    Event, ModifyQp, QpInit, QpState, QpType, RecvWr, SendOp, SendWr, TransportError, UdDest,
    WcStatus,
};
use crate::wire::IbPacketRepr;
use crate::wire::opcode::op;

#[test]
fn a_read_returns_memory_as_of_its_execution() {
    let mut s = Setup::rc();
    let before = s.b_bytes(s.dst_b)[..20_000].to_vec();
    let op = s.read_op(0);
    s.post_a(1, op, 0, 20_000);
    // Not fenced: B executes the WRITE while the READ's responses are still queued.
    let op = s.write_op(5_000);
    s.post_a(2, op, 0, 10_000);
    let wc = s.completions_a(2);
    assert!(wc.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(s.a_bytes(s.dst_a)[..20_000], before[..]);
    assert_eq!(
        s.b_bytes(s.dst_b)[5_000..15_000],
        s.a_bytes(s.src_a)[..10_000]
    );
}

#[test]
fn posting_follows_the_state_machine() {
    let mut s = Setup::rc();
    let cq = s.pair.a.create_cq(16);
    let qpn = s.pair.a.create_qp(QpInit::new(QpType::Rc, cq)).unwrap();
    let wr = SendWr::new(1, SendOp::Send, vec![s.src_a(0, 8)]);
    assert!(matches!(
        s.pair.a.post_send(qpn, wr.clone()),
        Err(TransportError::BadState {
            state: QpState::Reset,
            ..
        })
    ));
    assert!(s.pair.a.post_recv(qpn, RecvWr::new(1, vec![])).is_err());
    let to_rts = ModifyQp::to(QpState::Rts);
    assert!(matches!(
        s.pair.a.modify_qp(qpn, &to_rts),
        Err(TransportError::BadTransition { .. })
    ));
    s.pair
        .a
        .modify_qp(qpn, &ModifyQp::to(QpState::Err))
        .unwrap();
    s.pair.a.post_send(qpn, wr).unwrap();
    let wc = s.pair.a.poll_completion(cq).unwrap();
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::WrFlushErr));
    assert!(matches!(
        s.pair.a.post_send(
            crate::wire::Qpn::new(999),
            SendWr::new(1, SendOp::Send, vec![])
        ),
        Err(TransportError::UnknownQp(_))
    ));
    let ud_only = SendWr::new(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0,
        },
        vec![],
    );
    let uc = Setup::new(
        QpType::Uc,
        &ConnectOptions::default(),
        LinkConfig::default(),
        5,
    );
    let mut uc = uc;
    assert!(matches!(
        uc.pair.a.post_send(uc.conn.qp_a, ud_only),
        Err(TransportError::BadWr { .. })
    ));
}

#[test]
fn sqd_finishes_what_started_then_reports_drained() {
    let mut s = Setup::rc();
    let op = s.write_op(0);
    s.post_a(1, op, 0, 50_000);
    s.pair.step();
    s.pair
        .a
        .modify_qp(s.conn.qp_a, &ModifyQp::to(QpState::Sqd))
        .unwrap();
    let op = s.write_op(0);
    s.post_a(2, op, 0, 10);
    let wc = s.completions_a(1);
    assert_eq!(wc[0].wr_id, 1);
    s.pair.run_idle(later(&s.pair, 1));
    assert_eq!(
        s.pair.a.poll_event(),
        Some(Event::SqDrained { qpn: s.conn.qp_a })
    );
    assert!(
        s.pair.a.poll_completion(s.conn.cq_a).is_none(),
        "request 2 waits in SQD"
    );
    s.pair
        .a
        .modify_qp(s.conn.qp_a, &ModifyQp::to(QpState::Rts))
        .unwrap();
    assert_eq!(s.completions_a(1)[0].wr_id, 2);
}

#[test]
fn uc_drops_a_message_with_a_gap_and_reuses_the_receive() {
    let mut s = Setup::new(
        QpType::Uc,
        &ConnectOptions::default(),
        LinkConfig::default(),
        6,
    );
    let mut dropped = false;
    s.pair.filter = Some(Box::new(move |from, bytes| {
        let p = IbPacketRepr::parse(bytes).unwrap();
        if from == Side::A && p.bth.opcode.low() == op::SEND_MIDDLE && !dropped {
            dropped = true;
            return false;
        }
        true
    }));
    s.recv_b(1, 0, 10_000);
    s.recv_b(2, 10_000, 10_000);
    s.post_a(1, SendOp::Send, 0, 5_000);
    s.post_a(2, SendOp::Send, 0, 3_000);
    assert_eq!(s.completions_a(2).len(), 2, "UC completes on sending");
    let wc = s.completions_b(1);
    assert_eq!(
        (wc[0].wr_id, wc[0].byte_len),
        (1, 3_000),
        "the first receive took message 2"
    );
    s.pair.run_idle(later(&s.pair, 1));
    assert!(s.pair.b.poll_completion(s.conn.cq_b).is_none());
}

#[test]
fn ud_checks_the_qkey_and_controlled_qkeys_use_the_qp_s() {
    let opts = ConnectOptions::default();
    let mut s = Setup::new(QpType::Ud, &opts, LinkConfig::default(), 7);
    s.recv_b(1, 0, 4096);
    s.recv_b(2, 0, 4096);
    for (id, qkey) in [(1, opts.qkey ^ 1), (2, 0x8000_0000)] {
        let mut wr = SendWr::new(id, SendOp::Send, vec![s.src_a(0, 100)]);
        wr.ud = Some(UdDest::new(ADDR_B, s.conn.qp_b, qkey));
        s.pair.a.post_send(s.conn.qp_a, wr).unwrap();
    }
    let wc = s.completions_b(1);
    assert_eq!(
        wc[0].wr_id, 1,
        "only the second message, sent with A's own Q_Key, arrives"
    );
    assert_eq!(s.pair.b.stats().dropped, 1);
    let too_big = SendWr {
        ud: Some(UdDest::new(ADDR_B, s.conn.qp_b, opts.qkey)),
        ..SendWr::new(3, SendOp::Send, vec![s.src_a(0, 5000)])
    };
    s.pair.a.post_send(s.conn.qp_a, too_big).unwrap();
    let wc = s.completions_a(3);
    assert_eq!(wc.last().unwrap().status, WcStatus::LocLenErr);
    assert_eq!(s.pair.a.query_qp(s.conn.qp_a).unwrap().0, QpState::Sqe);
}

#[test]
fn write_with_immediate_waits_for_a_receive() {
    let mut s = Setup::rc();
    let op = SendOp::WriteWithImm {
        remote_addr: DST_VA,
        rkey: s.dst_b,
        imm: 3,
    };
    s.post_a(1, op, 0, 9_000);
    let limit = later(&s.pair, 1);
    assert!(s.pair.run_until(limit, |p| p.b.stats().rnr_naks_sent > 0));
    s.recv_b(4, 0, 0);
    let wc = s.completions_b(1);
    assert_eq!(
        (wc[0].wr_id, wc[0].imm_data, wc[0].byte_len),
        (4, Some(3), 9_000)
    );
    assert_eq!(s.b_bytes(s.dst_b)[..9_000], s.a_bytes(s.src_a)[..9_000]);
}

#[test]
fn a_receive_too_small_is_a_local_length_error() {
    let mut s = Setup::rc();
    s.recv_b(1, 0, 100);
    s.post_a(1, SendOp::Send, 0, 3000);
    assert_eq!(s.completions_b(1)[0].status, WcStatus::LocLenErr);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::RemInvReqErr);
}

#[test]
fn a_bad_local_key_fails_locally() {
    let mut s = Setup::rc();
    let mut wr = SendWr::new(1, SendOp::Send, vec![s.src_a(0, 10)]);
    wr.sg_list[0].lkey ^= 0x100;
    s.pair.a.post_send(s.conn.qp_a, wr).unwrap();
    let wc = s.completions_a(1);
    assert_eq!(wc[0].status, WcStatus::LocProtErr);
    assert_eq!(s.pair.a.stats().packets_sent, 0);
    assert_eq!(s.pair.a.query_qp(s.conn.qp_a).unwrap().0, QpState::Err);
}

#[test]
fn a_long_read_response_does_not_hold_back_the_responder_s_own_requests() {
    let mut s = Setup::rc();
    // B reads 200 KB from A while A's side also has a WRITE of its own to send to B.
    let rkey = s.dst_a;
    let read = SendWr::new(
        1,
        SendOp::Read {
            remote_addr: DST_VA,
            rkey,
        },
        vec![s.dst_b(0, 200_000)],
    );
    s.pair.b.post_send(s.conn.qp_b, read).unwrap();
    s.pair.step();
    s.pair.step();
    let op = s.write_op(0);
    s.post_a(2, op, 0, 4096);
    let limit = later(&s.pair, 1);
    let mut order = Vec::new();
    s.pair.run_until(limit, |p| {
        if let Some(wc) = p.a.poll_completion(s.conn.cq_a) {
            order.push(("A", wc.wr_id));
        }
        if let Some(wc) = p.b.poll_completion(s.conn.cq_b) {
            order.push(("B", wc.wr_id));
        }
        order.len() == 2
    });
    assert_eq!(
        order,
        [("A", 2), ("B", 1)],
        "A's WRITE finished while it streamed the READ"
    );
}

/// A CQ created with timestamps stamps each completion with the engine's time when it
/// was queued (virtual time here): a receive when its SEND arrived, a send when its ACK
/// did, and a flush made by a post with the latest time the engine has seen, not zero. A
/// plain CQ's completions carry none.
#[test]
fn completions_on_a_timestamped_cq_carry_the_time_they_were_queued() {
    let mut s = Setup::rc();
    let (cq_a, cq_b) = (
        s.pair.a.create_cq_with_timestamps(16),
        s.pair.b.create_cq_with_timestamps(16),
    );
    let conn = s.pair.connect_with(
        QpInit::new(QpType::Rc, cq_a),
        QpInit::new(QpType::Rc, cq_b),
        &ConnectOptions::default(),
    );
    let mut stamps = Vec::new();
    for i in 0..3u64 {
        let recv = RecvWr::new(i, vec![s.dst_b(0, 64)]);
        s.pair.b.post_recv(conn.qp_b, recv).unwrap();
        let send = SendWr::new(i, SendOp::Send, vec![s.src_a(0, 64)]);
        s.pair.a.post_send(conn.qp_a, send).unwrap();
        for (side, cq) in [(Side::B, cq_b), (Side::A, cq_a)] {
            let mut got = None;
            let limit = later(&s.pair, 1);
            s.pair.run_until(limit, |p| {
                got = p.engine(side).poll_completion(cq);
                got.is_some()
            });
            let wc = got.expect("a completion");
            assert_eq!(wc.completion_ts, Some(s.pair.now().as_nanos()), "{wc:?}");
            stamps.push(wc.completion_ts.unwrap());
        }
    }
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    s.pair
        .a
        .modify_qp(conn.qp_a, &ModifyQp::to(QpState::Err))
        .unwrap();
    let send = SendWr::new(9, SendOp::Send, vec![s.src_a(0, 64)]);
    s.pair.a.post_send(conn.qp_a, send).unwrap();
    let wc = s.pair.a.poll_completion(cq_a).unwrap();
    assert_eq!(wc.status, WcStatus::WrFlushErr);
    assert!(wc.completion_ts >= stamps.last().copied(), "{wc:?}");
    // The Setup's own CQs were created without timestamps.
    let op = s.write_op(0);
    s.post_a(1, op, 0, 64);
    assert_eq!(s.completions_a(1)[0].completion_ts, None);
}
