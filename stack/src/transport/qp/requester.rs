//! The requester (IBA 9.7.4, 9.8.x): turns send work requests into request packets.
//!
//! PSNs are given to a work request when it starts; from then on any of its packets can be
//! rebuilt from the work request and a PSN alone, which is all go-back-N needs. Packets are
//! written straight into the caller's buffer; the payload is copied once, from the memory
//! region into that buffer.

use std::collections::VecDeque;

use super::{Ctx, QueuePair};
use crate::transport::attrs::{QpState, QpType};
use crate::transport::config::Transmit;
use crate::transport::cq::WcStatus;
use crate::transport::mr::{Access, MrError};
use crate::transport::wr::{SendOp, SendWr};
use crate::wire::opcode::{ATOMIC_WRITE_LEN, op};
use crate::wire::{
    AtomicEthRepr, BthRepr, DethRepr, ExtHeaders, FethRepr, FixedHeader, IethRepr, ImmDtRepr,
    Opcode, Psn, RethRepr, Transport, pad_for,
};

/// The largest message: 2^31 bytes (IBA 9.4.1 / `max_msg_sz` of rxe).
pub(crate) const MAX_MESSAGE: u64 = 1 << 31;

/// A posted send work request and, once started, the PSNs it occupies.
#[derive(Debug)]
pub(super) struct SendWqe {
    pub(super) wr: SendWr,
    /// Bytes the message moves (the sum of its SGE lengths).
    pub(super) len: u64,
    first_psn: Psn,
    /// PSNs the message occupies: its packets, or its READ response packets.
    npkts: u32,
}

impl SendWqe {
    pub(super) fn new(wr: SendWr) -> SendWqe {
        let len = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
        SendWqe {
            wr,
            len,
            first_psn: Psn::new(0),
            npkts: 0,
        }
    }

    /// The PSN of its first packet (given when it starts).
    pub(super) fn first_psn(&self) -> Psn {
        self.first_psn
    }

    pub(super) fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npkts.saturating_sub(1))
    }

    pub(super) fn contains(&self, psn: Psn) -> bool {
        let k = psn.distance(self.first_psn);
        k >= 0 && (k as u32) < self.npkts
    }
}

/// The send queue with the requester's positions in it; the completer moves `una` and goes
/// back through the methods below, and keeps its own state in [`super::completer`].
///
/// `wqes[..started]` have PSNs, in order and contiguous; `wqes[..cursor]` have been sent in
/// full. `una` is the oldest PSN not yet acknowledged, `max_sent` one past the newest PSN ever
/// sent; go-back-N moves `cursor`/`tx_psn` back and leaves `max_sent` alone.
#[derive(Debug, Default)]
pub(super) struct SendQueue {
    wqes: VecDeque<SendWqe>,
    started: usize,
    cursor: usize,
    tx_psn: Psn,
    next_psn: Psn,
    una: Psn,
    max_sent: Psn,
    /// Packets sent since the last one with AckReq.
    since_ack_req: u32,
    /// The next packet asks for an ACK (set after going back, so recovery is confirmed fast).
    ack_req_next: bool,
    /// A packet to send once more with AckReq (tail-loss probe).
    probe: Option<Psn>,
}

impl SendQueue {
    /// Sets every position to `psn` (RTR to RTS).
    pub(super) fn start_at(&mut self, psn: Psn) {
        self.tx_psn = psn;
        self.next_psn = psn;
        self.una = psn;
        self.max_sent = psn;
    }

    /// After a flush: nothing outstanding, PSNs continue from the next unassigned one.
    pub(super) fn reset_progress(&mut self) {
        self.started = 0;
        self.cursor = 0;
        self.start_at(self.next_psn);
        self.probe = None;
    }

    /// Work requests posted and not complete.
    pub(super) fn len(&self) -> usize {
        self.wqes.len()
    }

    pub(super) fn push(&mut self, wqe: SendWqe) {
        self.wqes.push_back(wqe);
    }

    pub(super) fn pop_front(&mut self) -> Option<SendWqe> {
        let wqe = self.wqes.pop_front()?;
        self.started = self.started.saturating_sub(1);
        self.cursor = self.cursor.saturating_sub(1);
        Some(wqe)
    }

    /// The oldest work request if it has started (it is the one responses complete).
    pub(super) fn oldest_started(&self) -> Option<&SendWqe> {
        self.wqes.front().filter(|_| self.started > 0)
    }

