//! Memory protection at the responder (IBA 10.6.3, 9.4.5): a bad R_Key, an address or length
//! outside the region, or rights the region or the QP do not grant are NAKed, nothing is
//! written, and the QP ends in the error state (a class C responder error, IBA 9.9.3.1).

use super::{
    Conn, Result, Setup, atomic_eth, connect, describe_all, fail, is_response, judge, pass,
    pattern, quiet, rc, reth, until,
};
use crate::conform::harness::Ctx;
use crate::conform::suite::{Check, Role, Verdict};
use crate::transport::Access;
use crate::wire::opcode::op;
use crate::wire::{ExtHeaders, NakCode};

const RAE: NakCode = NakCode::RemoteAccessError;
const INV: NakCode = NakCode::InvalidRequest;

macro_rules! access_check {
    ($id:literal, $rule:literal, $title:literal, $body:ident) => {
        Check {
            id: $id,
            rule: $rule,
            title: $title,
            role: Role::Responder,
            body: $body,
        }
    };
}

pub(super) const CHECKS: &[Check] = &[
    access_check!(
        "resp.access.write-bad-rkey",
        "IBA 10.6.3, 9.9.3.1",
        "an RDMA WRITE with an unknown R_Key is NAKed Remote Access Error and ends the QP",
        write_bad_rkey
    ),
    access_check!(
        "resp.access.read-bad-rkey",
        "IBA 10.6.3, 9.9.3.1",
        "an RDMA READ with an unknown R_Key is NAKed Remote Access Error and ends the QP",
        read_bad_rkey
    ),
    access_check!(
        "resp.access.write-below-region",
        "IBA 10.6.3, 9.9.3.1",
        "an RDMA WRITE starting below the region is NAKed Remote Access Error",
        write_below
    ),
    access_check!(
        "resp.access.write-past-region",
        "IBA 10.6.3, 9.9.3.1",
        "an RDMA WRITE whose length runs past the region's end is NAKed Remote Access Error, \
         nothing written",
        write_past
    ),
    access_check!(
        "resp.access.read-past-region",
        "IBA 10.6.3, 9.9.3.1",
        "an RDMA READ whose length runs past the region's end is NAKed Remote Access Error",
        read_past
    ),
    access_check!(
        "resp.access.write-no-mr-right",
        "IBA 10.6.3.1, 9.9.3.1",
        "an RDMA WRITE to a region without Remote Write is NAKed Remote Access Error",
        write_no_right
    ),
    access_check!(
        "resp.access.read-no-mr-right",
        "IBA 10.6.3.1, 9.9.3.1",
        "an RDMA READ of a region without Remote Read is NAKed Remote Access Error",
        read_no_right
    ),
    access_check!(
        "resp.access.atomic-no-mr-right",
        "IBA 10.6.3.1, 9.9.3.1",
        "an atomic on a region without Remote Atomic is NAKed Remote Access Error",
        atomic_no_right
    ),
    access_check!(
        "resp.access.qp-no-write",
        "IBA 10.2.4, 9.9.3.1",
        "an RDMA WRITE to a QP whose access flags do not enable it is NAKed Invalid Request",
        qp_no_write
    ),
    access_check!(
        "resp.access.error-state",
        "IBA 9.9.3.1, 10.3.1",
        "after a Remote Access Error NAK the QP executes and answers nothing more",
        error_state
    ),
    access_check!(
        "resp.atomic.misaligned",
        "IBA 9.4.5",
        "an atomic on an address that is not 8-byte aligned is NAKed Invalid Request",
        misaligned
    ),
];

fn write_bad_rkey(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(64, 1);
    let ext = reth(c.mr.addr, c.mr.rkey ^ 0x5a5a_5a00, 64);
    c.request(ctx, op::RDMA_WRITE_ONLY, c.epsn, ext, &data, true)?;
    judge(ctx, &c, "WRITE with R_Key ^ 0x5a5a5a00", (RAE, c.epsn), 64)
}

fn read_bad_rkey(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let ext = reth(c.mr.addr, c.mr.rkey ^ 0x5a5a_5a00, 64);
    c.request(ctx, op::RDMA_READ_REQUEST, c.epsn, ext, &[], true)?;
    judge(ctx, &c, "READ with R_Key ^ 0x5a5a5a00", (RAE, c.epsn), 0)
}

fn write_below(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let ext = reth(c.mr.addr - 64, c.mr.rkey, 128);
    c.request(
        ctx,
        op::RDMA_WRITE_ONLY,
        c.epsn,
        ext,
        &pattern(128, 2),
        true,
    )?;
    judge(
        ctx,
        &c,
        "WRITE of 128 B at the region's address - 64",
        (RAE, c.epsn),
        64,
    )
}

