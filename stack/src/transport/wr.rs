//! Work requests (IBA 11.4.1.1, `ibv_send_wr` / `ibv_recv_wr`).

use std::net::IpAddr;

use super::mr::{Access, MwBind};
use crate::wire::Qpn;

/// A scatter/gather entry: `length` bytes at `addr` in the region `lkey` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// The operation of a send work request, with its operation-specific fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    Send,
    SendWithImm {
        imm: u32,
    },
    /// SEND with Invalidate: the responder invalidates `rkey` when the message completes.
    SendWithInv {
        rkey: u32,
    },
    Write {
        remote_addr: u64,
        rkey: u32,
    },
    WriteWithImm {
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    },
    Read {
        remote_addr: u64,
        rkey: u32,
    },
    CompareSwap {
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    },
    FetchAdd {
        remote_addr: u64,
        rkey: u32,
        add: u64,
    },
    /// ATOMIC WRITE (IBA 1.5, 9.4.6): `value` lands as one aligned 8-byte write, in the
    /// host's byte order like the other atomics; answered by an empty READ response.
    AtomicWrite {
        remote_addr: u64,
        rkey: u32,
        value: u64,
    },
    /// FLUSH (IBA 1.5, A19): makes earlier writes to `len` bytes at `remote_addr` (or, with
    /// `selectivity` [`crate::wire::feth::selectivity::MEMORY_REGION`], to the whole region)
    /// globally visible and/or persistent, as the `placement` bits ask; answered by an empty
    /// READ response.
    Flush {
        remote_addr: u64,
        rkey: u32,
        len: u32,
        placement: u8,
        selectivity: u8,
    },
    /// LOCAL_INV (IBA 10.6.3.7): invalidates a fast-registration region or a type 2 window
    /// of this queue pair. Nothing goes on the wire.
    LocalInv {
        key: u32,
    },
    /// REG_MR, fast registration (IBA 10.6.3.6): maps the first `len` bytes of the free
    /// fast-registration region `mr` (its current L_Key) at `va` with `access`, under `key`
    /// (the same index, a new key byte: [`super::inc_rkey`]). Nothing goes on the wire.
    RegMr {
        mr: u32,
        key: u32,
        va: u64,
        len: u64,
        access: Access,
    },
    /// BIND_MW (IBA 10.6.7.2): binds window `mw` (its current R_Key) under `rkey` (same
    /// index, new key byte) as `bind` says. Nothing goes on the wire.
    BindMw {
        mw: u32,
        rkey: u32,
        bind: MwBind,
    },
}

impl SendOp {
    pub const fn is_send(&self) -> bool {
        matches!(
            self,
            SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. }
        )
    }
    pub const fn is_write(&self) -> bool {
        matches!(self, SendOp::Write { .. } | SendOp::WriteWithImm { .. })
    }
    pub const fn is_read(&self) -> bool {
        matches!(self, SendOp::Read { .. })
    }
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
    pub remote_qpn: Qpn,
    /// If its high bit is set the QP's own Q_Key is sent instead (IBA 10.2.5, controlled Q_Keys).
    pub remote_qkey: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    pub wr_id: u64,
    pub op: SendOp,
    pub sg_list: Vec<Sge>,
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
    pub fn new(wr_id: u64, op: SendOp, sg_list: Vec<Sge>) -> SendWr {
        SendWr {
            wr_id,
            op,
            sg_list,
            signaled: true,
            fence: false,
            solicited: false,
            ud: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sg_list: Vec<Sge>,
}

impl RecvWr {
    pub fn new(wr_id: u64, sg_list: Vec<Sge>) -> RecvWr {
        RecvWr { wr_id, sg_list }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.sg_list.iter().map(|s| u64::from(s.length)).sum()
    }
}
