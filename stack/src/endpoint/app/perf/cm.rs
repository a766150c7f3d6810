//! perftest's `-R` (rdma_cm) mode, as in perftest 4.5-0.17 (`perftest_communication.c`:
//! `rdma_client_connect`, `rdma_server_connect`, `rdma_write_keys`, `rdma_read_keys`,
//! `rdma_write_data`, `rdma_read_data`, `create_rdma_cm_connection`).
//!
//! `-R` turns on both of perftest's rdma_cm switches: the dialogue runs over an RC
//! connection of its own that rdma_cm sets up on the port (18515; RDMA_PS_TCP) instead of
//! TCP, and the test's QPs (one, or `-q N`) are connected by rdma_cm too, one connection
//! each, to the same port, the server listening again after the first connection. Every
//! message of the TCP dialogue is one SEND of the same size, but the key handshakes carry `struct pingpong_dest` in binary
//! ([`Keys::to_binary`]) and there is no closing `"done"`:
//!
//! | step | what |
//! |------|------|
//! | comm connection | REQ/REP/RTU on port 18515; each side posts one 56-byte receive first |
//! | negotiation | version, sys data, MTU: the TCP messages, one SEND each way |
//! | sync | a key handshake with zeroed keys: the server is about to listen again |
//! | data connections | REQ/REP/RTU on the same port for each of the test's QPs, in order (the client retries a REJ 10 times, 100 ms apart, as `rdma_cm_client_connection`; the server pairs the requests with its QPs as they come) |
//! | sync | zeroed keys again |
//! | keys, syncs, test, results, close | as over TCP (QPN, R_Key, VA from the keys; PSNs from the CM) |
//! | teardown | the client disconnects the data connections, then the dialogue's |
//!
//! With `-c UD` the data connections are SIDR resolutions in the UDP port space instead
//! (perftest's RDMA_PS_UDP ids, [`CmDialogue::resolve_data`]), and nothing is disconnected
//! but the dialogue.
//!
//! Each side keeps one receive posted and reposts it after each message, so a SEND may
//! arrive before the acknowledgement of ours: the first completion of either kind is kept.

use core::time::Duration;
use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;
use std::time::Instant;

use super::{AppError, PerfOptions};
use crate::endpoint::app::{check, cm_app, wait_or_stall};
use crate::endpoint::cm::{
    AcceptParams, CmEvent, ConnId, ConnectParams, ListenParams, ListenerId, RDMA_UDP_QKEY,
    SidrParams, SidrReply,
};
use crate::endpoint::oob::OobError;
use crate::endpoint::oob::perftest::{
    Agreed, BwReport, BwTest, Carrier, KEYS_BINARY_LEN, Keys, Negotiation, Role,
    exchange_reports_over, negotiate_over,
};
use crate::endpoint::runtime::Runtime;
use crate::transport::{
    Access, CqId, GRH_LEN, Mtu, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, UdDest, WcOpcode,
    WcStatus,
};
use crate::wire::cm::{PortSpace, reject_reason, sidr_status};
use crate::wire::{Psn, Qpn};

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// The work requests of `-c UD`'s connection parameters (on the test's QP).
const UD_PARAMS_WRID: u64 = 0;
const LEN: u32 = KEYS_BINARY_LEN as u32;
/// `rdma_cm_client_connection`'s attempts at the data connection, and the pause between.
const DATA_CONNECT_TRIES: u32 = 10;
const DATA_CONNECT_PAUSE: Duration = Duration::from_millis(100);
/// How long a server waits for the client's disconnects.
const TEARDOWN: Duration = Duration::from_secs(3);
/// How long either side answers repeats of the last messages before it closes (perftest
/// on rxe sends them again every 67 ms: its `timeout` of 14).
const LINGER: Duration = Duration::from_millis(300);

/// The dialogue's own RC connection and, once made, the test's.
#[derive(Debug)]
pub(in crate::endpoint::app) struct CmDialogue {
    role: Role,
    peer: IpAddr,
    port: u16,
    timeout: Duration,
    comm: ConnId,
    listener: Option<ListenerId>,
    /// The test's connections, one per QP (`-q`), in our QPs' order.
    data: Vec<ConnId>,
    qpn: Qpn,
    cq: CqId,
    key: u32,
    va: u64,
    /// A message that arrived while we waited for our SEND's completion.
    early: Option<Vec<u8>>,
    /// Connection manager events met while waiting for completions (the data
    /// connection's REQ on a server).
    events: VecDeque<CmEvent>,
    /// Our keys and the peer's, one per QP (before the key handshakes: zero keys).
    local: Vec<Keys>,
    remote: Vec<Keys>,
    /// The peer hung up the dialogue's connection: what we had posted was flushed.
    hung_up: bool,
    /// `-T`: the type of service our connections ask for.
    tos: Option<u8>,
}

