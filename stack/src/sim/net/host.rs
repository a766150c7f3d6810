//! The hosts: a NIC that sends its ACKs, NAKs and CNPs first, then its flows' data round
//! robin as their pacers (and windows) allow; the requester and responder halves of each flow;
//! DCQCN's notification point.

use super::engine::Sim;
use super::event::{Event, Kind};
use super::flow::Receipt;
use super::port::{CONTROL_PRIO, DATA_PRIO, NO_INT, Packet, PacketKind};
use crate::cc::{AckFeedback, CongestionControl, IntHop, Time};
use crate::wire::Qpn;

impl Sim<'_> {
    /// Lets host `h`'s NIC send now if it is idle (or when it next is).
    pub(super) fn kick_host(&mut self, h: usize) {
        let p = self.hosts[h].port;
        let port = &self.f.ports[p as usize];
        if port.busy_until > self.now {
            self.schedule_free(p, port.busy_until);
        } else if port.free_event_at != self.now && port.wake_event_at != self.now {
            self.host_send(h);
        }
    }

    /// The NIC of host `h` picks its next frame.
    pub(super) fn host_send(&mut self, h: usize) {
        let now = self.now;
        let p = self.hosts[h].port;
        let port = &mut self.f.ports[p as usize];
        if port.busy_until > now {
            let at = port.busy_until;
            self.schedule_free(p, at);
            return;
        }
        if let Some(pkt) = port.dequeue_control() {
            let done = self.transmit(p, pkt);
            self.more_after(h, done);
            return;
        }
        if self.hosts[h].active.is_empty() {
            return;
        }
        if port.is_paused(DATA_PRIO, now) {
            let at = port.paused_until(DATA_PRIO);
            self.schedule_wake(p, at);
            return;
        }
        let host = &self.hosts[h];
        let n = host.active.len();
        let mut wake = Time::MAX;
        let mut chosen = None;
        let mut i = if host.rr < n { host.rr } else { 0 };
        for _ in 0..n {
            let flow = &self.flows[host.active[i] as usize];
            if !flow.window_open(self.mtu) {
                i = if i + 1 < n { i + 1 } else { 0 };
                continue;
            }
            let t = flow.pacer.next_send_time();
            if t <= now {
                chosen = Some(i);
                break;
            }
            wake = wake.min(t);
            i = if i + 1 < n { i + 1 } else { 0 };
        }
        match chosen {
            Some(i) => self.send_data(h, i),
            None if wake < Time::MAX => self.schedule_wake(p, wake),
            None => {}
        }
    }

    /// After a frame that leaves at `done`, the NIC goes on: at once for a control frame,
    /// else when its first flow may send (so a flow paced below line rate costs one event per
    /// packet, not two).
    fn more_after(&mut self, h: usize, done: Time) {
        let p = self.hosts[h].port;
        if self.f.ports[p as usize].has_queued() {
            self.schedule_free(p, done);
            return;
        }
        let ready = self.hosts[h]
            .active
            .iter()
            .map(|&f| &self.flows[f as usize])
            .filter(|flow| flow.window_open(self.mtu))
            .map(|flow| flow.pacer.next_send_time())
            .min();
        match ready {
            Some(t) if t <= done => self.schedule_free(p, done),
            Some(t) => self.schedule_wake(p, t),
            None => {}
        }
    }

    /// Sends the next packet of the `i`th flow on host `h`'s list.
    fn send_data(&mut self, h: usize, i: usize) {
        let now = self.now;
        let f = self.hosts[h].active[i];
        let int = if self.hpcc { self.alloc_int() } else { NO_INT };
        let flow = &mut self.flows[f as usize];
        let psn = flow.snd_nxt;
        flow.snd_nxt += 1;
        if psn < flow.snd_max {
            self.counts.retransmitted += 1;
        } else {
            flow.snd_max = psn + 1;
        }
        let wire = self.cfg.data_wire_bytes(flow.payload(psn, self.mtu));
        flow.cc.on_bytes_sent(now, u64::from(wire));
        let rate = flow.cc.rate_bps();
        if rate != flow.pacer.rate_bps() {
            flow.pacer.set_rate(rate);
        }
        flow.pacer.on_send(now, u64::from(wire));
        let pkt = Packet {
            ts: now,
            flow: f,
            psn,
            hash: flow.hash,
            int,
            generation: flow.generation,
            dst: flow.dst as u16,
            wire: wire as u16,
            in_port: 0,
            kind: PacketKind::Data,
            prio: DATA_PRIO,
            ce: false,
        };
        let host = &mut self.hosts[h];
        if flow.snd_nxt >= flow.packets {
            flow.active = false;
            host.active.swap_remove(i);
            host.rr = i;
        } else {
            host.rr = i + 1;
        }
        self.counts.data += 1;
        self.arm_rto(f);
        self.after_cc(f);
        let done = self.transmit(self.hosts[h].port, pkt);
        self.more_after(h, done);
    }

    /// A frame reaches host `h` on its port `q`.
    pub(super) fn host_receive(&mut self, h: usize, q: u32, pkt: Packet) {
        match pkt.kind {
            PacketKind::Pause => {
                let quanta = pkt.psn as u16;
                self.f.ports[q as usize].on_pause_frame(pkt.prio, quanta, self.now);
                if quanta == 0 {
                    self.kick_host(h);
                }
            }
            PacketKind::Data => self.responder(h, pkt),
            PacketKind::Ack | PacketKind::Nak => self.requester_ack(pkt),
            PacketKind::Cnp => {
                if let Some(f) = self.flow_of(&pkt) {
                    self.flows[f as usize].cc.on_cnp(self.now);
                    self.after_cc(f);
                }
            }
        }
    }
    fn responder(&mut self, h: usize, pkt: Packet) {
        let Some(f) = self.flow_of(&pkt) else {
            self.free_int(pkt.int);
            return;
        };
        if self.dcqcn && pkt.ce {
            if self.hosts[h].np.on_packet(self.now, Qpn::new(f), true) {
                self.send_cnp(h, f);
            } else {
                self.sync_np_timer(h);
            }
        }
        let flow = &mut self.flows[f as usize];
        match flow.receive(pkt.psn, self.cfg.ack_every, self.now, self.cfg.nak_interval) {
            Receipt::InOrder(ack) => {
                flow.delivered += u64::from(pkt.wire);
                self.delivered += u64::from(pkt.wire);
                if ack {
                    self.send_ack(h, f, PacketKind::Ack, pkt);
                } else {
                    self.free_int(pkt.int);
                }
            }
            Receipt::Nak => self.send_ack(h, f, PacketKind::Nak, pkt),
            Receipt::Dropped(true) => self.send_ack(h, f, PacketKind::Ack, pkt),
            Receipt::Dropped(false) => self.free_int(pkt.int),
        }
    }

    /// Answers `data` with an ACK or NAK carrying the next expected PSN, the data's send
    /// time and its telemetry.
    fn send_ack(&mut self, h: usize, f: u32, kind: PacketKind, data: Packet) {
        let flow = &self.flows[f as usize];
        let pkt = Packet {
            ts: data.ts,
            flow: f,
            psn: flow.rcv_nxt,
            hash: flow.hash,
            int: data.int,
            generation: flow.generation,
            dst: flow.src as u16,
            wire: self.ack_wire,
            in_port: 0,
            kind,
            prio: CONTROL_PRIO,
            ce: false,
        };
        if kind == PacketKind::Nak {
            self.counts.naks += 1;
        } else {
            self.counts.acks += 1;
        }
        let p = self.hosts[h].port;
        self.f.ports[p as usize].enqueue(pkt);
        self.kick_host(h);
    }

    fn send_cnp(&mut self, h: usize, f: u32) {
        let flow = &self.flows[f as usize];
        let pkt = Packet {
            ts: self.now,
            flow: f,
            psn: 0,
            hash: flow.hash,
            int: NO_INT,
            generation: flow.generation,
            dst: flow.src as u16,
            wire: self.cnp_wire,
            in_port: 0,
            kind: PacketKind::Cnp,
            prio: CONTROL_PRIO,
            ce: false,
        };
        self.counts.cnps += 1;
        let p = self.hosts[h].port;
        self.f.ports[p as usize].enqueue(pkt);
        self.kick_host(h);
    }

    fn sync_np_timer(&mut self, h: usize) {
        let host = &mut self.hosts[h];
        if let Some(due) = host.np.next_timer() {
            let at = due.max(self.now);
            if at < host.np_event_at {
                host.np_event_at = at;
                self.events.push(at, Event::new(Kind::NpTimer, h as u32));
            }
        }
    }

    pub(super) fn np_timer(&mut self, h: usize) {
        if self.hosts[h].np_event_at != self.now {
            return;
        }
        self.hosts[h].np_event_at = Time::MAX;
        while let Some(qpn) = self.hosts[h].np.poll_cnp(self.now) {
            let f = qpn.value();
            if self.flows.get(f as usize).is_some_and(|fl| fl.live) {
                self.send_cnp(h, f);
            }
        }
        self.sync_np_timer(h);
    }
    fn requester_ack(&mut self, pkt: Packet) {
        let Some(f) = self.flow_of(&pkt) else {
            self.free_int(pkt.int);
            return;
        };
        let now = self.now;
        let nak = pkt.kind == PacketKind::Nak;
        let mtu = u64::from(self.mtu);
        let flow = &mut self.flows[f as usize];
        let progress = flow.acknowledge(pkt.psn, nak);
        if progress {
            flow.rto_at = if flow.snd_una < flow.snd_max {
                now + self.cfg.rto
            } else {
                Time::MAX
            };
        }
        let int: &[IntHop] = match self.ints.get(pkt.int as usize) {
            Some(r) => &r.hop[..usize::from(r.hops)],
            None => &[],
        };
        let feedback = AckFeedback {
            acked_bytes: u64::from(flow.snd_una) * mtu,
            sent_bytes: u64::from(flow.snd_nxt) * mtu,
            rtt: Some(now - pkt.ts),
            int,
        };
        flow.cc.on_ack(now, &feedback);
        let windowed = flow.cc.window_bytes().is_some();
        let done = flow.done();
        let src = flow.src as usize;
        self.free_int(pkt.int);
        if done {
            self.complete(f);
            return;
        }
        if nak {
            self.activate(f);
        }
        self.after_cc(f);
        if windowed && progress && self.flows[f as usize].active {
            self.kick_host(src);
        }
    }
}
