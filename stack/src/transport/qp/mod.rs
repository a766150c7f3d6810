//! One queue pair: its queues, its state, and what the requester, completer and responder
//! share (completions, the error state, flushing). The three roles are child modules, each an
//! `impl QueuePair` block for its part of the work (the shape of smoltcp's `iface/interface/`).

mod attrs;
mod completer;
mod requester;
mod responder;

use std::collections::VecDeque;

pub use attrs::{MAX_RD_ATOMIC, ModifyQp, Mtu, QpAttrs, QpState, QpType};
pub(crate) use attrs::{ModifyError, check_modify};
pub use completer::local_ack_timeout;
use requester::SendQueue;
pub(crate) use requester::SendWqe;
use responder::Responder;
pub use responder::{GRH_LEN, QpUsage};

use crate::transport::config::{Event, Stats, Transmit, TransportConfig};
use crate::transport::cq::{CompletionQueue, CqId, WcOpcode, WcStatus, WorkCompletion};
use crate::transport::mr::MrTable;
use crate::transport::time::Time;
use crate::transport::wr::{RecvWr, SendOp};
use crate::wire::Qpn;

/// Everything of the engine a queue pair touches while it works, borrowed for one call.
pub(crate) struct Ctx<'a> {
    pub now: Time,
    pub mrs: &'a mut MrTable,
    pub cqs: &'a mut [CompletionQueue],
    pub stats: &'a mut Stats,
    pub config: &'a TransportConfig,
    pub events: &'a mut VecDeque<Event>,
}

impl Ctx<'_> {
    pub fn complete(&mut self, cq: CqId, wc: WorkCompletion) {
        if let Some(cq) = self.cqs.get_mut(cq.0 as usize) {
            cq.push(wc);
        }
    }
}

/// Creation parameters (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInit {
    pub qp_type: QpType,
    pub send_cq: CqId,
    pub recv_cq: CqId,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    /// Every send work request completes, signaled or not.
    pub sq_sig_all: bool,
}

impl QpInit {
    /// A queue pair of `qp_type` using one CQ for both queues, with room for 1024 requests each.
    pub fn new(qp_type: QpType, cq: CqId) -> QpInit {
        QpInit {
            qp_type,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 1024,
            max_recv_wr: 1024,
            sq_sig_all: false,
        }
    }
}

#[derive(Debug)]
pub(crate) struct QueuePair {
    pub qpn: Qpn,
    pub init: QpInit,
    pub state: QpState,
    pub attrs: QpAttrs,
    pub sq: SendQueue,
    pub rq: VecDeque<RecvWr>,
    pub resp: Responder,
    /// Set on entering SQD; cleared once the drained event is raised.
    pub drain_pending: bool,
    /// The last packet sent was a response: a request goes next if one is ready.
    pub sent_response: bool,
}

pub(crate) fn send_wc_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. } => WcOpcode::Send,
        SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
        SendOp::CompareSwap { .. } => WcOpcode::CompSwap,
        SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
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
            rq: VecDeque::new(),
            resp: Responder::default(),
            drain_pending: false,
            sent_response: false,
        }
    }

    pub fn is_connected(&self) -> bool {
        self.init.qp_type != QpType::Ud
    }

    /// Completes the oldest send work request with `status`. Successful unsignaled requests
    /// leave no completion; errors always do.
    pub fn complete_send_front(&mut self, ctx: &mut Ctx<'_>, status: WcStatus) {
        let Some(wqe) = self.sq.pop_front() else {
            return;
        };
        if status == WcStatus::Success && !wqe.wr.signaled && !self.init.sq_sig_all {
            return;
        }
        let mut wc =
            WorkCompletion::new(wqe.wr.wr_id, status, send_wc_opcode(&wqe.wr.op), self.qpn);
        wc.byte_len = wqe.len.min(u64::from(u32::MAX)) as u32;
        ctx.complete(self.init.send_cq, wc);
    }

    pub fn complete_recv(&self, ctx: &mut Ctx<'_>, wr: &RecvWr, status: WcStatus) {
        let wc = WorkCompletion::new(wr.wr_id, status, WcOpcode::Recv, self.qpn);
        ctx.complete(self.init.recv_cq, wc);
    }

    /// Flushes every send work request with WR_FLUSH_ERR (IBA 10.3.1: error and SQE states).
    pub fn flush_send(&mut self, ctx: &mut Ctx<'_>) {
        while !self.sq.wqes.is_empty() {
            self.complete_send_front(ctx, WcStatus::WrFlushErr);
        }
        self.sq.reset_progress();
    }

    /// Enters the error state: everything outstanding is flushed, timers stop. The responder
    /// keeps a final NAK it queued, so that the peer learns why (IBA 9.9.3.1).
    pub fn enter_error(&mut self, ctx: &mut Ctx<'_>) {
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
    }

    /// Send queue error (UC and UD, IBA 10.3.1.8): the failed request's completion was made;
    /// the rest of the send queue is flushed and receives go on.
    pub fn enter_sq_error(&mut self, ctx: &mut Ctx<'_>) {
        self.state = QpState::Sqe;
        self.flush_send(ctx);
    }

    /// Back to RESET: everything is discarded without completions (IBA 10.3.1.1).
    pub fn reset(&mut self) {
        let (qpn, init) = (self.qpn, self.init);
        *self = QueuePair::new(qpn, init);
    }

    /// The next packet of this queue pair: responses and requests alternate when both wait,
    /// so that a long READ response does not hold back the QP's own requests (nor they it).
    pub fn poll_transmit(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
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
    pub fn check_drained(&mut self, ctx: &mut Ctx<'_>) {
        if self.drain_pending && self.state == QpState::Sqd && self.sq.is_idle() {
            self.drain_pending = false;
            ctx.events.push_back(Event::SqDrained { qpn: self.qpn });
        }
    }
}
