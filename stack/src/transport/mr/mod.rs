//! Memory (IBA 10.6): protection domains, memory regions, memory windows and the keys that
//! name them.
//!
//! The engine owns each region's bytes, so every access goes through the checks here and no
//! write can land outside a region: a key and an address range become a [`Span`] (a slice
//! index) only after the key, its protection domain, its state, the bounds and the rights
//! agree. The endpoint reads and writes a region's bytes between operations through
//! [`MemoryRegion::bytes`] and [`MemoryRegion::bytes_mut`].
//!
//! Keys are `index << 8 | key byte`, one index space for regions and windows (rxe keeps two
//! pools and tells them apart by index range; one table does the same job). The key byte
//! changes whenever an index is reused, a fast-registration region is registered again or a
//! window is bound again, so a stale key never reaches the new mapping (IBA 10.6.3.6: the
//! consumer owns the key byte of a REG_MR or BIND_MW, see [`inc_rkey`]).
//!
//! Whose keys are whose (C10-?, rxe's `lookup_mr` and `rxe_lookup_mw`): a queue pair reaches
//! only regions and windows of its own protection domain, and a type 2 window only through
//! the queue pair it was bound through. Where rxe is looser, this is stricter and says so:
//! an access through a window is checked against the window's bounds (rxe checks only the
//! region's), and a type 2 window is invalidated only through its own queue pair, a
//! fast-registration region only through one of its protection domain (rxe checks neither).

mod access;
mod region;
#[cfg(test)]
mod tests;
mod window;

use core::ops::Range;

use thiserror::Error;

use super::wr::Sge;
use crate::rng::Rng;
use crate::wire::Qpn;
pub use access::Access;
use access::writes_need_local_write;
use region::rkey_for;
pub use region::{MemoryRegion, MrState};
use window::WINDOW_RIGHTS;
pub use window::{MemoryWindow, MwBind, MwType};

/// A protection domain (IBA 10.2.3): queue pairs reach only the regions and windows of
/// their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PdId(pub u32);

impl PdId {
    /// The domain every engine starts with; what the verbs without a `pd` argument use.
    pub const DEFAULT: PdId = PdId(0);
}

/// `ibv_inc_rkey`: the same index with the next key byte, what a consumer passes to REG_MR
/// or BIND_MW so that the old key stops working.
pub const fn inc_rkey(key: u32) -> u32 {
    (key & !0xff) | (key.wrapping_add(1) & 0xff)
}

/// Who touches memory: a queue pair, by its protection domain and number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accessor {
    /// The queue pair's protection domain.
    pub pd: PdId,
    /// The queue pair (type 2 windows answer only the one they were bound through).
    pub qpn: Qpn,
}

