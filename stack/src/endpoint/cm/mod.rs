//! The communication manager (IBA Vol. 1 chapter 12) as rdma_cm uses it over RoCEv2: the
//! state machine that sets up, accepts, refuses and tears down connections with REQ, REP,
//! RTU, REJ, MRA, DREQ and DREP, and resolves UD services with SIDR_REQ and SIDR_REP, all
//! carried by the GSI (QP1) of the host (`endpoint/host/gsi.rs`).
//!
//! Like the transport engine it is sans-IO and deterministic: inputs are received MADs
//! ([`ConnectionManager::handle_mad`]), the consumer's calls (listen, connect, accept,
//! reject, disconnect, resolve) and timer expiry, each with an explicit `now`; outputs are
//! MADs to send ([`ConnectionManager::poll_transmit`]), the next deadline and events
//! ([`CmEvent`]). It moves the connection's QP through INIT, RTR and RTS on the engine it is
//! given, with the peer's QPN, PSN and the path's MTU, as the kernel's rdma_cm does.
//!
//! Timers follow the messages: a REQ is resent after its Remote CM Response Timeout plus two
//! packet lifetimes, up to the Max CM Retries it advertises; a REP after the REQ's Local CM
//! Response Timeout, up to the REQ's retries; an MRA extends the wait by its Service Timeout.
//! Duplicates are answered from state, never acted on twice: a repeated REQ gets an MRA
//! while the consumer decides, the REP again once accepted, a stale REJ after close; a
//! repeated REP gets the RTU again; a repeated DREQ the DREP again. Messages naming unknown
//! communication IDs get what Linux's ib_cm answers: a REP a REJ "invalid comm ID", a DREQ a
//! DREP, others nothing. Memory is bounded: at most `max_half_open` passive connections wait
//! for their RTU (further REQs are dropped and counted), `max_connections` in all (further
//! REQs get REJ "no resources"), and closed connections are forgotten after `time_wait`.
//!
//! Not implemented: alternate paths (LAP/APR are decoded and counted, never acted on, as
//! Linux does on RoCE), peer-to-peer connection (both sides sending REQ), RD and XRC,
//! redirection.

mod conn;
mod handle;
mod params;
#[cfg(test)]
mod tests;

pub use params::{
    AcceptParams, CmConfig, CmError, CmEvent, CmStats, ConnId, ConnectParams, ConnectRequest,
    ListenParams, ListenerId, SidrParams, SidrReply, SidrRequest, TimedOutStage, ca_guid_of_mac,
};

use core::time::Duration;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;

use conn::{Connection, Path, Pending, State};
use params::rd_atomic;

use super::connect::{self, QpPath};
use super::gid::ip_to_gid;
use crate::rng::Rng;
use crate::time::Instant;
use crate::transport::{Access, Engine, ModifyQp, Mtu, QpState, QpType};
use crate::wire::cm::{
    CmMadRepr, CmMessage, DreqRepr, IpCmHeaderRepr, PortSpace, RejRepr, ReqRepr, SidrRepRepr,
    SidrReqRepr, cm_time, message_code, reject_reason, sidr_status,
};
use crate::wire::encap::DEFAULT_TTL;
use crate::wire::{FixedHeader, Psn, Qpn};

/// A MAD to send to the GSI (QP1) of `dest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The peer's address.
    pub dest: IpAddr,
    /// The whole 256-byte MAD.
    pub mad: Vec<u8>,
    /// The IP traffic class to send it with (its upper six bits the DSCP); None: DSCP 0.
    pub traffic_class: Option<u8>,
}

/// A connection as [`ConnectionManager::info`] describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnInfo {
    /// The state, in words ("established", "REP sent", ...).
    pub state: &'static str,
    /// Whether the connection reached RTS and was confirmed.
    pub established: bool,
    /// The peer's address (where its MADs come from and ours go).
    pub peer: IpAddr,
    /// Our address on the connection.
    pub local_addr: IpAddr,
    /// The client's port: ours on the active side, the peer's on the passive side.
    pub port: u16,
    /// Our QP (0 before it is known).
    pub qpn: Qpn,
    /// The peer's QP (0 before it is known).
    pub remote_qpn: Qpn,
    /// The peer's communication ID (0 before it is known).
    pub remote_id: u32,
    /// The GRH flow label of the path (rxe derives its RC UDP source port from it).
    pub flow_label: u32,
}

