//! Memory regions (IBA 10.6): registered byte ranges the engine owns, addressed by a virtual
//! address and guarded by a key and access rights.
//!
//! The engine owns each region's bytes, so every access from the wire goes through the checks
//! here and no write can land outside a region: an address range is turned into a slice index
//! only after the key, the region's state, the bounds and the rights agree. The endpoint reads
//! and writes a region's bytes between operations through [`MemoryRegion::bytes`] and
//! [`MemoryRegion::bytes_mut`].
//!
//! One key serves as both L_Key and R_Key (as in rdma_rxe); whether it may be used from the
//! wire is decided by the REMOTE_* rights. There is one protection domain per engine.

use core::fmt;
use core::ops::Range;

use thiserror::Error;

use super::wr::Sge;
use crate::rng::Rng;

/// Access rights of a memory region or of a queue pair (IBA 10.6.3.1, `ibv_access_flags`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    pub const NONE: Access = Access(0);
    pub const LOCAL_WRITE: Access = Access(1);
    pub const REMOTE_WRITE: Access = Access(2);
    pub const REMOTE_READ: Access = Access(4);
    pub const REMOTE_ATOMIC: Access = Access(8);
    pub const ALL: Access = Access(15);

    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }

    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Keeps the four defined bits.
    pub const fn from_bits_truncate(bits: u8) -> Access {
        Access(bits & Self::ALL.0)
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        self.union(rhs)
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Access::LOCAL_WRITE, "LOCAL_WRITE"),
            (Access::REMOTE_WRITE, "REMOTE_WRITE"),
            (Access::REMOTE_READ, "REMOTE_READ"),
            (Access::REMOTE_ATOMIC, "REMOTE_ATOMIC"),
        ];
        let mut set = f.debug_set();
        for (flag, name) in names {
            if self.contains(flag) {
                set.entry(&format_args!("{name}"));
            }
        }
        set.finish()
    }
}

/// Why an access to a memory region was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum MrError {
    #[error("no memory region with key {0:#x}")]
    UnknownKey(u32),
    #[error("memory region {0:#x} was invalidated")]
    Invalidated(u32),
    #[error("memory region {key:#x}: {len} bytes at {va:#x} are outside the region")]
    OutOfBounds { key: u32, va: u64, len: u64 },
    #[error("memory region {key:#x} lacks the right {need:?}")]
    AccessDenied { key: u32, need: Access },
    #[error("REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE (IBA 10.6.3.1)")]
    BadRights,
    #[error("memory region {0:#x} cannot be invalidated remotely")]
    NotInvalidatable(u32),
    #[error("the scatter/gather list holds fewer bytes than the operation moves")]
    SgeTooShort,
    #[error("key {0:#x} is in use or out of the range a chosen key may take")]
    KeyUnavailable(u32),
}

/// A registered region: `len` bytes seen at virtual addresses `va..va + len`.
#[derive(Debug, Clone)]
pub struct MemoryRegion {
    key: u32,
    va: u64,
    access: Access,
    data: Vec<u8>,
    valid: bool,
    remote_invalidate: bool,
}

/// The largest slot [`MrTable::register_with_key`] accepts (keys below 2^24).
pub const MAX_CHOSEN_SLOT: usize = 0xffff;

/// IBA 10.6.3.1: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE; the range must not wrap.
fn check_registration(va: u64, data: &[u8], access: Access) -> Result<(), MrError> {
    let remote_writes = Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    if access.0 & remote_writes.0 != 0 && !access.contains(Access::LOCAL_WRITE) {
        return Err(MrError::BadRights);
    }
    if va.checked_add(data.len() as u64).is_none() {
        return Err(MrError::OutOfBounds {
            key: 0,
            va,
            len: data.len() as u64,
        });
    }
    Ok(())
}

impl MemoryRegion {
    fn new(key: u32, va: u64, data: Vec<u8>, access: Access) -> MemoryRegion {
        MemoryRegion {
            key,
            va,
            access,
            data,
            valid: true,
            remote_invalidate: false,
        }
    }

