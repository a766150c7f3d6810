//! Duplicate requests (IBA 9.7.5.2.1): SENDs and WRITEs are acknowledged again and not
//! executed again, READs answered again, atomics answered from the saved result; and the
//! responder resources READs and atomics share (9.5): one request too many is refused.

use super::{Result, Setup, connect, describe_all, fail, pass, pattern, quiet, rc, until, verdict};
use crate::conform::harness::Ctx;
use crate::conform::suite::{Check, Role, Verdict};
use crate::wire::NakCode;
use crate::wire::opcode::op;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "resp.dup.write",
        rule: "IBA 9.7.5.2.1",
        title: "a duplicate RDMA WRITE is ACKed again (MSN unchanged) and not written again",
        role: Role::Responder,
        body: dup_write,
    },
    Check {
        id: "resp.dup.send",
        rule: "IBA 9.7.5.2.1",
        title: "a duplicate SEND is ACKed again and consumes no second receive",
        role: Role::Responder,
        body: dup_send,
    },
    Check {
        id: "resp.dup.ack-before-read",
        rule: "IBA 9.7.5.2.1, 9.7.5.1.3",
        title: "the ACK of a duplicate WRITE sent before a READ names the WRITE's PSN, not \
                the READ's (a requester that lost the READ response would take it for the \
                READ's completion)",
        role: Role::Responder,
        body: dup_ack_before_read,
    },
    Check {
        id: "resp.dup.read",
        rule: "IBA 9.7.5.2.1",
        title: "a duplicate RDMA READ is answered again, same PSN, same data",
        role: Role::Responder,
        body: dup_read,
    },
    Check {
        id: "resp.dup.read-resume",
        rule: "IBA 9.7.5.2.1",
        title: "a READ re-issued from a PSN inside an earlier READ gets the rest of the data \
                at the right PSNs",
        role: Role::Responder,
        body: dup_read_resume,
    },
    Check {
        id: "resp.dup.atomic",
        rule: "IBA 9.7.5.2.1, 9.4.5",
        title: "a duplicate atomic is answered with the saved original value and not executed \
                twice",
        role: Role::Responder,
        body: dup_atomic,
    },
    Check {
        id: "resp.rd-atomic.depth",
        rule: "IBA 9.7.5.2.3, 9.5",
        title: "READs beyond the responder's max_dest_rd_atomic outstanding are NAKed Invalid \
                Request",
        role: Role::Responder,
        body: depth,
    },
    Check {
        id: "resp.rd-atomic.depth-atomic",
        rule: "IBA 9.7.5.2.3, 9.5",
        title: "an atomic behind max_dest_rd_atomic outstanding READs is NAKed Invalid Request \
                and not executed",
        role: Role::Responder,
        body: depth_atomic,
    },
];

fn dup_write(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let first = pattern(64, 1);
    c.write(ctx, c.epsn, 0, &first)?;
    c.write(ctx, c.epsn.add(1), 64, &pattern(64, 2))?;
    let acks = until(ctx, |f| f.is_ack() && f.psn() == c.epsn.add(1))?;
    // The duplicate carries other bytes: if it were executed, memory would show them.
    c.write(ctx, c.epsn, 0, &pattern(64, 3))?;
    let again = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let mem = ctx.read_mr(&c.mr, 0, 64)?;
    let re_ack = again.iter().find(|f| {
        f.is_ack() && f.psn().distance(c.epsn) >= 0 && f.psn().distance(c.epsn.add(1)) <= 0
    });
    match re_ack {
        Some(f) if mem == first && f.msn() == Some(2) => pass(format!(
            "first two WRITEs: {}; duplicate of {:#x}: {}; memory unchanged",
            describe_all(&acks),
            c.epsn.value(),
            f.describe()
        )),
        Some(f) if mem == first => fail(format!(
            "duplicate ACKed ({}) but with MSN {:?}, expected 2 (two messages done)",
            f.describe(),
            f.msn()
        )),
        _ => fail(format!(
            "duplicate WRITE of {:#x}: {}; executed again: {}",
            c.epsn.value(),
            describe_all(&again),
            mem != first
        )),
    }
}

