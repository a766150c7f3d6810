//! The programs the `roce` command runs on a [`Runtime`]: the rdma-core pingpong examples
//! ([`pingpong`]) and perftest's bandwidth tests ([`perf`]), each speaking its tool's
//! out-of-band exchange and printing its tool's lines, and librdmacm's rping ([`rping`]),
//! which connects through rdma_cm ([`cm_app`]), so that either side can be the original tool
//! on rdma_rxe.

use core::time::Duration;
use std::net::{IpAddr, Ipv6Addr};

use thiserror::Error;

use super::gid::gid_to_ip;
use super::oob::OobError;
use super::runtime::{Runtime, RuntimeError};
use crate::transport::{CqId, Mtu, WcStatus, WorkCompletion};

pub mod cm_app;
pub mod cmatose;
pub mod lab_verbs;
pub mod perf;
pub mod pingpong;
pub mod rping;
pub mod udaddy;

#[cfg(test)]
mod testing;

/// Why a program stopped; each says in one line what to do about it where it can.
#[derive(Debug, Error)]
pub enum AppError {
    /// The runtime failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The TCP exchange with the peer failed.
    #[error("out-of-band exchange: {0}")]
    Oob(#[from] OobError),
    /// `-g` names a GID index the endpoint does not have.
    #[error("can't read sgid of index {index}: the endpoint has {count} GIDs ({list})")]
    NoGid {
        /// The index asked for.
        index: usize,
        /// GIDs the endpoint has.
        count: usize,
        /// Them, listed.
        list: String,
    },
    /// The peer gave no GID, so its address is unknown.
    #[error("the peer sent an all-zero GID: run it with -g IDX (perftest: -x IDX)")]
    PeerWithoutGid,
    /// As the tools print it, with the `ibv_wc_status` number.
    #[error("Failed status {name} ({code}) for wr_id {wr_id}")]
    Completion {
        /// The status's name (`IBV_WC_...`).
        name: &'static str,
        /// Its `ibv_wc_status` number.
        code: u32,
        /// The failed work request.
        wr_id: u64,
    },
    /// A completion for a work request the tool never posted.
    #[error("Completion for unknown wr_id {0}")]
    UnknownWrId(u64),
    /// No completion came in time.
    #[error("timed out after {after:?} waiting for a completion ({progress})")]
    Stalled {
        /// How long was waited.
        after: Duration,
        /// How far the run got.
        progress: String,
    },
    /// Options the tool cannot run with, explained.
    #[error("{0}")]
    Usage(String),
    /// The received data failed a check the tool was asked to make (pingpong's `-c`).
    #[error("{0}")]
    Invalid(String),
    /// rdma_cm: the peer answered our REQ (or SIDR_REQ) with a refusal.
    #[error("{peer} port {port} refused the connection: REJ reason {reason} ({meaning}){hint}")]
    Rejected {
        /// The peer's address.
        peer: IpAddr,
        /// The port asked for.
        port: u16,
        /// The REJ reason code (IBA Table 112).
        reason: u16,
        /// Its meaning.
        meaning: &'static str,
        /// What to do about it, if anything ("" or a sentence after a colon).
        hint: &'static str,
    },
    /// rdma_cm: the peer never answered, every retry spent.
    #[error("{peer} port {port} did not answer: no {what} after {retries} retries")]
    Unreachable {
        /// The peer's address.
        peer: IpAddr,
        /// The port asked for.
        port: u16,
        /// The answer waited for (REP, SIDR_REP...).
        what: &'static str,
        /// Retries spent.
        retries: u8,
    },
}

/// `enum ibv_wc_status` numbers, which the tools print beside the name.
pub fn wc_status_code(status: WcStatus) -> u32 {
    match status {
        WcStatus::Success => 0,
        WcStatus::LocLenErr => 1,
        WcStatus::LocQpOpErr => 2,
        WcStatus::LocProtErr => 4,
        WcStatus::WrFlushErr => 5,
        WcStatus::MwBindErr => 6,
        WcStatus::BadRespErr => 7,
        WcStatus::RemInvReqErr => 9,
        WcStatus::RemAccessErr => 10,
        WcStatus::RemOpErr => 11,
        WcStatus::RetryExcErr => 12,
        WcStatus::RnrRetryExcErr => 13,
    }
}

/// Fails on any completion that is not a success, as the tools do.
pub fn check(wc: &WorkCompletion) -> Result<(), AppError> {
    if wc.status == WcStatus::Success {
        return Ok(());
    }
    Err(AppError::Completion {
        name: wc.status.name(),
        code: wc_status_code(wc.status),
        wr_id: wc.wr_id,
    })
}

/// The next completion on `cq`; when `timeout` passes first, [`AppError::Stalled`] with
/// `progress` saying how far the run got (other runtime errors pass through as they are).
pub(crate) fn wait_or_stall(
    rt: &mut Runtime,
    cq: CqId,
    timeout: Duration,
    progress: impl FnOnce() -> String,
) -> Result<WorkCompletion, AppError> {
    rt.wait_completion(cq, timeout).map_err(|e| match e {
        RuntimeError::Timeout { .. } => AppError::Stalled {
            after: timeout,
            progress: progress(),
        },
        e => e.into(),
    })
}

/// Our GID at `index`, or the error the tools give, listing what there is.
pub fn local_gid(rt: &Runtime, index: usize) -> Result<Ipv6Addr, AppError> {
    let gids = rt.host().gids();
    gids.get(index)
        .map(|e| e.gid)
        .ok_or_else(|| AppError::NoGid {
            index,
            count: gids.entries().len(),
            list: gids
                .entries()
                .iter()
                .enumerate()
                .map(|(i, e)| format!("{i}: {}", e.gid))
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The default GID index: rxe's IPv4-mapped GID (1) when the endpoint has an IPv4
/// address, else its first global IPv6 GID, else the link-local one (0).
pub fn default_gid_index(rt: &Runtime) -> usize {
    usize::from(rt.host().gids().entries().len() > 1)
}

/// The peer's address from its GID; an all-zero GID means the peer ran without `-g`.
pub fn peer_addr(gid: Ipv6Addr) -> Result<IpAddr, AppError> {
    if gid.is_unspecified() {
        return Err(AppError::PeerWithoutGid);
    }
    Ok(gid_to_ip(gid))
}

/// Checks that `mtu` fits the device: RoCEv2 needs the path MTU plus 80 bytes of headers
/// on the link (rxe's rule; docs/headers.md, "Encapsulation").
pub fn check_mtu(rt: &Runtime, mtu: Mtu) -> Result<(), AppError> {
    let link = rt.capabilities().mtu;
    if Mtu::for_link_mtu(link as u32).is_some_and(|max| mtu <= max) {
        return Ok(());
    }
    Err(AppError::Usage(format!(
        "path MTU {} needs a link MTU of at least {} but the device has {link} \
         (raise it, e.g. `ip link set DEV mtu 9000`, or use a smaller -m)",
        mtu.bytes(),
        mtu.bytes() + 80
    )))
}

pub use super::ids::random_psn;
