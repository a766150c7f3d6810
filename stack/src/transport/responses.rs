//! The responder's output: ACKs, NAKs, READ responses and atomic ACKs wait in one queue, in
//! PSN order, until `poll_transmit` takes them (IBA 9.7.5.1: responses in request order).
//!
//! ACKs coalesce there: a new ACK replaces one not yet sent (rxe answers every AckReq; when
//! the link keeps up the two are the same, when it does not we send fewer ACKs carrying the
//! same information). READ responses are built when sent, from the region or from a copy
//! taken when a later request was about to overwrite what they still have to send.

use std::collections::VecDeque;

use super::config::Transmit;
use super::mr::{Access, MrTable};
use super::qp::QpState;
use super::queue_pair::{Ctx, QueuePair};
use super::responder::Responder;
use crate::wire::opcode::op;
use crate::wire::{
    AethRepr, AtomicAckEthRepr, BthRepr, ExtHeaders, FixedHeader, Msn, NakCode, Opcode, Psn,
    Syndrome, Transport, pad_for,
};

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
    /// The bytes still to send, copied out of the region when a later request was about to
    /// overwrite them: a READ returns memory as it was when the READ executed (rxe generates
    /// all of a READ's responses before it executes the next request; we send them lazily).
    /// (VA of the first byte, bytes).
    snapshot: Option<(u64, Vec<u8>)>,
}

#[derive(Debug, Clone)]
pub(crate) enum RespItem {
    Ack { psn: Psn, aeth: AethRepr },
    Atomic { psn: Psn, msn: Msn, orig: u64 },
    Read(ReadResponse),
}

impl RespItem {
    pub(super) fn first_psn(&self) -> Psn {
        match self {
            RespItem::Ack { psn, .. } | RespItem::Atomic { psn, .. } => *psn,
            RespItem::Read(r) => r.first_psn,
        }
    }
}

impl Responder {
    pub fn keep_only_final_nak(&mut self) {
        if !self.final_nak {
            self.queue.clear();
        }
    }

    pub fn has_responses(&self) -> bool {
        !self.queue.is_empty()
    }

    pub(super) fn push_ack(&mut self, psn: Psn, syndrome: Syndrome) {
        let item = RespItem::Ack {
            psn,
            aeth: AethRepr {
                syndrome,
                msn: self.msn,
            },
        };
        // A newer state of the responder supersedes an ACK not yet sent, and a NAK or RNR NAK
        // once the gap it reported is filled; an older one (a re-ACK) never hides a NAK.
        let supersedes = match self.queue.back() {
            Some(RespItem::Ack { psn: old, aeth }) if !self.final_nak => {
                matches!(aeth.syndrome, Syndrome::Ack { .. }) || psn.distance(*old) >= 0
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

/// Copies out what queued READ responses still have to send from `len` bytes at `va` of
/// region `key`, before the responder writes there.
pub(super) fn protect_reads(
    queue: &mut VecDeque<RespItem>,
    mrs: &MrTable,
    key: u32,
    va: u64,
    len: u64,
) {
    for item in queue.iter_mut() {
        let RespItem::Read(r) = item else { continue };
        let overlaps = r.rkey == key
            && r.snapshot.is_none()
            && va < r.va.saturating_add(u64::from(r.left))
            && r.va < va.saturating_add(len);
        if overlaps && let Ok(bytes) = mrs.read(key, r.va, u64::from(r.left), Access::REMOTE_READ) {
            r.snapshot = Some((r.va, bytes.to_vec()));
        }
    }
}

impl QueuePair {
    /// How many executed READs and atomic results the responder remembers for duplicates.
    pub(super) fn resources(&self, ctx: &Ctx<'_>) -> usize {
        ctx.config
            .atomic_results
            .max(usize::from(self.attrs.max_dest_rd_atomic))
            .max(1)
    }

    pub(super) fn read_response(&self, psn: Psn, rkey: u32, va: u64, len: u32) -> ReadResponse {
        let mtu = self.attrs.path_mtu.bytes();
        let npkts = len.div_ceil(mtu).max(1);
        // Where this PSN lies in a READ executed before (the responder resources of IBA
        // 9.7.5.2.7); a READ not found starts a new response message.
        let index = self
            .resp
            .reads
            .iter()
            .find(|(first, n)| {
                let k = psn.distance(*first);
                k >= 0 && (k as u32) < *n
            })
            .map_or(0, |(first, _)| psn.distance(*first) as u32);
        ReadResponse {
            first_psn: psn,
            last_psn: psn.add(npkts - 1),
            psn,
            rkey,
            va,
            left: len,
            index,
            msn: self.resp.msn,
            snapshot: None,
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
            RespItem::Atomic { psn, msn, orig } => {
                let ext = ExtHeaders {
                    aeth: Some(AethRepr::ack(*msn)),
                    atomic_ack_eth: Some(AtomicAckEthRepr { orig: *orig }),
                    ..ExtHeaders::default()
                };
                (op::ATOMIC_ACKNOWLEDGE, *psn, ext, 0)
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
        let headers = BthRepr::LEN + ExtHeaders::len_for(opcode).unwrap_or(0);
        let total = headers + payload + usize::from(bth.pad_count);
        if buf.len() < total {
            return None;
        }
        if let Some(RespItem::Read(r)) = self.resp.queue.front() {
            let data = match &r.snapshot {
                Some((base, bytes)) => {
                    let at = r.va.wrapping_sub(*base) as usize;
                    Ok(bytes.get(at..at + payload).unwrap_or(&[]))
                }
                None => ctx
                    .mrs
                    .read(r.rkey, r.va, payload as u64, Access::REMOTE_READ),
            };
            match data {
                Ok(src) => buf[headers..headers + payload].copy_from_slice(src),
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
        })
    }
}
