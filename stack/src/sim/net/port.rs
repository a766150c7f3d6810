//! One end of a link: its egress queues (one per 802.1p priority, served in strict priority,
//! plus one for MAC control frames that goes before them all), what is on the wire towards the
//! far end, and the PFC pause state the far end imposes on it.
//!
//! PFC (IEEE 802.1Qbb): a PAUSE frame names a priority and a time in quanta of 512 bit times
//! at the link's rate; the receiver stops starting frames of that priority until the time
//! lapses or a frame with zero quanta (XON) arrives. A frame already on the wire finishes.

use std::collections::VecDeque;

use crate::cc::{Marker, Time};

/// 802.1p priorities.
pub(super) const PRIOS: usize = 8;
/// RoCE data: the lossless class when PFC is on (the usual deployment's priority 3).
pub(super) const DATA_PRIO: u8 = 3;
/// ACKs, NAKs and CNPs: served before data and never paused, as in the HPCC authors' ns-3
/// switch (ACKs in the highest class); so a paused data class cannot hold back feedback.
pub(super) const CONTROL_PRIO: u8 = 6;
/// The index of the MAC-control queue (PFC frames), served before every priority.
const MAC_CONTROL: usize = PRIOS;
/// The longest pause a PFC frame can ask for, in quanta.
pub(super) const MAX_QUANTA: u16 = 0xffff;
/// Bits per pause quantum (802.3 Annex 31B).
const BITS_PER_QUANTUM: u64 = 512;

/// What a packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PacketKind {
    Data,
    Ack,
    Nak,
    Cnp,
    /// A PFC frame: `psn` holds its quanta (0 = XON).
    Pause,
}

/// A packet as the simulator moves it: 40 bytes, copied between queues, never allocated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Packet {
    /// Data: when it was sent. ACK and NAK: the data packet's, echoed (TIMELY's RTT).
    pub ts: Time,
    /// The flow's slot.
    pub flow: u32,
    /// Data: its PSN. ACK and NAK: the next PSN expected. PAUSE: quanta.
    pub psn: u32,
    /// The flow's ECMP hash.
    pub hash: u32,
    /// Its in-band telemetry record in the pool, or [`NO_INT`].
    pub int: u32,
    /// The flow slot's generation, so a straggler of a finished flow is recognised.
    pub generation: u16,
    /// The destination host.
    pub dst: u16,
    /// Bytes on the wire, preamble and gap included.
    pub wire: u16,
    /// The port of the switch now holding it where it came in (for PFC accounting).
    pub in_port: u16,
    pub kind: PacketKind,
    pub prio: u8,
    /// ECN Congestion Experienced.
    pub ce: bool,
}

/// No telemetry record.
pub(super) const NO_INT: u32 = u32::MAX;

impl Packet {
    /// A PFC frame for `prio`.
    pub(super) fn pause(prio: u8, quanta: u16, wire: u16) -> Packet {
        Packet {
            ts: Time::ZERO,
            flow: 0,
            psn: u32::from(quanta),
            hash: 0,
            int: NO_INT,
            generation: 0,
            dst: 0,
            wire,
            in_port: 0,
            kind: PacketKind::Pause,
            prio,
            ce: false,
        }
    }
}

/// The pause the far end imposes on one priority, and the time it has cost.
#[derive(Debug, Clone, Copy, Default)]
struct PauseState {
    /// Paused while `now < until`.
    until: Time,
    /// The start of the pause interval still being accounted.
    start: Time,
    open: bool,
    /// Closed pause intervals, picoseconds.
    closed_ps: u64,
    frames: u64,
}

/// One end of a link and its egress.
#[derive(Debug)]
pub(super) struct Port {
    /// The node it belongs to (hosts first, then switches).
    pub node: u32,
    /// The port at the other end of the link.
    pub peer: u32,
    /// Its index among its node's ports.
    pub local: u16,
    pub bps: u64,
    ps_per_byte: f64,
    pub delay: Time,
    /// ECN marking of its data queue (switch ports).
    pub marker: Marker,
    queues: [VecDeque<Packet>; PRIOS + 1],
    /// Bytes queued per priority (MAC control excluded).
    pub queue_bytes: [u64; PRIOS],
    /// Bytes queued over all priorities.
    pub total_bytes: u64,
    nonempty: u16,
    /// When the frame on the wire has been sent.
    pub busy_until: Time,
    /// The live `PortFree` event (the frame on the wire ends), `Time::MAX` if none.
    pub free_event_at: Time,
    /// The live `PortWake` event (a pacer is due or a pause lapses), `Time::MAX` if none.
    pub wake_event_at: Time,
    pause: [PauseState; PRIOS],
    /// Frames on the wire towards the peer, with their arrival times, in order.
    pub in_flight: VecDeque<(Time, Packet)>,
    /// Wire bytes sent so far.
    pub tx_bytes: u64,
    pub xoff_sent: u64,
    pub xon_sent: u64,
    /// Largest `total_bytes` since the last sample, and of the whole run.
    pub interval_max: u64,
    pub peak: u64,
    /// When `total_bytes` last changed (for the time-weighted queue histogram).
    pub queue_changed_at: Time,
}

