//! What the peer's requester puts on the wire: PSNs across the wrap (IBA 9.7.1), message
//! segmentation (IBA 9.7.2, 9.2.1), the packet's fields, pad and ICRC (IBA 9.2, Annex
//! A17.3.2, A17.3.3), the IP fields the path sets (A17.3.1), and a reaction point that slows
//! down on a CNP (Annex A17.9.3, optional).

use core::time::Duration;

use super::{
    Result, RxFrame, Setup, connect, fail, first_transmissions, is_request, pass, pattern, psns,
    rc, requests_until, requests_until_all, verdict, wcs_text,
};
use crate::conform::harness::Ctx;
use crate::conform::proto::{SendKind, UdTarget};
use crate::conform::suite::{Check, Role, Verdict};
use crate::transport::QpType;
use crate::wire::opcode::op;
use crate::wire::{
    BthRepr, CnpRepr, Ecn, ExtHeaders, IbPacketRepr, Opcode, PKey, Psn, ROCEV2_UDP_PORT, Transport,
};

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "req.psn.wrap",
        rule: "IBA 9.7.1",
        title: "a WRITE starting at PSN 0xFFFFFE goes on at 0 and completes on the ACK of PSN 1",
        role: Role::Requester,
        body: psn_wrap,
    },
    Check {
        id: "req.wire.segmentation",
        rule: "IBA 9.7.2, 9.2.1",
        title: "a SEND of 2.5 MTUs is FIRST, MIDDLE, LAST with full-MTU FIRST and MIDDLE, \
                consecutive PSNs and AckReq on the LAST",
        role: Role::Requester,
        body: segmentation,
    },
    Check {
        id: "req.wire.format",
        rule: "IBA 9.2, Annex A17.3.1, A17.3.2, A17.3.3",
        title: "a 61-byte SEND: pad count 3 with zero pad bytes, TVer 0, default P_Key, the \
                connected QP, UDP port 4791, a valid ICRC, and an IPv4 header as the annex \
                sets it (IHL 5, DF, a right checksum; ECN 00 without congestion control)",
        role: Role::Requester,
        body: format,
    },
    Check {
        id: "req.wire.traffic-class",
        rule: "Annex A17.3.1 (CA17-4, CA17-13)",
        title: "a SEND from a QP whose path gives traffic class 0x68 carries DSCP 26",
        role: Role::Requester,
        body: traffic_class,
    },
    Check {
        id: "req.wire.ud-traffic-class",
        rule: "Annex A17.3.1 (CA17-4, CA17-13)",
        title: "a UD SEND whose address handle gives traffic class 0x68 carries DSCP 26",
        role: Role::Requester,
        body: ud_traffic_class,
    },
    Check {
        id: "req.wire.hop-limit",
        rule: "Annex A17.3.1 (CA17-9, CA17-17)",
        title: "a SEND from a QP whose path gives hop limit 9 carries TTL (IPv6: hop limit) 9",
        role: Role::Requester,
        body: hop_limit,
    },
    Check {
        id: "req.cnp.rate",
        rule: "Annex A17.9.3",
        title: "a CNP slows the sending QP down (not applicable to a peer without congestion \
                control)",
        role: Role::Requester,
        body: cnp_rate,
    },
];

fn psn_wrap(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.sq_psn = Psn::new(0xff_fffe);
    let c = connect(ctx, s)?;
    ctx.post_send(c.work(SendKind::Write, 1, 0, 4 * c.mtu))?;
    let last = c.spsn.add(3);
    let sent = first_transmissions(&requests_until_all(ctx, c.spsn, last)?);
    c.ack(ctx, last, 1)?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let expected: Vec<Psn> = (0..4).map(|k| c.spsn.add(k)).collect();
    let got: Vec<Psn> = sent.iter().map(RxFrame::psn).collect();
    let evidence = format!("sent {}; ACK psn 0x1: {}", psns(&sent), wcs_text(&wcs));
    verdict(
        got == expected && wcs.iter().any(|w| w.status == "SUCCESS"),
        evidence,
    )
}

