//! The engine: memory regions, completion queues and queue pairs of one RoCE device, driven
//! by explicit inputs (work requests, packets, `now`) and polled for outputs (packets,
//! deadlines, completions, events), in the manner of quinn-proto.

use std::collections::VecDeque;
use std::net::IpAddr;

use super::attrs::{ModifyQp, QpAttrs, QpState, QpType};
use super::config::{Event, Stats, Transmit, TransportConfig};
use super::cq::{CompletionQueue, CqId, WorkCompletion};
use super::error::{DropReason, TransportError};
use super::mr::{
    Access, MemoryRegion, MemoryWindow, MrError, MrTable, MwBind, MwType, PdId, inc_rkey,
};
use super::qp::{Ctx, QpInit, QpUsage, QueuePair};
use super::qp_table::QpTable;
use super::sched::Schedule;
use super::srq::{Srq, SrqAttrs, SrqId, SrqInit};
use super::wr::{RecvWr, SendOp, SendWr};
use crate::time::Instant;
use crate::wire::{IbPacketRepr, Opcode, Qpn};

/// A sans-IO RDMA transport engine (one RoCE device's worth of state).
#[derive(Debug)]
pub struct Engine {
    config: TransportConfig,
    mrs: MrTable,
    cqs: Vec<CompletionQueue>,
    /// By QPN; QPNs are handed out in order and not reused (`qp_table.rs`).
    qps: QpTable,
    /// Queue pairs with a timer running, and those that may have a packet to send.
    sched: Schedule,
    stats: Stats,
    events: VecDeque<Event>,
    /// Indexed by `SrqId`.
    srqs: Vec<Option<Srq>>,
    /// The latest `now` of any input ([`Ctx::clock`]).
    clock: Instant,
}

impl Engine {
    /// An engine with no memory regions, completion queues or queue pairs yet.
    pub fn new(config: TransportConfig) -> Engine {
        Engine {
            config,
            mrs: MrTable::new(config.id_seed),
            cqs: Vec::new(),
            qps: QpTable::new(config.id_seed),
            sched: Schedule::default(),
            stats: Stats::default(),
            events: VecDeque::new(),
            srqs: Vec::new(),
            clock: Instant::ZERO,
        }
    }

    /// The configuration the engine was made with.
    pub fn config(&self) -> &TransportConfig {
        &self.config
    }

    /// What the engine has done so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    // ---- protection domains, memory regions and windows ----

    /// `ibv_alloc_pd`. Every engine also has [`PdId::DEFAULT`], which the verbs without a
    /// `pd` argument use.
    pub fn alloc_pd(&mut self) -> PdId {
        self.mrs.alloc_pd()
    }

    /// `ibv_dealloc_pd`: refused while a queue pair, region or window uses it.
    pub fn dealloc_pd(&mut self, pd: PdId) -> Result<(), TransportError> {
        let srq_uses = self.srqs.iter().flatten().any(|srq| srq.pd == pd);
        if srq_uses || self.qps.iter().any(|qp| qp.pd() == pd) {
            return Err(MrError::PdInUse(pd.0).into());
        }
        Ok(self.mrs.dealloc_pd(pd)?)
    }

    /// Registers `data` as seen at `va..va + data.len()` in the default protection domain;
    /// returns its L_Key (also its R_Key if `access` grants a remote right).
    pub fn register_mr(
        &mut self,
        va: u64,
        data: Vec<u8>,
        access: Access,
    ) -> Result<u32, TransportError> {
        self.register_mr_in(PdId::DEFAULT, va, data, access)
    }

    /// `ibv_reg_mr` in protection domain `pd`.
    pub fn register_mr_in(
        &mut self,
        pd: PdId,
        va: u64,
        data: Vec<u8>,
        access: Access,
    ) -> Result<u32, TransportError> {
        Ok(self.mrs.register(pd, va, data, access)?)
    }

    /// Registers under a chosen key, for replaying captures and tests that must use a peer's
    /// R_Keys. Keys whose slot (`key >> 8`) exceeds 0xffff, or whose slot is taken, are
    /// refused so that the key table stays small.
    pub fn register_mr_with_key(
        &mut self,
        key: u32,
        va: u64,
        data: Vec<u8>,
        access: Access,
    ) -> Result<(), TransportError> {
        Ok(self
            .mrs
            .register_with_key(PdId::DEFAULT, key, va, data, access)?)
    }