    /// Nothing started and not complete.
    pub(super) fn is_idle(&self) -> bool {
        self.started == 0
    }

    /// The oldest PSN not yet acknowledged.
    pub(super) fn una(&self) -> Psn {
        self.una
    }

    /// Everything before `psn` is acknowledged.
    pub(super) fn set_una(&mut self, psn: Psn) {
        self.una = psn;
    }

    /// One past the newest PSN ever sent.
    pub(super) fn max_sent(&self) -> Psn {
        self.max_sent
    }

    /// Packets sent and not acknowledged.
    pub(super) fn outstanding(&self) -> bool {
        self.una != self.max_sent
    }

    /// True if `psn` was sent and not yet acknowledged.
    pub(super) fn is_outstanding(&self, psn: Psn) -> bool {
        psn.distance(self.una) >= 0 && self.max_sent.distance(psn) > 0
    }

    /// The started work request holding `psn`.
    fn find(&self, psn: Psn) -> Option<usize> {
        self.wqes
            .iter()
            .take(self.started)
            .position(|w| w.contains(psn))
    }

    /// The started work request holding `psn`.
    pub(super) fn holding(&self, psn: Psn) -> Option<&SendWqe> {
        self.find(psn).map(|i| &self.wqes[i])
    }

    /// Sends `psn` once more with AckReq before anything else (a tail-loss probe).
    pub(super) fn set_probe(&mut self, psn: Psn) {
        self.probe = Some(psn);
    }

    /// READs and atomics among the first `i` work requests (all sent, none complete).
    fn rd_atomic_before(&self, i: usize) -> usize {
        self.wqes
            .iter()
            .take(i)
            .filter(|w| w.wr.op.needs_response())
            .count()
    }

    /// Go-back-N (IBA 9.7.5.1.2): transmit again from `psn`.
    pub(super) fn rewind(&mut self, psn: Psn) -> bool {
        let index = if psn == self.next_psn {
            Some(self.started)
        } else {
            self.find(psn)
        };
        let Some(index) = index else {
            return false;
        };
        self.cursor = index;
        self.tx_psn = psn;
        self.ack_req_next = true;
        self.probe = None;
        true
    }

    /// Acknowledged packets are never sent again: when an ACK overtakes a go-back (it was on
    /// its way before the loss was noticed), transmission continues after what it covers.
    pub(super) fn skip_acked(&mut self) {
        if self.tx_psn.distance(self.una) >= 0 {
            return;
        }
        let index = if self.una == self.next_psn {
            Some(self.started)
        } else {
            self.find(self.una)
        };
        if let Some(index) = index {
            self.cursor = index;
            self.tx_psn = self.una;
        }
    }

    /// Marks memory work request `i` (the first unstarted one) carried out: it occupies no
    /// PSN and has nothing left to send.
    fn start_local(&mut self, i: usize) {
        let w = &mut self.wqes[i];
        w.first_psn = self.next_psn;
        w.npkts = 0;
        self.started = i + 1;
        self.cursor = i + 1;
    }

    /// Gives work request `i` (the first unstarted one) its PSNs.
    fn start(&mut self, i: usize, mtu: u32) {
        let next = self.next_psn;
        let w = &mut self.wqes[i];
        w.first_psn = next;
        w.npkts = if w.wr.op.is_atomic() {
            1
        } else {
            w.len.div_ceil(u64::from(mtu)).clamp(1, u64::from(u32::MAX)) as u32
        };
        self.next_psn = next.add(w.npkts);
        self.started = i + 1;
    }
}

/// Where in its message a packet lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    Only,
    First,
    Middle,
    Last,
}

/// Everything needed to write one request packet.
#[derive(Debug, Clone, Copy)]
struct Plan {
    low: u8,
    /// Byte offset of the payload in the message.
    offset: u64,
    payload: usize,
    /// The packet ends a message (AckReq always set on RC, IBA 9.7.5.1.1 / rxe).
    last: bool,
    /// The PSN after this packet (after all response PSNs for a READ).
    next_psn: Psn,
    solicited: bool,
}

