//! Completion queues and work completions (IBA 11.4.2.1, `ibv_wc`).

use std::collections::VecDeque;
use std::net::IpAddr;

use crate::time::Instant;
use crate::wire::Qpn;

/// A work completion's status (IBA Table 100 / `ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// The work request completed.
    Success,
    /// The message did not fit the receive buffer, or a UD message exceeded the MTU.
    LocLenErr,
    /// An internal inconsistency of the local QP (for example a message longer than 2^31).
    LocQpOpErr,
    /// A local scatter/gather entry failed its key, bounds or rights check.
    LocProtErr,
    /// The QP entered the error state before this work request completed.
    WrFlushErr,
    /// The responder answered with something the requester did not expect.
    BadRespErr,
    /// The responder NAKed with Invalid Request.
    RemInvReqErr,
    /// The responder NAKed with Remote Access Error.
    RemAccessErr,
    /// The responder NAKed with Remote Operational Error.
    RemOpErr,
    /// The local ACK timeout expired retry_cnt + 1 times without progress.
    RetryExcErr,
    /// RNR NAKs exceeded rnr_retry.
    RnrRetryExcErr,
    /// A BIND_MW work request was refused (IBA 10.6.7.2; rxe's `IB_WC_MW_BIND_ERR`).
    MwBindErr,
}

impl WcStatus {
    /// The name libibverbs' `ibv_wc_status_str` uses, for logs and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            WcStatus::Success => "SUCCESS",
            WcStatus::LocLenErr => "LOC_LEN_ERR",
            WcStatus::LocQpOpErr => "LOC_QP_OP_ERR",
            WcStatus::LocProtErr => "LOC_PROT_ERR",
            WcStatus::WrFlushErr => "WR_FLUSH_ERR",
            WcStatus::BadRespErr => "BAD_RESP_ERR",
            WcStatus::RemInvReqErr => "REM_INV_REQ_ERR",
            WcStatus::RemAccessErr => "REM_ACCESS_ERR",
            WcStatus::RemOpErr => "REM_OP_ERR",
            WcStatus::RetryExcErr => "RETRY_EXC_ERR",
            WcStatus::RnrRetryExcErr => "RNR_RETRY_EXC_ERR",
            WcStatus::MwBindErr => "MW_BIND_ERR",
        }
    }
}

/// What the completed work request did (`ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A SEND (any kind).
    Send,
    /// An RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// An RDMA READ.
    RdmaRead,
    /// A compare and swap.
    CompSwap,
    /// A fetch and add.
    FetchAdd,
    /// A receive consumed by a SEND.
    Recv,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm,
    /// A BIND_MW work request.
    BindMw,
    /// A LOCAL_INV work request.
    LocalInv,
    /// A REG_MR (fast registration) work request.
    RegMr,
    /// An ATOMIC WRITE.
    AtomicWrite,
    /// A FLUSH.
    Flush,
}

/// One completed work request (`ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The caller's identifier of the work request.
    pub wr_id: u64,
    /// Success or why not.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// The local QP the work request was posted to.
    pub qp_num: Qpn,
    /// Bytes received (receives, including the 40-byte GRH area on UD) or moved (READ).
    pub byte_len: u32,
    /// The immediate data of a SEND or WRITE with immediate.
    pub imm_data: Option<u32>,
    /// The R_Key a SEND with Invalidate invalidated.
    pub invalidated_rkey: Option<u32>,
    /// UD receives: the sender's QP (DETH SrcQP).
    pub src_qp: Option<Qpn>,
    /// UD receives: the sender's address (RoCEv2 has no LID; this stands for the GRH's SGID).
    pub src_addr: Option<IpAddr>,
    /// The sender set the Solicited Event bit.
    pub solicited: bool,
    /// When the engine queued it, in nanoseconds of the engine's clock: our device's
    /// clock runs at 1 GHz and never wraps (`completion_timestamp_mask` of all ones). Only
    /// on a CQ created with timestamps, as `ibv_wc_read_completion_ts` needs a CQ created
    /// with `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`.
    pub completion_ts: Option<u64>,
}

impl WorkCompletion {
    pub(crate) fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: Qpn) -> Self {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            qp_num,
            byte_len: 0,
            imm_data: None,
            invalidated_rkey: None,
            src_qp: None,
            src_addr: None,
            solicited: false,
            completion_ts: None,
        }
    }
}

/// Names a completion queue of one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqId(pub u32);

/// A completion queue. It grows as needed: the spec's CQ overrun (an asynchronous error)
/// is reported through [`CompletionQueue::overrun`] instead of losing completions.
#[derive(Debug, Clone, Default)]
pub struct CompletionQueue {
    entries: VecDeque<WorkCompletion>,
    capacity: usize,
    overrun: bool,
    /// Completions carry [`WorkCompletion::completion_ts`].
    timestamps: bool,
}

impl CompletionQueue {
    /// An empty queue of `capacity` entries; more completions set the overrun flag.
    pub fn new(capacity: usize) -> CompletionQueue {
        CompletionQueue {
            entries: VecDeque::new(),
            capacity,
            overrun: false,
            timestamps: false,
        }
    }

    /// [`CompletionQueue::new`] whose completions carry the time they were queued.
    pub fn with_timestamps(capacity: usize) -> CompletionQueue {
        CompletionQueue {
            timestamps: true,
            ..CompletionQueue::new(capacity)
        }
    }

    /// Queues `wc`, made at `now`.
    pub(crate) fn push(&mut self, mut wc: WorkCompletion, now: Instant) {
        if self.entries.len() >= self.capacity {
            self.overrun = true;
        }
        if self.timestamps {
            wc.completion_ts = Some(now.as_nanos());
        }
        self.entries.push_back(wc);
    }

    /// The oldest completion, if any.
    pub fn pop(&mut self) -> Option<WorkCompletion> {
        self.entries.pop_front()
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no completion waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// True once more completions were queued than the capacity the CQ was created with.
    pub fn overrun(&self) -> bool {
        self.overrun
    }
}
