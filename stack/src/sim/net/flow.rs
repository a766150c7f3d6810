//! One flow's state at both ends: the requester (what to send next, what is acknowledged,
//! its congestion controller and pacer, its retransmission timer) and the responder (the next
//! PSN it expects). Loss recovery is go-back-N as RoCE's RC transport does it (IBTA 9.7.5.2):
//! the responder NAKs the first gap (PSN sequence error) once and drops what follows out of
//! order; the requester resends from the NAKed PSN, or from the oldest unacknowledged one when
//! its retransmission timer expires.

use crate::cc::{
    AckFeedback, CcError, CongestionControl, DcqcnParams, Hpcc, HpccParams, NoControl, Pacer,
    ReactionPoint, Time, Timely, TimelyParams,
};

/// Which congestion controller the senders run, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Control {
    /// None: line rate, as rdma_rxe.
    None,
    /// DCQCN: the stack's reaction point at the sender, notification point at the receiver,
    /// ECN marking at the switches.
    Dcqcn(DcqcnParams),
    /// HPCC from the switches' in-band telemetry.
    Hpcc(HpccParams),
    /// TIMELY from the RTT.
    Timely(TimelyParams),
}

impl Control {
    /// Its name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Control::None => "none",
            Control::Dcqcn(_) => "dcqcn",
            Control::Hpcc(_) => "hpcc",
            Control::Timely(_) => "timely",
        }
    }

    pub(super) fn make(&self, line_rate_bps: f64) -> Result<Cc, CcError> {
        Ok(match self {
            Control::None => Cc::None(NoControl::new(line_rate_bps)?),
            Control::Dcqcn(p) => Cc::Dcqcn(ReactionPoint::new(*p)?),
            Control::Hpcc(p) => Cc::Hpcc(Hpcc::new(*p)?),
            Control::Timely(p) => Cc::Timely(Timely::new(*p)?),
        })
    }
}

/// A controller of any kind, dispatched by a match the branch predictor learns at once.
#[derive(Debug, Clone)]
pub(super) enum Cc {
    None(NoControl),
    Dcqcn(ReactionPoint),
    Hpcc(Hpcc),
    Timely(Timely),
}

macro_rules! each_cc {
    ($self:expr, $cc:ident => $e:expr) => {
        match $self {
            Cc::None($cc) => $e,
            Cc::Dcqcn($cc) => $e,
            Cc::Hpcc($cc) => $e,
            Cc::Timely($cc) => $e,
        }
    };
}

impl CongestionControl for Cc {
    fn rate_bps(&self) -> f64 {
        each_cc!(self, c => c.rate_bps())
    }
    fn window_bytes(&self) -> Option<u64> {
        each_cc!(self, c => c.window_bytes())
    }
    fn on_cnp(&mut self, now: Time) {
        each_cc!(self, c => c.on_cnp(now))
    }
    fn on_ack(&mut self, now: Time, ack: &AckFeedback<'_>) {
        each_cc!(self, c => c.on_ack(now, ack))
    }
    fn on_bytes_sent(&mut self, now: Time, bytes: u64) {
        each_cc!(self, c => c.on_bytes_sent(now, bytes))
    }
    fn on_timer(&mut self, now: Time) {
        each_cc!(self, c => c.on_timer(now))
    }
    fn next_timer(&self) -> Option<Time> {
        each_cc!(self, c => c.next_timer())
    }
}

/// Packets of a flow that never ends.
pub(super) const ENDLESS: u32 = u32::MAX;

/// What the responder does with a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Receipt {
    /// In order; acknowledge now if true.
    InOrder(bool),
    /// A gap: NAK the expected PSN (once per gap).
    Nak,
    /// Out of order after the NAK, or a duplicate: dropped; acknowledge if true.
    Dropped(bool),
}

#[derive(Debug, Clone)]
pub(super) struct Flow {
    pub generation: u16,
    pub live: bool,
    pub src: u32,
    pub dst: u32,
    pub hash: u32,
    /// Packets in all; [`ENDLESS`] for a long-lived flow.
    pub packets: u32,
    pub size: u64,
    pub start: Time,
    /// Its completion time alone on an idle network.
    pub ideal: Time,
    /// Long-lived flows: its index in the report.
    pub long_lived: Option<u32>,
    // Requester.
    pub snd_nxt: u32,
    pub snd_una: u32,
    /// The highest PSN sent so far plus one (below it, a send is a retransmission).
    pub snd_max: u32,
    pub cc: Cc,
    pub pacer: Pacer,
    pub cc_timer_at: Time,
    pub rto_at: Time,
    pub rto_event_at: Time,
    /// In its host's list of flows with something to send.
    pub active: bool,
    // Responder.
    pub rcv_nxt: u32,
    /// The PSN last NAKed, and when.
    nak_for: Option<(u32, Time)>,
    since_ack: u32,
    /// Wire bytes delivered in order.
    pub delivered: u64,
    pub sampled: u64,
}

impl Flow {
    pub(super) fn new(cc: Cc) -> Flow {
        let pacer = Pacer::new(cc.rate_bps());
        Flow {
            generation: 0,
            live: false,
            src: 0,
            dst: 0,
            hash: 0,
            packets: 0,
            size: 0,
            start: Time::ZERO,
            ideal: Time::ZERO,
            long_lived: None,
            snd_nxt: 0,
            snd_una: 0,
            snd_max: 0,
            cc,
            pacer,
            cc_timer_at: Time::MAX,
            rto_at: Time::MAX,
            rto_event_at: Time::MAX,
            active: false,
            rcv_nxt: 0,
            nak_for: None,
            since_ack: 0,
            delivered: 0,
            sampled: 0,
        }
    }

