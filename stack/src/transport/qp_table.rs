//! The engine's queue pairs by QPN, and the QPNs it hands out.
//!
//! Without a seed QPNs count from 17, as rdma_rxe's first (QP0 and QP1 are the special ones,
//! IBA 10.2.1), which keeps captures and tests reproducible. With one
//! ([`TransportConfig::id_seed`]) the first QPN is drawn from it, so that an off-path sender
//! cannot guess it (issue 14: `roce perf` always used 0x11). Either way the QPNs handed out
//! are consecutive, so they index a dense vector; a QPN chosen by the caller far from them
//! (QP1, a peer's numbering mirrored in a test) goes to a short list instead of growing it.
//!
//! [`TransportConfig::id_seed`]: super::TransportConfig::id_seed

use super::qp::QueuePair;
use crate::rng::Rng;
use crate::wire::Qpn;

/// rxe numbers its first queue pair 17.
const FIRST_QPN: u32 = 0x11;
/// QPNs are 24 bits (IBA 9.2 BTH:DestQP).
const QPN_LIMIT: u32 = 1 << 24;
/// How far past the first QPN the dense vector reaches; beyond, the short list.
const DENSE: u32 = 1 << 16;

#[derive(Debug)]
pub(super) struct QpTable {
    /// The first QPN handed out: `dense[i]` is QPN `base + i`.
    base: u32,
    dense: Vec<Option<Box<QueuePair>>>,
    sparse: Vec<QueuePair>,
    next: u32,
}

impl QpTable {
    pub fn new(seed: Option<u64>) -> QpTable {
        let base = match seed {
            // Anywhere leaving room for DENSE QPNs before the 24-bit limit.
            Some(seed) => {
                let span = u64::from(QPN_LIMIT - DENSE - 0x100);
                0x100 + Rng::new(seed ^ 0x9b1d_5ca1).below(span) as u32
            }
            None => FIRST_QPN,
        };
        QpTable {
            base,
            dense: Vec::new(),
            sparse: Vec::new(),
            next: base,
        }
    }

    /// Where `qpn` lives in `dense`, if it belongs there.
    fn slot(&self, qpn: Qpn) -> Option<usize> {
        let i = qpn.value().wrapping_sub(self.base);
        (i < DENSE).then_some(i as usize)
    }

    pub fn get(&self, qpn: Qpn) -> Option<&QueuePair> {
        match self.slot(qpn) {
            Some(i) => self.dense.get(i)?.as_deref(),
            None => self.sparse.iter().find(|q| q.qpn() == qpn),
        }
    }

    pub fn get_mut(&mut self, qpn: Qpn) -> Option<&mut QueuePair> {
        match self.slot(qpn) {
            Some(i) => self.dense.get_mut(i)?.as_deref_mut(),
            None => self.sparse.iter_mut().find(|q| q.qpn() == qpn),
        }
    }

    /// Adds `qp` under its QPN; false (and nothing added) if the QPN is taken.
    pub fn insert(&mut self, qp: QueuePair) -> bool {
        if self.get(qp.qpn()).is_some() {
            return false;
        }
        match self.slot(qp.qpn()) {
            Some(i) => {
                if self.dense.len() <= i {
                    self.dense.resize_with(i + 1, || None);
                }
                self.dense[i] = Some(Box::new(qp));
            }
            None => self.sparse.push(qp),
        }
        true
    }

    /// Every queue pair.
    pub fn iter(&self) -> impl Iterator<Item = &QueuePair> {
        self.dense
            .iter()
            .filter_map(|q| q.as_deref())
            .chain(self.sparse.iter())
    }

    /// Removes a queue pair; false if there is none by that number.
    pub fn remove(&mut self, qpn: Qpn) -> bool {
        match self.slot(qpn) {
            Some(i) => self.dense.get_mut(i).and_then(Option::take).is_some(),
            None => match self.sparse.iter().position(|q| q.qpn() == qpn) {
                Some(at) => {
                    self.sparse.swap_remove(at);
                    true
                }
                None => false,
            },
        }
    }

    /// A QPN the caller chose: handing out continues after it, as before it was chosen.
    pub fn note_chosen(&mut self, qpn: Qpn) {
        if let (Some(chosen), Some(next)) = (self.slot(qpn), self.slot(Qpn::new(self.next)))
            && chosen >= next
        {
            self.next = qpn.value() + 1;
        }
    }

    /// The next QPN not in use (QPNs are not reused until the 24-bit space wraps).
    pub fn next_free(&mut self) -> Option<Qpn> {
        for _ in 0..QPN_LIMIT {
            let qpn = Qpn::new(self.next);
            self.next = if self.next + 1 >= QPN_LIMIT {
                FIRST_QPN
            } else {
                self.next + 1
            };
            if self.get(qpn).is_none() {
                return Some(qpn);
            }
        }
        None
    }
}