/// A test QP of `-c UD` to resolve ([`CmDialogue::resolve_data`]): its CQs, and a part of
/// its buffer (registered at `va` under `key`) for the connection parameters' message.
#[derive(Debug, Clone, Copy)]
pub(in crate::endpoint::app) struct UdLane {
    pub qpn: Qpn,
    pub cq: CqId,
    pub recv_cq: CqId,
    pub key: u32,
    pub va: u64,
    pub addr: u64,
}

/// Keys all zero, what both sides send in the two syncs around the data connection.
fn zero_keys() -> Keys {
    Keys {
        lid: 0,
        out_reads: 0,
        qpn: Qpn::new(0),
        psn: Psn::new(0),
        rkey: 0,
        vaddr: 0,
        gid: None,
        srqn: 0,
    }
}

fn io_error(step: &'static str, what: String) -> OobError {
    OobError::Io {
        step,
        source: io::Error::other(what),
    }
}

impl CmDialogue {
    /// `establish_connection` with `-R`: the client connects to the server's port, the
    /// server listens and accepts the first REQ.
    pub fn open(rt: &mut Runtime, opts: &PerfOptions) -> Result<CmDialogue, AppError> {
        let cq = rt.create_cq(4);
        let mut init = QpInit::new(QpType::Rc, cq);
        init.max_send_wr = 1;
        init.max_recv_wr = 1;
        let qpn = rt.create_qp(init)?;
        rt.cm_init_qp(qpn, QpType::Rc)?;
        let va = super::super::super::ids::random_va(2 * LEN as usize);
        let key = rt.register_mr(va, vec![0; 2 * LEN as usize], Access::LOCAL_WRITE)?;
        let mut d = CmDialogue {
            role: Role::Server,
            peer: IpAddr::from([0, 0, 0, 0]),
            port: opts.port,
            timeout: opts.timeout,
            comm: ConnId(0),
            listener: None,
            data: Vec::new(),
            qpn,
            cq,
            key,
            va,
            early: None,
            events: VecDeque::new(),
            local: vec![zero_keys()],
            remote: vec![zero_keys()],
            hung_up: false,
            tos: opts.tos,
        };
        d.post_recv(rt)?;
        match &opts.server {
            Some(server) => {
                d.role = Role::Client;
                d.peer = server_addr(server)?;
                let params = d.connect_params(rt, qpn, 0);
                d.comm = rt.cm_connect(params)?;
                cm_app::wait_established(rt, d.comm, d.peer, d.port, d.timeout)?;
            }
            None => {
                d.listener = Some(rt.cm_listen(ListenParams {
                    port_space: PortSpace::Tcp,
                    port: opts.port,
                    addr: None,
                })?);
                let (id, peer) = d.next_request(rt)?;
                d.peer = peer;
                d.comm = id;
                rt.cm_accept(id, AcceptParams::new(qpn))?;
            }
        }
        Ok(d)
    }

    /// rdma_cm's parameters for our QP `qpn` towards the server: `out_reads` READs and
    /// atomics each way (perftest asks for them in the READ and atomic tests only), retry 7,
    /// RNR retry 7, the largest MTU of the device.
    fn connect_params(&self, rt: &Runtime, qpn: Qpn, out_reads: u8) -> ConnectParams {
        let mut params = ConnectParams::rc(self.peer, self.peer, self.port, qpn);
        params.mtu = rt.host().cm().config().max_mtu;
        params.responder_resources = out_reads;
        params.initiator_depth = out_reads;
        params
    }

    /// The next connect request, from the events kept aside or the wire.
    fn next_request(&mut self, rt: &mut Runtime) -> Result<(ConnId, IpAddr), AppError> {
        self.next_event(rt, |e| match e {
            CmEvent::ConnectRequest { id, request } => Some((*id, request.peer)),
            _ => None,
        })
    }