/// MADs waiting to be sent at most: each input adds at most a few, and the host drains them
/// every turn.
const OUTGOING_LIMIT: usize = 4096;

/// The Q_Key rdma_cm gives UD QPs of the UDP port space (`RDMA_UDP_QKEY`).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// Room for the consumer's data after rdma_cm's 36-byte IP header: in a REQ (92 - 36) and
/// a SIDR_REQ (216 - 36).
const REQ_USER_DATA: usize = 92 - IpCmHeaderRepr::LEN;
const SIDR_REQ_USER_DATA: usize = 216 - IpCmHeaderRepr::LEN;

/// Where a connection's communication ID is known from: the peer and its ID. SIDR request
/// IDs live apart from connection IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct RemoteKey {
    peer: IpAddr,
    id: u32,
    sidr: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Listener {
    params: ListenParams,
}

/// The connection manager: see the module documentation.
#[derive(Debug)]
pub struct ConnectionManager {
    config: CmConfig,
    rng: Rng,
    /// The high half of our transaction IDs, as a MAD agent's (Linux: `hi_tid`).
    tid_high: u32,
    listeners: HashMap<u32, Listener>,
    next_listener: u32,
    conns: HashMap<u32, Connection>,
    by_remote: HashMap<RemoteKey, u32>,
    /// Connections by the peer's QP, to refuse a REQ from a QP still connected (stale).
    by_remote_qpn: HashMap<(IpAddr, Qpn), u32>,
    /// Passive connections whose REP waits for an RTU, by our QP: the first packet on the QP
    /// stands for the RTU (IBA 12.9.6: communication established).
    awaiting_rtu: HashMap<Qpn, u32>,
    timers: BTreeSet<(Instant, u32)>,
    /// Connections whose state is half-open (see [`State::is_half_open`]).
    half_open: usize,
    outgoing: VecDeque<Outgoing>,
    events: VecDeque<CmEvent>,
    stats: CmStats,
    /// While [`Self::handle_mad`] runs, the traffic class of the packet the MAD came in over
    /// IPv6 (none over IPv4): the answers made from that MAD alone go with it (REJ and DREP
    /// to a sender we hold no state for, every SIDR_REP). Linux makes their address vector
    /// from the received packet (`ib_create_ah_from_wc`), whose GRH area holds an IPv6
    /// header's class and zeroes for IPv4.
    answer_class: Option<u8>,
}

