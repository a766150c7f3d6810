//! ATOMIC WRITE and FLUSH (IBA 1.5; rxe since Linux 6.2): both ends, their rights, and
//! their duplicates answered without executing twice.

use super::*;
use crate::transport::engine_pair::{Captured, ConnectOptions, LinkConfig, Side};
use crate::transport::{QpType, WcOpcode, WcStatus};
use crate::wire::IbPacketRepr;
use crate::wire::feth::{placement, selectivity};
use crate::wire::opcode::op;

/// A connection whose QPs allow both flush placements, and a region at B with `access`
/// (besides LOCAL_WRITE and REMOTE_WRITE).
fn setup(access: Access) -> (Setup, u32) {
    let opts = ConnectOptions {
        access: ConnectOptions::default().access | Access::FLUSH_GLOBAL | Access::FLUSH_PERSISTENT,
        ..ConnectOptions::default()
    };
    let mut s = Setup::new(QpType::Rc, &opts, LinkConfig::default(), 11);
    let rights = Access::LOCAL_WRITE | Access::REMOTE_WRITE | access;
    let key = s
        .pair
        .b
        .register_mr(0x4000_0000, vec![0; 4096], rights)
        .unwrap();
    (s, key)
}

fn atomic_write(key: u32, at: u64, value: u64) -> SendOp {
    SendOp::AtomicWrite {
        remote_addr: 0x4000_0000 + at,
        rkey: key,
        value,
    }
}

fn flush(key: u32, len: u32, placement: u8, selectivity: u8) -> SendOp {
    SendOp::Flush {
        remote_addr: 0x4000_0000,
        rkey: key,
        len,
        placement,
        selectivity,
    }
}

fn post(s: &mut Setup, wr_id: u64, op: SendOp) {
    let wr = SendWr::new(wr_id, op, Vec::new());
    s.pair.a.post_send(s.conn.qp_a, wr).unwrap();
}

fn opcodes(captured: &[Captured]) -> Vec<u8> {
    captured
        .iter()
        .filter_map(|c| IbPacketRepr::parse(&c.bytes).ok())
        .map(|p| p.bth.opcode.low())
        .collect()
}

#[test]
fn atomic_write_lands_the_word_and_an_empty_read_response_answers() {
    let (mut s, key) = setup(Access::NONE);
    s.pair.capture = Some(Vec::new());
    post(&mut s, 1, atomic_write(key, 16, 0x0123_4567_89ab_cdef));
    let wc = s.completions_a(1)[0];
    assert_eq!(
        (wc.opcode, wc.status),
        (WcOpcode::AtomicWrite, WcStatus::Success)
    );
    let word = &s.b_bytes(key)[16..24];
    assert_eq!(word, 0x0123_4567_89ab_cdef_u64.to_le_bytes());
    let ops = opcodes(s.pair.capture.as_ref().unwrap());
    assert_eq!(ops, [op::ATOMIC_WRITE, op::RDMA_READ_RESPONSE_ONLY]);
}

#[test]
fn atomic_write_errors_write_nothing() {
    let (mut s, key) = setup(Access::NONE);
    post(&mut s, 1, atomic_write(key, 4, 7));
    assert_eq!(
        s.completions_a(1)[0].status,
        WcStatus::RemInvReqErr,
        "misaligned"
    );
    let (mut s, key) = setup(Access::NONE);
    post(&mut s, 1, atomic_write(key, 4096, 7));
    assert_eq!(
        s.completions_a(1)[0].status,
        WcStatus::RemAccessErr,
        "out of bounds"
    );
    let (mut s, _) = setup(Access::NONE);
    let read_only = s
        .pair
        .b
        .register_mr(0x5000_0000, vec![0; 64], Access::REMOTE_READ)
        .unwrap();
    post(&mut s, 1, atomic_write(read_only, 0x1000_0000, 7));
    assert_eq!(
        s.completions_a(1)[0].status,
        WcStatus::RemAccessErr,
        "no write right"
    );
    assert!(s.b_bytes(read_only).iter().all(|&b| b == 0));
}

#[test]
fn flush_needs_its_rights_on_the_queue_pair_and_the_region() {
    let (mut s, key) = setup(Access::FLUSH_GLOBAL);
    post(
        &mut s,
        1,
        flush(key, 64, placement::GLOBAL, selectivity::RANGE),
    );
    post(
        &mut s,
        2,
        flush(key, 0, placement::GLOBAL, selectivity::MEMORY_REGION),
    );
    let wcs = s.completions_a(2);
    let got: Vec<_> = wcs.iter().map(|w| (w.opcode, w.status)).collect();
    assert_eq!(got, [(WcOpcode::Flush, WcStatus::Success); 2]);
    // The region has no FLUSH_PERSISTENT right: a remote access error.
    post(
        &mut s,
        3,
        flush(key, 64, placement::PERSISTENT, selectivity::RANGE),
    );
    assert_eq!(s.completions_a(1)[0].status, WcStatus::RemAccessErr);

    let (mut s, key) = setup(Access::FLUSH_GLOBAL);
    post(
        &mut s,
        1,
        flush(key, 8192, placement::GLOBAL, selectivity::RANGE),
    );
    assert_eq!(
        s.completions_a(1)[0].status,
        WcStatus::RemAccessErr,
        "beyond the region"
    );

    // The queue pair does not allow flushes: an invalid request (rxe).
    let mut s = Setup::rc();
    let op = flush(s.dst_b, 64, placement::GLOBAL, selectivity::RANGE);
    post(&mut s, 1, op);
    assert_eq!(s.completions_a(1)[0].status, WcStatus::RemInvReqErr);
}

#[test]
fn duplicates_are_answered_not_executed_again() {
    let (mut s, key) = setup(Access::FLUSH_GLOBAL);
    // Both responses are lost once: A sends both requests again, B answers from its
    // responder resources.
    drop_first(&mut s, Side::B, 2, |p| {
        p.bth.opcode.low() == op::RDMA_READ_RESPONSE_ONLY
    });
    post(&mut s, 1, atomic_write(key, 0, 1));
    post(
        &mut s,
        2,
        flush(key, 8, placement::GLOBAL, selectivity::RANGE),
    );
    let wcs = s.completions_a(2);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let b = s.pair.b.stats();
    assert!(b.duplicate_requests >= 2, "{b:?}");
    assert_eq!(b.payload_bytes_delivered, 8, "the word was written once");
    assert_eq!(s.b_bytes(key)[..8], 1u64.to_le_bytes());
}
