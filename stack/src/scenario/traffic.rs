//! The demo's workload on one RC connection, and its verification.
//!
//! Host A posts a seeded mix of RDMA WRITEs and SENDs of its source region to host B and RDMA
//! READs of B's source region back, of random lengths (odd ones included, so pad bytes and
//! every packet position occur), with FETCH_ADDs and COMPARE_SWAPs in between; host B keeps a
//! few receives posted. Each destination is overwritten with a poison pattern before its work
//! request is posted and compared with the source once the request completes, so a message
//! that was not delivered in full, or delivered from stale data, is caught. Destinations are
//! rings of slots reused only after verification; sources are read at random offsets, so a
//! slot never receives the same bytes twice in a row.

use core::time::Duration;
use std::collections::VecDeque;

use thiserror::Error;

use crate::endpoint::connect::{QpPath, connect};
use crate::rng::Rng;
use crate::time::Instant;
use crate::transport::{
    Access, CqId, Engine, Event, MAX_RD_ATOMIC, Mtu, QpInit, QpType, RecvWr, SendOp, SendWr, Sge,
    TransportError, WcStatus, WorkCompletion,
};
use crate::wire::{Psn, Qpn, RnrTimer};

/// What the workload looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrafficConfig {
    /// Payload bytes of WRITE, SEND and READ messages to move (atomics come on top).
    pub total_bytes: u64,
    /// Message lengths are uniform in `1..=max_message`.
    pub max_message: u32,
    /// Relative weights of WRITE, SEND and READ messages.
    pub mix: [u32; 3],
    /// One work request in this many is an atomic (0: none).
    pub atomic_every: u32,
    /// Work requests host A keeps outstanding.
    pub depth: usize,
    /// Receives host B keeps posted.
    pub recv_depth: usize,
    /// How long B's application holds a receive buffer after its SEND arrived before
    /// posting it again. A slow receiver is what makes RNR NAKs happen (IBA 9.7.5.2.8).
    pub recv_hold: Duration,
    /// Seeds the operation mix and message sizes: the same seed gives the same run.
    pub seed: u64,
}

impl Default for TrafficConfig {
    fn default() -> Self {
        TrafficConfig {
            total_bytes: 256 << 20,
            max_message: 256 << 10,
            mix: [4, 3, 3],
            atomic_every: 16,
            depth: 32,
            recv_depth: 4,
            recv_hold: Duration::from_micros(100),
            seed: 1,
        }
    }
}

/// An operation of the demo's workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// RDMA WRITE from A into B's memory.
    Write,
    /// SEND from A into B's posted receives.
    Send,
    /// RDMA READ of B's memory into A's.
    Read,
    /// FETCH_ADD on B's counter word.
    FetchAdd,
    /// COMPARE_SWAP on B's swap word.
    CompareSwap,
}

impl Op {
    /// Every operation, in the order of [`OpCounts`]' arrays.
    pub const ALL: [Op; 5] = [Op::Write, Op::Send, Op::Read, Op::FetchAdd, Op::CompareSwap];

    /// The name ibv_wc_opcode_str would print.
    pub const fn name(self) -> &'static str {
        match self {
            Op::Write => "RDMA_WRITE",
            Op::Send => "SEND",
            Op::Read => "RDMA_READ",
            Op::FetchAdd => "FETCH_ADD",
            Op::CompareSwap => "COMPARE_SWAP",
        }
    }
}

/// Messages and payload bytes completed and verified, per operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpCounts {
    /// Verified messages, indexed by [`Op`].
    pub messages: [u64; 5],
    /// Verified payload bytes, indexed by [`Op`].
    pub bytes: [u64; 5],
}

impl OpCounts {
    /// Verified messages of `op`.
    pub fn messages(&self, op: Op) -> u64 {
        self.messages[op as usize]
    }
    /// Verified payload bytes of `op`.
    pub fn bytes(&self, op: Op) -> u64 {
        self.bytes[op as usize]
    }
    /// Verified messages of every operation.
    pub fn total_messages(&self) -> u64 {
        self.messages.iter().sum()
    }
    /// Verified payload bytes of every operation.
    pub fn total_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }
}