fn dup_send(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_recv(c.qpn, 1, &c.mr, 0, 64)?;
    ctx.post_recv(c.qpn, 2, &c.mr, 64, 64)?;
    c.send(ctx, c.epsn, &pattern(48, 1))?;
    let ack = until(ctx, |f| f.is_ack())?;
    let t = ctx.env().timing;
    let wc1 = ctx.poll_cq(c.qpn, t.response)?;
    c.send(ctx, c.epsn, &pattern(48, 2))?;
    let again = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let wc_dup = ctx.poll_cq(c.qpn, t.quiet)?;
    let third = pattern(40, 3);
    c.send(ctx, c.epsn.add(1), &third)?;
    let ack3 = until(ctx, |f| f.is_ack() && f.psn() == c.epsn.add(1))?;
    let wc3 = ctx.poll_cq(c.qpn, t.response)?;
    let landed = ctx.read_mr(&c.mr, 64, 40)?;
    let re_acked = again.iter().any(|f| f.is_ack());
    let second_recv_free = wc3
        .iter()
        .any(|w| w.wr_id == 2 && w.status == "SUCCESS" && w.byte_len == 40);
    if re_acked && wc_dup.is_empty() && second_recv_free && landed == third {
        pass(format!(
            "SEND: {} ({} completion); duplicate: {}, no completion; next SEND filled receive 2",
            describe_all(&ack),
            wc1.len(),
            describe_all(&again)
        ))
    } else {
        fail(format!(
            "duplicate SEND brought {} and completions {:?}; the next SEND ({}) completed {:?}",
            describe_all(&again),
            wc_dup
                .iter()
                .map(|w| (w.wr_id, w.status))
                .collect::<Vec<_>>(),
            describe_all(&ack3),
            wc3.iter()
                .map(|w| (w.wr_id, w.status, w.byte_len))
                .collect::<Vec<_>>()
        ))
    }
}

/// A WRITE, then a READ; both answers are "lost" and the requester sends both again. A READ
/// is answered only by its responses: an ACK naming its PSN says it completed, and rxe's
/// completer takes it so, completing the READ with no data (rxe's responder has kept
/// `ack_psn` apart from the READs since 2018 for that reason).
fn dup_ack_before_read(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(64, 8);
    ctx.write_mr(&c.mr, 64, &pattern(64, 9))?;
    c.write(ctx, c.epsn, 0, &data)?;
    let read = c.epsn.add(1);
    c.read(ctx, read, 64, 64)?;
    let first = until(ctx, |f| {
        (f.op() == op::RDMA_READ_RESPONSE_ONLY && f.psn() == read) || f.is_any_nak()
    })?;
    c.write(ctx, c.epsn, 0, &data)?;
    let again = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let before = format!(
        "WRITE at {:#x}, READ at {:#x}: {}; the WRITE again:",
        c.epsn.value(),
        read.value(),
        describe_all(&first)
    );
    match again.iter().find(|f| f.is_ack()) {
        Some(f) if f.psn() == c.epsn => pass(format!("{before} {}", describe_all(&again))),
        Some(f) if f.psn() == read => fail(format!(
            "{before} {}: the ACK names the READ's PSN, which tells a requester whose READ \
             response was lost that the READ completed (rxe's does, with no data)",
            describe_all(&again)
        )),
        _ => fail(format!(
            "{before} {} (expected an ACK at {:#x})",
            describe_all(&again),
            c.epsn.value()
        )),
    }
}