impl ConnectionManager {
    /// A manager with no listeners or connections.
    pub fn new(config: CmConfig) -> ConnectionManager {
        let mut rng = Rng::new(config.seed);
        let tid_high = rng.next_u64() as u32;
        ConnectionManager {
            config,
            rng,
            tid_high,
            listeners: HashMap::new(),
            next_listener: 1,
            conns: HashMap::new(),
            by_remote: HashMap::new(),
            by_remote_qpn: HashMap::new(),
            awaiting_rtu: HashMap::new(),
            timers: BTreeSet::new(),
            half_open: 0,
            outgoing: VecDeque::new(),
            events: VecDeque::new(),
            stats: CmStats::default(),
            answer_class: None,
        }
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &CmConfig {
        &self.config
    }

    /// What it has done so far.
    pub fn stats(&self) -> &CmStats {
        &self.stats
    }

    /// Connections and SIDR exchanges held (any state, time-wait included).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// What is known of a connection, or `None` once it is forgotten.
    pub fn info(&self, id: ConnId) -> Option<ConnInfo> {
        self.conns.get(&id.0).map(|c| ConnInfo {
            state: c.state.name(),
            established: c.state == State::Established,
            peer: c.peer,
            local_addr: c.local_addr,
            port: c.port,
            qpn: c.qpn,
            remote_qpn: c.remote_qpn,
            remote_id: c.remote_id,
            flow_label: c.path.map_or(0, |p| p.flow_label),
        })
    }

    // ---- the consumer's calls ----

    /// Listens for REQs (TCP port space) or SIDR_REQs (UDP) on a port (`rdma_listen`).
    pub fn listen(&mut self, params: ListenParams) -> Result<ListenerId, CmError> {
        let taken = self.listeners.values().any(|l| {
            l.params.port_space == params.port_space
                && l.params.port == params.port
                && (l.params.addr.is_none()
                    || params.addr.is_none()
                    || l.params.addr == params.addr)
        });
        if taken {
            return Err(CmError::PortInUse {
                port_space: params.port_space.name(),
                port: params.port,
            });
        }
        let id = self.next_listener;
        self.next_listener += 1;
        self.listeners.insert(id, Listener { params });
        Ok(ListenerId(id))
    }

    /// Stops listening; REQs for the port are then refused (REJ "invalid service ID").
    pub fn stop_listening(&mut self, id: ListenerId) {
        self.listeners.remove(&id.0);
    }

    /// Sends a REQ for `params.qpn` to the server (`rdma_connect`). The QP is moved to INIT
    /// (every remote access allowed, as rdma_cm does) if it is in RESET; the REP moves it on
    /// to RTS. Events: `Established`, `Rejected` or `TimedOut`.
    pub fn connect(
        &mut self,
        now: Instant,
        params: ConnectParams,
        engine: &mut Engine,
    ) -> Result<ConnId, CmError> {
        if params.port_space != PortSpace::Tcp && params.port_space != PortSpace::Ib {
            return Err(CmError::WrongQpType(params.qp_type));
        }
        if params.qp_type == QpType::Ud {
            return Err(CmError::WrongQpType(params.qp_type));
        }
        check_private(&params.private_data, REQ_USER_DATA, "REQ")?;
        self.check_room()?;
        init_qp(engine, params.qpn, params.qp_type)?;
        let id = self.new_id();
        let port = self.ephemeral_port();
        let psn = self.random_psn();
        let mtu = params.mtu.min(self.config.max_mtu);
        // rdma_cm's flow label for a RoCEv2 path: the ports hashed (cma_get_roce_udp_flow_label).
        let flow_label = (u32::from(port) * 31 + u32::from(params.port)) & 0xf_ffff;
        let service_id = params.port_space.service_id(params.port);
        let mut req = ReqRepr::zeroed();
        req.local_comm_id = id;
        req.service_id = service_id;
        req.local_ca_guid = self.config.ca_guid;
        req.local_qpn = params.qpn;
        req.responder_resources = rd_atomic(params.responder_resources);
        req.initiator_depth = rd_atomic(params.initiator_depth);
        req.remote_cm_response_timeout = self.config.response_timeout;
        req.transport_service_type = u8::from(params.qp_type == QpType::Uc);
        req.starting_psn = psn;
        req.local_cm_response_timeout = self.config.response_timeout;
        req.retry_count = params.retry_count.min(7);
        req.partition_key = self.config.pkey;
        req.path_mtu = mtu_code(mtu);
        req.rnr_retry_count = params.rnr_retry_count.min(7);
        req.max_cm_retries = self.config.max_retries.min(15);
        // RoCE has no LIDs: the permissive LID, as Linux's CM sends when the hop limit is > 1.
        req.primary_local_lid = 0xffff;
        req.primary_remote_lid = 0xffff;
        req.primary_local_gid = ip_to_gid(params.src);
        req.primary_remote_gid = ip_to_gid(params.dest);
        req.primary_flow_label = flow_label;
        req.primary_hop_limit = DEFAULT_TTL;
        req.primary_traffic_class = params.traffic_class.unwrap_or(0);
        req.primary_local_ack_timeout = self.config.local_ack_timeout;
        let header = IpCmHeaderRepr::new(params.src, port, params.dest);
        let _ = header.emit(&mut req.private_data);
        req.private_data[IpCmHeaderRepr::LEN..][..params.private_data.len()]
            .copy_from_slice(&params.private_data);

        let mut c = Connection::new(id, params.dest, params.src, State::ReqSent);
        c.tid = self.new_tid(id);
        c.qpn = params.qpn;
        c.service_id = service_id;
        c.port = port;
        c.peer_response = self.response_wait(self.config.response_timeout);
        c.max_retries = req.max_cm_retries;
        c.traffic_class = params.traffic_class;
        c.path = Some(Path {
            qp_type: params.qp_type,
            mtu,
            local_psn: psn,
            remote_psn: Psn::new(0),
            responder_resources: req.responder_resources,
            initiator_depth: req.initiator_depth,
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            ack_timeout: self.config.local_ack_timeout,
            flow_label,
            traffic_class: params.traffic_class,
            hop_limit: DEFAULT_TTL,
        });
        let mad = CmMadRepr::new(c.tid, CmMessage::Req(req)).to_vec();
        self.insert(c);
        self.send_expecting(now, id, mad);
        Ok(ConnId(id))
    }

    /// Accepts a connect request (`rdma_accept`): QP `params.qpn` goes to RTS with the
    /// client's QPN, PSN and path, and the REP goes out. `Established` follows the RTU.
    pub fn accept(
        &mut self,
        now: Instant,
        id: ConnId,
        params: AcceptParams,
        engine: &mut Engine,
    ) -> Result<(), CmError> {
        check_private(&params.private_data, 196, "REP")?;
        let config_ack_delay = self.config.target_ack_delay;
        let ca_guid = self.config.ca_guid;
        let psn = self.random_psn();
        let min_rnr_timer = self.config.min_rnr_timer;
        let c = self.conn_in(id, &[State::ReqRcvd, State::MraReqSent], "accept")?;
        let mut path = c.path.ok_or(CmError::UnknownConnection(id))?;
        // Each side keeps outstanding at most what the other accepts (rdma_accept's rule).
        path.responder_resources =
            rd_atomic(params.responder_resources.min(path.responder_resources));
        path.initiator_depth = rd_atomic(params.initiator_depth.min(path.initiator_depth));
        path.local_psn = psn;
        init_qp(engine, params.qpn, path.qp_type)?;
        let qp_path = qp_path(c.peer, c.remote_qpn, &path, min_rnr_timer);
        connect::to_rts(engine, params.qpn, &qp_path)?;
        let mut rep = crate::wire::cm::RepRepr::parse_unchecked(&[0; 232]);
        rep.local_comm_id = c.local_id;
        rep.remote_comm_id = c.remote_id;
        rep.local_qpn = params.qpn;
        rep.starting_psn = psn;
        rep.responder_resources = path.responder_resources;
        rep.initiator_depth = path.initiator_depth;
        rep.target_ack_delay = config_ack_delay;
        rep.rnr_retry_count = params.rnr_retry_count.min(7);
        rep.local_ca_guid = ca_guid;
        rep.private_data[..params.private_data.len()].copy_from_slice(&params.private_data);
        c.qpn = params.qpn;
        c.path = Some(path);
        let mad = CmMadRepr::new(c.tid, CmMessage::Rep(rep)).to_vec();
        c.last_answer = Some(mad.clone());
        let local_id = c.local_id;
        self.set_state(local_id, State::RepSent);
        self.awaiting_rtu.insert(params.qpn, local_id);
        self.send_expecting(now, local_id, mad);
        Ok(())
    }

    /// Refuses a connect request (`rdma_reject`): REJ "consumer defined" with the private
    /// data.
    pub fn reject(&mut self, now: Instant, id: ConnId, private_data: &[u8]) -> Result<(), CmError> {
        check_private(private_data, 148, "REJ")?;
        let c = self.conn_in(id, &[State::ReqRcvd, State::MraReqSent], "reject")?;
        // Linux leaves its Local Communication ID out of a REJ of a REQ it has not MRAed.
        let local = if c.state == State::ReqRcvd {
            0
        } else {
            c.local_id
        };
        let (peer, remote, tid, class) = (c.peer, c.remote_id, c.tid, c.traffic_class);
        let mut rej = rej(
            local,
            remote,
            message_code::REQ,
            reject_reason::CONSUMER_DEFINED,
        );
        rej.private_data[..private_data.len()].copy_from_slice(private_data);
        self.send(
            peer,
            class,
            CmMadRepr::new(tid, CmMessage::Rej(rej)).to_vec(),
        );
        self.stats.rejects_sent += 1;
        self.remove(id.0);
        let _ = now;
        Ok(())
    }

    /// Closes an established connection (`rdma_disconnect`): its QP goes to the error state
    /// (outstanding work completes flushed) and a DREQ goes out; `Disconnected` follows the
    /// DREP, or the DREQ's last retry. Closing a closed connection does nothing.
    pub fn disconnect(
        &mut self,
        now: Instant,
        id: ConnId,
        engine: &mut Engine,
    ) -> Result<(), CmError> {
        let dreq_tid = self.new_tid(id.0);
        let c = self
            .conns
            .get_mut(&id.0)
            .ok_or(CmError::UnknownConnection(id))?;
        match c.state {
            State::DreqSent | State::TimeWait => return Ok(()),
            State::Established | State::RepSent => {}
            s => {
                return Err(CmError::WrongState {
                    id,
                    state: s.name(),
                    action: "disconnect",
                });
            }
        }
        let _ = engine.modify_qp(c.qpn, &ModifyQp::to(QpState::Err));
        let dreq = DreqRepr::new(c.local_id, c.remote_id, c.remote_qpn);
        c.tid = dreq_tid;
        let mad = CmMadRepr::new(dreq_tid, CmMessage::Dreq(dreq)).to_vec();
        self.set_state(id.0, State::DreqSent);
        self.awaiting_rtu.retain(|_, v| *v != id.0);
        self.send_expecting(now, id.0, mad);
        Ok(())
    }

    /// Asks a server which UD QP serves `params.port` in the UDP port space
    /// (`rdma_resolve_route` on a UDP id). Events: `SidrResolved`, `SidrFailed` or
    /// `TimedOut`.
    pub fn resolve(&mut self, now: Instant, params: SidrParams) -> Result<ConnId, CmError> {
        check_private(&params.private_data, SIDR_REQ_USER_DATA, "SIDR_REQ")?;
        self.check_room()?;
        let id = self.new_id();
        let port = self.ephemeral_port();
        let service_id = PortSpace::Udp.service_id(params.port);
        let mut req = SidrReqRepr::parse_unchecked(&[0; 232]);
        req.request_id = id;
        req.partition_key = self.config.pkey;
        req.service_id = service_id;
        let header = IpCmHeaderRepr::new(params.src, port, params.dest);
        let _ = header.emit(&mut req.private_data);
        req.private_data[IpCmHeaderRepr::LEN..][..params.private_data.len()]
            .copy_from_slice(&params.private_data);
        let mut c = Connection::new(id, params.dest, params.src, State::SidrReqSent);
        c.tid = self.new_tid(id);
        c.service_id = service_id;
        c.port = port;
        c.peer_response = self.config.sidr_timeout;
        c.max_retries = self.config.max_retries.min(15);
        c.traffic_class = params.traffic_class;
        let mad = CmMadRepr::new(c.tid, CmMessage::SidrReq(req)).to_vec();
        self.insert(c);
        self.send_expecting(now, id, mad);
        Ok(ConnId(id))
    }

    /// Answers a SIDR request with our UD QP and its Q_Key. A repeated SIDR_REQ gets the same
    /// answer until `time_wait` passes.
    pub fn sidr_reply(
        &mut self,
        now: Instant,
        id: ConnId,
        reply: &SidrReply,
    ) -> Result<(), CmError> {
        check_private(&reply.private_data, 136, "SIDR_REP")?;
        self.sidr_answer(now, id, sidr_status::VALID, reply)
    }

    /// Refuses a SIDR request (status "rejected").
    pub fn sidr_reject(&mut self, now: Instant, id: ConnId) -> Result<(), CmError> {
        let nothing = SidrReply::new(Qpn::new(0), 0);
        self.sidr_answer(now, id, sidr_status::REJECTED, &nothing)
    }

    fn sidr_answer(
        &mut self,
        now: Instant,
        id: ConnId,
        status: u8,
        reply: &SidrReply,
    ) -> Result<(), CmError> {
        let time_wait = self.config.time_wait;
        let c = self.conn_in(id, &[State::SidrReqRcvd], "answer a SIDR request")?;
        let mut rep = sidr_rep(c.remote_id, status, c.service_id);
        rep.qpn = reply.qpn;
        rep.qkey = reply.qkey;
        rep.private_data[..reply.private_data.len()].copy_from_slice(&reply.private_data);
        let mad = CmMadRepr::new(c.tid, CmMessage::SidrRep(rep)).to_vec();
        c.last_answer = Some(mad.clone());
        let (peer, class) = (c.peer, c.traffic_class);
        self.set_state(id.0, State::SidrReplied);
        self.send(peer, class, mad);
        self.set_deadline(id.0, Some(now + time_wait));
        Ok(())
    }

    /// Forgets a connection at once (`rdma_destroy_id`): an established one is closed first
    /// (its DREQ goes out once, unanswered DREPs are not waited for).
    pub fn destroy(&mut self, now: Instant, id: ConnId, engine: &mut Engine) {
        if self
            .conns
            .get(&id.0)
            .is_some_and(|c| c.state == State::Established)
        {
            let _ = self.disconnect(now, id, engine);
        }
        self.remove(id.0);
    }

    // ---- outputs ----

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<Outgoing> {
        let o = self.outgoing.pop_front()?;
        self.stats.mads_sent += 1;
        Some(o)
    }

    /// The next event for the consumer.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// When [`ConnectionManager::handle_timeout`] has work next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|&(t, _)| t)
    }

