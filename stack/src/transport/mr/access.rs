//! Access rights of memory regions, memory windows and queue pairs (IBA 10.6.3.1, 10.6.7;
//! the bit values of libibverbs' `ibv_access_flags`, so that they can cross an exchange).

use core::fmt;

/// A set of access rights.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u16);

impl Access {
    /// No right: the region is only read by the local requester (what a SEND gathers).
    pub const NONE: Access = Access(0);
    /// The local HCA may write the region (receives, READ responses, atomic results).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Peers may RDMA WRITE (and ATOMIC WRITE) into it.
    pub const REMOTE_WRITE: Access = Access(2);
    /// Peers may RDMA READ from it.
    pub const REMOTE_READ: Access = Access(4);
    /// Peers may run atomic operations on it.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// Memory windows may be bound to the region (C10-73).
    pub const MW_BIND: Access = Access(16);
    /// A window's addresses count from its start instead of being virtual addresses.
    pub const ZERO_BASED: Access = Access(32);
    /// Peers may FLUSH it to global visibility (IBA 1.5, A19).
    pub const FLUSH_GLOBAL: Access = Access(256);
    /// Peers may FLUSH it to persistence (IBA 1.5, A19).
    pub const FLUSH_PERSISTENT: Access = Access(512);
    /// The four classic rights: local write and every remote read, write and atomic.
    pub const ALL: Access = Access(15);
    /// Rights that make a region reachable from the wire: it gets an R_Key (rxe: rkey 0
    /// otherwise).
    pub const REMOTE: Access = Access(2 | 4 | 8 | 256 | 512);
    /// Every defined bit.
    pub const KNOWN: Access = Access(1 | 2 | 4 | 8 | 16 | 32 | 256 | 512);

    /// Every right of `other` is in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Some right of `other` is in `self`.
    pub const fn intersects(self, other: Access) -> bool {
        self.0 & other.0 != 0
    }

    /// The rights of both.
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }

    /// The rights of `self` that `other` lacks.
    pub const fn minus(self, other: Access) -> Access {
        Access(self.0 & !other.0)
    }

    /// The bits as `ibv_access_flags` numbers them.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Keeps the defined bits.
    pub const fn from_bits_truncate(bits: u16) -> Access {
        Access(bits & Self::KNOWN.0)
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
            (Access::MW_BIND, "MW_BIND"),
            (Access::ZERO_BASED, "ZERO_BASED"),
            (Access::FLUSH_GLOBAL, "FLUSH_GLOBAL"),
            (Access::FLUSH_PERSISTENT, "FLUSH_PERSISTENT"),
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

/// IBA 10.6.3.1 (C10-74 for windows): a right to write remotely needs the right to write
/// locally.
pub(super) const fn writes_need_local_write(access: Access) -> bool {
    let remote_writes = Access(Access::REMOTE_WRITE.0 | Access::REMOTE_ATOMIC.0);
    !access.intersects(remote_writes) || access.contains(Access::LOCAL_WRITE)
}
