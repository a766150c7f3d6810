//! DCQCN behind the host's [`CongestionHook`]: the cc layer's reaction point and pacer make
//! the host a DCQCN sender, its notification point a DCQCN receiver (SIGCOMM 2015 section 3;
//! RoCEv2 Annex A17.9).
//!
//! The host paces its whole output (see `congestion.rs`), so one reaction point serves all
//! its queue pairs: exact for one connection per host, an approximation beyond. The
//! notification point's deferred CNPs (one at the end of a 50 us interval that saw marks) are
//! not sent, because the seam lets the host send a CNP only while it handles a marked packet:
//! the next marked packet after the interval brings the CNP instead, at most one packet later.

use std::sync::{Arc, Mutex, MutexGuard};

use super::congestion::CongestionHook;
use crate::cc::{self, CcError, CongestionControl, DcqcnParams, NotificationPoint, Pacer};
use crate::transport::Time;
use crate::wire::Qpn;

/// What the reaction point did, readable while the hook sits inside a host.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DcqcnReport {
    pub cnps_received: u64,
    pub rate_cuts: u64,
    /// The sending rate now, and the lowest it went, in bit/s.
    pub rate_bps: f64,
    pub min_rate_bps: f64,
    /// Bytes sent, and their sending time at the paced rate: their ratio is the mean rate.
    pub bytes_sent: u64,
    pub paced_seconds: f64,
    /// CNPs this host's notification point decided to send.
    pub cnps_sent: u64,
}

impl DcqcnReport {
    /// The mean pacing rate over the bytes sent, in bit/s.
    pub fn mean_rate_bps(&self) -> f64 {
        if self.paced_seconds > 0.0 {
            self.bytes_sent as f64 * 8.0 / self.paced_seconds
        } else {
            self.rate_bps
        }
    }
}

/// A handle on a [`DcqcnHook`]'s report.
#[derive(Debug, Clone, Default)]
pub struct DcqcnMonitor(Arc<Mutex<DcqcnReport>>);

impl DcqcnMonitor {
    pub fn report(&self) -> DcqcnReport {
        *self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, DcqcnReport> {
        // The report is plain counters; one left by a panicking thread is still readable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug)]
pub struct DcqcnHook {
    rp: cc::ReactionPoint,
    pacer: Pacer,
    np: NotificationPoint,
    monitor: DcqcnMonitor,
}

impl DcqcnHook {
    /// A hook with `params` (their line rate is where a flow starts), and its monitor.
    pub fn new(params: DcqcnParams) -> Result<(DcqcnHook, DcqcnMonitor), CcError> {
        let rp = cc::ReactionPoint::new(params)?;
        let monitor = DcqcnMonitor::default();
        {
            let mut r = monitor.lock();
            r.rate_bps = rp.rate_bps();
            r.min_rate_bps = rp.rate_bps();
        }
        let hook = DcqcnHook {
            pacer: Pacer::new(rp.rate_bps()),
            rp,
            np: NotificationPoint::default(),
            monitor: monitor.clone(),
        };
        Ok((hook, monitor))
    }

    /// Hands the reaction point's rate to the pacer after any event that may change it.
    fn follow_rate(&mut self) {
        let rate = self.rp.rate_bps();
        self.pacer.set_rate(rate);
        let mut r = self.monitor.lock();
        r.rate_bps = rate;
        r.min_rate_bps = r.min_rate_bps.min(rate);
        r.rate_cuts = self.rp.cuts();
    }
}

impl CongestionHook for DcqcnHook {
    fn next_send_time(&self, _now: Time) -> Option<Time> {
        Some(self.pacer.next_send_time().into())
    }

    fn on_sent(&mut self, now: Time, _qpn: Qpn, bytes: usize) {
        let now = cc::Time::from(now);
        self.rp.on_bytes_sent(now, bytes as u64);
        self.follow_rate();
        self.pacer.on_send(now, bytes as u64);
        let mut r = self.monitor.lock();
        r.bytes_sent += bytes as u64;
        r.paced_seconds += cc::transmission_time(bytes as u64, self.rp.rate_bps()).as_secs_f64();
    }

    fn on_cnp(&mut self, now: Time, _qpn: Qpn) {
        self.rp.on_cnp(now.into());
        self.follow_rate();
        self.monitor.lock().cnps_received += 1;
    }

    fn on_congestion_experienced(&mut self, now: Time, qpn: Qpn) -> bool {
        let send = self.np.on_packet(now.into(), qpn, true);
        if send {
            self.monitor.lock().cnps_sent += 1;
        }
        send
    }

    fn next_timer(&self) -> Option<Time> {
        self.rp.next_timer().map(Time::from)
    }

    fn on_timer(&mut self, now: Time) {
        self.rp.on_timer(now.into());
        self.follow_rate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Time {
        Time::from_micros(n)
    }

    #[test]
    fn a_cnp_cuts_the_rate_and_spaces_packets() {
        let (mut hook, monitor) = DcqcnHook::new(DcqcnParams::paper(100e9)).unwrap();
        let qp = Qpn::new(0x11);
        hook.on_sent(us(0), qp, 1250);
        // 1250 bytes at 100 Gb/s: 100 ns.
        assert_eq!(hook.next_send_time(us(0)), Some(Time::from_nanos(100)));
        hook.on_cnp(us(1), qp);
        let r = monitor.report();
        assert_eq!((r.cnps_received, r.rate_cuts), (1, 1));
        // alpha starts at 1: the first cut halves the rate.
        assert_eq!(r.rate_bps, 50e9);
        hook.on_sent(us(2), qp, 1250);
        assert_eq!(hook.next_send_time(us(2)), Some(Time::from_nanos(2_200)));
        assert!(hook.next_timer().is_some_and(|t| t > us(1)));
        // Without further CNPs the timers bring the rate back up.
        let mut now = us(2);
        while let Some(t) = hook.next_timer().filter(|&t| t < us(50_000)) {
            now = t;
            hook.on_timer(now);
        }
        assert!(now > us(2));
        assert!(monitor.report().rate_bps > 50e9);
        assert_eq!(monitor.report().min_rate_bps, 50e9);
    }

    #[test]
    fn ce_marks_become_at_most_one_cnp_per_interval() {
        let (mut hook, monitor) = DcqcnHook::new(DcqcnParams::paper(100e9)).unwrap();
        let qp = Qpn::new(0x11);
        let sent: Vec<bool> = [0, 10, 49, 51, 60]
            .into_iter()
            .map(|t| hook.on_congestion_experienced(us(t), qp))
            .collect();
        assert_eq!(sent, [true, false, false, true, false]);
        assert_eq!(monitor.report().cnps_sent, 2);
    }
}
