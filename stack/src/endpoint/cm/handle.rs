//! Received CM messages: what each does in each state (IBA Vol. 1 12.9), and the answers to
//! duplicates, strangers and malformed input.

use std::net::IpAddr;

use super::conn::{Connection, Path, State};
use super::params::rd_atomic;
use super::{
    CmEvent, ConnId, ConnectRequest, ConnectionManager, RemoteKey, SidrRequest, mtu_of_code,
    qp_path, rej, sidr_rep,
};
use crate::endpoint::connect;
use crate::endpoint::gid::{GidTable, gid_to_ip};
use crate::time::Instant;
use crate::transport::{Engine, ModifyQp, QpState, QpType};
use crate::wire::FixedHeader;
use crate::wire::cm::{
    CmAttribute, CmMadRepr, CmMessage, DrepRepr, DreqRepr, IpCmHeaderRepr, MraRepr, PortSpace,
    RejRepr, RepRepr, ReqRepr, RtuRepr, SidrRepRepr, SidrReqRepr, message_code, parse_service_id,
    reject_reason, sidr_status,
};
use crate::wire::mad::{BASE_VERSION, CM_CLASS_VERSION, MAD_LEN, METHOD_SEND, MGMT_CLASS_CM};

impl ConnectionManager {
    /// Takes one MAD that arrived at QP1 from `from` (the GSI has checked the packet), with
    /// traffic class `class` if it came over IPv6 (`None` over IPv4: see
    /// [`ConnectionManager::answer_class`]). `gids` says which addresses are ours; `engine`
    /// holds the QPs connections move.
    pub fn handle_mad(
        &mut self,
        now: Instant,
        from: IpAddr,
        class: Option<u8>,
        mad: &[u8],
        gids: &GidTable,
        engine: &mut Engine,
    ) {
        self.answer_class = class;
        self.handle(now, from, mad, gids, engine);
        self.answer_class = None;
    }

    fn handle(
        &mut self,
        now: Instant,
        from: IpAddr,
        mad: &[u8],
        gids: &GidTable,
        engine: &mut Engine,
    ) {
        self.stats.mads_received += 1;
        let header = match crate::wire::mad::MadHeaderRepr::parse(mad) {
            Ok(h) if mad.len() >= MAD_LEN => h,
            _ => {
                self.stats.malformed += 1;
                return;
            }
        };
        // IBA 13.4.3: the CM class speaks base version 1, method Send only.
        if header.base_version != BASE_VERSION
            || header.mgmt_class != MGMT_CLASS_CM
            || header.method != METHOD_SEND
        {
            self.stats.malformed += 1;
            return;
        }
        if header.class_version != CM_CLASS_VERSION {
            self.stats.bad_version += 1;
            self.refuse_version(from, header.transaction_id, header.attribute_id, mad);
            return;
        }
        let Ok(parsed) = CmMadRepr::parse(mad) else {
            self.stats.malformed += 1;
            return;
        };
        let tid = parsed.header.transaction_id;
        match parsed.message {
            CmMessage::Req(m) => self.on_req(now, from, tid, &m, gids),
            CmMessage::Mra(m) => self.on_mra(now, from, &m),
            CmMessage::Rej(m) => self.on_rej(now, from, &m, engine),
            CmMessage::Rep(m) => self.on_rep(from, tid, &m, engine),
            CmMessage::Rtu(m) => self.on_rtu(from, &m),
            CmMessage::Dreq(m) => self.on_dreq(now, from, tid, &m, engine),
            CmMessage::Drep(m) => self.on_drep(now, from, &m),
            CmMessage::SidrReq(m) => self.on_sidr_req(now, from, tid, &m),
            CmMessage::SidrRep(m) => self.on_sidr_rep(from, &m),
            // No alternate paths on RoCE: Linux's CM ignores LAP and APR there too.
            CmMessage::Lap(_) | CmMessage::Apr(_) => self.stats.unexpected += 1,
        }
    }

