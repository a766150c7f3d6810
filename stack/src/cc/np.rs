//! The notification point (receiver side of DCQCN, SIGCOMM 2015 section 3.2).
//!
//! A CE-marked packet for a QP that had no CNP in the last interval (50 us) is answered with a
//! CNP at once. A marked packet inside the interval is not forgotten: one CNP goes out when
//! the interval ends ("at most one CNP every N microseconds for the flow, if any packet that
//! arrives within that time window was marked"). So a QP gets a CNP in every interval that
//! saw a mark, which is what the CoNEXT 2016 fluid model's 1 - (1-p)^(tau R_C) counts; the
//! authors' ns-3 code and htsim's DCQCN sink behave the same way.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::Time;
use crate::wire::Qpn;

/// The paper's and mlx5's minimum spacing of CNPs to one QP.
pub const CNP_INTERVAL: Time = Time::from_micros(50);

#[derive(Debug, Clone, Copy)]
struct QpState {
    last_cnp: Time,
    /// A marked packet arrived since `last_cnp`: a CNP is due at `last_cnp + interval`.
    marked_since: bool,
}

/// Per-QP CNP generation.
#[derive(Debug, Clone)]
pub struct NotificationPoint {
    interval: Time,
    qps: HashMap<Qpn, QpState>,
    /// Deferred CNPs: (due time, QPN). An entry whose QP no longer waits is skipped.
    due: BinaryHeap<Reverse<(Time, u32)>>,
    cnps: u64,
}

impl Default for NotificationPoint {
    fn default() -> Self {
        NotificationPoint::new(CNP_INTERVAL)
    }
}

impl NotificationPoint {
    /// A notification point sending at most one CNP per flow per `interval`.
    pub fn new(interval: Time) -> NotificationPoint {
        NotificationPoint {
            interval,
            qps: HashMap::new(),
            due: BinaryHeap::new(),
            cnps: 0,
        }
    }

    /// A packet for `qpn` arrived with (`ce`) or without a CE mark: true if a CNP must be sent
    /// to its requester now. A mark inside the interval defers a CNP to
    /// [`NotificationPoint::poll_cnp`] instead.
    pub fn on_packet(&mut self, now: Time, qpn: Qpn, ce: bool) -> bool {
        if !ce {
            return false;
        }
        match self.qps.get_mut(&qpn) {
            Some(qp) if now.saturating_sub(qp.last_cnp) < self.interval => {
                if !qp.marked_since {
                    qp.marked_since = true;
                    let at = qp.last_cnp + self.interval;
                    self.due.push(Reverse((at, qpn.value())));
                }
                false
            }
            _ => {
                self.qps.insert(
                    qpn,
                    QpState {
                        last_cnp: now,
                        marked_since: false,
                    },
                );
                self.cnps += 1;
                true
            }
        }
    }

    /// When the next deferred CNP is due.
    pub fn next_timer(&self) -> Option<Time> {
        self.due.peek().map(|Reverse((at, _))| *at)
    }

    /// A QP whose deferred CNP is due at or before `now`; call until it returns `None`.
    pub fn poll_cnp(&mut self, now: Time) -> Option<Qpn> {
        while let Some(&Reverse((at, value))) = self.due.peek() {
            if at > now {
                return None;
            }
            self.due.pop();
            let qpn = Qpn::new(value);
            // A QP removed and made again since this entry was pushed owes on its own timing.
            let interval = self.interval;
            let owed = |qp: &&mut QpState| qp.marked_since && qp.last_cnp + interval == at;
            if let Some(qp) = self.qps.get_mut(&qpn).filter(owed) {
                qp.marked_since = false;
                qp.last_cnp = now;
                self.cnps += 1;
                return Some(qpn);
            }
        }
        None
    }

    /// Forgets a destroyed QP, and any CNP it was owed.
    pub fn remove(&mut self, qpn: Qpn) {
        self.qps.remove(&qpn);
    }

    /// CNPs decided so far.
    pub fn cnps(&self) -> u64 {
        self.cnps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Time {
        Time::from_micros(n)
    }

    #[test]
    fn one_cnp_per_qp_per_interval() {
        let mut np = NotificationPoint::default();
        let (a, b) = (Qpn::new(0x11), Qpn::new(0x12));
        assert!(
            !np.on_packet(us(0), a, false),
            "unmarked packets never trigger a CNP"
        );
        assert_eq!(np.next_timer(), None);
        assert!(np.on_packet(us(1), a, true));
        assert!(!np.on_packet(us(2), a, true));
        assert!(!np.on_packet(us(3), a, true));
        assert!(np.on_packet(us(2), b, true), "the limit is per QP");
        // The marks at 2 and 3 us owe one CNP, at 51 us.
        assert_eq!(np.next_timer(), Some(us(51)));
        assert_eq!(np.poll_cnp(us(50)), None);
        assert_eq!(np.poll_cnp(us(51)), Some(a));
        assert_eq!(np.poll_cnp(us(51)), None);
        assert_eq!(np.next_timer(), None);
        assert!(
            !np.on_packet(us(100), a, true),
            "49 us after the deferred CNP"
        );
        assert_eq!(np.cnps(), 3);
    }

    #[test]
    fn an_interval_without_marks_owes_nothing() {
        let mut np = NotificationPoint::default();
        let a = Qpn::new(7);
        assert!(np.on_packet(us(0), a, true));
        assert!(!np.on_packet(us(10), a, false));
        assert_eq!(np.poll_cnp(us(1000)), None);
        assert!(
            np.on_packet(us(60), a, true),
            "the next mark after the interval: at once"
        );
    }

    #[test]
    fn a_removed_qp_is_owed_nothing() {
        let mut np = NotificationPoint::default();
        let a = Qpn::new(7);
        assert!(np.on_packet(us(0), a, true));
        assert!(!np.on_packet(us(1), a, true));
        np.remove(a);
        assert!(np.on_packet(us(30), a, true));
        assert!(!np.on_packet(us(35), a, true));
        assert_eq!(
            np.poll_cnp(us(51)),
            None,
            "the old QP's deferred CNP is gone"
        );
        assert_eq!(np.poll_cnp(us(80)), Some(a));
    }
}