fn plan(w: &SendWqe, psn: Psn, mtu: u32) -> Plan {
    let k = psn.distance(w.first_psn).max(0) as u64;
    let offset = k * u64::from(mtu);
    let after = psn.next();
    let request = |low| Plan {
        low,
        offset,
        payload: 0,
        last: true,
        next_psn: after,
        solicited: false,
    };
    let position = match (k == 0, k + 1 >= u64::from(w.npkts)) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, false) => Position::Middle,
        (false, true) => Position::Last,
    };
    let ends = matches!(position, Position::Only | Position::Last);
    let pick = |only, first, middle, last| match position {
        Position::Only => only,
        Position::First => first,
        Position::Middle => middle,
        Position::Last => last,
    };
    let low = match w.wr.op {
        SendOp::Read { .. } => {
            return Plan {
                next_psn: w.first_psn.add(w.npkts),
                ..request(op::RDMA_READ_REQUEST)
            };
        }
        SendOp::CompareSwap { .. } => return request(op::COMPARE_SWAP),
        SendOp::FetchAdd { .. } => return request(op::FETCH_ADD),
        SendOp::Flush { .. } => return request(op::FLUSH),
        SendOp::AtomicWrite { .. } => {
            return Plan {
                payload: ATOMIC_WRITE_LEN,
                ..request(op::ATOMIC_WRITE)
            };
        }
        // Carried out by `run_local`, never planned into a packet.
        SendOp::LocalInv { .. } | SendOp::RegMr { .. } | SendOp::BindMw { .. } => {
            return request(op::SEND_ONLY);
        }
        SendOp::Send => pick(
            op::SEND_ONLY,
            op::SEND_FIRST,
            op::SEND_MIDDLE,
            op::SEND_LAST,
        ),
        SendOp::SendWithImm { .. } => pick(
            op::SEND_ONLY_WITH_IMMEDIATE,
            op::SEND_FIRST,
            op::SEND_MIDDLE,
            op::SEND_LAST_WITH_IMMEDIATE,
        ),
        SendOp::SendWithInv { .. } => pick(
            op::SEND_ONLY_WITH_INVALIDATE,
            op::SEND_FIRST,
            op::SEND_MIDDLE,
            op::SEND_LAST_WITH_INVALIDATE,
        ),
        SendOp::Write { .. } => pick(
            op::RDMA_WRITE_ONLY,
            op::RDMA_WRITE_FIRST,
            op::RDMA_WRITE_MIDDLE,
            op::RDMA_WRITE_LAST,
        ),
        SendOp::WriteWithImm { .. } => pick(
            op::RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            op::RDMA_WRITE_FIRST,
            op::RDMA_WRITE_MIDDLE,
            op::RDMA_WRITE_LAST_WITH_IMMEDIATE,
        ),
    };
    // Solicited events exist for SENDs and WRITEs with immediate only (IBA 9.2.1).
    let may_solicit = w.wr.op.is_send() || matches!(w.wr.op, SendOp::WriteWithImm { .. });
    Plan {
        low,
        offset,
        payload: w.len.saturating_sub(offset).min(u64::from(mtu)) as usize,
        last: ends,
        next_psn: after,
        solicited: ends && w.wr.solicited && may_solicit,
    }
}