/// What went wrong with the workload: a verb refused, or a result that does not verify.
#[derive(Debug, Error)]
pub enum TrafficError {
    /// Registering memory or creating the queue pairs failed.
    #[error("setting up: {0}")]
    Setup(#[from] TransportError),
    /// A work request completed in error.
    #[error("{op} #{index} completed with {status}", op = op.name(), status = status.name())]
    Completion {
        /// Its operation.
        op: Op,
        /// Its number among that operation's messages.
        index: u64,
        /// The completion's status.
        status: WcStatus,
    },
    /// Delivered bytes differ from the bytes sent.
    #[error("{op} #{index}: {len} bytes delivered, first wrong byte at offset {offset}", op = op.name())]
    Mismatch {
        /// The operation.
        op: Op,
        /// Its number among that operation's messages.
        index: u64,
        /// The message's length.
        len: u32,
        /// The first wrong byte.
        offset: usize,
    },
    /// An atomic returned another original value than the one expected.
    #[error("{op} #{index} returned {got:#x}, expected {want:#x}", op = op.name())]
    AtomicResult {
        /// The operation.
        op: Op,
        /// Its number among that operation's messages.
        index: u64,
        /// The value returned.
        got: u64,
        /// The value expected.
        want: u64,
    },
    /// An atomic word in B's memory ended at the wrong value.
    #[error("the {which} atomic word ended at {got}, expected {want}")]
    AtomicWord {
        /// "FETCH_ADD" or "COMPARE_SWAP": the operation that owns the word.
        which: &'static str,
        /// Its value.
        got: u64,
        /// The value expected.
        want: u64,
    },
    /// Completions arrived out of posting order.
    #[error("completion for work request {got}, expected {want}: out of order")]
    OutOfOrder {
        /// The work request that completed.
        got: u64,
        /// The one expected.
        want: u64,
    },
    /// A receive completed (with these bytes) while no SEND was outstanding.
    #[error("a receive completed with {0} bytes but no SEND was outstanding")]
    UnexpectedReceive(u32),
    /// A queue pair entered the error state.
    #[error("queue pair {0:#x} entered the error state")]
    QpFatal(Qpn),
}

const SOURCE_LEN: usize = 8 << 20;
const POISON: u8 = 0xa5;

/// Virtual addresses of the regions, the same on both hosts; any distinct values do.
const VA: Regions<u64> = Regions {
    source: 0x1000_0000,
    ring: 0x2000_0000,
    atomic: 0x3000_0000,
};

/// One value per region of a host: its memory key, or ([`VA`]) its virtual address.
#[derive(Debug, Clone, Copy)]
struct Regions<T> {
    /// Random bytes: what A WRITEs and SENDs, what B is READ from.
    source: T,
    /// Destination slots: B's WRITE targets and receives, A's READ targets.
    ring: T,
    /// A: the 8-byte results of atomics, one per slot; B: the two atomic words.
    atomic: T,
}

/// A work request A posted, until it completes and is verified.
#[derive(Debug, Clone, Copy)]
struct Posted {
    wr_id: u64,
    op: Op,
    index: u64,
    slot: usize,
    /// Offset in the source region (WRITE, SEND, READ), or the expected atomic result.
    from: u64,
    len: u32,
}

/// Free slots of one ring, in a fixed order so runs are reproducible.
#[derive(Debug)]
struct Slots(Vec<usize>);

impl Slots {
    /// Slots `first..first + n`, handed out lowest first.
    fn new(first: usize, n: usize) -> Slots {
        Slots((first..first + n).rev().collect())
    }
}

/// The demo's workload: a seeded mix of RC operations from A to B, every result verified.
#[derive(Debug)]
pub struct Traffic {
    cfg: TrafficConfig,
    rng: Rng,
    /// A's queue pair.
    pub qp_a: Qpn,
    /// B's queue pair.
    pub qp_b: Qpn,
    cq_a: CqId,
    cq_b: CqId,
    mem_a: Regions<u32>,
    mem_b: Regions<u32>,
    /// A's ring holds READ targets; B's holds WRITE targets, then receives.
    write_slots: Slots,
    read_slots: Slots,
    atomic_slots: Slots,
    recv_slots: Slots,
    posted_bytes: u64,
    next_wr_id: u64,
    /// The operation drawn next, kept until a slot for it is free.
    next_op: Option<Op>,
    outstanding: VecDeque<Posted>,
    /// SENDs in posting order, matched to B's receive completions.
    sends: VecDeque<Posted>,
    /// Receive slots B has posted, in order.
    receives: VecDeque<usize>,
    /// Receive slots B's application still holds, and when it posts each again.
    held: VecDeque<(Instant, usize)>,
    started: [u64; 5],
    /// Sum of the values added so far: the next FETCH_ADD's expected result.
    added: u64,
    swaps: u64,
    /// What has completed and verified so far.
    pub done: OpCounts,
}

fn sge(va: u64, len: u32, key: u32) -> Vec<Sge> {
    vec![Sge {
        addr: va,
        length: len,
        lkey: key,
    }]
}

impl Traffic {
    /// Registers the regions, connects a queue pair on each side (see [`qp_path`]) and posts
    /// B's receives; `addrs` are A's and B's addresses.
    pub fn new(
        cfg: TrafficConfig,
        mtu: Mtu,
        a: &mut Engine,
        b: &mut Engine,
        addrs: [std::net::IpAddr; 2],
    ) -> Result<Traffic, TrafficError> {
        let mut rng = Rng::new(cfg.seed);
        let ring = (cfg.depth + cfg.recv_depth) * cfg.max_message as usize;
        let mut register = |e: &mut Engine, mem: &[u8], atomics: usize| -> Result<_, _> {
            let mut source = vec![0u8; SOURCE_LEN];
            rng.fill(&mut source);
            let remote = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
            Ok::<_, TransportError>(Regions {
                source: e.register_mr(VA.source, source, Access::REMOTE_READ)?,
                ring: e.register_mr(VA.ring, mem.to_vec(), remote)?,
                atomic: e.register_mr(
                    VA.atomic,
                    vec![0; 8 * atomics],
                    Access::LOCAL_WRITE | Access::REMOTE_ATOMIC,
                )?,
            })
        };
        let ring_mem = vec![POISON; ring];
        let mem_a = register(a, &ring_mem, cfg.depth)?;
        let mem_b = register(b, &ring_mem, 2)?;
        let (qp_a, cq_a) = create_qp(a)?;
        let (qp_b, cq_b) = create_qp(b)?;
        let [addr_a, addr_b] = addrs;
        connect(a, qp_a, &qp_path(addr_b, qp_b, PSN_B, PSN_A, mtu))?;
        connect(b, qp_b, &qp_path(addr_a, qp_a, PSN_A, PSN_B, mtu))?;
        let mut t = Traffic {
            cfg,
            rng,
            qp_a,
            qp_b,
            cq_a,
            cq_b,
            mem_a,
            mem_b,
            write_slots: Slots::new(0, cfg.depth),
            read_slots: Slots::new(0, cfg.depth),
            atomic_slots: Slots::new(0, cfg.depth),
            // After the WRITE targets in B's ring.
            recv_slots: Slots::new(cfg.depth, cfg.recv_depth),
            posted_bytes: 0,
            next_wr_id: 0,
            next_op: None,
            outstanding: VecDeque::new(),
            sends: VecDeque::new(),
            receives: VecDeque::new(),
            held: VecDeque::new(),
            started: [0; 5],
            added: 0,
            swaps: 0,
            done: OpCounts::default(),
        };
        while let Some(slot) = t.recv_slots.0.pop() {
            t.post_recv(b, slot)?;
        }
        Ok(t)
    }

