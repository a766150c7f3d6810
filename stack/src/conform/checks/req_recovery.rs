//! The peer's requester receiving responses (IBA 9.7.5.1, 9.9.2): go-back-N from a NAKed PSN,
//! coalesced ACKs, ACKs for PSNs never sent ignored, implied NAKs from READ responses that
//! skip PSNs, an ACK naming a READ or atomic not taken for its completion, duplicate READ
//! responses ignored, error NAKs completing the request in error, and no more READs
//! outstanding than the responder's resources (max_rd_atomic, 9.5).

use super::{
    Result, RxFrame, Setup, connect, describe_all, fail, pattern, psns, rc, requests_until,
    requests_until_all, verdict, wcs_text,
};
use crate::conform::harness::Ctx;
use crate::conform::proto::{PostSend, SendKind};
use crate::conform::suite::{Check, Role, Verdict};
use crate::wire::opcode::op;
use crate::wire::{NakCode, Syndrome};

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "req.gbn.from-nak",
        rule: "IBA 9.7.5.1.2",
        title: "after a PSN Sequence Error NAK the requester promptly resends the NAKed PSN and \
                the ones after it",
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
        id: "req.read.ack-not-completion",
        rule: "IBA 9.7.5.1.3",
        title: "an ACK naming an outstanding READ's PSN does not complete the READ: only its \
                response does, with the data",
        role: Role::Requester,
        body: ack_not_completion,
    },
    Check {
        id: "req.atomic.ack-not-completion",
        rule: "IBA 9.7.5.1.3, 9.4.5",
        title: "an ACK naming an outstanding FETCH_ADD's PSN does not complete it: only its \
                atomic ACK does, with the original value",
        role: Role::Requester,
        body: atomic_ack_not_completion,
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
        id: "req.rd-atomic.depth",
        rule: "IBA 9.5, 9.7.5.2.3",
        title: "with max_rd_atomic 2, four posted READs go out two at a time: the third only \
                once the first is answered",
        role: Role::Requester,
        body: initiator_depth,
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
    let sent = requests_until_all(ctx, c.spsn, last)?;
    if !sent.iter().any(|f| f.psn() == last) {
        return fail(format!("a 4-packet WRITE brought {}", psns(&sent)));
    }
    let nak_psn = c.spsn.add(1);
    c.acknowledge(ctx, nak_psn, Syndrome::Nak(NakCode::PsnSequenceError), 0)?;
    let naked = ctx.now();
    let again = requests_until_all(ctx, nak_psn, last)?;
    c.ack(ctx, last, 1)?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    // Go-back-N: the first packet after the NAK is the NAKed PSN, and each later PSN is sent
    // again with its original payload (a tail probe by a timer of the peer's own may come
    // between; the order of those is not the rule's).
    let m = c.mtu as usize;
    for f in &again {
        let k = f.psn().distance(c.spsn);
        if (1..4).contains(&k) && f.payload != data[k as usize * m..(k as usize + 1) * m] {
            return fail(format!(
                "resent {} with other bytes than the first time",
                f.describe()
            ));
        }
    }
    let all = (1..4u32).all(|k| again.iter().any(|f| f.psn() == c.spsn.add(k)));
    let ok = all && wcs.iter().any(|w| w.wr_id == 1 && w.status == "SUCCESS");
    // Prompt: well inside the local ACK timeout, so that the NAK, not that timer, made it.
    let prompt = again
        .iter()
        .find(|f| f.psn() == nak_psn)
        .map(|f| f.at.saturating_since(naked));
    let limit =
        crate::transport::local_ack_timeout(Setup::rc().path.timeout).unwrap_or_default() / 2;
    let evidence = format!(
        "sent {}; NAK PSN_SEQUENCE_ERROR psn {:#x}; resent {} ({:#x} after {}); after the ACK {}",
        psns(&sent),
        nak_psn.value(),
        psns(&again),
        nak_psn.value(),
        prompt.map_or("never".into(), super::ms),
        wcs_text(&wcs)
    );
    verdict(ok && prompt.is_some_and(|d| d < limit), evidence)
}

fn coalesced_ack(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    for k in 0..3u32 {
        ctx.post_send(c.work(SendKind::Write, u64::from(k) + 1, 64 * k, 64))?;
    }
    let last = c.spsn.add(2);
    let sent = requests_until_all(ctx, c.spsn, last)?;
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
    verdict(done == [1, 2, 3], evidence)
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
    verdict(early.is_empty() && state == "RTS" && completed, evidence)
}