    pub fn lkey(&self) -> u32 {
        self.key
    }
    pub fn rkey(&self) -> u32 {
        self.key
    }
    pub fn va(&self) -> u64 {
        self.va
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn access(&self) -> Access {
        self.access
    }
    /// False after a SEND with Invalidate named this region's key, until [`Self::revalidate`].
    pub fn is_valid(&self) -> bool {
        self.valid
    }
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
    /// Lets a peer's SEND with Invalidate invalidate this key, as for a fast-registered MR or
    /// a type 2 memory window (IBA 10.6.7); plain regions refuse it.
    pub fn set_remote_invalidate(&mut self, allow: bool) {
        self.remote_invalidate = allow;
    }
    /// Makes an invalidated region usable again (what a new fast registration does).
    pub fn revalidate(&mut self) {
        self.valid = true;
    }

    /// The slice index of `len` bytes at `va`, if they lie inside the region.
    fn range(&self, va: u64, len: u64) -> Option<Range<usize>> {
        let start = va.checked_sub(self.va)?;
        let end = start.checked_add(len)?;
        if end > self.data.len() as u64 {
            return None;
        }
        Some(start as usize..end as usize)
    }
}

#[derive(Debug, Clone, Default)]
struct Slot {
    generation: u8,
    mr: Option<MemoryRegion>,
}

/// The engine's memory regions, found by key in constant time.
///
/// A key is `slot << 8 | key byte`: reusing a slot changes the key byte, so a stale key held
/// by a peer never reaches the new region. With a seed the key byte is drawn at random (as
/// rxe's `rxe_get_next_key`), so that an off-path sender cannot guess a key; without one it
/// counts from 1.
#[derive(Debug, Clone, Default)]
pub struct MrTable {
    slots: Vec<Slot>,
    free: Vec<usize>,
    keys: Option<Rng>,
}

impl MrTable {
    /// An empty table; `seed` draws the key bytes (see above).
    pub fn new(seed: Option<u64>) -> MrTable {
        MrTable {
            keys: seed.map(|s| Rng::new(s ^ 0x6b65_7973)),
            ..MrTable::default()
        }
    }

    pub fn register(&mut self, va: u64, data: Vec<u8>, access: Access) -> Result<u32, MrError> {
        check_registration(va, &data, access)?;
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        // Any byte but the slot's previous one.
        let step = self.keys.as_mut().map_or(1, |rng| 1 + rng.below(255) as u8);
        slot.generation = slot.generation.wrapping_add(step);
        let key = ((index as u32) << 8) | u32::from(slot.generation);
        slot.mr = Some(MemoryRegion::new(key, va, data, access));
        Ok(key)
    }

    /// Registers under a chosen key, to replay a capture whose requests carry a peer's
    /// R_Keys. Keys whose slot (`key >> 8`) exceeds [`MAX_CHOSEN_SLOT`] are refused, so that
    /// the table stays small.
    pub fn register_with_key(
        &mut self,
        key: u32,
        va: u64,
        data: Vec<u8>,
        access: Access,
    ) -> Result<(), MrError> {
        check_registration(va, &data, access)?;
        let index = (key >> 8) as usize;
        if index > MAX_CHOSEN_SLOT {
            return Err(MrError::KeyUnavailable(key));
        }
        while self.slots.len() <= index {
            self.free.push(self.slots.len());
            self.slots.push(Slot::default());
        }
        if self.slots[index].mr.is_some() {
            return Err(MrError::KeyUnavailable(key));
        }
        self.free.retain(|&i| i != index);
        let slot = &mut self.slots[index];
        slot.generation = key as u8;
        slot.mr = Some(MemoryRegion::new(key, va, data, access));
        Ok(())
    }

    /// Removes the region and hands its bytes back.
    pub fn deregister(&mut self, key: u32) -> Result<Vec<u8>, MrError> {
        let index = self.index(key)?;
        let mr = self.slots[index]
            .mr
            .take()
            .ok_or(MrError::UnknownKey(key))?;
        self.free.push(index);
        Ok(mr.data)
    }

    fn index(&self, key: u32) -> Result<usize, MrError> {
        let index = (key >> 8) as usize;
        match self.slots.get(index).and_then(|s| s.mr.as_ref()) {
            Some(mr) if mr.key == key => Ok(index),
            _ => Err(MrError::UnknownKey(key)),
        }
    }

    pub fn get(&self, key: u32) -> Option<&MemoryRegion> {
        let index = self.index(key).ok()?;
        self.slots[index].mr.as_ref()
    }