    /// Resends what is unanswered, gives up after the last retry, ends time-waits.
    pub fn handle_timeout(&mut self, now: Instant, engine: &mut Engine) {
        while let Some(&(at, id)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            c.deadline = None;
            match &mut c.pending {
                Some(p) if p.retries_left > 0 => {
                    p.retries_left -= 1;
                    let (mad, interval, peer) = (p.mad.clone(), p.interval, c.peer);
                    let class = c.traffic_class;
                    self.stats.retransmitted += 1;
                    self.send(peer, class, mad);
                    self.set_deadline(id, Some(now + interval));
                }
                Some(_) => self.give_up(now, id, engine),
                // Time-wait over, or a request the consumer (or the client) abandoned.
                None => self.remove(id),
            }
        }
    }

    /// The first packet arrived on QP `qpn`: if its connection still waits for the RTU, the
    /// peer evidently has it established (IBA 12.9.6), so it is established here too.
    pub fn qp_active(&mut self, qpn: Qpn) {
        if let Some(id) = self.awaiting_rtu.remove(&qpn) {
            self.establish_passive(id);
        }
    }

    /// True while a connection of `qpn` waits for its RTU (so the host looks at its traffic).
    pub fn awaits_rtu(&self, qpn: Qpn) -> bool {
        !self.awaiting_rtu.is_empty() && self.awaiting_rtu.contains_key(&qpn)
    }