fn segmentation(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let m = c.mtu as usize;
    let data = pattern(m * 5 / 2, 1);
    ctx.write_mr(&c.mr, 0, &data)?;
    ctx.post_send(c.work(SendKind::Send, 1, 0, data.len() as u32))?;
    let last = c.spsn.add(2);
    let sent = first_transmissions(&requests_until_all(ctx, c.spsn, last)?);
    c.ack(ctx, last, 1)?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let shape: Vec<String> = sent
        .iter()
        .map(|f| {
            format!(
                "{}/{:#x}/{}B{}",
                f.bth.opcode.name(),
                f.psn().value(),
                f.payload.len(),
                if f.bth.ack_req { "/AckReq" } else { "" }
            )
        })
        .collect();
    let want = [
        (op::SEND_FIRST, 0, m),
        (op::SEND_MIDDLE, 1, m),
        (op::SEND_LAST, 2, m / 2),
    ];
    let mut ok = sent.len() == 3;
    for (f, (low, k, len)) in sent.iter().zip(want) {
        let off = k as usize * m;
        ok &= f.op() == low
            && f.bth.opcode.transport() == Transport::Rc
            && f.psn() == c.spsn.add(k)
            && f.payload.len() == len
            && f.payload == data[off..off + len];
    }
    ok &= sent.last().is_some_and(|f| f.bth.ack_req);
    let evidence = format!("{}; ACKed: {}", shape.join(", "), wcs_text(&wcs));
    verdict(ok && wcs.iter().any(|w| w.status == "SUCCESS"), evidence)
}

fn format(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(61, 2);
    ctx.write_mr(&c.mr, 0, &data)?;
    ctx.post_send(c.work(SendKind::Send, 1, 0, 61))?;
    let sent = requests_until(ctx, c.spsn)?;
    let Some(f) = sent.iter().find(|f| f.psn() == c.spsn) else {
        return fail("the SEND never arrived");
    };
    c.ack(ctx, c.spsn, 1)?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    // CA17-5, CA17-14: without congestion management ECN is 00; with it a sender may mark
    // its packets ECN-capable, and never CE (a switch's mark).
    let ecn_ok = match ctx.env().cc.as_str() {
        "none" => f.ecn == Ecn::NotEct,
        _ => f.ecn != Ecn::Ce,
    };
    let problems: Vec<&str> = [
        (f.bth.pad_count == 3, "pad count not 3"),
        (f.pad.iter().all(|&b| b == 0), "pad bytes not zero"),
        (f.payload == data, "payload differs from the buffer"),
        (f.bth.tver == 0, "TVer not 0"),
        (f.bth.pkey == PKey::DEFAULT, "P_Key not 0xffff"),
        (f.bth.dest_qp == c.tq, "not to the connected QP"),
        (
            f.udp_dst == ROCEV2_UDP_PORT,
            "UDP destination port not 4791",
        ),
        (f.icrc_ok, "bad ICRC"),
        (f.op() == op::SEND_ONLY, "not SEND ONLY"),
        (f.ipv4_violation.is_none(), f.ipv4_violation.unwrap_or("")),
        (
            ecn_ok,
            "IP ECN not allowed for the agent's congestion control",
        ),
    ]
    .into_iter()
    .filter(|(ok, _)| !ok)
    .map(|(_, why)| why)
    .collect();
    if problems.is_empty() {
        pass(format!(
            "{}: pad 3 zero bytes, TVer 0, P_Key 0xffff, port 4791, ICRC ok, IP header as the \
             annex sets it (ECN {}); {}",
            f.describe(),
            f.ecn.name(),
            wcs_text(&wcs)
        ))
    } else {
        fail(format!("{}: {}", f.describe(), problems.join(", ")))
    }
}

/// The paths of `req.wire.traffic-class` and `req.wire.hop-limit`: DSCP 26 with ECN bits
/// 00, and a hop limit no stack sends by default (Linux 64, Windows 128).
const AV_TRAFFIC_CLASS: u8 = 26 << 2;
const AV_HOP_LIMIT: u8 = 9;