    /// A CM message of a class version we do not speak: a REQ gets REJ "invalid class
    /// version" and a SIDR_REQ a SIDR_REP of status 5, each naming version 2 as ours
    /// (IBA 12.6.7, 12.11.2); anything else is dropped.
    fn refuse_version(&mut self, from: IpAddr, tid: u64, attribute_id: u16, mad: &[u8]) {
        let data = &mad[24..MAD_LEN];
        match CmAttribute::from_id(attribute_id) {
            Some(CmAttribute::Req) => {
                let req = ReqRepr::parse_unchecked(data);
                let mut r = rej(
                    0,
                    req.local_comm_id,
                    message_code::REQ,
                    reject_reason::INVALID_CLASS_VERSION,
                );
                r.reject_info_length = 1;
                r.ari[0] = CM_CLASS_VERSION;
                self.send_answer(from, self.answer_class, tid, CmMessage::Rej(r));
                self.stats.rejects_sent += 1;
            }
            Some(CmAttribute::SidrReq) => {
                let req = SidrReqRepr::parse_unchecked(data);
                let mut r = sidr_rep(
                    req.request_id,
                    sidr_status::UNSUPPORTED_VERSION,
                    req.service_id,
                );
                r.additional_info_length = 1;
                r.additional_info[0] = CM_CLASS_VERSION;
                self.send_answer(from, self.answer_class, tid, CmMessage::SidrRep(r));
            }
            _ => {}
        }
    }

    /// Sends `message` in transaction `tid`, with traffic class `class` (see
    /// [`super::conn::Connection::traffic_class`]).
    fn send_answer(&mut self, to: IpAddr, class: Option<u8>, tid: u64, message: CmMessage) {
        self.send(to, class, CmMadRepr::new(tid, message).to_vec());
    }

    /// REJ of a message from someone we hold no state for, its IDs swapped as Linux's
    /// `cm_issue_rej` does.
    fn issue_rej(
        &mut self,
        to: IpAddr,
        tid: u64,
        local: u32,
        remote: u32,
        message: u8,
        reason: u16,
    ) {
        self.send_answer(
            to,
            self.answer_class,
            tid,
            CmMessage::Rej(rej(local, remote, message, reason)),
        );
        self.stats.rejects_sent += 1;
    }

    fn lookup(&self, from: IpAddr, local_id: u32, remote_id: u32) -> Option<u32> {
        let c = self.conns.get(&local_id)?;
        (c.peer == from && c.remote_id == remote_id).then_some(local_id)
    }

    // ---- passive side ----

    fn on_req(&mut self, now: Instant, from: IpAddr, tid: u64, req: &ReqRepr, gids: &GidTable) {
        let key = RemoteKey {
            peer: from,
            id: req.local_comm_id,
            sidr: false,
        };
        if let Some(&id) = self.by_remote.get(&key) {
            self.duplicate_req(now, id, from, tid, req);
            return;
        }
        // A REQ from a QP we are (or just were) connected to: the old connection is stale.
        if let Some(&old) = self.by_remote_qpn.get(&(from, req.local_qpn)) {
            self.issue_rej(
                from,
                tid,
                0,
                req.local_comm_id,
                message_code::REQ,
                reject_reason::STALE_CONN,
            );
            if self
                .conns
                .get(&old)
                .is_some_and(|c| c.state == State::Established)
            {
                self.events
                    .push_back(CmEvent::Disconnected { id: ConnId(old) });
                self.enter_time_wait(now, old);
            }
            return;
        }
        let checked = self.check_req(from, req, gids);
        let (listener, header) = match checked {
            Ok(ok) => ok,
            Err((reason, message)) => {
                let mut r = rej(0, req.local_comm_id, message, reason);
                if reason == reject_reason::INVALID_GID {
                    // ARI: the GID we would have accepted (IBA 12.6.7, reason 12).
                    if let Some(ours) = gids.source_for(from) {
                        r.reject_info_length = 16;
                        r.ari[..16]
                            .copy_from_slice(&crate::endpoint::gid::ip_to_gid(ours).octets());
                    }
                }
                self.send_answer(from, self.answer_class, tid, CmMessage::Rej(r));
                self.stats.rejects_sent += 1;
                return;
            }
        };
        if self.conns.len() >= self.config.max_connections {
            self.issue_rej(
                from,
                tid,
                0,
                req.local_comm_id,
                message_code::REQ,
                reject_reason::NO_RESOURCES,
            );
            return;
        }
        if self.half_open >= self.config.max_half_open {
            self.stats.half_open_full += 1;
            return;
        }
        let id = self.new_id();
        let qp_type = if req.transport_service_type == 1 {
            QpType::Uc
        } else {
            QpType::Rc
        };
        let Some(mtu) = mtu_of_code(req.path_mtu) else {
            return;
        };
        let local_addr = gid_to_ip(req.primary_remote_gid);
        let mut c = Connection::new(id, from, local_addr, State::ReqRcvd);
        c.remote_id = req.local_comm_id;
        c.tid = tid;
        c.remote_qpn = req.local_qpn;
        c.listener = Some(listener);
        c.service_id = req.service_id;
        c.port = header.src_port;
        c.peer_response = self.response_wait(req.local_cm_response_timeout);
        c.max_retries = req.max_cm_retries;
        // The REQ's class for our MADs too, as Linux's CM answers with the REQ's path.
        c.traffic_class = (req.primary_traffic_class != 0).then_some(req.primary_traffic_class);
        // Tentative until the consumer accepts: at most what the client offers.
        c.path = Some(Path {
            qp_type,
            mtu,
            local_psn: crate::wire::Psn::new(0),
            remote_psn: req.starting_psn,
            responder_resources: rd_atomic(req.initiator_depth),
            initiator_depth: rd_atomic(req.responder_resources),
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            ack_timeout: req.primary_local_ack_timeout,
            flow_label: req.primary_flow_label,
            traffic_class: c.traffic_class,
            hop_limit: match req.primary_hop_limit {
                0 => crate::wire::encap::DEFAULT_TTL,
                h => h,
            },
        });
        // A request nobody answers is forgotten once the client has given up on it.
        let client_patience = self.response_wait(req.remote_cm_response_timeout)
            * (u32::from(req.max_cm_retries) + 1);
        self.insert(c);
        self.by_remote.insert(key, id);
        self.by_remote_qpn.insert((from, req.local_qpn), id);
        self.set_deadline(id, Some(now + client_patience));
        self.events.push_back(CmEvent::ConnectRequest {
            id: ConnId(id),
            request: ConnectRequest {
                listener,
                peer: header.src_addr().unwrap_or(from),
                peer_port: header.src_port,
                qp_type,
                remote_qpn: req.local_qpn,
                remote_psn: req.starting_psn,
                responder_resources: req.responder_resources,
                initiator_depth: req.initiator_depth,
                mtu,
                private_data: req.private_data[IpCmHeaderRepr::LEN..].to_vec(),
            },
        });
    }

