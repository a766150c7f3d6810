//! DCQCN behind the host's [`CongestionHook`]: the cc layer's reaction point and pacer make
//! the host a DCQCN sender, its notification point a DCQCN receiver (SIGCOMM 2015 section 3;
//! RoCEv2 Annex A17.9).
//!
//! Each queue pair is its own flow with its own reaction point and pacer, as on a NIC that
//! rate-limits per QP: a CNP names the QP to slow down (its DestQP), and only that QP slows.
//! A QP's flow starts at the line rate the first time it sends or hears a CNP. The
//! notification point answers the first mark of an interval at once and defers one CNP to
//! the end of an interval that saw more marks; the host sends those through
//! [`CongestionHook::poll_cnp`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::congestion::CongestionHook;
use crate::cc::{self, CcError, CongestionControl, DcqcnParams, NotificationPoint, Pacer};
use crate::time::Instant;
use crate::wire::Qpn;

/// What the reaction points did, over all queue pairs, readable while the hook sits inside
/// a host.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DcqcnReport {
    /// CNPs the reaction points received.
    pub cnps_received: u64,
    /// Times a reaction point cut its rate.
    pub rate_cuts: u64,
    /// The lowest sending rate of any queue pair now, and the lowest any went, in bit/s.
    pub rate_bps: f64,
    /// The lowest rate any queue pair went to, bit/s.
    pub min_rate_bps: f64,
    /// Bytes sent, and their sending time at the paced rate: their ratio is the mean rate.
    pub bytes_sent: u64,
    /// The time those bytes take at the rate each was paced at, seconds.
    pub paced_seconds: f64,
    /// CNPs this host's notification point decided to send, at once or deferred.
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
    /// The report as of now.
    pub fn report(&self) -> DcqcnReport {
        *self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, DcqcnReport> {
        // The report is plain counters; one left by a panicking thread is still readable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One queue pair's reaction point and the pacer that follows its rate.
#[derive(Debug)]
struct Flow {
    rp: cc::ReactionPoint,
    pacer: Pacer,
}

/// DCQCN in a host: a reaction point and pacer per queue pair, and the notification point
/// that answers CE-marked packets with CNPs.
#[derive(Debug)]
pub struct DcqcnHook {
    /// A reaction point fresh at the line rate: every new flow starts as a copy of it.
    fresh: cc::ReactionPoint,
    /// By QPN value, ordered so that timers of several flows run in the same order on every
    /// run.
    flows: BTreeMap<u32, Flow>,
    np: NotificationPoint,
    monitor: DcqcnMonitor,
}

impl DcqcnHook {
    /// A hook with `params` (their line rate is where each flow starts), and its monitor.
    pub fn new(params: DcqcnParams) -> Result<(DcqcnHook, DcqcnMonitor), CcError> {
        let fresh = cc::ReactionPoint::new(params)?;
        let line = fresh.rate_bps();
        let monitor = DcqcnMonitor::default();
        {
            let mut r = monitor.lock();
            r.rate_bps = line;
            r.min_rate_bps = line;
        }
        let hook = DcqcnHook {
            fresh,
            flows: BTreeMap::new(),
            np: NotificationPoint::default(),
            monitor: monitor.clone(),
        };
        Ok((hook, monitor))
    }

    /// The same hook with a notification point that spaces CNPs to a QP by `interval`
    /// instead of DCQCN's 50 us (a conformance test plays a peer that does not pace them).
    pub fn with_cnp_interval(mut self, interval: cc::Time) -> DcqcnHook {
        self.np = NotificationPoint::new(interval);
        self
    }

    /// The current sending rate of queue pair `qpn` in bit/s (the line rate for a QP that
    /// has not sent yet).
    pub fn rate_bps(&self, qpn: Qpn) -> f64 {
        match self.flows.get(&qpn.value()) {
            Some(flow) => flow.rp.rate_bps(),
            None => self.fresh.rate_bps(),
        }
    }

    fn flow(&mut self, qpn: Qpn) -> &mut Flow {
        let fresh = &self.fresh;
        self.flows.entry(qpn.value()).or_insert_with(|| Flow {
            pacer: Pacer::new(fresh.rate_bps()),
            rp: fresh.clone(),
        })
    }

    /// Writes the flows' rates into the report after any of them changed: the lowest now,
    /// the lowest ever, the cuts so far.
    fn report_rates(&self) {
        let lowest = self
            .flows
            .values()
            .map(|f| f.rp.rate_bps())
            .fold(f64::INFINITY, f64::min);
        let cuts = self.flows.values().map(|f| f.rp.cuts()).sum();
        let mut r = self.monitor.lock();
        r.rate_bps = lowest;
        r.min_rate_bps = r.min_rate_bps.min(lowest);
        r.rate_cuts = cuts;
    }
}

impl Flow {
    /// Hands the reaction point's rate to the pacer; true if it changed.
    fn follow_rate(&mut self) -> bool {
        let rate = self.rp.rate_bps();
        let changed = rate != self.pacer.rate_bps();
        self.pacer.set_rate(rate);
        changed
    }
}

impl CongestionHook for DcqcnHook {
    fn next_send_time(&self, _now: Instant, qpn: Qpn) -> Option<Instant> {
        let flow = self.flows.get(&qpn.value())?;
        Some(flow.pacer.next_send_time().into())
    }

    fn next_release(&self, now: Instant) -> Option<Instant> {
        let now = cc::Time::from(now);
        let held = self.flows.values().map(|f| f.pacer.next_send_time());
        held.filter(|&t| t > now).min().map(Instant::from)
    }

    fn on_sent(&mut self, now: Instant, qpn: Qpn, bytes: usize) {
        let now = cc::Time::from(now);
        let flow = self.flow(qpn);
        flow.rp.on_bytes_sent(now, bytes as u64);
        // The byte counter may have raised the rate; the packet leaves at the new one.
        let changed = flow.follow_rate();
        flow.pacer.on_send(now, bytes as u64);
        let rate = flow.rp.rate_bps();
        if changed {
            self.report_rates();
        }
        let mut r = self.monitor.lock();
        r.bytes_sent += bytes as u64;
        r.paced_seconds += cc::transmission_time(bytes as u64, rate).as_secs_f64();
    }

    fn on_cnp(&mut self, now: Instant, qpn: Qpn) {
        let flow = self.flow(qpn);
        flow.rp.on_cnp(now.into());
        flow.follow_rate();
        self.report_rates();
        self.monitor.lock().cnps_received += 1;
    }

    fn on_congestion_experienced(&mut self, now: Instant, qpn: Qpn) -> bool {
        let send = self.np.on_packet(now.into(), qpn, true);
        if send {
            self.monitor.lock().cnps_sent += 1;
        }
        send
    }

    fn poll_cnp(&mut self, now: Instant) -> Option<Qpn> {
        let qpn = self.np.poll_cnp(now.into())?;
        self.monitor.lock().cnps_sent += 1;
        Some(qpn)
    }

    fn next_timer(&self) -> Option<Instant> {
        let flows = self.flows.values().filter_map(|f| f.rp.next_timer());
        flows.chain(self.np.next_timer()).min().map(Instant::from)
    }

    fn on_timer(&mut self, now: Instant) {
        let now = cc::Time::from(now);
        let mut changed = false;
        for flow in self.flows.values_mut() {
            if flow.rp.next_timer().is_some_and(|t| t <= now) {
                flow.rp.on_timer(now);
                changed |= flow.follow_rate();
            }
        }
        if changed {
            self.report_rates();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Instant {
        Instant::from_micros(n)
    }

    #[test]
    fn a_cnp_cuts_the_rate_and_spaces_packets() {
        let (mut hook, monitor) = DcqcnHook::new(DcqcnParams::paper(100e9)).unwrap();
        let qp = Qpn::new(0x11);
        hook.on_sent(us(0), qp, 1250);
        // 1250 bytes at 100 Gb/s: 100 ns.
        assert_eq!(
            hook.next_send_time(us(0), qp),
            Some(Instant::from_nanos(100))
        );
        hook.on_cnp(us(1), qp);
        let r = monitor.report();
        assert_eq!((r.cnps_received, r.rate_cuts), (1, 1));
        // alpha starts at 1: the first cut halves the rate.
        assert_eq!(r.rate_bps, 50e9);
        hook.on_sent(us(2), qp, 1250);
        assert_eq!(
            hook.next_send_time(us(2), qp),
            Some(Instant::from_nanos(2_200))
        );
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

    #[test]
    fn marks_inside_the_interval_owe_one_cnp_at_its_end() {
        let (mut hook, monitor) = DcqcnHook::new(DcqcnParams::paper(100e9)).unwrap();
        let qp = Qpn::new(0x11);
        assert!(hook.on_congestion_experienced(us(0), qp));
        assert!(!hook.on_congestion_experienced(us(10), qp));
        assert!(!hook.on_congestion_experienced(us(20), qp));
        assert_eq!(
            hook.next_timer(),
            Some(us(50)),
            "one CNP owed at the interval's end"
        );
        assert_eq!(hook.poll_cnp(us(49)), None);
        assert_eq!(hook.poll_cnp(us(50)), Some(qp));
        assert_eq!(hook.poll_cnp(us(50)), None, "owed once");
        assert_eq!(monitor.report().cnps_sent, 2);
        // The deferred CNP opened a new interval: a mark at 60 us is inside it.
        assert!(!hook.on_congestion_experienced(us(60), qp));
        assert_eq!(hook.poll_cnp(us(100)), Some(qp));
    }

    #[test]
    fn a_cnp_slows_only_the_queue_pair_it_names() {
        let (mut hook, monitor) = DcqcnHook::new(DcqcnParams::paper(100e9)).unwrap();
        let (a, b) = (Qpn::new(0x11), Qpn::new(0x12));
        hook.on_sent(us(0), a, 1250);
        hook.on_sent(us(0), b, 1250);
        hook.on_cnp(us(1), a);
        assert_eq!(hook.rate_bps(a), 50e9);
        assert_eq!(hook.rate_bps(b), 100e9);
        hook.on_sent(us(2), a, 1250);
        hook.on_sent(us(2), b, 1250);
        // 1250 bytes: 200 ns at 50 Gb/s, 100 ns at 100 Gb/s.
        assert_eq!(
            hook.next_send_time(us(2), a),
            Some(Instant::from_nanos(2_200))
        );
        assert_eq!(
            hook.next_send_time(us(2), b),
            Some(Instant::from_nanos(2_100))
        );
        assert_eq!(hook.next_release(us(2)), Some(Instant::from_nanos(2_100)));
        assert_eq!(
            hook.next_release(Instant::from_nanos(2_100)),
            Some(Instant::from_nanos(2_200))
        );
        let r = monitor.report();
        assert_eq!((r.cnps_received, r.rate_cuts, r.rate_bps), (1, 1, 50e9));
        assert_eq!(
            hook.next_send_time(us(2), Qpn::new(0x13)),
            None,
            "never sent: not held"
        );
    }
}
