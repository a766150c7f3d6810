//! The completer (IBA 9.7.5.1, 9.9.2): acknowledgements, NAKs and responses coming back to an
//! RC requester, and its timers.
//!
//! Loss recovery stays inside the wire protocol; what is ours is when to act:
//! - a PSN sequence error NAK, an implied NAK (a READ response or atomic ACK later than
//!   expected, or an ACK past a READ whose data never came) or an RNR NAK makes the requester
//!   go back to that PSN at once (go-back-N, IBA 9.7.5.1.2); until the response it went back
//!   for comes, later READ responses (and older ones) are the responder still sending what it
//!   was asked before: they restart the timers and are dropped (`restart_timers`), as long
//!   as the responder may still owe them (`responses_owed`);
//! - a **fast retransmit timer**, about one smoothed round trip plus four deviations since the
//!   last transmission or progress, first re-sends the newest packet with AckReq (a tail-loss
//!   probe: if only the tail was lost it fills the hole, otherwise the responder answers with
//!   an ACK or a NAK that says where it stands), and if that brings nothing goes back to the
//!   oldest unacknowledged PSN, with exponential backoff, sending that one packet alone until
//!   the responder answers (see `go_back_on_timer`), and sending that one again while no
//!   answer comes. It runs out at least once between two local ACK timeouts. While packets
//!   wait to go (for the pacer, or for this process's turn on a busy host), it waits again
//!   instead: it ran out while this side did not send. It recovers a lost NAK, a lost
//!   retransmission (the responder NAKs a gap only once, C9-? / rxe `sent_psn_nak`) or a lost
//!   tail in a few round trips instead of a whole local ACK timeout, and it does not consume
//!   `retry_cnt`;
//! - the spec's **local ACK timeout** (4.096 us x 2^timeout, IBA 9.7.6.1.3) still runs from
//!   the last progress; each expiry costs one retry, as does a sequence error NAK that
//!   acknowledges nothing new, and `retry_cnt` + 1 of them without progress fail the request
//!   with RETRY_EXC_ERR, as the spec requires.

use core::time::Duration;

use super::{Ctx, QueuePair};
use crate::time::Instant;
use crate::transport::attrs::{QpState, QpType};
use crate::transport::cq::WcStatus;
use crate::transport::wr::SendOp;
use crate::wire::opcode::op;
use crate::wire::{IbPacketRepr, NakCode, Psn, RnrTimer, Syndrome};

/// The completer's state: its timers, the in-flight window and the loss being recovered.
#[derive(Debug, Default)]
pub(super) struct Completer {
    timers: Timers,
    /// Where the requester last went back, and until when answers to what it had sent before
    /// going back can still arrive (a round trip after its last transmission then). A NAK or
    /// implied NAK asking for the same PSN again before then, and before any progress, is an
    /// echo of the same loss and is not acted on twice; one after it means that what was
    /// sent again was lost again.
    last_rewind: Option<(Psn, Instant)>,
    /// An error NAK that arrived before the responses to earlier READs or atomics: it takes
    /// effect once they are in (see [`QueuePair::on_error_nak`]).
    pending_error: Option<(Psn, NakCode)>,
    /// The in-flight window in packets, and acknowledged packets counted towards growing it.
    window: u32,
    window_credit: u32,
    /// Losses before this PSN is acknowledged belong to the same episode (one shrink each).
    recovery_until: Option<Psn>,
    /// A timer made the requester go back, and no response has come since: until one does,
    /// one packet is in flight (see [`QueuePair::go_back_on_timer`]).
    awaiting_answer: bool,
    /// READ response packets the responder may still send: each READ request sent (or sent
    /// again) asks for the rest of its READ, a FLUSH or ATOMIC WRITE for one empty response,
    /// and each READ response that arrives is one of them. Only while some are owed does a
    /// response the requester does not take restart its timers: a peer that replays old
    /// responses for ever cannot keep a connection that makes no progress from failing with
    /// RETRY_EXC_ERR. Responses lost on the way stay counted until the send queue has
    /// nothing outstanding; the slack is what was lost since then.
    responses_owed: u64,
}

