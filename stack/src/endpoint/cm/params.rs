//! What goes in and out of the connection manager: its configuration, the parameters of each
//! call, the events it reports, its errors and counters.

use core::time::Duration;
use std::net::IpAddr;

use thiserror::Error;

use crate::transport::{Mtu, QpType, TransportError};
use crate::wire::cm::PortSpace;
use crate::wire::{PKey, Psn, Qpn, RnrTimer};

/// A connection (or SIDR exchange), named by our Local Communication ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// A listening service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(pub u32);

/// How the manager behaves; the defaults suit a software endpoint on a LAN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmConfig {
    /// Seeds communication IDs, transaction IDs, starting PSNs and client ports, so that two
    /// managers in virtual time behave the same run after run.
    pub seed: u64,
    /// Our channel adapter GUID (Local CA GUID): rxe uses the MAC's EUI-64.
    pub ca_guid: u64,
    /// What our REQ asks of the passive side, and our time to answer a REP: 4.096 us x
    /// 2^value (18: 1.07 s; rdma_cm asks 20, 4.3 s).
    pub response_timeout: u8,
    /// Retries of REQ (ours), REP and DREQ before giving up; advertised in the REQ.
    pub max_retries: u8,
    /// Packet lifetime each way, 4.096 us x 2^value: added twice to every response timeout.
    pub packet_life_time: u8,
    /// The Service Timeout of the MRA we send when a REQ is repeated before the consumer
    /// answered it.
    pub mra_service_timeout: u8,
    /// How long a closed connection is remembered (duplicate DREQs answered, stale REQs
    /// refused) before it is forgotten.
    pub time_wait: Duration,
    /// Passive connections not yet established (REQ received, REP not yet confirmed) at
    /// most; further REQs are dropped and counted, as Linux drops REQs beyond a listener's
    /// backlog, and their senders' retries find room later.
    pub max_half_open: usize,
    /// Connections and SIDR exchanges of every state at most; a REQ beyond is refused (REJ
    /// "no resources").
    pub max_connections: usize,
    /// The largest path MTU of our link: a REQ asking more is refused (REJ "invalid MTU").
    pub max_mtu: Mtu,
    /// The local ACK timeout our REQ gives the passive side's QP, and ours: 4.096 us x
    /// 2^value (14: 67 ms, as the rdma-core pingpong tools).
    pub local_ack_timeout: u8,
    /// What our REP says our adapter may take to ACK (rxe: 15).
    pub target_ack_delay: u8,
    /// The RNR timer our responders ask for.
    pub min_rnr_timer: RnrTimer,
    /// Our partition (the only P_Key in our table).
    pub pkey: PKey,
    /// How long an SIDR client waits for each SIDR_REP (rdma_cm: 4 s).
    pub sidr_timeout: Duration,
}

impl Default for CmConfig {
    fn default() -> Self {
        CmConfig {
            seed: 0x7263_6d61,
            ca_guid: 0x0200_00ff_fe00_0001,
            response_timeout: 18,
            max_retries: 15,
            packet_life_time: 14,
            mra_service_timeout: 20,
            time_wait: Duration::from_secs(1),
            max_half_open: 128,
            max_connections: 4096,
            max_mtu: Mtu::M1024,
            local_ack_timeout: 14,
            target_ack_delay: 15,
            min_rnr_timer: RnrTimer::new(12),
            pkey: PKey::DEFAULT,
            sidr_timeout: Duration::from_millis(1000),
        }
    }
}

/// The EUI-64 of a MAC address, as rxe makes its node GUID (the universal/local bit flipped,
/// 0xFFFE in the middle).
pub fn ca_guid_of_mac(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes([
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

/// A service to listen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenParams {
    /// RDMA_PS_TCP for RC (rping, perftest -R, ucmatose), RDMA_PS_UDP for UD via SIDR.
    pub port_space: PortSpace,
    /// The port to listen on.
    pub port: u16,
    /// Only REQs whose IP CM header names this address (rdma_bind_addr to one address);
    /// `None` for any of ours.
    pub addr: Option<IpAddr>,
}

/// What the active side asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectParams {
    /// The server.
    pub dest: IpAddr,
    /// Our address towards it (the host fills this in from its routes).
    pub src: IpAddr,
    /// TCP (RC) or UDP (UD through SIDR).
    pub port_space: PortSpace,
    /// The server's port.
    pub port: u16,
    /// Our QP (RC or UC), in RESET or INIT.
    pub qpn: Qpn,
    /// RC or UC.
    pub qp_type: QpType,
    /// READs and atomics we accept outstanding (the peer's initiator depth at most).
    pub responder_resources: u8,
    /// READs and atomics we will keep outstanding.
    pub initiator_depth: u8,
    /// Transport retries the passive side should use.
    pub retry_count: u8,
    /// RNR retries the passive side should use (7: forever).
    pub rnr_retry_count: u8,
    /// The path MTU to ask for (at most our link's).
    pub mtu: Mtu,
    /// The consumer's private data (at most 56 bytes after rdma_cm's IP header).
    pub private_data: Vec<u8>,
    /// The traffic class of the path (`rdma_set_option` with `RDMA_OPTION_ID_TOS`): the REQ
    /// carries it and both QPs send with its DSCP. `None`: 0 in the REQ, and each host's
    /// own DSCP.
    pub traffic_class: Option<u8>,
}

impl ConnectParams {
    /// rping's parameters (one outstanding READ each way, retry and RNR retry 7) to `port`
    /// of `dest` in the TCP port space, with our QP `qpn` (RC).
    pub fn rc(src: IpAddr, dest: IpAddr, port: u16, qpn: Qpn) -> ConnectParams {
        ConnectParams {
            dest,
            src,
            port_space: PortSpace::Tcp,
            port,
            qpn,
            qp_type: QpType::Rc,
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            mtu: Mtu::M1024,
            private_data: Vec::new(),
            traffic_class: None,
        }
    }
}

/// The passive side's answer to a connect request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptParams {
    /// Our QP (of the REQ's type), in RESET or INIT.
    pub qpn: Qpn,
    /// READs and atomics we accept outstanding (at most the REQ's initiator depth).
    pub responder_resources: u8,
    /// READs and atomics we keep outstanding (at most the REQ's responder resources).
    pub initiator_depth: u8,
    /// RNR retries the active side should use.
    pub rnr_retry_count: u8,
    /// The consumer's private data (at most 196 bytes).
    pub private_data: Vec<u8>,
}