fn implied_nak(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    ctx.post_send(c.work(SendKind::Read, 1, 0, 64))?;
    ctx.post_send(c.work(SendKind::Read, 2, 64, 64))?;
    let second = c.spsn.add(1);
    let sent = requests_until_all(ctx, c.spsn, second)?;
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
    verdict(ok, evidence)
}

/// A READ is answered by READ responses only. An ACK naming its PSN (as a responder that
/// re-acknowledges a duplicate SEND at its expected PSN - 1 sends, after losing the READ's
/// response) says the responses were lost; a requester that completes the READ on it
/// reports success for data that never arrived.
fn ack_not_completion(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(64, 6);
    let w = c.work(SendKind::Read, 1, 0, 64);
    ack_then_answer(ctx, &c, w, ("READ", "response"), &data, |ctx| {
        c.read_response(ctx, op::RDMA_READ_RESPONSE_ONLY, c.spsn, &data, 1)
    })
}

/// As [`ack_not_completion`] for a FETCH_ADD: the original value comes only in the atomic
/// ACK, so completing the request on a plain ACK reports a result that never arrived.
fn atomic_ack_not_completion(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    const ORIG: u64 = 0x0123_4567_89ab_cdef;
    let c = rc(ctx)?;
    // The result lands in the host's byte order; little-endian peers are assumed, as in the
    // responder's atomic checks.
    ctx.write_mr(&c.mr, 0, &[0xee; 8])?;
    let mut w = c.work(SendKind::FetchAdd, 1, 0, 8);
    w.swap_add = 1;
    let names = ("FETCH_ADD", "atomic ACK");
    ack_then_answer(ctx, &c, w, names, &ORIG.to_le_bytes(), |ctx| {
        c.atomic_ack(ctx, c.spsn, ORIG, 1)
    })
}