    // ---- internals shared by the handlers ----

    fn conn_in(
        &mut self,
        id: ConnId,
        states: &[State],
        action: &'static str,
    ) -> Result<&mut Connection, CmError> {
        let c = self
            .conns
            .get_mut(&id.0)
            .ok_or(CmError::UnknownConnection(id))?;
        if !states.contains(&c.state) {
            return Err(CmError::WrongState {
                id,
                state: c.state.name(),
                action,
            });
        }
        Ok(c)
    }

    fn check_room(&self) -> Result<(), CmError> {
        if self.conns.len() >= self.config.max_connections {
            return Err(CmError::TooManyConnections(self.config.max_connections));
        }
        Ok(())
    }

    /// A fresh, non-zero communication ID no connection uses.
    fn new_id(&mut self) -> u32 {
        loop {
            let id = self.rng.next_u64() as u32;
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    fn new_tid(&self, local_id: u32) -> u64 {
        u64::from(self.tid_high) << 32 | u64::from(local_id)
    }

    fn random_psn(&mut self) -> Psn {
        Psn::new(self.rng.next_u64() as u32)
    }

    /// A client port from the range Linux hands out (ip_local_port_range 32768-60999).
    fn ephemeral_port(&mut self) -> u16 {
        32768 + self.rng.below(60999 - 32768 + 1) as u16
    }

    /// How long to wait for a peer that answers within `timeout` (4.096 us x 2^timeout),
    /// packets taking a packet lifetime each way (IBA 12.7.4).
    fn response_wait(&self, timeout: u8) -> Duration {
        cm_time(timeout) + cm_time(self.config.packet_life_time) * 2
    }

    fn send(&mut self, dest: IpAddr, traffic_class: Option<u8>, mad: Vec<u8>) {
        if self.outgoing.len() >= OUTGOING_LIMIT {
            self.stats.queue_full += 1;
            return;
        }
        self.outgoing.push_back(Outgoing {
            dest,
            mad,
            traffic_class,
        });
    }

    /// Sends `mad` for connection `id` and keeps it to send again until answered.
    fn send_expecting(&mut self, now: Instant, id: u32, mad: Vec<u8>) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let interval = c.peer_response;
        c.pending = Some(Pending {
            mad: mad.clone(),
            interval,
            retries_left: c.max_retries,
            retries: c.max_retries,
        });
        let (peer, class) = (c.peer, c.traffic_class);
        self.send(peer, class, mad);
        self.set_deadline(id, Some(now + interval));
    }

    fn set_deadline(&mut self, id: u32, at: Option<Instant>) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if let Some(old) = c.deadline.take() {
            self.timers.remove(&(old, id));
        }
        if let Some(at) = at {
            c.deadline = Some(at);
            self.timers.insert((at, id));
        }
    }

