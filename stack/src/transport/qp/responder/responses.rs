//! The responder's output: ACKs, NAKs, READ responses and atomic ACKs wait in one queue, in
//! PSN order, until `poll_transmit` takes them (IBA 9.7.5.1: responses in request order).
//!
//! ACKs coalesce there: a new ACK replaces one not yet sent (rxe answers every AckReq; when
//! the link keeps up the two are the same, when it does not we send fewer ACKs carrying the
//! same information). READ responses are built when sent, from the region and the bytes
//! `preserve.rs` kept when a later request was about to overwrite what they still send.
//!
//! What the queue holds is bounded whatever the peer sends: at most max_dest_rd_atomic READ
//! and atomic responses and [`MAX_EMPTY_READS`] answers to FLUSH and ATOMIC WRITE (a request
//! beyond them is NAKed Invalid Request), each with an ACK after it at most, and the executed READs and atomics remembered for duplicates are a ring
//! of [`QueuePair::resources`] entries (IBA 9.7.5.2.x's responder resources).

use std::collections::VecDeque;

use super::super::{Ctx, QueuePair};
use super::Responder;
use super::preserve::{Preserved, Source};
use crate::transport::attrs::QpState;
use crate::transport::config::Transmit;
use crate::transport::mr::{Access, Accessor, MrTable, Span};
use crate::wire::opcode::op;
use crate::wire::{
    AethRepr, AtomicAckEthRepr, BthRepr, ExtHeaders, FixedHeader, Msn, NakCode, Opcode, Psn,
    Syndrome, Transport, pad_for,
};

/// How many empty READ responses (answers to FLUSH and ATOMIC WRITE, which max_dest_rd_atomic
/// does not count) may wait to be sent; a request beyond them is NAKed Invalid Request. A
/// requester gets this far only with that many such requests unanswered: more than any
/// sends while its answers flow.
pub(super) const MAX_EMPTY_READS: usize = 64;

/// An RDMA READ being answered.
#[derive(Debug, Clone)]
pub(crate) struct ReadResponse {
    pub(super) first_psn: Psn,
    pub(super) last_psn: Psn,
    /// PSN of the next response packet.
    pub(super) psn: Psn,
    rkey: u32,
    va: u64,
    left: u32,
    /// Position of the next packet in the READ's response message: a READ asked for again
    /// from its middle continues the original's opcodes (MIDDLE ... LAST), as rxe does and
    /// as rxe's requester insists (it fails a FIRST at any PSN but the READ's first).
    index: u32,
    msn: Msn,
    /// The answer to a duplicate, which the requester may no longer need.
    pub(super) replay: bool,
    /// Bytes still to send that later requests overwrote.
    preserved: Preserved,
}

#[derive(Debug, Clone)]
pub(crate) enum RespItem {
    Ack {
        psn: Psn,
        aeth: AethRepr,
    },
    /// The one-packet answer to an atomic, ATOMIC WRITE or FLUSH.
    Reply {
        psn: Psn,
        msn: Msn,
        reply: Reply,
        replay: bool,
    },
    Read(ReadResponse),
}

/// What a one-packet response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// An atomic ACK with the word as it was before the operation.
    AtomicAck { orig: u64 },
    /// An RDMA READ response without payload: what answers an ATOMIC WRITE or a FLUSH (IBA
    /// 1.5; rxe's `send_read_response_ack`).
    EmptyRead,
}

impl RespItem {
    pub(super) fn first_psn(&self) -> Psn {
        match self {
            RespItem::Ack { psn, .. } | RespItem::Reply { psn, .. } => *psn,
            RespItem::Read(r) => r.first_psn,
        }
    }

    /// A READ or atomic response (what max_dest_rd_atomic counts), and whether it answers a
    /// duplicate. The empty READ response of a FLUSH or ATOMIC WRITE is not one: requesters
    /// do not count those requests against max_rd_atomic (rxe's requester limits only
    /// WR_ATOMIC_OR_READ_MASK, READ and the two atomics), so a responder that did would refuse
    /// a second FLUSH sent while the first one's answer still waits to go out.
    fn response(&self) -> Option<bool> {
        match self {
            RespItem::Ack { .. }
            | RespItem::Reply {
                reply: Reply::EmptyRead,
                ..
            } => None,
            RespItem::Reply { replay, .. } => Some(*replay),
            RespItem::Read(r) => Some(r.replay),
        }
    }
}

