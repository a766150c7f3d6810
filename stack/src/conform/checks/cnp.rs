//! The congestion notification point (Annex A17.9.3, CA17-44): a packet that arrives ECN-CE
//! marked is answered with a CNP to the QP that sent it. The annex makes congestion
//! management optional, so a peer whose agent reports none and sends no CNP is "not
//! applicable" (rdma_rxe has none).
//!
//! A notification point sends a QP at most one CNP per interval however many of its packets
//! arrive marked (CA17-44 allows one CNP for several marked packets; DCQCN's 50 us, the value
//! of mlx5's `min_time_between_cnps` knob's common setting): a CNP per marked packet would
//! cut the sender's rate once per packet.

use super::{Result, RxFrame, describe_all, fail, pass, pattern, rc, reth, verdict};
use crate::conform::harness::{Ctx, Wire, packet};
use crate::conform::suite::{Check, Role, Verdict};
use crate::time::{Duration, Instant};
use crate::wire::Transport;
use crate::wire::opcode::op;
use crate::wire::{Ecn, Opcode, PKey, Qpn, ROCEV2_UDP_PORT};

/// CE-marked packets sent back to back.
const BURST: u32 = 5;

/// The P_Key of the CE-marked WRITEs (`packet` gives every request the default), which their
/// CNP must carry.
const MARKED_PKEY: PKey = PKey::DEFAULT;

/// CE-marked packets sent back to back to judge the pacing: enough that a peer answering
/// each with a CNP is told from one that paces them.
const PACING_BURST: u32 = 16;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "resp.cnp.sent",
        rule: "Annex A17.9.3 (CA17-44)",
        title: "CE-marked requests are answered with a CNP to the sending QP",
        role: Role::Responder,
        body: cnp_sent,
    },
    Check {
        id: "resp.cnp.format",
        rule: "Annex A17.9.3 (Figure 6)",
        title: "a CNP has opcode 0x81, PSN 0, SE and M clear, the marked packets' P_Key, 16 \
                zero reserved bytes and a valid ICRC, on UDP port 4791",
        role: Role::Responder,
        body: cnp_format,
    },
    Check {
        id: "resp.cnp.pacing",
        rule: "Annex A17.9.3 (CA17-44)",
        title: "CNPs to one QP are paced: a burst of CE-marked requests brings at most one \
                per notification interval (DCQCN's 50 us)",
        role: Role::Responder,
        body: cnp_pacing,
    },
];

fn is_cnp(f: &RxFrame) -> bool {
    f.bth.opcode == Opcode::CNP
}

/// What a CE-marked burst brought: the frames, how many CNPs, when it was sent, the
/// tester's QP.
type Burst = (Vec<RxFrame>, u32, Instant, Qpn);

/// Sends `burst` CE-marked WRITEs and returns the frames, the CNPs among them, and whether
/// the check applies.
fn marked_burst(ctx: &mut Ctx<'_>, burst: u32) -> Result<core::result::Result<Burst, Verdict>> {
    let c = rc(ctx)?;
    ctx.watch_all_cnps();
    let sent = ctx.now();
    let data = pattern(64, 1);
    for k in 0..burst {
        let ext = reth(c.mr.addr + 64 * u64::from(k), c.mr.rkey, 64);
        let p = packet(
            Transport::Rc,
            op::RDMA_WRITE_ONLY,
            c.qpn,
            c.epsn.add(k),
            ext,
            &data,
            true,
        );
        let wire = Wire {
            ecn: Some(Ecn::Ce),
            ..Wire::default()
        };
        ctx.send_with(p, wire)?;
    }
    let t = ctx.env().timing;
    let frames = ctx.collect_until(t.response, t.settle, |fs| fs.iter().any(is_cnp))?;
    let cnps = frames.iter().filter(|f| is_cnp(f)).count() as u32;
    if cnps == 0 && ctx.env().cc == "none" {
        return Ok(Err(Verdict::NotApplicable(format!(
            "no CNP for {burst} CE-marked WRITEs ({}), and the agent reports no congestion \
             control: the peer has no notification point (optional, A17.9.3)",
            describe_all(&frames)
        ))));
    }
    Ok(Ok((frames, cnps, sent, c.tq)))
}

