//! One requester's view of an RC connection, rebuilt from both directions of the capture: the
//! requests it sent (one flow) and the responses it got (the reverse flow).
//!
//! The rules are the requester's in IBA Vol. 1 9.7: PSNs are given out in order, so a request
//! at or before the highest PSN already used is a resend (go-back-N, 9.7.5.1); an ACK
//! acknowledges every request up to its PSN (coalescing, 9.7.5.1.1); a PSN sequence error NAK
//! names the PSN the responder expected (9.7.5.2.2); an RNR NAK asks for a retry of the named
//! PSN after the RNR timer (9.7.5.2.8); a READ response or atomic ACK later than the PSN the
//! requester expects is an implied NAK (9.7.5.1.3). Every list is capped; only counters grow.

use std::collections::VecDeque;

use super::report::{
    AckNamingResponse, Episode, ImpliedNak, LossCause, MessageKind, NakEvent, RnrEvent, Trigger,
};
use super::seen::SeenWindow;
use super::sketch::LatencyHistogram;
use crate::transport::Mtu;
use crate::wire::opcode::op;
use crate::wire::{Msn, NakCode, Opcode, Psn};

/// Messages tracked between being sent and being acknowledged.
const OUTSTANDING_CAP: usize = 4096;
/// Events kept in detail per requester (the counters go on).
pub(crate) const EVENTS_KEPT: usize = 32;
/// Answered READs and atomics remembered, to tell an ACK that names one.
const ANSWERED_KEPT: usize = 8;

/// A request message from its first packet to its acknowledgement.
#[derive(Debug, Clone)]
struct Message {
    kind: MessageKind,
    first_psn: Psn,
    last_psn: Psn,
    /// All packets of the message have been sent.
    complete: bool,
    /// Part of it was sent again: no RTT sample (Karn's rule).
    resent: bool,
    /// Time of the last packet sent (the one the ACK answers).
    last_ts: u64,
    /// READ: the PSN of the next response expected (starts at `first_psn`).
    response_next: Psn,
    /// READ and atomics: the first response arrived.
    answered: bool,
    /// READ: the DMA length asked for (0 when the capture did not show it).
    read_len: u32,
}

/// A go-back-N episode in progress.
#[derive(Debug, Clone)]
struct Active {
    episode: Episode,
    /// Highest PSN used before the episode began: recovery means getting past it.
    high_water: Psn,
    last_resent: Psn,
}

/// Why the requester might be about to resend.
#[derive(Debug, Clone, Copy)]
struct Pending {
    trigger: Trigger,
    ts: u64,
}

/// How a response packet answers requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Response {
    Ack,
    Nak(NakCode),
    Rnr {
        min_wait_us: u32,
    },
    /// The READ response opcode's low bits say first/middle/last/only.
    Read {
        opcode: Opcode,
        payload_len: u32,
    },
    Atomic,
}

/// What the requester state learned from one packet, for per-packet annotations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// A request sent again (at or before the highest PSN already used).
    pub resent: bool,
    /// A response that implied a NAK.
    pub implied_nak: bool,
    /// A READ response or atomic ACK that brings the requester nothing new: one past the
    /// PSN it expects, which it drops (the first after a loss also implies a NAK), or a
    /// response it already has (seen at the responder: one sent again because the first
    /// was lost after the capture point).
    pub no_new_data: bool,
}

/// What a READ response or atomic ACK is to the request waiting for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// The response expected next, or one no tracked request waits for.
    Taken,
    /// Past the expected one; `implied_nak` for the first since that one was lost.
    Early { implied_nak: bool },
    /// A response the requester already has.
    Duplicate,
}

