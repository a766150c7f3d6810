//! The switches: route, admit into the shared buffer, queue by priority at the egress;
//! on dequeue mark CE, write HPCC's telemetry and release the buffer; send PFC XOFF and XON
//! upstream as ingress queues cross their thresholds, refreshing a pause before it lapses.

use super::TraceEvent;
use super::buffer::Class;
use super::engine::Sim;
use super::event::{Event, Kind};
use super::port::{MAX_QUANTA, NO_INT, PRIOS, Packet, PacketKind};
use crate::cc::IntHop;

impl Sim<'_> {
    /// Lets switch port `e` send now if it is idle (or when it next is).
    fn kick_switch_port(&mut self, e: u32) {
        let port = &self.f.ports[e as usize];
        if port.busy_until > self.now {
            let at = port.busy_until;
            self.schedule_free(e, at);
        } else {
            self.switch_send(e);
        }
    }

    /// A frame reaches switch `node` on its port `q`.
    pub(super) fn switch_receive(&mut self, node: u32, q: u32, mut pkt: Packet) {
        let now = self.now;
        if pkt.kind == PacketKind::Pause {
            let quanta = pkt.psn as u16;
            self.f.ports[q as usize].on_pause_frame(pkt.prio, quanta, now);
            if quanta == 0 {
                self.kick_switch_port(q);
            }
            return;
        }
        let s = (node - self.f.hosts) as usize;
        let e = self.f.route(node, pkt.dst, pkt.hash);
        let local = usize::from(self.f.ports[q as usize].local);
        let class = self.class(&pkt);
        let egress = self.f.ports[e as usize].queue_bytes[usize::from(pkt.prio)];
        if !self.mmu[s].admit(local, pkt.prio, class, egress, u64::from(pkt.wire)) {
            self.drops += 1;
            self.switch_drops[s] += 1;
            self.free_int(pkt.int);
            if self.trace {
                let (src, dst) = match self.flow_of(&pkt) {
                    Some(f) => (self.flows[f as usize].src, self.flows[f as usize].dst),
                    None => (u32::MAX, u32::from(pkt.dst)),
                };
                let port = self.f.port_name(e);
                self.emit(TraceEvent::Drop {
                    at: now,
                    port,
                    src,
                    dst,
                });
            }
            return;
        }
        pkt.in_port = local as u16;
        self.account_queue(e);
        self.f.ports[e as usize].enqueue(pkt);
        if class == Class::Lossless && self.mmu[s].should_pause(local, pkt.prio) {
            self.send_pfc(s, q, pkt.prio, true);
        }
        self.kick_switch_port(e);
    }

    /// Switch port `e` starts its next frame, if it has one it may send.
    pub(super) fn switch_send(&mut self, e: u32) {
        let now = self.now;
        let port = &self.f.ports[e as usize];
        if port.busy_until > now {
            let at = port.busy_until;
            self.schedule_free(e, at);
            return;
        }
        self.account_queue(e);
        let mut pkt = match self.f.ports[e as usize].dequeue(now) {
            Ok(pkt) => pkt,
            Err(Some(lapse)) => {
                self.schedule_wake(e, lapse);
                return;
            }
            Err(None) => return,
        };
        if pkt.kind != PacketKind::Pause {
            let node = self.f.ports[e as usize].node;
            let s = (node - self.f.hosts) as usize;
            let class = self.class(&pkt);
            let local = usize::from(pkt.in_port);
            self.mmu[s].release(local, pkt.prio, class, u64::from(pkt.wire));
            let port = &self.f.ports[e as usize];
            if pkt.kind == PacketKind::Data {
                // From the bytes left behind in this queue, as the authors' ns-3 switches do.
                let left = port.queue_bytes[usize::from(pkt.prio)];
                if port.marker.mark(left, &mut self.rng) {
                    pkt.ce = true;
                    self.counts.ecn_marked += 1;
                }
            }
            if pkt.int != NO_INT {
                let hop = IntHop {
                    ts: now,
                    tx_bytes: port.tx_bytes,
                    qlen_bytes: port.total_bytes,
                    link_bps: port.bps as f64,
                };
                let record = &mut self.ints[pkt.int as usize];
                if let Some(slot) = record.hop.get_mut(usize::from(record.hops)) {
                    *slot = hop;
                    record.hops += 1;
                }
            }
            if class == Class::Lossless && self.mmu[s].should_resume(local, pkt.prio) {
                let upstream = self.f.nodes[node as usize].ports[local];
                self.send_pfc(s, upstream, pkt.prio, false);
            }
        }
        let done = self.transmit(e, pkt);
        if self.f.ports[e as usize].has_queued() {
            self.schedule_free(e, done);
        }
    }

    /// Switch `s` sends XOFF (`pause`) or XON for `prio` out of its port `q`.
    fn send_pfc(&mut self, s: usize, q: u32, prio: u8, pause: bool) {
        let now = self.now;
        let local = usize::from(self.f.ports[q as usize].local);
        self.mmu[s].set_paused(local, prio, pause);
        let quanta = if pause { MAX_QUANTA } else { 0 };
        let port = &mut self.f.ports[q as usize];
        port.enqueue(Packet::pause(prio, quanta, self.pause_wire));
        if pause {
            port.xoff_sent += 1;
            // Refresh before the pause lapses, at half its length, while still congested.
            let refresh = now + port.refresh_after();
            self.last_xoff[q as usize][usize::from(prio)] = now;
            let index = q * PRIOS as u32 + u32::from(prio);
            self.events
                .push(refresh, Event::new(Kind::PfcRefresh, index));
        } else {
            port.xon_sent += 1;
        }
        if self.trace {
            let port = self.f.port_name(q);
            self.emit(TraceEvent::Pfc {
                at: now,
                port,
                prio,
                pause,
            });
        }
        self.kick_switch_port(q);
    }

    pub(super) fn pfc_refresh(&mut self, index: u32) {
        let q = index / PRIOS as u32;
        let prio = (index % PRIOS as u32) as u8;
        let port = &self.f.ports[q as usize];
        let half = port.refresh_after();
        let s = (port.node - self.f.hosts) as usize;
        let local = usize::from(port.local);
        let last = self.last_xoff[q as usize][usize::from(prio)];
        if self.mmu[s].is_paused(local, prio) && last + half == self.now {
            self.send_pfc(s, q, prio, true);
        }
    }
}
