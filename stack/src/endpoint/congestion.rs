//! Where congestion control plugs into the host: the seam for the cc layer's DCQCN reaction
//! point (pacing the requester, reacting to CNPs) and notification point (answering CE-marked
//! packets with CNPs). The host does the wire work (parsing CNPs, building them, marking
//! ECN); a [`CongestionHook`] only decides.
//!
//! The engine hands out packets of all queue pairs in turn, so pacing applies to the host's
//! whole output: [`CongestionHook::next_send_time`] holds back the next packet of any QP.
//! Per-QP pacing, as DCQCN's reaction point wants, needs the engine to transmit for one QP
//! at a time; with a single QP per endpoint (pingpong, perftest) the two are the same.

use core::fmt::Debug;

use crate::transport::Time;
use crate::wire::Qpn;

/// A congestion controller as the host sees it. Every method has a do-nothing default,
/// which is how rdma_rxe behaves: it neither paces, nor sends, nor reacts to CNPs.
pub trait CongestionHook: Debug {
    /// The earliest time the next packet may leave; `None` or a time not after `now` means
    /// at once.
    fn next_send_time(&self, _now: Time) -> Option<Time> {
        None
    }
    /// A packet of `bytes` (the whole frame) left for queue pair `qpn`.
    fn on_sent(&mut self, _now: Time, _qpn: Qpn, _bytes: usize) {}
    /// A CNP arrived for our queue pair `qpn` (its DestQP).
    fn on_cnp(&mut self, _now: Time, _qpn: Qpn) {}
    /// A CE-marked packet arrived for our queue pair `qpn`; return true to answer with a
    /// CNP to the sender's QP (DCQCN sends at most one per QP every 50 us).
    fn on_congestion_experienced(&mut self, _now: Time, _qpn: Qpn) -> bool {
        false
    }
    /// The next time [`CongestionHook::on_timer`] has work.
    fn next_timer(&self) -> Option<Time> {
        None
    }
    fn on_timer(&mut self, _now: Time) {}
}

/// No congestion control, as rdma_rxe.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCongestionControl;

impl CongestionHook for NoCongestionControl {}
