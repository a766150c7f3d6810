//! The responder (IBA 9.7.5.2 for RC, 9.8.3 for UC, 9.8.4 for UD): checks and executes
//! requests; their responses go to the ordered queue of `responder/responses.rs`.
//!
//! Choices where rxe and the spec leave room, documented here as the brief asks:
//! - A duplicate SEND or RDMA WRITE packet is re-acknowledged only when it carries AckReq or
//!   ends a message (rxe re-ACKs every duplicate packet, C9-105 asks for an ACK "for the
//!   duplicate request"); after go-back-N that is one ACK per duplicate message instead of
//!   one per packet. That ACK names the last SEND or WRITE packet executed, never a later
//!   READ or atomic (as rxe's `ack_psn`): rxe's requester completes a READ an ACK names.
//! - A duplicate READ is answered only when it falls inside a READ the responder still
//!   remembers (its responder resources), asks for the same R_Key and a part of the same
//!   bytes, and the rights still hold; its responses are put back in PSN order in the queue.
//!   Any other is dropped silently (rxe does the same, a class D error), so a peer cannot
//!   make the responder send what it never asked for with a READ it could have sent anyway.
//! - A duplicate atomic is answered from the resources and never executed again; one no
//!   longer remembered is dropped silently (as rxe).
//! - At most max_dest_rd_atomic READ and atomic responses wait to be sent; a new READ or
//!   atomic beyond them is NAKed Invalid Request (IBA 9.9.3.1 class B, rxe's
//!   ERR_TOO_MANY_RDMA_ATM_REQ), and max_dest_rd_atomic 0 accepts none (as rxe). FLUSH and
//!   ATOMIC WRITE are not counted there (rxe's requester does not limit them by
//!   max_rd_atomic); their empty READ responses have a bound of their own. Queued
//!   answers to duplicates give way to new requests, and a duplicate finding no room is
//!   dropped (the requester asks again).
//! - An RC request the QP's access flags forbid is NAKed Invalid Request (as rxe does); an
//!   R_Key, bounds or rights failure on the memory region is NAKed Remote Access Error.

mod preserve;
mod responses;

use std::collections::VecDeque;
use std::net::IpAddr;

use super::{Ctx, QueuePair};
use crate::transport::attrs::QpType;
use crate::transport::cq::{WcOpcode, WcStatus, WorkCompletion};
use crate::transport::error::DropReason;
use crate::transport::mr::{Access, Accessor};
use crate::transport::wr::RecvWr;
use crate::wire::opcode::{ATOMIC_WRITE_LEN, op};
use crate::wire::{IbPacketRepr, Msn, NakCode, Psn, Syndrome, feth};
pub use responses::QpUsage;
use responses::{Reply, Resource, ResourceKind, RespItem, protect_reads, reads_queued};

pub use crate::wire::encap::GRH_LEN;
use crate::wire::encap::ud_grh_area;

/// A message being received across several packets.
#[derive(Debug)]
pub(crate) enum InMsg {
    Send {
        recv: RecvWr,
        offset: u64,
    },
    Write {
        rkey: u32,
        va: u64,
        left: u32,
        total: u32,
    },
}

#[derive(Debug, Default)]
pub(crate) struct Responder {
    /// The expected PSN.
    epsn: Psn,
    msn: Msn,
    /// The PSN and MSN a plain ACK may name: those of the last SEND or RDMA WRITE packet
    /// executed. A READ, atomic, ATOMIC WRITE or FLUSH is answered by its own response,
    /// never by an ACK naming it: rxe's completer completes the request whose last PSN an
    /// ACK names, a READ with no data at all (rxe's responder keeps `ack_psn` the same way).
    ack_point: (Psn, Msn),
    /// A PSN sequence error (or RNR) NAK was sent for the current gap; later packets are
    /// dropped silently until the expected PSN arrives (IBA 9.7.5.2.2, rxe `sent_psn_nak`).
    nak_sent: bool,
    msg: Option<InMsg>,
    queue: VecDeque<RespItem>,
    /// The READs and atomics executed lately, oldest first, to answer duplicates.
    resources: VecDeque<Resource>,
    /// UC: the rest of the current message is being dropped (IBA 9.8.3.1).
    uc_drop: bool,
    /// The queue ends with a NAK that leaves even though the QP is in ERR.
    final_nak: bool,
}

