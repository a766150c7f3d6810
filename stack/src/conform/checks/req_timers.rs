//! The peer's requester timers (IBA 9.7.5.2.8, 9.7.6.1.3, 9.9.2): it waits out an RNR NAK's
//! timer before retrying and gives up after rnr_retry retries; it retransmits when no ACK
//! comes and gives up after retry_cnt local ACK timeouts, never sooner.

use core::time::Duration;

use super::{
    Result, Setup, connect, fail, first_request, is_request, ms, pass, psns, verdict, wcs_text,
};
use crate::conform::harness::Ctx;
use crate::conform::proto::SendKind;
use crate::conform::suite::{Check, Role, Verdict};
use crate::transport::local_ack_timeout;
use crate::wire::{RnrTimer, Syndrome};

/// RNR timer code 18: 5.12 ms, long enough to measure on a real wire.
const RNR_TIMER: u8 = 18;
/// Local ACK timeout exponent 12: 16.8 ms.
const ACK_TIMEOUT: u8 = 12;
/// Timestamps on a real wire are taken in user space: allow this much early.
const SLACK: Duration = Duration::from_micros(500);

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "req.rnr.waits-timer",
        rule: "IBA 9.7.5.2.8",
        title: "after an RNR NAK the requester waits at least the NAK's timer before retrying",
        role: Role::Requester,
        body: rnr_waits,
    },
    Check {
        id: "req.rnr.retry-exhausted",
        rule: "IBA 9.7.5.2.8, 9.9.2",
        title: "with rnr_retry 2, the third RNR NAK completes the SEND with RNR_RETRY_EXC_ERR",
        role: Role::Requester,
        body: rnr_exhausted,
    },
    Check {
        id: "req.timeout.retransmit",
        rule: "IBA 9.7.6.1.3",
        title: "a request that gets no ACK is sent again",
        role: Role::Requester,
        body: retransmit,
    },
    Check {
        id: "req.timeout.retry-exhausted",
        rule: "IBA 9.7.6.1.3, 9.9.2",
        title: "with retry_cnt 2 and no ACK, the WRITE completes with RETRY_EXC_ERR after at \
                least 3 local ACK timeouts, the QP in ERR",
        role: Role::Requester,
        body: retry_exhausted,
    },
];

fn rnr_waits(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = connect(ctx, Setup::rc())?;
    ctx.post_send(c.work(SendKind::Send, 1, 0, 64))?;
    let t = ctx.env().timing;
    if first_request(ctx, c.spsn)?.is_none() {
        return fail("the SEND never arrived");
    }
    let timer = RnrTimer::new(RNR_TIMER);
    c.acknowledge(ctx, c.spsn, Syndrome::RnrNak { timer }, 0)?;
    let naked = ctx.now();
    let wait = t.response + Duration::from_micros(timer.micros().into());
    let (_, retry) = ctx.wait_for(wait, |f| is_request(f) && f.psn() == c.spsn)?;
    let Some(retry) = retry else {
        return fail(format!(
            "no retry within {} of an RNR NAK with timer {}",
            ms(wait),
            ms(Duration::from_micros(timer.micros().into()))
        ));
    };
    c.ack(ctx, c.spsn, 1)?;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let waited = retry.at.saturating_since(naked);
    let need = Duration::from_micros(timer.micros().into());
    let evidence = format!(
        "RNR NAK with timer {} ({}); retry {} later; then {}",
        RNR_TIMER,
        ms(need),
        ms(waited),
        wcs_text(&wcs)
    );
    verdict(
        waited + SLACK >= need && wcs.iter().any(|w| w.wr_id == 1 && w.status == "SUCCESS"),
        evidence,
    )
}