#[derive(Debug, Clone)]
pub(crate) struct Requester {
    pub(crate) seen: SeenWindow,
    /// Highest PSN used so far, by requests or by the READ responses they caused.
    high: Option<Psn>,
    outstanding: VecDeque<Message>,
    last_tx_ts: u64,
    pending: Option<Pending>,
    /// The response PSN the last implied NAK expected, until that response comes: later
    /// responses past it meanwhile (the rest of a READ the responder had begun, or the
    /// answer to the requester's resend with its first packet lost again) tell of no new
    /// loss.
    implied_for: Option<Psn>,
    /// The highest PSN of a READ response or atomic ACK taken so far.
    delivered: Option<Psn>,
    /// The path MTU, once a packet that is not its message's last showed it (only the last
    /// packet of a message may be shorter, IBA 9.7.3.1).
    mtu: Option<u32>,
    /// The PSN the responder last refused with an RNR NAK, until an ACK covers it.
    rnr_refused: Option<Psn>,
    active: Option<Active>,
    /// The last episode to end, and whether `episodes` holds it.
    finished: Option<(Active, bool)>,
    pub(crate) episodes: Vec<Episode>,
    pub(crate) episode_count: u64,
    pub(crate) packets_resent: u64,
    pub(crate) nak_events: Vec<NakEvent>,
    pub(crate) nak_causes: [u64; LossCause::COUNT],
    pub(crate) rnr_events: Vec<RnrEvent>,
    pub(crate) implied: Vec<ImpliedNak>,
    pub(crate) implied_count: u64,
    /// The PSN spans of the last requests answered by a response of their own, newest at
    /// `answered_next - 1` (a ring).
    answered: [Option<(Psn, Psn, MessageKind)>; ANSWERED_KEPT],
    answered_next: usize,
    pub(crate) acks_naming: Vec<AckNamingResponse>,
    pub(crate) acks_naming_count: u64,
    pub(crate) messages: [u64; MessageKind::COUNT],
    pub(crate) message_bytes: u64,
    pub(crate) messages_acked: u64,
    /// Packets that continue a message whose start the capture did not show.
    pub(crate) orphan_packets: u64,
    /// Messages abandoned before their last packet (a new one began).
    pub(crate) broken_messages: u64,
    /// Messages forgotten because too many were outstanding.
    pub(crate) overflowed: u64,
    pub(crate) msn_first: Option<Msn>,
    pub(crate) msn_last: Option<Msn>,
    pub(crate) rtt: LatencyHistogram,
}

fn kind_of(opcode: Opcode) -> MessageKind {
    match opcode.low() {
        op::SEND_FIRST..=op::SEND_ONLY_WITH_IMMEDIATE
        | op::SEND_LAST_WITH_INVALIDATE
        | op::SEND_ONLY_WITH_INVALIDATE => MessageKind::Send,
        op::RDMA_WRITE_FIRST..=op::RDMA_WRITE_ONLY_WITH_IMMEDIATE => MessageKind::Write,
        op::RDMA_READ_REQUEST => MessageKind::Read,
        op::COMPARE_SWAP | op::FETCH_ADD => MessageKind::Atomic,
        op::FLUSH => MessageKind::Flush,
        _ => MessageKind::AtomicWrite,
    }
}

/// Appends unless the list is full; true if appended.
fn push_capped<T>(list: &mut Vec<T>, item: T) -> bool {
    let room = list.len() < EVENTS_KEPT;
    if room {
        list.push(item);
    }
    room
}

/// `a` at or after `b` in PSN order.
fn at_or_after(a: Psn, b: Psn) -> bool {
    a.distance(b) >= 0
}

impl Requester {
    /// Bytes this requester holds, on the heap included (for limits and tests).
    pub(crate) fn bytes(&self) -> usize {
        core::mem::size_of::<Requester>()
            + self.seen.heap_bytes()
            + self.rtt.heap_bytes()
            + self.outstanding.capacity() * core::mem::size_of::<Message>()
            + self.episodes.capacity() * core::mem::size_of::<Episode>()
            + self.nak_events.capacity() * core::mem::size_of::<NakEvent>()
            + self.rnr_events.capacity() * core::mem::size_of::<RnrEvent>()
            + self.implied.capacity() * core::mem::size_of::<ImpliedNak>()
            + self.acks_naming.capacity() * core::mem::size_of::<AckNamingResponse>()
    }

