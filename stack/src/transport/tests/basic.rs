//! The RC happy path and the verbs around it: every operation, lossless.

use super::*;
use crate::transport::engine_pair::{ConnectOptions, LinkConfig};
use crate::transport::{PdId, QpState, QpType, SendOp, WcOpcode, WcStatus, inc_rkey};

#[test]
fn rc_send_of_every_size_class_arrives_intact() {
    let mut s = Setup::rc();
    let sizes = [0u32, 1, 3, 1023, 1024, 1025, 5000, 65536];
    let mut offset = 0;
    for (i, &len) in sizes.iter().enumerate() {
        s.recv_b(i as u64, offset, len);
        s.post_a(i as u64, SendOp::Send, offset, len);
        offset += u64::from(len);
    }
    let wcs = s.completions_b(sizes.len());
    assert_eq!(wcs.len(), sizes.len());
    let mut offset = 0usize;
    for (i, (wc, &len)) in wcs.iter().zip(&sizes).enumerate() {
        assert_eq!(wc.wr_id, i as u64);
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.opcode, WcOpcode::Recv);
        assert_eq!(wc.byte_len, len);
        let n = len as usize;
        assert_eq!(
            s.b_bytes(s.dst_b)[offset..offset + n],
            s.a_bytes(s.src_a)[offset..offset + n]
        );
        offset += n;
    }
    let sent = s.completions_a(sizes.len());
    assert!(sent.iter().all(|wc| wc.status == WcStatus::Success));
    assert_eq!(s.pair.a.stats().retransmitted_packets, 0);
}

#[test]
fn rc_write_read_and_atomics() {
    let mut s = Setup::rc();
    let op = s.write_op(100);
    s.post_a(1, op, 0, 70_000);
    let op = s.read_op(100);
    s.post_a(2, op, 0, 70_000);
    s.pair.b.mr_mut(s.dst_b).unwrap().bytes_mut()[8..16].copy_from_slice(&5u64.to_le_bytes());
    let rkey = s.dst_b;
    s.post_a(
        3,
        SendOp::FetchAdd {
            remote_addr: DST_VA + 8,
            rkey,
            add: 10,
        },
        80_000,
        8,
    );
    s.post_a(
        4,
        SendOp::CompareSwap {
            remote_addr: DST_VA + 8,
            rkey,
            compare: 15,
            swap: 99,
        },
        80_008,
        8,
    );
    let wcs = s.completions_a(4);
    let ops: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        ops,
        vec![
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::RdmaRead),
            (3, WcStatus::Success, WcOpcode::FetchAdd),
            (4, WcStatus::Success, WcOpcode::CompSwap),
        ]
    );
    assert_eq!(
        s.b_bytes(s.dst_b)[100..70_100],
        s.a_bytes(s.src_a)[..70_000]
    );
    assert_eq!(s.a_bytes(s.dst_a)[..70_000], s.a_bytes(s.src_a)[..70_000]);
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    assert_eq!(
        word(s.a_bytes(s.dst_a), 80_000),
        5,
        "fetch-add returns the old value"
    );
    assert_eq!(word(s.a_bytes(s.dst_a), 80_008), 15);
    assert_eq!(word(s.b_bytes(s.dst_b), 8), 99);
}

