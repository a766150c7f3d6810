//! The responder's PSN checks (IBA 9.7.1, 9.7.5.2.2): a gap is NAKed once with the expected
//! PSN, nothing past the gap executes, and the sequence goes on across the 2^24 wrap.

use super::{Conn, Result, Setup, connect, describe_all, fail, pass, pattern, quiet, rc, until};
use crate::conform::harness::Ctx;
use crate::conform::suite::{Check, Role, Verdict};
use crate::wire::{NakCode, Psn};

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "resp.psn.seq-nak",
        rule: "IBA 9.7.5.2.2",
        title: "a request past the expected PSN is NAKed PSN Sequence Error carrying the \
                expected PSN, and not executed",
        role: Role::Responder,
        body: seq_nak,
    },
    Check {
        id: "resp.psn.one-nak-per-gap",
        rule: "IBA 9.7.5.2.2",
        title: "one PSN Sequence Error NAK per gap, however many packets follow it; a new \
                gap gets its own",
        role: Role::Responder,
        body: one_nak_per_gap,
    },
    Check {
        id: "resp.psn.resume",
        rule: "IBA 9.7.5.2.2",
        title: "after the NAK, the request with the expected PSN is executed and ACKed",
        role: Role::Responder,
        body: resume,
    },
    Check {
        id: "resp.psn.wrap",
        rule: "IBA 9.7.1",
        title: "requests are accepted and ACKed across the PSN wrap from 0xFFFFFF to 0",
        role: Role::Responder,
        body: wrap,
    },
];

fn is_seq_nak(f: &super::RxFrame) -> bool {
    f.is_nak(NakCode::PsnSequenceError)
}

fn seq_nak(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let at = c.epsn.add(2);
    c.write(ctx, at, 0, &pattern(64, 1))?;
    let frames = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let written = ctx.read_mr(&c.mr, 0, 64)?;
    let state = c.state(ctx)?;
    let Some(f) = frames.iter().find(|f| f.is_ack() || f.is_any_nak()) else {
        return fail(format!(
            "WRITE at {:#x} (expected {:#x}): no response",
            at.value(),
            c.epsn.value()
        ));
    };
    if !is_seq_nak(f) || f.psn() != c.epsn {
        return fail(format!(
            "WRITE at {:#x}: expected NAK PSN_SEQUENCE_ERROR psn {:#x}, got {}",
            at.value(),
            c.epsn.value(),
            f.describe()
        ));
    }
    if written.iter().any(|&b| b != 0) {
        return fail(format!(
            "{}, but the out-of-sequence WRITE was executed",
            f.describe()
        ));
    }
    if state != "RTS" {
        return fail(format!(
            "{}, but the QP went to {state} (a PSN error must not end it)",
            f.describe()
        ));
    }
    pass(format!(
        "{} for a WRITE at {:#x}; nothing written, QP {state}",
        f.describe(),
        at.value()
    ))
}

fn one_nak_per_gap(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    for k in 1..=3 {
        c.write(ctx, c.epsn.add(k), 64 * u64::from(k), &pattern(64, k as u8))?;
    }
    let first = quiet(ctx)?;
    let naks: Vec<_> = first.iter().filter(|f| is_seq_nak(f)).collect();
    if naks.len() != 1 || naks[0].psn() != c.epsn {
        return fail(format!(
            "3 packets past the gap at {:#x}: expected one NAK, got {}",
            c.epsn.value(),
            describe_all(&first)
        ));
    }
    // Fill the gap; the next two PSNs are now in sequence.
    c.write(ctx, c.epsn, 0, &pattern(64, 9))?;
    c.write(ctx, c.epsn.add(1), 64, &pattern(64, 10))?;
    let acks = until(ctx, |f| f.is_ack() && f.psn() == c.epsn.add(1))?;
    let next = c.epsn.add(2);
    c.write(ctx, next.add(2), 0, &pattern(64, 11))?;
    let second = until(ctx, |f| f.is_any_nak())?;
    match second.iter().find(|f| f.is_any_nak()) {
        Some(f) if is_seq_nak(f) && f.psn() == next => pass(format!(
            "first gap: {}; after it was filled ({}), a new gap: {}",
            naks[0].describe(),
            describe_all(&acks),
            f.describe()
        )),
        _ => fail(format!(
            "first gap: {}; a second gap at {:#x} brought {}",
            naks[0].describe(),
            next.value(),
            describe_all(&second)
        )),
    }
}

fn resume(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    c.write(ctx, c.epsn.add(1), 0, &pattern(64, 1))?;
    let nak = until(ctx, |f| f.is_any_nak())?;
    let data = pattern(64, 2);
    c.write(ctx, c.epsn, 128, &data)?;
    let acks = until(ctx, |f| f.is_ack() && f.psn() == c.epsn)?;
    let landed = ctx.read_mr(&c.mr, 128, 64)?;
    let ok = acks.iter().any(|f| f.is_ack() && f.psn() == c.epsn);
    if ok && landed == data {
        pass(format!(
            "{} then {}; data landed",
            describe_all(&nak),
            describe_all(&acks)
        ))
    } else {
        fail(format!(
            "after {}, WRITE at {:#x} brought {}; data landed: {}",
            describe_all(&nak),
            c.epsn.value(),
            describe_all(&acks),
            landed == data
        ))
    }
}

fn wrap(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.rq_psn = Psn::new(0xff_fffe);
    let c: Conn = connect(ctx, s)?;
    let mut sent = Vec::new();
    for k in 0..4u32 {
        let data = pattern(64, k as u8 + 1);
        c.write(ctx, c.epsn.add(k), 64 * u64::from(k), &data)?;
        sent.extend_from_slice(&data);
    }
    let last = c.epsn.add(3);
    let frames = until(ctx, |f| f.is_ack() && f.psn() == last)?;
    let landed = ctx.read_mr(&c.mr, 0, 256)?;
    let acked = frames.iter().any(|f| f.is_ack() && f.psn() == last);
    let naks = frames.iter().any(|f| f.is_any_nak());
    if acked && !naks && landed == sent {
        pass(format!(
            "PSNs 0xfffffe..0x1: {}; all data landed",
            describe_all(&frames)
        ))
    } else {
        fail(format!(
            "PSNs 0xfffffe..0x1: {}; data landed: {}",
            describe_all(&frames),
            landed == sent
        ))
    }
}