    pub(crate) fn new() -> Requester {
        Requester {
            seen: SeenWindow::new(),
            high: None,
            outstanding: VecDeque::new(),
            last_tx_ts: 0,
            pending: None,
            implied_for: None,
            delivered: None,
            mtu: None,
            rnr_refused: None,
            active: None,
            finished: None,
            episodes: Vec::new(),
            episode_count: 0,
            packets_resent: 0,
            nak_events: Vec::new(),
            nak_causes: [0; LossCause::COUNT],
            rnr_events: Vec::new(),
            implied: Vec::new(),
            implied_count: 0,
            answered: [None; ANSWERED_KEPT],
            answered_next: 0,
            acks_naming: Vec::new(),
            acks_naming_count: 0,
            messages: [0; MessageKind::COUNT],
            message_bytes: 0,
            messages_acked: 0,
            orphan_packets: 0,
            broken_messages: 0,
            overflowed: 0,
            msn_first: None,
            msn_last: None,
            rtt: LatencyHistogram::default(),
        }
    }

    pub(crate) fn high(&self) -> Option<Psn> {
        self.high
    }

    /// The episode still open at the end of the capture, if any.
    pub(crate) fn open_episode(&self) -> Option<&Episode> {
        self.active.as_ref().map(|a| &a.episode)
    }

    /// A request packet of an RC flow (the seen window has already counted it); `read_len`
    /// is a READ request's DMA length.
    pub(crate) fn request(
        &mut self,
        ts: u64,
        opcode: Opcode,
        psn: Psn,
        payload: u32,
        read_len: Option<u32>,
    ) -> Verdict {
        self.learn_mtu(opcode, payload);
        let resent = self.high.is_some_and(|h| at_or_after(h, psn)) || self.inside_newest_read(psn);
        // The retry of a PSN refused by RNR NAKs ends the wait of each of them.
        for e in self.rnr_events.iter_mut().rev() {
            if e.wait_ns.is_some() {
                break;
            }
            if e.psn == psn {
                e.wait_ns = Some(ts.saturating_sub(e.ts));
            }
        }
        if resent {
            self.resend(ts, psn);
        } else {
            self.close_if_past(ts, psn);
            self.high = Some(psn);
        }
        self.track_message(ts, opcode, psn, payload, read_len.unwrap_or(0), resent);
        self.last_tx_ts = ts;
        Verdict {
            resent,
            ..Verdict::default()
        }
    }

    /// A packet not the last of its message carries a whole path MTU of payload (one of
    /// the five IBA MTUs: any other length tells nothing).
    fn learn_mtu(&mut self, opcode: Opcode, payload: u32) {
        if !opcode.is_last() && Mtu::from_bytes(payload).is_some() {
            self.mtu = Some(payload);
        }
    }

    /// `psn` lies among the response PSNs of the newest READ, past its first: the requester
    /// asks for the rest of a READ whose later responses it has not seen (lost, or not yet
    /// sent: a tail loss), not for a new one. Its span is its DMA length in path MTUs; no
    /// later request shows it, and no response may have.
    fn inside_newest_read(&self, psn: Psn) -> bool {
        let (Some(m), Some(mtu)) = (self.outstanding.back(), self.mtu) else {
            return false;
        };
        let span = i64::from(m.read_len.div_ceil(mtu).max(1));
        let k = i64::from(psn.distance(m.first_psn));
        m.kind == MessageKind::Read && (1..span).contains(&k)
    }

    fn resend(&mut self, ts: u64, psn: Psn) {
        self.packets_resent += 1;
        self.reopen(psn);
        if let Some(a) = &mut self.active {
            if psn.distance(a.last_resent) > 0 {
                a.last_resent = psn;
                a.episode.packets_resent += 1;
                return;
            }
            // Went back again before recovering: the episode ends here, interrupted.
            self.finish(None, true);
        }
        let (trigger, trigger_ts) = match self.pending.take() {
            Some(p) => (p.trigger, p.ts),
            None => (Trigger::Unseen, self.last_tx_ts),
        };
        for m in self.outstanding.iter_mut() {
            if !m.complete || at_or_after(m.last_psn, psn) {
                m.resent = true;
            }
        }
        self.episode_count += 1;
        self.active = Some(Active {
            episode: Episode {
                first_psn: psn,
                trigger,
                trigger_ts,
                start_ts: ts,
                packets_resent: 1,
                recovered_ts: None,
                interrupted: false,
            },
            high_water: self.high.unwrap_or(psn),
            last_resent: psn,
        });
    }

