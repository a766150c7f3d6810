//! Opcode sequence at the responder (IBA 9.7.5.2.3 via the valid opcode sequences of 9.2.1):
//! a MIDDLE or LAST without its FIRST, or an ONLY or another operation inside a message, is
//! NAKed Invalid Request; an opcode of another transport is dropped (IBA 9.6.1.1).

use super::{Result, describe_all, fail, judge, pass, pattern, quiet, rc, reth, until};
use crate::conform::harness::{Ctx, packet};
use crate::conform::suite::{Check, Role, Verdict};
use crate::wire::opcode::op;
use crate::wire::{ExtHeaders, NakCode, Transport};

const INV: NakCode = NakCode::InvalidRequest;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "resp.opseq.middle-without-first",
        rule: "IBA 9.7.5.2.3",
        title: "an RDMA WRITE MIDDLE with no WRITE in progress is NAKed Invalid Request",
        role: Role::Responder,
        body: middle_without_first,
    },
    Check {
        id: "resp.opseq.last-without-first",
        rule: "IBA 9.7.5.2.3",
        title: "a SEND LAST with no SEND in progress is NAKed Invalid Request",
        role: Role::Responder,
        body: last_without_first,
    },
    Check {
        id: "resp.opseq.only-inside-message",
        rule: "IBA 9.7.5.2.3",
        title: "a SEND ONLY after a SEND FIRST (the message not finished) is NAKed Invalid \
                Request",
        role: Role::Responder,
        body: only_inside,
    },
    Check {
        id: "resp.opseq.send-inside-write",
        rule: "IBA 9.7.5.2.3",
        title: "a SEND LAST inside a multi-packet RDMA WRITE is NAKed Invalid Request",
        role: Role::Responder,
        body: send_inside_write,
    },
    Check {
        id: "resp.opseq.other-transport",
        rule: "IBA 9.6.1.1",
        title: "a UC opcode sent to an RC QP is dropped silently and the QP goes on",
        role: Role::Responder,
        body: other_transport,
    },
];

fn middle_without_first(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(c.mtu as usize, 1);
    let none = ExtHeaders::default();
    c.request(ctx, op::RDMA_WRITE_MIDDLE, c.epsn, none, &data, true)?;
    judge(ctx, &c, "WRITE MIDDLE first", (INV, c.epsn), 0)
}

fn last_without_first(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_recv(c.qpn, 1, &c.mr, 0, 2048)?;
    let data = pattern(64, 2);
    c.request(
        ctx,
        op::SEND_LAST,
        c.epsn,
        ExtHeaders::default(),
        &data,
        true,
    )?;
    judge(ctx, &c, "SEND LAST first", (INV, c.epsn), 64)
}

fn only_inside(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_recv(c.qpn, 1, &c.mr, 0, 4096)?;
    ctx.post_recv(c.qpn, 2, &c.mr, 0, 4096)?;
    let first = pattern(c.mtu as usize, 3);
    c.request(
        ctx,
        op::SEND_FIRST,
        c.epsn,
        ExtHeaders::default(),
        &first,
        false,
    )?;
    c.send(ctx, c.epsn.add(1), &pattern(64, 4))?;
    judge(
        ctx,
        &c,
        "SEND FIRST then SEND ONLY",
        (INV, c.epsn.add(1)),
        0,
    )
}

fn send_inside_write(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_recv(c.qpn, 1, &c.mr, 2048, 2048)?;
    let first = pattern(c.mtu as usize, 5);
    let ext = reth(c.mr.addr, c.mr.rkey, 2 * c.mtu);
    c.request(ctx, op::RDMA_WRITE_FIRST, c.epsn, ext, &first, false)?;
    let none = ExtHeaders::default();
    c.request(
        ctx,
        op::SEND_LAST,
        c.epsn.add(1),
        none,
        &pattern(64, 6),
        true,
    )?;
    judge(
        ctx,
        &c,
        "WRITE FIRST then SEND LAST",
        (INV, c.epsn.add(1)),
        0,
    )
}

fn other_transport(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_recv(c.qpn, 1, &c.mr, 0, 256)?;
    let data = pattern(64, 7);
    let uc = packet(
        Transport::Uc,
        op::SEND_ONLY,
        c.qpn,
        c.epsn,
        ExtHeaders::default(),
        &data,
        true,
    );
    ctx.send(uc)?;
    let dropped = quiet(ctx)?;
    let wcs = ctx.poll_cq(c.qpn, core::time::Duration::ZERO)?;
    c.write(ctx, c.epsn, 1024, &pattern(64, 8))?;
    let after = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let acked = after.iter().any(|f| f.is_ack() && f.psn() == c.epsn);
    if dropped.is_empty() && wcs.is_empty() && acked {
        pass(format!(
            "UC SEND ONLY: no answer, no completion; then RC WRITE: {}",
            describe_all(&after)
        ))
    } else {
        fail(format!(
            "UC SEND ONLY to an RC QP: {} and {} completions; then RC WRITE at the same PSN: {}",
            describe_all(&dropped),
            wcs.len(),
            describe_all(&after)
        ))
    }
}
