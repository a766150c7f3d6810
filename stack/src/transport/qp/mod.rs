//! One queue pair: its queues, its state, and what the requester, completer and responder
//! share (completions, the error state, flushing). The three roles are child modules, each an
//! `impl QueuePair` block for its part of the work (the shape of smoltcp's `iface/interface/`).

mod completer;
mod requester;
mod responder;

use std::collections::VecDeque;

use std::net::IpAddr;

use completer::Completer;
pub use completer::local_ack_timeout;
use requester::{SendQueue, SendWqe};
use responder::Responder;
pub use responder::{GRH_LEN, QpUsage};

use crate::time::Instant;
use crate::transport::attrs::{ModifyError, ModifyQp, QpAttrs, QpState, QpType, check_modify};
use crate::transport::config::{Event, Stats, Transmit, TransportConfig};
use crate::transport::cq::{CompletionQueue, CqId, WcOpcode, WcStatus, WorkCompletion};
use crate::transport::error::{DropReason, TransportError};
use crate::transport::mr::{Accessor, MrTable, PdId};
use crate::transport::sched::QpSlot;
use crate::transport::srq::{Srq, SrqId};
use crate::transport::wr::{RecvWr, SendOp, SendWr};
use crate::wire::{IbPacketRepr, Qpn};

/// Everything of the engine a queue pair touches while it works, borrowed for one call.
pub(crate) struct Ctx<'a> {
    pub now: Instant,
    /// The latest time any input brought the engine: what completions are stamped with
    /// (`now` is zero in a post, which may complete at once, flushed).
    pub clock: Instant,
    pub mrs: &'a mut MrTable,
    pub cqs: &'a mut [CompletionQueue],
    pub stats: &'a mut Stats,
    pub config: &'a TransportConfig,
    pub events: &'a mut VecDeque<Event>,
    pub srqs: &'a mut [Option<Srq>],
}

impl Ctx<'_> {
    pub fn complete(&mut self, cq: CqId, wc: WorkCompletion) {
        if let Some(cq) = self.cqs.get_mut(cq.0 as usize) {
            cq.push(wc, self.clock);
        }
    }
}

/// Creation parameters (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInit {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Its protection domain: the regions and windows its work requests and its peer's
    /// requests may use.
    pub pd: PdId,
    /// Where send work requests complete.
    pub send_cq: CqId,
    /// Where receive work requests complete.
    pub recv_cq: CqId,
    /// Send work requests outstanding at most.
    pub max_send_wr: u32,
    /// Receive work requests posted at most.
    pub max_recv_wr: u32,
    /// Every send work request completes, signaled or not.
    pub sq_sig_all: bool,
    /// Receives come from this shared receive queue instead of the queue pair's own.
    pub srq: Option<SrqId>,
}

impl QpInit {
    /// A queue pair of `qp_type` using one CQ for both queues, with room for 1024 requests each.
    pub fn new(qp_type: QpType, cq: CqId) -> QpInit {
        QpInit {
            qp_type,
            pd: PdId::DEFAULT,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 1024,
            max_recv_wr: 1024,
            sq_sig_all: false,
            srq: None,
        }
    }
}

/// A queue pair. What all three roles read (its number, type, state and attributes) is here;
/// what one role keeps is a field of that role's type, private to its module: the send queue
/// and its positions (requester), timers and window (completer), the expected PSN, the
/// message in progress and the queued responses (responder).
#[derive(Debug)]
pub(crate) struct QueuePair {
    qpn: Qpn,
    init: QpInit,
    state: QpState,
    attrs: QpAttrs,
    sq: SendQueue,
    comp: Completer,
    rq: VecDeque<RecvWr>,
    resp: Responder,
    /// Set on entering SQD; cleared once the drained event is raised.
    drain_pending: bool,
    /// The last packet sent was a response: a request goes next if one is ready.
    sent_response: bool,
    /// The engine's record of its timer and its turn to send (`sched.rs`).
    pub(crate) sched: QpSlot,
}

fn send_wc_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. } => WcOpcode::Send,
        SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
        SendOp::CompareSwap { .. } => WcOpcode::CompSwap,
        SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
        SendOp::AtomicWrite { .. } => WcOpcode::AtomicWrite,
        SendOp::Flush { .. } => WcOpcode::Flush,
        SendOp::LocalInv { .. } => WcOpcode::LocalInv,
        SendOp::RegMr { .. } => WcOpcode::RegMr,
        SendOp::BindMw { .. } => WcOpcode::BindMw,
    }
}