/// An executed READ or atomic, remembered to answer its duplicates (the responder resources
/// of IBA 9.7.5.2.7 and rxe's `resp.resources`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Resource {
    pub first_psn: Psn,
    pub last_psn: Psn,
    pub msn: Msn,
    pub kind: ResourceKind,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum ResourceKind {
    Read {
        rkey: u32,
        va: u64,
        len: u32,
    },
    /// Executed once; a duplicate gets the same reply again.
    Reply(Reply),
}

/// What a queue pair holds, for limits checks (fuzz targets, tests): each is bounded
/// whatever the peer sends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpUsage {
    /// Responses waiting to be sent (ACKs, NAKs, READ and atomic responses).
    pub responses: usize,
    /// READ and atomic responses among them (at most max_dest_rd_atomic).
    pub rd_atomic: usize,
    /// Executed READs and atomics remembered for duplicates.
    pub resources: usize,
    /// Bytes kept for READ responses whose source later requests overwrote.
    pub preserved_bytes: usize,
    /// Send work requests not completed yet.
    pub send_wqes: usize,
    /// Receive work requests posted and not used yet.
    pub recv_wqes: usize,
}

impl Responder {
    /// What this responder holds now (the work queues are filled in by the queue pair).
    pub fn usage(&self) -> QpUsage {
        let reads = self.queue.iter().filter_map(|it| match it {
            RespItem::Read(r) => Some(r.preserved.bytes()),
            _ => None,
        });
        QpUsage {
            responses: self.queue.len(),
            rd_atomic: self.rd_atomic_queued(),
            resources: self.resources.len(),
            preserved_bytes: reads.sum(),
            ..QpUsage::default()
        }
    }

    /// A READ response is queued (only then can a write need to keep bytes for it).
    pub(super) fn has_reads(&self) -> bool {
        reads_queued(&self.queue)
    }

    /// READ and atomic responses queued.
    pub(super) fn rd_atomic_queued(&self) -> usize {
        self.queue
            .iter()
            .filter(|it| it.response().is_some())
            .count()
    }

    /// Room for one more empty READ response (a FLUSH's or an ATOMIC WRITE's answer): at most
    /// [`MAX_EMPTY_READS`] wait, whatever the peer sends.
    pub(super) fn room_for_empty_read(&self) -> bool {
        let queued = self.queue.iter().filter(|it| {
            matches!(
                it,
                RespItem::Reply {
                    reply: Reply::EmptyRead,
                    ..
                }
            )
        });
        queued.count() < MAX_EMPTY_READS
    }

    /// Room for one more READ or atomic response under the negotiated `depth`
    /// (max_dest_rd_atomic). When it is full, the oldest queued response is dropped if it
    /// answers a duplicate: the requester completes in order and has at most `depth`
    /// outstanding, so with `depth` distinct responses queued and a new request arriving the
    /// oldest is one it already has. A queued first answer means the requester has more than
    /// `depth` outstanding: no room (IBA 9.9.3.1 class B, Invalid Request NAK).
    pub(super) fn make_room(&mut self, depth: usize) -> bool {
        if self.rd_atomic_queued() < depth {
            return true;
        }
        let oldest = self.queue.iter().position(|it| it.response().is_some());
        match oldest {
            Some(i) if self.queue[i].response() == Some(true) => {
                self.remove(i);
                true
            }
            _ => false,
        }
    }

    /// Removes a queued READ or atomic response; an ACK before it that the ACK after it
    /// supersedes goes too, so that removals never pile up ACKs.
    pub(super) fn remove(&mut self, i: usize) {
        self.queue.remove(i);
        if i == 0 || i >= self.queue.len() {
            return;
        }
        if let (RespItem::Ack { psn: old, aeth }, RespItem::Ack { psn: new, .. }) =
            (&self.queue[i - 1], &self.queue[i])
            && supersedes(aeth.syndrome, *old, *new)
        {
            self.queue.remove(i - 1);
        }
    }

    /// Remembers an executed READ or atomic, forgetting the oldest beyond `capacity`.
    pub(super) fn remember(&mut self, res: Resource, capacity: usize) {
        while self.resources.len() >= capacity {
            self.resources.pop_front();
        }
        self.resources.push_back(res);
    }

    /// The remembered READ or atomic whose PSNs hold `psn`.
    pub(super) fn find_resource(&self, psn: Psn) -> Option<Resource> {
        self.resources
            .iter()
            .rev()
            .find(|r| psn.distance(r.first_psn) >= 0 && r.last_psn.distance(psn) >= 0)
            .copied()
    }