impl AcceptParams {
    /// Accepts with QP `qpn`, up to 16 READs and atomics each way (each side at most what
    /// the other offers), RNR retry 7.
    pub fn new(qpn: Qpn) -> AcceptParams {
        AcceptParams {
            qpn,
            responder_resources: 16,
            initiator_depth: 16,
            rnr_retry_count: 7,
            private_data: Vec::new(),
        }
    }
}

/// A UD client's service ID resolution request (rdma_cm's RDMA_PS_UDP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrParams {
    /// The server.
    pub dest: IpAddr,
    /// Our address towards it.
    pub src: IpAddr,
    /// The server's port.
    pub port: u16,
    /// The consumer's private data (at most 180 bytes after rdma_cm's IP header).
    pub private_data: Vec<u8>,
    /// The type of service (rdma_cm's TOS option): the traffic class of the SIDR_REQ, as
    /// Linux sends it with the resolved route's address vector. None: DSCP 0.
    pub traffic_class: Option<u8>,
}

/// Our answer to a SIDR request (rdma_cm's `rdma_accept` on a UDP id): the UD QP that
/// serves the service and its Q_Key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrReply {
    /// Our UD QP.
    pub qpn: Qpn,
    /// Its Q_Key.
    pub qkey: u32,
    /// The consumer's private data (at most 136 bytes).
    pub private_data: Vec<u8>,
}

impl SidrReply {
    /// QP `qpn` with `qkey`, no private data.
    pub fn new(qpn: Qpn, qkey: u32) -> SidrReply {
        SidrReply {
            qpn,
            qkey,
            private_data: Vec::new(),
        }
    }
}

/// A connect request as the consumer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The listener the request came to.
    pub listener: ListenerId,
    /// The client's address and port (from rdma_cm's IP CM header).
    pub peer: IpAddr,
    /// The client's port.
    pub peer_port: u16,
    /// RC or UC.
    pub qp_type: QpType,
    /// The client's QP and first PSN.
    pub remote_qpn: Qpn,
    /// The client's first PSN: what our responder expects.
    pub remote_psn: Psn,
    /// What the client accepts outstanding: our initiator depth at most.
    pub responder_resources: u8,
    /// What the client keeps outstanding: our responder resources at most.
    pub initiator_depth: u8,
    /// The path MTU the client asks for.
    pub mtu: Mtu,
    /// The consumer's private data after rdma_cm's IP header.
    pub private_data: Vec<u8>,
}

/// A service ID resolution request as the consumer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrRequest {
    /// The listener the request came to.
    pub listener: ListenerId,
    /// The client's address.
    pub peer: IpAddr,
    /// The client's port.
    pub peer_port: u16,
    /// The consumer's private data after rdma_cm's IP header.
    pub private_data: Vec<u8>,
}

/// Where a handshake stopped for lack of answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimedOutStage {
    /// No REP (or REJ) to our REQ.
    Req,
    /// No RTU to our REP.
    Rep,
    /// No SIDR_REP to our SIDR_REQ.
    SidrReq,
}