    fn finish(&mut self, recovered_ts: Option<u64>, interrupted: bool) {
        if let Some(mut a) = self.active.take() {
            a.episode.recovered_ts = recovered_ts;
            a.episode.interrupted = interrupted;
            let kept = push_capped(&mut self.episodes, a.episode);
            self.finished = Some((a, kept));
        }
    }

    /// A resend that carries on where the last finished episode stopped, with nothing new on
    /// the wire to set it off, is that episode going on: what ended it (an ACK the requester
    /// evidently did not get) was lost after the capture point.
    fn reopen(&mut self, psn: Psn) {
        if self.active.is_some() || self.pending.is_some() {
            return;
        }
        let Some((a, kept)) = self.finished.take() else {
            return;
        };
        if a.last_resent.next() != psn {
            self.finished = Some((a, kept));
            return;
        }
        if kept {
            self.episodes.pop();
        }
        let mut a = a;
        a.episode.recovered_ts = None;
        a.episode.interrupted = false;
        self.active = Some(a);
    }

    /// Ends the open episode once the requester is past its high-water mark.
    fn close_if_past(&mut self, ts: u64, psn: Psn) {
        if self
            .active
            .as_ref()
            .is_some_and(|a| psn.distance(a.high_water) > 0)
        {
            self.finish(Some(ts), false);
        }
    }

    /// Follows messages from first to last packet (`read_len`: a READ's DMA length). A
    /// resent first packet belongs to a message already tracked; a resent middle or last one
    /// may fill a gap the capture left.
    fn track_message(
        &mut self,
        ts: u64,
        opcode: Opcode,
        psn: Psn,
        payload: u32,
        read_len: u32,
        resent: bool,
    ) {
        if opcode.is_first() {
            if resent {
                return;
            }
            if self.outstanding.back().is_some_and(|m| !m.complete) {
                self.broken_messages += 1;
                self.outstanding.pop_back();
            }
            if self.outstanding.len() >= OUTSTANDING_CAP {
                self.outstanding.pop_front();
                self.overflowed += 1;
            }
            let kind = kind_of(opcode);
            let complete = opcode.is_last();
            if complete {
                self.messages[kind as usize] += 1;
            }
            self.message_bytes += u64::from(payload);
            self.outstanding.push_back(Message {
                kind,
                first_psn: psn,
                last_psn: psn,
                complete,
                resent: false,
                last_ts: ts,
                response_next: psn,
                answered: false,
                read_len,
            });
            return;
        }
        match self.outstanding.back_mut() {
            Some(m) if !m.complete && m.last_psn.next() == psn => {
                m.last_psn = psn;
                m.last_ts = ts;
                m.resent |= resent;
                self.message_bytes += u64::from(payload);
                if opcode.is_last() {
                    m.complete = true;
                    self.messages[m.kind as usize] += 1;
                }
            }
            _ if !resent => self.orphan_packets += 1,
            _ => {}
        }
    }

    fn note_msn(&mut self, msn: Msn) {
        self.msn_first.get_or_insert(msn);
        self.msn_last = Some(msn);
    }

    /// A response from the responder (on the reverse flow) at `psn`.
    pub(crate) fn response(&mut self, ts: u64, psn: Psn, msn: Option<Msn>, r: Response) -> Verdict {
        if let Some(msn) = msn {
            self.note_msn(msn);
        }
        let mut verdict = Verdict::default();
        match r {
            Response::Ack => {
                self.check_ack_names_response(ts, psn);
                verdict.implied_nak = self.acknowledge(ts, psn, true);
                self.recovered_by_response(ts, psn);
            }
            Response::Nak(code) => {
                self.nak(ts, psn, code);
                self.acknowledge(ts, psn.sub(1), false);
            }
            Response::Rnr { min_wait_us } => {
                self.rnr_events_push(ts, psn, min_wait_us);
                self.pending = Some(Pending {
                    trigger: Trigger::RnrNak,
                    ts,
                });
                self.acknowledge(ts, psn.sub(1), false);
            }
            Response::Read {
                opcode,
                payload_len,
            } => {
                self.learn_mtu(opcode, payload_len);
                let last = matches!(
                    opcode.low(),
                    op::RDMA_READ_RESPONSE_LAST | op::RDMA_READ_RESPONSE_ONLY
                );
                self.answer(ts, psn, last, &mut verdict);
                self.raise_high(psn);
                if last {
                    self.recovered_by_response(ts, psn);
                }
            }
            Response::Atomic => {
                self.answer(ts, psn, true, &mut verdict);
                self.recovered_by_response(ts, psn);
            }
        }
        verdict
    }

