//! Memory regions (IBA 10.6.3): registered memory, and fast-registration regions whose
//! mapping a REG_MR work request sets and LOCAL_INV or a SEND with Invalidate removes
//! (IBA 10.6.3.6-7, rxe_mr.c).

use core::ops::Range;

use super::{Access, PdId};

/// Where a region is in its life (rxe's `RXE_MR_STATE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MrState {
    /// Registered: its keys reach its bytes.
    Valid,
    /// A fast-registration region with no mapping: allocated and never registered, or
    /// invalidated. Only a REG_MR work request makes it valid (again).
    Free,
}

/// A memory region: `len` bytes seen at virtual addresses `va..va + len`, backed by bytes
/// the engine owns.
///
/// A fast-registration region owns `capacity` bytes (its pages, `ib_alloc_mr`'s
/// `max_num_sg` worth) from allocation on; each REG_MR maps its first `len` of them at a new
/// `va` under a new key.
#[derive(Debug, Clone)]
pub struct MemoryRegion {
    pub(super) lkey: u32,
    /// 0 when the region has no remote right, as rxe does.
    pub(super) rkey: u32,
    pub(super) pd: PdId,
    pub(super) va: u64,
    pub(super) len: u64,
    pub(super) access: Access,
    pub(super) data: Vec<u8>,
    pub(super) state: MrState,
    /// Made by `alloc_mr` (rxe's `IB_MR_TYPE_MEM_REG`): only such regions can be
    /// invalidated and registered again by work requests.
    pub(super) fast: bool,
    /// Memory windows bound to it: while any is, it can be neither invalidated nor
    /// deregistered (rxe's `num_mw`).
    pub(super) windows: u32,
}

impl MemoryRegion {
    pub(super) fn user(key: u32, pd: PdId, va: u64, data: Vec<u8>, access: Access) -> Self {
        MemoryRegion {
            lkey: key,
            rkey: rkey_for(key, access),
            pd,
            va,
            len: data.len() as u64,
            access,
            data,
            state: MrState::Valid,
            fast: false,
            windows: 0,
        }
    }

    pub(super) fn fast(key: u32, pd: PdId, capacity: usize) -> Self {
        MemoryRegion {
            lkey: key,
            // rxe's fast regions start with remote access: the R_Key is the L_Key.
            rkey: key,
            pd,
            va: 0,
            len: 0,
            access: Access::NONE,
            data: vec![0; capacity],
            state: MrState::Free,
            fast: true,
            windows: 0,
        }
    }

    /// The key local work requests name it by.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
    /// The key peers name it by; 0 when it has no remote right (rxe).
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// Its protection domain.
    pub fn pd(&self) -> PdId {
        self.pd
    }
    /// The virtual address of its first byte.
    pub fn va(&self) -> u64 {
        self.va
    }
    /// Bytes it maps (for a fast-registration region, those of the last REG_MR).
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// It maps no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Its rights.
    pub fn access(&self) -> Access {
        self.access
    }
    /// Its state.
    pub fn state(&self) -> MrState {
        self.state
    }
    /// False once invalidated (LOCAL_INV or a peer's SEND with Invalidate), until the next
    /// REG_MR.
    pub fn is_valid(&self) -> bool {
        self.state == MrState::Valid
    }
    /// Made by `alloc_mr` for fast registration.
    pub fn is_fast(&self) -> bool {
        self.fast
    }
    /// Memory windows bound to it.
    pub fn bound_windows(&self) -> u32 {
        self.windows
    }
    /// Its bytes: what it maps starts at index 0 (a fast-registration region's capacity may
    /// go further).
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }
    /// Its bytes, to fill or read between operations.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// The slice index of `len` bytes at `va`, if they lie inside what it maps.
    pub(super) fn range(&self, va: u64, len: u64) -> Option<Range<usize>> {
        let start = va.checked_sub(self.va)?;
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        Some(start as usize..end as usize)
    }
}

/// rxe's `rxe_mr_init`: the R_Key is the L_Key when a remote right is granted, 0 otherwise.
pub(super) fn rkey_for(key: u32, access: Access) -> u32 {
    if access.intersects(Access::REMOTE) {
        key
    } else {
        0
    }
}
