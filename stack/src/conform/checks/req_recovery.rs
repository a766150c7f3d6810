//! The peer's requester receiving responses (IBA 9.7.5.1, 9.9.2): go-back-N from a NAKed PSN,
//! coalesced ACKs, ACKs for PSNs never sent ignored, implied NAKs from READ responses that
//! skip PSNs, duplicate READ responses ignored, and error NAKs completing the request in error.

use super::{Result, describe_all, fail, pass, pattern, psns, rc, requests_until, wcs_text};
use crate::conform::harness::Ctx;
use crate::conform::proto::SendKind;
use crate::conform::suite::{Check, Role, Verdict};
use crate::wire::opcode::op;
use crate::wire::{NakCode, Syndrome};

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "req.gbn.from-nak",
        rule: "IBA 9.7.5.1.2",
        title: "after a PSN Sequence Error NAK the requester resends from the NAKed PSN on",
        role: Role::Requester,
        body: gbn_from_nak,
    },
    Check {
        id: "req.ack.coalesced",
        rule: "IBA 9.7.5.1.1",
        title: "one ACK for the last of three WRITEs completes all three",
        role: Role::Requester,
        body: coalesced_ack,
    },
    Check {
        id: "req.ack.ghost",
        rule: "IBA 9.7.5.1",
        title: "an ACK for a PSN the requester never sent is ignored: nothing completes",
        role: Role::Requester,
        body: ghost_ack,
    },
    Check {
        id: "req.read.implied-nak",
        rule: "IBA 9.7.5.1.3",
        title: "a READ response that skips an earlier READ's PSN makes the requester ask for \
                the earlier READ again",
        role: Role::Requester,
        body: implied_nak,
    },
    Check {
        id: "req.read.duplicate-response",
        rule: "IBA 9.7.5.1",
        title: "a duplicate READ response packet is ignored and the READ completes with the \
                right data",
        role: Role::Requester,
        body: duplicate_response,
    },
    Check {
        id: "req.read.out-of-order-response",
        rule: "IBA 9.7.5.1.3",
        title: "a READ response LAST before its FIRST does not complete the READ; the READ is \
                asked for again and completes with the right data",
        role: Role::Requester,
        body: out_of_order_response,
    },
    Check {
        id: "req.nak.remote-access",
        rule: "IBA 9.9.2",
        title: "a Remote Access Error NAK completes the WRITE with REM_ACCESS_ERR, the QP goes \
                to ERR and later requests are flushed",
        role: Role::Requester,
        body: nak_remote_access,
    },
    Check {
        id: "req.nak.invalid-request",
        rule: "IBA 9.9.2",
        title: "an Invalid Request NAK completes the SEND with REM_INV_REQ_ERR and the QP goes \
                to ERR",
        role: Role::Requester,
        body: nak_invalid_request,
    },
];

fn gbn_from_nak(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(4 * c.mtu as usize, 1);
    ctx.write_mr(&c.mr, 0, &data)?;
    ctx.post_send(c.work(SendKind::Write, 1, 0, 4 * c.mtu))?;
    let last = c.spsn.add(3);
    let sent = requests_until(ctx, last)?;
    if !sent.iter().any(|f| f.psn() == last) {
        return fail(format!("a 4-packet WRITE brought {}", psns(&sent)));
    }
    let nak_psn = c.spsn.add(1);
    c.acknowledge(ctx, nak_psn, Syndrome::Nak(NakCode::PsnSequenceError), 0)?;
    let again = requests_until(ctx, last)?;
    c.ack(ctx, last, 1)?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    // The resent packets must include PSN +1, +2, +3 in that order, each with its original
    // payload.
    let mut want = (1..4u32).map(|k| c.spsn.add(k)).peekable();
    for f in &again {
        if want.peek() == Some(&f.psn()) {
            let k = f.psn().distance(c.spsn) as usize;
            let m = c.mtu as usize;
            if f.payload != data[k * m..(k + 1) * m] {
                return fail(format!(
                    "resent {} with other bytes than the first time",
                    f.describe()
                ));
            }
            want.next();
        }
    }
    let ok = want.peek().is_none() && wcs.iter().any(|w| w.wr_id == 1 && w.status == "SUCCESS");
    let first_again = again.first().map(|f| f.psn());
    let evidence = format!(
        "sent {}; NAK PSN_SEQUENCE_ERROR psn {:#x}; resent {}; after the ACK {}",
        psns(&sent),
        nak_psn.value(),
        psns(&again),
        wcs_text(&wcs)
    );
    if ok && first_again == Some(nak_psn) {
        pass(evidence)
    } else {
        fail(evidence)
    }
}

