//! The checks, by subject, and what they share: bringing up a peer QP connected to a
//! made-up QP of the tester, and building the packets the tester sends.
//!
//! Responder checks (`resp.*`) play the requester: the tester sends crafted requests to a QP
//! the agent created and judges the responses (and, through the agent, the QP's state,
//! completions and memory). Requester checks (`req.*`) have the agent post work requests and
//! play the responder with crafted ACKs, NAKs and READ responses.

use core::time::Duration;

use super::harness::{CheckError, Ctx, Mr, RxFrame, describe_all, packet};
use super::proto::{Completion, PostSend, SendKind};
use super::suite::{Check, Verdict};
use crate::endpoint::connect::QpPath;
use crate::transport::{Access, Mtu, QpType};
use crate::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, ExtHeaders, Msn, NakCode, Psn, Qpn, RethRepr,
    Syndrome, Transport, opcode::op,
};
use std::net::{IpAddr, Ipv4Addr};

mod access;
mod ack;
mod cnp;
mod drop;
mod dup;
mod length;
mod opseq;
mod psn;
mod req_recovery;
mod req_timers;
mod req_wire;
mod rnr;
mod unreliable;

/// Every check, responder side first.
pub(crate) fn all() -> Vec<Check> {
    [
        psn::CHECKS,
        dup::CHECKS,
        access::CHECKS,
        opseq::CHECKS,
        length::CHECKS,
        rnr::CHECKS,
        drop::CHECKS,
        unreliable::CHECKS,
        ack::CHECKS,
        cnp::CHECKS,
        req_recovery::CHECKS,
        req_timers::CHECKS,
        req_wire::CHECKS,
    ]
    .concat()
}

type Result<T> = core::result::Result<T, CheckError>;

/// The first PSN of the tester's requests (chosen away from 0 so that a peer that ignores
/// rq_psn shows).
const TESTER_PSN: u32 = 0x00_a000;
/// The peer's first send PSN.
const PEER_PSN: u32 = 0x00_b000;

/// How a peer QP is set up for a check: its path (the destination is filled in when it
/// connects) and its region.
#[derive(Debug, Clone, Copy)]
struct Setup {
    path: QpPath,
    /// The region's access rights.
    mr_access: Access,
    mr_len: u32,
    mr_fill: u8,
}

impl Setup {
    /// An RC QP, path MTU 1024, every remote right, four READs/atomics each way, local ACK
    /// timeout 16 (268 ms), retries forever.
    fn rc() -> Setup {
        let nowhere = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        let (rq, sq) = (Psn::new(TESTER_PSN), Psn::new(PEER_PSN));
        let mut path = QpPath::new(QpType::Rc, nowhere, Qpn::new(0), rq, sq, Mtu::M1024);
        path.access = Access::ALL;
        path.max_rd_atomic = 4;
        path.max_dest_rd_atomic = 4;
        path.timeout = 16;
        Setup {
            path,
            mr_access: Access::ALL,
            mr_len: 4096,
            mr_fill: 0,
        }
    }
}

/// A peer QP connected to a tester QP, and a region on the peer.
#[derive(Debug, Clone, Copy)]
struct Conn {
    /// The peer's QP.
    qpn: Qpn,
    /// The tester's QP.
    tq: Qpn,
    /// The PSN the peer's responder expects first.
    epsn: Psn,
    /// The peer's first send PSN.
    spsn: Psn,
    mr: Mr,
    mtu: u32,
}

fn connect(ctx: &mut Ctx<'_>, s: Setup) -> Result<Conn> {
    let mr = ctx.reg_mr(s.mr_len, s.mr_access, s.mr_fill)?;
    let qpn = ctx.create_qp(s.path.qp_type)?;
    let tq = ctx.tester_qpn();
    let mut path = s.path;
    path.dest = ctx.env().tester_ip;
    path.dest_qp = tq;
    ctx.connect_qp(qpn, path)?;
    Ok(Conn {
        qpn,
        tq,
        epsn: path.rq_psn,
        spsn: path.sq_psn,
        mr,
        mtu: path.mtu.bytes(),
    })
}

fn rc(ctx: &mut Ctx<'_>) -> Result<Conn> {
    connect(ctx, Setup::rc())
}

fn reth(va: u64, rkey: u32, dma_len: u32) -> ExtHeaders {
    ExtHeaders {
        reth: Some(RethRepr { va, rkey, dma_len }),
        ..ExtHeaders::default()
    }
}

fn atomic_eth(va: u64, rkey: u32, swap_add: u64, compare: u64) -> ExtHeaders {
    ExtHeaders {
        atomic_eth: Some(AtomicEthRepr {
            va,
            rkey,
            swap_add,
            compare,
        }),
        ..ExtHeaders::default()
    }
}

fn aeth(syndrome: Syndrome, msn: u32) -> ExtHeaders {
    ExtHeaders {
        aeth: Some(AethRepr {
            syndrome,
            msn: Msn::new(msn),
        }),
        ..ExtHeaders::default()
    }
}

/// A recognisable pattern of `len` bytes, different for each `seed`.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