    fn raise_high(&mut self, psn: Psn) {
        if self.high.is_none_or(|h| psn.distance(h) > 0) {
            self.high = Some(psn);
        }
    }

    fn rnr_events_push(&mut self, ts: u64, psn: Psn, min_wait_us: u32) {
        if self.rnr_events.len() < EVENTS_KEPT {
            self.rnr_events.push(RnrEvent {
                ts,
                psn,
                min_wait_us,
                wait_ns: None,
            });
        }
        self.rnr_refused = Some(psn);
    }

    fn nak(&mut self, ts: u64, psn: Psn, code: NakCode) {
        let cause = match code {
            NakCode::PsnSequenceError if self.rnr_refused == Some(psn) => LossCause::RnrRefused,
            NakCode::PsnSequenceError if self.seen.contains(psn) => LossCause::AfterCapturePoint,
            NakCode::PsnSequenceError
                if self.seen.highest().is_some_and(|h| at_or_after(h, psn)) =>
            {
                LossCause::BeforeCapturePoint
            }
            NakCode::PsnSequenceError => LossCause::Unknown,
            _ => LossCause::Rejected,
        };
        self.nak_causes[cause as usize] += 1;
        let request = self
            .outstanding
            .iter()
            .find(|m| {
                at_or_after(psn, m.first_psn) && (!m.complete || at_or_after(m.last_psn, psn))
            })
            .map(|m| m.kind);
        push_capped(
            &mut self.nak_events,
            NakEvent {
                ts,
                psn,
                code,
                cause,
                request,
            },
        );
        if code == NakCode::PsnSequenceError {
            self.pending = Some(Pending {
                trigger: Trigger::Nak(code),
                ts,
            });
        }
    }

    fn implied_nak(&mut self, ts: u64, expected: Psn, got: Psn) -> bool {
        if self.implied_for == Some(expected) {
            return false;
        }
        self.implied_for = Some(expected);
        self.implied_count += 1;
        push_capped(&mut self.implied, ImpliedNak { ts, expected, got });
        self.pending = Some(Pending {
            trigger: Trigger::ImpliedNak,
            ts,
        });
        true
    }

    /// Retires the messages an ACK at `psn` covers; `explicit` for a real ACK (which also
    /// gives an RTT sample for the message it names). Returns true if the ACK jumped over an
    /// unanswered READ or atomic: an implied NAK.
    fn acknowledge(&mut self, ts: u64, psn: Psn, explicit: bool) -> bool {
        if explicit && self.rnr_refused.is_some_and(|r| at_or_after(psn, r)) {
            self.rnr_refused = None;
        }
        while let Some(m) = self.outstanding.front() {
            if !at_or_after(psn, m.last_psn) || !m.complete {
                return false;
            }
            if waits_for_response(m) {
                // Only its responses complete a READ or atomic; an ACK past it means they are lost.
                let expected = m.response_next;
                return explicit && self.implied_nak(ts, expected, psn);
            }
            if explicit && m.last_psn == psn && !m.resent {
                self.rtt.record(ts.saturating_sub(m.last_ts));
            }
            self.outstanding.pop_front();
            self.messages_acked += 1;
        }
        false
    }

    /// Retires SEND/WRITE messages wholly before `psn` (a response implicitly acknowledges
    /// them); true if the oldest message left is a READ or atomic waiting for its response.
    fn retire_before(&mut self, psn: Psn) -> bool {
        while let Some(m) = self.outstanding.front() {
            if waits_for_response(m) {
                return true;
            }
            if !m.complete || at_or_after(m.last_psn, psn) {
                return false;
            }
            self.outstanding.pop_front();
            self.messages_acked += 1;
        }
        false
    }