/// The SEND of a QP connected over `setup`'s path, ACKed.
fn av_send(ctx: &mut Ctx<'_>, setup: Setup) -> Result<Option<RxFrame>> {
    let c = connect(ctx, setup)?;
    ctx.write_mr(&c.mr, 0, &pattern(64, 4))?;
    ctx.post_send(c.work(SendKind::Send, 1, 0, 64))?;
    let sent = requests_until(ctx, c.spsn)?;
    let Some(f) = sent.into_iter().find(|f| f.psn() == c.spsn) else {
        return Ok(None);
    };
    c.ack(ctx, c.spsn, 1)?;
    Ok(Some(f))
}

fn traffic_class(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.traffic_class = Some(AV_TRAFFIC_CLASS);
    let Some(f) = av_send(ctx, s)? else {
        return fail("the SEND never arrived");
    };
    let dscp = AV_TRAFFIC_CLASS >> 2;
    verdict(
        f.dscp == dscp,
        format!(
            "{}: DSCP {}; the path's traffic class {AV_TRAFFIC_CLASS:#04x} gives {dscp}",
            f.describe(),
            f.dscp
        ),
    )
}

/// The address vector of a UD message is its work request's address handle.
fn ud_traffic_class(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.qp_type = QpType::Ud;
    let qkey = s.path.qkey;
    let c = connect(ctx, s)?;
    ctx.write_mr(&c.mr, 0, &pattern(64, 4))?;
    let mut send = c.work(SendKind::Send, 1, 0, 64);
    send.ud = Some(UdTarget {
        dest: ctx.env().tester_ip,
        qpn: c.tq,
        qkey,
        traffic_class: Some(AV_TRAFFIC_CLASS),
    });
    ctx.post_send(send)?;
    let is_ud_send = |f: &RxFrame| f.bth.opcode == Opcode::new(Transport::Ud, op::SEND_ONLY);
    let t = ctx.env().timing;
    let frames = ctx.collect_until(t.response, Duration::ZERO, |fs| fs.iter().any(is_ud_send))?;
    let Some(f) = frames.into_iter().find(is_ud_send) else {
        return fail("the UD SEND never arrived");
    };
    let dscp = AV_TRAFFIC_CLASS >> 2;
    verdict(
        f.dscp == dscp,
        format!(
            "{}: DSCP {}; the address handle's traffic class {AV_TRAFFIC_CLASS:#04x} gives \
             {dscp}",
            f.describe(),
            f.dscp
        ),
    )
}

fn hop_limit(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.hop_limit = AV_HOP_LIMIT;
    let Some(f) = av_send(ctx, s)? else {
        return fail("the SEND never arrived");
    };
    verdict(
        f.ttl == AV_HOP_LIMIT,
        format!(
            "{}: TTL {}; the path's hop limit is {AV_HOP_LIMIT}",
            f.describe(),
            f.ttl
        ),
    )
}

/// The rate check: after how many packets of a WRITE the CNPs begin, and how many CNPs (one
/// per packet then, as a switch marking every packet would make a notification point send).
/// The rate is compared over the packets before the CNPs and over those that follow CNPs: a
/// reaction point cuts at each CNP, and recovers (within a millisecond with mlx5's timers at a
/// low line rate) once they stop, so the window ends with them.
const CNP_AFTER: u32 = 20;
const CNPS: u32 = 8;
const RATE_PACKETS: u32 = CNP_AFTER + CNPS + 4;

/// Bytes per second over `frames`: the median packet over the median gap between arrivals, so
/// that a stall of either host inside the window (a loaded machine, a descheduled agent) does
/// not decide the verdict either way. `None` with fewer than two frames or no time between them.
fn rate(frames: &[RxFrame]) -> Option<f64> {
    fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> Option<T> {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(core::cmp::Ordering::Equal));
        v.get(v.len() / 2).copied()
    }
    let later = frames.get(1..)?;
    let gap = median(
        frames
            .windows(2)
            .map(|w| w[1].at.saturating_since(w[0].at).as_secs_f64())
            .collect(),
    )?;
    let size = median(later.iter().map(|f| f.payload.len()).collect())?;
    (gap > 0.0).then(|| size as f64 / gap)
}