fn coalesced_ack(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    for k in 0..3u32 {
        ctx.post_send(c.work(SendKind::Write, u64::from(k) + 1, 64 * k, 64))?;
    }
    let last = c.spsn.add(2);
    let sent = requests_until(ctx, last)?;
    c.ack(ctx, last, 3)?;
    let t = ctx.env().timing;
    let mut wcs = ctx.poll_cq(c.qpn, t.response)?;
    if wcs.len() < 3 {
        wcs.extend(ctx.poll_cq(c.qpn, t.settle)?);
    }
    let done: Vec<u64> = wcs
        .iter()
        .filter(|w| w.status == "SUCCESS")
        .map(|w| w.wr_id)
        .collect();
    let evidence = format!(
        "sent {}; one ACK psn {:#x} msn 3; {}",
        psns(&sent),
        last.value(),
        wcs_text(&wcs)
    );
    if done == [1, 2, 3] {
        pass(evidence)
    } else {
        fail(evidence)
    }
}

fn ghost_ack(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_send(c.work(SendKind::Write, 1, 0, 64))?;
    let sent = requests_until(ctx, c.spsn)?;
    let ghost = c.spsn.add(10);
    c.ack(ctx, ghost, 1)?;
    let t = ctx.env().timing;
    let early = ctx.poll_cq(c.qpn, t.quiet)?;
    let state = c.state(ctx)?;
    c.ack(ctx, c.spsn, 1)?;
    let late = ctx.poll_cq(c.qpn, t.response)?;
    let evidence = format!(
        "WRITE at {}; ACK psn {:#x} (never sent): {} and QP {state}; then the real ACK: {}",
        psns(&sent),
        ghost.value(),
        wcs_text(&early),
        wcs_text(&late)
    );
    let completed = late.iter().any(|w| w.wr_id == 1 && w.status == "SUCCESS");
    if early.is_empty() && state == "RTS" && completed {
        pass(evidence)
    } else {
        fail(evidence)
    }
}

fn implied_nak(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_send(c.work(SendKind::Read, 1, 0, 64))?;
    ctx.post_send(c.work(SendKind::Read, 2, 64, 64))?;
    let second = c.spsn.add(1);
    let sent = requests_until(ctx, second)?;
    let (a, b) = (pattern(64, 1), pattern(64, 2));
    // The first READ's response is "lost": only the second's arrives.
    c.read_response(ctx, op::RDMA_READ_RESPONSE_ONLY, second, &b, 2)?;
    let again = requests_until(ctx, c.spsn)?;
    let asked = again
        .iter()
        .any(|f| f.psn() == c.spsn && f.op() == op::RDMA_READ_REQUEST);
    if asked {
        c.read_response(ctx, op::RDMA_READ_RESPONSE_ONLY, c.spsn, &a, 1)?;
        // The second READ was asked for again too (go-back-N): answer it again.
        let _ = requests_until(ctx, second)?;
        c.read_response(ctx, op::RDMA_READ_RESPONSE_ONLY, second, &b, 2)?;
    }
    let t = ctx.env().timing;
    let mut wcs = ctx.poll_cq(c.qpn, t.response)?;
    if wcs.len() < 2 {
        wcs.extend(ctx.poll_cq(c.qpn, t.settle)?);
    }
    let landed = ctx.read_mr(&c.mr, 0, 128)?;
    let evidence = format!(
        "READs at {}; response only for {:#x}; then the peer sent {}; {}",
        psns(&sent),
        second.value(),
        describe_all(&again),
        wcs_text(&wcs)
    );
    let ok = asked
        && wcs.iter().filter(|w| w.status == "SUCCESS").count() == 2
        && landed == [a, b].concat();
    if ok { pass(evidence) } else { fail(evidence) }
}