    /// [`Self::reply`], and what it means for the packet's `verdict`.
    fn answer(&mut self, ts: u64, psn: Psn, ends_message: bool, verdict: &mut Verdict) {
        let reply = self.reply(ts, psn, ends_message);
        verdict.implied_nak = reply == Reply::Early { implied_nak: true };
        // Taken again: a request the capture saw answered was asked again, so its earlier
        // answer was lost past the capture point.
        let new = reply == Reply::Taken && self.delivered.is_none_or(|d| psn.distance(d) > 0);
        if new {
            self.delivered = Some(psn);
        }
        verdict.no_new_data = !new;
    }

    /// A READ response or atomic ACK at `psn`; `ends_message` for the last (or only) one.
    fn reply(&mut self, ts: u64, psn: Psn, ends_message: bool) -> Reply {
        if !self.retire_before(psn) {
            return Reply::Taken;
        }
        let Some(m) = self.outstanding.front_mut() else {
            return Reply::Taken;
        };
        let expected = m.response_next;
        let d = psn.distance(expected);
        if d > 0 {
            let implied_nak = self.implied_nak(ts, expected, psn);
            return Reply::Early { implied_nak };
        }
        if d < 0 {
            // Before the oldest READ or atomic the capture saw asked, and past every response
            // taken: the answer to a request lost before the capture point, which shows only
            // as a resend (and opens no message). The requester takes it.
            let unseen_request =
                psn.distance(m.first_psn) < 0 && self.delivered.is_none_or(|d| psn.distance(d) > 0);
            return if unseen_request {
                Reply::Taken
            } else {
                Reply::Duplicate
            };
        }
        if !m.answered && !m.resent {
            self.rtt.record(ts.saturating_sub(m.last_ts));
        }
        m.answered = true;
        m.response_next = psn.next();
        if self.implied_for == Some(psn) {
            self.implied_for = None;
        }
        if ends_message {
            let span = (m.first_psn, psn, m.kind);
            self.outstanding.pop_front();
            self.messages_acked += 1;
            self.answered[self.answered_next] = Some(span);
            self.answered_next = (self.answered_next + 1) % ANSWERED_KEPT;
        }
        Reply::Taken
    }

    /// Counts a plain ACK at a PSN that belongs to a READ, atomic, FLUSH or ATOMIC WRITE:
    /// one answered lately (inside its span of response PSNs), or one still waiting (its
    /// request's PSN; how many responses it spans is not known before they come).
    fn check_ack_names_response(&mut self, ts: u64, psn: Psn) {
        let inside = |first: Psn, last: Psn| at_or_after(psn, first) && at_or_after(last, psn);
        let answered = self
            .answered
            .iter()
            .flatten()
            .find(|&&(first, last, _)| inside(first, last))
            .map(|&(_, _, kind)| kind);
        // Outstanding messages are in PSN order: those past `psn` need no look (a burst of
        // thousands of WRITEs would otherwise be walked on every ACK).
        let waiting = || {
            self.outstanding
                .iter()
                .take_while(|m| at_or_after(psn, m.first_psn))
                .find(|m| {
                    m.first_psn == psn && !matches!(m.kind, MessageKind::Send | MessageKind::Write)
                })
                .map(|m| m.kind)
        };
        if let Some(request) = answered.or_else(waiting) {
            self.acks_naming_count += 1;
            push_capped(
                &mut self.acks_naming,
                AckNamingResponse { ts, psn, request },
            );
        }
    }

    /// Ends the open episode when a response reaches its high-water mark.
    fn recovered_by_response(&mut self, ts: u64, psn: Psn) {
        if self
            .active
            .as_ref()
            .is_some_and(|a| at_or_after(psn, a.high_water))
        {
            self.finish(Some(ts), false);
        }
    }
}

fn waits_for_response(m: &Message) -> bool {
    matches!(m.kind, MessageKind::Read | MessageKind::Atomic)
}
