//! Lengths at the responder (IBA 9.7.5.2.4): payloads beyond the path MTU, FIRST packets not
//! of one MTU, WRITE payloads that disagree with the RETH, messages longer than the receive;
//! and zero-length RDMA, which checks no key (C9-88).

use super::{Result, Setup, connect, describe_all, fail, judge, pass, pattern, rc, reth, until};
use crate::conform::harness::Ctx;
use crate::conform::suite::{Check, Role, Verdict};
use crate::transport::Mtu;
use crate::wire::NakCode;
use crate::wire::opcode::op;

const INV: NakCode = NakCode::InvalidRequest;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "resp.len.above-mtu",
        rule: "IBA 9.7.5.2.4",
        title: "a packet with more payload than the path MTU is NAKed Invalid Request",
        role: Role::Responder,
        body: above_mtu,
    },
    Check {
        id: "resp.len.first-not-mtu",
        rule: "IBA 9.7.5.2.4",
        title: "an RDMA WRITE FIRST carrying less than one MTU is NAKed Invalid Request",
        role: Role::Responder,
        body: first_not_mtu,
    },
    Check {
        id: "resp.len.write-dma-length",
        rule: "IBA 9.7.5.2.4",
        title: "an RDMA WRITE ONLY whose payload differs from the RETH's DMA length is NAKed \
                Invalid Request",
        role: Role::Responder,
        body: write_dma_length,
    },
    Check {
        id: "resp.len.send-longer-than-receive",
        rule: "IBA 9.7.5.2.4, 10.8.3.1",
        title: "a SEND longer than the posted receive is NAKed Invalid Request and the receive \
                completes with a local length error",
        role: Role::Responder,
        body: send_too_long,
    },
    Check {
        id: "resp.len.zero-write-bad-rkey",
        rule: "C9-88",
        title: "a zero-length RDMA WRITE with an invalid R_Key is ACKed (no key is checked)",
        role: Role::Responder,
        body: zero_write_bad_key,
    },
    Check {
        id: "resp.len.zero-read-bad-rkey",
        rule: "C9-88",
        title: "a zero-length RDMA READ with an invalid R_Key is answered by an empty READ \
                RESPONSE ONLY",
        role: Role::Responder,
        body: zero_read_bad_key,
    },
    Check {
        id: "resp.len.zero-write",
        rule: "IBA 9.4.3, C9-88",
        title: "a zero-length RDMA WRITE with a valid R_Key is ACKed and writes nothing",
        role: Role::Responder,
        body: zero_write,
    },
    Check {
        id: "resp.len.zero-read",
        rule: "IBA 9.4.4, C9-88",
        title: "a zero-length RDMA READ is answered by an empty READ RESPONSE ONLY",
        role: Role::Responder,
        body: zero_read,
    },
];

fn above_mtu(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.mtu = Mtu::M256;
    let c = connect(ctx, s)?;
    let data = pattern(512, 1);
    let ext = reth(c.mr.addr, c.mr.rkey, 512);
    c.request(ctx, op::RDMA_WRITE_ONLY, c.epsn, ext, &data, true)?;
    judge(
        ctx,
        &c,
        "WRITE ONLY of 512 B at path MTU 256",
        (INV, c.epsn),
        256,
    )
}

fn first_not_mtu(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(c.mtu as usize / 2, 2);
    let ext = reth(c.mr.addr, c.mr.rkey, 2 * c.mtu);
    c.request(ctx, op::RDMA_WRITE_FIRST, c.epsn, ext, &data, true)?;
    judge(ctx, &c, "WRITE FIRST of half an MTU", (INV, c.epsn), 0)
}

fn write_dma_length(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let ext = reth(c.mr.addr, c.mr.rkey, 128);
    c.request(ctx, op::RDMA_WRITE_ONLY, c.epsn, ext, &pattern(64, 3), true)?;
    judge(
        ctx,
        &c,
        "WRITE ONLY of 64 B with DMA length 128",
        (INV, c.epsn),
        0,
    )
}

fn send_too_long(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_recv(c.qpn, 1, &c.mr, 0, 64)?;
    c.send(ctx, c.epsn, &pattern(128, 4))?;
    let frames = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let state = c.state(ctx)?;
    let nak = frames
        .iter()
        .find(|f| f.is_nak(INV) && f.psn() == c.epsn)
        .map(super::RxFrame::describe);
    let wc = wcs.iter().find(|w| w.wr_id == 1);
    match (nak, wc) {
        (Some(n), Some(w)) if w.status == "LOC_LEN_ERR" && state == "ERR" => pass(format!(
            "SEND of 128 B into 64: {n}; receive completed LOC_LEN_ERR; QP ERR"
        )),
        (n, w) => fail(format!(
            "SEND of 128 B into a 64-byte receive: {} (NAK INVALID_REQUEST expected: {}); \
             receive completion {}; QP {state}",
            describe_all(&frames),
            if n.is_some() { "yes" } else { "no" },
            w.map_or("none".to_owned(), |w| w.status.to_owned()),
        )),
    }
}

fn zero_write_bad_key(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let ext = reth(0, c.mr.rkey ^ 0x5a5a_5a00, 0);
    c.request(ctx, op::RDMA_WRITE_ONLY, c.epsn, ext, &[], true)?;
    expect_ack(ctx, &c, "zero-length WRITE, R_Key ^ 0x5a5a5a00, VA 0")
}

fn zero_write(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let ext = reth(c.mr.addr, c.mr.rkey, 0);
    c.request(ctx, op::RDMA_WRITE_ONLY, c.epsn, ext, &[], true)?;
    expect_ack(ctx, &c, "zero-length WRITE to the region")
}

fn expect_ack(ctx: &mut Ctx<'_>, c: &super::Conn, what: &str) -> Result<Verdict> {
    let frames = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let mem = ctx.read_mr(&c.mr, 0, 64)?;
    let state = c.state(ctx)?;
    match frames.first() {
        Some(f)
            if f.is_ack() && f.psn() == c.epsn && state == "RTS" && mem.iter().all(|&b| b == 0) =>
        {
            pass(format!("{what}: {}; QP {state}", f.describe()))
        }
        _ => fail(format!(
            "{what}: {} (expected ACK psn {:#x}); QP {state}",
            describe_all(&frames),
            c.epsn.value()
        )),
    }
}

fn zero_read_bad_key(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let ext = reth(0, c.mr.rkey ^ 0x5a5a_5a00, 0);
    c.request(ctx, op::RDMA_READ_REQUEST, c.epsn, ext, &[], true)?;
    expect_empty_read(ctx, &c, "zero-length READ, R_Key ^ 0x5a5a5a00, VA 0")
}

fn zero_read(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    c.read(ctx, c.epsn, 0, 0)?;
    expect_empty_read(ctx, &c, "zero-length READ of the region")
}

fn expect_empty_read(ctx: &mut Ctx<'_>, c: &super::Conn, what: &str) -> Result<Verdict> {
    let frames = until(ctx, |f| {
        f.is_any_nak() || f.op() == op::RDMA_READ_RESPONSE_ONLY
    })?;
    let state = c.state(ctx)?;
    match frames.first() {
        Some(f)
            if f.op() == op::RDMA_READ_RESPONSE_ONLY
                && f.psn() == c.epsn
                && f.payload.is_empty()
                && state == "RTS" =>
        {
            pass(format!("{what}: {}; QP {state}", f.describe()))
        }
        _ => fail(format!(
            "{what}: {} (expected an empty RDMA_READ_RESPONSE_ONLY psn {:#x}); QP {state}",
            describe_all(&frames),
            c.epsn.value()
        )),
    }
}