fn cnp_sent(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let (frames, cnps, sent, tq) = match marked_burst(ctx, BURST)? {
        Ok(x) => x,
        Err(v) => return Ok(v),
    };
    let first = frames.iter().find(|f| is_cnp(f));
    match first {
        Some(f) if f.bth.dest_qp != tq => fail(format!(
            "{} is addressed to QP {:#x}, not to the sending QP {:#x}",
            f.describe(),
            f.bth.dest_qp.value(),
            tq.value()
        )),
        Some(f) => pass(format!(
            "{cnps} CNP(s) for {BURST} CE-marked WRITEs, the first {} after the burst, to the \
             sending QP",
            super::ms(f.at.saturating_since(sent))
        )),
        None => fail(format!(
            "no CNP for {BURST} CE-marked WRITEs (the agent reports {} congestion control): {}",
            ctx.env().cc,
            describe_all(&frames)
        )),
    }
}

fn cnp_format(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let (frames, _, _, _) = match marked_burst(ctx, BURST)? {
        Ok(x) => x,
        Err(v) => return Ok(v),
    };
    let Some(f) = frames.iter().find(|f| is_cnp(f)) else {
        return fail(format!("no CNP to look at: {}", describe_all(&frames)));
    };
    let reserved_zero = f
        .ext
        .cnp
        .is_some_and(|c| c.reserved.iter().all(|&b| b == 0));
    // Figure 6 asks for these. BECN is not among them: NICs set it, the annex is silent, so
    // it is shown but not judged.
    let b = &f.bth;
    let ok = b.psn.value() == 0
        && !b.solicited
        && !b.mig_req
        && b.pkey == MARKED_PKEY
        && reserved_zero
        && f.icrc_ok
        && f.udp_dst == ROCEV2_UDP_PORT;
    let seen = format!(
        "PSN {:#x}, SE {}, M {}, P_Key {} (the marked WRITEs': {}), reserved bytes zero {}, \
         ICRC ok {}, UDP port {}, BECN {}, IP ECN {}",
        b.psn.value(),
        b.solicited,
        b.mig_req,
        b.pkey,
        MARKED_PKEY,
        reserved_zero,
        f.icrc_ok,
        f.udp_dst,
        b.becn,
        f.ecn.name()
    );
    verdict(ok, seen)
}

/// The interval a notification point must leave between two CNPs to one QP: DCQCN's, as the
/// stack's own notification point keeps it.
const CNP_INTERVAL: Duration = Duration::from_nanos(crate::cc::CNP_INTERVAL.as_nanos());

/// Counts the CNPs a burst brought against the most a paced notification point can send in
/// the time they took. That time runs from the burst's first send (on the tester's clock)
/// to the last CNP's arrival: it can only be longer than the time the peer took to send
/// them, so however the frames are delayed or bunched on the way a paced peer passes; and N
/// CNPs at least an interval apart need (N - 1) intervals.
fn cnp_pacing(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let (frames, _, sent, tq) = match marked_burst(ctx, PACING_BURST)? {
        Ok(x) => x,
        Err(v) => return Ok(v),
    };
    let times: Vec<Instant> = frames
        .iter()
        .filter(|f| is_cnp(f) && f.bth.dest_qp == tq)
        .map(|f| f.at)
        .collect();
    let Some(&last) = times.last() else {
        return fail(format!(
            "no CNP to the sending QP for {PACING_BURST} CE-marked WRITEs: {}",
            describe_all(&frames)
        ));
    };
    let span = last.saturating_since(sent);
    let allowed = (span.as_nanos() / CNP_INTERVAL.as_nanos()) as usize + 1;
    let closest = times
        .windows(2)
        .map(|w| w[1].saturating_since(w[0]))
        .min()
        .map_or(String::new(), |d| {
            format!(", the closest two {} apart", super::ms(d))
        });
    let seen = format!(
        "{} CNP(s) for {PACING_BURST} CE-marked WRITEs within {} of the burst{closest}: at \
         most {allowed} at one per {}",
        times.len(),
        super::ms(span),
        super::ms(CNP_INTERVAL)
    );
    verdict(times.len() <= allowed, seen)
}