    /// `ib_alloc_mr(IB_MR_TYPE_MEM_REG)`: a fast-registration region owning `capacity`
    /// bytes, free until a [`SendOp::RegMr`] work request maps them; returns its key.
    ///
    /// [`SendOp::RegMr`]: super::SendOp::RegMr
    pub fn alloc_mr(&mut self, pd: PdId, capacity: usize) -> Result<u32, TransportError> {
        Ok(self.mrs.alloc_fast(pd, capacity)?)
    }

    /// Removes a region and returns its bytes; refused while windows are bound to it.
    pub fn deregister_mr(&mut self, key: u32) -> Result<Vec<u8>, TransportError> {
        Ok(self.mrs.deregister(key)?)
    }

    /// The region `key` (its L_Key or R_Key) names.
    pub fn mr(&self, key: u32) -> Option<&MemoryRegion> {
        self.mrs.get(key)
    }

    /// The region `key` names, to fill or read its bytes between operations.
    pub fn mr_mut(&mut self, key: u32) -> Option<&mut MemoryRegion> {
        self.mrs.get_mut(key)
    }

    /// `ibv_alloc_mw`: an unbound memory window; returns its R_Key.
    pub fn alloc_mw(&mut self, pd: PdId, kind: MwType) -> Result<u32, TransportError> {
        Ok(self.mrs.alloc_window(pd, kind)?)
    }

    /// `ibv_dealloc_mw`.
    pub fn dealloc_mw(&mut self, key: u32) -> Result<(), TransportError> {
        Ok(self.mrs.dealloc_window(key)?)
    }

    /// The window `key` names.
    pub fn mw(&self, key: u32) -> Option<&MemoryWindow> {
        self.mrs.window(key)
    }

    /// `ibv_bind_mw` for a type 1 window: posts a BIND_MW work request on `qpn` under the
    /// window's next key byte, which it returns (as libibverbs does); the window answers to
    /// that key once the request completes. Wait for that completion before binding the
    /// same window again.
    pub fn bind_mw(
        &mut self,
        qpn: Qpn,
        wr_id: u64,
        mw: u32,
        bind: MwBind,
    ) -> Result<u32, TransportError> {
        let window = self.mrs.window(mw).ok_or(MrError::UnknownKey(mw))?;
        if window.kind() != MwType::Type1 {
            return Err(MrError::BadBind {
                key: mw,
                why: "ibv_bind_mw binds type 1 windows; post BIND_MW for type 2",
            }
            .into());
        }
        let rkey = inc_rkey(mw);
        let wr = SendWr::new(wr_id, SendOp::BindMw { mw, rkey, bind }, Vec::new());
        self.post_send(qpn, wr)?;
        Ok(rkey)
    }

    // ---- completion queues ----

    /// A completion queue holding `capacity` entries before it overruns (`ibv_create_cq`).
    pub fn create_cq(&mut self, capacity: usize) -> CqId {
        self.cqs.push(CompletionQueue::new(capacity));
        CqId(self.cqs.len() as u32 - 1)
    }

    /// [`Engine::create_cq`] whose completions carry the engine's time when they were
    /// queued (`ibv_create_cq_ex` with `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`).
    pub fn create_cq_with_timestamps(&mut self, capacity: usize) -> CqId {
        self.cqs.push(CompletionQueue::with_timestamps(capacity));
        CqId(self.cqs.len() as u32 - 1)
    }

    /// The completion queue `cq`, if it exists.
    pub fn cq(&self, cq: CqId) -> Option<&CompletionQueue> {
        self.cqs.get(cq.0 as usize)
    }

    /// Completions waiting in all completion queues.
    pub fn completions_waiting(&self) -> usize {
        self.cqs.iter().map(CompletionQueue::len).sum()
    }

    /// The oldest completion of `cq` (`ibv_poll_cq` of one entry).
    pub fn poll_completion(&mut self, cq: CqId) -> Option<WorkCompletion> {
        self.cqs.get_mut(cq.0 as usize)?.pop()
    }

    /// The oldest asynchronous event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ---- shared receive queues ----

