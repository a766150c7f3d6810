//! The transport layer: a sans-IO, deterministic engine for the RC, UC and UD services of
//! IBA Vol. 1 chapters 9-11, as RoCEv2 carries them.
//!
//! [`Engine`] holds memory regions, completion queues and queue pairs. Its inputs are work
//! requests ([`Engine::post_send`], [`Engine::post_recv`]), received packets
//! ([`Engine::handle_packet`]) and timer expiry ([`Engine::handle_timeout`]), each with an
//! explicit `now`; its outputs are packets ([`Engine::poll_transmit`]), the next deadline
//! ([`Engine::poll_timeout`]), completions and events. It reads no clock, opens no socket,
//! spawns no thread and draws no random number.
//!
//! A queue pair (`qp/`) holds the spec's three roles as its child modules, each keeping its
//! own state private: the requester (`qp/requester.rs`) segments work requests into packets,
//! the completer (`qp/completer.rs`) processes ACKs, NAKs and responses and runs the
//! retransmission timers, the responder (`qp/responder.rs`) checks and executes requests,
//! whose responses wait in PSN order in `qp/responder/responses.rs`. Queue pair types,
//! states and attributes are in `attrs.rs`. What a queue pair holds is bounded whatever the
//! peer sends ([`Engine::qp_usage`], checked by the fuzz targets after every packet).
//! [`engine_pair`] joins two engines over a simulated link.
//!
//! Many queue pairs: the engine keeps the deadlines of queue pairs with a timer running in
//! an ordered set and the queue pairs that may have a packet in a round-robin queue
//! (`sched.rs`), both brought up to date after each call that touches a queue pair, so an
//! idle queue pair costs no time per step. Its memory is a fixed part (about 500 bytes,
//! `tests/many.rs`; `cargo bench -p roce --bench qps` measures setup rate and resident
//! bytes per queue pair) plus what [`QpUsage`] counts, each part bounded by the queue
//! pair's limits whatever the peer sends.
//!
//! # Choices where the spec leaves room or rxe differs
//!
//! On the wire the engine answers as rdma_rxe does (checked against every capture in
//! pcaps/, `tests/tests/transport_golden.rs`). Where the spec leaves room, or rxe and the
//! spec differ, these are the choices, each explained where it is made:
//! - Responder ACKs: one per packet with AckReq, as rxe; an ACK still queued is replaced by a
//!   newer one (IBA 9.7.5.1 lets a responder coalesce: an ACK acknowledges every earlier
//!   PSN). So one ACK answers all the packets handled between two `poll_transmit`s: the
//!   runtime handles at most 64 received frames per turn before it transmits, which bounds
//!   how many packets one ACK covers and how long an answer waits. How many it covers
//!   depends on how busy the responder is: 64-byte SENDs over a veth pair got one ACK per 2.5
//!   with each process on a core of its own, one per 15 to 40 with the cores shared
//!   (tests/bench/RESULTS.md). Duplicate SEND and WRITE packets are re-ACKed only when they
//!   carry AckReq or end a message (rxe: each).
//! - A PSN sequence error is NAKed once per gap; an RNR NAK does not count as that NAK, so
//!   the next out-of-sequence packet still gets one (rxe, seen in rc_rnr_nak.pcap).
//! - A duplicate READ is answered again only inside a READ the responder still remembers
//!   (its responder resources, at least max_dest_rd_atomic of them), for the same R_Key and
//!   a part of the same bytes, rights checked again; it continues that READ's opcodes
//!   (MIDDLE ... LAST), which rxe's requester requires. Any other is dropped (as rxe).
//!   A duplicate atomic is answered from the resources, never executed twice, and dropped if
//!   no longer remembered (as rxe).
//! - At most max_dest_rd_atomic READ and atomic responses wait to be sent: one more is NAKed
//!   Invalid Request (IBA 9.9.3.1 class B; rxe recycles its resources instead, trusting the
//!   requester), queued answers to duplicates giving way first. 0 accepts none (as rxe).
//! - An operation the QP's access flags forbid is NAKed Invalid Request (rxe); a key,
//!   bounds or rights failure on the region, Remote Access Error.
//! - READ responses are sent lazily, but return memory as it was when the READ executed:
//!   the bytes a later request overwrites are copied out first, only those (`preserve.rs`;
//!   rxe sends the whole READ before executing the next request).
//! - Requester: an error NAK overtaking earlier READ responses waits for them; go-back-N is
//!   driven by NAKs, implied NAKs, a fast retransmit timer with a tail-loss probe and the
//!   spec's local ACK timeout (that timeout, and a sequence NAK acknowledging nothing new,
//!   cost retry_cnt; the fast timer does not); the fast timer adapts to the round trip
//!   (srtt + 4 rttvar, at least 20 us) and, once it has fired, stays backed off until a
//!   packet sent only once is timed (Karn), at most half the local ACK timeout; it does not
//!   act while packets wait to go (it ran out while this side did not send), nor send a
//!   probe whose packet was acknowledged meanwhile; after a go-back on a timer only the
//!   oldest packet goes until the responder answers (a stalled responder then costs one
//!   packet, not a window), and the timer sends that one again, not a probe; READ responses after the one it went back for, and older ones,
//!   restart the timers (as rxe's completer restarts its timer on every packet) instead of
//!   asking again, since each request queues another replay of the READ's rest behind the
//!   last; the in-flight window shrinks after losses (`qp/completer.rs`).
//!   None of this changes what the peer must accept.
//! - No end-to-end credits: ACKs carry the "invalid" credit count 0x1F as rxe's do, and
//!   credits received are ignored. max_rd_atomic 0 is taken as 1.
//! - UD: a receive gets the 40-byte GRH area: the packet's IP header as the host received it
//!   (IPv4 in its second 20 bytes, Annex A17.4.5.2, as rxe), or, for the engine used without
//!   a host, an IPv6-style header with the sender's address as SGID (IPv4-mapped) and a zero
//!   DGID; a message too long for it completes with LOC_LEN_ERR and the QP stays
//!   usable. UC: a gap or an error drops the rest of the message silently and the receive is
//!   used again. RC and UC accept packets only from the connected peer's address.
//! - Atomics operate on memory in the host's byte order (little-endian here).
//! - Memory (`mr/`) as rxe keeps it: protection domains, registered and fast-registration
//!   regions (REG_MR, LOCAL_INV), type 1 and type 2 memory windows (BIND_MW), one key space
//!   of `index << 8 | key byte`, R_Key 0 for a region without remote rights. Memory work
//!   requests are carried out when the requester reaches them and complete after what
//!   precedes them. Stricter than rxe: an access through a window stays inside the window,
//!   and only a type 2 window's own queue pair (a fast region's own domain) may invalidate
//!   it. A SEND with Invalidate whose key cannot be invalidated completes its receive with
//!   REM_INV_REQ_ERR (rxe's class J) and is NAKed Invalid Request, so that the requester
//!   learns it too (rxe ACKs it and only its own queue pair goes to the error state).
//! - Shared receive queues (`srq.rs`): receives are taken in posting order by whichever
//!   queue pair needs one; the limit event fires once per arming when fewer than the limit
//!   are left (rxe); an empty queue is an RNR NAK; a queue pair entering the error state
//!   raises QpLastWqeReached and leaves the queue's receives alone; a UC message dropped
//!   midway completes its shared receive with REM_INV_REQ_ERR (rxe's class E).
//! - ATOMIC WRITE and FLUSH (IBA 1.5) as rxe answers them: an empty RDMA READ response,
//!   one responder resource each (counted against max_rd_atomic / max_dest_rd_atomic like
//!   READs and atomics), duplicates answered from the resources without executing again.
//!   A FLUSH the QP's access flags do not allow is NAKed Invalid Request, one the key's
//!   rights do not allow Remote Access Error; the engine's memory needs no pushing, so a
//!   FLUSH only checks.
//! - Not implemented: path migration, RD and XRC; completion queues never drop entries.

mod attrs;
mod config;
mod cq;
mod engine;
mod error;
mod mr;
mod qp;
mod qp_table;
mod sched;
mod srq;
mod wr;

pub mod engine_pair;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzzing;

pub use attrs::{MAX_RD_ATOMIC, ModifyQp, Mtu, QpAttrs, QpState, QpType};
pub use config::{Event, MAX_PACKET_LEN, Stats, Transmit, TransportConfig};
pub use cq::{CompletionQueue, CqId, WcOpcode, WcStatus, WorkCompletion};
pub use engine::Engine;
pub use error::{DropReason, TransportError};
pub use mr::{
    Access, MemoryRegion, MemoryWindow, MrError, MrState, MwBind, MwType, PdId, inc_rkey,
};
pub use qp::{GRH_LEN, QpInit, QpUsage, local_ack_timeout};
pub use srq::{SrqAttrs, SrqError, SrqId, SrqInit};
pub use wr::{RecvWr, SendOp, SendWr, SgList, Sge, UdDest};

#[cfg(test)]
mod tests;
