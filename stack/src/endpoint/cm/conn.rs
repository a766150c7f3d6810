//! One connection's state (IBA Vol. 1 12.9.5-12.9.7, the CM state diagrams) and the MAD it
//! may have to send again.

use core::time::Duration;
use std::net::IpAddr;

use super::params::ListenerId;
use crate::time::Instant;
use crate::transport::{Mtu, QpType};
use crate::wire::{Psn, Qpn};

/// The states of IBA Figure 150/151 the manager keeps (the transient ones, REP received and
/// DREQ received, pass within one input), plus the two of SIDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Active: our REQ is out.
    ReqSent,
    /// Passive: a REQ arrived; the consumer has not answered yet.
    ReqRcvd,
    /// Passive: we told a repeating client to wait (MRA) while the consumer decides.
    MraReqSent,
    /// Passive: our REP is out, waiting for the RTU.
    RepSent,
    /// Both: the QP is in RTS and the handshake is over.
    Established,
    /// Both: our DREQ is out.
    DreqSent,
    /// Both: closed; duplicates of the last messages are still answered.
    TimeWait,
    /// SIDR client: our SIDR_REQ is out.
    SidrReqSent,
    /// SIDR server: the consumer has not answered yet.
    SidrReqRcvd,
    /// SIDR server: answered; a repeated SIDR_REQ gets the same SIDR_REP.
    SidrReplied,
}

impl State {
    pub(super) fn name(self) -> &'static str {
        match self {
            State::ReqSent => "REQ sent",
            State::ReqRcvd => "REQ received",
            State::MraReqSent => "REQ received, MRA sent",
            State::RepSent => "REP sent",
            State::Established => "established",
            State::DreqSent => "DREQ sent",
            State::TimeWait => "in time-wait",
            State::SidrReqSent => "SIDR_REQ sent",
            State::SidrReqRcvd => "SIDR_REQ received",
            State::SidrReplied => "SIDR_REP sent",
        }
    }

    /// Passive and not yet established: what `max_half_open` counts.
    pub(super) fn is_half_open(self) -> bool {
        matches!(
            self,
            State::ReqRcvd | State::MraReqSent | State::RepSent | State::SidrReqRcvd
        )
    }
}

/// A MAD we wait an answer to: sent again at each deadline until the retries run out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    pub mad: Vec<u8>,
    pub interval: Duration,
    pub retries_left: u8,
    /// Retries allowed in all, for the event that reports giving up.
    pub retries: u8,
}

/// The negotiated path and QP attributes of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Path {
    pub qp_type: QpType,
    pub mtu: Mtu,
    /// The Starting PSN of our REQ or REP: what our responder expects first.
    pub local_psn: Psn,
    /// The peer's Starting PSN: what we send from.
    pub remote_psn: Psn,
    /// Our responder's READ/atomic resources (the QP's max_dest_rd_atomic).
    pub responder_resources: u8,
    /// Our requester's outstanding READs/atomics (max_rd_atomic).
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub ack_timeout: u8,
    pub flow_label: u32,
    /// The path's traffic class: a server takes the REQ's when it gives one (Linux's CM
    /// copies the REQ's path into the passive side's address vector); `None`: the host's.
    pub traffic_class: Option<u8>,
    pub hop_limit: u8,
}

/// One connection or SIDR exchange.
#[derive(Debug, Clone)]
pub(super) struct Connection {
    pub local_id: u32,
    /// The peer's communication ID (SIDR: its request ID); 0 until known.
    pub remote_id: u32,
    /// Where its MADs go: the IP source of the peer's, or the server we connect to.
    pub peer: IpAddr,
    /// Our address in the connection.
    pub local_addr: IpAddr,
    pub state: State,
    /// The transaction the next answer belongs to (the REQ's for REP, RTU, MRA and REJ; a
    /// DREQ's for DREP).
    pub tid: u64,
    pub qpn: Qpn,
    pub remote_qpn: Qpn,
    pub listener: Option<ListenerId>,
    pub service_id: u64,
    pub path: Option<Path>,
    /// How long the peer may take to answer us (its response timeout plus two packet
    /// lifetimes), and how many retries the connection allows.
    pub peer_response: Duration,
    pub max_retries: u8,
    pub pending: Option<Pending>,
    /// When the pending MAD is due again, or time-wait ends.
    pub deadline: Option<Instant>,
    /// The last answer sent, repeated for a duplicate of what it answered (REP for a REQ,
    /// RTU for a REP, DREP for a DREQ, SIDR_REP for a SIDR_REQ).
    pub last_answer: Option<Vec<u8>>,
    /// The IP CM header's port of the peer (passive) or ours (active).
    pub port: u16,
    /// The traffic class of its MADs, as Linux's CM sends them with the connection's address
    /// vector: the path's (the client's TOS; the REQ's on the server), a SIDR_REQ's TOS. None:
    /// DSCP 0, as for answers made from a received MAD alone (SIDR_REP, REJ to the unknown).
    pub traffic_class: Option<u8>,
}

impl Connection {
    pub(super) fn new(local_id: u32, peer: IpAddr, local_addr: IpAddr, state: State) -> Self {
        Connection {
            local_id,
            remote_id: 0,
            peer,
            local_addr,
            state,
            tid: 0,
            qpn: Qpn::new(0),
            remote_qpn: Qpn::new(0),
            listener: None,
            service_id: 0,
            path: None,
            peer_response: Duration::ZERO,
            max_retries: 0,
            pending: None,
            deadline: None,
            last_answer: None,
            port: 0,
            traffic_class: None,
        }
    }
}
