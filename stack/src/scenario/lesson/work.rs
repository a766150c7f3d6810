//! What each lesson posts: work requests at A, receives at B, and the completions to wait for.

use core::time::Duration;
use std::net::IpAddr;

use super::{ATOMIC_AT, ATOMIC_START, End, GenError, Lesson, Q_KEY, VA_A, VA_B};
use crate::endpoint::Host;
use crate::time::Instant;
use crate::transport::{Access, PdId, RecvWr, SendOp, SendWr, Sge, UdDest, WcStatus, inc_rkey};

/// One lesson's work.
pub struct Work {
    pub sends: Vec<SendWr>,
    pub recvs: Vec<RecvWr>,
    /// Completions to wait for at A and at B.
    pub want_a: usize,
    pub want_b: usize,
    /// A receive B posts only at this time (the RNR lesson).
    pub late_recv: Option<(Instant, RecvWr)>,
    /// Where the lesson's data must have landed when it is over.
    pub lands: Option<Landing>,
    /// The status every completion at A, and at B, must have.
    pub status_a: WcStatus,
    pub status_b: WcStatus,
}

/// `len` bytes at offset `from_at` of one side's region must equal those at offset `to_at`
/// of the other's when the lesson is over: the data a WRITE or SEND carried from A to B, or a
/// READ from B to A.
#[derive(Debug, Clone, Copy)]
pub struct Landing {
    /// The bytes go from A to B (WRITE, SEND), or from B to A (READ).
    pub a_to_b: bool,
    pub from_at: usize,
    pub to_at: usize,
    pub len: usize,
}

impl Landing {
    /// `len` bytes from the start of A's region to the start of B's.
    fn a_to_b(len: u32) -> Landing {
        Landing {
            a_to_b: true,
            from_at: 0,
            to_at: 0,
            len: len as usize,
        }
    }
}

fn sge(key: u32, va: u64, len: u32) -> Vec<Sge> {
    vec![Sge {
        addr: va,
        length: len,
        lkey: key,
    }]
}

/// A's request `op` of `len` bytes from the start of its region (at `va_a` for atomics).
fn wr(a: End, op: SendOp, va_a: u64, len: u32) -> SendWr {
    SendWr::new(1, op, sge(a.key, va_a, len))
}

/// A receive of up to 4 KiB at the start of B's region.
fn recv(b: End) -> RecvWr {
    RecvWr::new(7, sge(b.key, VA_B, 4096))
}