fn duplicate_response(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let m = c.mtu as usize;
    ctx.post_send(c.work(SendKind::Read, 1, 0, 2 * c.mtu))?;
    let sent = requests_until(ctx, c.spsn)?;
    let data = pattern(2 * m, 3);
    c.read_response(ctx, op::RDMA_READ_RESPONSE_FIRST, c.spsn, &data[..m], 1)?;
    c.read_response(ctx, op::RDMA_READ_RESPONSE_FIRST, c.spsn, &data[..m], 1)?;
    c.read_response(
        ctx,
        op::RDMA_READ_RESPONSE_LAST,
        c.spsn.add(1),
        &data[m..],
        1,
    )?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let landed = ctx.read_mr(&c.mr, 0, 2 * c.mtu)?;
    let evidence = format!(
        "READ at {}; FIRST, FIRST again, LAST; {}; data right: {}",
        psns(&sent),
        wcs_text(&wcs),
        landed == data
    );
    let ok = wcs.iter().any(|w| w.wr_id == 1 && w.status == "SUCCESS") && landed == data;
    if ok { pass(evidence) } else { fail(evidence) }
}

fn out_of_order_response(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let m = c.mtu as usize;
    ctx.post_send(c.work(SendKind::Read, 1, 0, 2 * c.mtu))?;
    let sent = requests_until(ctx, c.spsn)?;
    let data = pattern(2 * m, 4);
    c.read_response(
        ctx,
        op::RDMA_READ_RESPONSE_LAST,
        c.spsn.add(1),
        &data[m..],
        1,
    )?;
    let t = ctx.env().timing;
    let early = ctx.poll_cq(c.qpn, t.settle)?;
    let again = requests_until(ctx, c.spsn)?;
    let asked = again
        .iter()
        .any(|f| f.psn() == c.spsn && f.op() == op::RDMA_READ_REQUEST);
    c.read_response(ctx, op::RDMA_READ_RESPONSE_FIRST, c.spsn, &data[..m], 1)?;
    c.read_response(
        ctx,
        op::RDMA_READ_RESPONSE_LAST,
        c.spsn.add(1),
        &data[m..],
        1,
    )?;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let landed = ctx.read_mr(&c.mr, 0, 2 * c.mtu)?;
    let evidence = format!(
        "READ at {}; LAST first: {} and the peer sent {}; then FIRST, LAST: {}; data right: {}",
        psns(&sent),
        wcs_text(&early),
        psns(&again),
        wcs_text(&wcs),
        landed == data
    );
    let ok = early.is_empty()
        && asked
        && wcs.iter().any(|w| w.wr_id == 1 && w.status == "SUCCESS")
        && landed == data;
    if ok { pass(evidence) } else { fail(evidence) }
}

fn error_nak(ctx: &mut Ctx<'_>, kind: SendKind, code: NakCode, status: &str) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_send(c.work(kind, 1, 0, 64))?;
    let sent = requests_until(ctx, c.spsn)?;
    c.acknowledge(ctx, c.spsn, Syndrome::Nak(code), 0)?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let state = c.state(ctx)?;
    ctx.post_send(c.work(kind, 2, 64, 64))?;
    let flushed = ctx.poll_cq(c.qpn, t.response)?;
    let evidence = format!(
        "request at {}; NAK {}: {}, QP {state}; the next request: {}",
        psns(&sent),
        code.name(),
        wcs_text(&wcs),
        wcs_text(&flushed)
    );
    let ok = wcs.iter().any(|w| w.wr_id == 1 && w.status == status)
        && state == "ERR"
        && flushed
            .iter()
            .any(|w| w.wr_id == 2 && w.status == "WR_FLUSH_ERR");
    if ok { pass(evidence) } else { fail(evidence) }
}

fn nak_remote_access(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    error_nak(
        ctx,
        SendKind::Write,
        NakCode::RemoteAccessError,
        "REM_ACCESS_ERR",
    )
}

fn nak_invalid_request(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    error_nak(
        ctx,
        SendKind::Send,
        NakCode::InvalidRequest,
        "REM_INV_REQ_ERR",
    )
}
