//! Work requests (IBA 11.4.1.1, `ibv_send_wr` / `ibv_recv_wr`).

use std::net::IpAddr;

use super::mr::{Access, MwBind};
use crate::wire::Qpn;
use crate::wire::encap::{DEFAULT_TTL, ud_grh_area_source};

/// A scatter/gather entry: `length` bytes at `addr` in the region `lkey` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sge {
    /// The first byte's virtual address.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// The L_Key of the region holding them.
    pub lkey: u32,
}

/// A work request's scatter/gather list, read as a slice of [`Sge`]. One entry is kept inline:
/// nearly every work request has exactly one (perftest's and the rdma-core examples' all do),
/// and a `Vec` cost an allocation and a free per message, 3% of a 64-byte SEND client's
/// user time. Built from an `Sge`, a `Vec<Sge>` or an iterator of them.
#[derive(Clone, Default)]
pub struct SgList(SgInner);

#[derive(Clone)]
enum SgInner {
    One(Sge),
    Many(Vec<Sge>),
}

impl Default for SgInner {
    fn default() -> Self {
        SgInner::Many(Vec::new())
    }
}

impl core::ops::Deref for SgList {
    type Target = [Sge];
    fn deref(&self) -> &[Sge] {
        match &self.0 {
            SgInner::One(s) => core::slice::from_ref(s),
            SgInner::Many(v) => v,
        }
    }
}

impl core::ops::DerefMut for SgList {
    fn deref_mut(&mut self) -> &mut [Sge] {
        match &mut self.0 {
            SgInner::One(s) => core::slice::from_mut(s),
            SgInner::Many(v) => v,
        }
    }
}

impl From<Sge> for SgList {
    fn from(s: Sge) -> SgList {
        SgList(SgInner::One(s))
    }
}

impl From<Vec<Sge>> for SgList {
    fn from(v: Vec<Sge>) -> SgList {
        match v.as_slice() {
            [one] => SgList(SgInner::One(*one)),
            _ => SgList(SgInner::Many(v)),
        }
    }
}