/// How an RC request fails: an RNR NAK (nothing done, retry later) or a NAK that ends the
/// connection (IBA 9.9.3.1 class B/C errors).
enum RespError {
    Rnr,
    Nak(NakCode),
}

type Exec = Result<(), RespError>;

impl Responder {
    pub fn start_at(&mut self, psn: Psn) {
        self.epsn = psn;
        self.ack_point = (psn.sub(1), self.msn);
    }

    /// The PSN the responder expects next.
    pub fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// Ends a message in progress; returns a receive it held.
    pub fn abandon_message(&mut self) -> Option<RecvWr> {
        match self.msg.take() {
            Some(InMsg::Send { recv, .. }) => Some(recv),
            _ => None,
        }
    }
}

fn check_len(first: bool, last: bool, len: usize, mtu: usize) -> Exec {
    // FIRST and MIDDLE packets carry exactly one MTU, LAST between 1 and an MTU (IBA 9.7.5.2.4).
    let ok = len <= mtu && (last || len == mtu) && (first || !last || len > 0);
    if ok {
        Ok(())
    } else {
        Err(RespError::Nak(NakCode::InvalidRequest))
    }
}

const fn is_send(low: u8) -> bool {
    matches!(
        low,
        op::SEND_FIRST
            ..=op::SEND_ONLY_WITH_IMMEDIATE
                | op::SEND_LAST_WITH_INVALIDATE
                | op::SEND_ONLY_WITH_INVALIDATE
    )
}

const fn is_write(low: u8) -> bool {
    matches!(
        low,
        op::RDMA_WRITE_FIRST..=op::RDMA_WRITE_ONLY_WITH_IMMEDIATE
    )
}