impl Completer {
    /// RTR to RTS: a full window and the retry counters of the QP's attributes.
    pub(super) fn start(&mut self, window: u32, retry_cnt: u8, rnr_retry: u8) {
        self.window = window;
        self.timers.retry_left = retry_cnt;
        self.timers.rnr_left = rnr_retry;
    }

    /// After a flush: nothing outstanding, no timer running.
    pub(super) fn stop(&mut self) {
        self.last_rewind = None;
        self.responses_owed = 0;
        self.pending_error = None;
        self.awaiting_answer = false;
        self.timers.stop();
    }

    /// The in-flight window of the requester, in packets: one while a timer's go-back awaits
    /// the responder's answer.
    pub(super) fn window(&self) -> u32 {
        if self.awaiting_answer { 1 } else { self.window }
    }

    /// A READ response came: one fewer is owed. False if none was.
    fn take_owed_response(&mut self) -> bool {
        let owed = self.responses_owed > 0;
        self.responses_owed = self.responses_owed.saturating_sub(1);
        owed
    }

    /// Waiting out an RNR NAK: the requester sends nothing until then.
    pub(super) fn rnr_waiting(&self) -> bool {
        self.timers.rnr.is_some()
    }
}

/// The requester's deadlines, retry counters and round-trip estimate.
#[derive(Debug, Default)]
struct Timers {
    /// The spec's local ACK timeout.
    ack: Option<Instant>,
    /// The fast retransmit timer.
    fast: Option<Instant>,
    /// Waiting out an RNR NAK; nothing is sent until then.
    rnr: Option<Instant>,
    retry_left: u8,
    rnr_left: u8,
    /// Tail-loss probes sent since the last progress.
    probes: u8,
    /// Doublings of the fast retransmit timer since the last progress.
    backoff: u8,
    /// When the last request packet left.
    last_sent: Option<Instant>,
    srtt: Option<Duration>,
    rttvar: Duration,
    /// A packet with AckReq being timed (Karn: never a retransmitted one).
    sample: Option<(Psn, Instant)>,
}

const MAX_BACKOFF: u8 = 16;

impl Timers {
    fn stop(&mut self) {
        self.ack = None;
        self.fast = None;
        self.rnr = None;
        self.sample = None;
        self.probes = 0;
        self.backoff = 0;
    }

    fn on_rtt(&mut self, sample: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(sample);
                self.rttvar = sample / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(sample);
                self.rttvar = (self.rttvar * 3 + err) / 4;
                self.srtt = Some((srtt * 7 + sample) / 8);
            }
        }
    }
}

/// The local ACK timeout of IBA 9.7.6.1.3; `None` when the attribute is 0 (no timer).
pub fn local_ack_timeout(timeout: u8) -> Option<Duration> {
    match timeout {
        0 => None,
        t => Some(Duration::from_nanos(4_096u64 << t.min(31))),
    }
}

fn nak_status(code: NakCode) -> WcStatus {
    match code {
        NakCode::InvalidRequest => WcStatus::RemInvReqErr,
        NakCode::RemoteAccessError => WcStatus::RemAccessErr,
        NakCode::RemoteOperationalError => WcStatus::RemOpErr,
        _ => WcStatus::BadRespErr,
    }
}

impl QueuePair {
    fn ack_timeout(&self) -> Option<Duration> {
        local_ack_timeout(self.attrs.timeout)
    }

    /// One round trip with its variation (the fast retransmit timeout before backoff): how
    /// long answers to packets sent before going back can keep arriving.
    fn round_trip(&self, ctx: &Ctx<'_>) -> Duration {
        let t = &self.comp.timers;
        let base = match t.srtt {
            Some(srtt) => srtt + t.rttvar * 4,
            None => ctx.config.initial_fast_rto,
        };
        base.max(ctx.config.min_fast_rto)
    }