impl FromIterator<Sge> for SgList {
    fn from_iter<I: IntoIterator<Item = Sge>>(iter: I) -> SgList {
        SgList::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl<'a> IntoIterator for &'a SgList {
    type Item = &'a Sge;
    type IntoIter = core::slice::Iter<'a, Sge>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq for SgList {
    fn eq(&self, other: &SgList) -> bool {
        **self == **other
    }
}

impl Eq for SgList {}

impl core::fmt::Debug for SgList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The operation of a send work request, with its operation-specific fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND: the message lands in the responder's next receive.
    Send,
    /// SEND with immediate: as SEND, and `imm` reaches the receive's completion.
    SendWithImm {
        /// The immediate data.
        imm: u32,
    },
    /// SEND with Invalidate: the responder invalidates `rkey` when the message completes.
    SendWithInv {
        /// The R_Key to invalidate.
        rkey: u32,
    },
    /// RDMA WRITE: the message lands at `remote_addr` under `rkey`.
    Write {
        /// Where the data goes in the responder's memory.
        remote_addr: u64,
        /// The R_Key granting it.
        rkey: u32,
    },
    /// RDMA WRITE with immediate: as WRITE, and consumes a receive that completes with `imm`.
    WriteWithImm {
        /// Where the data goes in the responder's memory.
        remote_addr: u64,
        /// The R_Key granting it.
        rkey: u32,
        /// The immediate data.
        imm: u32,
    },
    /// RDMA READ: the responder's bytes at `remote_addr` land in the scatter/gather list.
    Read {
        /// Where the data comes from in the responder's memory.
        remote_addr: u64,
        /// The R_Key granting it.
        rkey: u32,
    },
    /// Compare and swap of the aligned 8 bytes at `remote_addr`; the original value returns.
    CompareSwap {
        /// The aligned 8-byte word.
        remote_addr: u64,
        /// The R_Key granting atomic access.
        rkey: u32,
        /// The value to compare with.
        compare: u64,
        /// The value stored if they are equal.
        swap: u64,
    },
    /// Fetch and add to the aligned 8 bytes at `remote_addr`; the original value returns.
    FetchAdd {
        /// The aligned 8-byte word.
        remote_addr: u64,
        /// The R_Key granting atomic access.
        rkey: u32,
        /// The value added (wrapping).
        add: u64,
    },
    /// ATOMIC WRITE (IBA 1.5, 9.4.6): `value` lands as one aligned 8-byte write, in the
    /// host's byte order like the other atomics; answered by an empty READ response.
    AtomicWrite {
        /// The aligned 8-byte word.
        remote_addr: u64,
        /// The R_Key granting write access.
        rkey: u32,
        /// The value written.
        value: u64,
    },
    /// FLUSH (IBA 1.5, A19): makes earlier writes to `len` bytes at `remote_addr` (or, with
    /// `selectivity` [`crate::wire::feth::selectivity::MEMORY_REGION`], to the whole region)
    /// globally visible and/or persistent, as the `placement` bits ask; answered by an empty
    /// READ response.
    Flush {
        /// The range's start in the responder's memory.
        remote_addr: u64,
        /// The R_Key granting flush access.
        rkey: u32,
        /// The range's length.
        len: u32,
        /// Global visibility and/or persistence bits (FETH).
        placement: u8,
        /// The range alone or the whole region (FETH).
        selectivity: u8,
    },
    /// LOCAL_INV (IBA 10.6.3.7): invalidates a fast-registration region or a type 2 window
    /// of this queue pair. Nothing goes on the wire.
    LocalInv {
        /// The L_Key or R_Key to invalidate.
        key: u32,
    },
    /// REG_MR, fast registration (IBA 10.6.3.6): maps the first `len` bytes of the free
    /// fast-registration region `mr` (its current L_Key) at `va` with `access`, under `key`
    /// (the same index, a new key byte: [`super::inc_rkey`]). Nothing goes on the wire.
    RegMr {
        /// The region's current L_Key.
        mr: u32,
        /// The key it is registered under.
        key: u32,
        /// The virtual address of its first byte.
        va: u64,
        /// Bytes mapped.
        len: u64,
        /// The rights granted.
        access: Access,
    },
    /// BIND_MW (IBA 10.6.7.2): binds window `mw` (its current R_Key) under `rkey` (same
    /// index, new key byte) as `bind` says. Nothing goes on the wire.
    BindMw {
        /// The window's current R_Key.
        mw: u32,
        /// The R_Key it is bound under.
        rkey: u32,
        /// The region, range and rights.
        bind: MwBind,
    },
}

impl SendOp {
    /// SEND of any kind.
    pub const fn is_send(&self) -> bool {
        matches!(
            self,
            SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. }
        )
    }
    /// RDMA WRITE with or without immediate.
    pub const fn is_write(&self) -> bool {
        matches!(self, SendOp::Write { .. } | SendOp::WriteWithImm { .. })
    }
    /// RDMA READ.
    pub const fn is_read(&self) -> bool {
        matches!(self, SendOp::Read { .. })
    }
    /// Compare and swap or fetch and add.
    pub const fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }
    /// Memory work requests the requester carries out itself, in send queue order, without
    /// sending anything.
    pub const fn is_local(&self) -> bool {
        matches!(
            self,
            SendOp::LocalInv { .. } | SendOp::RegMr { .. } | SendOp::BindMw { .. }
        )
    }
    /// READs, atomics, ATOMIC WRITE and FLUSH: the operations max_rd_atomic limits, which
    /// complete on a response (READ response, atomic ACK) rather than on an ACK.
    pub const fn needs_response(&self) -> bool {
        self.is_read()
            || self.is_atomic()
            || matches!(self, SendOp::AtomicWrite { .. } | SendOp::Flush { .. })
    }
}