    /// Everything posted has completed and been verified.
    pub fn finished(&self) -> bool {
        self.posted_bytes >= self.cfg.total_bytes
            && self.outstanding.is_empty()
            && self.sends.is_empty()
    }

    /// When B's application next hands a receive back.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.held.front().map(|&(at, _)| at)
    }

    /// Consumes completions (verifying each), then posts what the depth allows.
    pub fn pump(
        &mut self,
        now: Instant,
        a: &mut Engine,
        b: &mut Engine,
    ) -> Result<(), TrafficError> {
        // Completions first: a work request completed in error says why the queue pair
        // then entered the error state (RETRY_EXC_ERR, say), which the event does not.
        while let Some(wc) = a.poll_completion(self.cq_a) {
            self.complete_a(a, b, &wc)?;
        }
        while let Some(wc) = b.poll_completion(self.cq_b) {
            self.complete_b(now, a, b, &wc)?;
        }
        for e in [&mut *a, &mut *b] {
            if let Some(Event::QpFatal { qpn }) = e.poll_event() {
                return Err(TrafficError::QpFatal(qpn));
            }
        }
        while let Some(&(at, slot)) = self.held.front()
            && at <= now
        {
            self.held.pop_front();
            poison(b, self.mem_b.ring, self.slot_va(slot), self.cfg.max_message);
            self.post_recv(b, slot)?;
        }
        while self.outstanding.len() < self.cfg.depth && self.posted_bytes < self.cfg.total_bytes {
            let op = *self
                .next_op
                .get_or_insert_with(|| draw(&mut self.rng, &self.cfg));
            if !self.post(op, a, b)? {
                break;
            }
            self.next_op = None;
        }
        Ok(())
    }