impl Conn {
    /// An RC request from the tester to the peer's QP.
    fn request(
        &self,
        ctx: &mut Ctx<'_>,
        low: u8,
        psn: Psn,
        ext: ExtHeaders,
        payload: &[u8],
        ack_req: bool,
    ) -> Result<u64> {
        ctx.send(packet(
            Transport::Rc,
            low,
            self.qpn,
            psn,
            ext,
            payload,
            ack_req,
        ))
    }

    /// RDMA WRITE Only of `data` at `offset` of the peer's region, with AckReq.
    fn write(&self, ctx: &mut Ctx<'_>, psn: Psn, offset: u64, data: &[u8]) -> Result<u64> {
        let ext = reth(self.mr.addr + offset, self.mr.rkey, data.len() as u32);
        self.request(ctx, op::RDMA_WRITE_ONLY, psn, ext, data, true)
    }

    /// SEND Only with AckReq.
    fn send(&self, ctx: &mut Ctx<'_>, psn: Psn, data: &[u8]) -> Result<u64> {
        self.request(ctx, op::SEND_ONLY, psn, ExtHeaders::default(), data, true)
    }

    /// RDMA READ of `len` bytes at `offset` of the peer's region.
    fn read(&self, ctx: &mut Ctx<'_>, psn: Psn, offset: u64, len: u32) -> Result<u64> {
        let ext = reth(self.mr.addr + offset, self.mr.rkey, len);
        self.request(ctx, op::RDMA_READ_REQUEST, psn, ext, &[], true)
    }

    /// FETCH_ADD on the word at `offset`.
    fn fetch_add(&self, ctx: &mut Ctx<'_>, psn: Psn, offset: u64, add: u64) -> Result<u64> {
        let ext = atomic_eth(self.mr.addr + offset, self.mr.rkey, add, 0);
        self.request(ctx, op::FETCH_ADD, psn, ext, &[], true)
    }

    /// The peer QP's state, as the agent reports it, in words for the evidence.
    fn state(&self, ctx: &mut Ctx<'_>) -> Result<String> {
        Ok(super::proto::state_name(ctx.query_qp(self.qpn)?).to_owned())
    }
}

/// Collects until a frame matches `want` (then the settle time), up to the response timeout.
fn until(ctx: &mut Ctx<'_>, want: impl Fn(&RxFrame) -> bool) -> Result<Vec<RxFrame>> {
    let t = ctx.env().timing;
    ctx.collect_until(t.response, t.settle, |fs| fs.last().is_some_and(&want))
}

/// What the peer sends in the quiet window (where it should send nothing).
fn quiet(ctx: &mut Ctx<'_>) -> Result<Vec<RxFrame>> {
    let t = ctx.env().timing.quiet;
    ctx.collect(t)
}

fn pass(e: impl Into<String>) -> Result<Verdict> {
    Ok(Verdict::Pass(e.into()))
}

fn fail(e: impl Into<String>) -> Result<Verdict> {
    Ok(Verdict::Fail(e.into()))
}

/// Pass or fail on `ok`, with the same evidence either way.
fn verdict(ok: bool, evidence: String) -> Result<Verdict> {
    if ok { pass(evidence) } else { fail(evidence) }
}

/// How long, in milliseconds, for the evidence.
fn ms(d: Duration) -> String {
    match d.as_secs_f64() * 1e3 {
        m if m < 1.0 => format!("{:.0} us", m * 1e3),
        m => format!("{m:.1} ms"),
    }
}

/// Any response at all (ACK, NAK, READ response, atomic ACK).
fn is_response(f: &RxFrame) -> bool {
    f.is_ack() || f.is_any_nak() || f.op() != op::ACKNOWLEDGE
}

/// The first response must be a NAK `code` for the request at `psn`, the region's first
/// `mem` bytes still zero, and the QP in ERR (a class C responder error, IBA 9.9.3.1).
fn judge(
    ctx: &mut Ctx<'_>,
    c: &Conn,
    what: &str,
    (code, psn): (NakCode, Psn),
    mem: u32,
) -> Result<Verdict> {
    let frames = until(ctx, is_response)?;
    let bytes = if mem > 0 {
        ctx.read_mr(&c.mr, 0, mem)?
    } else {
        Vec::new()
    };
    let state = c.state(ctx)?;
    let Some(f) = frames.iter().find(|f| is_response(f)) else {
        return fail(format!(
            "{what}: no response (expected NAK {})",
            code.name()
        ));
    };
    if !f.is_nak(code) || f.psn() != psn {
        return fail(format!(
            "{what}: {} (expected NAK {} psn {:#x})",
            describe_all(&frames),
            code.name(),
            psn.value()
        ));
    }
    if bytes.iter().any(|&b| b != 0) {
        return fail(format!("{what}: {}, but memory was written", f.describe()));
    }
    if state != "ERR" {
        return fail(format!(
            "{what}: {}, but the QP is {state}, not ERR (a class C error ends the QP)",
            f.describe()
        ));
    }
    pass(format!("{what}: {}; QP {state}", f.describe()))
}

/// Where the tester claims its memory is, in the peer's RDMA requests (the tester keeps none).
const TESTER_VA: u64 = 0x7e57_0000;
const TESTER_RKEY: u32 = 0x7e57;

