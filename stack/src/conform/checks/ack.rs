//! Acknowledgements from the responder (IBA 9.7.5.1): a packet with AckReq is answered by an
//! ACK naming it; ACKs may be coalesced but never name a PSN not yet received; the MSN counts
//! messages, not packets.

use super::{Result, describe_all, fail, pass, pattern, rc, reth, until};
use crate::conform::harness::Ctx;
use crate::conform::suite::{Check, Role, Verdict};
use crate::wire::opcode::op;
use crate::wire::{ExtHeaders, Syndrome};

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "resp.ack.ackreq",
        rule: "IBA 9.7.5.1",
        title: "a request with AckReq is answered by an ACKNOWLEDGE to the requester's QP with \
                its PSN and MSN",
        role: Role::Responder,
        body: ackreq,
    },
    Check {
        id: "resp.ack.coalesced",
        rule: "IBA 9.7.5.1.1",
        title: "four WRITEs with AckReq on the last only: an ACK for the last with MSN 4, and no \
                ACK for a PSN not received",
        role: Role::Responder,
        body: coalesced,
    },
    Check {
        id: "resp.ack.msn-per-message",
        rule: "IBA 9.7.5.1, 9.3.4",
        title: "a three-packet WRITE is ACKed with MSN 1: the MSN counts messages",
        role: Role::Responder,
        body: msn_per_message,
    },
];

fn ackreq(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    c.write(ctx, c.epsn, 0, &pattern(64, 1))?;
    let frames = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    match frames.first() {
        Some(f)
            if f.is_ack()
                && f.psn() == c.epsn
                && f.msn() == Some(1)
                && f.bth.dest_qp == c.tq
                && f.icrc_ok =>
        {
            let credits = match f.syndrome() {
                Some(Syndrome::Ack { credits }) => credits,
                _ => 0,
            };
            pass(format!(
                "{} to QP {:#x}, credit field {credits:#x}",
                f.describe(),
                c.tq.value()
            ))
        }
        _ => fail(format!(
            "WRITE with AckReq at {:#x}: {} (expected ACK psn {:#x} msn 1 to QP {:#x})",
            c.epsn.value(),
            describe_all(&frames),
            c.epsn.value(),
            c.tq.value()
        )),
    }
}

fn coalesced(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    for k in 0..4u32 {
        let data = pattern(64, k as u8);
        let ext = reth(c.mr.addr + 64 * u64::from(k), c.mr.rkey, 64);
        c.request(ctx, op::RDMA_WRITE_ONLY, c.epsn.add(k), ext, &data, k == 3)?;
    }
    let last = c.epsn.add(3);
    let frames = until(ctx, |f| f.is_ack() && f.psn() == last)?;
    let final_ack = frames.iter().find(|f| f.is_ack() && f.psn() == last);
    let beyond = frames.iter().find(|f| f.psn().distance(last) > 0);
    match (final_ack, beyond) {
        (Some(f), None) if f.msn() == Some(4) && !frames.iter().any(|f| f.is_any_nak()) => pass(
            format!("{} ACK frame(s): {}", frames.len(), describe_all(&frames)),
        ),
        _ => fail(format!(
            "4 WRITEs, AckReq on the last ({:#x}): {} (expected an ACK psn {:#x} msn 4)",
            last.value(),
            describe_all(&frames),
            last.value()
        )),
    }
}

fn msn_per_message(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let mtu = c.mtu as usize;
    let data = pattern(2 * mtu + 100, 3);
    let ext = reth(c.mr.addr, c.mr.rkey, data.len() as u32);
    let none = ExtHeaders::default();
    c.request(ctx, op::RDMA_WRITE_FIRST, c.epsn, ext, &data[..mtu], false)?;
    c.request(
        ctx,
        op::RDMA_WRITE_MIDDLE,
        c.epsn.add(1),
        none,
        &data[mtu..2 * mtu],
        false,
    )?;
    c.request(
        ctx,
        op::RDMA_WRITE_LAST,
        c.epsn.add(2),
        none,
        &data[2 * mtu..],
        true,
    )?;
    let last = c.epsn.add(2);
    let frames = until(ctx, |f| f.is_ack() && f.psn() == last)?;
    let landed = ctx.read_mr(&c.mr, 0, data.len() as u32)?;
    match frames.iter().find(|f| f.is_ack() && f.psn() == last) {
        Some(f) if f.msn() == Some(1) && landed == data => pass(format!(
            "FIRST, MIDDLE, LAST: {}; data landed",
            f.describe()
        )),
        _ => fail(format!(
            "FIRST, MIDDLE, LAST with AckReq: {} (expected ACK psn {:#x} msn 1); data landed: {}",
            describe_all(&frames),
            last.value(),
            landed == data
        )),
    }
}