fn dup_read(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(200, 5);
    ctx.write_mr(&c.mr, 0, &data)?;
    c.read(ctx, c.epsn, 0, 200)?;
    let first = until(ctx, |f| {
        f.op() == op::RDMA_READ_RESPONSE_ONLY || f.is_any_nak()
    })?;
    c.read(ctx, c.epsn, 0, 200)?;
    let again = until(ctx, |f| {
        f.op() == op::RDMA_READ_RESPONSE_ONLY || f.is_any_nak()
    })?;
    let good = |fs: &[super::RxFrame]| {
        fs.iter().any(|f| {
            f.op() == op::RDMA_READ_RESPONSE_ONLY && f.psn() == c.epsn && f.payload == data
        })
    };
    if good(&first) && good(&again) {
        pass(format!(
            "READ: {}; duplicate: {}",
            describe_all(&first),
            describe_all(&again)
        ))
    } else {
        fail(format!(
            "READ of 200 B at {:#x}: {}; duplicate: {} (expected RDMA_READ_RESPONSE_ONLY psn \
             {:#x} with the region's bytes, twice)",
            c.epsn.value(),
            describe_all(&first),
            describe_all(&again),
            c.epsn.value()
        ))
    }
}

fn dup_read_resume(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let mtu = c.mtu as usize;
    let data = pattern(3 * mtu, 7);
    for (i, chunk) in data.chunks(4096).enumerate() {
        ctx.write_mr(&c.mr, (i * 4096) as u32, chunk)?;
    }
    let len = (3 * mtu) as u32;
    c.read(ctx, c.epsn, 0, len)?;
    let last = c.epsn.add(2);
    let first = until(ctx, |f| f.psn() == last || f.is_any_nak())?;
    // As a requester that lost the last two responses asks again.
    let ext = super::reth(c.mr.addr + mtu as u64, c.mr.rkey, len - mtu as u32);
    c.request(ctx, op::RDMA_READ_REQUEST, c.epsn.add(1), ext, &[], true)?;
    let again = until(ctx, |f| f.psn() == last || f.is_any_nak())?;
    let resp: Vec<_> = again.iter().filter(|f| !f.is_any_nak()).collect();
    let ok = resp.len() == 2
        && resp[0].psn() == c.epsn.add(1)
        && resp[1].psn() == last
        && resp[0].payload == data[mtu..2 * mtu]
        && resp[1].payload == data[2 * mtu..]
        && resp[1].op() == op::RDMA_READ_RESPONSE_LAST;
    if ok {
        pass(format!(
            "READ of 3 MTUs: {}; re-issued from PSN +1: {}",
            describe_all(&first),
            describe_all(&again)
        ))
    } else {
        fail(format!(
            "READ of 3 MTUs: {}; re-issued from {:#x} for the last 2 MTUs: {} (expected the \
             2nd and 3rd MTU at PSN +1 and +2, the last RDMA_READ_RESPONSE_LAST)",
            describe_all(&first),
            c.epsn.add(1).value(),
            describe_all(&again)
        ))
    }
}

fn dup_atomic(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    // Atomics act on the word in the peer's own byte order; little-endian hosts are assumed
    // (rdma_rxe on x86 and our endpoint).
    ctx.write_mr(&c.mr, 0, &5u64.to_le_bytes())?;
    c.fetch_add(ctx, c.epsn, 0, 10)?;
    let first = until(ctx, |f| f.op() == op::ATOMIC_ACKNOWLEDGE || f.is_any_nak())?;
    c.fetch_add(ctx, c.epsn, 0, 10)?;
    let again = until(ctx, |f| f.op() == op::ATOMIC_ACKNOWLEDGE || f.is_any_nak())?;
    let extra = quiet(ctx)?;
    let word = ctx.read_mr(&c.mr, 0, 8)?;
    let value = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
    let orig = |fs: &[super::RxFrame]| {
        fs.iter()
            .find(|f| f.op() == op::ATOMIC_ACKNOWLEDGE && f.psn() == c.epsn)
            .and_then(|f| f.ext.atomic_ack_eth.map(|a| a.orig))
    };
    match (orig(&first), orig(&again)) {
        (Some(5), Some(5)) if value == 15 => pass(format!(
            "FETCH_ADD 5+10: {} orig 5; duplicate: {} orig 5; memory 15",
            describe_all(&first),
            describe_all(&again)
        )),
        (a, b) => fail(format!(
            "FETCH_ADD of 10 on 5: original values {a:?} then {b:?} (expected 5 twice), memory \
             {value} (expected 15); {}",
            describe_all(&[first, again, extra].concat())
        )),
    }
}