/// The extension headers a request packet carries (IBA 9.3; which ones the opcode decides).
fn ext_headers(qp: &QueuePair, w: &SendWqe, p: &Plan) -> ExtHeaders {
    let mut ext = ExtHeaders::default();
    let first = matches!(
        p.low,
        op::RDMA_WRITE_FIRST | op::RDMA_WRITE_ONLY | op::RDMA_WRITE_ONLY_WITH_IMMEDIATE
    );
    match w.wr.op {
        SendOp::SendWithImm { imm } | SendOp::WriteWithImm { imm, .. } if p.last => {
            ext.immdt = Some(ImmDtRepr { imm });
        }
        SendOp::SendWithInv { rkey } if p.last => ext.ieth = Some(IethRepr { rkey }),
        SendOp::Read { remote_addr, rkey } => {
            ext.reth = Some(RethRepr {
                va: remote_addr.wrapping_add(p.offset),
                rkey,
                dma_len: w.len.saturating_sub(p.offset) as u32,
            });
        }
        SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => {
            ext.atomic_eth = Some(AtomicEthRepr {
                va: remote_addr,
                rkey,
                swap_add: swap,
                compare,
            });
        }
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => {
            ext.atomic_eth = Some(AtomicEthRepr {
                va: remote_addr,
                rkey,
                swap_add: add,
                compare: 0,
            });
        }
        SendOp::AtomicWrite {
            remote_addr, rkey, ..
        } => {
            ext.reth = Some(RethRepr {
                va: remote_addr,
                rkey,
                dma_len: ATOMIC_WRITE_LEN as u32,
            });
        }
        SendOp::Flush {
            remote_addr,
            rkey,
            len,
            placement,
            selectivity,
        } => {
            ext.reth = Some(RethRepr {
                va: remote_addr,
                rkey,
                dma_len: len,
            });
            ext.feth = Some(FethRepr::new(selectivity, placement));
        }
        _ => {}
    }
    if let SendOp::Write { remote_addr, rkey }
    | SendOp::WriteWithImm {
        remote_addr, rkey, ..
    } = w.wr.op
        && first
    {
        ext.reth = Some(RethRepr {
            va: remote_addr,
            rkey,
            dma_len: w.len as u32,
        });
    }
    if let Some(ud) = w.wr.ud.filter(|_| qp.init.qp_type == QpType::Ud) {
        // A Q_Key with the high bit set is replaced by the QP's own (IBA 10.2.5).
        let qkey = if ud.remote_qkey & 0x8000_0000 != 0 {
            qp.attrs.qkey
        } else {
            ud.remote_qkey
        };
        ext.deth = Some(DethRepr {
            qkey,
            resv: 0,
            src_qp: qp.qpn,
        });
    }
    ext
}

/// Why a packet could not be written.
enum EmitError {
    Mr,
    BufferTooSmall,
}

impl QueuePair {
    fn mtu(&self, ctx: &Ctx<'_>) -> u32 {
        match self.init.qp_type {
            QpType::Ud => ctx.config.port_mtu.bytes(),
            _ => self.attrs.path_mtu.bytes(),
        }
    }