    /// The fast retransmit timeout, with backoff, never beyond half the local ACK timeout:
    /// between two of those, each of which costs a retry, it acts at least once at no cost.
    /// Capped at the timeout itself, it fell due with it once backed off, and a loss that
    /// took several round trips to recover spent a retry on each (the property test
    /// `rc_workloads_survive_any_faults` ran out of retries at 20% loss, one attempt per
    /// timeout, half of them tail probes the responder dropped).
    fn fast_rto(&self, ctx: &Ctx<'_>) -> Duration {
        let t = &self.comp.timers;
        let rto = self
            .round_trip(ctx)
            .checked_mul(1u32 << t.backoff.min(MAX_BACKOFF))
            .unwrap_or(Duration::MAX);
        match self.ack_timeout() {
            Some(limit) => rto.min(limit / 2),
            None => rto.min(Duration::from_secs(1)),
        }
    }

    /// Bookkeeping of a request packet just sent; `timed` marks a fresh packet with AckReq,
    /// `responses` counts the READ response packets it asks for.
    pub(crate) fn on_transmit(&mut self, ctx: &Ctx<'_>, psn: Psn, timed: bool, responses: u32) {
        let now = ctx.now;
        let fast = now + self.fast_rto(ctx);
        // The local ACK timeout runs from the last progress: only a stopped one starts.
        let ack = match self.comp.timers.ack {
            None => self.ack_timeout().map(|d| now + d),
            running => running,
        };
        let t = &mut self.comp.timers;
        t.fast = Some(fast);
        t.ack = ack;
        t.last_sent = Some(now);
        self.comp.responses_owed += u64::from(responses);
        if timed && t.sample.is_none() {
            t.sample = Some((psn, now));
        }
    }

