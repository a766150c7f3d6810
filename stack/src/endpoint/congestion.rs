//! Where congestion control plugs into the host: the seam for the cc layer's DCQCN reaction
//! point (pacing the requester, reacting to CNPs) and notification point (answering CE-marked
//! packets with CNPs). The host does the wire work (parsing CNPs, building them, marking
//! ECN); a [`CongestionHook`] only decides.
//!
//! Pacing is per queue pair, as DCQCN's reaction point is (SIGCOMM 2015 section 3.1: rate
//! limiting is per QP on the NIC): the engine hands out packets of the QPs in turn and skips
//! a QP whose [`CongestionHook::next_send_time`] lies ahead, so a CNP for one QP slows only
//! that QP.

use core::fmt::Debug;

use crate::time::Instant;
use crate::wire::Qpn;

/// A congestion controller as the host sees it. Every method has a do-nothing default,
/// which is how rdma_rxe behaves: it neither paces, nor sends, nor reacts to CNPs.
pub trait CongestionHook: Debug {
    /// The earliest time the next packet of queue pair `qpn` may leave; `None` or a time not
    /// after `now` means at once.
    fn next_send_time(&self, _now: Instant, _qpn: Qpn) -> Option<Instant> {
        None
    }
    /// The earliest time after `now` at which a held-back queue pair may send again (the
    /// host wakes up then); `None` if no QP is held back.
    fn next_release(&self, _now: Instant) -> Option<Instant> {
        None
    }
    /// A packet of `bytes` (the whole frame) left for queue pair `qpn`.
    fn on_sent(&mut self, _now: Instant, _qpn: Qpn, _bytes: usize) {}
    /// A CNP arrived for our queue pair `qpn` (its DestQP).
    fn on_cnp(&mut self, _now: Instant, _qpn: Qpn) {}
    /// A CE-marked packet arrived for our queue pair `qpn`; return true to answer with a
    /// CNP to the sender's QP now (DCQCN sends at most one per QP every 50 us).
    fn on_congestion_experienced(&mut self, _now: Instant, _qpn: Qpn) -> bool {
        false
    }
    /// A queue pair whose CNP was deferred and is due at or before `now`: DCQCN's
    /// notification point answers marks inside its 50 us interval with one CNP at the end of
    /// it. The host calls this from its timeout handling until it returns `None`, and sends
    /// the CNP to the sender of the last marked packet of that QP.
    fn poll_cnp(&mut self, _now: Instant) -> Option<Qpn> {
        None
    }
    /// The next time [`CongestionHook::on_timer`] or [`CongestionHook::poll_cnp`] has work.
    fn next_timer(&self) -> Option<Instant> {
        None
    }
    /// Runs the timers due at `now` (rate increases, alpha updates).
    fn on_timer(&mut self, _now: Instant) {}
}

/// No congestion control, as rdma_rxe.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCongestionControl;

impl CongestionHook for NoCongestionControl {}
