//! Receiver not ready at the responder (IBA 9.7.5.2.8): a SEND with no receive posted gets an
//! RNR NAK with the QP's minimum RNR timer, and the same SEND succeeds once a receive is there.

use super::{Result, Setup, connect, describe_all, fail, pass, pattern, until};
use crate::conform::harness::Ctx;
use crate::conform::suite::{Check, Role, Verdict};
use crate::wire::Syndrome;

/// RNR timer code 14: 1.28 ms.
const TIMER: u8 = 14;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "resp.rnr.nak",
        rule: "IBA 9.7.5.2.8",
        title: "a SEND with no receive posted is RNR NAKed with the QP's min_rnr_timer, the QP \
                stays usable",
        role: Role::Responder,
        body: rnr_nak,
    },
    Check {
        id: "resp.rnr.retry-succeeds",
        rule: "IBA 9.7.5.2.8",
        title: "after an RNR NAK, the same SEND succeeds once a receive is posted",
        role: Role::Responder,
        body: retry_succeeds,
    },
];

fn setup(ctx: &mut Ctx<'_>) -> Result<super::Conn> {
    let mut s = Setup::rc();
    s.path.min_rnr_timer = crate::wire::RnrTimer::new(TIMER);
    connect(ctx, s)
}

fn is_rnr(f: &super::RxFrame) -> bool {
    matches!(f.syndrome(), Some(Syndrome::RnrNak { .. }))
}

fn rnr_nak(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = setup(ctx)?;
    c.send(ctx, c.epsn, &pattern(64, 1))?;
    let frames = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let state = c.state(ctx)?;
    match frames.first() {
        Some(f) if is_rnr(f) && f.psn() == c.epsn => match f.syndrome() {
            Some(Syndrome::RnrNak { timer }) if timer.code() == TIMER && state == "RTS" => {
                pass(format!("{} (timer code {TIMER}); QP {state}", f.describe()))
            }
            _ => fail(format!(
                "{}: expected timer code {TIMER} (the QP's min_rnr_timer) and QP RTS, QP {state}",
                f.describe()
            )),
        },
        _ => fail(format!(
            "SEND with no receive: {} (expected RNR NAK psn {:#x})",
            describe_all(&frames),
            c.epsn.value()
        )),
    }
}

fn retry_succeeds(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = setup(ctx)?;
    let data = pattern(64, 2);
    c.send(ctx, c.epsn, &data)?;
    let rnr = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    if !rnr.first().is_some_and(is_rnr) {
        return fail(format!(
            "SEND with no receive: {} (no RNR NAK to retry after)",
            describe_all(&rnr)
        ));
    }
    ctx.post_recv(c.qpn, 7, &c.mr, 256, 256)?;
    c.send(ctx, c.epsn, &data)?;
    let ack = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let landed = ctx.read_mr(&c.mr, 256, 64)?;
    let acked = ack.first().is_some_and(|f| f.is_ack() && f.psn() == c.epsn);
    let done = wcs
        .iter()
        .any(|w| w.wr_id == 7 && w.status == "SUCCESS" && w.byte_len == 64);
    if acked && done && landed == data {
        pass(format!(
            "{}; after posting: {}; receive completed with the data",
            describe_all(&rnr),
            describe_all(&ack)
        ))
    } else {
        fail(format!(
            "{}; after posting a receive the same SEND brought {}; completions {:?}; data \
             landed: {}",
            describe_all(&rnr),
            describe_all(&ack),
            wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
            landed == data
        ))
    }
}
