//! Memory windows (IBA 10.6.7): a part of a memory region opened to peers under a key of its
//! own, bound and unbound by work requests without registering anything.
//!
//! Type 1 windows belong to their protection domain and are bound by `ibv_bind_mw` (which
//! libibverbs turns into a BIND_MW work request, as rxe does); they cannot be invalidated by
//! a key. Type 2 windows (rxe's type 2B) are bound by BIND_MW work requests to one queue
//! pair, the only one whose peer may use them, and are unbound by LOCAL_INV or a SEND with
//! Invalidate arriving on that queue pair.

use super::{Access, PdId};
use crate::wire::Qpn;

/// The two types of IBA 10.6.7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MwType {
    /// Bound through the protection domain; never invalidated by a key.
    Type1,
    /// Bound to a queue pair; invalidated by LOCAL_INV or SEND with Invalidate.
    Type2,
}

/// What a BIND_MW work request asks for (`ibv_mw_bind_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MwBind {
    /// The region the window opens (its L_Key); unused when `length` is 0.
    pub mr_lkey: u32,
    /// The first byte: a virtual address of the region.
    pub addr: u64,
    /// Bytes; 0 unbinds a type 1 window (not allowed for type 2, o10-37.2.40).
    pub length: u64,
    /// The window's remote rights, and `ZERO_BASED` (type 2 only) to address it from 0.
    pub access: Access,
}

impl MwBind {
    /// Opens `length` bytes of region `mr_lkey` from `addr` with `access`.
    pub const fn new(mr_lkey: u32, addr: u64, length: u64, access: Access) -> MwBind {
        MwBind {
            mr_lkey,
            addr,
            length,
            access,
        }
    }
}

/// The rights a window may carry (rxe's `RXE_ACCESS_SUPPORTED_MW`).
pub(super) const WINDOW_RIGHTS: Access = Access::REMOTE.union(Access::ZERO_BASED);

/// An allocated memory window.
#[derive(Debug, Clone)]
pub struct MemoryWindow {
    pub(super) rkey: u32,
    pub(super) pd: PdId,
    pub(super) kind: MwType,
    /// The slot of the region it is bound to.
    pub(super) mr: Option<usize>,
    pub(super) addr: u64,
    pub(super) length: u64,
    pub(super) access: Access,
    /// Type 2: the queue pair it was bound through.
    pub(super) qpn: Option<Qpn>,
}

impl MemoryWindow {
    pub(super) fn new(rkey: u32, pd: PdId, kind: MwType) -> MemoryWindow {
        MemoryWindow {
            rkey,
            pd,
            kind,
            mr: None,
            addr: 0,
            length: 0,
            access: Access::NONE,
            qpn: None,
        }
    }

    /// The key peers use.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// Its type.
    pub fn kind(&self) -> MwType {
        self.kind
    }
    /// Its protection domain.
    pub fn pd(&self) -> PdId {
        self.pd
    }
    /// Bound to a region (for type 2: valid, rxe's `RXE_MW_STATE_VALID`).
    pub fn is_bound(&self) -> bool {
        self.mr.is_some()
    }
    /// The first byte and length it opens.
    pub fn extent(&self) -> (u64, u64) {
        (self.addr, self.length)
    }
    /// Its remote rights.
    pub fn access(&self) -> Access {
        self.access
    }
    /// Type 2: the queue pair it is bound to.
    pub fn bound_qp(&self) -> Option<Qpn> {
        self.qpn
    }

    /// The region address of `len` bytes at `va` in the window's own addressing (from 0
    /// for a zero-based window), if they lie inside it.
    pub(super) fn locate(&self, va: u64, len: u64) -> Option<u64> {
        let offset = if self.access.contains(Access::ZERO_BASED) {
            va
        } else {
            va.checked_sub(self.addr)?
        };
        let end = offset.checked_add(len)?;
        (end <= self.length).then(|| self.addr + offset)
    }
}