    /// Closes connection `id` and keeps it for `time_wait` to answer late duplicates.
    fn enter_time_wait(&mut self, now: Instant, id: u32) {
        self.set_state(id, State::TimeWait);
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.pending = None;
        let until = now + self.config.time_wait;
        self.awaiting_rtu.retain(|_, v| *v != id);
        self.set_deadline(id, Some(until));
    }

    fn insert(&mut self, c: Connection) {
        self.half_open += usize::from(c.state.is_half_open());
        self.conns.insert(c.local_id, c);
    }

    /// Moves connection `id` to `state`, keeping the half-open count.
    fn set_state(&mut self, id: u32, state: State) {
        if let Some(c) = self.conns.get_mut(&id) {
            self.half_open -= usize::from(c.state.is_half_open());
            self.half_open += usize::from(state.is_half_open());
            c.state = state;
        }
    }

    fn remove(&mut self, id: u32) {
        self.set_deadline(id, None);
        if let Some(c) = self.conns.remove(&id) {
            self.half_open -= usize::from(c.state.is_half_open());
            let sidr = matches!(
                c.state,
                State::SidrReqSent | State::SidrReqRcvd | State::SidrReplied
            );
            let key = RemoteKey {
                peer: c.peer,
                id: c.remote_id,
                sidr,
            };
            if self.by_remote.get(&key) == Some(&id) {
                self.by_remote.remove(&key);
            }
            if self.by_remote_qpn.get(&(c.peer, c.remote_qpn)) == Some(&id) {
                self.by_remote_qpn.remove(&(c.peer, c.remote_qpn));
            }
            self.awaiting_rtu.retain(|_, v| *v != id);
        }
    }