/// Why a memory verb or an access was refused. Nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum MrError {
    /// No region or window has this key.
    #[error("no memory region or window with key {0:#x}")]
    UnknownKey(u32),
    /// The region's key was invalidated, or its fast registration never happened.
    #[error("memory region {0:#x} is not valid (invalidated or never registered)")]
    Invalidated(u32),
    /// The range lies (partly) outside what the key maps.
    #[error("key {key:#x}: {len} bytes at {va:#x} are outside what it maps")]
    OutOfBounds {
        /// The L_Key or R_Key.
        key: u32,
        /// The range's start.
        va: u64,
        /// The range's length.
        len: u64,
    },
    /// The key does not grant the access the operation needs.
    #[error("key {key:#x} lacks the right {need:?}")]
    AccessDenied {
        /// The L_Key or R_Key.
        key: u32,
        /// The missing right.
        need: Access,
    },
    /// Remote write or atomic rights without local write (IBA 10.6.3.1).
    #[error("REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE (IBA 10.6.3.1)")]
    BadRights,
    /// The key is neither a fast-registration region nor a type 2 window.
    #[error("key {0:#x} cannot be invalidated (only fast-registration regions and type 2 windows)")]
    NotInvalidatable(u32),
    /// The scatter/gather list is shorter than the operation's data.
    #[error("the scatter/gather list holds fewer bytes than the operation moves")]
    SgeTooShort,
    /// The chosen key is taken or outside the allowed range.
    #[error("key {0:#x} is in use or out of the range a chosen key may take")]
    KeyUnavailable(u32),
    /// The key belongs to another protection domain than the queue pair's.
    #[error("key {0:#x} belongs to another protection domain")]
    WrongPd(u32),
    /// The type 2 window is bound to another queue pair.
    #[error("memory window {0:#x} is bound to another queue pair")]
    NotOwner(u32),
    /// The region cannot be deregistered while windows are bound to it.
    #[error("memory region {0:#x} has memory windows bound to it")]
    InUse(u32),
    /// The key is in a state that refuses the verb.
    #[error("key {key:#x}: {why}")]
    BadState {
        /// The key.
        key: u32,
        /// Why.
        why: &'static str,
    },
    /// A memory window bind the rules of IBA 10.6.7 refuse.
    #[error("binding memory window {key:#x}: {why}")]
    BadBind {
        /// The window's key.
        key: u32,
        /// Why.
        why: &'static str,
    },
    /// No protection domain has this index.
    #[error("no protection domain {0}")]
    UnknownPd(u32),
    /// The protection domain still holds regions or windows.
    #[error("protection domain {0} still holds regions or windows")]
    PdInUse(u32),
}

/// Bytes of one region, checked: `range` indexes its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    slot: usize,
    range: Range<usize>,
}

impl Span {
    /// The same bytes of the same region.
    pub fn overlaps(&self, other: &Span) -> bool {
        self.slot == other.slot
            && self.range.start < other.range.end
            && other.range.start < self.range.end
    }

    /// Byte offsets inside the region.
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }
}

#[derive(Debug, Clone)]
enum Object {
    Mr(MemoryRegion),
    Mw(MemoryWindow),
}

#[derive(Debug, Clone, Default)]
struct Slot {
    /// The key byte last handed out for this index.
    key_byte: u8,
    obj: Option<Object>,
}

/// The largest index [`MrTable::register_with_key`] accepts (keys below 2^24).
pub const MAX_CHOSEN_SLOT: usize = 0xffff;

/// Every region and window of an engine, found by key in constant time, and its protection
/// domains.
#[derive(Debug, Clone, Default)]
pub struct MrTable {
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// Draws key bytes when seeded (rxe draws them at random so that an off-path sender
    /// cannot guess a key); without a seed they count from 1.
    keys: Option<Rng>,
    /// Allocated protection domains (index = `PdId`); the default one always is.
    pds: Vec<bool>,
}

impl MrTable {
    /// An empty table with the default protection domain; `seed` draws the key bytes.
    pub fn new(seed: Option<u64>) -> MrTable {
        MrTable {
            keys: seed.map(|s| Rng::new(s ^ 0x6b65_7973)),
            pds: vec![true],
            ..MrTable::default()
        }
    }