/// How many times the rate check measures before it judges that CNPs do not slow the peer:
/// the tester's timestamps and the CNPs it sends are only as prompt as its own scheduling,
/// and a tester descheduled for a millisecond on a loaded host sees a burst where the peer
/// paced. A peer with no reaction shows none in any attempt; each attempt is in the evidence.
const RATE_ATTEMPTS: usize = 3;
/// Frames one attempt takes at most, per packet of its WRITE (duplicates included).
const RATE_FRAMES_PER_PACKET: u32 = 16;

fn cnp_rate(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    if ctx.env().cc == "none" {
        return Ok(Verdict::NotApplicable(
            "the agent reports no congestion control: the peer has no reaction point \
             (optional, A17.9.3)"
                .into(),
        ));
    }
    let mut seen = Vec::new();
    for _ in 0..RATE_ATTEMPTS {
        let (slowed, evidence) = rate_attempt(ctx)?;
        seen.push(evidence);
        if slowed {
            return pass(seen.join("; then "));
        }
    }
    fail(seen.join("; then "))
}

/// One measurement: a WRITE of RATE_PACKETS packets from a fresh QP, CNPs after CNP_AFTER of
/// them; whether the rate over the packets that followed CNPs fell below 85% of the rate
/// before, and the figures.
fn rate_attempt(ctx: &mut Ctx<'_>) -> Result<(bool, String)> {
    let mut s = Setup::rc();
    s.mr_len = RATE_PACKETS * 1024;
    let c = connect(ctx, s)?;
    ctx.post_send(c.work(SendKind::Write, 1, 0, RATE_PACKETS * c.mtu))?;
    // The tester answers as a prompt responder: each packet is ACKed as it arrives, so that
    // no timer of the peer's fires and only its pacing sets the rate.
    let mut first_seen: Vec<RxFrame> = Vec::new();
    let last = c.spsn.add(RATE_PACKETS - 1);
    let t = ctx.env().timing;
    // A peer that sends some packet again and again (each within t.response of the last)
    // must not hold the suite: after this many frames the attempt ends with what it saw.
    let mut budget = RATE_PACKETS * RATE_FRAMES_PER_PACKET;
    while let Some(f) = ctx.recv(t.response)? {
        budget = budget.saturating_sub(1);
        if budget == 0 {
            break;
        }
        if !is_request(&f) || first_seen.iter().any(|g| g.psn() == f.psn()) {
            continue;
        }
        let k = f.psn().distance(c.spsn) as u32;
        c.ack(ctx, f.psn(), u32::from(f.psn() == last))?;
        first_seen.push(f);
        if k + 1 >= CNP_AFTER && k + 1 < CNP_AFTER + CNPS {
            let mut bth = BthRepr::new(Opcode::CNP, c.qpn, Psn::new(0));
            bth.becn = true;
            let ext = ExtHeaders {
                cnp: Some(CnpRepr::default()),
                ..ExtHeaders::default()
            };
            ctx.send(IbPacketRepr::new(bth, ext, &[]))?;
        }
        if k + 1 >= RATE_PACKETS {
            break;
        }
    }
    first_seen.sort_by_key(|f| f.psn().distance(c.spsn));
    let at = |k: u32| (k as usize).min(first_seen.len());
    let before: Vec<RxFrame> = first_seen[..at(CNP_AFTER)].to_vec();
    // The first packet after the first CNP may have left at the old rate already.
    let during: Vec<RxFrame> = first_seen[at(CNP_AFTER + 1)..at(CNP_AFTER + CNPS + 1)].to_vec();
    let wcs = ctx.poll_cq(c.qpn, t.response.max(Duration::from_secs(1)))?;
    let (Some(r0), Some(r1)) = (rate(&before), rate(&during)) else {
        return Ok((
            false,
            format!(
                "cannot measure a rate: {} packets before the CNPs, {} while they came (or no \
                 time between them); {}",
                before.len(),
                during.len(),
                wcs_text(&wcs)
            ),
        ));
    };
    let evidence = format!(
        "median {:.3} Gb/s over the {} packets before the CNPs, {:.3} Gb/s over the {} that \
         each followed a CNP ({:.0}%); {}",
        r0 * 8e-9,
        before.len(),
        r1 * 8e-9,
        during.len(),
        100.0 * r1 / r0,
        wcs_text(&wcs)
    );
    Ok((r1 <= 0.85 * r0, evidence))
}