    /// Checks the atomic words at the end of the run.
    pub fn verify_end(&self, b: &Engine) -> Result<(), TrafficError> {
        let words = read_words(b, self.mem_b.atomic);
        let checks = [
            ("FETCH_ADD", words[0], self.added),
            ("COMPARE_SWAP", words[1], self.swaps),
        ];
        for (which, got, want) in checks {
            if got != want {
                return Err(TrafficError::AtomicWord { which, got, want });
            }
        }
        Ok(())
    }

    fn slot_va(&self, slot: usize) -> u64 {
        VA.ring + (slot * self.cfg.max_message as usize) as u64
    }

    fn post_recv(&mut self, b: &mut Engine, slot: usize) -> Result<(), TrafficError> {
        let (va, max) = (self.slot_va(slot), self.cfg.max_message);
        b.post_recv(
            self.qp_b,
            RecvWr::new(slot as u64, sge(va, max, self.mem_b.ring)),
        )?;
        self.receives.push_back(slot);
        Ok(())
    }

    /// Posts one work request of `op`; false if no slot is free for it yet.
    fn post(&mut self, op: Op, a: &mut Engine, b: &mut Engine) -> Result<bool, TrafficError> {
        // A SEND's destination is whichever receive B has posted: it needs no slot here.
        let slots = match op {
            Op::Write => Some(&mut self.write_slots),
            Op::Read => Some(&mut self.read_slots),
            Op::FetchAdd | Op::CompareSwap => Some(&mut self.atomic_slots),
            Op::Send => None,
        };
        let slot = match slots.map(|s| s.0.pop()) {
            Some(Some(slot)) => slot,
            Some(None) => return Ok(false),
            None => 0,
        };
        let len = match op {
            Op::FetchAdd | Op::CompareSwap => 8,
            _ => {
                let left = self.cfg.total_bytes - self.posted_bytes;
                (1 + self.rng.below(u64::from(self.cfg.max_message))).min(left) as u32
            }
        };
        let from = self.rng.below((SOURCE_LEN - len as usize) as u64 + 1);
        // The destination (B's slot in the ring for a WRITE, A's for a READ or an atomic
        // result) is poisoned, so only the operation itself can make it right.
        let atomic_va = VA.atomic + 8 * slot as u64;
        let (ring_a, ring_b, atomic_a) = (self.mem_a.ring, self.mem_b.ring, self.mem_a.atomic);
        let (sop, sg, from) = match op {
            Op::Write => {
                poison(b, ring_b, self.slot_va(slot), len);
                let remote = SendOp::Write {
                    remote_addr: self.slot_va(slot),
                    rkey: ring_b,
                };
                (remote, sge(VA.source + from, len, self.mem_a.source), from)
            }
            Op::Send => (
                SendOp::Send,
                sge(VA.source + from, len, self.mem_a.source),
                from,
            ),
            Op::Read => {
                poison(a, ring_a, self.slot_va(slot), len);
                let remote = SendOp::Read {
                    remote_addr: VA.source + from,
                    rkey: self.mem_b.source,
                };
                (remote, sge(self.slot_va(slot), len, ring_a), from)
            }
            Op::FetchAdd => {
                poison(a, atomic_a, atomic_va, 8);
                let add = 1 + self.rng.below(1000);
                let expected = self.added;
                self.added += add;
                let remote = SendOp::FetchAdd {
                    remote_addr: VA.atomic,
                    rkey: self.mem_b.atomic,
                    add,
                };
                (remote, sge(atomic_va, 8, atomic_a), expected)
            }
            Op::CompareSwap => {
                poison(a, atomic_a, atomic_va, 8);
                let expected = self.swaps;
                self.swaps += 1;
                let remote = SendOp::CompareSwap {
                    remote_addr: VA.atomic + 8,
                    rkey: self.mem_b.atomic,
                    compare: expected,
                    swap: expected + 1,
                };
                (remote, sge(atomic_va, 8, atomic_a), expected)
            }
        };
        let wr_id = self.next_wr_id;
        a.post_send(self.qp_a, SendWr::new(wr_id, sop, sg))?;
        self.next_wr_id += 1;
        let posted = Posted {
            wr_id,
            op,
            index: self.started[op as usize],
            slot,
            from,
            len,
        };
        self.started[op as usize] += 1;
        if matches!(op, Op::Write | Op::Send | Op::Read) {
            self.posted_bytes += u64::from(len);
        }
        if op == Op::Send {
            self.sends.push_back(posted);
        }
        self.outstanding.push_back(posted);
        Ok(true)
    }