    /// What a REQ must be to be considered: a listener for its service, a transport we
    /// offer, our GID, our partition, an MTU we carry, an IP CM header. The reason of the REJ
    /// otherwise.
    fn check_req(
        &self,
        from: IpAddr,
        req: &ReqRepr,
        gids: &GidTable,
    ) -> Result<(super::ListenerId, IpCmHeaderRepr), (u16, u8)> {
        let refuse = |reason| Err((reason, message_code::REQ));
        let Some((space, port)) = parse_service_id(req.service_id) else {
            return refuse(reject_reason::INVALID_SERVICE_ID);
        };
        let header = IpCmHeaderRepr::parse(&req.private_data).ok();
        let dst = header.as_ref().and_then(IpCmHeaderRepr::dst_addr);
        let Some(listener) = self.find_listener(space, port, dst) else {
            return refuse(reject_reason::INVALID_SERVICE_ID);
        };
        // RDMA_PS_TCP carries RC only (rdma_cm: cma_check_req_qp_type); RD, XRC are not ours.
        let offered = match space {
            PortSpace::Tcp => req.transport_service_type == 0,
            _ => req.transport_service_type <= 1,
        };
        if !offered {
            return refuse(reject_reason::INVALID_TRANSPORT_TYPE);
        }
        // Linux refuses a GID (or a P_Key) it does not have with "invalid GID": its path
        // lookup fails either way.
        if !gids.is_local(gid_to_ip(req.primary_remote_gid))
            || !req.partition_key.matches(self.config.pkey)
        {
            return refuse(reject_reason::INVALID_GID);
        }
        match mtu_of_code(req.path_mtu) {
            Some(mtu) if mtu <= self.config.max_mtu => {}
            _ => return refuse(reject_reason::INVALID_MTU),
        }
        // rdma_cm's listener refuses a REQ without a usable IP CM header: the consumer's REJ.
        match header {
            Some(h) if h.src_addr().is_some() && dst.is_some() => {
                let _ = from;
                Ok((listener, h))
            }
            _ => refuse(reject_reason::CONSUMER_DEFINED),
        }
    }

    fn find_listener(
        &self,
        space: PortSpace,
        port: u16,
        dst: Option<IpAddr>,
    ) -> Option<super::ListenerId> {
        self.listeners
            .iter()
            .filter(|(_, l)| l.params.port_space == space && l.params.port == port)
            .find(|(_, l)| l.params.addr.is_none() || l.params.addr == dst)
            .map(|(&id, _)| super::ListenerId(id))
    }