fn write_past(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let end = u64::from(c.mr.len);
    let ext = reth(c.mr.addr + end - 32, c.mr.rkey, 64);
    c.request(ctx, op::RDMA_WRITE_ONLY, c.epsn, ext, &pattern(64, 3), true)?;
    let what = "WRITE of 64 B at the region's end - 32";
    let frames = until(ctx, is_response)?;
    let tail = ctx.read_mr(&c.mr, c.mr.len - 32, 32)?;
    let state = c.state(ctx)?;
    match frames.iter().find(|f| is_response(f)) {
        Some(f) if f.is_nak(RAE) && f.psn() == c.epsn && tail.iter().all(|&b| b == 0) => {
            if state == "ERR" {
                pass(format!(
                    "{what}: {}; the region's tail untouched; QP ERR",
                    f.describe()
                ))
            } else {
                fail(format!(
                    "{what}: {}, but the QP is {state}, not ERR",
                    f.describe()
                ))
            }
        }
        _ => fail(format!(
            "{what}: {} (expected NAK REMOTE_ACCESS_ERROR); region's last 32 B written: {}",
            describe_all(&frames),
            tail.iter().any(|&b| b != 0)
        )),
    }
}

fn read_past(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let ext = reth(c.mr.addr + u64::from(c.mr.len) - 100, c.mr.rkey, 200);
    c.request(ctx, op::RDMA_READ_REQUEST, c.epsn, ext, &[], true)?;
    judge(
        ctx,
        &c,
        "READ of 200 B at the region's end - 100",
        (RAE, c.epsn),
        0,
    )
}

fn with_mr(ctx: &mut Ctx<'_>, mr_access: Access) -> Result<Conn> {
    let mut s = Setup::rc();
    s.mr_access = mr_access;
    connect(ctx, s)
}

fn write_no_right(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = with_mr(ctx, Access::LOCAL_WRITE | Access::REMOTE_READ)?;
    c.write(ctx, c.epsn, 0, &pattern(64, 4))?;
    judge(
        ctx,
        &c,
        "WRITE to a region with local_write,remote_read",
        (RAE, c.epsn),
        64,
    )
}

fn read_no_right(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = with_mr(ctx, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    c.read(ctx, c.epsn, 0, 64)?;
    judge(
        ctx,
        &c,
        "READ of a region with local_write,remote_write",
        (RAE, c.epsn),
        0,
    )
}

fn atomic_no_right(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = with_mr(
        ctx,
        Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
    )?;
    c.fetch_add(ctx, c.epsn, 0, 1)?;
    judge(
        ctx,
        &c,
        "FETCH_ADD on a region without remote_atomic",
        (RAE, c.epsn),
        8,
    )
}

fn qp_no_write(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.access = Access::LOCAL_WRITE | Access::REMOTE_READ;
    let c = connect(ctx, s)?;
    c.write(ctx, c.epsn, 0, &pattern(64, 5))?;
    judge(
        ctx,
        &c,
        "WRITE to a QP with local_write,remote_read",
        (INV, c.epsn),
        64,
    )
}

fn error_state(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let ext = reth(c.mr.addr, c.mr.rkey ^ 0x5a5a_5a00, 64);
    c.request(ctx, op::RDMA_WRITE_ONLY, c.epsn, ext, &pattern(64, 6), true)?;
    let nak = until(ctx, is_response)?;
    if !nak.iter().any(|f| f.is_nak(RAE)) {
        return fail(format!(
            "bad R_Key WRITE: {} (no Remote Access Error NAK to start from)",
            describe_all(&nak)
        ));
    }
    // A valid WRITE and READ, at the PSN the QP was waiting for and the next.
    c.write(ctx, c.epsn, 0, &pattern(64, 7))?;
    c.read(ctx, c.epsn.add(1), 0, 64)?;
    let after = quiet(ctx)?;
    let mem = ctx.read_mr(&c.mr, 0, 64)?;
    if after.is_empty() && mem.iter().all(|&b| b == 0) {
        pass(format!(
            "{}; then a valid WRITE and READ: no answer, nothing written",
            describe_all(&nak)
        ))
    } else {
        fail(format!(
            "{}; then a valid WRITE and READ: {}; written: {}",
            describe_all(&nak),
            describe_all(&after),
            mem.iter().any(|&b| b != 0)
        ))
    }
}

fn misaligned(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let ext: ExtHeaders = atomic_eth(c.mr.addr + 4, c.mr.rkey, 1, 0);
    c.request(ctx, op::FETCH_ADD, c.epsn, ext, &[], true)?;
    judge(
        ctx,
        &c,
        "FETCH_ADD at the region's address + 4",
        (INV, c.epsn),
        16,
    )
}