    /// A completion on host A: a WRITE, READ or atomic is verified here, a SEND when B's
    /// receive completes.
    fn complete_a(
        &mut self,
        a: &Engine,
        b: &Engine,
        wc: &WorkCompletion,
    ) -> Result<(), TrafficError> {
        let Some(p) = self.outstanding.pop_front() else {
            return Err(TrafficError::OutOfOrder {
                got: wc.wr_id,
                want: u64::MAX,
            });
        };
        if wc.wr_id != p.wr_id {
            return Err(TrafficError::OutOfOrder {
                got: wc.wr_id,
                want: p.wr_id,
            });
        }
        if wc.status != WcStatus::Success {
            return Err(completion_error(&p, wc.status));
        }
        let source = |e, key| region(e, key, VA.source + p.from, p.len);
        match p.op {
            Op::Write => {
                let got = region(b, self.mem_b.ring, self.slot_va(p.slot), p.len);
                compare(&p, source(a, self.mem_a.source), got)?;
                self.write_slots.0.push(p.slot);
            }
            Op::Read => {
                let got = region(a, self.mem_a.ring, self.slot_va(p.slot), p.len);
                compare(&p, source(b, self.mem_b.source), got)?;
                self.read_slots.0.push(p.slot);
            }
            Op::FetchAdd | Op::CompareSwap => {
                let got = read_words(a, self.mem_a.atomic)[p.slot];
                if got != p.from {
                    return Err(TrafficError::AtomicResult {
                        op: p.op,
                        index: p.index,
                        got,
                        want: p.from,
                    });
                }
                self.atomic_slots.0.push(p.slot);
                self.count(p.op, 0);
            }
            Op::Send => {}
        }
        if matches!(p.op, Op::Write | Op::Read) {
            self.count(p.op, p.len);
        }
        Ok(())
    }

    /// A receive completed on host B: the oldest SEND arrived.
    fn complete_b(
        &mut self,
        now: Instant,
        a: &Engine,
        b: &mut Engine,
        wc: &WorkCompletion,
    ) -> Result<(), TrafficError> {
        let (Some(p), Some(slot)) = (self.sends.pop_front(), self.receives.pop_front()) else {
            return Err(TrafficError::UnexpectedReceive(wc.byte_len));
        };
        if wc.status != WcStatus::Success {
            return Err(completion_error(&p, wc.status));
        }
        // Receives are consumed in the order they were posted (IBA 10.8.3.2).
        if wc.wr_id != slot as u64 {
            return Err(TrafficError::OutOfOrder {
                got: wc.wr_id,
                want: slot as u64,
            });
        }
        if wc.byte_len != p.len {
            return Err(TrafficError::Mismatch {
                op: Op::Send,
                index: p.index,
                len: wc.byte_len,
                offset: wc.byte_len.min(p.len) as usize,
            });
        }
        let want = region(a, self.mem_a.source, VA.source + p.from, p.len);
        compare(
            &p,
            want,
            region(b, self.mem_b.ring, self.slot_va(slot), p.len),
        )?;
        self.count(Op::Send, p.len);
        self.held.push_back((now + self.cfg.recv_hold, slot));
        Ok(())
    }