    /// True if the requester has a packet it is allowed to send (its window permitting).
    pub(super) fn window_open(&self, payload: u32) -> bool {
        if self.snd_nxt >= self.packets {
            return false;
        }
        match self.cc.window_bytes() {
            None => true,
            Some(w) => u64::from(self.snd_nxt - self.snd_una) * u64::from(payload) < w.max(1),
        }
    }

    /// Payload bytes of packet `psn`.
    pub(super) fn payload(&self, psn: u32, mtu: u32) -> u32 {
        if self.packets != ENDLESS && psn + 1 == self.packets {
            let rest = self.size - u64::from(psn) * u64::from(mtu);
            rest as u32
        } else {
            mtu
        }
    }

    /// The responder takes data packet `psn` at `now`; every `ack_every` in-order packets, and
    /// the last, are acknowledged. A gap is NAKed once, and again only if it is still open
    /// `nak_interval` later (the retransmission was lost too), as the HPCC authors' ns-3
    /// receiver does (its NACK interval).
    pub(super) fn receive(
        &mut self,
        psn: u32,
        ack_every: u32,
        now: Time,
        nak_interval: Time,
    ) -> Receipt {
        if psn == self.rcv_nxt {
            self.rcv_nxt += 1;
            self.nak_for = None;
            self.since_ack += 1;
            let ack = self.since_ack >= ack_every || self.rcv_nxt == self.packets;
            if ack {
                self.since_ack = 0;
            }
            Receipt::InOrder(ack)
        } else if psn > self.rcv_nxt {
            match self.nak_for {
                Some((p, at)) if p == self.rcv_nxt && now < at + nak_interval => {
                    Receipt::Dropped(false)
                }
                _ => {
                    self.nak_for = Some((self.rcv_nxt, now));
                    Receipt::Nak
                }
            }
        } else {
            // A duplicate: the requester went back further than needed, or lost our ACK.
            self.since_ack += 1;
            let ack = self.since_ack >= ack_every;
            if ack {
                self.since_ack = 0;
            }
            Receipt::Dropped(ack)
        }
    }

    /// The requester takes an ACK (or NAK) for everything before `psn`; a NAK also rewinds
    /// it to `psn`. True if it acknowledged anything new.
    pub(super) fn acknowledge(&mut self, psn: u32, nak: bool) -> bool {
        let progress = psn > self.snd_una;
        if progress {
            self.snd_una = psn.min(self.snd_max);
            self.snd_nxt = self.snd_nxt.max(self.snd_una);
        }
        if nak && psn < self.snd_nxt {
            self.snd_nxt = psn.max(self.snd_una);
        }
        progress
    }

    /// The retransmission timer expired: go back to the oldest unacknowledged packet.
    pub(super) fn time_out(&mut self) -> bool {
        if self.snd_una < self.snd_nxt {
            self.snd_nxt = self.snd_una;
            true
        } else {
            false
        }
    }

    pub(super) fn done(&self) -> bool {
        self.packets != ENDLESS && self.snd_una >= self.packets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(packets: u32) -> Flow {
        let mut f = Flow::new(Control::None.make(40e9).unwrap());
        f.packets = packets;
        f.size = u64::from(packets) * 1000 - 400;
        f
    }

    #[test]
    fn responder_acks_every_n_and_naks_a_gap_once_per_interval() {
        let mut f = flow(10);
        let us = Time::from_micros;
        let mut rx = |psn, every, at| f.receive(psn, every, us(at), us(100));
        assert_eq!(rx(0, 2, 0), Receipt::InOrder(false));
        assert_eq!(rx(1, 2, 1), Receipt::InOrder(true));
        assert_eq!(rx(3, 2, 2), Receipt::Nak, "2 was lost");
        assert_eq!(rx(4, 2, 3), Receipt::Dropped(false), "one NAK per gap");
        assert_eq!(
            rx(5, 2, 102),
            Receipt::Nak,
            "still open 100 us later: NAKed again"
        );
        assert_eq!(rx(6, 2, 103), Receipt::Dropped(false));
        assert_eq!(rx(2, 2, 104), Receipt::InOrder(false));
        assert_eq!(rx(5, 2, 105), Receipt::Nak, "a new gap");
        for psn in 3..9 {
            assert!(matches!(rx(psn, 8, 106), Receipt::InOrder(false)));
        }
        assert_eq!(
            rx(9, 8, 107),
            Receipt::InOrder(true),
            "the last is always acked"
        );
        assert_eq!(f.rcv_nxt, 10);
        assert_eq!(f.payload(9, 1000), 600);
        assert_eq!(f.payload(8, 1000), 1000);
    }

    #[test]
    fn requester_goes_back_n() {
        let mut f = flow(10);
        f.snd_nxt = 8;
        f.snd_max = 8;
        assert!(f.acknowledge(3, false));
        assert_eq!((f.snd_una, f.snd_nxt), (3, 8));
        assert!(
            f.acknowledge(5, true),
            "a NAK acknowledges what precedes it"
        );
        assert_eq!((f.snd_una, f.snd_nxt), (5, 5), "and resends from there");
        assert!(!f.acknowledge(4, false), "an old ACK changes nothing");
        f.snd_nxt = 7;
        f.snd_max = 7;
        assert!(f.time_out());
        assert_eq!(f.snd_nxt, 5);
        assert!(!f.time_out(), "nothing outstanding");
        assert!(f.window_open(1000));
        f.snd_una = 10;
        f.snd_nxt = 10;
        assert!(f.done());
        assert!(!f.window_open(1000));
    }
}