    /// A REQ again: MRA while the consumer decides, the REP again once it accepted, a stale
    /// REJ after close; an established connection ignores it (Linux's cm_dup_req_handler,
    /// with the REP resent rather than left to its timer).
    fn duplicate_req(&mut self, now: Instant, id: u32, from: IpAddr, tid: u64, req: &ReqRepr) {
        self.stats.duplicates += 1;
        let service_timeout = self.config.mra_service_timeout;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        match c.state {
            State::ReqRcvd | State::MraReqSent => {
                let mra = MraRepr {
                    local_comm_id: c.local_id,
                    remote_comm_id: c.remote_id,
                    message_mraed: message_code::REQ,
                    reserved_8: 0,
                    service_timeout,
                    reserved_9: 0,
                    private_data: [0; 222],
                };
                let (tid, class) = (c.tid, c.traffic_class);
                self.set_state(id, State::MraReqSent);
                self.send_answer(from, class, tid, CmMessage::Mra(mra));
            }
            State::RepSent => {
                if let Some(rep) = c.last_answer.clone() {
                    let class = c.traffic_class;
                    self.send(from, class, rep);
                }
            }
            State::TimeWait => {
                let (local, remote) = (c.local_id, c.remote_id);
                self.issue_rej(
                    from,
                    tid,
                    local,
                    remote,
                    message_code::REQ,
                    reject_reason::STALE_CONN,
                );
            }
            _ => {}
        }
        let _ = (now, req);
    }

    fn on_rtu(&mut self, from: IpAddr, rtu: &RtuRepr) {
        match self.lookup(from, rtu.remote_comm_id, rtu.local_comm_id) {
            Some(id) if self.conns[&id].state == State::RepSent => self.establish_passive(id),
            Some(_) => self.stats.duplicates += 1,
            None => self.stats.unexpected += 1,
        }
    }

    // ---- active side ----

    fn on_rep(&mut self, from: IpAddr, tid: u64, rep: &RepRepr, engine: &mut Engine) {
        let Some(c) = self
            .conns
            .get(&rep.remote_comm_id)
            .filter(|c| c.peer == from)
        else {
            // A REP for no REQ of ours: refuse it so that the peer drops its half.
            self.stats.unexpected += 1;
            self.issue_rej(
                from,
                tid,
                rep.remote_comm_id,
                rep.local_comm_id,
                message_code::REP,
                reject_reason::INVALID_COMM_ID,
            );
            return;
        };
        let id = c.local_id;
        match c.state {
            State::ReqSent => {}
            State::Established | State::DreqSent | State::TimeWait
                if c.remote_id == rep.local_comm_id =>
            {
                // Our RTU was lost: send it again.
                self.stats.duplicates += 1;
                if let Some(rtu) = c.last_answer.clone() {
                    let class = c.traffic_class;
                    self.send(from, class, rtu);
                }
                return;
            }
            _ => {
                self.stats.unexpected += 1;
                return;
            }
        }
        let min_rnr_timer = self.config.min_rnr_timer;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let Some(mut path) = c.path else {
            return;
        };
        path.remote_psn = rep.starting_psn;
        // Each side keeps outstanding at most what the other accepts (Linux: cm_rep_handler).
        path.responder_resources = rd_atomic(path.responder_resources.min(rep.initiator_depth));
        path.initiator_depth = rd_atomic(path.initiator_depth.min(rep.responder_resources));
        path.rnr_retry_count = rep.rnr_retry_count;
        c.remote_id = rep.local_comm_id;
        c.remote_qpn = rep.local_qpn;
        c.path = Some(path);
        let qp = qp_path(c.peer, c.remote_qpn, &path, min_rnr_timer);
        let (qpn, tid, class) = (c.qpn, c.tid, c.traffic_class);
        if let Err(e) = connect::to_rts(engine, qpn, &qp) {
            // The QP cannot take the connection (destroyed, wrong state): refuse the REP.
            tracing::warn!("rdma_cm: QP {qpn} cannot take the connection: {e}");
            let r = rej(
                id,
                rep.local_comm_id,
                message_code::REP,
                reject_reason::CONSUMER_DEFINED,
            );
            self.send_answer(from, class, tid, CmMessage::Rej(r));
            self.stats.rejects_sent += 1;
            self.events.push_back(CmEvent::Rejected {
                id: ConnId(id),
                reason: reject_reason::CONSUMER_DEFINED,
                private_data: Vec::new(),
            });
            self.remove(id);
            return;
        }
        let rtu = RtuRepr {
            local_comm_id: id,
            remote_comm_id: rep.local_comm_id,
            private_data: [0; 224],
        };
        let mad = CmMadRepr::new(tid, CmMessage::Rtu(rtu)).to_vec();
        self.set_state(id, State::Established);
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.pending = None;
        c.last_answer = Some(mad.clone());
        let key = RemoteKey {
            peer: from,
            id: rep.local_comm_id,
            sidr: false,
        };
        self.by_remote.insert(key, id);
        self.by_remote_qpn.insert((from, rep.local_qpn), id);
        self.set_deadline(id, None);
        self.send(from, class, mad);
        self.stats.established += 1;
        self.events.push_back(CmEvent::Established {
            id: ConnId(id),
            private_data: rep.private_data.to_vec(),
        });
    }