impl QueuePair {
    pub fn new(qpn: Qpn, init: QpInit) -> QueuePair {
        QueuePair {
            qpn,
            init,
            state: QpState::Reset,
            attrs: QpAttrs::default(),
            sq: SendQueue::default(),
            comp: Completer::default(),
            rq: VecDeque::new(),
            resp: Responder::default(),
            drain_pending: false,
            sent_response: false,
            sched: QpSlot::default(),
        }
    }

    /// Its protection domain.
    pub fn pd(&self) -> PdId {
        self.init.pd
    }

    /// The shared receive queue it draws receives from.
    pub fn srq(&self) -> Option<SrqId> {
        self.init.srq
    }

    /// Who this queue pair is to the memory table.
    fn who(&self) -> Accessor {
        Accessor {
            pd: self.init.pd,
            qpn: self.qpn,
        }
    }

    fn is_connected(&self) -> bool {
        self.init.qp_type != QpType::Ud
    }

    /// This queue pair's number.
    pub fn qpn(&self) -> Qpn {
        self.qpn
    }

    /// Its transport service.
    pub fn qp_type(&self) -> QpType {
        self.init.qp_type
    }

    /// The state and attributes (`ibv_query_qp`).
    pub fn query(&self) -> (QpState, QpAttrs) {
        (self.state, self.attrs)
    }

    /// The in-flight window of an RC requester, in packets.
    pub fn window(&self) -> u32 {
        self.comp.window()
    }

    /// The responder's expected PSN.
    pub fn expected_psn(&self) -> crate::wire::Psn {
        self.resp.expected_psn()
    }

    /// What the queue pair holds.
    pub fn usage(&self) -> QpUsage {
        QpUsage {
            send_wqes: self.sq.len(),
            recv_wqes: self.rq.len(),
            ..self.resp.usage()
        }
    }

    /// `ibv_modify_qp`: checks the transition and attributes (IBA 10.3.1, 11.2.4.2), then
    /// applies them; a refused modification changes nothing.
    pub fn modify(&mut self, ctx: &mut Ctx<'_>, modify: &ModifyQp) -> Result<(), TransportError> {
        let (qpn, from) = (self.qpn, self.state);
        let to = check_modify(self.init.qp_type, from, modify).map_err(|e| match e {
            ModifyError::Transition(to) => TransportError::BadTransition { qpn, from, to },
            ModifyError::Attr(attr, reason) => TransportError::BadAttr { qpn, attr, reason },
        })?;
        if to == QpState::Reset {
            self.reset();
            return Ok(());
        }
        modify.apply(&mut self.attrs);
        match (from, to) {
            (_, QpState::Err) => self.enter_error(ctx),
            (QpState::Init, QpState::Rtr) => self.resp.start_at(self.attrs.rq_psn),
            (QpState::Rtr, QpState::Rts) => {
                self.sq.start_at(self.attrs.sq_psn);
                let window = ctx.config.max_inflight_packets.max(1);
                self.comp
                    .start(window, self.attrs.retry_cnt, self.attrs.rnr_retry);
            }
            (QpState::Rts, QpState::Sqd) => self.drain_pending = true,
            _ => {}
        }
        if to != QpState::Err {
            self.state = to;
        }
        self.check_drained(ctx);
        Ok(())
    }