    pub fn keep_only_final_nak(&mut self) {
        if !self.final_nak {
            self.queue.clear();
        }
    }

    pub fn has_responses(&self) -> bool {
        !self.queue.is_empty()
    }

    pub(super) fn push_ack(&mut self, psn: Psn, syndrome: Syndrome) {
        self.push_ack_msn(psn, syndrome, self.msn);
    }

    /// Acknowledges a duplicate SEND or RDMA WRITE again (C9-105) at the last PSN an ACK may
    /// name, which is never that of a READ, atomic, ATOMIC WRITE or FLUSH (see `ack_point`).
    pub(super) fn push_dup_ack(&mut self) {
        let (psn, msn) = self.ack_point;
        self.push_ack_msn(psn, Syndrome::Ack { credits: 0x1f }, msn);
    }

    fn push_ack_msn(&mut self, psn: Psn, syndrome: Syndrome, msn: Msn) {
        let item = RespItem::Ack {
            psn,
            aeth: AethRepr { syndrome, msn },
        };
        let supersedes = match self.queue.back() {
            Some(RespItem::Ack { psn: old, aeth }) if !self.final_nak => {
                supersedes(aeth.syndrome, *old, psn)
            }
            _ => false,
        };
        match self.queue.back_mut() {
            Some(back) if supersedes => *back = item,
            _ => self.queue.push_back(item),
        }
    }

    /// Puts the answer to a duplicate request before every queued response to a later PSN.
    pub(super) fn insert_in_order(&mut self, item: RespItem) {
        let psn = item.first_psn();
        let at = self
            .queue
            .iter()
            .position(|it| it.first_psn().distance(psn) > 0)
            .unwrap_or(self.queue.len());
        self.queue.insert(at, item);
    }
}

/// A newer state of the responder supersedes an ACK not yet sent, and a NAK or RNR NAK once
/// the gap it reported is filled; an older one (a re-ACK) never hides a NAK.
fn supersedes(old: Syndrome, old_psn: Psn, new_psn: Psn) -> bool {
    matches!(old, Syndrome::Ack { .. }) || new_psn.distance(old_psn) >= 0
}

/// A READ response is queued.
pub(super) fn reads_queued(queue: &VecDeque<RespItem>) -> bool {
    queue.iter().any(|it| matches!(it, RespItem::Read(_)))
}

/// Keeps what queued READ responses still have to send from the bytes `target` names,
/// before the responder writes there. Keys are compared by the bytes they reach, not by
/// value: a window and its region (or two windows) alias the same memory. The queue holds
/// at most max_dest_rd_atomic READs and each keeps only the overwritten bytes, so the cost
/// is that of the write.
pub(super) fn protect_reads(
    queue: &mut VecDeque<RespItem>,
    mrs: &MrTable,
    who: Accessor,
    target: &Span,
) {
    for item in queue.iter_mut() {
        let RespItem::Read(r) = item else { continue };
        let unsent = mrs.remote(who, r.rkey, (r.va, u64::from(r.left)), Access::REMOTE_READ);
        let Ok(Some(read)) = unsent else { continue };
        if !read.overlaps(target) {
            continue;
        }
        let (t, u) = (target.range(), read.range());
        let from = r.va + (t.start.max(u.start) - u.start) as u64;
        let to = r.va + (t.end.min(u.end) - u.start) as u64;
        let end = r.va.saturating_add(u64::from(r.left));
        let src = Source {
            mrs,
            who,
            key: r.rkey,
        };
        r.preserved.keep(src, (from, to), (r.va, end));
    }
}

impl QueuePair {
    /// How many executed READs and atomics the responder remembers for duplicates.
    pub(super) fn resources(&self, ctx: &Ctx<'_>) -> usize {
        ctx.config
            .atomic_results
            .max(usize::from(self.attrs.max_dest_rd_atomic))
            .max(1)
    }

    /// A READ response from `psn`, `index` packets into the READ's response message.
    pub(super) fn read_response(
        &self,
        (psn, index): (Psn, u32),
        (rkey, va, len): (u32, u64, u32),
        replay: bool,
    ) -> ReadResponse {
        let mtu = self.attrs.path_mtu.bytes();
        let npkts = len.div_ceil(mtu).max(1);
        ReadResponse {
            first_psn: psn,
            last_psn: psn.add(npkts - 1),
            psn,
            rkey,
            va,
            left: len,
            index,
            msn: self.resp.msn,
            replay,
            preserved: Preserved::default(),
        }
    }