    /// The last retry of connection `id`'s pending MAD went unanswered.
    fn give_up(&mut self, now: Instant, id: u32, engine: &mut Engine) {
        let Some(c) = self.conns.get(&id) else {
            return;
        };
        let retries = c.pending.as_ref().map_or(0, |p| p.retries);
        let (state, peer, local_id, remote_id, qpn, class) = (
            c.state,
            c.peer,
            c.local_id,
            c.remote_id,
            c.qpn,
            c.traffic_class,
        );
        self.stats.timeouts += 1;
        match state {
            State::ReqSent | State::RepSent => {
                let stage = if state == State::ReqSent {
                    TimedOutStage::Req
                } else {
                    TimedOutStage::Rep
                };
                // REJ "timeout", our CA GUID as its information: the peer finds its half of
                // the connection by our ID and GUID and drops it (IBA 12.6.7).
                let mut rej = rej(
                    local_id,
                    remote_id,
                    message_code::OTHER,
                    reject_reason::TIMEOUT,
                );
                rej.reject_info_length = 8;
                rej.ari[..8].copy_from_slice(&self.config.ca_guid.to_be_bytes());
                let tid = self.new_tid(local_id);
                self.send(
                    peer,
                    class,
                    CmMadRepr::new(tid, CmMessage::Rej(rej)).to_vec(),
                );
                self.stats.rejects_sent += 1;
                self.events.push_back(CmEvent::TimedOut {
                    id: ConnId(id),
                    stage,
                    retries,
                });
                if state == State::RepSent {
                    let _ = engine.modify_qp(qpn, &ModifyQp::to(QpState::Err));
                    self.enter_time_wait(now, id);
                } else {
                    self.remove(id);
                }
            }
            State::DreqSent => {
                self.events
                    .push_back(CmEvent::Disconnected { id: ConnId(id) });
                self.enter_time_wait(now, id);
            }
            State::SidrReqSent => {
                self.events.push_back(CmEvent::TimedOut {
                    id: ConnId(id),
                    stage: TimedOutStage::SidrReq,
                    retries,
                });
                self.remove(id);
            }
            _ => self.remove(id),
        }
    }