/// The work of `lesson` between `a` and `b` (whose host is `host_b`, at `addr_b`), or `None`
/// for the CNP lesson, which streams WRITEs for a while instead.
pub fn plan(
    lesson: Lesson,
    a: End,
    b: End,
    addr_b: IpAddr,
    host_b: &mut Host,
) -> Result<Option<Work>, GenError> {
    let write = SendOp::Write {
        remote_addr: VA_B,
        rkey: b.key,
    };
    let read = SendOp::Read {
        remote_addr: VA_B,
        rkey: b.key,
    };
    let fetch_add = SendOp::FetchAdd {
        remote_addr: ATOMIC_AT,
        rkey: b.key,
        add: 5,
    };
    // A's first request carries the lesson's data from the start of A's region.
    let work = |sends: Vec<SendWr>, recvs: Vec<RecvWr>| Work {
        want_a: sends.len(),
        want_b: recvs.len(),
        lands: sends
            .first()
            .and_then(|s| s.sg_list.first())
            .map(|sge| Landing::a_to_b(sge.length)),
        sends,
        recvs,
        late_recv: None,
        status_a: WcStatus::Success,
        status_b: WcStatus::Success,
    };
    let w = match lesson {
        Lesson::Write | Lesson::Uc | Lesson::AckLoss => {
            work(vec![wr(a, write, VA_A, 3000)], vec![])
        }
        Lesson::LossGbn => work(vec![wr(a, write, VA_A, 8192)], vec![]),
        // 16 packets: some before the pause, the rest after.
        Lesson::Pfc => work(vec![wr(a, write, VA_A, 16384)], vec![]),
        Lesson::WriteImm => {
            let op = SendOp::WriteWithImm {
                remote_addr: VA_B,
                rkey: b.key,
                imm: 0x1234_5678,
            };
            // The immediate consumes a receive; no data lands in it.
            let r = RecvWr::new(7, sge(b.key, VA_B + 4096, 0));
            work(vec![wr(a, op, VA_A, 2000)], vec![r])
        }
        Lesson::Send => work(vec![wr(a, SendOp::Send, VA_A, 2500)], vec![recv(b)]),
        Lesson::SendImm => {
            let op = SendOp::SendWithImm { imm: 0xcafe_f00d };
            work(vec![wr(a, op, VA_A, 100)], vec![recv(b)])
        }
        Lesson::SendInv => {
            // A fast-registration region at B, registered by a REG_MR on B's queue pair
            // (nothing on the wire), which A's SEND with Invalidate invalidates.
            let e = host_b.engine_mut();
            let mr = e.alloc_mr(PdId::DEFAULT, 4096)?;
            let key = inc_rkey(mr);
            let reg = SendOp::RegMr {
                mr,
                key,
                va: VA_B + 0x10_0000,
                len: 4096,
                access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            };
            let mut reg = SendWr::new(8, reg, Vec::new());
            reg.signaled = false;
            e.post_send(b.qpn, reg)?;
            let op = SendOp::SendWithInv { rkey: key };
            work(vec![wr(a, op, VA_A, 64)], vec![recv(b)])
        }
        Lesson::Read | Lesson::ReadRetry => {
            let len = if lesson == Lesson::Read { 3000 } else { 4096 };
            Work {
                lands: Some(Landing {
                    a_to_b: false,
                    from_at: 0,
                    to_at: 0,
                    len,
                }),
                ..work(vec![wr(a, read, VA_A, len as u32)], vec![])
            }
        }
        Lesson::Atomics => {
            // B's word is checked by value (`check_atomics`), not copied.
            let cas = SendOp::CompareSwap {
                remote_addr: ATOMIC_AT,
                rkey: b.key,
                compare: ATOMIC_START,
                swap: 0x100,
            };
            let mut second = wr(a, fetch_add, VA_A + 8, 8);
            second.wr_id = 2;
            Work {
                lands: None,
                ..work(vec![wr(a, cas, VA_A, 8), second], vec![])
            }
        }
        Lesson::AtomicReplay => Work {
            lands: None,
            ..work(vec![wr(a, fetch_add, VA_A, 8)], vec![])
        },
        Lesson::Ud => {
            let mut send = wr(a, SendOp::Send, VA_A, 500);
            send.ud = Some(UdDest::new(addr_b, b.qpn, Q_KEY));
            // A UD receive buffer starts with 40 bytes for the GRH.
            Work {
                lands: Some(Landing {
                    to_at: 40,
                    ..Landing::a_to_b(500)
                }),
                ..work(vec![send], vec![RecvWr::new(7, sge(b.key, VA_B, 540))])
            }
        }
        Lesson::Rnr => Work {
            want_b: 1,
            late_recv: Some((Instant::ZERO + Duration::from_micros(150), recv(b))),
            ..work(vec![wr(a, SendOp::Send, VA_A, 1500)], vec![])
        },
        Lesson::NakAccess => {
            let wrong = SendOp::Write {
                remote_addr: VA_B,
                rkey: b.key ^ 0x5a00,
            };
            Work {
                lands: None,
                status_a: WcStatus::RemAccessErr,
                ..work(vec![wr(a, wrong, VA_A, 3000)], vec![])
            }
        }
        Lesson::NakInvalid => Work {
            lands: None,
            status_a: WcStatus::RemInvReqErr,
            status_b: WcStatus::LocLenErr,
            ..work(
                vec![wr(a, SendOp::Send, VA_A, 2500)],
                vec![RecvWr::new(7, sge(b.key, VA_B, 1024))],
            )
        },
        Lesson::RetryExceeded => Work {
            lands: None,
            status_a: WcStatus::RetryExcErr,
            ..work(vec![wr(a, write, VA_A, 3000)], vec![])
        },
        Lesson::Cnp | Lesson::CmConnect | Lesson::CmReject => return Ok(None),
    };
    Ok(Some(w))
}