    /// The next request packet of this queue pair, if it may send one now.
    pub(crate) fn poll_request(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return None;
        }
        let rc = self.init.qp_type == QpType::Rc;
        if rc && self.comp.rnr_waiting() {
            return None;
        }
        // A probe whose packet was acknowledged meanwhile (the ACK overtook the timer) is
        // moot: sent, it would arm the timers again with nothing outstanding.
        if let Some(psn) = self.sq.probe.take()
            && self.sq.is_outstanding(psn)
            && let Some(i) = self.sq.find(psn)
        {
            ctx.stats.probes += 1;
            return self.transmit(ctx, buf, i, psn, true).map(|(t, _)| t);
        }
        let i = loop {
            let i = self.sq.cursor;
            let w = self.sq.wqes.get(i)?;
            if !w.wr.op.is_local() {
                break i;
            }
            if i < self.sq.started {
                // Carried out already; going back over it does not repeat it.
                self.sq.cursor = i + 1;
            } else if self.state == QpState::Sqd || !self.run_local(ctx, i) {
                return None;
            }
        };
        let window_full = rc && !self.window_open();
        if i == self.sq.started {
            if self.state == QpState::Sqd || window_full {
                return None;
            }
            if !self.may_start(i) {
                return None;
            }
            if let Err(status) = self.validate(ctx, i) {
                // Earlier requests complete first so that completions stay in order.
                if i == 0 {
                    self.fail_local(ctx, status);
                }
                return None;
            }
            let mtu = self.mtu(ctx);
            self.sq.start(i, mtu);
        } else if window_full {
            return None;
        }
        let psn = self.sq.tx_psn;
        let (t, plan) = self.transmit(ctx, buf, i, psn, false)?;
        self.sq.tx_psn = plan.next_psn;
        if !self.sq.wqes[i].contains(plan.next_psn) {
            self.sq.cursor = i + 1;
            if !rc {
                // UC and UD complete once the last packet is sent (IBA 10.8.3.1).
                self.complete_send_front(ctx, WcStatus::Success);
            }
        }
        Some(t)
    }

    /// The in-flight window lets the next packet go (RC).
    fn window_open(&self) -> bool {
        let window = self.comp.window().max(1) as i32;
        self.sq.tx_psn.distance(self.sq.una) < window
    }

    /// Whether work request `i` (the first unstarted one) may start as far as earlier READs
    /// and atomics go. Only a READ, an atomic or a fenced request waits for them: the count
    /// walks the queue, so a SEND or WRITE does not take it.
    fn may_start(&self, i: usize) -> bool {
        let w = &self.sq.wqes[i];
        let needs_response = w.wr.op.needs_response();
        if !needs_response && !w.wr.fence {
            return true;
        }
        let limit = usize::from(self.attrs.max_rd_atomic.max(1));
        let busy = self.sq.rd_atomic_before(i);
        !((needs_response && busy >= limit) || (w.wr.fence && busy > 0))
    }

    /// True if the requester has a packet it would send now but for its turn (the pacer's,
    /// or the process's own on a busy host): the rest of a started message, what a go-back
    /// sends again, or a request that may start, within the window. It is not waiting for
    /// an answer then.
    pub(super) fn has_sendable(&self, ctx: &Ctx<'_>) -> bool {
        let sq = &self.sq;
        if !self.window_open() {
            return false;
        }
        if sq.cursor < sq.started {
            return true;
        }
        // As `poll_request` decides for the first unstarted request (a memory request is
        // carried out there, not sent; one that fails its checks waits to be the oldest).
        let i = sq.cursor;
        sq.wqes.get(i).is_some_and(|w| {
            self.state == QpState::Rts
                && !w.wr.op.is_local()
                && self.may_start(i)
                && self.validate(ctx, i).is_ok()
        })
    }

    /// Carries out memory work request `i` when the requester reaches it (as rxe's
    /// `rxe_do_local_ops`); a fenced one waits for everything before it to complete (rxe).
    /// It completes once everything before it has. A refused one completes in error (IBA
    /// 10.6.7.2: MW_BIND_ERR for a bind; rxe: LOC_QP_OP_ERR for the others) when it is the
    /// oldest, and the queue pair leaves RTS. Returns whether it was carried out.
    fn run_local(&mut self, ctx: &mut Ctx<'_>, i: usize) -> bool {
        let w = &self.sq.wqes[i];
        if w.wr.fence && i > 0 {
            return false;
        }
        let who = self.who();
        let done = match w.wr.op {
            SendOp::LocalInv { key } => ctx
                .mrs
                .invalidate(who, key)
                .map_err(|_| WcStatus::LocQpOpErr),
            SendOp::RegMr {
                mr,
                key,
                va,
                len,
                access,
            } => ctx
                .mrs
                .fast_register(who, mr, key, (va, len), access)
                .map_err(|_| WcStatus::LocQpOpErr),
            SendOp::BindMw { mw, rkey, bind } => ctx
                .mrs
                .bind(who, mw, rkey, &bind)
                .map(|_| ())
                .map_err(|_| WcStatus::MwBindErr),
            _ => Err(WcStatus::LocQpOpErr),
        };
        match done {
            Ok(()) => {
                self.sq.start_local(i);
                if i == 0 {
                    self.complete_send_front(ctx, WcStatus::Success);
                }
                true
            }
            Err(status) => {
                if i == 0 {
                    self.fail_local(ctx, status);
                }
                false
            }
        }
    }

    /// A local error on the oldest request: RC goes to ERR, UC and UD to SQE.
    fn fail_local(&mut self, ctx: &mut Ctx<'_>, status: WcStatus) {
        self.complete_send_front(ctx, status);
        if self.init.qp_type == QpType::Rc {
            self.enter_error(ctx);
        } else {
            self.enter_sq_error(ctx);
        }
    }

    /// The checks made when a work request starts (IBA 10.8.3): length and local keys.
    fn validate(&self, ctx: &Ctx<'_>, i: usize) -> Result<(), WcStatus> {
        let w = &self.sq.wqes[i];
        if w.len > MAX_MESSAGE
            || (self.init.qp_type == QpType::Ud && w.len > u64::from(self.mtu(ctx)))
            || (w.wr.op.is_atomic() && w.len < 8)
        {
            return Err(WcStatus::LocLenErr);
        }
        let need = if w.wr.op.needs_response() {
            Access::LOCAL_WRITE
        } else {
            Access::NONE
        };
        match ctx.mrs.check_sges(self.init.pd, &w.wr.sg_list, need) {
            Ok(_) => Ok(()),
            Err(_) => Err(WcStatus::LocProtErr),
        }
    }

    /// Writes the packet of work request `i` at `psn` and does the bookkeeping of sending it.
    fn transmit(
        &mut self,
        ctx: &mut Ctx<'_>,
        buf: &mut [u8],
        i: usize,
        psn: Psn,
        force_ack_req: bool,
    ) -> Option<(Transmit, Plan)> {
        let rc = self.init.qp_type == QpType::Rc;
        let w = &self.sq.wqes[i];
        let plan = plan(w, psn, self.mtu(ctx));
        let inflight = psn.distance(self.sq.una).max(0) as u32;
        let ack_req = rc
            && (force_ack_req
                || plan.last
                || self.sq.ack_req_next
                || self.sq.since_ack_req + 1 >= ctx.config.ack_req_every
                || inflight + 1 >= self.comp.window());
        let len = match self.emit(ctx, buf, i, psn, &plan, ack_req) {
            Ok(len) => len,
            Err(EmitError::BufferTooSmall) => return None,
            Err(EmitError::Mr) => {
                // The region changed under a started request: a local protection error.
                self.fail_local(ctx, WcStatus::LocProtErr);
                return None;
            }
        };
        let w = &self.sq.wqes[i];
        let a = &self.attrs;
        let (dest, dest_qp, traffic_class, hop_limit) = match (self.init.qp_type, w.wr.ud) {
            (QpType::Ud, Some(ud)) => (ud.addr, ud.remote_qpn, ud.traffic_class, ud.hop_limit),
            _ => (a.dest_addr, a.dest_qp, a.traffic_class, a.hop_limit),
        };
        let flow_label = a.flow_label;
        if rc {
            let fresh = plan.next_psn.distance(self.sq.max_sent) > 0;
            if !fresh {
                ctx.stats.retransmitted_packets += 1;
            }
            if ack_req {
                self.sq.since_ack_req = 0;
                self.sq.ack_req_next = false;
            } else {
                self.sq.since_ack_req += 1;
            }
            if fresh {
                self.sq.max_sent = plan.next_psn;
            }
            let responses = match plan.low {
                op::RDMA_READ_REQUEST | op::FLUSH | op::ATOMIC_WRITE => {
                    plan.next_psn.distance(psn).max(0) as u32
                }
                _ => 0,
            };
            self.on_transmit(ctx, psn, ack_req && fresh, responses);
        }
        let t = Transmit {
            dest,
            dest_qp,
            src_qp: self.qpn,
            len,
            flow_label,
            traffic_class,
            hop_limit,
        };
        Some((t, plan))
    }

    fn emit(
        &self,
        ctx: &Ctx<'_>,
        buf: &mut [u8],
        i: usize,
        psn: Psn,
        plan: &Plan,
        ack_req: bool,
    ) -> Result<usize, EmitError> {
        let w = &self.sq.wqes[i];
        let transport = self.init.qp_type.transport();
        let opcode = Opcode::new(transport, plan.low);
        let (dest_qp, ext) = match w.wr.ud.filter(|_| transport == Transport::Ud) {
            Some(ud) => (ud.remote_qpn, ext_headers(self, w, plan)),
            None => (self.attrs.dest_qp, ext_headers(self, w, plan)),
        };
        let mut bth = BthRepr::new(opcode, dest_qp, psn);
        bth.solicited = plan.solicited;
        bth.pkey = self.attrs.pkey;
        bth.ack_req = ack_req;
        bth.pad_count = pad_for(plan.payload);
        let headers = BthRepr::LEN + ext.len();
        let end = headers + plan.payload;
        let total = end + usize::from(bth.pad_count);
        if buf.len() < total {
            return Err(EmitError::BufferTooSmall);
        }
        bth.emit_unchecked(buf);
        ext.emit(opcode, &mut buf[BthRepr::LEN..])
            .map_err(|_| EmitError::BufferTooSmall)?;
        match w.wr.op {
            // The word travels in the work request, not in a region (`ibv_wr_atomic_write`
            // copies it at posting).
            SendOp::AtomicWrite { value, .. } => {
                buf[headers..end].copy_from_slice(&value.to_le_bytes());
            }
            _ => ctx
                .mrs
                .gather(
                    self.init.pd,
                    &w.wr.sg_list,
                    plan.offset,
                    &mut buf[headers..end],
                )
                .map_err(|_: MrError| EmitError::Mr)?,
        }
        buf[end..total].fill(0);
        Ok(total)
    }
}