/// The peer's responder resources for the depth check, and the READs sent at once.
const DEPTH: u8 = 2;
const READS: u32 = 4;

fn depth(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.max_dest_rd_atomic = DEPTH;
    let c = connect(ctx, s)?;
    // Four READs of four packets each, back to back: the third arrives while the first two
    // are outstanding (a responder that answers a READ faster than the next request arrives
    // may never see them overlap: the check is deterministic against a paced responder).
    let per = 4u32;
    let len = per * c.mtu;
    for k in 0..READS {
        c.read(ctx, c.epsn.add(per * k), 0, len)?;
    }
    let last = c.epsn.add(per * READS - 1);
    let frames = until(ctx, |f| f.is_any_nak() || f.psn() == last)?;
    let nak = frames.iter().find(|f| f.is_any_nak());
    let answered = |k: u32| {
        frames
            .iter()
            .any(|f| f.op() == op::RDMA_READ_RESPONSE_LAST && f.psn() == c.epsn.add(per * k + 3))
    };
    let beyond = c.epsn.add(per * u32::from(DEPTH));
    match nak {
        Some(f)
            if f.is_nak(NakCode::InvalidRequest)
                && f.psn().distance(beyond) >= 0
                && (0..u32::from(DEPTH)).all(answered) =>
        {
            pass(format!(
                "{READS} 4-packet READs at once, max_dest_rd_atomic {DEPTH}: the first {DEPTH} \
                 answered, then {}",
                f.describe()
            ))
        }
        _ => fail(format!(
            "{READS} 4-packet READs at once with max_dest_rd_atomic {DEPTH}: {} (expected the \
             first {DEPTH} answered and NAK INVALID_REQUEST for a later one)",
            describe_all(&frames)
        )),
    }
}

/// READs and atomics share the responder's max_dest_rd_atomic resources (IBA 9.5): two 4-packet
/// READs fill them, so a FETCH_ADD sent right behind them is one too many. It must be refused
/// (NAK Invalid Request at its PSN) and, above all, not executed: a responder that executes it
/// has no room left to save its result for a duplicate (9.7.5.2.1).
fn depth_atomic(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.max_dest_rd_atomic = DEPTH;
    let c = connect(ctx, s)?;
    // Little-endian peers are assumed, as in dup_atomic.
    ctx.write_mr(&c.mr, 0, &5u64.to_le_bytes())?;
    let per = 4u32;
    for k in 0..u32::from(DEPTH) {
        c.read(ctx, c.epsn.add(per * k), 0, per * c.mtu)?;
    }
    let atomic = c.epsn.add(per * u32::from(DEPTH));
    c.fetch_add(ctx, atomic, 0, 10)?;
    let frames = [
        until(ctx, |f| f.is_any_nak() || f.psn() == atomic)?,
        quiet(ctx)?,
    ]
    .concat();
    let word = ctx.read_mr(&c.mr, 0, 8)?;
    let value = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
    let answered = |k: u32| {
        frames
            .iter()
            .any(|f| f.op() == op::RDMA_READ_RESPONSE_LAST && f.psn() == c.epsn.add(per * k + 3))
    };
    let nak = frames.iter().find(|f| f.is_any_nak());
    let refused = nak.is_some_and(|f| f.is_nak(NakCode::InvalidRequest) && f.psn() == atomic);
    verdict(
        refused && value == 5 && (0..u32::from(DEPTH)).all(answered),
        format!(
            "{DEPTH} 4-packet READs then FETCH_ADD 10 at {:#x}, max_dest_rd_atomic {DEPTH}: {}; \
             memory {value}{}",
            atomic.value(),
            describe_all(&frames),
            if refused && value == 5 {
                String::new()
            } else {
                " (expected both READs answered, NAK INVALID_REQUEST for the atomic, memory 5)"
                    .to_owned()
            }
        ),
    )
}