    /// The earliest deadline of this requester.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if self.init.qp_type != QpType::Rc || !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return None;
        }
        let t = &self.comp.timers;
        // Spelled out: this runs after every call on the queue pair, and the iterator form
        // (`[..].into_iter().flatten().min()`) compiled to a copy through the stack and a loop,
        // 6% of a 64-byte SEND client's user time.
        let earlier = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, None) => a,
            (None, b) => b,
        };
        earlier(earlier(t.ack, t.fast), t.rnr)
    }

    /// Go-back-N to `psn` after a loss; false if there was nothing to go back to.
    fn go_back(&mut self, ctx: &mut Ctx<'_>, psn: Psn) -> bool {
        let rewound = self.rewind(ctx, psn);
        if rewound {
            ctx.stats.rewinds += 1;
            self.shrink_window(ctx);
        }
        rewound
    }

    /// Go-back-N on a timer (the fast retransmit timer after its probe, or the local ACK
    /// timeout): nothing has come back for two timeouts, so either what was in flight was
    /// lost or the responder is not running (descheduled on a busy host: `perf send` under
    /// load saw 169-1756 of 200000 SENDs sent again with no frame lost, a window each time).
    /// Only the oldest packet goes until the responder answers; its answer (an ACK of what it
    /// has, or a NAK) then says where to go on, and the rest follows at once. A real loss
    /// costs one round trip more; a stalled responder costs one packet instead of a window.
    fn go_back_on_timer(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        if self.go_back(ctx, psn) {
            self.comp.awaiting_answer = true;
        }
    }

    /// The requester goes back to `psn`; the round trip being timed no longer can be.
    fn rewind(&mut self, ctx: &Ctx<'_>, psn: Psn) -> bool {
        if !self.sq.rewind(psn) {
            return false;
        }
        // After a timer, everything sent before has been answered or lost: no echoes come.
        let sent = self.comp.timers.last_sent.unwrap_or(ctx.now);
        self.comp.last_rewind = Some((psn, sent + self.round_trip(ctx)));
        self.comp.timers.sample = None;
        true
    }

    /// Everything in flight after a lost packet is sent again, so after a loss the requester
    /// keeps less in flight: the window halves once per loss episode (until what was in
    /// flight when it began is acknowledged), down to `min_inflight_packets`.
    fn shrink_window(&mut self, ctx: &Ctx<'_>) {
        let c = &mut self.comp;
        if c.recovery_until.is_some() {
            return;
        }
        c.window = (c.window / 2).max(ctx.config.min_inflight_packets).max(1);
        c.window_credit = 0;
        c.recovery_until = Some(self.sq.max_sent());
    }

    /// And grows back by one packet per quarter window acknowledged (four per round trip)
    /// while no loss occurs, up to `max_inflight_packets`.
    fn grow_window(&mut self, ctx: &Ctx<'_>, acked: u32) {
        let una = self.sq.una();
        let c = &mut self.comp;
        if c.recovery_until.is_some_and(|r| una.distance(r) >= 0) {
            c.recovery_until = None;
        }
        let max = ctx.config.max_inflight_packets.max(1);
        c.window_credit = c.window_credit.saturating_add(acked);
        while c.window < max && c.window_credit >= (c.window / 4).max(1) {
            c.window_credit -= (c.window / 4).max(1);
            c.window += 1;
        }
    }

    /// Completes every SEND and RDMA WRITE the responder acknowledged up to and including `p`.
    /// Returns true when `p` lies at or past a READ or atomic still waiting for its response:
    /// responses come in PSN order, so that response was lost (an implied NAK, C9-? 9.7.5.1.3).
    fn ack_through(&mut self, ctx: &mut Ctx<'_>, p: Psn) -> bool {
        if p.distance(self.sq.una()) < 0 {
            return false;
        }
        while let Some(w) = self.sq.oldest_started() {
            if w.wr.op.is_local() {
                self.complete_send_front(ctx, WcStatus::Success);
                continue;
            }
            if w.first_psn().distance(p) > 0 {
                break;
            }
            if w.wr.op.needs_response() {
                return true;
            }
            if w.last_psn().distance(p) > 0 {
                self.sq.set_una(p.next());
                break;
            }
            self.sq.set_una(w.last_psn().next());
            self.complete_send_front(ctx, WcStatus::Success);
        }
        false
    }

    /// A response packet (ACK, NAK, READ response, atomic ACK) for this RC requester.
    pub(crate) fn handle_response(&mut self, ctx: &mut Ctx<'_>, pkt: &IbPacketRepr<'_>) {
        let old_una = self.sq.una();
        let psn = pkt.bth.psn;
        // Whether this READ response is one the responder may still owe (none other is).
        let owed = pkt.bth.opcode.is_read_response() && self.comp.take_owed_response();
        if !self.sq.is_outstanding(psn) {
            ctx.stats.stale_responses += 1;
            if owed && psn.distance(old_una) < 0 {
                // A READ asked for again is answered again, after whatever the responder
                // was asked before it: while it sends those, ours waits its turn.
                self.restart_timers(ctx);
            }
            return;
        }
        // The responder answered: a go-back on a timer may send its window again.
        self.comp.awaiting_answer = false;
        match pkt.bth.opcode.low() {
            op::ACKNOWLEDGE => match pkt.ext.aeth.map(|a| a.syndrome) {
                Some(Syndrome::Ack { .. }) => {
                    ctx.stats.acks_received += 1;
                    if self.ack_through(ctx, psn) {
                        self.implied_nak(ctx);
                    }
                }
                Some(Syndrome::Nak(NakCode::PsnSequenceError)) => self.on_sequence_nak(ctx, psn),
                Some(Syndrome::Nak(code)) => self.on_error_nak(ctx, psn, code),
                Some(Syndrome::RnrNak { timer }) => self.on_rnr_nak(ctx, psn, timer),
                _ => ctx.stats.stale_responses += 1,
            },
            op::RDMA_READ_RESPONSE_FIRST..=op::RDMA_READ_RESPONSE_ONLY => {
                self.on_read_response(ctx, psn, pkt.bth.opcode.low(), pkt.payload, owed);
            }
            op::ATOMIC_ACKNOWLEDGE => {
                let orig = pkt.ext.atomic_ack_eth.map_or(0, |a| a.orig);
                self.on_atomic_ack(ctx, psn, orig);
            }
            _ => ctx.stats.stale_responses += 1,
        }
        if matches!(self.state, QpState::Rts | QpState::Sqd) {
            self.after_response(ctx, old_una);
        }
    }

    /// A NAK or implied NAK for `psn` repeats the one the requester already went back for.
    /// Without the time limit, a READ whose request or first response is lost again after
    /// going back would wait for the local ACK timeout each time (the implied NAKs that
    /// report the new loss taken for echoes) and spend `retry_cnt` on every such loss.
    fn echoes_last_rewind(&self, ctx: &Ctx<'_>, psn: Psn) -> bool {
        self.comp
            .last_rewind
            .is_some_and(|(p, until)| p == psn && ctx.now < until)
    }

    fn implied_nak(&mut self, ctx: &mut Ctx<'_>) {
        let una = self.sq.una();
        if !self.echoes_last_rewind(ctx, una) {
            ctx.stats.implied_naks += 1;
            self.go_back(ctx, una);
        }
    }

    fn on_sequence_nak(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        ctx.stats.naks_received += 1;
        if self.ack_through(ctx, psn.sub(1)) {
            return self.implied_nak(ctx);
        }
        // The responder NAKs a gap once; a second NAK for the same PSN is a duplicate packet
        // or older than a retransmission already under way.
        if self.echoes_last_rewind(ctx, psn) {
            return;
        }
        // A NAK that acknowledges nothing new costs a retry, as the local ACK timeout does
        // (rxe's completer too): a peer NAKing the same PSN over and over fails the request
        // with RETRY_EXC_ERR instead of being answered for ever. Progress resets the count.
        if self.spend_retry(ctx) {
            self.go_back(ctx, psn);
        }
    }

    /// Takes one retry for the request at the head of the send queue; when none is left,
    /// fails it with RETRY_EXC_ERR (IBA 9.7.6.1.3), the QP entering ERR, and returns false.
    fn spend_retry(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if self.comp.timers.retry_left == 0 {
            self.complete_send_front(ctx, WcStatus::RetryExcErr);
            self.enter_error(ctx);
            return false;
        }
        self.comp.timers.retry_left -= 1;
        true
    }

    /// A NAK that ends the connection (IBA 9.9.2.2, class B/C/D). Responses to earlier READs
    /// or atomics still missing come first: they may have been overtaken, so the NAK waits
    /// for them (and they are asked for again, as for an implied NAK). If they never come,
    /// the local ACK timeout fails the READ with RETRY_EXC_ERR, as rxe and hardware do.
    fn on_error_nak(&mut self, ctx: &mut Ctx<'_>, psn: Psn, code: NakCode) {
        ctx.stats.naks_received += 1;
        self.comp.pending_error = Some((psn, code));
        if self.ack_through(ctx, psn.sub(1)) {
            return self.implied_nak(ctx);
        }
        self.apply_pending_error(ctx);
    }

    /// Completes the request an error NAK names once everything before it has completed.
    fn apply_pending_error(&mut self, ctx: &mut Ctx<'_>) {
        let Some((psn, code)) = self.comp.pending_error else {
            return;
        };
        if self.sq.oldest_started().is_some_and(|w| w.contains(psn)) {
            self.complete_send_front(ctx, nak_status(code));
            self.enter_error(ctx);
        }
    }

    fn on_rnr_nak(&mut self, ctx: &mut Ctx<'_>, psn: Psn, timer: RnrTimer) {
        ctx.stats.rnr_naks_received += 1;
        if self.ack_through(ctx, psn.sub(1)) {
            return self.implied_nak(ctx);
        }
        // rnr_retry 7 means retry forever (IBA 9.7.5.2.8).
        if self.attrs.rnr_retry != 7 {
            if self.comp.timers.rnr_left == 0 {
                self.complete_send_front(ctx, WcStatus::RnrRetryExcErr);
                return self.enter_error(ctx);
            }
            self.comp.timers.rnr_left -= 1;
        }
        // Not a loss: the window stays.
        if self.rewind(ctx, psn) {
            ctx.stats.rewinds += 1;
        }
        let t = &mut self.comp.timers;
        t.rnr = Some(ctx.now + Duration::from_micros(u64::from(timer.micros())));
        t.ack = None;
        t.fast = None;
    }

    fn on_read_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        psn: Psn,
        low: u8,
        payload: &[u8],
        owed: bool,
    ) {
        if self.ack_through(ctx, psn.sub(1)) {
            if self.comp.last_rewind.is_some() {
                // Later than the response the requester went back for, before that one:
                // the rest of a READ the responder began before our request reached it.
                ctx.stats.stale_responses += 1;
                if owed {
                    self.restart_timers(ctx);
                }
                return;
            }
            return self.implied_nak(ctx);
        }
        let mtu = u64::from(self.attrs.path_mtu.bytes());
        let una = self.sq.una();
        // ATOMIC WRITE and FLUSH are answered by an empty READ response (IBA 1.5, rxe's
        // `send_read_response_ack`).
        let empty = |op: &SendOp| matches!(op, SendOp::AtomicWrite { .. } | SendOp::Flush { .. });
        let Some(w) = self
            .sq
            .oldest_started()
            .filter(|w| (w.wr.op.is_read() || empty(&w.wr.op)) && w.contains(psn) && psn == una)
        else {
            ctx.stats.stale_responses += 1;
            return;
        };
        let offset = psn.distance(w.first_psn()) as u64 * mtu;
        let expected = if empty(&w.wr.op) {
            0
        } else {
            w.len.saturating_sub(offset).min(mtu) as usize
        };
        let last = psn == w.last_psn();
        let ends = matches!(
            low,
            op::RDMA_READ_RESPONSE_LAST | op::RDMA_READ_RESPONSE_ONLY
        );
        if last != ends || payload.len() != expected {
            self.complete_send_front(ctx, WcStatus::BadRespErr);
            return self.enter_error(ctx);
        }
        if ctx
            .mrs
            .scatter(self.init.pd, &w.wr.sg_list, offset, payload)
            .is_err()
        {
            self.complete_send_front(ctx, WcStatus::LocProtErr);
            return self.enter_error(ctx);
        }
        ctx.stats.payload_bytes_delivered += payload.len() as u64;
        self.sq.set_una(psn.next());
        if last {
            self.complete_send_front(ctx, WcStatus::Success);
        }
    }

    fn on_atomic_ack(&mut self, ctx: &mut Ctx<'_>, psn: Psn, orig: u64) {
        if self.ack_through(ctx, psn.sub(1)) {
            return self.implied_nak(ctx);
        }
        let una = self.sq.una();
        let Some(w) = self
            .sq
            .oldest_started()
            .filter(|w| w.wr.op.is_atomic() && w.first_psn() == psn && psn == una)
        else {
            ctx.stats.stale_responses += 1;
            return;
        };
        // The original value lands in local memory in the host's order (little-endian here).
        if ctx
            .mrs
            .scatter(self.init.pd, &w.wr.sg_list, 0, &orig.to_le_bytes())
            .is_err()
        {
            self.complete_send_front(ctx, WcStatus::LocProtErr);
            return self.enter_error(ctx);
        }
        self.sq.set_una(psn.next());
        self.complete_send_front(ctx, WcStatus::Success);
    }

    /// Progress resets the retry counters and timers (IBA 9.7.6.1.3); then the timers are
    /// armed for whatever is still outstanding.
    fn after_response(&mut self, ctx: &mut Ctx<'_>, old_una: Psn) {
        let now = ctx.now;
        self.apply_pending_error(ctx);
        if self.state == QpState::Err {
            return;
        }
        self.sq.skip_acked();
        if self.sq.una() != old_una {
            let acked = self.sq.una().distance(old_una).max(0) as u32;
            self.grow_window(ctx, acked);
            let una = self.sq.una();
            let t = &mut self.comp.timers;
            t.retry_left = self.attrs.retry_cnt;
            t.rnr_left = self.attrs.rnr_retry;
            t.probes = 0;
            // Karn's algorithm: a backed-off timer stays backed off until a packet sent only
            // once is timed. Were it reset by any progress, a peer whose round trip grew
            // (all in flight sent again, so no sample) would fire the timer at the old
            // round trip over and over.
            if let Some((psn, sent)) = t.sample
                && psn.distance(una) < 0
            {
                t.on_rtt(now - sent);
                t.sample = None;
                t.backoff = 0;
            }
            if self
                .comp
                .last_rewind
                .is_some_and(|(n, _)| n.distance(una) < 0)
            {
                self.comp.last_rewind = None;
            }
            t.ack = None;
            t.fast = None;
        }
        if !self.sq.outstanding() {
            self.comp.responses_owed = 0;
        }
        self.rearm(ctx);
        self.check_drained(ctx);
    }

    /// The responder is busy answering what it was asked before (a READ responder sends a
    /// whole READ before it takes the next request: rxe holds `qp->resp.res` until the
    /// last response, so after a response lost early in a 4 MiB READ thousands more
    /// follow). Both timers start again, as rxe's completer restarts its retransmit timer
    /// on every packet: going back on each of those responses, or when the timers ran out
    /// while they came, would ask for the READ again each time, and each request queues one
    /// more replay of the rest of the READ behind the last (`ib_read_bw -a` against rxe
    /// asked for one 16 times in 1.7 s and failed with RETRY_EXC_ERR). Progress still resets
    /// the retry counters; this does not.
    fn restart_timers(&mut self, ctx: &Ctx<'_>) {
        if !self.sq.outstanding() || self.comp.timers.rnr.is_some() {
            return;
        }
        let now = ctx.now;
        let fast = now + self.fast_rto(ctx);
        let ack = self.ack_timeout().map(|d| now + d);
        let t = &mut self.comp.timers;
        t.fast = Some(fast);
        t.ack = ack;
        t.probes = 0;
    }

    fn rearm(&mut self, ctx: &Ctx<'_>) {
        let now = ctx.now;
        let fast = now + self.fast_rto(ctx);
        let ack = self.ack_timeout().map(|d| now + d);
        let outstanding = self.sq.outstanding();
        let t = &mut self.comp.timers;
        if !outstanding {
            t.ack = None;
            t.fast = None;
            t.probes = 0;
            return;
        }
        if t.rnr.is_some() {
            return;
        }
        t.ack = t.ack.or(ack);
        t.fast = t.fast.or(Some(fast));
    }

    /// Runs the timers due at `now`.
    pub(crate) fn on_timeout(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        if self.comp.timers.rnr.is_some_and(|t| t <= now) {
            self.comp.timers.rnr = None;
            self.rearm(ctx);
        }
        if self.comp.timers.ack.is_some_and(|t| t <= now) {
            ctx.stats.local_ack_timeouts += 1;
            if !self.spend_retry(ctx) {
                return;
            }
            let una = self.sq.una();
            self.go_back_on_timer(ctx, una);
            self.comp.timers.ack = None;
            self.comp.timers.fast = None;
            self.comp.timers.probes = 0;
            self.rearm(ctx);
        }
        if self.comp.timers.fast.is_some_and(|t| t <= now) {
            self.on_fast_timer(ctx);
        }
    }

    fn on_fast_timer(&mut self, ctx: &mut Ctx<'_>) {
        if self.has_sendable(ctx) {
            // Packets wait to go: the timer ran out while this side did not send, which
            // says nothing of the peer. They go first and arm it again. Acting instead
            // probed the tail and then went back, with one packet in flight until an
            // answer: on a host whose cores were taken (our conformance agent descheduled
            // for milliseconds at a time) the rest of a message then never went to a
            // responder that answered only once the message was complete.
            self.comp.timers.fast = None;
            return self.rearm(ctx);
        }
        let tail = self.sq.max_sent().sub(1);
        let probeable = self
            .sq
            .holding(tail)
            .is_some_and(|w| !w.wr.op.needs_response());
        let t = &mut self.comp.timers;
        // Awaiting the answer to a timer's go-back, the packet to send again is that one:
        // past a gap the responder drops the tail unanswered (it NAKs a gap once).
        if t.probes == 0 && probeable && !self.comp.awaiting_answer {
            t.probes = 1;
            self.sq.set_probe(tail);
        } else {
            t.probes = 0;
            t.backoff = (t.backoff + 1).min(MAX_BACKOFF);
            ctx.stats.fast_retransmits += 1;
            let una = self.sq.una();
            self.go_back_on_timer(ctx, una);
        }
        self.comp.timers.fast = None;
        self.rearm(ctx);
    }
}