    /// `ibv_post_send`. In ERR and SQE the request completes at once with WR_FLUSH_ERR.
    pub fn post_send(&mut self, ctx: &mut Ctx<'_>, wr: SendWr) -> Result<(), TransportError> {
        let qpn = self.qpn;
        let bad = |reason| Err(TransportError::BadWr { qpn, reason });
        if wr.sg_list.len() > ctx.config.max_sge {
            return bad("too many scatter/gather entries");
        }
        // Memory work requests as rxe allows them: all on RC, BIND_MW on UC too.
        let allowed = match self.init.qp_type {
            QpType::Rc => true,
            QpType::Uc => {
                wr.op.is_send() || wr.op.is_write() || matches!(wr.op, SendOp::BindMw { .. })
            }
            QpType::Ud => matches!(wr.op, SendOp::Send | SendOp::SendWithImm { .. }),
        };
        if !allowed {
            return bad("operation not available on this transport");
        }
        if self.init.qp_type == QpType::Ud && wr.ud.is_none() {
            return bad("UD work requests need a destination");
        }
        match self.state {
            QpState::Rts | QpState::Sqd => {}
            QpState::Err | QpState::Sqe => {
                let mut wc = WorkCompletion::new(
                    wr.wr_id,
                    WcStatus::WrFlushErr,
                    send_wc_opcode(&wr.op),
                    qpn,
                );
                wc.byte_len = 0;
                ctx.complete(self.init.send_cq, wc);
                return Ok(());
            }
            state => {
                return Err(TransportError::BadState {
                    qpn,
                    state,
                    what: "posting a send",
                });
            }
        }
        if self.sq.len() >= self.init.max_send_wr as usize {
            return Err(TransportError::QueueFull { qpn, queue: "send" });
        }
        self.sq.push(SendWqe::new(wr));
        Ok(())
    }

    /// `ibv_post_recv`. In ERR the request completes at once with WR_FLUSH_ERR.
    pub fn post_recv(&mut self, ctx: &mut Ctx<'_>, wr: RecvWr) -> Result<(), TransportError> {
        let qpn = self.qpn;
        if self.init.srq.is_some() {
            return Err(TransportError::BadWr {
                qpn,
                reason: "the queue pair receives from a shared receive queue",
            });
        }
        if wr.sg_list.len() > ctx.config.max_sge {
            return Err(TransportError::BadWr {
                qpn,
                reason: "too many scatter/gather entries",
            });
        }
        match self.state {
            QpState::Reset => Err(TransportError::BadState {
                qpn,
                state: QpState::Reset,
                what: "posting a receive",
            }),
            QpState::Err => {
                let wc = WorkCompletion::new(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qpn);
                ctx.complete(self.init.recv_cq, wc);
                Ok(())
            }
            _ if self.rq.len() >= self.init.max_recv_wr as usize => {
                Err(TransportError::QueueFull {
                    qpn,
                    queue: "receive",
                })
            }
            _ => {
                self.rq.push_back(wr);
                Ok(())
            }
        }
    }

    /// A packet for this queue pair from `src` (its IP header as received, or empty): a
    /// request goes to the responder, anything else to the completer, once the transport,
    /// partition, source and state allow it.
    pub fn handle_packet(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &IbPacketRepr<'_>,
        src: IpAddr,
        ip_header: &[u8],
    ) -> Result<(), DropReason> {
        let transport = self.init.qp_type.transport();
        if pkt.bth.opcode.transport() != transport {
            return Err(DropReason::WrongTransport);
        }
        // IBA 9.6.1.1 / 10.9.3: the P_Key must match the QP's partition.
        if !self.attrs.pkey.matches(pkt.bth.pkey) {
            return Err(DropReason::PKeyMismatch);
        }
        if self.is_connected() && src != self.attrs.dest_addr {
            return Err(DropReason::WrongSource);
        }
        if pkt.bth.opcode.is_request() {
            match self.state {
                QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe => {}
                state => return Err(DropReason::NotReady(state)),
            }
            self.handle_request(ctx, pkt, src, ip_header)
        } else {
            match self.state {
                QpState::Rts | QpState::Sqd => {}
                state => return Err(DropReason::NotReady(state)),
            }
            self.handle_response(ctx, pkt);
            Ok(())
        }
    }

    /// Completes the oldest send work request with `status`. Successful unsignaled requests
    /// leave no completion; errors always do. Memory work requests already carried out
    /// behind it complete with it: they wait for no response, only for what precedes them.
    fn complete_send_front(&mut self, ctx: &mut Ctx<'_>, status: WcStatus) {
        self.complete_one_send(ctx, status);
        if status == WcStatus::Success {
            while self.sq.oldest_started().is_some_and(|w| w.wr.op.is_local()) {
                self.complete_one_send(ctx, WcStatus::Success);
            }
        }
    }