impl Port {
    pub(super) fn new(node: u32, local: u16, bps: u64, delay: Time, marker: Marker) -> Port {
        Port {
            node,
            peer: 0,
            local,
            bps,
            ps_per_byte: 8e12 / bps as f64,
            delay,
            marker,
            queues: Default::default(),
            queue_bytes: [0; PRIOS],
            total_bytes: 0,
            nonempty: 0,
            busy_until: Time::ZERO,
            free_event_at: Time::MAX,
            wake_event_at: Time::MAX,
            pause: [PauseState::default(); PRIOS],
            in_flight: VecDeque::new(),
            tx_bytes: 0,
            xoff_sent: 0,
            xon_sent: 0,
            interval_max: 0,
            peak: 0,
            queue_changed_at: Time::ZERO,
        }
    }

    /// How long `bytes` take to serialise.
    pub(super) fn tx_time(&self, bytes: u64) -> Time {
        Time::from_picos((bytes as f64 * self.ps_per_byte + 0.5) as u64)
    }

    /// How long `quanta` pause quanta last on this link.
    pub(super) fn quanta_time(&self, quanta: u16) -> Time {
        self.tx_time(u64::from(quanta) * BITS_PER_QUANTUM / 8)
    }

    /// When a switch re-sends XOFF on this port while still congested: half a full pause.
    pub(super) fn refresh_after(&self) -> Time {
        Time::from_picos(self.quanta_time(MAX_QUANTA).as_picos() / 2)
    }

    pub(super) fn enqueue(&mut self, pkt: Packet) {
        if pkt.kind == PacketKind::Pause {
            self.queues[MAC_CONTROL].push_back(pkt);
            self.nonempty |= 1 << MAC_CONTROL;
            return;
        }
        let prio = usize::from(pkt.prio);
        self.queues[prio].push_back(pkt);
        self.nonempty |= 1 << prio;
        self.queue_bytes[prio] += u64::from(pkt.wire);
        self.total_bytes += u64::from(pkt.wire);
        self.interval_max = self.interval_max.max(self.total_bytes);
        self.peak = self.peak.max(self.total_bytes);
    }

    /// Anything queued at all (sendable or paused).
    pub(super) fn has_queued(&self) -> bool {
        self.nonempty != 0
    }

    /// The next frame to send at `now`: MAC control first, then the highest priority that is
    /// not paused. `Err(Some(t))` if only paused queues hold frames, the first lapsing at `t`.
    pub(super) fn dequeue(&mut self, now: Time) -> Result<Packet, Option<Time>> {
        let mut mask = self.nonempty;
        let mut wake = None::<Time>;
        while mask != 0 {
            let q = 15 - mask.leading_zeros() as usize;
            mask &= !(1 << q);
            if q < PRIOS && self.pause[q].until > now {
                let until = self.pause[q].until;
                wake = Some(wake.map_or(until, |w| w.min(until)));
                continue;
            }
            return Ok(self.pop(q));
        }
        Err(wake)
    }

    /// The next MAC-control or control-priority frame, if any (a host NIC's own frames; its
    /// data comes from its flows, not a queue).
    pub(super) fn dequeue_control(&mut self) -> Option<Packet> {
        if self.nonempty & (1 << MAC_CONTROL) != 0 {
            return Some(self.pop(MAC_CONTROL));
        }
        let control = usize::from(CONTROL_PRIO);
        (self.nonempty & (1 << control) != 0).then(|| self.pop(control))
    }

    fn pop(&mut self, q: usize) -> Packet {
        let pkt = self.queues[q]
            .pop_front()
            .expect("a queue marked non-empty");
        if self.queues[q].is_empty() {
            self.nonempty &= !(1 << q);
        }
        if q < PRIOS {
            self.queue_bytes[q] -= u64::from(pkt.wire);
            self.total_bytes -= u64::from(pkt.wire);
        }
        pkt
    }

    /// A PFC frame from the peer for `prio` arrived at `now`.
    pub(super) fn on_pause_frame(&mut self, prio: u8, quanta: u16, now: Time) {
        let until = now + self.quanta_time(quanta);
        let s = &mut self.pause[usize::from(prio)];
        s.frames += 1;
        if s.open && s.until <= now {
            // The last pause lapsed on its own before this frame.
            s.closed_ps += (s.until - s.start).as_picos();
            s.open = false;
        }
        if quanta == 0 {
            if s.open {
                s.closed_ps += (now - s.start).as_picos();
                s.open = false;
            }
            s.until = now;
        } else {
            if !s.open {
                s.start = now;
                s.open = true;
            }
            s.until = until;
        }
    }