    pub fn get_mut(&mut self, key: u32) -> Option<&mut MemoryRegion> {
        let index = self.index(key).ok()?;
        self.slots[index].mr.as_mut()
    }

    /// Every check of IBA 10.6.3 (key, state, bounds, rights) for `len` bytes at `va`.
    /// A zero-length access checks nothing, as the spec asks for zero-length RDMA (C9-88).
    fn checked(
        &self,
        key: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<Option<(usize, Range<usize>)>, MrError> {
        if len == 0 {
            return Ok(None);
        }
        let index = self.index(key)?;
        let Some(mr) = self.slots[index].mr.as_ref() else {
            return Err(MrError::UnknownKey(key));
        };
        if !mr.valid {
            return Err(MrError::Invalidated(key));
        }
        if !mr.access.contains(need) {
            return Err(MrError::AccessDenied { key, need });
        }
        let range = mr
            .range(va, len)
            .ok_or(MrError::OutOfBounds { key, va, len })?;
        Ok(Some((index, range)))
    }

    /// Checks an access without performing it.
    pub fn check(&self, key: u32, va: u64, len: u64, need: Access) -> Result<(), MrError> {
        self.checked(key, va, len, need).map(|_| ())
    }

    /// The bytes of a checked read access.
    pub fn read(&self, key: u32, va: u64, len: u64, need: Access) -> Result<&[u8], MrError> {
        Ok(match self.checked(key, va, len, need)? {
            Some((index, range)) => match &self.slots[index].mr {
                Some(mr) => &mr.data[range],
                None => &[],
            },
            None => &[],
        })
    }

    /// The bytes of a checked write access.
    pub fn write(
        &mut self,
        key: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<&mut [u8], MrError> {
        Ok(match self.checked(key, va, len, need)? {
            Some((index, range)) => match &mut self.slots[index].mr {
                Some(mr) => &mut mr.data[range],
                None => &mut [],
            },
            None => &mut [],
        })
    }

    /// Invalidates `key` for a SEND with Invalidate (IBA 9.4.2.1 / 10.6.7).
    pub fn invalidate_remote(&mut self, key: u32) -> Result<(), MrError> {
        let mr = self.get_mut(key).ok_or(MrError::UnknownKey(key))?;
        if !mr.remote_invalidate {
            return Err(MrError::NotInvalidatable(key));
        }
        mr.valid = false;
        Ok(())
    }

    /// Checks every entry of a scatter/gather list; returns the total length.
    pub fn check_sges(&self, sges: &[Sge], need: Access) -> Result<u64, MrError> {
        let mut total = 0u64;
        for sge in sges {
            self.check(sge.lkey, sge.addr, u64::from(sge.length), need)?;
            total = total.saturating_add(u64::from(sge.length));
        }
        Ok(total)
    }

    /// Copies bytes `offset..offset + out.len()` of the message an SGE list describes into
    /// `out` (the requester's gather).
    pub fn gather(&self, sges: &[Sge], offset: u64, out: &mut [u8]) -> Result<(), MrError> {
        let mut done = 0;
        for (sge, skip, take) in pieces(sges, offset, out.len() as u64) {
            let src = self.read(sge.lkey, sge.addr + skip, take, Access::NONE)?;
            out[done..done + src.len()].copy_from_slice(src);
            done += src.len();
        }
        if done == out.len() {
            Ok(())
        } else {
            Err(MrError::SgeTooShort)
        }
    }

    /// Writes `data` at byte `offset` of the message an SGE list describes (the scatter of a
    /// receive or a READ response); needs LOCAL_WRITE on every region touched.
    pub fn scatter(&mut self, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), MrError> {
        let mut done = 0;
        for (sge, skip, take) in pieces(sges, offset, data.len() as u64) {
            let dst = self.write(sge.lkey, sge.addr + skip, take, Access::LOCAL_WRITE)?;
            let n = dst.len();
            dst.copy_from_slice(&data[done..done + n]);
            done += n;
        }
        if done == data.len() {
            Ok(())
        } else {
            Err(MrError::SgeTooShort)
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (MrTable, u32) {
        let mut t = MrTable::default();
        let key = t
            .register(
                0x1000,
                vec![0; 64],
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )
            .unwrap();
        (t, key)
    }

    #[test]
    fn bounds_and_rights() {
        let (mut t, key) = table();
        assert!(t.write(key, 0x1000, 64, Access::REMOTE_WRITE).is_ok());
        assert_eq!(
            t.write(key, 0x1001, 64, Access::REMOTE_WRITE),
            Err(MrError::OutOfBounds {
                key,
                va: 0x1001,
                len: 64
            })
        );
        assert!(t.write(key, 0xfff, 1, Access::REMOTE_WRITE).is_err());
        assert!(t.write(key, u64::MAX, 2, Access::REMOTE_WRITE).is_err());
        assert_eq!(
            t.read(key, 0x1000, 1, Access::REMOTE_READ),
            Err(MrError::AccessDenied {
                key,
                need: Access::REMOTE_READ
            })
        );
        assert_eq!(
            t.read(key + 1, 0x1000, 1, Access::NONE),
            Err(MrError::UnknownKey(key + 1))
        );
        assert_eq!(
            t.read(999, 0, 0, Access::REMOTE_READ),
            Ok(&[][..]),
            "zero length checks nothing"
        );
    }

    #[test]
    fn remote_write_needs_local_write() {
        let mut t = MrTable::default();
        assert_eq!(
            t.register(0, vec![0; 8], Access::REMOTE_WRITE),
            Err(MrError::BadRights)
        );
        assert!(t.register(0, vec![0; 8], Access::REMOTE_READ).is_ok());
    }

    #[test]
    fn stale_key_after_reuse() {
        let (mut t, key) = table();
        t.deregister(key).unwrap();
        let again = t.register(0x1000, vec![0; 64], Access::ALL).unwrap();
        assert_ne!(key, again);
        assert!(t.get(key).is_none());
    }

    #[test]
    fn gather_and_scatter_cross_sges() {
        let mut t = MrTable::default();
        let a = t
            .register(0, (0..10).collect(), Access::LOCAL_WRITE)
            .unwrap();
        let b = t
            .register(100, (10..20).collect(), Access::LOCAL_WRITE)
            .unwrap();
        let sges = [
            Sge {
                addr: 2,
                length: 8,
                lkey: a,
            },
            Sge {
                addr: 100,
                length: 10,
                lkey: b,
            },
        ];
        let mut out = [0u8; 6];
        t.gather(&sges, 5, &mut out).unwrap();
        assert_eq!(out, [7, 8, 9, 10, 11, 12]);
        t.scatter(&sges, 6, &[0xaa; 4]).unwrap();
        assert_eq!(&t.get(a).unwrap().bytes()[8..], &[0xaa, 0xaa]);
        assert_eq!(&t.get(b).unwrap().bytes()[..3], &[0xaa, 0xaa, 12]);
        assert_eq!(t.scatter(&sges, 17, &[0; 2]), Err(MrError::SgeTooShort));
    }

    #[test]
    fn chosen_keys() {
        let mut t = MrTable::default();
        t.register_with_key(0x298, 0x1000, vec![7; 16], Access::ALL)
            .unwrap();
        assert_eq!(
            t.read(0x298, 0x1000, 16, Access::REMOTE_READ).unwrap(),
            &[7; 16]
        );
        assert_eq!(
            t.register_with_key(0x298, 0, vec![], Access::NONE),
            Err(MrError::KeyUnavailable(0x298))
        );
        assert!(
            t.register_with_key(0xffff_ff00, 0, vec![], Access::NONE)
                .is_err()
        );
        let other = t.register(0, vec![0; 4], Access::NONE).unwrap();
        assert_ne!(other >> 8, 2, "the chosen slot is not handed out again");
        t.deregister(0x298).unwrap();
        assert!(t.get(0x298).is_none());
    }

    #[test]
    fn invalidation() {
        let (mut t, key) = table();
        assert_eq!(
            t.invalidate_remote(key),
            Err(MrError::NotInvalidatable(key))
        );
        t.get_mut(key).unwrap().set_remote_invalidate(true);
        t.invalidate_remote(key).unwrap();
        assert_eq!(
            t.check(key, 0x1000, 1, Access::NONE),
            Err(MrError::Invalidated(key))
        );
        t.get_mut(key).unwrap().revalidate();
        assert!(t.check(key, 0x1000, 1, Access::NONE).is_ok());
    }
}