/// Posts `w` (work request 1, its result landing at offset 0 of the peer's region), sends a
/// plain ACK naming its PSN, and judges: nothing completes on that ACK, and once `answer`
/// has sent the real response the request completes with `expected` in the buffer. The
/// request's and the response's names are for the evidence.
fn ack_then_answer(
    ctx: &mut Ctx<'_>,
    c: &super::Conn,
    w: PostSend,
    (request, response): (&str, &str),
    expected: &[u8],
    answer: impl FnOnce(&mut Ctx<'_>) -> Result<u64>,
) -> Result<Verdict> {
    let len = expected.len() as u32;
    ctx.post_send(w)?;
    let sent = requests_until(ctx, c.spsn)?;
    c.ack(ctx, c.spsn, 1)?;
    let t = ctx.env().timing;
    let early = ctx.poll_cq(c.qpn, t.settle)?;
    if !early.is_empty() {
        let landed = ctx.read_mr(&c.mr, 0, len)?;
        return fail(format!(
            "{request} at {}; an ACK psn {:#x} msn 1 and no {response}: {}; the buffer holds \
             the result: {}",
            psns(&sent),
            c.spsn.value(),
            wcs_text(&early),
            landed == expected
        ));
    }
    // The requester may ask again (implied NAK) or wait: either way the response completes it.
    let again = ctx.collect(t.quiet)?;
    answer(ctx)?;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let landed = ctx.read_mr(&c.mr, 0, len)?;
    let evidence = format!(
        "{request} at {}; an ACK psn {:#x}: no completion, the peer sent {}; then the {response}: \
         {}; result right: {}",
        psns(&sent),
        c.spsn.value(),
        describe_all(&again),
        wcs_text(&wcs),
        landed == expected
    );
    let ok = wcs.iter().any(|w| w.wr_id == 1 && w.status == "SUCCESS") && landed == expected;
    verdict(ok, evidence)
}

/// A READ of two MTUs posted on the peer (work request 1): the connection, the request as it
/// arrived, and the data the tester will answer with.
fn two_mtu_read(ctx: &mut Ctx<'_>, seed: u8) -> Result<(super::Conn, Vec<RxFrame>, Vec<u8>)> {
    let c = rc(ctx)?;
    ctx.post_send(c.work(SendKind::Read, 1, 0, 2 * c.mtu))?;
    let sent = requests_until(ctx, c.spsn)?;
    Ok((c, sent, pattern(2 * c.mtu as usize, seed)))
}

/// Sends the responses of a two-MTU READ in `order`: 0 is FIRST (the first MTU of `data`),
/// 1 is LAST (the second).
fn answer_two(ctx: &mut Ctx<'_>, c: &super::Conn, data: &[u8], order: &[usize]) -> Result<()> {
    let m = c.mtu as usize;
    for &k in order {
        let low = [op::RDMA_READ_RESPONSE_FIRST, op::RDMA_READ_RESPONSE_LAST][k];
        c.read_response(ctx, low, c.spsn.add(k as u32), &data[k * m..(k + 1) * m], 1)?;
    }
    Ok(())
}

fn duplicate_response(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let (c, sent, data) = two_mtu_read(ctx, 3)?;
    answer_two(ctx, &c, &data, &[0, 0, 1])?;
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
    verdict(ok, evidence)
}

fn out_of_order_response(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let (c, sent, data) = two_mtu_read(ctx, 4)?;
    answer_two(ctx, &c, &data, &[1])?;
    let t = ctx.env().timing;
    let early = ctx.poll_cq(c.qpn, t.settle)?;
    let again = requests_until(ctx, c.spsn)?;
    let asked = again
        .iter()
        .any(|f| f.psn() == c.spsn && f.op() == op::RDMA_READ_REQUEST);
    answer_two(ctx, &c, &data, &[0, 1])?;
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
    verdict(ok, evidence)
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
    verdict(ok, evidence)
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

/// READs the agent posts for the initiator depth check, and the depth (max_rd_atomic).
const DEPTH_READS: u32 = 4;
const INITIATOR_DEPTH: u8 = 2;

/// A requester must not have more READs or atomics outstanding than the max_rd_atomic it was
/// given (the responder's resources, negotiated at connection time; a responder NAKs the
/// excess, 9.7.5.2.3). Nothing is answered for a settle time: only two READ PSNs may appear
/// (retransmissions of them are fine); answering the first must release the third.
fn initiator_depth(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.max_rd_atomic = INITIATOR_DEPTH;
    let c = connect(ctx, s)?;
    for k in 0..DEPTH_READS {
        ctx.post_send(c.work(SendKind::Read, u64::from(k) + 1, 64 * k, 64))?;
    }
    let t = ctx.env().timing;
    let held: Vec<RxFrame> = ctx.collect(t.settle)?;
    let first: Vec<u32> = {
        let mut v: Vec<u32> = held
            .iter()
            .filter(|f| f.op() == op::RDMA_READ_REQUEST)
            .map(|f| f.psn().distance(c.spsn) as u32)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let data: Vec<Vec<u8>> = (0..DEPTH_READS)
        .map(|k| pattern(64, 10 + k as u8))
        .collect();
    // Answer the READs one by one, each once it has been asked for.
    let mut asked_late = Vec::new();
    for k in 0..DEPTH_READS {
        let psn = c.spsn.add(k);
        if k >= u32::from(INITIATOR_DEPTH) {
            let more = requests_until(ctx, psn)?;
            asked_late.extend(more.into_iter().filter(|f| f.psn() == psn).take(1));
        }
        c.read_response(
            ctx,
            op::RDMA_READ_RESPONSE_ONLY,
            psn,
            &data[k as usize],
            k + 1,
        )?;
    }
    let mut wcs = ctx.poll_cq(c.qpn, t.response)?;
    if wcs.len() < DEPTH_READS as usize {
        wcs.extend(ctx.poll_cq(c.qpn, t.settle)?);
    }
    let landed = ctx.read_mr(&c.mr, 0, 64 * DEPTH_READS)?;
    let evidence = format!(
        "{DEPTH_READS} READs posted with max_rd_atomic {INITIATOR_DEPTH}; unanswered for {}, \
         the peer sent READ requests at PSN +{:?} ({}); then, each after the one before was \
         answered: {}; {}",
        super::ms(t.settle),
        first,
        psns(&held),
        describe_all(&asked_late),
        wcs_text(&wcs)
    );
    let ok = first == (0..u32::from(INITIATOR_DEPTH)).collect::<Vec<_>>()
        && asked_late.len() == (DEPTH_READS - u32::from(INITIATOR_DEPTH)) as usize
        && wcs.iter().filter(|w| w.status == "SUCCESS").count() == DEPTH_READS as usize
        && landed == data.concat();
    verdict(ok, evidence)
}