impl Conn {
    /// A work request for the agent: `len` bytes at `offset` of the peer's region, RDMA and
    /// atomics aimed at the tester's made-up memory.
    fn work(&self, kind: SendKind, wr_id: u64, offset: u32, len: u32) -> PostSend {
        let mut p = PostSend::new(self.qpn, wr_id, kind, self.mr.handle, offset, len);
        p.remote_addr = TESTER_VA;
        p.rkey = TESTER_RKEY;
        p
    }

    /// An ACKNOWLEDGE from the tester's responder with `syndrome`.
    fn acknowledge(
        &self,
        ctx: &mut Ctx<'_>,
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
    ) -> Result<u64> {
        let p = packet(
            Transport::Rc,
            op::ACKNOWLEDGE,
            self.qpn,
            psn,
            aeth(syndrome, msn),
            &[],
            false,
        );
        ctx.send(p)
    }

    /// A positive ACK.
    fn ack(&self, ctx: &mut Ctx<'_>, psn: Psn, msn: u32) -> Result<u64> {
        let ack = Syndrome::Ack {
            credits: Syndrome::UNLIMITED_CREDITS,
        };
        self.acknowledge(ctx, psn, ack, msn)
    }

    /// An ATOMIC ACKNOWLEDGE carrying `orig`, the word as it was before the operation.
    fn atomic_ack(&self, ctx: &mut Ctx<'_>, psn: Psn, orig: u64, msn: u32) -> Result<u64> {
        let mut ext = aeth(
            Syndrome::Ack {
                credits: Syndrome::UNLIMITED_CREDITS,
            },
            msn,
        );
        ext.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
        self.request(ctx, op::ATOMIC_ACKNOWLEDGE, psn, ext, &[], false)
    }

    /// A READ response packet (`low` one of the RDMA_READ_RESPONSE opcodes); FIRST, LAST and
    /// ONLY carry an AETH.
    fn read_response(
        &self,
        ctx: &mut Ctx<'_>,
        low: u8,
        psn: Psn,
        payload: &[u8],
        msn: u32,
    ) -> Result<u64> {
        let ext = if low == op::RDMA_READ_RESPONSE_MIDDLE {
            ExtHeaders::default()
        } else {
            aeth(
                Syndrome::Ack {
                    credits: Syndrome::UNLIMITED_CREDITS,
                },
                msn,
            )
        };
        self.request(ctx, low, psn, ext, payload, false)
    }
}

/// True for a request packet (what the peer's requester sends).
fn is_request(f: &RxFrame) -> bool {
    f.bth.opcode.is_request()
}

/// The PSNs of `frames`, for the evidence.
fn psns(frames: &[RxFrame]) -> String {
    let v: Vec<String> = frames
        .iter()
        .map(|f| format!("{:#x}", f.psn().value()))
        .collect();
    format!("[{}]", v.join(" "))
}

/// The completions, for the evidence.
fn wcs_text(wcs: &[Completion]) -> String {
    let v: Vec<String> = wcs
        .iter()
        .map(|w| format!("{}:{}", w.wr_id, w.status))
        .collect();
    format!("[{}]", v.join(" "))
}

/// The peer's request packets until one with `psn` arrives (up to the response timeout). No
/// settle time: a responder answers at once, and a requester left waiting would rightly
/// start retransmitting.
fn requests_until(ctx: &mut Ctx<'_>, psn: Psn) -> Result<Vec<RxFrame>> {
    requests_until_all(ctx, psn, psn)
}

/// The peer's request packets until every PSN from `first` to `last` has arrived at least
/// once. A requester may resend a packet early (a timer of its own), so the order and number
/// of transmissions is not judged here; [`first_transmissions`] keeps the first of each.
fn requests_until_all(ctx: &mut Ctx<'_>, first: Psn, last: Psn) -> Result<Vec<RxFrame>> {
    let t = ctx.env().timing;
    let span = last.distance(first).max(0) as usize + 1;
    let frames = ctx.collect_until(t.response, Duration::ZERO, |fs| {
        let mut seen = vec![false; span];
        for f in fs.iter().filter(|f| is_request(f)) {
            let k = f.psn().distance(first);
            if (0..span as i32).contains(&k) {
                seen[k as usize] = true;
            }
        }
        seen.iter().all(|&s| s)
    })?;
    Ok(frames.into_iter().filter(is_request).collect())
}

/// Each PSN's first transmission, in the order they came.
fn first_transmissions(frames: &[RxFrame]) -> Vec<RxFrame> {
    let mut out: Vec<RxFrame> = Vec::new();
    for f in frames {
        if !out.iter().any(|g| g.psn() == f.psn()) {
            out.push(f.clone());
        }
    }
    out
}

/// The first transmission of the peer's request with `psn`, up to the response timeout.
fn first_request(ctx: &mut Ctx<'_>, psn: Psn) -> Result<Option<RxFrame>> {
    let t = ctx.env().timing;
    Ok(ctx
        .wait_for(t.response, |f| is_request(f) && f.psn() == psn)?
        .1)
}
