//! Errors of the verbs-like interface: every refusal says which object and why.

use thiserror::Error;

use super::attrs::QpState;
use super::mr::MrError;
use super::srq::SrqError;
use crate::wire::{Qpn, WireError};

/// Why a verb (register, create, modify, post) was refused. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TransportError {
    #[error("no queue pair {0:#x}")]
    UnknownQp(Qpn),
    #[error("no completion queue {0}")]
    UnknownCq(u32),
    #[error("memory region: {0}")]
    Mr(#[from] MrError),
    #[error("QP {qpn:#x}: cannot move from {from:?} to {to:?}")]
    BadTransition {
        qpn: Qpn,
        from: QpState,
        to: QpState,
    },
    #[error("QP {qpn:#x}: attribute {attr}: {reason}")]
    BadAttr {
        qpn: Qpn,
        attr: &'static str,
        reason: &'static str,
    },
    #[error("QP {qpn:#x}: the {queue} queue is full")]
    QueueFull { qpn: Qpn, queue: &'static str },
    #[error("QP {qpn:#x}: work request refused: {reason}")]
    BadWr { qpn: Qpn, reason: &'static str },
    #[error("QP {qpn:#x} is in state {state:?}, where {what} is not allowed")]
    BadState {
        qpn: Qpn,
        state: QpState,
        what: &'static str,
    },
    #[error("queue pair number {0:#x} is already in use")]
    QpnInUse(Qpn),
    #[error("no shared receive queue {0}")]
    UnknownSrq(u32),
    #[error("shared receive queue {0} still has queue pairs")]
    SrqInUse(u32),
    #[error("shared receive queue {srq} refused the receive: {why}")]
    SrqFull { srq: u32, why: &'static str },
    #[error("shared receive queue: {0}")]
    Srq(#[from] SrqError),
    #[error("every queue pair number is in use")]
    NoQpn,
}

/// Why a received packet was dropped before any queue pair acted on it, or silently by the
/// QP's rules (UD Q_Key mismatch, no receive posted on UD). Protocol reactions such as NAKs
/// and duplicate handling are not drops: the packet was processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DropReason {
    #[error("malformed packet: {0}")]
    Malformed(#[from] WireError),
    #[error("unsupported transport header version {0}")]
    UnsupportedVersion(u8),
    #[error("no queue pair {0:#x}")]
    UnknownQp(Qpn),
    #[error("opcode of another transport than the queue pair's")]
    WrongTransport,
    #[error("P_Key mismatch")]
    PKeyMismatch,
    #[error("Q_Key mismatch")]
    QKeyMismatch,
    #[error("source address is not the connected peer")]
    WrongSource,
    #[error("queue pair in state {0:?} does not accept packets")]
    NotReady(QpState),
    #[error("no receive work request posted (UD)")]
    NoReceive,
    #[error("congestion notification packet (handled by congestion control)")]
    Cnp,
    #[error("opcode not supported by this engine")]
    Unsupported,
}