    fn complete_one_send(&mut self, ctx: &mut Ctx<'_>, status: WcStatus) {
        let Some(wqe) = self.sq.pop_front() else {
            return;
        };
        if status != WcStatus::Success || wqe.wr.signaled || self.init.sq_sig_all {
            let mut wc =
                WorkCompletion::new(wqe.wr.wr_id, status, send_wc_opcode(&wqe.wr.op), self.qpn);
            wc.byte_len = wqe.len.min(u64::from(u32::MAX)) as u32;
            ctx.complete(self.init.send_cq, wc);
        }
    }

    /// The next receive work request: from the shared receive queue if the queue pair has
    /// one (raising its limit event when due), else its own.
    fn take_recv(&mut self, ctx: &mut Ctx<'_>) -> Option<RecvWr> {
        match self.init.srq {
            Some(id) => ctx
                .srqs
                .get_mut(id.0 as usize)?
                .as_mut()?
                .pop(id, ctx.events),
            None => self.rq.pop_front(),
        }
    }

    /// A receive is waiting.
    fn has_recv(&self, ctx: &Ctx<'_>) -> bool {
        match self.init.srq {
            Some(id) => ctx
                .srqs
                .get(id.0 as usize)
                .and_then(Option::as_ref)
                .is_some_and(|srq| !srq.is_empty()),
            None => !self.rq.is_empty(),
        }
    }

    fn complete_recv(&self, ctx: &mut Ctx<'_>, wr: &RecvWr, status: WcStatus) {
        let wc = WorkCompletion::new(wr.wr_id, status, WcOpcode::Recv, self.qpn);
        ctx.complete(self.init.recv_cq, wc);
    }

    /// Flushes every send work request with WR_FLUSH_ERR (IBA 10.3.1: error and SQE states).
    fn flush_send(&mut self, ctx: &mut Ctx<'_>) {
        while self.sq.len() > 0 {
            self.complete_send_front(ctx, WcStatus::WrFlushErr);
        }
        self.sq.reset_progress();
        self.comp.stop();
    }

    /// Enters the error state: everything outstanding is flushed, timers stop. The responder
    /// keeps a final NAK it queued, so that the peer learns why (IBA 9.9.3.1).
    fn enter_error(&mut self, ctx: &mut Ctx<'_>) {
        if self.state == QpState::Err {
            return;
        }
        self.state = QpState::Err;
        self.flush_send(ctx);
        if let Some(wr) = self.resp.abandon_message() {
            self.complete_recv(ctx, &wr, WcStatus::WrFlushErr);
        }
        while let Some(wr) = self.rq.pop_front() {
            self.complete_recv(ctx, &wr, WcStatus::WrFlushErr);
        }
        self.resp.keep_only_final_nak();
        ctx.events.push_back(Event::QpFatal { qpn: self.qpn });
        if self.init.srq.is_some() {
            // The receive in progress was its last one; the rest stay in the shared queue.
            ctx.events
                .push_back(Event::QpLastWqeReached { qpn: self.qpn });
        }
    }

    /// Send queue error (UC and UD, IBA 10.3.1.8): the failed request's completion was made;
    /// the rest of the send queue is flushed and receives go on.
    fn enter_sq_error(&mut self, ctx: &mut Ctx<'_>) {
        self.state = QpState::Sqe;
        self.flush_send(ctx);
    }

    /// Back to RESET: everything is discarded without completions (IBA 10.3.1.1).
    fn reset(&mut self) {
        let (qpn, init, sched) = (self.qpn, self.init, self.sched);
        *self = QueuePair::new(qpn, init);
        self.sched = sched;
    }

    /// The next packet of this queue pair: responses and requests alternate when both wait,
    /// so that a long READ response does not hold back the QP's own requests (nor they it).
    pub fn poll_transmit(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        if self.state == QpState::Reset {
            return None;
        }
        if self.sent_response || !self.resp.has_responses() {
            let t = self.poll_request(ctx, buf);
            self.check_drained(ctx);
            if t.is_some() {
                self.sent_response = false;
                return t;
            }
        }
        let t = self.poll_response(ctx, buf);
        self.sent_response = t.is_some();
        t
    }

    /// Raises the SQ drained event once a QP in SQD has nothing outstanding.
    fn check_drained(&mut self, ctx: &mut Ctx<'_>) {
        if self.drain_pending && self.state == QpState::Sqd && self.sq.is_idle() {
            self.drain_pending = false;
            ctx.events.push_back(Event::SqDrained { qpn: self.qpn });
        }
    }
}