    /// An MRA: the peer needs more time for our REQ or REP; wait its Service Timeout before
    /// sending again (IBA 12.6.6).
    fn on_mra(&mut self, now: Instant, from: IpAddr, mra: &MraRepr) {
        let Some(c) = self
            .conns
            .get(&mra.remote_comm_id)
            .filter(|c| c.peer == from)
        else {
            self.stats.unexpected += 1;
            return;
        };
        let expected = match c.state {
            State::ReqSent => message_code::REQ,
            State::RepSent if c.remote_id == mra.local_comm_id => message_code::REP,
            _ => {
                self.stats.unexpected += 1;
                return;
            }
        };
        if mra.message_mraed != expected {
            self.stats.unexpected += 1;
            return;
        }
        let wait = self.response_wait(mra.service_timeout);
        let id = c.local_id;
        self.set_deadline(id, Some(now + wait));
    }

    fn on_rej(&mut self, now: Instant, from: IpAddr, r: &RejRepr, engine: &mut Engine) {
        self.stats.rejects_received += 1;
        let id = if r.reason == reject_reason::TIMEOUT {
            // The peer gave up on us: it names itself by its ID (and CA GUID in the ARI).
            self.by_remote
                .get(&RemoteKey {
                    peer: from,
                    id: r.local_comm_id,
                    sidr: false,
                })
                .copied()
        } else if r.message_rejected == message_code::REQ {
            // Our REQ refused: the peer may not have chosen an ID.
            self.conns
                .get(&r.remote_comm_id)
                .filter(|c| c.peer == from && c.state == State::ReqSent)
                .map(|c| c.local_id)
        } else {
            self.lookup(from, r.remote_comm_id, r.local_comm_id)
        };
        let Some(id) = id else {
            self.stats.unexpected += 1;
            return;
        };
        let c = &self.conns[&id];
        let (state, qpn) = (c.state, c.qpn);
        let event = CmEvent::Rejected {
            id: ConnId(id),
            reason: r.reason,
            private_data: r.private_data.to_vec(),
        };
        match state {
            State::ReqSent => {
                self.events.push_back(event);
                self.remove(id);
            }
            State::ReqRcvd | State::MraReqSent => {
                self.events.push_back(event);
                self.remove(id);
            }
            State::RepSent | State::Established => {
                let _ = engine.modify_qp(qpn, &ModifyQp::to(QpState::Err));
                self.events.push_back(event);
                self.enter_time_wait(now, id);
            }
            State::DreqSent => {
                self.events
                    .push_back(CmEvent::Disconnected { id: ConnId(id) });
                self.enter_time_wait(now, id);
            }
            _ => self.stats.unexpected += 1,
        }
    }

    // ---- release ----

    fn on_dreq(
        &mut self,
        now: Instant,
        from: IpAddr,
        tid: u64,
        dreq: &DreqRepr,
        engine: &mut Engine,
    ) {
        let drep = |local, remote| {
            CmMessage::Drep(DrepRepr {
                local_comm_id: local,
                remote_comm_id: remote,
                private_data: [0; 224],
            })
        };
        let Some(id) = self.lookup(from, dreq.remote_comm_id, dreq.local_comm_id) else {
            // Disconnecting what we do not know is already done: say so (Linux: cm_issue_drep).
            self.stats.unexpected += 1;
            self.send_answer(
                from,
                self.answer_class,
                tid,
                drep(dreq.remote_comm_id, dreq.local_comm_id),
            );
            return;
        };
        let c = &self.conns[&id];
        // Linux ignores a DREQ naming another QP than the connection's.
        if dreq.remote_qpn != c.qpn {
            self.stats.unexpected += 1;
            return;
        }
        let (state, qpn, class) = (c.state, c.qpn, c.traffic_class);
        match state {
            State::Established | State::RepSent | State::DreqSent => {
                let _ = engine.modify_qp(qpn, &ModifyQp::to(QpState::Err));
                self.send_answer(from, class, tid, drep(id, dreq.local_comm_id));
                self.events
                    .push_back(CmEvent::Disconnected { id: ConnId(id) });
                self.enter_time_wait(now, id);
            }
            State::TimeWait => {
                self.stats.duplicates += 1;
                self.send_answer(from, class, tid, drep(id, dreq.local_comm_id));
            }
            _ => self.stats.unexpected += 1,
        }
    }