    /// Tests: pretends A's work requests succeeded, oldest first, until one is verified.
    #[cfg(test)]
    pub(crate) fn complete_first_unchecked(
        &mut self,
        a: &Engine,
        b: &Engine,
    ) -> Result<(), TrafficError> {
        while let Some(p) = self.outstanding.front().copied() {
            let wc = WorkCompletion::new(
                p.wr_id,
                WcStatus::Success,
                crate::transport::WcOpcode::Send,
                self.qp_a,
            );
            self.complete_a(a, b, &wc)?;
        }
        Ok(())
    }

    fn count(&mut self, op: Op, len: u32) {
        self.done.messages[op as usize] += 1;
        self.done.bytes[op as usize] += u64::from(len);
    }
}

/// Picks the next operation: an atomic one time in `atomic_every`, otherwise by the mix.
fn draw(rng: &mut Rng, cfg: &TrafficConfig) -> Op {
    if cfg.atomic_every > 0 && rng.below(u64::from(cfg.atomic_every)) == 0 {
        return if rng.chance(0.5) {
            Op::FetchAdd
        } else {
            Op::CompareSwap
        };
    }
    let total: u32 = cfg.mix.iter().sum();
    let mut pick = rng.below(u64::from(total.max(1))) as u32;
    for (op, weight) in [Op::Write, Op::Send, Op::Read].into_iter().zip(cfg.mix) {
        if pick < weight {
            return op;
        }
        pick -= weight;
    }
    Op::Write
}

fn completion_error(p: &Posted, status: WcStatus) -> TrafficError {
    TrafficError::Completion {
        op: p.op,
        index: p.index,
        status,
    }
}

/// First PSNs: A's wraps past 2^24 early in the run.
const PSN_A: Psn = Psn::new(0xff_ff00);
const PSN_B: Psn = Psn::new(0x12_3456);

/// The demo's queue-pair attributes: every remote right, 16 READs and atomics outstanding
/// (mlx5's limit), the spec's default-sized local ACK timeout (14: 67 ms), and RNR retried
/// forever after 10 us (timer code 1), as a patient application would ask.
pub fn qp_path(dest: std::net::IpAddr, dest_qp: Qpn, rq_psn: Psn, sq_psn: Psn, mtu: Mtu) -> QpPath {
    QpPath {
        access: Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC,
        max_rd_atomic: MAX_RD_ATOMIC,
        max_dest_rd_atomic: MAX_RD_ATOMIC,
        min_rnr_timer: RnrTimer::new(1),
        ..QpPath::new(QpType::Rc, dest, dest_qp, rq_psn, sq_psn, mtu)
    }
}

fn create_qp(e: &mut Engine) -> Result<(Qpn, CqId), TransportError> {
    let cq = e.create_cq(1 << 12);
    Ok((e.create_qp(QpInit::new(QpType::Rc, cq))?, cq))
}

/// `len` bytes of region `key` at `va` (empty if out of range: the comparison then fails).
fn region(e: &Engine, key: u32, va: u64, len: u32) -> &[u8] {
    e.mr(key)
        .and_then(|mr| {
            let start = usize::try_from(va.checked_sub(mr.va())?).ok()?;
            mr.bytes().get(start..start + len as usize)
        })
        .unwrap_or(&[])
}

fn poison(e: &mut Engine, key: u32, va: u64, len: u32) {
    if let Some(mr) = e.mr_mut(key) {
        let start = (va - mr.va()) as usize;
        if let Some(bytes) = mr.bytes_mut().get_mut(start..start + len as usize) {
            bytes.fill(POISON);
        }
    }
}

/// The 64-bit words of a region, in the host's order (as the engine writes atomics).
fn read_words(e: &Engine, key: u32) -> Vec<u64> {
    let bytes = e.mr(key).map_or(&[][..], |mr| mr.bytes());
    bytes
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
        .collect()
}

fn compare(p: &Posted, want: &[u8], got: &[u8]) -> Result<(), TrafficError> {
    if want == got && want.len() == p.len as usize {
        return Ok(());
    }
    let offset = want
        .iter()
        .zip(got)
        .position(|(w, g)| w != g)
        .unwrap_or(want.len().min(got.len()));
    Err(TrafficError::Mismatch {
        op: p.op,
        index: p.index,
        len: p.len,
        offset,
    })
}
