//! Errors of the verbs-like interface: every refusal says which object and why.

use thiserror::Error;

use super::attrs::QpState;
use super::mr::MrError;
use super::srq::SrqError;
use crate::wire::{Qpn, WireError};

/// Why a verb (register, create, modify, post) was refused. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TransportError {
    /// No queue pair has this number.
    #[error("no queue pair {0:#x}")]
    UnknownQp(Qpn),
    /// QP0: a RoCEv2 port has no subnet management QP (Annex A17.5.8).
    #[error("QPN 0 is not available: a RoCEv2 port has no QP0 (Annex A17.5.8)")]
    NoQp0,
    /// No completion queue has this index.
    #[error("no completion queue {0}")]
    UnknownCq(u32),
    /// A memory region, window or protection domain verb failed.
    #[error("memory region: {0}")]
    Mr(#[from] MrError),
    /// The QP state machine (IBA 10.3.1) has no such transition.
    #[error("QP {qpn:#x}: cannot move from {from:?} to {to:?}")]
    BadTransition {
        /// The queue pair.
        qpn: Qpn,
        /// Its state.
        from: QpState,
        /// The state asked for.
        to: QpState,
    },
    /// An attribute value out of range, or not settable in this transition.
    #[error("QP {qpn:#x}: attribute {attr}: {reason}")]
    BadAttr {
        /// The queue pair.
        qpn: Qpn,
        /// The attribute's name, as `ibv_qp_attr` spells it.
        attr: &'static str,
        /// What is wrong with the value.
        reason: &'static str,
    },
    /// The send or receive queue holds its maximum of work requests.
    #[error("QP {qpn:#x}: the {queue} queue is full")]
    QueueFull {
        /// The queue pair.
        qpn: Qpn,
        /// "send" or "receive".
        queue: &'static str,
    },
    /// A work request this queue pair cannot carry out (wrong operation, too long...).
    #[error("QP {qpn:#x}: work request refused: {reason}")]
    BadWr {
        /// The queue pair.
        qpn: Qpn,
        /// Why.
        reason: &'static str,
    },
    /// The verb is not allowed in the queue pair's current state.
    #[error("QP {qpn:#x} is in state {state:?}, where {what} is not allowed")]
    BadState {
        /// The queue pair.
        qpn: Qpn,
        /// Its state.
        state: QpState,
        /// The verb refused.
        what: &'static str,
    },
    /// A queue pair with this number exists already.
    #[error("queue pair number {0:#x} is already in use")]
    QpnInUse(Qpn),
    /// No shared receive queue has this index.
    #[error("no shared receive queue {0}")]
    UnknownSrq(u32),
    /// Queue pairs still use the shared receive queue being destroyed.
    #[error("shared receive queue {0} still has queue pairs")]
    SrqInUse(u32),
    /// The shared receive queue cannot take the receive.
    #[error("shared receive queue {srq} refused the receive: {why}")]
    SrqFull {
        /// The shared receive queue.
        srq: u32,
        /// Why.
        why: &'static str,
    },
    /// Creating or modifying a shared receive queue failed.
    #[error("shared receive queue: {0}")]
    Srq(#[from] SrqError),
    /// All 2^24 queue pair numbers are taken.
    #[error("every queue pair number is in use")]
    NoQpn,
}

/// Why a received packet was dropped before any queue pair acted on it, or silently by the
/// QP's rules (UD Q_Key mismatch, no receive posted on UD). Protocol reactions such as NAKs
/// and duplicate handling are not drops: the packet was processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DropReason {
    /// The headers do not parse.
    #[error("malformed packet: {0}")]
    Malformed(#[from] WireError),
    /// A BTH TVer other than 0.
    #[error("unsupported transport header version {0}")]
    UnsupportedVersion(u8),
    /// No queue pair has the BTH's DestQP.
    #[error("no queue pair {0:#x}")]
    UnknownQp(Qpn),
    /// An RC opcode to a UC QP, or the like.
    #[error("opcode of another transport than the queue pair's")]
    WrongTransport,
    /// The BTH's P_Key does not match the queue pair's.
    #[error("P_Key mismatch")]
    PKeyMismatch,
    /// A UD request's Q_Key does not match the queue pair's.
    #[error("Q_Key mismatch")]
    QKeyMismatch,
    /// A connected QP's packet from another address than its peer's.
    #[error("source address is not the connected peer")]
    WrongSource,
    /// The queue pair is in Reset or Init, or another state that drops packets.
    #[error("queue pair in state {0:?} does not accept packets")]
    NotReady(QpState),
    /// A UD SEND found no receive posted.
    #[error("no receive work request posted (UD)")]
    NoReceive,
    /// A CNP: not for a queue pair but for congestion control.
    #[error("congestion notification packet (handled by congestion control)")]
    Cnp,
    /// A known opcode this engine does not implement.
    #[error("opcode not supported by this engine")]
    Unsupported,
}