fn rnr_exhausted(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.rnr_retry = 2;
    let c = connect(ctx, s)?;
    ctx.post_send(c.work(SendKind::Send, 1, 0, 64))?;
    let t = ctx.env().timing;
    let mut sent = Vec::new();
    let mut wcs = Vec::new();
    // Each transmission gets an RNR NAK with the shortest timer, until the peer gives up
    // (or has sent more than it may).
    for _ in 0..5 {
        let (_, f) = ctx.wait_for(t.response, |f| is_request(f) && f.psn() == c.spsn)?;
        let Some(f) = f else { break };
        sent.push(f);
        let timer = RnrTimer::new(1);
        c.acknowledge(ctx, c.spsn, Syndrome::RnrNak { timer }, 0)?;
        wcs = ctx.poll_cq(c.qpn, t.settle)?;
        if !wcs.is_empty() {
            break;
        }
    }
    if wcs.is_empty() {
        wcs = ctx.poll_cq(c.qpn, t.response)?;
    }
    let state = c.state(ctx)?;
    let evidence = format!(
        "{} transmissions {}, each RNR NAKed; {}; QP {state}",
        sent.len(),
        psns(&sent),
        wcs_text(&wcs)
    );
    let ok = sent.len() == 3
        && wcs
            .iter()
            .any(|w| w.wr_id == 1 && w.status == "RNR_RETRY_EXC_ERR")
        && state == "ERR";
    verdict(ok, evidence)
}

fn timers(ctx: &mut Ctx<'_>, retry_cnt: u8) -> Result<super::Conn> {
    let mut s = Setup::rc();
    s.path.timeout = ACK_TIMEOUT;
    s.path.retry_cnt = retry_cnt;
    connect(ctx, s)
}

fn retransmit(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = timers(ctx, 7)?;
    ctx.post_send(c.work(SendKind::Write, 1, 0, 64))?;
    let t = ctx.env().timing;
    let Some(first) = first_request(ctx, c.spsn)? else {
        return fail("the WRITE never arrived");
    };
    let timeout = local_ack_timeout(ACK_TIMEOUT).unwrap_or_default();
    let (_, again) = ctx.wait_for(t.response + timeout * 4, |f| {
        is_request(f) && f.psn() == c.spsn
    })?;
    c.ack(ctx, c.spsn, 1)?;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    match again {
        Some(a) if wcs.iter().any(|w| w.wr_id == 1 && w.status == "SUCCESS") => pass(format!(
            "WRITE at {:#x} unanswered: sent again {} later (local ACK timeout {}); ACKed: {}",
            c.spsn.value(),
            ms(a.at.saturating_since(first.at)),
            ms(timeout),
            wcs_text(&wcs)
        )),
        again => fail(format!(
            "WRITE at {:#x} unanswered: sent again: {}; after the ACK {}",
            c.spsn.value(),
            again.is_some(),
            wcs_text(&wcs)
        )),
    }
}

fn retry_exhausted(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = timers(ctx, 2)?;
    // Timed from before the post (the peer cannot send earlier), not from the first packet's
    // arrival: a tester descheduled when it came stamps it late, by a millisecond or more on
    // a loaded host, and a 3-timeout wait would look short.
    let posted = ctx.now();
    ctx.post_send(c.work(SendKind::Write, 1, 0, 64))?;
    let t = ctx.env().timing;
    if first_request(ctx, c.spsn)?.is_none() {
        return fail("the WRITE never arrived");
    }
    let timeout = local_ack_timeout(ACK_TIMEOUT).unwrap_or_default();
    // The spec allows a timer up to four times its nominal value, and a slow peer more.
    let wcs = ctx.poll_cq(c.qpn, Duration::from_secs(10))?;
    let done = ctx.now();
    let tx = ctx.collect(t.settle)?;
    let resent: Vec<_> = tx
        .into_iter()
        .filter(|f| is_request(f) && f.psn() == c.spsn)
        .collect();
    let state = c.state(ctx)?;
    let took = done.saturating_since(posted);
    let evidence = format!(
        "WRITE at {:#x} never answered: sent {} times in all; failed {} after it was posted \
         (local ACK timeout {}): {}; QP {state}",
        c.spsn.value(),
        resent.len() + 1,
        ms(took),
        ms(timeout),
        wcs_text(&wcs)
    );
    let ok = wcs
        .iter()
        .any(|w| w.wr_id == 1 && w.status == "RETRY_EXC_ERR")
        && resent.len() >= 2
        && took + SLACK >= timeout * 3
        && state == "ERR";
    verdict(ok, evidence)
}