    /// True if frames of `prio` may not start at `now`.
    pub(super) fn is_paused(&self, prio: u8, now: Time) -> bool {
        self.pause[usize::from(prio)].until > now
    }

    /// When the pause on `prio` lapses (if it is paused at all).
    pub(super) fn paused_until(&self, prio: u8) -> Time {
        self.pause[usize::from(prio)].until
    }

    /// Time `prio` has spent paused up to `now`.
    pub(super) fn paused_time(&self, prio: u8, now: Time) -> Time {
        let s = &self.pause[usize::from(prio)];
        let open = if s.open {
            (s.until.min(now) - s.start).as_picos()
        } else {
            0
        };
        Time::from_picos(s.closed_ps + open)
    }

    /// Time paused over all priorities up to `now`.
    pub(super) fn paused_time_all(&self, now: Time) -> Time {
        (0..PRIOS as u8).fold(Time::ZERO, |acc, p| acc + self.paused_time(p, now))
    }

    /// PFC frames received from the peer.
    pub(super) fn pause_frames_received(&self) -> u64 {
        self.pause.iter().map(|s| s.frames).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port() -> Port {
        Port::new(0, 0, 40_000_000_000, Time::from_micros(1), Marker::paper())
    }

    fn data(prio: u8, wire: u16) -> Packet {
        Packet {
            kind: PacketKind::Data,
            prio,
            ..Packet::pause(0, 0, wire)
        }
    }

    #[test]
    fn serialisation_and_quanta_at_the_link_rate() {
        let p = port();
        // 1082 wire bytes at 40 Gb/s: 216.4 ns.
        assert_eq!(p.tx_time(1082), Time::from_picos(216_400));
        // 65535 quanta x 512 bits at 40 Gb/s: 838.848 us.
        assert_eq!(p.quanta_time(MAX_QUANTA), Time::from_nanos(838_848));
    }

    #[test]
    fn strict_priority_with_mac_control_first() {
        let mut p = port();
        p.enqueue(data(DATA_PRIO, 1000));
        p.enqueue(data(CONTROL_PRIO, 70));
        p.enqueue(Packet::pause(DATA_PRIO, 10, 84));
        assert_eq!(p.total_bytes, 1070);
        let now = Time::ZERO;
        assert_eq!(p.dequeue(now).unwrap().kind, PacketKind::Pause);
        assert_eq!(p.dequeue(now).unwrap().prio, CONTROL_PRIO);
        assert_eq!(p.dequeue(now).unwrap().prio, DATA_PRIO);
        assert_eq!(p.dequeue(now), Err(None));
        assert!(!p.has_queued());
        assert_eq!(p.total_bytes, 0);
    }

    #[test]
    fn a_pause_holds_its_priority_until_it_lapses_or_xon() {
        let mut p = port();
        let us = Time::from_micros;
        p.enqueue(data(DATA_PRIO, 1000));
        p.on_pause_frame(DATA_PRIO, MAX_QUANTA, us(10));
        let lapse = us(10) + Time::from_nanos(838_848);
        assert!(p.is_paused(DATA_PRIO, us(11)));
        assert!(!p.is_paused(CONTROL_PRIO, us(11)), "per priority");
        assert_eq!(p.dequeue(us(11)), Err(Some(lapse)));
        // Control frames still pass a paused data class.
        p.enqueue(data(CONTROL_PRIO, 70));
        assert_eq!(p.dequeue(us(11)).unwrap().prio, CONTROL_PRIO);
        // Unpaused by the lapse, without an XON.
        assert!(p.dequeue(lapse).is_ok());
        assert_eq!(p.paused_time(DATA_PRIO, us(2000)), lapse - us(10));

        // An XON ends a pause early; a refresh extends one.
        p.on_pause_frame(DATA_PRIO, MAX_QUANTA, us(3000));
        p.on_pause_frame(DATA_PRIO, MAX_QUANTA, us(3400));
        assert!(p.is_paused(DATA_PRIO, us(4100)), "refreshed at 3400 us");
        p.on_pause_frame(DATA_PRIO, 0, us(4200));
        assert!(!p.is_paused(DATA_PRIO, us(4200)));
        assert_eq!(
            p.paused_time(DATA_PRIO, us(9000)),
            lapse - us(10) + us(1200),
            "838.848 us, then 3000..4200 us"
        );
        assert_eq!(p.pause_frames_received(), 4);
    }
}
