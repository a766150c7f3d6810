//! What the rdma_cm programs share: waiting for a completion or a connection manager event
//! at once (an rdma_cm program's CQ thread and CM thread), and the one-line errors for a
//! refused or unanswered connection.

use core::time::Duration;
use std::net::IpAddr;
use std::time::Instant;

use super::AppError;
use crate::endpoint::cm::{CmError, CmEvent, ConnId, TimedOutStage};
use crate::endpoint::host::HostCmError;
use crate::endpoint::runtime::{Runtime, RuntimeError};
use crate::io::DeviceError;
use crate::transport::{CqId, WorkCompletion};
use crate::wire::cm::{reject_reason, sidr_status};

/// The next thing that happened.
#[derive(Debug)]
pub enum Next {
    /// A work completion of the connection's QP.
    Completion(WorkCompletion),
    /// An rdma_cm event.
    Cm(CmEvent),
}

/// Waits up to `timeout` for a completion on `cq` or a connection manager event (events
/// first: a disconnect ends a server's loop).
pub fn next(rt: &mut Runtime, cq: CqId, timeout: Duration) -> Result<Next, RuntimeError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(e) = rt.host_mut().poll_cm_event() {
            return Ok(Next::Cm(e));
        }
        if let Some(wc) = rt.poll_cq(cq) {
            return Ok(Next::Completion(wc));
        }
        if Instant::now() >= deadline {
            return Err(RuntimeError::Timeout {
                what: "waiting for a completion or a connection event".into(),
                after: timeout,
            });
        }
        rt.turn(Some(deadline))?;
    }
}

/// Why a connection did not come up, for the consumer: the peer's REJ or its silence.
pub fn connect_error(event: &CmEvent, peer: IpAddr, port: u16) -> AppError {
    match event {
        CmEvent::Rejected { reason, .. } => AppError::Rejected {
            peer,
            port,
            reason: *reason,
            meaning: reject_reason::name(*reason),
            hint: match *reason {
                reject_reason::INVALID_SERVICE_ID => ": nothing listens on that port",
                reject_reason::CONSUMER_DEFINED => ": the server's application refused",
                reject_reason::STALE_CONN => ": an old connection of ours is still there",
                _ => "",
            },
        },
        CmEvent::TimedOut { stage, retries, .. } => AppError::Unreachable {
            peer,
            port,
            what: match stage {
                TimedOutStage::Req => "REP to our REQ",
                TimedOutStage::Rep => "RTU to our REP",
                TimedOutStage::SidrReq => "SIDR_REP to our SIDR_REQ",
            },
            retries: *retries,
        },
        CmEvent::SidrFailed { status, .. } => AppError::Rejected {
            peer,
            port,
            reason: u16::from(*status),
            meaning: sidr_status::name(*status),
            hint: "",
        },
        other => AppError::Usage(format!("unexpected rdma_cm event {other:?}")),
    }
}

/// Waits for connection `id` to be established; any other outcome is the error.
pub fn wait_established(
    rt: &mut Runtime,
    id: ConnId,
    peer: IpAddr,
    port: u16,
    timeout: Duration,
) -> Result<Vec<u8>, AppError> {
    loop {
        match rt.wait_cm_event(timeout)? {
            CmEvent::Established {
                id: got,
                private_data,
            } if got == id => return Ok(private_data),
            e @ (CmEvent::Rejected { .. } | CmEvent::TimedOut { .. }) if e.id() == id => {
                return Err(connect_error(&e, peer, port));
            }
            _ => {}
        }
    }
}

/// Closes connection `id` and waits (at most `timeout`) for the peer's DREP or the last
/// retry; a peer that already left is no error.
pub fn disconnect(rt: &mut Runtime, id: ConnId, timeout: Duration) -> Result<(), AppError> {
    rt.cm_disconnect(id)?;
    wait_disconnected(rt, vec![id], timeout)
}

/// [`disconnect`] of several connections at once (perftest's `-R -q`: the peer may close
/// some of them itself meanwhile, which is no error either).
pub fn disconnect_all(rt: &mut Runtime, ids: &[ConnId], timeout: Duration) -> Result<(), AppError> {
    let mut open = Vec::with_capacity(ids.len());
    for &id in ids {
        match rt.cm_disconnect(id) {
            Ok(()) => open.push(id),
            Err(RuntimeError::Cm(HostCmError::Cm(
                CmError::UnknownConnection(_) | CmError::WrongState { .. },
            ))) => {}
            Err(e) => return Err(e.into()),
        }
    }
    wait_disconnected(rt, open, timeout)
}

/// Waits (at most `timeout`) until each of `open` is reported disconnected.
fn wait_disconnected(
    rt: &mut Runtime,
    mut open: Vec<ConnId>,
    timeout: Duration,
) -> Result<(), AppError> {
    let deadline = Instant::now() + timeout;
    while !open.is_empty() && Instant::now() < deadline {
        match rt.wait_cm_event(deadline.saturating_duration_since(Instant::now())) {
            Ok(CmEvent::Disconnected { id }) => open.retain(|&o| o != id),
            Ok(_) => {}
            // The peer gone (its DREP lost, or an in-memory peer's end closed) is closed too.
            Err(
                RuntimeError::Timeout { .. } | RuntimeError::Device(DeviceError::Closed { .. }),
            ) => {
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
