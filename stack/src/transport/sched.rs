//! Which queue pairs the engine has to look at: those with a timer due (an ordered set of
//! deadlines) and those that may have a packet to send (a round-robin queue). Both are kept
//! up to date after every call that touches a queue pair, so neither the next deadline nor
//! the next packet costs a pass over every queue pair: an endpoint with 10,000 idle queue
//! pairs does the work of the few busy ones.

use std::collections::{BTreeSet, VecDeque};

use crate::time::Instant;
use crate::wire::Qpn;

/// What the schedule records of one queue pair (kept in the queue pair).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpSlot {
    /// Its entry in the deadline set.
    deadline: Option<Instant>,
    /// It is in the ready queue.
    ready: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Schedule {
    deadlines: BTreeSet<(Instant, u32)>,
    /// May have something to send, oldest turn first. A destroyed queue pair's entry stays
    /// until its turn comes and is skipped then.
    ready: VecDeque<Qpn>,
}

impl Schedule {
    /// After a call on `qpn`: its deadline is now `deadline`; `ready` puts it in the queue
    /// of those that may send (anything that touched it may have given it a packet).
    pub fn update(&mut self, qpn: Qpn, slot: &mut QpSlot, deadline: Option<Instant>, ready: bool) {
        if slot.deadline != deadline {
            if let Some(old) = slot.deadline {
                self.deadlines.remove(&(old, qpn.value()));
            }
            if let Some(new) = deadline {
                self.deadlines.insert((new, qpn.value()));
            }
            slot.deadline = deadline;
        }
        if ready && !slot.ready {
            slot.ready = true;
            self.ready.push_back(qpn);
        }
    }

    /// A queue pair that goes away.
    pub fn forget(&mut self, qpn: Qpn, slot: &QpSlot) {
        if let Some(old) = slot.deadline {
            self.deadlines.remove(&(old, qpn.value()));
        }
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(t, _)| t)
    }

    /// The queue pairs whose deadline is at or before `now`, in deadline order.
    pub fn due(&self, now: Instant) -> Vec<Qpn> {
        self.deadlines
            .range(..=(now, u32::MAX))
            .map(|&(_, q)| Qpn::new(q))
            .collect()
    }

    /// Queue pairs waiting for a turn to send.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// The queue pair whose turn it is.
    pub fn next_ready(&mut self) -> Option<Qpn> {
        self.ready.pop_front()
    }

    /// Back in the queue, last: it sent (or could not be let send) and may send again.
    pub fn requeue(&mut self, qpn: Qpn) {
        self.ready.push_back(qpn);
    }

    /// It had nothing to send: out of the queue until something touches it again.
    pub fn idle(slot: &mut QpSlot) {
        slot.ready = false;
    }

    /// Deadlines recorded (queue pairs with a timer running).
    pub fn deadlines(&self) -> usize {
        self.deadlines.len()
    }
}