impl QueuePair {
    /// A request packet for this queue pair's responder (with its IP header as received, or
    /// empty: UD puts it in the GRH area).
    pub(crate) fn handle_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &IbPacketRepr<'_>,
        src: IpAddr,
        ip_header: &[u8],
    ) -> Result<(), DropReason> {
        match self.init.qp_type {
            QpType::Rc => {
                self.rc_request(ctx, pkt);
                Ok(())
            }
            QpType::Uc => {
                self.uc_request(ctx, pkt);
                Ok(())
            }
            QpType::Ud => self.ud_request(ctx, pkt, src, ip_header),
        }
    }

    fn rc_request(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) {
        let psn = pkt.bth.psn;
        let d = psn.distance(self.resp.epsn);
        if d > 0 {
            ctx.stats.out_of_sequence += 1;
            if !self.resp.nak_sent {
                self.resp.nak_sent = true;
                ctx.stats.seq_naks_sent += 1;
                let epsn = self.resp.epsn;
                self.resp
                    .push_ack(epsn, Syndrome::Nak(NakCode::PsnSequenceError));
            }
            return;
        }
        if d < 0 {
            ctx.stats.duplicate_requests += 1;
            return self.rc_duplicate(ctx, pkt);
        }
        self.resp.nak_sent = false;
        match self.execute(ctx, pkt) {
            Ok(()) => {}
            Err(RespError::Rnr) => {
                // Not the NAK of a gap: the next packet past this PSN still gets a PSN
                // sequence error NAK, as rxe sends (pcaps/rc_rnr_nak.pcap).
                ctx.stats.rnr_naks_sent += 1;
                let timer = self.attrs.min_rnr_timer;
                self.resp.push_ack(psn, Syndrome::RnrNak { timer });
            }
            Err(RespError::Nak(code)) => {
                ctx.stats.error_naks_sent += 1;
                self.resp.push_ack(psn, Syndrome::Nak(code));
                self.resp.final_nak = true;
                self.enter_error(ctx);
            }
        }
    }

    /// IBA 9.7.5.2.1: a request the responder has already executed.
    fn rc_duplicate(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) {
        let psn = pkt.bth.psn;
        let low = pkt.bth.opcode.low();
        match low {
            op::RDMA_READ_REQUEST => self.duplicate_read(ctx, pkt),
            op::COMPARE_SWAP | op::FETCH_ADD | op::ATOMIC_WRITE | op::FLUSH => {
                self.duplicate_reply(ctx, psn);
            }
            _ => {
                if pkt.bth.ack_req || pkt.bth.opcode.is_last() {
                    self.resp.push_dup_ack();
                }
            }
        }
    }

    /// A duplicate atomic, ATOMIC WRITE or FLUSH: the remembered reply is sent again, the
    /// operation is not executed again (IBA 9.4.5, oA19-14); one no longer remembered is
    /// dropped (rxe).
    fn duplicate_reply(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        let Some(res) = self.resp.find_resource(psn) else {
            ctx.stats.duplicates_dropped += 1;
            return;
        };
        let ResourceKind::Reply(reply) = res.kind else {
            ctx.stats.duplicates_dropped += 1;
            return;
        };
        let queued = self
            .resp
            .queue
            .iter()
            .any(|it| matches!(it, RespItem::Reply { psn: p, .. } if *p == psn));
        if queued {
            return;
        }
        let room = match reply {
            Reply::EmptyRead => self.resp.room_for_empty_read(),
            Reply::AtomicAck { .. } => self.resp.make_room(self.rd_atomic_depth()),
        };
        if !room {
            ctx.stats.duplicates_dropped += 1;
            return;
        }
        self.resp.insert_in_order(RespItem::Reply {
            psn,
            msn: res.msn,
            reply,
            replay: true,
        });
    }

    /// A duplicate READ (IBA 9.7.5.2.1): answered again only from a remembered READ, for the
    /// same R_Key and a part of the same bytes, ending inside its PSNs (rxe's
    /// `duplicate_request`); anything else is dropped.
    fn duplicate_read(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) {
        let psn = pkt.bth.psn;
        let res = self.resp.find_resource(psn);
        let (Some(reth), Some(res)) = (pkt.ext.reth, res) else {
            ctx.stats.duplicates_dropped += 1;
            return;
        };
        let ResourceKind::Read { rkey, va, len } = res.kind else {
            ctx.stats.duplicates_dropped += 1;
            return;
        };
        let mtu = u64::from(self.attrs.path_mtu.bytes());
        let npkts = u64::from(reth.dma_len).div_ceil(mtu).max(1);
        let end = u64::from(psn.distance(res.first_psn) as u32) + npkts;
        let inside = reth.rkey == rkey
            && reth.va >= va
            && reth.va.saturating_add(u64::from(reth.dma_len)) <= va + u64::from(len)
            && end <= u64::from(res.last_psn.distance(res.first_psn) as u32) + 1;
        let allowed = inside
            && self.attrs.access.contains(Access::REMOTE_READ)
            && ctx
                .mrs
                .remote(
                    self.who(),
                    reth.rkey,
                    (reth.va, u64::from(reth.dma_len)),
                    Access::REMOTE_READ,
                )
                .is_ok();
        if !allowed {
            ctx.stats.duplicates_dropped += 1;
            return;
        }
        // The READ has at most one queued response, whichever PSN its requester last resumed
        // it from (rxe resets its one resource): a reordered older duplicate must not queue a
        // second, which would fill the queue with one READ and refuse the next new request.
        // A queued response that has not reached this PSN yet will cover it anyway; one that
        // has is asked for again from here, and stays what it was (a first answer or not).
        let of_read = |it: &RespItem| match it {
            RespItem::Read(r) => {
                r.first_psn.distance(res.first_psn) >= 0 && res.last_psn.distance(r.first_psn) >= 0
            }
            _ => false,
        };
        let mut replay = true;
        if let Some(i) = self.resp.queue.iter().position(of_read) {
            if let RespItem::Read(r) = &self.resp.queue[i] {
                if r.psn.distance(psn) <= 0 {
                    return;
                }
                replay = r.replay;
            }
            self.resp.remove(i);
        } else if !self.resp.make_room(self.rd_atomic_depth()) {
            ctx.stats.duplicates_dropped += 1;
            return;
        }
        let index = psn.distance(res.first_psn) as u32;
        let read = self.read_response((psn, index), (reth.rkey, reth.va, reth.dma_len), replay);
        self.resp.insert_in_order(RespItem::Read(read));
    }

    /// How many READ and atomic responses may wait to be sent: the negotiated
    /// max_dest_rd_atomic (IBA 9.7.5.2.7).
    fn rd_atomic_depth(&self) -> usize {
        usize::from(self.attrs.max_dest_rd_atomic)
    }

    /// IBA 9.8.3: UC has no responses; a gap or an error drops the rest of the message and a
    /// receive it held is put back for the next one.
    fn uc_request(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) {
        let psn = pkt.bth.psn;
        if self.resp.uc_drop || psn != self.resp.epsn {
            self.uc_abandon(ctx);
            if !pkt.bth.opcode.is_first() {
                ctx.stats.out_of_sequence += 1;
                self.resp.uc_drop = true;
                return;
            }
        }
        self.resp.uc_drop = false;
        if self.execute(ctx, pkt).is_err() {
            self.uc_abandon(ctx);
            self.resp.uc_drop = !pkt.bth.opcode.is_last();
        }
        self.resp.epsn = psn.next();
    }

    /// Drops the UC message in progress: its receive is used again for the next message
    /// (class D1), or, taken from a shared receive queue, completes with REM_INV_REQ_ERR
    /// (class E, as rxe's `do_class_d1e_error`).
    fn uc_abandon(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(recv) = self.resp.abandon_message() {
            if self.init.srq.is_some() {
                self.complete_recv(ctx, &recv, WcStatus::RemInvReqErr);
            } else {
                self.rq.push_front(recv);
            }
        }
    }

    /// IBA 9.8.4 / 10.2.5: check the Q_Key, consume one receive, write the GRH area (the IP
    /// header as received, Annex A17.4.5.2, or one made up from `src`) and the payload; no
    /// PSN checks and no responses.
    fn ud_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &IbPacketRepr<'_>,
        src: IpAddr,
        ip_header: &[u8],
    ) -> Result<(), DropReason> {
        let deth = pkt.ext.deth.ok_or(DropReason::Unsupported)?;
        if deth.qkey != self.attrs.qkey {
            return Err(DropReason::QKeyMismatch);
        }
        if pkt.payload.len() > ctx.config.port_mtu.bytes() as usize {
            return Err(DropReason::Unsupported);
        }
        let recv = self.take_recv(ctx).ok_or(DropReason::NoReceive)?;
        let total = (GRH_LEN + pkt.payload.len()) as u64;
        let status = if total > recv.capacity() {
            WcStatus::LocLenErr
        } else {
            let grh = ud_grh_area(ip_header).unwrap_or_else(|| grh(src, pkt.payload.len()));
            let pd = self.init.pd;
            let wrote = ctx.mrs.scatter(pd, &recv.sg_list, 0, &grh).and_then(|()| {
                ctx.mrs
                    .scatter(pd, &recv.sg_list, GRH_LEN as u64, pkt.payload)
            });
            match wrote {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::LocProtErr,
            }
        };
        let mut wc = WorkCompletion::new(recv.wr_id, status, WcOpcode::Recv, self.qpn);
        if status == WcStatus::Success {
            ctx.stats.payload_bytes_delivered += pkt.payload.len() as u64;
            wc.byte_len = total as u32;
            wc.imm_data = pkt.ext.immdt.map(|i| i.imm);
            wc.src_qp = Some(deth.src_qp);
            wc.src_addr = Some(src);
            wc.solicited = pkt.bth.solicited;
        }
        ctx.complete(self.init.recv_cq, wc);
        Ok(())
    }

    /// Executes the request with the expected PSN (RC) or an accepted one (UC).
    fn execute(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) -> Exec {
        let low = pkt.bth.opcode.low();
        if is_send(low) {
            self.exec_send(ctx, pkt)?;
        } else if is_write(low) {
            self.exec_write(ctx, pkt)?;
        } else if low == op::RDMA_READ_REQUEST && self.init.qp_type == QpType::Rc {
            return self.exec_read(ctx, pkt);
        } else if matches!(low, op::COMPARE_SWAP | op::FETCH_ADD) && self.init.qp_type == QpType::Rc
        {
            return self.exec_atomic(ctx, pkt);
        } else if low == op::ATOMIC_WRITE && self.init.qp_type == QpType::Rc {
            return self.exec_atomic_write(ctx, pkt);
        } else if low == op::FLUSH && self.init.qp_type == QpType::Rc {
            return self.exec_flush(ctx, pkt);
        } else {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        }
        let last = pkt.bth.opcode.is_last();
        self.resp.epsn = pkt.bth.psn.next();
        if last {
            self.resp.msn = Msn::new(self.resp.msn.value() + 1);
        }
        self.resp.ack_point = (pkt.bth.psn, self.resp.msn);
        if self.init.qp_type == QpType::Rc && pkt.bth.ack_req {
            self.resp
                .push_ack(pkt.bth.psn, Syndrome::Ack { credits: 0x1f });
        }
        Ok(())
    }

    fn fail_recv(&mut self, ctx: &mut Ctx<'_>, status: WcStatus, nak: NakCode) -> Exec {
        if let Some(recv) = self.resp.abandon_message() {
            self.complete_recv(ctx, &recv, status);
        }
        Err(RespError::Nak(nak))
    }

    fn exec_send(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) -> Exec {
        let (first, last) = (pkt.bth.opcode.is_first(), pkt.bth.opcode.is_last());
        let mtu = self.attrs.path_mtu.bytes() as usize;
        let in_send = matches!(self.resp.msg, Some(InMsg::Send { .. }));
        if first == self.resp.msg.is_some() || (!first && !in_send) {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        }
        check_len(first, last, pkt.payload.len(), mtu)?;
        if first {
            let recv = self.take_recv(ctx).ok_or(RespError::Rnr)?;
            let usable = ctx
                .mrs
                .check_sges(self.init.pd, &recv.sg_list, Access::LOCAL_WRITE)
                .is_ok();
            self.resp.msg = Some(InMsg::Send { recv, offset: 0 });
            if !usable {
                return self.fail_recv(ctx, WcStatus::LocProtErr, NakCode::RemoteOperationalError);
            }
        }
        let (pd, who) = (self.init.pd, self.who());
        let Some(InMsg::Send { recv, offset }) = &mut self.resp.msg else {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        };
        if *offset + pkt.payload.len() as u64 > recv.capacity() {
            return self.fail_recv(ctx, WcStatus::LocLenErr, NakCode::InvalidRequest);
        }
        if reads_queued(&self.resp.queue) {
            for span in ctx.mrs.sge_spans(pd, &recv.sg_list, Access::LOCAL_WRITE) {
                protect_reads(&mut self.resp.queue, ctx.mrs, who, &span);
            }
        }
        if ctx
            .mrs
            .scatter(pd, &recv.sg_list, *offset, pkt.payload)
            .is_err()
        {
            return self.fail_recv(ctx, WcStatus::LocProtErr, NakCode::RemoteOperationalError);
        }
        *offset += pkt.payload.len() as u64;
        ctx.stats.payload_bytes_delivered += pkt.payload.len() as u64;
        if !last {
            return Ok(());
        }
        let invalidate = pkt.ext.ieth.map(|i| i.rkey);
        if let Some(rkey) = invalidate
            && ctx.mrs.invalidate(who, rkey).is_err()
        {
            return self.fail_recv(ctx, WcStatus::RemInvReqErr, NakCode::InvalidRequest);
        }
        let Some(InMsg::Send { recv, offset }) = self.resp.msg.take() else {
            return Ok(());
        };
        let mut wc = WorkCompletion::new(recv.wr_id, WcStatus::Success, WcOpcode::Recv, self.qpn);
        wc.byte_len = offset as u32;
        wc.imm_data = pkt.ext.immdt.map(|i| i.imm);
        wc.invalidated_rkey = invalidate;
        wc.solicited = pkt.bth.solicited;
        ctx.complete(self.init.recv_cq, wc);
        Ok(())
    }

    fn exec_write(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) -> Exec {
        let (first, last) = (pkt.bth.opcode.is_first(), pkt.bth.opcode.is_last());
        let mtu = self.attrs.path_mtu.bytes() as usize;
        let len = pkt.payload.len();
        let imm = pkt.ext.immdt.map(|i| i.imm);
        // The receive an immediate consumes must be there before anything is written.
        if imm.is_some() && !self.has_recv(ctx) {
            return Err(RespError::Rnr);
        }
        if first {
            if self.resp.msg.is_some() || !self.attrs.access.contains(Access::REMOTE_WRITE) {
                return Err(RespError::Nak(NakCode::InvalidRequest));
            }
            check_len(first, last, len, mtu)?;
            let reth = pkt
                .ext
                .reth
                .ok_or(RespError::Nak(NakCode::InvalidRequest))?;
            let total = reth.dma_len;
            let fits = if last {
                len == total as usize
            } else {
                len < total as usize
            };
            if !fits {
                return Err(RespError::Nak(NakCode::InvalidRequest));
            }
            ctx.mrs
                .remote(
                    self.who(),
                    reth.rkey,
                    (reth.va, u64::from(total)),
                    Access::REMOTE_WRITE,
                )
                .map_err(|_| RespError::Nak(NakCode::RemoteAccessError))?;
            self.resp.msg = Some(InMsg::Write {
                rkey: reth.rkey,
                va: reth.va,
                left: total,
                total,
            });
        } else {
            check_len(first, last, len, mtu)?;
        }
        let Some(InMsg::Write {
            rkey,
            va,
            left,
            total,
        }) = &mut self.resp.msg
        else {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        };
        let fits = if last {
            len == *left as usize
        } else {
            len < *left as usize
        };
        if !fits {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        }
        let who = Accessor {
            pd: self.init.pd,
            qpn: self.qpn,
        };
        let span = ctx
            .mrs
            .remote(who, *rkey, (*va, len as u64), Access::REMOTE_WRITE)
            .map_err(|_| RespError::Nak(NakCode::RemoteAccessError))?;
        if let Some(span) = span {
            if reads_queued(&self.resp.queue) {
                protect_reads(&mut self.resp.queue, ctx.mrs, who, &span);
            }
            ctx.mrs.slice_mut(&span).copy_from_slice(pkt.payload);
        }
        ctx.stats.payload_bytes_delivered += len as u64;
        *va = va.wrapping_add(len as u64);
        *left -= len as u32;
        let total = *total;
        if last {
            self.resp.msg = None;
            if let Some(imm) = imm
                && let Some(recv) = self.take_recv(ctx)
            {
                let mut wc = WorkCompletion::new(
                    recv.wr_id,
                    WcStatus::Success,
                    WcOpcode::RecvRdmaWithImm,
                    self.qpn,
                );
                wc.byte_len = total;
                wc.imm_data = Some(imm);
                wc.solicited = pkt.bth.solicited;
                ctx.complete(self.init.recv_cq, wc);
            }
        }
        Ok(())
    }

    fn exec_read(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) -> Exec {
        let reth = pkt
            .ext
            .reth
            .ok_or(RespError::Nak(NakCode::InvalidRequest))?;
        if self.resp.msg.is_some() || !self.attrs.access.contains(Access::REMOTE_READ) {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        }
        if reth.dma_len > super::requester::MAX_MESSAGE as u32
            || !self.resp.make_room(self.rd_atomic_depth())
        {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        }
        ctx.mrs
            .remote(
                self.who(),
                reth.rkey,
                (reth.va, u64::from(reth.dma_len)),
                Access::REMOTE_READ,
            )
            .map_err(|_| RespError::Nak(NakCode::RemoteAccessError))?;
        self.resp.msn = Msn::new(self.resp.msn.value() + 1);
        let read = self.read_response((pkt.bth.psn, 0), (reth.rkey, reth.va, reth.dma_len), false);
        self.resp.epsn = read.last_psn.next();
        let resource = Resource {
            first_psn: read.first_psn,
            last_psn: read.last_psn,
            msn: self.resp.msn,
            kind: ResourceKind::Read {
                rkey: reth.rkey,
                va: reth.va,
                len: reth.dma_len,
            },
        };
        self.resp.remember(resource, self.resources(ctx));
        self.resp.queue.push_back(RespItem::Read(read));
        Ok(())
    }

    /// IBA 9.4.5: one aligned 64-bit word, read-modify-written once; the result is kept to
    /// answer duplicates (o9-?: an atomic must never execute twice).
    fn exec_atomic(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) -> Exec {
        let a = pkt
            .ext
            .atomic_eth
            .ok_or(RespError::Nak(NakCode::InvalidRequest))?;
        if self.resp.msg.is_some()
            || !self.attrs.access.contains(Access::REMOTE_ATOMIC)
            || a.va % 8 != 0
            || !self.resp.make_room(self.rd_atomic_depth())
        {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        }
        let who = self.who();
        let Ok(Some(span)) = ctx
            .mrs
            .remote(who, a.rkey, (a.va, 8), Access::REMOTE_ATOMIC)
        else {
            return Err(RespError::Nak(NakCode::RemoteAccessError));
        };
        if self.resp.has_reads() {
            protect_reads(&mut self.resp.queue, ctx.mrs, who, &span);
        }
        let word = ctx.mrs.slice_mut(&span);
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        // Memory holds the word in the host's order (little-endian here).
        let orig = u64::from_le_bytes(bytes);
        let new = if pkt.bth.opcode.low() == op::COMPARE_SWAP {
            if orig == a.compare { a.swap_add } else { orig }
        } else {
            orig.wrapping_add(a.swap_add)
        };
        word.copy_from_slice(&new.to_le_bytes());
        self.reply(ctx, pkt.bth.psn, Reply::AtomicAck { orig });
        Ok(())
    }

    /// An executed one-packet request: its reply is remembered for duplicates and queued.
    fn reply(&mut self, ctx: &Ctx<'_>, psn: Psn, reply: Reply) {
        self.resp.msn = Msn::new(self.resp.msn.value() + 1);
        let msn = self.resp.msn;
        let resource = Resource {
            first_psn: psn,
            last_psn: psn,
            msn,
            kind: ResourceKind::Reply(reply),
        };
        self.resp.remember(resource, self.resources(ctx));
        self.resp.queue.push_back(RespItem::Reply {
            psn,
            msn,
            reply,
            replay: false,
        });
        self.resp.epsn = psn.next();
    }

    /// ATOMIC WRITE (IBA 1.5, 9.4.6; rxe's `atomic_write_reply`): the QP must allow remote
    /// writes, the key must open the 8 bytes for writing, the packet must carry exactly
    /// them, aligned; the word lands in one piece and an empty READ response answers.
    fn exec_atomic_write(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) -> Exec {
        let invalid = RespError::Nak(NakCode::InvalidRequest);
        let reth = pkt.ext.reth.ok_or(invalid)?;
        if self.resp.msg.is_some()
            || !self.attrs.access.contains(Access::REMOTE_WRITE)
            || !self.resp.room_for_empty_read()
        {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        }
        let who = self.who();
        let len = u64::from(reth.dma_len);
        let target = ctx
            .mrs
            .remote(who, reth.rkey, (reth.va, len), Access::REMOTE_WRITE)
            .map_err(|_| RespError::Nak(NakCode::RemoteAccessError))?;
        let word = ATOMIC_WRITE_LEN as u64;
        let Some(span) = target.filter(|_| len == word && pkt.payload.len() == ATOMIC_WRITE_LEN)
        else {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        };
        if reth.va % word != 0 {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        }
        if self.resp.has_reads() {
            protect_reads(&mut self.resp.queue, ctx.mrs, who, &span);
        }
        ctx.mrs.slice_mut(&span).copy_from_slice(pkt.payload);
        ctx.stats.payload_bytes_delivered += word;
        self.reply(ctx, pkt.bth.psn, Reply::EmptyRead);
        Ok(())
    }

    /// FLUSH (IBA 1.5, A19; rxe's `process_flush`): the QP must allow each placement asked
    /// for (FLUSH_GLOBAL, FLUSH_PERSISTENT) or the request is invalid; the key must carry the
    /// same rights and, at range selectivity, hold the range, or it is a remote access
    /// error. The engine's memory is its own bytes, so there is nothing to push further:
    /// what the FLUSH guarantees already holds, and an empty READ response says so.
    fn exec_flush(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) -> Exec {
        let (Some(reth), Some(feth)) = (pkt.ext.reth, pkt.ext.feth) else {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        };
        let placement = feth.placement_type();
        let mut need = Access::NONE;
        if placement & feth::placement::GLOBAL != 0 {
            need = need | Access::FLUSH_GLOBAL;
        }
        if placement & feth::placement::PERSISTENT != 0 {
            need = need | Access::FLUSH_PERSISTENT;
        }
        let level = feth.selectivity_level();
        if self.resp.msg.is_some()
            || !self.attrs.access.contains(need)
            || level > feth::selectivity::MEMORY_REGION
            || !self.resp.room_for_empty_read()
        {
            return Err(RespError::Nak(NakCode::InvalidRequest));
        }
        let who = self.who();
        let len = u64::from(reth.dma_len);
        let checked = if level == feth::selectivity::MEMORY_REGION || len == 0 {
            ctx.mrs.remote_key(who, reth.rkey, need)
        } else {
            ctx.mrs
                .remote(who, reth.rkey, (reth.va, len), need)
                .map(|_| ())
        };
        checked.map_err(|_| RespError::Nak(NakCode::RemoteAccessError))?;
        self.reply(ctx, pkt.bth.psn, Reply::EmptyRead);
        Ok(())
    }
}

/// The 40-byte GRH area of a UD receive when the packet's IP header is not known (the engine
/// used without a host; IBA 8.3): IPv6-style header, next header 0x1B, the sender's address
/// as SGID (IPv4-mapped for IPv4, as RoCEv2 GIDs are); the DGID is left zero because the
/// engine does not know which of the host's addresses the packet came to.
fn grh(src: IpAddr, payload: usize) -> [u8; GRH_LEN] {
    let mut g = [0u8; GRH_LEN];
    g[0] = 0x60;
    g[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
    g[6] = 0x1b;
    g[7] = 64;
    let sgid = match src {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    g[8..24].copy_from_slice(&sgid.octets());
    g
}