    /// The next response packet (ACK, NAK, READ response, atomic ACK), if any is queued.
    pub(crate) fn poll_response(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        let mtu = self.attrs.path_mtu.bytes();
        let (low, psn, ext, payload) = match self.resp.queue.front()? {
            RespItem::Ack { psn, aeth } => {
                let ext = ExtHeaders {
                    aeth: Some(*aeth),
                    ..ExtHeaders::default()
                };
                (op::ACKNOWLEDGE, *psn, ext, 0)
            }
            RespItem::Reply {
                psn, msn, reply, ..
            } => {
                let (low, atomic_ack_eth) = match *reply {
                    Reply::AtomicAck { orig } => {
                        (op::ATOMIC_ACKNOWLEDGE, Some(AtomicAckEthRepr { orig }))
                    }
                    Reply::EmptyRead => (op::RDMA_READ_RESPONSE_ONLY, None),
                };
                let ext = ExtHeaders {
                    aeth: Some(AethRepr::ack(*msn)),
                    atomic_ack_eth,
                    ..ExtHeaders::default()
                };
                (low, *psn, ext, 0)
            }
            RespItem::Read(r) => {
                let low = match (r.index == 0, r.left <= mtu) {
                    (true, true) => op::RDMA_READ_RESPONSE_ONLY,
                    (true, false) => op::RDMA_READ_RESPONSE_FIRST,
                    (false, false) => op::RDMA_READ_RESPONSE_MIDDLE,
                    (false, true) => op::RDMA_READ_RESPONSE_LAST,
                };
                let ext = ExtHeaders {
                    aeth: (low != op::RDMA_READ_RESPONSE_MIDDLE).then(|| AethRepr::ack(r.msn)),
                    ..ExtHeaders::default()
                };
                (low, r.psn, ext, r.left.min(mtu) as usize)
            }
        };
        let opcode = Opcode::new(Transport::Rc, low);
        let mut bth = BthRepr::new(opcode, self.attrs.dest_qp, psn);
        bth.pkey = self.attrs.pkey;
        bth.pad_count = pad_for(payload);
        let headers = BthRepr::LEN + ext.len();
        let total = headers + payload + usize::from(bth.pad_count);
        if buf.len() < total {
            return None;
        }
        if let Some(RespItem::Read(r)) = self.resp.queue.front() {
            let out = &mut buf[headers..headers + payload];
            let data = if r.preserved.is_whole() {
                Ok(())
            } else {
                ctx.mrs
                    .read_remote(
                        self.who(),
                        r.rkey,
                        (r.va, payload as u64),
                        Access::REMOTE_READ,
                    )
                    .map(|src| out.copy_from_slice(src))
            };
            r.preserved.overlay(r.va, out);
            match data {
                Ok(()) => {}
                Err(_) => {
                    // The region went away after the request was checked.
                    self.resp.queue.clear();
                    self.resp
                        .push_ack(psn, Syndrome::Nak(NakCode::RemoteAccessError));
                    self.resp.final_nak = true;
                    self.enter_error(ctx);
                    return self.poll_response(ctx, buf);
                }
            }
        }
        bth.emit_unchecked(buf);
        ext.emit(opcode, &mut buf[BthRepr::LEN..]).ok()?;
        buf[headers + payload..total].fill(0);
        match self.resp.queue.front_mut() {
            Some(RespItem::Read(r)) if r.left > mtu => {
                r.left -= mtu;
                r.va = r.va.wrapping_add(u64::from(mtu));
                r.psn = r.psn.next();
                r.index += 1;
                r.preserved.forget_before(r.va);
            }
            Some(RespItem::Ack { aeth, .. }) => {
                if matches!(aeth.syndrome, Syndrome::Ack { .. }) {
                    ctx.stats.acks_sent += 1;
                }
                self.resp.queue.pop_front();
            }
            _ => {
                self.resp.queue.pop_front();
            }
        }
        if self.state == QpState::Err && self.resp.queue.is_empty() {
            self.resp.final_nak = false;
        }
        Some(Transmit {
            dest: self.attrs.dest_addr,
            dest_qp: self.attrs.dest_qp,
            src_qp: self.qpn,
            len: total,
            flow_label: self.attrs.flow_label,
            traffic_class: self.attrs.traffic_class,
            hop_limit: self.attrs.hop_limit,
        })
    }
}