    fn on_drep(&mut self, now: Instant, from: IpAddr, drep: &DrepRepr) {
        match self.lookup(from, drep.remote_comm_id, drep.local_comm_id) {
            Some(id) if self.conns[&id].state == State::DreqSent => {
                self.events
                    .push_back(CmEvent::Disconnected { id: ConnId(id) });
                self.enter_time_wait(now, id);
            }
            Some(_) => self.stats.duplicates += 1,
            None => self.stats.unexpected += 1,
        }
    }

    // ---- SIDR ----

    fn on_sidr_req(&mut self, now: Instant, from: IpAddr, tid: u64, req: &SidrReqRepr) {
        let key = RemoteKey {
            peer: from,
            id: req.request_id,
            sidr: true,
        };
        if let Some(&id) = self.by_remote.get(&key) {
            self.stats.duplicates += 1;
            if let Some(c) = self.conns.get(&id)
                && let Some(answer) = c.last_answer.clone()
            {
                let class = c.traffic_class;
                self.send(from, class, answer);
            }
            return;
        }
        let header = IpCmHeaderRepr::parse(&req.private_data).ok();
        let dst = header.as_ref().and_then(IpCmHeaderRepr::dst_addr);
        let listener = match parse_service_id(req.service_id) {
            Some((PortSpace::Udp, port)) => self.find_listener(PortSpace::Udp, port, dst),
            _ => None,
        };
        let status = match (listener, header) {
            (None, _) => Some(sidr_status::SERVICE_ID_NOT_SUPPORTED),
            (Some(_), Some(h)) if h.src_addr().is_some() && dst.is_some() => None,
            (Some(_), _) => Some(sidr_status::REJECTED),
        };
        if let Some(status) = status {
            let r = sidr_rep(req.request_id, status, req.service_id);
            self.send_answer(from, self.answer_class, tid, CmMessage::SidrRep(r));
            return;
        }
        let (Some(listener), Some(header)) = (listener, header) else {
            return;
        };
        if self.conns.len() >= self.config.max_connections
            || self.half_open >= self.config.max_half_open
        {
            self.stats.half_open_full += 1;
            return;
        }
        let id = self.new_id();
        let mut c = Connection::new(id, from, dst.unwrap_or(from), State::SidrReqRcvd);
        c.remote_id = req.request_id;
        c.tid = tid;
        c.listener = Some(listener);
        c.service_id = req.service_id;
        c.port = header.src_port;
        c.traffic_class = self.answer_class;
        self.insert(c);
        self.by_remote.insert(key, id);
        // Forgotten if the consumer never answers, once the client has surely given up.
        let patience = self.config.sidr_timeout * (u32::from(self.config.max_retries) + 1);
        self.set_deadline(id, Some(now + patience));
        self.events.push_back(CmEvent::SidrRequest {
            id: ConnId(id),
            request: SidrRequest {
                listener,
                peer: header.src_addr().unwrap_or(from),
                peer_port: header.src_port,
                private_data: req.private_data[IpCmHeaderRepr::LEN..].to_vec(),
            },
        });
    }

    fn on_sidr_rep(&mut self, from: IpAddr, rep: &SidrRepRepr) {
        let found = self
            .conns
            .get(&rep.request_id)
            .is_some_and(|c| c.peer == from && c.state == State::SidrReqSent);
        if !found {
            self.stats.unexpected += 1;
            return;
        }
        let id = ConnId(rep.request_id);
        self.events.push_back(if rep.status == sidr_status::VALID {
            CmEvent::SidrResolved {
                id,
                qpn: rep.qpn,
                qkey: rep.qkey,
                private_data: rep.private_data.to_vec(),
            }
        } else {
            CmEvent::SidrFailed {
                id,
                status: rep.status,
            }
        });
        self.remove(id.0);
    }
}