    /// `ibv_create_srq`: its size and scatter/gather entries within the engine's
    /// `max_qp_wr` and `max_sge`, its limit within its size.
    pub fn create_srq(&mut self, init: SrqInit) -> Result<SrqId, TransportError> {
        if !self.mrs.has_pd(init.pd) {
            return Err(MrError::UnknownPd(init.pd.0).into());
        }
        let srq = Srq::new(&init, self.config.max_qp_wr, self.config.max_sge)?;
        let index = match self.srqs.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.srqs.push(None);
                self.srqs.len() - 1
            }
        };
        self.srqs[index] = Some(srq);
        Ok(SrqId(index as u32))
    }

    fn srq_mut(&mut self, id: SrqId) -> Result<&mut Srq, TransportError> {
        self.srqs
            .get_mut(id.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(TransportError::UnknownSrq(id.0))
    }

    /// `ibv_modify_srq`: resizes it (never below what is posted or the armed limit) and/or
    /// arms its limit (0 disarms).
    pub fn modify_srq(
        &mut self,
        id: SrqId,
        max_wr: Option<u32>,
        limit: Option<u32>,
    ) -> Result<(), TransportError> {
        let device_max = self.config.max_qp_wr;
        Ok(self.srq_mut(id)?.modify(max_wr, limit, device_max)?)
    }

    /// `ibv_query_srq`.
    pub fn query_srq(&self, id: SrqId) -> Result<SrqAttrs, TransportError> {
        self.srqs
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .map(Srq::attrs)
            .ok_or(TransportError::UnknownSrq(id.0))
    }

    /// `ibv_destroy_srq`: refused while queue pairs use it (EBUSY); its receives are
    /// dropped without completions.
    pub fn destroy_srq(&mut self, id: SrqId) -> Result<(), TransportError> {
        if self.srq_mut(id)?.users > 0 {
            return Err(TransportError::SrqInUse(id.0));
        }
        self.srqs[id.0 as usize] = None;
        Ok(())
    }

    /// `ibv_post_srq_recv`: refused when the queue is full (ENOMEM) or the request has more
    /// scatter/gather entries than it allows; nothing is posted then.
    pub fn post_srq_recv(&mut self, id: SrqId, wr: RecvWr) -> Result<(), TransportError> {
        let srq = self.srq_mut(id)?;
        if wr.sg_list.len() > srq.max_sge as usize {
            return Err(TransportError::SrqFull {
                srq: id.0,
                why: "more scatter/gather entries than max_sge",
            });
        }
        if srq.is_full() {
            return Err(TransportError::SrqFull {
                srq: id.0,
                why: "max_wr receives are posted",
            });
        }
        srq.push(wr);
        Ok(())
    }

    // ---- queue pairs ----

    /// Creates a queue pair in RESET with the next free QPN.
    pub fn create_qp(&mut self, init: QpInit) -> Result<Qpn, TransportError> {
        let qpn = self.qps.next_free().ok_or(TransportError::NoQpn)?;
        self.create_qp_with_qpn(qpn, init)?;
        Ok(qpn)
    }

    /// Creates a queue pair with a chosen number, for QP1 (the GSI, which receives
    /// communication-management MADs) or to mirror a peer's numbering in tests.
    pub fn create_qp_with_qpn(&mut self, qpn: Qpn, init: QpInit) -> Result<(), TransportError> {
        if !self.mrs.has_pd(init.pd) {
            return Err(MrError::UnknownPd(init.pd.0).into());
        }
        if let Some(id) = init.srq {
            self.srq_mut(id)?;
        }
        for cq in [init.send_cq, init.recv_cq] {
            if self.cqs.get(cq.0 as usize).is_none() {
                return Err(TransportError::UnknownCq(cq.0));
            }
        }
        // With no QP0, every packet addressed to it is dropped as for an unknown QP, as
        // CA17-33 asks.
        if qpn == Qpn::SMI {
            return Err(TransportError::NoQp0);
        }
        if qpn.value() >= 1 << 24 {
            return Err(TransportError::UnknownQp(qpn));
        }
        if !self.qps.insert(QueuePair::new(qpn, init)) {
            return Err(TransportError::QpnInUse(qpn));
        }
        self.qps.note_chosen(qpn);
        if let Some(id) = init.srq {
            self.srq_mut(id)?.users += 1;
        }
        Ok(())
    }

    /// Destroys a queue pair (`ibv_destroy_qp`): its work requests are dropped, its QPN
    /// freed, and its shared receive queue loses a user.
    pub fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), TransportError> {
        let qp = self.qp(qpn)?;
        let (srq, slot) = (qp.srq(), qp.sched);
        if !self.qps.remove(qpn) {
            return Err(TransportError::UnknownQp(qpn));
        }
        self.sched.forget(qpn, &slot);
        if let Some(srq) = srq.and_then(|id| self.srq_mut(id).ok()) {
            srq.users = srq.users.saturating_sub(1);
        }
        Ok(())
    }

    /// The state and attributes of a queue pair (`ibv_query_qp`).
    pub fn query_qp(&self, qpn: Qpn) -> Result<(QpState, QpAttrs), TransportError> {
        Ok(self.qp(qpn)?.query())
    }

    /// The transport service of a queue pair.
    pub fn qp_type(&self, qpn: Qpn) -> Result<QpType, TransportError> {
        Ok(self.qp(qpn)?.qp_type())
    }

    /// The in-flight window of an RC requester, in packets (for tests and statistics).
    pub fn qp_window(&self, qpn: Qpn) -> Result<u32, TransportError> {
        Ok(self.qp(qpn)?.window())
    }

    /// The responder's expected PSN (for diagnostics and capture replay).
    pub fn expected_psn(&self, qpn: Qpn) -> Result<crate::wire::Psn, TransportError> {
        Ok(self.qp(qpn)?.expected_psn())
    }

    /// What a queue pair holds (for limits checks in tests and fuzzing).
    pub fn qp_usage(&self, qpn: Qpn) -> Result<QpUsage, TransportError> {
        Ok(self.qp(qpn)?.usage())
    }

    fn qp(&self, qpn: Qpn) -> Result<&QueuePair, TransportError> {
        self.qps.get(qpn).ok_or(TransportError::UnknownQp(qpn))
    }

    /// Runs `f` on a queue pair with the rest of the engine borrowed alongside; afterwards
    /// the queue pair's deadline is brought up to date and it gets a turn to send.
    fn with_qp<R>(
        &mut self,
        qpn: Qpn,
        now: Instant,
        f: impl FnOnce(&mut QueuePair, &mut Ctx<'_>) -> R,
    ) -> Result<R, TransportError> {
        self.run_qp(qpn, now, true, f)
    }

    /// [`Engine::with_qp`]; `ready` false leaves its turn to send to the caller.
    fn run_qp<R>(
        &mut self,
        qpn: Qpn,
        now: Instant,
        ready: bool,
        f: impl FnOnce(&mut QueuePair, &mut Ctx<'_>) -> R,
    ) -> Result<R, TransportError> {
        // Field by field: the QP and the context borrow disjoint parts of the engine.
        let qp = self
            .qps
            .get_mut(qpn)
            .ok_or(TransportError::UnknownQp(qpn))?;
        self.clock = self.clock.max(now);
        let mut ctx = Ctx {
            now,
            clock: self.clock,
            mrs: &mut self.mrs,
            cqs: &mut self.cqs,
            stats: &mut self.stats,
            config: &self.config,
            events: &mut self.events,
            srqs: &mut self.srqs,
        };
        let r = f(qp, &mut ctx);
        let deadline = qp.next_deadline();
        self.sched.update(qpn, &mut qp.sched, deadline, ready);
        Ok(r)
    }

    /// `ibv_modify_qp`: checks the transition and attributes (IBA 10.3.1, 11.2.4.2), then
    /// applies them; a refused modification changes nothing.
    pub fn modify_qp(&mut self, qpn: Qpn, modify: &ModifyQp) -> Result<(), TransportError> {
        self.with_qp(qpn, Instant::ZERO, |qp, ctx| qp.modify(ctx, modify))?
    }

    /// `ibv_post_send`. In ERR and SQE the request completes at once with WR_FLUSH_ERR.
    pub fn post_send(&mut self, qpn: Qpn, wr: SendWr) -> Result<(), TransportError> {
        self.with_qp(qpn, Instant::ZERO, |qp, ctx| qp.post_send(ctx, wr))?
    }

    /// `ibv_post_recv`. In ERR the request completes at once with WR_FLUSH_ERR.
    pub fn post_recv(&mut self, qpn: Qpn, wr: RecvWr) -> Result<(), TransportError> {
        self.with_qp(qpn, Instant::ZERO, |qp, ctx| qp.post_recv(ctx, wr))?
    }

    // ---- the wire ----

    /// A received packet: `packet` holds BTH through pad (the endpoint checked and removed
    /// the ICRC), `src` is the sender's IP address. A dropped packet changes nothing.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        src: IpAddr,
        packet: &[u8],
    ) -> Result<(), DropReason> {
        match IbPacketRepr::parse(packet) {
            Ok(pkt) => self.handle_parsed(now, src, &[], &pkt),
            Err(e) => {
                self.stats.packets_received += 1;
                self.stats.dropped += 1;
                Err(e.into())
            }
        }
    }

    /// [`Engine::handle_packet`] of a packet already parsed: the host has sliced and checked
    /// the whole frame, so parsing its IB part again from bytes would repeat that work on
    /// every received packet (a tenth of a 64-byte SEND client's user time went to parsing
    /// ACKs twice). `ip_header` is the packet's IP header as received (20 bytes of IPv4 or 40
    /// of IPv6), which a UD receive gets in its GRH area (Annex A17.4.5.2); without it (an
    /// empty slice) the area is made up from `src`: an IPv6-style header whose SGID is the
    /// sender's address.
    pub fn handle_parsed(
        &mut self,
        now: Instant,
        src: IpAddr,
        ip_header: &[u8],
        pkt: &IbPacketRepr<'_>,
    ) -> Result<(), DropReason> {
        self.stats.packets_received += 1;
        let result = self.dispatch(now, src, ip_header, pkt);
        if result.is_err() {
            self.stats.dropped += 1;
        }
        result
    }

    fn dispatch(
        &mut self,
        now: Instant,
        src: IpAddr,
        ip_header: &[u8],
        pkt: &IbPacketRepr<'_>,
    ) -> Result<(), DropReason> {
        if pkt.bth.tver != 0 {
            return Err(DropReason::UnsupportedVersion(pkt.bth.tver));
        }
        if pkt.bth.opcode == Opcode::CNP {
            self.stats.cnps_received += 1;
            return Err(DropReason::Cnp);
        }
        let qpn = pkt.bth.dest_qp;
        self.with_qp(qpn, now, |qp, ctx| {
            qp.handle_packet(ctx, pkt, src, ip_header)
        })
        .map_err(|_| DropReason::UnknownQp(qpn))?
    }

    /// The next packet to send, written into `buf` (at least [`MAX_PACKET_LEN`] bytes; a
    /// smaller buffer only fits smaller packets). Queue pairs take turns packet by packet;
    /// within one, responses and requests take turns when both are waiting.
    ///
    /// [`MAX_PACKET_LEN`]: super::MAX_PACKET_LEN
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.poll_transmit_gated(now, buf, |_| true)
    }

    /// [`Engine::poll_transmit`] over the queue pairs `may_send` allows: a rate limiter
    /// outside the engine (DCQCN's reaction point paces each QP) holds back the others, and
    /// they take their turn again once it lets them.
    pub fn poll_transmit_gated(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mut may_send: impl FnMut(Qpn) -> bool,
    ) -> Option<Transmit> {
        // One look at each queue pair waiting for its turn; those with nothing to send
        // leave the queue until something touches them again.
        for _ in 0..self.sched.ready_len() {
            let qpn = self.sched.next_ready()?;
            if self.qps.get(qpn).is_none() {
                continue;
            }
            if !may_send(qpn) {
                self.sched.requeue(qpn);
                continue;
            }
            let sent = self
                .run_qp(qpn, now, false, |qp, ctx| {
                    let t = qp.poll_transmit(ctx, buf);
                    if t.is_none() {
                        Schedule::idle(&mut qp.sched);
                    }
                    t
                })
                .ok()
                .flatten();
            if let Some(t) = sent {
                self.sched.requeue(qpn);
                self.stats.packets_sent += 1;
                return Some(t);
            }
        }
        None
    }

    /// The earliest time [`Engine::handle_timeout`] has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.sched.next_deadline()
    }

    /// Runs every timer due at or before `now` (only the queue pairs that have one).
    pub fn handle_timeout(&mut self, now: Instant) {
        for qpn in self.sched.due(now) {
            let _ = self.with_qp(qpn, now, |qp, ctx| {
                if qp.next_deadline().is_some_and(|t| t <= now) {
                    qp.on_timeout(ctx);
                }
            });
        }
    }

    /// Queue pairs with a timer running and queue pairs waiting for a turn to send: what
    /// the engine looks at, whatever the number of queue pairs.
    pub fn scheduled(&self) -> (usize, usize) {
        (self.sched.deadlines(), self.sched.ready_len())
    }
}
