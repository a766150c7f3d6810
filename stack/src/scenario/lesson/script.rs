//! The scripted faults of the lessons and the comments on their frames.

use super::{Lesson, syndrome_text};
use crate::scenario::Side;
use crate::wire::opcode::op;
use crate::wire::{Ecn, Opcode, Psn, RocePacket};

/// Drops the `nth` frame (from 1) that `from` sends with one of `opcodes`; with `nth` 0, every
/// such frame (a peer that has gone away).
#[derive(Debug, Clone)]
pub struct Drop {
    from: Side,
    opcodes: &'static [u8],
    nth: u32,
    seen: u32,
}

impl Drop {
    const fn new(from: Side, opcodes: &'static [u8], nth: u32) -> Drop {
        Drop {
            from,
            opcodes,
            nth,
            seen: 0,
        }
    }

    /// Counts the frame if it is of the kind; true if it is the one to drop.
    pub fn matches(&mut self, from: Side, opcode: Opcode) -> bool {
        if from != self.from || !self.opcodes.contains(&opcode.value()) {
            return false;
        }
        self.seen += 1;
        self.nth == 0 || self.seen == self.nth
    }
}

// RC opcodes are the bare operation codes (transport bits 000).
const RC_WRITE: &[u8] = &[
    op::RDMA_WRITE_FIRST,
    op::RDMA_WRITE_MIDDLE,
    op::RDMA_WRITE_LAST,
    op::RDMA_WRITE_ONLY,
];
const RC_READ_RESPONSE: &[u8] = &[
    op::RDMA_READ_RESPONSE_FIRST,
    op::RDMA_READ_RESPONSE_MIDDLE,
    op::RDMA_READ_RESPONSE_LAST,
    op::RDMA_READ_RESPONSE_ONLY,
];
const RC_ACKNOWLEDGE: &[u8] = &[op::ACKNOWLEDGE];
/// Every RC opcode: all of a host's frames.
const RC_ANY: &[u8] = &[
    op::RDMA_WRITE_FIRST,
    op::RDMA_WRITE_MIDDLE,
    op::RDMA_WRITE_LAST,
    op::RDMA_WRITE_ONLY,
    op::ACKNOWLEDGE,
];
const RC_ATOMIC_ACKNOWLEDGE: &[u8] = &[op::ATOMIC_ACKNOWLEDGE];

/// What `lesson` loses on the way.
pub fn drops(lesson: Lesson) -> Vec<Drop> {
    match lesson {
        Lesson::LossGbn => vec![Drop::new(Side::A, RC_WRITE, 3)],
        Lesson::AckLoss => vec![Drop::new(Side::B, RC_ACKNOWLEDGE, 1)],
        Lesson::ReadRetry => vec![Drop::new(Side::B, RC_READ_RESPONSE, 2)],
        Lesson::AtomicReplay => vec![Drop::new(Side::B, RC_ATOMIC_ACKNOWLEDGE, 1)],
        // B is unreachable: nothing A sends gets there.
        Lesson::RetryExceeded => vec![Drop::new(Side::A, RC_ANY, 0)],
        _ => Vec::new(),
    }
}

/// Says what a frame is doing where a learner would ask: retransmissions, NAKs, CNPs, marks.
#[derive(Debug)]
pub struct Annotator {
    /// Path MTU in bytes: a READ request stands for one PSN per MTU of data.
    mtu: u32,
    /// Per side, the PSN after the newest request sent.
    next: [Option<Psn>; 2],
    /// Per side, the frame number (from 1, as Wireshark counts) that first carried each request
    /// PSN, so that comments can point a learner at it. Lessons are short: this stays small.
    first_sent: [std::collections::HashMap<u32, u64>; 2],
}

impl Annotator {
    pub fn new(mtu: u32) -> Annotator {
        Annotator {
            mtu: mtu.max(1),
            next: [None, None],
            first_sent: Default::default(),
        }
    }

    /// The comments for frame `number` (from 1) that `from` sent.
    pub fn note(&mut self, number: u64, from: Side, p: &RocePacket<'_>) -> Vec<String> {
        let mut notes = Vec::new();
        let bth = p.bth();
        let opcode = p.opcode();
        if p.ecn() == Ecn::Ce {
            notes.push("ECN CE: marked by the congested queue on the way".to_owned());
        }
        if opcode == Opcode::CNP {
            notes.push(format!(
                "CNP: the receiver asks QP {:#x} to slow down (DCQCN)",
                bth.dest_qp.value()
            ));
        }
        if opcode.is_request() && bth.dest_qp.value() != 1 {
            let next = &mut self.next[from as usize];
            let first = *self.first_sent[from as usize]
                .entry(bth.psn.value())
                .or_insert(number);
            if next.is_some_and(|n| bth.psn < n) {
                notes.push(format!(
                    "retransmission of PSN {}, first sent in frame {first}",
                    bth.psn.value()
                ));
            }
            let span = match p.ext().reth {
                Some(reth) if opcode.low() == op::RDMA_READ_REQUEST => {
                    reth.dma_len.div_ceil(self.mtu).max(1)
                }
                _ => 1,
            };
            let after = bth.psn.add(span);
            if next.is_none_or(|n| after > n) {
                *next = Some(after);
            }
        }
        if let Some(aeth) = p.ext().aeth {
            // A NAK names a PSN the peer sent: say which frame carried it, if one did.
            let sent = self.first_sent[from.peer() as usize]
                .get(&bth.psn.value())
                .copied();
            notes.extend(syndrome_text(aeth.syndrome, bth.psn, sent));
        }
        notes
    }
}