/// Where a UD message goes: the address handle and remote QP of `ibv_send_wr.wr.ud`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// The peer's IP address; GRH-free RoCEv2 addressing needs nothing else.
    pub addr: IpAddr,
    /// The destination QP.
    pub remote_qpn: Qpn,
    /// If its high bit is set the QP's own Q_Key is sent instead (IBA 10.2.5, controlled Q_Keys).
    pub remote_qkey: u32,
    /// The address handle's traffic class (`ah_attr.grh.traffic_class`): its upper six bits
    /// are the DSCP of the message's packet (Annex A17 CA17-4, CA17-13). `None`: the host's
    /// DSCP. Its ECN bits are not taken: congestion control owns ECN (CA17-5).
    pub traffic_class: Option<u8>,
    /// The address handle's hop limit (`ah_attr.grh.hop_limit`): the packet's IPv4 TTL or
    /// IPv6 hop limit (CA17-9, CA17-17).
    pub hop_limit: u8,
}

impl UdDest {
    /// To QP `remote_qpn` at `addr` with Q_Key `remote_qkey`, the host's DSCP and TTL 64.
    pub const fn new(addr: IpAddr, remote_qpn: Qpn, remote_qkey: u32) -> UdDest {
        UdDest {
            addr,
            remote_qpn,
            remote_qkey,
            traffic_class: None,
            hop_limit: DEFAULT_TTL,
        }
    }

    /// The address handle that answers a UD receive, from the GRH area its buffer starts with
    /// (libibverbs' `ibv_init_ah_from_wc`): the sender's address and its traffic class. The
    /// hop limit stays 64: Linux replaces the received TTL with its route's when the handle is
    /// created (`ib_resolve_unicast_gid_dmac`). None if the area holds no IP header.
    pub fn reply_to(grh_area: &[u8], remote_qpn: Qpn, remote_qkey: u32) -> Option<UdDest> {
        let (addr, traffic_class) = ud_grh_area_source(grh_area)?;
        Some(UdDest {
            traffic_class: Some(traffic_class),
            ..UdDest::new(addr, remote_qpn, remote_qkey)
        })
    }
}

/// A send work request (`ibv_send_wr`): the operation and its local buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    /// The caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Local buffers: what is sent, or where a READ or atomic result lands.
    pub sg_list: SgList,
    /// Generate a completion on success (errors always complete).
    pub signaled: bool,
    /// Wait for every earlier READ and atomic to complete before starting.
    pub fence: bool,
    /// Set the BTH Solicited Event bit on the last packet.
    pub solicited: bool,
    /// Required on UD queue pairs, ignored on connected ones.
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled work request without fence or solicited event.
    pub fn new(wr_id: u64, op: SendOp, sg_list: impl Into<SgList>) -> SendWr {
        SendWr {
            wr_id,
            op,
            sg_list: sg_list.into(),
            signaled: true,
            fence: false,
            solicited: false,
            ud: None,
        }
    }
}

/// A receive work request (`ibv_recv_wr`): where one incoming SEND lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// The caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// The buffers, filled in order.
    pub sg_list: SgList,
}

impl RecvWr {
    /// A receive into `sg_list`.
    pub fn new(wr_id: u64, sg_list: impl Into<SgList>) -> RecvWr {
        RecvWr {
            wr_id,
            sg_list: sg_list.into(),
        }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.sg_list.iter().map(|s| u64::from(s.length)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::{SgList, Sge};

    fn sge(addr: u64) -> Sge {
        Sge {
            addr,
            length: 64,
            lkey: 7,
        }
    }

    #[test]
    fn sg_list_reads_the_same_however_built() {
        let one = SgList::from(sge(1));
        assert_eq!(*one, [sge(1)]);
        assert_eq!(
            one,
            SgList::from(vec![sge(1)]),
            "a one-entry Vec is kept inline"
        );
        let three: SgList = [1, 2, 3].map(sge).into_iter().collect();
        assert_eq!(three.len(), 3);
        assert_eq!(three.iter().map(|s| s.addr).sum::<u64>(), 6);
        assert!(SgList::default().is_empty() && SgList::from(Vec::new()).is_empty());
        assert_ne!(one, three);
        let mut m = one.clone();
        m[0].lkey = 9;
        assert_eq!((m[0].lkey, one[0].lkey), (9, 7), "a clone is a copy");
        assert_eq!(format!("{m:?}"), format!("{:?}", [m[0]]));
    }
}