    // ---- protection domains ----

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&mut self) -> PdId {
        if self.pds.is_empty() {
            self.pds.push(true);
        }
        match self.pds.iter().position(|&used| !used) {
            Some(i) => {
                self.pds[i] = true;
                PdId(i as u32)
            }
            None => {
                self.pds.push(true);
                PdId(self.pds.len() as u32 - 1)
            }
        }
    }

    /// The domain exists.
    pub fn has_pd(&self, pd: PdId) -> bool {
        pd == PdId::DEFAULT || self.pds.get(pd.0 as usize).copied().unwrap_or(false)
    }

    /// `ibv_dealloc_pd`: refused while a region or window uses it (the engine checks its
    /// queue pairs and shared receive queues first).
    pub fn dealloc_pd(&mut self, pd: PdId) -> Result<(), MrError> {
        if pd == PdId::DEFAULT || !self.has_pd(pd) {
            return Err(MrError::UnknownPd(pd.0));
        }
        let used = self.slots.iter().any(|s| match &s.obj {
            Some(Object::Mr(mr)) => mr.pd == pd,
            Some(Object::Mw(mw)) => mw.pd == pd,
            None => false,
        });
        if used {
            return Err(MrError::PdInUse(pd.0));
        }
        self.pds[pd.0 as usize] = false;
        Ok(())
    }

    fn check_pd(&self, pd: PdId) -> Result<(), MrError> {
        if self.has_pd(pd) {
            Ok(())
        } else {
            Err(MrError::UnknownPd(pd.0))
        }
    }

    // ---- creating and removing ----

    /// A new key byte for a slot whose last one was `prev`: never `prev` again, never a
    /// whole key of 0 (rxe's "no R_Key").
    fn next_byte(&mut self, index: usize, prev: u8) -> u8 {
        loop {
            let step = self.keys.as_mut().map_or(1, |rng| 1 + rng.below(255) as u8);
            let byte = prev.wrapping_add(step);
            if index != 0 || byte != 0 {
                return byte;
            }
        }
    }

    /// Takes a free index and gives it a fresh key.
    fn new_key(&mut self) -> (usize, u32) {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        let byte = self.next_byte(index, self.slots[index].key_byte);
        self.slots[index].key_byte = byte;
        (index, ((index as u32) << 8) | u32::from(byte))
    }

    /// `ibv_reg_mr`: registers `data` as seen at `va..va + data.len()`; returns its L_Key
    /// (also its R_Key when `access` grants a remote right).
    pub fn register(
        &mut self,
        pd: PdId,
        va: u64,
        data: Vec<u8>,
        access: Access,
    ) -> Result<u32, MrError> {
        self.check_pd(pd)?;
        check_registration(va, data.len() as u64, access)?;
        let (index, key) = self.new_key();
        self.slots[index].obj = Some(Object::Mr(MemoryRegion::user(key, pd, va, data, access)));
        Ok(key)
    }

    /// Registers under a chosen key, to replay a capture whose requests carry a peer's
    /// R_Keys. Keys whose index (`key >> 8`) exceeds [`MAX_CHOSEN_SLOT`] are refused, so that
    /// the table stays small.
    pub fn register_with_key(
        &mut self,
        pd: PdId,
        key: u32,
        va: u64,
        data: Vec<u8>,
        access: Access,
    ) -> Result<(), MrError> {
        self.check_pd(pd)?;
        check_registration(va, data.len() as u64, access)?;
        let index = (key >> 8) as usize;
        if index > MAX_CHOSEN_SLOT || key == 0 {
            return Err(MrError::KeyUnavailable(key));
        }
        while self.slots.len() <= index {
            self.free.push(self.slots.len());
            self.slots.push(Slot::default());
        }
        if self.slots[index].obj.is_some() {
            return Err(MrError::KeyUnavailable(key));
        }
        self.free.retain(|&i| i != index);
        let slot = &mut self.slots[index];
        slot.key_byte = key as u8;
        slot.obj = Some(Object::Mr(MemoryRegion::user(key, pd, va, data, access)));
        Ok(())
    }

    /// `ib_alloc_mr(IB_MR_TYPE_MEM_REG)`: a fast-registration region owning `capacity`
    /// bytes, free until a REG_MR work request maps them; returns its key.
    pub fn alloc_fast(&mut self, pd: PdId, capacity: usize) -> Result<u32, MrError> {
        self.check_pd(pd)?;
        let (index, key) = self.new_key();
        self.slots[index].obj = Some(Object::Mr(MemoryRegion::fast(key, pd, capacity)));
        Ok(key)
    }

    /// `ibv_alloc_mw`: a window, unbound; returns its R_Key.
    pub fn alloc_window(&mut self, pd: PdId, kind: MwType) -> Result<u32, MrError> {
        self.check_pd(pd)?;
        let (index, key) = self.new_key();
        self.slots[index].obj = Some(Object::Mw(MemoryWindow::new(key, pd, kind)));
        Ok(key)
    }

    /// `ibv_dereg_mr`: removes the region its L_Key names and hands its bytes back; refused
    /// while windows are bound to it (rxe).
    pub fn deregister(&mut self, key: u32) -> Result<Vec<u8>, MrError> {
        let index = self.mr_index(key)?;
        if let Some(Object::Mr(mr)) = &self.slots[index].obj
            && mr.windows > 0
        {
            return Err(MrError::InUse(key));
        }
        let Some(Object::Mr(mr)) = self.slots[index].obj.take() else {
            return Err(MrError::UnknownKey(key));
        };
        self.free.push(index);
        Ok(mr.data)
    }

    /// `ibv_dealloc_mw`: a bound window lets go of its region first.
    pub fn dealloc_window(&mut self, key: u32) -> Result<(), MrError> {
        let index = self.mw_index(key)?;
        let Some(Object::Mw(mw)) = self.slots[index].obj.take() else {
            return Err(MrError::UnknownKey(key));
        };
        self.release(mw.mr);
        self.free.push(index);
        Ok(())
    }

    /// A window stops pointing at region slot `mr`.
    fn release(&mut self, mr: Option<usize>) {
        if let Some(Some(Object::Mr(mr))) = mr.map(|i| &mut self.slots[i].obj) {
            mr.windows = mr.windows.saturating_sub(1);
        }
    }

    // ---- finding ----

    /// The index of the region whose L_Key or R_Key is `key`.
    fn mr_index(&self, key: u32) -> Result<usize, MrError> {
        let index = (key >> 8) as usize;
        match self.slots.get(index).and_then(|s| s.obj.as_ref()) {
            Some(Object::Mr(mr)) if key != 0 && (mr.lkey == key || mr.rkey == key) => Ok(index),
            _ => Err(MrError::UnknownKey(key)),
        }
    }

    /// The index of the window whose R_Key is `key`.
    fn mw_index(&self, key: u32) -> Result<usize, MrError> {
        let index = (key >> 8) as usize;
        match self.slots.get(index).and_then(|s| s.obj.as_ref()) {
            Some(Object::Mw(mw)) if mw.rkey == key => Ok(index),
            _ => Err(MrError::UnknownKey(key)),
        }
    }

    fn mr_at(&self, index: usize) -> Option<&MemoryRegion> {
        match self.slots.get(index)?.obj.as_ref()? {
            Object::Mr(mr) => Some(mr),
            Object::Mw(_) => None,
        }
    }

    fn mr_at_mut(&mut self, index: usize) -> Option<&mut MemoryRegion> {
        match self.slots.get_mut(index)?.obj.as_mut()? {
            Object::Mr(mr) => Some(mr),
            Object::Mw(_) => None,
        }
    }

    fn mw_at_mut(&mut self, index: usize) -> Option<&mut MemoryWindow> {
        match self.slots.get_mut(index)?.obj.as_mut()? {
            Object::Mw(mw) => Some(mw),
            Object::Mr(_) => None,
        }
    }

    /// The region `key` (its L_Key or R_Key) names.
    pub fn get(&self, key: u32) -> Option<&MemoryRegion> {
        self.mr_at(self.mr_index(key).ok()?)
    }

    /// The region `key` names, to fill or read between operations.
    pub fn get_mut(&mut self, key: u32) -> Option<&mut MemoryRegion> {
        let index = self.mr_index(key).ok()?;
        self.mr_at_mut(index)
    }

    /// The window `key` names.
    pub fn window(&self, key: u32) -> Option<&MemoryWindow> {
        match self.slots.get(self.mw_index(key).ok()?)?.obj.as_ref()? {
            Object::Mw(mw) => Some(mw),
            Object::Mr(_) => None,
        }
    }

    // ---- checked access ----

    /// A local access (a scatter/gather entry) through an L_Key, IBA 10.6.3 and rxe's
    /// `lookup_mr(RXE_LOOKUP_LOCAL)`: a region (never a window) of the domain, valid, with
    /// the rights, holding the bytes. A zero-length access checks nothing.
    pub fn local(
        &self,
        pd: PdId,
        key: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<Option<Span>, MrError> {
        if len == 0 {
            return Ok(None);
        }
        let index = (key >> 8) as usize;
        let mr = match self.slots.get(index).and_then(|s| s.obj.as_ref()) {
            Some(Object::Mr(mr)) if mr.lkey == key => mr,
            _ => return Err(MrError::UnknownKey(key)),
        };
        region_checks(mr, pd, key, need)?;
        let range = mr
            .range(va, len)
            .ok_or(MrError::OutOfBounds { key, va, len })?;
        Ok(Some(Span { slot: index, range }))
    }

    /// The region slot and, through a window, the window that an R_Key reaches, once the
    /// key, domain, owner, state and rights agree (rxe's `check_rkey`).
    fn remote_target(
        &self,
        who: Accessor,
        key: u32,
        need: Access,
    ) -> Result<(usize, Option<&MemoryWindow>), MrError> {
        let index = (key >> 8) as usize;
        match self.slots.get(index).and_then(|s| s.obj.as_ref()) {
            Some(Object::Mr(mr)) if key != 0 && mr.rkey == key => {
                region_checks(mr, who.pd, key, need)?;
                Ok((index, None))
            }
            Some(Object::Mw(mw)) if mw.rkey == key => {
                if mw.pd != who.pd {
                    return Err(MrError::WrongPd(key));
                }
                if mw.kind == MwType::Type2 && mw.qpn.is_some_and(|q| q != who.qpn) {
                    return Err(MrError::NotOwner(key));
                }
                let Some(mr_index) = mw.mr.filter(|_| mw.length > 0) else {
                    return Err(MrError::Invalidated(key));
                };
                if !mw.access.contains(need) {
                    return Err(MrError::AccessDenied { key, need });
                }
                match self.mr_at(mr_index) {
                    Some(mr) if mr.state == MrState::Valid => Ok((mr_index, Some(mw))),
                    _ => Err(MrError::Invalidated(key)),
                }
            }
            _ => Err(MrError::UnknownKey(key)),
        }
    }

    /// A remote access through an R_Key (a region's or a bound window's) for `len` bytes at
    /// `va`, needing `need`. A zero-length access checks nothing (C9-88).
    pub fn remote(
        &self,
        who: Accessor,
        key: u32,
        (va, len): (u64, u64),
        need: Access,
    ) -> Result<Option<Span>, MrError> {
        if len == 0 {
            return Ok(None);
        }
        let (index, window) = self.remote_target(who, key, need)?;
        let outside = MrError::OutOfBounds { key, va, len };
        let at = match window {
            Some(mw) => mw.locate(va, len).ok_or(outside)?,
            None => va,
        };
        let range = self
            .mr_at(index)
            .and_then(|mr| mr.range(at, len))
            .ok_or(outside)?;
        Ok(Some(Span { slot: index, range }))
    }

    /// Checks an R_Key and its rights alone, not a range (FLUSH of a whole region, IBA 1.5
    /// A19 selectivity level "memory region", or of zero bytes).
    pub fn remote_key(&self, who: Accessor, key: u32, need: Access) -> Result<(), MrError> {
        self.remote_target(who, key, need).map(|_| ())
    }

    /// The bytes of a checked span.
    pub fn slice(&self, span: &Span) -> &[u8] {
        match self.mr_at(span.slot) {
            Some(mr) => mr.data.get(span.range.clone()).unwrap_or(&[]),
            None => &[],
        }
    }

    /// The bytes of a checked span, to write.
    pub fn slice_mut(&mut self, span: &Span) -> &mut [u8] {
        match self.mr_at_mut(span.slot) {
            Some(mr) => mr.data.get_mut(span.range.clone()).unwrap_or(&mut []),
            None => &mut [],
        }
    }

    /// The bytes of a checked remote read.
    pub fn read_remote(
        &self,
        who: Accessor,
        key: u32,
        (va, len): (u64, u64),
        need: Access,
    ) -> Result<&[u8], MrError> {
        Ok(match self.remote(who, key, (va, len), need)? {
            Some(span) => self.slice(&span),
            None => &[],
        })
    }

    /// Checks every entry of a scatter/gather list; returns the total length.
    pub fn check_sges(&self, pd: PdId, sges: &[Sge], need: Access) -> Result<u64, MrError> {
        let mut total = 0u64;
        for sge in sges {
            self.local(pd, sge.lkey, sge.addr, u64::from(sge.length), need)?;
            total = total.saturating_add(u64::from(sge.length));
        }
        Ok(total)
    }

    /// The spans a scatter/gather list covers (each entry checked for `need`).
    pub fn sge_spans(&self, pd: PdId, sges: &[Sge], need: Access) -> Vec<Span> {
        sges.iter()
            .filter_map(|s| {
                self.local(pd, s.lkey, s.addr, u64::from(s.length), need)
                    .ok()
                    .flatten()
            })
            .collect()
    }

    /// Copies bytes `offset..offset + out.len()` of the message an SGE list describes into
    /// `out` (the requester's gather).
    pub fn gather(
        &self,
        pd: PdId,
        sges: &[Sge],
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), MrError> {
        let mut done = 0;
        for (sge, skip, take) in pieces(sges, offset, out.len() as u64) {
            if let Some(span) = self.local(pd, sge.lkey, sge.addr + skip, take, Access::NONE)? {
                let src = self.slice(&span);
                out[done..done + src.len()].copy_from_slice(src);
                done += src.len();
            }
        }
        if done == out.len() {
            Ok(())
        } else {
            Err(MrError::SgeTooShort)
        }
    }

    /// Writes `data` at byte `offset` of the message an SGE list describes (the scatter of a
    /// receive or a READ response); needs LOCAL_WRITE on every region touched.
    pub fn scatter(
        &mut self,
        pd: PdId,
        sges: &[Sge],
        offset: u64,
        data: &[u8],
    ) -> Result<(), MrError> {
        let mut done = 0;
        for (sge, skip, take) in pieces(sges, offset, data.len() as u64) {
            let at = sge.addr + skip;
            if let Some(span) = self.local(pd, sge.lkey, at, take, Access::LOCAL_WRITE)? {
                let dst = self.slice_mut(&span);
                let n = dst.len();
                dst.copy_from_slice(&data[done..done + n]);
                done += n;
            }
        }
        if done == data.len() {
            Ok(())
        } else {
            Err(MrError::SgeTooShort)
        }
    }

    // ---- the memory work requests ----

    /// Invalidates `key` for LOCAL_INV or a SEND with Invalidate arriving on queue pair
    /// `who` (IBA 10.6.3.7, 10.6.7.2.4; rxe's `rxe_invalidate_mr` / `rxe_invalidate_mw`):
    /// a fast-registration region of the domain with no window bound becomes free; a type 2
    /// window bound through `who` is unbound. Anything else is refused.
    pub fn invalidate(&mut self, who: Accessor, key: u32) -> Result<(), MrError> {
        let index = (key >> 8) as usize;
        match self.slots.get_mut(index).and_then(|s| s.obj.as_mut()) {
            Some(Object::Mr(mr)) => {
                let own = if mr.access.intersects(Access::REMOTE) {
                    mr.rkey
                } else {
                    mr.lkey
                };
                if key != own {
                    return Err(MrError::UnknownKey(key));
                }
                if !mr.fast {
                    return Err(MrError::NotInvalidatable(key));
                }
                if mr.pd != who.pd {
                    return Err(MrError::WrongPd(key));
                }
                if mr.windows > 0 {
                    return Err(MrError::InUse(key));
                }
                mr.state = MrState::Free;
                Ok(())
            }
            Some(Object::Mw(mw)) if mw.rkey == key => {
                if mw.kind == MwType::Type1 {
                    return Err(MrError::NotInvalidatable(key));
                }
                if mw.pd != who.pd {
                    return Err(MrError::WrongPd(key));
                }
                let Some(qpn) = mw.qpn else {
                    return Err(MrError::BadState {
                        key,
                        why: "the window is not bound",
                    });
                };
                if qpn != who.qpn {
                    return Err(MrError::NotOwner(key));
                }
                let mr = mw.mr.take();
                *mw = MemoryWindow::new(mw.rkey, mw.pd, mw.kind);
                self.release(mr);
                Ok(())
            }
            _ => Err(MrError::UnknownKey(key)),
        }
    }

    /// A REG_MR work request on queue pair `who` (IBA 10.6.3.6; rxe's `rxe_reg_fast_mr`):
    /// region `mr_key` must be a free fast-registration region of the queue pair's domain;
    /// `new_key` may change only the key byte. Maps its first `len` bytes at `va` with
    /// `access`.
    pub fn fast_register(
        &mut self,
        who: Accessor,
        mr_key: u32,
        new_key: u32,
        (va, len): (u64, u64),
        access: Access,
    ) -> Result<(), MrError> {
        let index = (mr_key >> 8) as usize;
        let Some(Object::Mr(mr)) = self.slots.get_mut(index).and_then(|s| s.obj.as_mut()) else {
            return Err(MrError::UnknownKey(mr_key));
        };
        if mr.lkey != mr_key {
            return Err(MrError::UnknownKey(mr_key));
        }
        if !mr.fast {
            return Err(MrError::BadState {
                key: mr_key,
                why: "not a fast-registration region",
            });
        }
        if mr.state != MrState::Free {
            return Err(MrError::BadState {
                key: mr_key,
                why: "the region is registered (invalidate it first)",
            });
        }
        if mr.pd != who.pd {
            return Err(MrError::WrongPd(mr_key));
        }
        if new_key >> 8 != mr_key >> 8 || new_key == 0 {
            return Err(MrError::KeyUnavailable(new_key));
        }
        if len > mr.data.len() as u64 || va.checked_add(len).is_none() {
            return Err(MrError::OutOfBounds {
                key: mr_key,
                va,
                len,
            });
        }
        check_registration(va, len, access)?;
        mr.lkey = new_key;
        mr.rkey = rkey_for(new_key, access);
        mr.va = va;
        mr.len = len;
        mr.access = access;
        mr.state = MrState::Valid;
        self.slots[index].key_byte = new_key as u8;
        Ok(())
    }

    /// A BIND_MW work request on queue pair `who` (IBA 10.6.7.2; rxe's `rxe_bind_mw` and its
    /// C10-72..75 checks): binds window `mw_key` under `new_key`'s key byte; returns the
    /// window's new R_Key.
    pub fn bind(
        &mut self,
        who: Accessor,
        mw_key: u32,
        new_key: u32,
        bind: &MwBind,
    ) -> Result<u32, MrError> {
        let bad = |why| MrError::BadBind { key: mw_key, why };
        let mw_index = self.mw_index(mw_key)?;
        let Some(Object::Mw(mw)) = self.slots[mw_index].obj.clone() else {
            return Err(MrError::UnknownKey(mw_key));
        };
        if new_key >> 8 != mw_key >> 8 {
            return Err(bad("the new key names another window"));
        }
        if !WINDOW_RIGHTS.contains(bind.access) {
            return Err(bad("rights a window cannot carry"));
        }
        if mw.pd != who.pd {
            return Err(bad(
                "the queue pair is in another protection domain (C10-72)",
            ));
        }
        let zero_based = bind.access.contains(Access::ZERO_BASED);
        match mw.kind {
            MwType::Type1 if zero_based => return Err(bad("a type 1 window is never zero based")),
            MwType::Type2 if mw.qpn.is_some() => {
                return Err(bad(
                    "a type 2 window must be invalidated before binding again",
                ));
            }
            MwType::Type2 if bind.length == 0 => {
                return Err(bad("a type 2 window cannot be bound with zero length"));
            }
            _ => {}
        }
        let mr_index = if bind.length > 0 {
            let index = self
                .mr_index(bind.mr_lkey)
                .map_err(|_| bad("no such region"))?;
            let Some(mr) = self.mr_at(index).filter(|mr| mr.lkey == bind.mr_lkey) else {
                return Err(bad("no such region"));
            };
            if mr.pd != mw.pd {
                return Err(bad("the region is in another protection domain"));
            }
            if mr.state != MrState::Valid {
                return Err(bad("the region is not valid"));
            }
            if !mr.access.contains(Access::MW_BIND) {
                return Err(bad("the region lacks the MW_BIND right (C10-73)"));
            }
            let writes = Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
            if bind.access.intersects(writes) && !mr.access.contains(Access::LOCAL_WRITE) {
                return Err(bad(
                    "a writable window needs LOCAL_WRITE on its region (C10-74)",
                ));
            }
            // A zero-based window still starts at a virtual address of its region; only
            // the peer's addresses count from 0.
            if mr.range(bind.addr, bind.length).is_none() {
                return Err(bad("the window reaches outside its region (C10-75)"));
            }
            Some(index)
        } else {
            None
        };
        self.release(mw.mr);
        if let Some(Some(Object::Mr(mr))) = mr_index.map(|i| &mut self.slots[i].obj) {
            mr.windows += 1;
        }
        let rkey = (mw.rkey & !0xff) | (new_key & 0xff);
        let Some(w) = self.mw_at_mut(mw_index) else {
            return Err(MrError::UnknownKey(mw_key));
        };
        w.rkey = rkey;
        w.mr = mr_index;
        w.addr = bind.addr;
        w.length = bind.length;
        w.access = bind.access;
        w.qpn = (mw.kind == MwType::Type2).then_some(who.qpn);
        self.slots[mw_index].key_byte = rkey as u8;
        Ok(rkey)
    }
}