    /// The first event `wanted` takes, from the events kept aside or the wire (others
    /// are dropped).
    fn next_event<T>(
        &mut self,
        rt: &mut Runtime,
        wanted: impl Fn(&CmEvent) -> Option<T>,
    ) -> Result<T, AppError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let event = match self.events.pop_front() {
                Some(e) => e,
                None => rt.wait_cm_event(deadline.saturating_duration_since(Instant::now()))?,
            };
            if let Some(t) = wanted(&event) {
                return Ok(t);
            }
        }
    }

    /// The versions, system data and MTU, as over TCP.
    pub fn negotiate(&mut self, rt: &mut Runtime, local: &Negotiation) -> Result<Agreed, AppError> {
        Ok(negotiate_over(
            &mut |m, t, s| self.exchange(rt, m, t, s),
            local,
        )?)
    }

    /// `create_rdma_cm_connection`: a sync, the test's QPs `qpns` connected through
    /// rdma_cm on the same port, one connection each (each QP ends in RTS with its peer's
    /// QPN and PSN), a sync. The client connects them in order; the server accepts the
    /// requests in the order they come, pairing them with its QPs in order, as perftest's
    /// `rdma_cm_connection_request_handler` does.
    pub fn connect_data(
        &mut self,
        rt: &mut Runtime,
        qpns: &[Qpn],
        out_reads: u8,
        mtu: Mtu,
    ) -> Result<(), AppError> {
        self.between_syncs(rt, |d, rt| {
            for &qpn in qpns {
                rt.cm_init_qp(qpn, QpType::Rc)?;
                let id = match d.role {
                    Role::Client => d.connect_data_client(rt, qpn, out_reads, mtu)?,
                    Role::Server => {
                        let (id, _) = d.next_request(rt)?;
                        let mut accept = AcceptParams::new(qpn);
                        accept.responder_resources = out_reads.max(1);
                        accept.initiator_depth = out_reads.max(1);
                        rt.cm_accept(id, accept)?;
                        id
                    }
                };
                d.data.push(id);
            }
            Ok(())
        })
    }

    /// `create_rdma_cm_connection`'s two syncs around `connect`.
    fn between_syncs<T>(
        &mut self,
        rt: &mut Runtime,
        connect: impl FnOnce(&mut Self, &mut Runtime) -> Result<T, AppError>,
    ) -> Result<T, AppError> {
        self.hand_shake(
            rt,
            zero_keys(),
            "syncing before the rdma_cm connection of the test QP",
        )?;
        let made = connect(self, rt)?;
        self.hand_shake(
            rt,
            zero_keys(),
            "syncing after the rdma_cm connection of the test QP",
        )?;
        Ok(made)
    }

    /// `create_rdma_cm_connection` for `-c UD`: each of the test's UD QPs (in RTS already,
    /// with rdma_cm's Q_Key) resolved through rdma_cm in the UDP port space, between the
    /// same two syncs. The client sends a SIDR_REQ per QP, in order, and learns the
    /// server's QPN and Q_Key from the SIDR_REP (`rdma_cm_establish_ud_connection`); the
    /// server answers each with its next QP. Returns each QP's destination: the client's
    /// always; the server's only when it sends too (`--lat` or `-b`: `answered`), learnt
    /// from a 4-byte SEND with immediate, the client's QPN, that the client sends once
    /// resolved and the server receives into `lanes[i]`'s buffer (its GRH area gives the
    /// address and traffic class, `ibv_create_ah_from_wc`). There is nothing to disconnect
    /// afterwards: perftest disconnects no UD QP.
    pub fn resolve_data(
        &mut self,
        rt: &mut Runtime,
        lanes: &[UdLane],
        answered: bool,
    ) -> Result<Vec<Option<UdDest>>, AppError> {
        let listener = match self.role {
            // Listening before the first sync: the client resolves right after it.
            Role::Server => Some(rt.cm_listen(ListenParams {
                port_space: PortSpace::Udp,
                port: self.port,
                addr: None,
            })?),
            Role::Client => None,
        };
        let dests = self.between_syncs(rt, |d, rt| {
            lanes
                .iter()
                .map(|lane| match d.role {
                    Role::Client => d.resolve_client(rt, lane, answered).map(Some),
                    Role::Server => d.resolve_server(rt, lane, answered),
                })
                .collect()
        });
        if let Some(l) = listener {
            rt.host_mut().cm_stop_listening(l);
        }
        dests
    }

    /// One SIDR_REQ (retried as [`Self::connect_data_client`] retries a REQ: the server
    /// may not listen yet), then the SEND that tells the server where we are.
    fn resolve_client(
        &mut self,
        rt: &mut Runtime,
        lane: &UdLane,
        answered: bool,
    ) -> Result<UdDest, AppError> {
        let mut tries = 0;
        let dest = loop {
            tries += 1;
            let id = rt.cm_resolve(SidrParams {
                dest: self.peer,
                src: self.peer,
                port: self.port,
                private_data: Vec::new(),
                traffic_class: self.tos,
            })?;
            let event = self.next_event(rt, |e| match e {
                CmEvent::SidrResolved { .. }
                | CmEvent::SidrFailed { .. }
                | CmEvent::TimedOut { .. }
                    if e.id() == id =>
                {
                    Some(e.clone())
                }
                _ => None,
            })?;
            match event {
                CmEvent::SidrResolved { qpn, qkey, .. } => {
                    // The resolved route's address handle: rdma_cm gives it the TOS.
                    break UdDest {
                        traffic_class: self.tos,
                        ..UdDest::new(self.peer, qpn, qkey)
                    };
                }
                CmEvent::SidrFailed { status, .. }
                    if status == sidr_status::SERVICE_ID_NOT_SUPPORTED
                        && tries < DATA_CONNECT_TRIES =>
                {
                    rt.serve_for(DATA_CONNECT_PAUSE)?;
                }
                e => return Err(cm_app::connect_error(&e, self.peer, self.port)),
            }
        };
        if answered {
            let sge = vec![Sge {
                addr: lane.addr,
                length: 4,
                lkey: lane.key,
            }];
            let imm = lane.qpn.value();
            let mut wr = SendWr::new(UD_PARAMS_WRID, SendOp::SendWithImm { imm }, sge);
            wr.ud = Some(dest);
            rt.post_send(lane.qpn, wr)?;
            let qpn = lane.qpn;
            let wc = wait_or_stall(rt, lane.cq, self.timeout, || {
                format!("QP {qpn}'s SEND of its UD connection parameters")
            })?;
            check(&wc)?;
        }
        Ok(dest)
    }

    /// The next SIDR_REQ answered with `lane`'s QP and rdma_cm's Q_Key; then, if the
    /// server sends too, the client's SEND with its QPN (the receive posted before the
    /// SIDR_REP, as perftest posts it before `rdma_accept`).
    fn resolve_server(
        &mut self,
        rt: &mut Runtime,
        lane: &UdLane,
        answered: bool,
    ) -> Result<Option<UdDest>, AppError> {
        let id = self.next_event(rt, |e| match e {
            CmEvent::SidrRequest { id, .. } => Some(*id),
            _ => None,
        })?;
        if answered {
            let sge = vec![Sge {
                addr: lane.addr,
                length: GRH_LEN as u32 + 4,
                lkey: lane.key,
            }];
            rt.post_recv(lane.qpn, RecvWr::new(UD_PARAMS_WRID, sge))?;
        }
        rt.cm_sidr_reply(id, &SidrReply::new(lane.qpn, RDMA_UDP_QKEY))?;
        if !answered {
            return Ok(None);
        }
        let qpn = lane.qpn;
        let wc = wait_or_stall(rt, lane.recv_cq, self.timeout, || {
            format!("the client's UD connection parameters for QP {qpn}")
        })?;
        check(&wc)?;
        let (Some(imm), Some(src)) = (wc.imm_data, wc.src_addr) else {
            return Err(AppError::Invalid(format!(
                "the client's UD connection parameters for QP {qpn} came without its QPN"
            )));
        };
        let remote = Qpn::new(imm & 0xff_ffff);
        let area = rt.mr_bytes(lane.key).and_then(|b| {
            let at = usize::try_from(lane.addr.checked_sub(lane.va)?).ok()?;
            b.get(at..at + GRH_LEN)
        });
        Ok(area
            .and_then(|a| UdDest::reply_to(a, remote, RDMA_UDP_QKEY))
            .or(Some(UdDest::new(src, remote, RDMA_UDP_QKEY))))
    }

    /// The server listens again only after the sync: a REJ "invalid service ID" meanwhile
    /// is retried, as perftest does.
    fn connect_data_client(
        &mut self,
        rt: &mut Runtime,
        qpn: Qpn,
        out_reads: u8,
        mtu: Mtu,
    ) -> Result<ConnId, AppError> {
        let mut params = self.connect_params(rt, qpn, out_reads);
        params.mtu = params.mtu.min(mtu);
        // perftest sets its type of service on the test's connections, not the dialogue's.
        params.traffic_class = self.tos;
        let mut tries = 0;
        loop {
            tries += 1;
            let id = rt.cm_connect(params.clone())?;
            match cm_app::wait_established(rt, id, self.peer, self.port, self.timeout) {
                Ok(_) => return Ok(id),
                Err(AppError::Rejected { reason, .. })
                    if reason == reject_reason::INVALID_SERVICE_ID
                        && tries < DATA_CONNECT_TRIES =>
                {
                    rt.serve_for(DATA_CONNECT_PAUSE)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The key handshakes, one per QP (the keys the test uses).
    pub fn exchange_keys(&mut self, rt: &mut Runtime, local: Vec<Keys>) -> Result<(), AppError> {
        let mut remote = Vec::with_capacity(local.len());
        for keys in &local {
            remote.push(self.hand_shake(rt, *keys, "exchanging QP keys")?);
        }
        (self.local, self.remote) = (local, remote);
        Ok(())
    }

    /// Our keys, one per QP.
    pub fn locals(&self) -> &[Keys] {
        &self.local
    }

    /// The peer's keys, in the order of [`Self::locals`].
    pub fn peers(&self) -> &[Keys] {
        &self.remote
    }

    /// One more `ctx_hand_shake` with the first QP's keys; the peer must send its keys
    /// unchanged.
    pub fn sync(&mut self, rt: &mut Runtime) -> Result<(), AppError> {
        self.sync_qp(rt, 0)
    }

    /// One handshake per QP, each with that QP's keys.
    pub fn sync_each(&mut self, rt: &mut Runtime) -> Result<(), AppError> {
        (0..self.local.len()).try_for_each(|i| self.sync_qp(rt, i))
    }

    fn sync_qp(&mut self, rt: &mut Runtime, i: usize) -> Result<(), AppError> {
        let (local, first) = (self.local[i], self.remote[i]);
        let again = self.hand_shake(rt, local, "synchronising with the peer")?;
        if again != first {
            return Err(OobError::KeysChanged {
                first: first.to_string(),
                now: again.to_string(),
            }
            .into());
        }
        Ok(())
    }

    /// After the test: for WRITE, READ and atomics a sync and the results (the peer's are
    /// returned), then the closing sync and the teardown; `timeout` bounds the first wait
    /// (a passive server waits through the client's whole test).
    pub fn finish(
        mut self,
        rt: &mut Runtime,
        test: BwTest,
        mine: &BwReport,
        timeout: Duration,
    ) -> Result<Option<BwReport>, AppError> {
        let normal = self.timeout;
        self.timeout = timeout;
        let peer_report = if test.exchanges_reports() {
            self.sync(rt)?;
            self.timeout = normal;
            Some(exchange_reports_over(
                &mut |m, t, s| self.exchange(rt, m, t, s),
                mine,
            )?)
        } else {
            None
        };
        let wait = self.timeout;
        self.close(rt, wait)?;
        Ok(peer_report)
    }

    /// `-b`: `xchg_bw_reports` (the peer's report returned).
    pub fn exchange_reports(
        &mut self,
        rt: &mut Runtime,
        mine: &BwReport,
    ) -> Result<BwReport, AppError> {
        Ok(exchange_reports_over(
            &mut |m, t, s| self.exchange(rt, m, t, s),
            mine,
        )?)
    }

    /// `ctx_close_connection` (a last sync, waiting up to `wait`: a passive server waits
    /// there through the client's test), then [`Self::hang_up`].
    pub fn close(mut self, rt: &mut Runtime, wait: Duration) -> Result<(), AppError> {
        let normal = self.timeout;
        self.timeout = wait;
        self.sync(rt)?;
        self.timeout = normal;
        self.hang_up(rt)
    }

    /// The teardown: the client answers the wire a moment, then disconnects the test's
    /// connection and the dialogue's; the server waits for those disconnects a moment
    /// (ib_write_lat -R goes straight here, without a last sync).
    pub fn hang_up(mut self, rt: &mut Runtime) -> Result<(), AppError> {
        match self.role {
            Role::Client => {
                // The server's last message is in and acknowledged, but that ACK may be
                // lost, and only a connected QP answers the server's repeat: disconnecting
                // at once left perftest's server (on rxe, which takes retry_cnt 7 for no
                // limit) sending it again for ever, never reading our DREQ (an interop run
                // at 2% loss). So the wire is answered a while first, as TCP's TIME-WAIT
                // answers a repeated FIN.
                rt.serve_for(LINGER)?;
                // perftest's server may have closed first (it destroys its IDs at once).
                let gone: Vec<ConnId> = self
                    .events
                    .iter()
                    .filter_map(|e| match e {
                        CmEvent::Disconnected { id } => Some(*id),
                        _ => None,
                    })
                    .collect();
                let open: Vec<ConnId> = self
                    .data
                    .into_iter()
                    .chain([self.comm])
                    .filter(|id| !gone.contains(id))
                    .collect();
                cm_app::disconnect_all(rt, &open, self.timeout)?;
            }
            Role::Server => {
                if let Some(l) = self.listener {
                    rt.host_mut().cm_stop_listening(l);
                }
                let mut open: Vec<ConnId> = self.data.into_iter().chain([self.comm]).collect();
                let deadline = Instant::now() + TEARDOWN;
                while !open.is_empty() {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let event = match self.events.pop_front() {
                        Some(e) => e,
                        None => match rt.wait_cm_event(left) {
                            Ok(e) => e,
                            Err(_) => break,
                        },
                    };
                    if let CmEvent::Disconnected { id } = event {
                        open.retain(|&o| o != id);
                    }
                }
                // The client silent after the wait: close our side (a connection it
                // already dropped is no error).
                for id in open {
                    let _ = cm_app::disconnect(rt, id, LINGER);
                }
                rt.serve_for(LINGER)?;
            }
        }
        Ok(())
    }

    /// `ctx_hand_shake` over rdma_cm: the binary keys each way.
    fn hand_shake(
        &mut self,
        rt: &mut Runtime,
        local: Keys,
        step: &'static str,
    ) -> Result<Keys, AppError> {
        let mine = local.to_binary(0);
        let mut theirs = [0u8; KEYS_BINARY_LEN];
        self.exchange(rt, &mine, &mut theirs, step)?;
        Ok(Keys::parse_binary(&theirs).map_err(OobError::from)?)
    }

    /// `ctx_xchg_data_rdma`: [`Carrier::exchange`] over the dialogue's connection.
    fn exchange(
        &mut self,
        rt: &mut Runtime,
        mine: &[u8],
        theirs: &mut [u8],
        step: &'static str,
    ) -> Result<(), OobError> {
        let role = self.role;
        Comm { d: self, rt }.exchange(role, mine, theirs, step)
    }

    fn post_recv(&self, rt: &mut Runtime) -> Result<(), crate::endpoint::RuntimeError> {
        let sge = vec![Sge {
            addr: self.va,
            length: LEN,
            lkey: self.key,
        }];
        rt.post_recv(self.qpn, RecvWr::new(RECV_WRID, sge))
    }

    fn send(&mut self, rt: &mut Runtime, msg: &[u8], step: &'static str) -> Result<(), OobError> {
        let len = msg.len().min(LEN as usize);
        if let Some(b) = rt.mr_bytes_mut(self.key) {
            b[LEN as usize..][..len].copy_from_slice(&msg[..len]);
        }
        let sge = vec![Sge {
            addr: self.va + u64::from(LEN),
            length: len as u32,
            lkey: self.key,
        }];
        rt.post_send(self.qpn, SendWr::new(SEND_WRID, SendOp::Send, sge))
            .map_err(|e| io_error(step, e.to_string()))?;
        loop {
            if self.completion(rt, step)? {
                return Ok(());
            }
        }
    }

    fn recv(
        &mut self,
        rt: &mut Runtime,
        buf: &mut [u8],
        step: &'static str,
    ) -> Result<(), OobError> {
        while self.early.is_none() {
            if self.hung_up {
                return Err(OobError::Closed {
                    step,
                    got: 0,
                    expected: buf.len(),
                });
            }
            self.completion(rt, step)?;
        }
        let got = self.early.take().unwrap_or_default();
        if got.len() != buf.len() {
            return Err(io_error(
                step,
                format!("the peer sent {} bytes, {} expected", got.len(), buf.len()),
            ));
        }
        buf.copy_from_slice(&got);
        Ok(())
    }

    /// Whether a work request, completed with `status`, was flushed because the peer hung up
    /// the dialogue's connection (its DREQ moves our QP to the error state). perftest's
    /// client disconnects as soon as it has the server's last message, so when the ACK of
    /// that SEND is lost (1 in 50 at 2% loss) the flush is the only answer that can come:
    /// our SEND counts as delivered. Should the peer have hung up before it had it, the
    /// next receive fails ([`Self::recv`]); after the last message there is none, and the
    /// peer reports its own failure. The disconnect stays queued for [`Self::hang_up`].
    fn flushed_by_hang_up(&mut self, rt: &mut Runtime, status: WcStatus) -> bool {
        if status != WcStatus::WrFlushErr {
            return false;
        }
        self.events
            .extend(std::iter::from_fn(|| rt.host_mut().poll_cm_event()));
        self.hung_up = self
            .events
            .iter()
            .any(|e| matches!(e, CmEvent::Disconnected { id } if *id == self.comm));
        self.hung_up
    }

    /// Waits for the next completion: keeps a received message (reposting the receive) and
    /// returns whether it was our SEND's.
    fn completion(&mut self, rt: &mut Runtime, step: &'static str) -> Result<bool, OobError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            // The queue first: the peer's last message may arrive with its disconnect (the
            // client tears every connection down at once after its last sync).
            if let Some(wc) = rt.poll_cq(self.cq) {
                if self.flushed_by_hang_up(rt, wc.status) {
                    return Ok(wc.wr_id == SEND_WRID);
                }
                if wc.status != WcStatus::Success {
                    return Err(io_error(
                        step,
                        format!("completion failed: {}", wc.status.name()),
                    ));
                }
                if wc.opcode == WcOpcode::Recv {
                    let n = (wc.byte_len as usize).min(LEN as usize);
                    let bytes = rt.mr_bytes(self.key).map(|b| b[..n].to_vec());
                    self.early = Some(bytes.unwrap_or_default());
                    self.post_recv(rt)
                        .map_err(|e| io_error(step, e.to_string()))?;
                    return Ok(false);
                }
                return Ok(wc.wr_id == SEND_WRID);
            }
            while let Some(e) = rt.host_mut().poll_cm_event() {
                match e {
                    CmEvent::Disconnected { id } if id == self.comm => {
                        return Err(OobError::Closed {
                            step,
                            got: 0,
                            expected: 1,
                        });
                    }
                    other => self.events.push_back(other),
                }
            }
            if Instant::now() >= deadline {
                return Err(OobError::Timeout {
                    step,
                    after: self.timeout,
                });
            }
            rt.turn(Some(deadline))
                .map_err(|e| io_error(step, e.to_string()))?;
        }
    }
}

/// The dialogue's connection as a [`Carrier`]: a SEND per message, the runtime answering the
/// wire while it waits.
struct Comm<'a> {
    d: &'a mut CmDialogue,
    rt: &'a mut Runtime,
}

impl Carrier for Comm<'_> {
    fn send(&mut self, msg: &[u8], step: &'static str) -> Result<(), OobError> {
        self.d.send(self.rt, msg, step)
    }

    fn recv(&mut self, buf: &mut [u8], step: &'static str) -> Result<(), OobError> {
        self.d.recv(self.rt, buf, step)
    }
}

/// perftest's `-R` client resolves the server with `getaddrinfo` for AF_INET; ours takes
/// an address.
fn server_addr(server: &str) -> Result<IpAddr, AppError> {
    server.parse().map_err(|_| {
        AppError::Usage(format!(
            "-R needs the server's IP address, not \"{server}\" (rdma_cm resolves no names here)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::testing::{runtime, runtime_seeded};
    use super::super::BwTest;
    use super::*;
    use crate::io::memory::{self, MemoryDevice, MemoryLinkConfig};
    use crate::io::{Capabilities, Device, DeviceError, SystemClock};
    use crate::time::Instant as LinkInstant;
    use crate::wire::RocePacket;
    use crate::wire::opcode::op;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::thread;

    /// The in-memory link, losing the RC ACKs it transmits while `on` is set (at most
    /// `lose` of them), and counting those it lets through meanwhile in `passed`.
    struct AckLoss {
        inner: MemoryDevice,
        on: Arc<AtomicBool>,
        lose: usize,
        lost: Arc<AtomicUsize>,
        passed: Arc<AtomicUsize>,
    }

    impl AckLoss {
        fn new(inner: MemoryDevice, lose: usize) -> AckLoss {
            AckLoss {
                inner,
                on: Arc::default(),
                lose,
                lost: Arc::default(),
                passed: Arc::default(),
            }
        }
    }

    impl Device for AckLoss {
        fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
            self.inner.receive(consume)
        }

        fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
            let ack =
                RocePacket::parse(frame).is_ok_and(|p| p.bth().opcode.low() == op::ACKNOWLEDGE);
            if ack && self.on.load(Ordering::SeqCst) {
                if self.lost.load(Ordering::SeqCst) < self.lose {
                    self.lost.fetch_add(1, Ordering::SeqCst);
                    return Ok(true);
                }
                self.passed.fetch_add(1, Ordering::SeqCst);
            }
            self.inner.transmit(frame)
        }

        fn capabilities(&self) -> Capabilities {
            self.inner.capabilities()
        }

        fn next_wakeup(&self) -> Option<LinkInstant> {
            self.inner.next_wakeup()
        }
    }

    fn options(server: Option<&str>) -> PerfOptions {
        let mut opts = PerfOptions::new(BwTest::Write, server.map(str::to_owned));
        opts.timeout = Duration::from_secs(20);
        opts
    }

    /// The dialogue opened over `rt` and its (zero) keys exchanged.
    fn keyed(rt: &mut Runtime, server: Option<&str>) -> Result<CmDialogue, AppError> {
        let mut d = CmDialogue::open(rt, &options(server))?;
        d.exchange_keys(rt, vec![zero_keys()])?;
        Ok(d)
    }

    /// Our server's side of the dialogue over `device`: it opens, and closes.
    fn server(device: MemoryDevice) -> thread::JoinHandle<Result<(), String>> {
        thread::spawn(move || {
            let mut rt = runtime(device, "10.0.0.2/24");
            let d = keyed(&mut rt, None).map_err(|e| e.to_string())?;
            d.close(&mut rt, Duration::from_secs(20))
                .map_err(|e| e.to_string())
        })
    }

    /// perftest's client hangs up as soon as it has the server's last message: when the
    /// ACK of that SEND is lost, the disconnect flushes it, and the server's close is done
    /// (it failed WR_FLUSH_ERR, as in an interop run at 2% loss).
    #[test]
    fn the_last_send_flushed_by_the_clients_hang_up_was_delivered() {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let server = server(b);
        let device = AckLoss::new(a, usize::MAX);
        let (on, lost) = (device.on.clone(), device.lost.clone());
        let mut rt = runtime_seeded(device, "10.0.0.1/24", 1);
        let d = keyed(&mut rt, Some("10.0.0.2")).unwrap();
        on.store(true, Ordering::SeqCst);
        d.close(&mut rt, Duration::from_secs(20)).unwrap();
        assert_eq!(server.join().unwrap(), Ok(()));
        assert!(lost.load(Ordering::SeqCst) >= 1, "no ACK was lost");
    }

    /// The client's ACK of the server's last message is lost: the client answers the
    /// server's repeat before it hangs up, so the server's last SEND completes (it did not:
    /// the client's QP was in the error state at once, and perftest's server on rxe sent the
    /// message again for ever).
    #[test]
    fn the_client_answers_a_repeat_of_the_last_message_before_it_hangs_up() {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let server = server(b);
        let device = AckLoss::new(a, 1);
        let (on, lost, passed) = (
            device.on.clone(),
            device.lost.clone(),
            device.passed.clone(),
        );
        let mut rt = runtime_seeded(device, "10.0.0.1/24", 1);
        let d = keyed(&mut rt, Some("10.0.0.2")).unwrap();
        on.store(true, Ordering::SeqCst);
        d.close(&mut rt, Duration::from_secs(20)).unwrap();
        assert_eq!(server.join().unwrap(), Ok(()));
        assert_eq!(lost.load(Ordering::SeqCst), 1, "the last message's ACK");
        assert!(
            passed.load(Ordering::SeqCst) >= 1,
            "the repeat of the last message went unanswered"
        );
    }

    /// A client that hangs up without its last message leaves the server's close failing,
    /// not waiting and not done.
    #[test]
    fn a_hang_up_before_the_last_message_fails_the_close() {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let server = server(b);
        let mut rt = runtime_seeded(a, "10.0.0.1/24", 1);
        let d = keyed(&mut rt, Some("10.0.0.2")).unwrap();
        d.hang_up(&mut rt).unwrap();
        let err = server.join().unwrap().unwrap_err();
        assert!(
            err.ends_with(
                "synchronising with the peer: peer closed the connection after 0 of 56 bytes"
            ),
            "{err}"
        );
    }
}