    /// Passive: the RTU (or traffic) confirmed our REP.
    fn establish_passive(&mut self, id: u32) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.state != State::RepSent {
            return;
        }
        c.pending = None;
        self.set_state(id, State::Established);
        self.set_deadline(id, None);
        self.awaiting_rtu.retain(|_, v| *v != id);
        self.stats.established += 1;
        self.events.push_back(CmEvent::Established {
            id: ConnId(id),
            private_data: Vec::new(),
        });
    }
}

fn check_private(data: &[u8], limit: usize, message: &'static str) -> Result<(), CmError> {
    if data.len() > limit {
        return Err(CmError::PrivateDataTooLong {
            len: data.len(),
            limit,
            message,
        });
    }
    Ok(())
}

/// The path MTU code of CM messages (IBA Table 106: 1 for 256 bytes ... 5 for 4096).
pub fn mtu_code(mtu: Mtu) -> u8 {
    (mtu.bytes().trailing_zeros() - 7) as u8
}

/// The MTU a path MTU code stands for, if any.
pub fn mtu_of_code(code: u8) -> Option<Mtu> {
    if !(1..=5).contains(&code) {
        return None;
    }
    Mtu::from_bytes(128 << code)
}

/// RESET -> INIT with every remote access, UD QPs with rdma_cm's Q_Key (what
/// `rdma_create_qp` does: `cma_init_conn_qp`, `cma_init_ud_qp`), so that receives can be
/// posted before the connection is made; a QP already further along is left as it is.
pub fn init_qp(engine: &mut Engine, qpn: Qpn, qp_type: QpType) -> Result<(), CmError> {
    let (state, _) = engine.query_qp(qpn)?;
    if state == QpState::Reset {
        let mut path = QpPath::new(
            qp_type,
            IpAddr::from([0, 0, 0, 0]),
            Qpn::new(0),
            Psn::new(0),
            Psn::new(0),
            Mtu::M1024,
        );
        path.access = Access::ALL;
        path.qkey = RDMA_UDP_QKEY;
        connect::to_init(engine, qpn, &path)?;
    }
    Ok(())
}

/// The QP attributes of a connection's path (`ib_cm_init_qp_attr` for RTR and RTS).
///
/// The Starting PSN a side puts in its REQ or REP is the PSN its own responder expects,
/// so the peer sends from it: Linux's CM sets the receive PSN from its own message and the
/// send PSN from the peer's (`cm_init_qp_rtr_attr`, `cm_init_qp_rts_attr`), and rxe's rping
/// capture shows the client's first SEND carrying the REP's PSN.
fn qp_path(
    peer: IpAddr,
    remote_qpn: Qpn,
    p: &Path,
    min_rnr_timer: crate::wire::RnrTimer,
) -> QpPath {
    let mut path = QpPath::new(
        p.qp_type,
        peer,
        remote_qpn,
        p.local_psn,
        p.remote_psn,
        p.mtu,
    );
    path.access = Access::ALL;
    path.max_rd_atomic = p.initiator_depth;
    path.max_dest_rd_atomic = p.responder_resources;
    path.timeout = p.ack_timeout;
    path.retry_cnt = p.retry_count;
    path.rnr_retry = p.rnr_retry_count;
    path.min_rnr_timer = min_rnr_timer;
    path.flow_label = p.flow_label;
    path.traffic_class = p.traffic_class;
    path.hop_limit = p.hop_limit;
    path
}

/// A REJ with its IDs, what it refuses and why.
fn rej(local: u32, remote: u32, message: u8, reason: u16) -> RejRepr {
    let mut rej = RejRepr::parse_unchecked(&[0; 232]);
    rej.local_comm_id = local;
    rej.remote_comm_id = remote;
    rej.message_rejected = message;
    rej.reason = reason;
    rej
}

/// A SIDR_REP answering request `request_id` for `service_id` with `status`.
fn sidr_rep(request_id: u32, status: u8, service_id: u64) -> SidrRepRepr {
    let mut rep = SidrRepRepr::parse_unchecked(&[0; 232]);
    rep.request_id = request_id;
    rep.status = status;
    rep.service_id = service_id;
    rep
}