/// The checks a region makes on any key use (rxe's `lookup_mr`): its domain, its state,
/// its rights.
fn region_checks(mr: &MemoryRegion, pd: PdId, key: u32, need: Access) -> Result<(), MrError> {
    if mr.pd != pd {
        return Err(MrError::WrongPd(key));
    }
    if mr.state != MrState::Valid {
        return Err(MrError::Invalidated(key));
    }
    if !mr.access.contains(need) {
        return Err(MrError::AccessDenied { key, need });
    }
    Ok(())
}

/// IBA 10.6.3.1: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE; the range must not wrap.
fn check_registration(va: u64, len: u64, access: Access) -> Result<(), MrError> {
    if !writes_need_local_write(access) {
        return Err(MrError::BadRights);
    }
    if va.checked_add(len).is_none() {
        return Err(MrError::OutOfBounds { key: 0, va, len });
    }
    Ok(())
}

/// The parts of each SGE that bytes `offset..offset + len` of the message cover:
/// `(sge, bytes to skip inside it, bytes to take)`.
fn pieces(sges: &[Sge], offset: u64, len: u64) -> impl Iterator<Item = (&Sge, u64, u64)> {
    let mut skip = offset;
    let mut left = len;
    sges.iter().filter_map(move |sge| {
        let sge_len = u64::from(sge.length);
        if left == 0 {
            return None;
        }
        if skip >= sge_len {
            skip -= sge_len;
            return None;
        }
        let take = (sge_len - skip).min(left);
        let piece = (sge, skip, take);
        skip = 0;
        left -= take;
        Some(piece)
    })
}