#[test]
fn immediates_and_invalidate() {
    let mut s = Setup::rc();
    // A fast-registration region at B, registered by B's queue pair, for the invalidate.
    let fr = s.pair.b.alloc_mr(PdId::DEFAULT, 4096).unwrap();
    let rkey = inc_rkey(fr);
    let reg = SendOp::RegMr {
        mr: fr,
        key: rkey,
        va: 0x7000_0000,
        len: 4096,
        access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
    };
    let mut reg = SendWr::new(9, reg, Vec::new());
    reg.signaled = false;
    s.pair.b.post_send(s.conn.qp_b, reg).unwrap();
    s.recv_b(10, 0, 4096);
    s.recv_b(11, 0, 4096);
    s.recv_b(12, 0, 4096);
    s.post_a(1, SendOp::SendWithImm { imm: 0xabcd }, 0, 3000);
    let op = SendOp::WriteWithImm {
        remote_addr: DST_VA + 8192,
        rkey: s.dst_b,
        imm: 7,
    };
    s.post_a(2, op, 0, 5000);
    s.post_a(3, SendOp::SendWithInv { rkey }, 0, 10);
    let wcs = s.completions_b(3);
    assert_eq!((wcs[0].imm_data, wcs[0].byte_len), (Some(0xabcd), 3000));
    assert_eq!(wcs[1].opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!((wcs[1].imm_data, wcs[1].byte_len), (Some(7), 5000));
    assert_eq!(wcs[2].invalidated_rkey, Some(rkey));
    assert!(!s.pair.b.mr(rkey).unwrap().is_valid());
    assert_eq!(s.completions_a(3).len(), 3);
}

#[test]
fn uc_and_ud_deliver() {
    let opts = ConnectOptions::default();
    let mut s = Setup::new(QpType::Uc, &opts, LinkConfig::default(), 3);
    s.recv_b(1, 0, 10_000);
    s.post_a(1, SendOp::Send, 0, 10_000);
    let op = s.write_op(20_000);
    s.post_a(2, op, 0, 3000);
    assert_eq!(s.completions_a(2).len(), 2);
    let wc = s.completions_b(1);
    assert_eq!(wc[0].byte_len, 10_000);
    s.pair.run_idle(later(&s.pair, 1));
    assert_eq!(
        s.b_bytes(s.dst_b)[20_000..23_000],
        s.a_bytes(s.src_a)[..3000]
    );

    let mut s = Setup::new(QpType::Ud, &opts, LinkConfig::default(), 4);
    s.recv_b(1, 0, 2000);
    let dest = crate::transport::UdDest::new(
        crate::transport::engine_pair::ADDR_B,
        s.conn.qp_b,
        opts.qkey,
    );
    let mut wr = super::SendWr::new(5, SendOp::SendWithImm { imm: 9 }, vec![s.src_a(0, 1000)]);
    wr.ud = Some(dest);
    s.pair.a.post_send(s.conn.qp_a, wr).unwrap();
    let wc = s.completions_b(1);
    assert_eq!(wc[0].byte_len, 1040, "40 bytes of GRH area");
    assert_eq!(wc[0].src_qp, Some(s.conn.qp_a));
    assert_eq!(wc[0].imm_data, Some(9));
    assert_eq!(s.b_bytes(s.dst_b)[40..1040], s.a_bytes(s.src_a)[..1000]);
    assert_eq!(s.pair.b.query_qp(s.conn.qp_b).unwrap().0, QpState::Rts);
}

/// With a seed the first QPN and the R_Key key bytes are drawn from it (the same seed, the
/// same numbers); without one they count from rxe's first (QPN 17, key byte 1).
#[test]
fn seeded_engines_draw_their_qpns_and_key_bytes() {
    use crate::transport::{Access, Engine, QpInit, QpType, TransportConfig};
    let ids = |seed: Option<u64>| {
        let mut e = Engine::new(TransportConfig {
            id_seed: seed,
            ..TransportConfig::default()
        });
        let cq = e.create_cq(4);
        let qpns: Vec<u32> = (0..3)
            .map(|_| e.create_qp(QpInit::new(QpType::Rc, cq)).unwrap().value())
            .collect();
        let first = e.register_mr(0x1000, vec![0; 64], Access::ALL).unwrap();
        e.deregister_mr(first).unwrap();
        let again = e.register_mr(0x1000, vec![0; 64], Access::ALL).unwrap();
        (qpns, first, again)
    };
    assert_eq!(ids(None), (vec![0x11, 0x12, 0x13], 0x1, 0x2));
    let (qpns, first, again) = ids(Some(7));
    assert_eq!(ids(Some(7)), (qpns.clone(), first, again));
    assert_eq!(
        (qpns[1], qpns[2]),
        (qpns[0] + 1, qpns[0] + 2),
        "consecutive"
    );
    assert!(qpns[0] >= 0x100 && qpns[0] < 1 << 24, "{qpns:x?}");
    assert!(
        first >> 8 == again >> 8 && first != again,
        "a reused slot changes its key"
    );
    let drawn: std::collections::HashSet<_> = (0..64u64).map(|s| ids(Some(s))).collect();
    assert!(drawn.len() > 60, "seeds draw different numbers");
    let bytes: std::collections::HashSet<_> = drawn.iter().map(|d| d.1 & 0xff).collect();
    assert!(bytes.len() > 30, "key bytes spread: {bytes:?}");
}

/// A QPN chosen far from the ones handed out (QP1, a peer's numbering) does not grow the
/// table to it, and handing out goes on around it.
#[test]
fn chosen_qpns_live_beside_the_handed_out_ones() {
    use crate::transport::{Engine, QpInit, QpType, TransportConfig, TransportError};
    use crate::wire::Qpn;
    let mut e = Engine::new(TransportConfig::default());
    let cq = e.create_cq(4);
    for qpn in [1, 0xff_fffe, 0x11] {
        e.create_qp_with_qpn(Qpn::new(qpn), QpInit::new(QpType::Ud, cq))
            .unwrap();
    }
    assert!(matches!(
        e.create_qp_with_qpn(Qpn::new(0xff_fffe), QpInit::new(QpType::Ud, cq)),
        Err(TransportError::QpnInUse(_))
    ));
    let next = e.create_qp(QpInit::new(QpType::Rc, cq)).unwrap();
    assert_eq!(next.value(), 0x12);
    e.destroy_qp(Qpn::new(0xff_fffe)).unwrap();
    assert!(e.query_qp(Qpn::new(0xff_fffe)).is_err() && e.query_qp(Qpn::new(1)).is_ok());
}

/// A RoCEv2 port has no QP0 (Annex A17.5.8): it cannot be created, so a packet addressed to
/// it finds no QP and is dropped (CA17-33; `resp.drop.qp0` checks it on the wire).
#[test]
fn there_is_no_qp0() {
    use crate::transport::{Engine, QpInit, QpType, TransportConfig, TransportError};
    use crate::wire::Qpn;
    let mut e = Engine::new(TransportConfig::default());
    let cq = e.create_cq(4);
    for t in [QpType::Ud, QpType::Rc] {
        assert_eq!(
            e.create_qp_with_qpn(Qpn::SMI, QpInit::new(t, cq)),
            Err(TransportError::NoQp0)
        );
    }
    assert!(e.query_qp(Qpn::SMI).is_err());
}
