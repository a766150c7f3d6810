//! Memory work requests end to end (IBA 10.6): fast registration and LOCAL_INV, memory
//! windows bound by work requests, SEND with Invalidate of a real key, and the errors each
//! refusal produces (the completion, the NAK, the queue pair's state), never a stray write.

use super::*;
use crate::transport::{
    Event, MwBind, MwType, PdId, QpState, SendOp, SendWr, WcOpcode, WcStatus, inc_rkey,
};

const FR_VA: u64 = 0x7000_0000;
/// A region at B that windows may be bound to.
const WIN_VA: u64 = 0x9000_0000;

/// B posts a memory work request (signaled) on its queue pair.
fn post_b(s: &mut Setup, wr_id: u64, op: SendOp) {
    let wr = SendWr::new(wr_id, op, Vec::new());
    s.pair.b.post_send(s.conn.qp_b, wr).unwrap();
}

/// B's region that windows may be bound to (LOCAL_WRITE, REMOTE_READ, MW_BIND).
fn bindable(s: &mut Setup) -> u32 {
    let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::MW_BIND;
    s.pair.b.register_mr(WIN_VA, vec![0; 4096], access).unwrap()
}

#[test]
fn fast_registration_then_write_then_local_invalidate() {
    let mut s = Setup::rc();
    let fr = s.pair.b.alloc_mr(PdId::DEFAULT, 8192).unwrap();
    let key = inc_rkey(fr);
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let reg = SendOp::RegMr {
        mr: fr,
        key,
        va: FR_VA,
        len: 8192,
        access,
    };
    post_b(&mut s, 1, reg);
    post_b(&mut s, 2, SendOp::LocalInv { key });
    let wcs = s.completions_b(2);
    let got: Vec<_> = wcs.iter().map(|w| (w.opcode, w.status)).collect();
    assert_eq!(
        got,
        [
            (WcOpcode::RegMr, WcStatus::Success),
            (WcOpcode::LocalInv, WcStatus::Success)
        ]
    );
    assert!(!s.pair.b.mr(key).unwrap().is_valid());
    // Registered again under the next key byte; the old key no longer reaches it.
    let key2 = inc_rkey(key);
    let reg = SendOp::RegMr {
        mr: key,
        key: key2,
        va: FR_VA,
        len: 8192,
        access,
    };
    post_b(&mut s, 3, reg);
    assert_eq!(s.completions_b(1)[0].status, WcStatus::Success);
    let op = SendOp::Write {
        remote_addr: FR_VA,
        rkey: key2,
    };
    s.post_a(1, op, 0, 6000);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::Success);
    assert_eq!(s.b_bytes(key2)[..6000], s.a_bytes(s.src_a)[..6000]);
    let op = SendOp::Write {
        remote_addr: FR_VA,
        rkey: key,
    };
    s.post_a(2, op, 0, 8);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::RemAccessErr);
    assert_eq!(s.b_bytes(key2)[..6000], s.a_bytes(s.src_a)[..6000]);
}

#[test]
fn send_with_invalidate_unbinds_a_type2_window() {
    let mut s = Setup::rc();
    let mr = bindable(&mut s);
    let mw = s.pair.b.alloc_mw(PdId::DEFAULT, MwType::Type2).unwrap();
    let rkey = inc_rkey(mw);
    let bind = MwBind::new(mr, WIN_VA + 1024, 512, Access::REMOTE_READ);
    post_b(&mut s, 1, SendOp::BindMw { mw, rkey, bind });
    assert_eq!(s.completions_b(1)[0].opcode, WcOpcode::BindMw);
    assert_eq!(s.pair.b.mw(rkey).unwrap().bound_qp(), Some(s.conn.qp_b));
    s.pair.b.mr_mut(mr).unwrap().bytes_mut()[1024..1536].fill(0x5a);
    let read = SendOp::Read {
        remote_addr: WIN_VA + 1024,
        rkey,
    };
    s.post_a(1, read, 0, 512);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::Success);
    assert_eq!(s.a_bytes(s.dst_a)[..512], [0x5a; 512]);
    s.recv_b(7, 0, 64);
    s.post_a(2, SendOp::SendWithInv { rkey }, 0, 16);
    let wc = s.completions_b(1)[0];
    assert_eq!(
        (wc.status, wc.invalidated_rkey),
        (WcStatus::Success, Some(rkey))
    );
    assert!(!s.pair.b.mw(rkey).unwrap().is_bound());
    assert_eq!(s.pair.b.mr(mr).unwrap().bound_windows(), 0);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::Success);
    s.post_a(3, read, 0, 512);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::RemAccessErr);
}

#[test]
fn a_window_limits_the_peer_to_its_part_of_the_region() {
    let mut s = Setup::rc();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::MW_BIND;
    let mr = s.pair.b.register_mr(WIN_VA, vec![0; 4096], access).unwrap();
    let mw = s.pair.b.alloc_mw(PdId::DEFAULT, MwType::Type1).unwrap();
    let bind = MwBind::new(mr, WIN_VA + 100, 100, Access::REMOTE_WRITE);
    let qp_b = s.conn.qp_b;
    let rkey = s.pair.b.bind_mw(qp_b, 1, mw, bind).unwrap();
    assert_eq!(s.completions_b(1)[0].status, WcStatus::Success);
    // Inside the region, beyond the window: refused, nothing written.
    let op = SendOp::Write {
        remote_addr: WIN_VA + 150,
        rkey,
    };
    s.post_a(1, op, 0, 100);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::RemAccessErr);
    assert!(s.b_bytes(mr).iter().all(|&b| b == 0), "no stray write");
}