/// Something the consumer should know (rdma_cm's events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmEvent {
    /// A client asks to connect (RDMA_CM_EVENT_CONNECT_REQUEST): accept or reject it.
    ConnectRequest {
        /// The new connection, to accept or reject.
        id: ConnId,
        /// What the client asks for.
        request: ConnectRequest,
    },
    /// The connection is up (RDMA_CM_EVENT_ESTABLISHED): the QP is in RTS.
    Established {
        /// The connection.
        id: ConnId,
        /// The private data of the REP (active side) or empty (passive side).
        private_data: Vec<u8>,
    },
    /// The peer refused (RDMA_CM_EVENT_REJECTED), with the REJ's reason.
    Rejected {
        /// The connection.
        id: ConnId,
        /// The REJ reason (IBA Table 112).
        reason: u16,
        /// The REJ's private data.
        private_data: Vec<u8>,
    },
    /// The peer stopped answering after every retry (RDMA_CM_EVENT_UNREACHABLE).
    TimedOut {
        /// The connection.
        id: ConnId,
        /// Which answer never came.
        stage: TimedOutStage,
        /// Retries spent.
        retries: u8,
    },
    /// The connection is closed (RDMA_CM_EVENT_DISCONNECTED): the QP is in the error state.
    Disconnected {
        /// The connection.
        id: ConnId,
    },
    /// A UD client asks which QP serves a service (RDMA_CM_EVENT_CONNECT_REQUEST on a UDP
    /// port): answer with `sidr_reply` ([`SidrReply`]) or `sidr_reject`.
    SidrRequest {
        /// The new request, to answer.
        id: ConnId,
        /// What the client asks for.
        request: SidrRequest,
    },
    /// Our SIDR_REQ was answered (RDMA_CM_EVENT_ESTABLISHED on a UDP id): send to `qpn`
    /// with `qkey`.
    SidrResolved {
        /// The connection.
        id: ConnId,
        /// The server's UD QP.
        qpn: Qpn,
        /// Its Q_Key.
        qkey: u32,
        /// The SIDR_REP's private data.
        private_data: Vec<u8>,
    },
    /// Our SIDR_REQ was answered with a failure status (RDMA_CM_EVENT_UNREACHABLE).
    SidrFailed {
        /// The connection.
        id: ConnId,
        /// The SIDR_REP status (IBA Table 118).
        status: u8,
    },
}

impl CmEvent {
    /// The connection the event is about.
    pub fn id(&self) -> ConnId {
        match self {
            CmEvent::ConnectRequest { id, .. }
            | CmEvent::Established { id, .. }
            | CmEvent::Rejected { id, .. }
            | CmEvent::TimedOut { id, .. }
            | CmEvent::Disconnected { id }
            | CmEvent::SidrRequest { id, .. }
            | CmEvent::SidrResolved { id, .. }
            | CmEvent::SidrFailed { id, .. } => *id,
        }
    }
}

/// Why a call to the manager failed.
#[derive(Debug, Error)]
pub enum CmError {
    /// No connection has this ID.
    #[error("no connection {0:?}")]
    UnknownConnection(ConnId),
    /// The connection's state does not allow the call.
    #[error("connection {id:?} is {state}: it cannot {action}")]
    WrongState {
        /// The connection.
        id: ConnId,
        /// Its state, in words.
        state: &'static str,
        /// The call refused.
        action: &'static str,
    },
    /// Another listener has the port.
    #[error("{port_space} port {port} is already listened on")]
    PortInUse {
        /// The port space's name (`RDMA_PS_TCP`, ...).
        port_space: &'static str,
        /// The port.
        port: u16,
    },
    /// The consumer's private data does not fit the message.
    #[error("private data of {len} bytes does not fit the {limit} bytes a {message} leaves")]
    PrivateDataTooLong {
        /// Its length.
        len: usize,
        /// The room the message leaves.
        limit: usize,
        /// The message (REQ, REP, ...).
        message: &'static str,
    },
    /// The manager holds its maximum of connections.
    #[error("{0} connections at once at most")]
    TooManyConnections(usize),
    /// The QP cannot be moved as the connection needs.
    #[error("the QP cannot take this connection: {0}")]
    Qp(#[from] TransportError),
    /// The QP's type does not suit the port space.
    #[error("{0:?} QPs cannot be connected over this port space")]
    WrongQpType(QpType),
}

/// Counters of the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CmStats {
    /// MADs received on QP1.
    pub mads_received: u64,
    /// MADs sent.
    pub mads_sent: u64,
    /// REQs, REPs, DREQs and SIDR_REQs sent again after their response timeout.
    pub retransmitted: u64,
    /// Repeated messages answered from state (REQ, REP, DREQ, RTU, SIDR_REQ).
    pub duplicates: u64,
    /// Too short, another class or an unknown attribute.
    pub malformed: u64,
    /// A CM class version other than 2.
    pub bad_version: u64,
    /// Messages naming a communication ID we do not have, or in a state that takes no such
    /// message.
    pub unexpected: u64,
    /// REQs dropped because `max_half_open` connections were waiting.
    pub half_open_full: u64,
    /// REJs sent.
    pub rejects_sent: u64,
    /// REJs received.
    pub rejects_received: u64,
    /// Connections that reached RTS and were confirmed.
    pub established: u64,
    /// Handshakes given up after every retry.
    pub timeouts: u64,
    /// MADs not sent because the outgoing queue was full (the host stopped draining it).
    pub queue_full: u64,
}

/// Clamps a READ/atomic depth to what the engine keeps.
pub(super) fn rd_atomic(n: u8) -> u8 {
    n.min(crate::transport::MAX_RD_ATOMIC)
}