#[test]
fn binding_without_bind_rights_fails_the_bind() {
    let mut s = Setup::rc();
    // dst_b has every remote right but not MW_BIND (C10-73).
    let mw = s.pair.b.alloc_mw(PdId::DEFAULT, MwType::Type2).unwrap();
    let bind = MwBind::new(s.dst_b, DST_VA, 64, Access::REMOTE_WRITE);
    let rkey = inc_rkey(mw);
    post_b(&mut s, 1, SendOp::BindMw { mw, rkey, bind });
    let wc = s.completions_b(1)[0];
    assert_eq!(
        (wc.opcode, wc.status),
        (WcOpcode::BindMw, WcStatus::MwBindErr)
    );
    assert_eq!(s.pair.b.query_qp(s.conn.qp_b).unwrap().0, QpState::Err);
    assert!(!s.pair.b.mw(mw).unwrap().is_bound());
    assert!(
        std::iter::from_fn(|| s.pair.b.poll_event())
            .any(|e| e == Event::QpFatal { qpn: s.conn.qp_b })
    );
}

#[test]
fn invalidating_a_key_not_owned_is_a_remote_invalid_request() {
    let mut s = Setup::rc();
    // A plain registered region: no peer may invalidate it.
    s.recv_b(7, 0, 64);
    let rkey = s.dst_b;
    s.post_a(1, SendOp::SendWithInv { rkey }, 0, 16);
    let wc = s.completions_b(1)[0];
    assert_eq!(wc.status, WcStatus::RemInvReqErr);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::RemInvReqErr);
    assert!(s.pair.b.mr(rkey).unwrap().is_valid());
}

#[test]
fn a_type2_window_of_another_queue_pair_is_neither_used_nor_invalidated() {
    let mut s = Setup::rc();
    let mr = bindable(&mut s);
    // B binds the window through a second queue pair, C.
    let second = s
        .pair
        .connect(crate::transport::QpType::Rc, &Default::default());
    let mw = s.pair.b.alloc_mw(PdId::DEFAULT, MwType::Type2).unwrap();
    let rkey = inc_rkey(mw);
    let bind = MwBind::new(mr, WIN_VA, 64, Access::REMOTE_READ);
    let wr = SendWr::new(1, SendOp::BindMw { mw, rkey, bind }, Vec::new());
    s.pair.b.post_send(second.qp_b, wr).unwrap();
    let mut done = Vec::new();
    let limit = later(&s.pair, 1);
    s.pair.run_until(limit, |p| {
        done.extend(std::iter::from_fn(|| p.b.poll_completion(second.cq_b)));
        !done.is_empty()
    });
    assert_eq!(done[0].status, WcStatus::Success);
    let read = SendOp::Read {
        remote_addr: WIN_VA,
        rkey,
    };
    s.post_a(1, read, 0, 64);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::RemAccessErr);
}

#[test]
fn local_invalidate_of_a_region_with_windows_fails() {
    let mut s = Setup::rc();
    let fr = s.pair.b.alloc_mr(PdId::DEFAULT, 4096).unwrap();
    let key = inc_rkey(fr);
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::MW_BIND;
    let reg = SendOp::RegMr {
        mr: fr,
        key,
        va: FR_VA,
        len: 4096,
        access,
    };
    post_b(&mut s, 1, reg);
    let mw = s.pair.b.alloc_mw(PdId::DEFAULT, MwType::Type2).unwrap();
    let bind = MwBind::new(key, FR_VA, 64, Access::REMOTE_WRITE);
    let rkey = inc_rkey(mw);
    post_b(&mut s, 2, SendOp::BindMw { mw, rkey, bind });
    post_b(&mut s, 3, SendOp::LocalInv { key });
    let wcs = s.completions_b(3);
    let got: Vec<_> = wcs.iter().map(|w| w.status).collect();
    assert_eq!(
        got,
        [WcStatus::Success, WcStatus::Success, WcStatus::LocQpOpErr]
    );
    assert!(s.pair.b.mr(key).unwrap().is_valid(), "still registered");
}

#[test]
fn a_memory_work_request_completes_after_what_precedes_it() {
    let mut s = Setup::rc();
    let fr = s.pair.a.alloc_mr(PdId::DEFAULT, 64).unwrap();
    // A READ: it completes on its last response, not on an ACK.
    let op = s.read_op(0);
    s.post_a(1, op, 0, 50_000);
    let reg = SendOp::RegMr {
        mr: fr,
        key: inc_rkey(fr),
        va: 0,
        len: 64,
        access: Access::LOCAL_WRITE,
    };
    let wr = SendWr::new(2, reg, Vec::new());
    s.pair.a.post_send(s.conn.qp_a, wr).unwrap();
    let wcs = s.completions_a(2);
    let ids: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, [(1, WcStatus::Success), (2, WcStatus::Success)]);
}
