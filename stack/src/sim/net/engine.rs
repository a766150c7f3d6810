//! The simulation's state and its event loop; the hosts' and switches' handlers are in
//! `host.rs` and `switch.rs`.

use super::buffer::{Class, Mmu, Pfc};
use super::event::{Event, EventQueue, Kind, MAX_INDEX};
use super::flow::{Cc, ENDLESS, Flow};
use super::port::{DATA_PRIO, NO_INT, PRIOS, Packet, PacketKind};
use super::report::{
    FctSlowdown, FlowCounts, LinkReport, LongLivedReport, NetReport, PacketCounts, Percentiles,
    PfcReport, PortPfc, PortSeries, QueueReport, Samples, SizeBucket, jain,
};
use super::stats::{QueueHist, SlowdownHist};
use super::topology::{Fabric, LinkSpec};
use super::workload::{Arrivals, NewFlow, size_buckets};
use super::{NetConfig, NetError, Observer, PAUSE_WIRE_BYTES, TraceEvent};
use crate::cc::{CongestionControl, IntHop, MAX_INT_HOPS, NotificationPoint, Pacer, Time};
use crate::rng::Rng;
use crate::sim::dcqcn::{HEADER_BYTES, WIRE_OVERHEAD_BYTES};
use crate::wire::{AethRepr, FixedHeader};

/// Flow slots are QPNs at the notification point: 24 bits.
const MAX_FLOW_SLOTS: usize = 1 << 24;
/// Events between progress reports.
const PROGRESS_EVERY: u64 = 1 << 18;

#[derive(Debug)]
pub(super) struct Host {
    pub port: u32,
    /// Flows with packets to send, served round robin from `rr`.
    pub active: Vec<u32>,
    pub rr: usize,
    pub np: NotificationPoint,
    pub np_event_at: Time,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct IntRecord {
    pub hops: u8,
    pub hop: [IntHop; MAX_INT_HOPS],
}

#[derive(Debug, Clone, Copy)]
struct LongLived {
    slot: u32,
    src: u32,
    dst: u32,
    at_window_start: u64,
}

pub(super) struct Sim<'a> {
    pub cfg: &'a NetConfig,
    obs: &'a mut dyn Observer,
    pub trace: bool,
    pub f: Fabric,
    pub mmu: Vec<Mmu>,
    /// When each switch port last sent XOFF per priority (PFC refresh).
    pub last_xoff: Vec<[Time; PRIOS]>,
    pub hosts: Vec<Host>,
    pub flows: Vec<Flow>,
    free_flows: Vec<u32>,
    pub ints: Vec<IntRecord>,
    free_ints: Vec<u32>,
    pub events: EventQueue,
    arrivals: Arrivals,
    template: Cc,
    pub rng: Rng,
    pub now: Time,
    end: Time,
    pub mtu: u32,
    pub ack_wire: u16,
    pub cnp_wire: u16,
    pub pause_wire: u16,
    pub dcqcn: bool,
    pub hpcc: bool,
    pub lossless: bool,
    // Measurements.
    pub counts: PacketCounts,
    flow_counts: FlowCounts,
    in_flight: u64,
    buckets: Vec<u64>,
    by_size: Vec<SlowdownHist>,
    overall: SlowdownHist,
    pub drops: u64,
    pub switch_drops: Vec<u64>,
    pub queue_hist: Vec<QueueHist>,
    long_lived: Vec<LongLived>,
    samples: Samples,
    port_queue: Vec<Vec<u64>>,
    port_paused: Vec<Vec<f32>>,
    last_paused: Vec<Time>,
    pub delivered: u64,
    sampled_delivered: u64,
    events_done: u64,
}

impl std::fmt::Debug for Sim<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("now", &self.now)
            .field("events", &self.events_done)
            .finish_non_exhaustive()
    }
}

fn link_spec(cfg: &NetConfig) -> LinkSpec {
    LinkSpec {
        host_bps: cfg.host_bps,
        fabric_bps: cfg.fabric_bps,
        delay: cfg.delay,
        marker: cfg.marker,
    }
}

/// Wire bytes of a packet with `payload` bytes, without HPCC's telemetry.
fn plain_wire(payload: u64) -> u64 {
    payload + u64::from(HEADER_BYTES + WIRE_OVERHEAD_BYTES)
}

/// A flow's completion time alone on an idle network: its packets pipelined through the
/// path's store-and-forward hops (the slowest hop sets the pace), then the last ACK back.
fn ideal_fct(f: &Fabric, src: u32, dst: u32, hash: u32, size: u64, mtu: u32) -> Time {
    let mtu = u64::from(mtu);
    let packets = size.div_ceil(mtu).max(1);
    let last = size - (packets - 1) * mtu;
    let first = plain_wire(size.min(mtu));
    let last = plain_wire(last);
    let total = (packets - 1) * plain_wire(mtu) + last;
    let path = f.path(src, dst, hash);
    let mut fixed = Time::ZERO;
    let mut slowest = Time::ZERO;
    for (j, &p) in path.iter().enumerate() {
        fixed += f.ports[p as usize].delay;
        let mut through_j = f.ports[p as usize].tx_time(total);
        for (i, &q) in path.iter().enumerate() {
            let port = &f.ports[q as usize];
            if i < j {
                through_j += port.tx_time(first);
            } else if i > j {
                through_j += port.tx_time(last);
            }
        }
        slowest = slowest.max(through_j);
    }
    let ack = plain_wire(AethRepr::LEN as u64);
    let back = f.path(dst, src, hash).iter().fold(Time::ZERO, |t, &p| {
        let port = &f.ports[p as usize];
        t + port.tx_time(ack) + port.delay
    });
    fixed + slowest + back
}

pub(super) fn max_base_rtt(cfg: &NetConfig) -> Time {
    let f = Fabric::build(cfg.topology, link_spec(cfg));
    let mtu = u64::from(cfg.payload_bytes);
    (1..f.hosts)
        .map(|dst| ideal_fct(&f, 0, dst, 0, mtu, cfg.payload_bytes))
        .max()
        .unwrap_or(Time::ZERO)
}

/// The long-lived flows whose fairness is meant: those to the receiver with the most of them
/// (flows to different receivers need not get equal shares: PFC's victim flow should get
/// more), or all of them if no two share a receiver (a dumbbell's pairs share its middle).
fn fairness_group(flows: &[LongLivedReport]) -> Vec<f64> {
    let mut best: Option<(usize, u32)> = None;
    for f in flows {
        let n = flows.iter().filter(|g| g.dst == f.dst).count();
        if n >= 2 && best.is_none_or(|(m, _)| n > m) {
            best = Some((n, f.dst));
        }
    }
    flows
        .iter()
        .filter(|f| best.is_none_or(|(_, dst)| f.dst == dst))
        .map(|f| f.throughput_bps)
        .collect()
}

fn headroom(port_bps: u64, delay: Time, packet: u64) -> u64 {
    // Both directions' propagation at line rate, plus a frame in flight at each end and the
    // one being decided on (the usual PFC headroom sizing).
    let bdp = (port_bps as f64 / 8.0 * delay.as_secs_f64()) as u64;
    2 * bdp + 3 * packet
}

impl<'a> Sim<'a> {
    pub(super) fn new(cfg: &'a NetConfig, obs: &'a mut dyn Observer) -> Result<Sim<'a>, NetError> {
        let f = Fabric::build(cfg.topology, link_spec(cfg));
        if f.ports.len() * PRIOS > MAX_INDEX as usize {
            return Err(NetError::Config("the network has too many ports".into()));
        }
        let packet = u64::from(cfg.data_wire_bytes(cfg.payload_bytes));
        let lossless = cfg.pfc != Pfc::Off;
        let fixed = match cfg.pfc {
            Pfc::Fixed(t) => Some(t),
            _ => None,
        };
        let switches = f.nodes.len() - f.hosts as usize;
        let mut mmu = Vec::with_capacity(switches);
        for s in 0..switches {
            let node = &f.nodes[f.hosts as usize + s];
            let headrooms: Vec<u64> = node
                .ports
                .iter()
                .map(|&p| {
                    let port = &f.ports[p as usize];
                    if lossless {
                        headroom(port.bps, port.delay, packet)
                    } else {
                        0
                    }
                })
                .collect();
            let reserved: u64 = headrooms.iter().sum();
            if lossless && reserved + packet > cfg.buffer_bytes {
                return Err(NetError::Config(format!(
                    "the switch buffer ({} B) leaves no shared space after the PFC headroom of {}'s {} ports ({reserved} B)",
                    cfg.buffer_bytes,
                    node.name,
                    node.ports.len()
                )));
            }
            mmu.push(Mmu::new(
                cfg.buffer_bytes,
                cfg.dt_alpha,
                fixed,
                3 * packet,
                node.ports.len(),
                headrooms,
            ));
        }
        let template = cfg.control.make(cfg.host_bps as f64)?;
        let hosts = (0..f.hosts)
            .map(|h| Host {
                port: f.nodes[h as usize].ports[0],
                active: Vec::new(),
                rr: 0,
                np: NotificationPoint::new(cfg.cnp_interval),
                np_event_at: Time::MAX,
            })
            .collect();
        let buckets = size_buckets(&cfg.workload);
        let arrivals = Arrivals::new(
            &cfg.workload,
            cfg.topology,
            cfg.host_bps,
            cfg.duration,
            cfg.seed,
        );
        let ports = f.ports.len();
        let samples = (cfg.duration.as_picos() / cfg.sample_interval.as_picos()) as usize;
        let mut sim = Sim {
            cfg,
            trace: obs.wants_trace(),
            obs,
            mmu,
            last_xoff: vec![[Time::MAX; PRIOS]; ports],
            hosts,
            flows: Vec::new(),
            free_flows: Vec::new(),
            ints: Vec::new(),
            free_ints: Vec::new(),
            events: EventQueue::with_capacity(4 * ports + 64),
            arrivals,
            template,
            rng: Rng::new(cfg.seed),
            now: Time::ZERO,
            end: cfg.duration,
            mtu: cfg.payload_bytes,
            ack_wire: cfg.ack_wire_bytes() as u16,
            cnp_wire: cfg.cnp_wire_bytes() as u16,
            pause_wire: PAUSE_WIRE_BYTES as u16,
            dcqcn: matches!(cfg.control, super::Control::Dcqcn(_)),
            hpcc: matches!(cfg.control, super::Control::Hpcc(_)),
            lossless,
            counts: PacketCounts::default(),
            flow_counts: FlowCounts::default(),
            in_flight: 0,
            by_size: vec![SlowdownHist::new(); buckets.len()],
            buckets,
            overall: SlowdownHist::new(),
            drops: 0,
            switch_drops: vec![0; switches],
            queue_hist: vec![QueueHist::new(); switches],
            long_lived: Vec::new(),
            samples: Samples::default(),
            port_queue: vec![Vec::with_capacity(samples); ports],
            port_paused: vec![Vec::with_capacity(samples); ports],
            last_paused: vec![Time::ZERO; ports],
            delivered: 0,
            sampled_delivered: 0,
            events_done: 0,
            f,
        };
        if let Some(t) = sim.arrivals.next_start() {
            sim.events.push(t, Event::new(Kind::NextFlow, 0));
        }
        sim.events
            .push(cfg.sample_interval, Event::new(Kind::Sample, 0));
        let window_start = cfg.duration - cfg.window.min(cfg.duration);
        sim.events.push(window_start, Event::new(Kind::Window, 0));
        Ok(sim)
    }

    /// How many series the samples keep (for the caller's memory bound).
    pub(super) fn series(&self) -> u64 {
        2 * self.f.ports.len() as u64 + 2 * self.long_lived_flows() + 1
    }

    fn long_lived_flows(&self) -> u64 {
        match &self.cfg.workload {
            super::Workload::LongLived => self.cfg.topology.long_lived_pairs().len() as u64,
            super::Workload::Flows(specs) => {
                specs.iter().filter(|s| s.size.is_none()).count() as u64
            }
            super::Workload::Poisson { .. } => 0,
        }
    }

    pub(super) fn run(mut self) -> NetReport {
        while let Some((now, event)) = self.events.pop() {
            if now > self.end {
                break;
            }
            self.now = now;
            self.events_done += 1;
            if self.events_done.is_multiple_of(PROGRESS_EVERY) {
                self.obs.progress(now, self.end);
            }
            let i = event.index();
            match event.kind() {
                Kind::PortFree => self.port_event(i, false),
                Kind::PortWake => self.port_event(i, true),
                Kind::Arrive => self.arrive(i),
                Kind::CcTimer => self.cc_timer(i),
                Kind::Rto => self.rto(i),
                Kind::NpTimer => self.np_timer(i as usize),
                Kind::PfcRefresh => self.pfc_refresh(i),
                Kind::NextFlow => self.next_flows(),
                Kind::Sample => self.sample(),
                Kind::Window => self.window_start(),
            }
        }
        self.now = self.end;
        self.finish()
    }

    /// Port `p` will be free at `at`, the end of its frame on the wire. One live event per
    /// port: an earlier one supersedes a later, which is skipped when it comes.
    pub(super) fn schedule_free(&mut self, p: u32, at: Time) {
        let port = &mut self.f.ports[p as usize];
        if at < port.free_event_at {
            port.free_event_at = at;
            self.events.push(at, Event::new(Kind::PortFree, p));
        }
    }

    /// Idle port `p` may send at `at` (a pacer, a pause lapsing). Kept apart from
    /// [`Sim::schedule_free`] so that a far wake-up is not pushed again each time a nearer
    /// frame ends.
    pub(super) fn schedule_wake(&mut self, p: u32, at: Time) {
        let port = &mut self.f.ports[p as usize];
        if at < port.wake_event_at {
            port.wake_event_at = at;
            self.events.push(at, Event::new(Kind::PortWake, p));
        }
    }

    fn port_event(&mut self, p: u32, wake: bool) {
        let port = &mut self.f.ports[p as usize];
        let live = if wake {
            &mut port.wake_event_at
        } else {
            &mut port.free_event_at
        };
        if *live != self.now {
            return;
        }
        *live = Time::MAX;
        let node = port.node;
        if self.f.is_host(node) {
            self.host_send(node as usize);
        } else {
            self.switch_send(p);
        }
    }

    /// Puts `pkt` on port `p`'s wire now; returns when its last bit has left.
    pub(super) fn transmit(&mut self, p: u32, pkt: Packet) -> Time {
        let port = &mut self.f.ports[p as usize];
        let done = self.now + port.tx_time(u64::from(pkt.wire));
        port.busy_until = done;
        port.tx_bytes += u64::from(pkt.wire);
        let arrival = done + port.delay;
        let was_empty = port.in_flight.is_empty();
        port.in_flight.push_back((arrival, pkt));
        if was_empty {
            self.events.push(arrival, Event::new(Kind::Arrive, p));
        }
        done
    }
    fn arrive(&mut self, p: u32) {
        let port = &mut self.f.ports[p as usize];
        let Some((_, pkt)) = port.in_flight.pop_front() else {
            return;
        };
        if let Some(&(next, _)) = port.in_flight.front() {
            self.events.push(next, Event::new(Kind::Arrive, p));
        }
        let q = port.peer;
        let node = self.f.ports[q as usize].node;
        if self.f.is_host(node) {
            self.host_receive(node as usize, q, pkt);
        } else {
            self.switch_receive(node, q, pkt);
        }
    }

    /// The flow slot a packet belongs to, if that flow is still running.
    pub(super) fn flow_of(&self, pkt: &Packet) -> Option<u32> {
        let flow = self.flows.get(pkt.flow as usize)?;
        (flow.live && flow.generation == pkt.generation).then_some(pkt.flow)
    }

    pub(super) fn class(&self, pkt: &Packet) -> Class {
        match pkt.kind {
            PacketKind::Data if pkt.prio == DATA_PRIO && self.lossless => Class::Lossless,
            PacketKind::Data => Class::Lossy,
            _ => Class::Control,
        }
    }

    pub(super) fn alloc_int(&mut self) -> u32 {
        let empty = IntRecord {
            hops: 0,
            hop: [IntHop::default(); MAX_INT_HOPS],
        };
        match self.free_ints.pop() {
            Some(i) => {
                self.ints[i as usize].hops = 0;
                i
            }
            None => {
                self.ints.push(empty);
                (self.ints.len() - 1) as u32
            }
        }
    }

    pub(super) fn free_int(&mut self, i: u32) {
        if i != NO_INT {
            self.free_ints.push(i);
        }
    }

    /// Carries a rate change to the pacer (waking the host if the flow may send sooner) and
    /// keeps one timer event per flow at its controller's next deadline.
    pub(super) fn after_cc(&mut self, f: u32) {
        let now = self.now;
        let flow = &mut self.flows[f as usize];
        let rate = flow.cc.rate_bps();
        let mut wake = None;
        if rate != flow.pacer.rate_bps() {
            let before = flow.pacer.next_send_time();
            flow.pacer.set_rate(rate);
            let after = flow.pacer.next_send_time();
            if flow.active && after < before {
                wake = Some(after.max(now));
            }
        }
        if let Some(due) = flow.cc.next_timer() {
            let at = due.max(now);
            if at < flow.cc_timer_at {
                flow.cc_timer_at = at;
                self.events.push(at, Event::new(Kind::CcTimer, f));
            }
        }
        if let Some(at) = wake {
            let src = self.flows[f as usize].src as usize;
            let port = self.hosts[src].port;
            self.schedule_wake(port, at);
        }
    }

    fn cc_timer(&mut self, f: u32) {
        let flow = &mut self.flows[f as usize];
        if !flow.live || flow.cc_timer_at != self.now {
            return;
        }
        flow.cc_timer_at = Time::MAX;
        flow.cc.on_timer(self.now);
        self.after_cc(f);
    }

    /// Starts (or keeps) the retransmission timer of a flow that has packets outstanding.
    pub(super) fn arm_rto(&mut self, f: u32) {
        let flow = &mut self.flows[f as usize];
        if flow.rto_at == Time::MAX {
            flow.rto_at = self.now + self.cfg.rto;
        }
        if flow.rto_event_at == Time::MAX {
            flow.rto_event_at = flow.rto_at;
            self.events.push(flow.rto_at, Event::new(Kind::Rto, f));
        }
    }

    fn rto(&mut self, f: u32) {
        let now = self.now;
        let flow = &mut self.flows[f as usize];
        if !flow.live || flow.rto_event_at != now {
            return;
        }
        flow.rto_event_at = Time::MAX;
        if flow.rto_at == Time::MAX {
            return;
        }
        if flow.rto_at > now {
            // ACKs moved the deadline since this event was set.
            flow.rto_event_at = flow.rto_at;
            self.events.push(flow.rto_at, Event::new(Kind::Rto, f));
            return;
        }
        flow.rto_at = Time::MAX;
        if flow.time_out() {
            self.counts.timeouts += 1;
            self.activate(f);
            self.arm_rto(f);
        }
    }

    /// Puts a flow with packets to send on its host's list and wakes the host.
    pub(super) fn activate(&mut self, f: u32) {
        let flow = &mut self.flows[f as usize];
        if flow.active || flow.snd_nxt >= flow.packets {
            return;
        }
        flow.active = true;
        let src = flow.src as usize;
        self.hosts[src].active.push(f);
        self.kick_host(src);
    }

    fn next_flows(&mut self) {
        while self.arrivals.next_start().is_some_and(|t| t <= self.now) {
            let Some(new) = self.arrivals.pop() else {
                break;
            };
            self.start_flow(new);
        }
        if let Some(t) = self.arrivals.next_start() {
            self.events.push(t, Event::new(Kind::NextFlow, 0));
        }
    }

    fn start_flow(&mut self, new: NewFlow) {
        let slot = match self.free_flows.pop() {
            Some(s) => s,
            None if self.flows.len() < MAX_FLOW_SLOTS => {
                self.flows.push(Flow::new(self.template.clone()));
                (self.flows.len() - 1) as u32
            }
            None => return,
        };
        let spec = new.spec;
        let mtu = u64::from(self.mtu);
        let generation = self.flows[slot as usize].generation;
        let mut flow = Flow::new(self.template.clone());
        flow.generation = generation;
        flow.live = true;
        flow.src = spec.src;
        flow.dst = spec.dst;
        flow.hash = new.hash;
        flow.start = self.now;
        match spec.size {
            Some(size) => {
                flow.size = size;
                flow.packets = size.div_ceil(mtu) as u32;
                flow.ideal = ideal_fct(&self.f, spec.src, spec.dst, new.hash, size, self.mtu);
            }
            None => {
                flow.size = u64::MAX;
                flow.packets = ENDLESS;
                flow.long_lived = Some(self.long_lived.len() as u32);
                self.long_lived.push(LongLived {
                    slot,
                    src: spec.src,
                    dst: spec.dst,
                    at_window_start: 0,
                });
                self.samples.flow_throughput_bps.push(Vec::new());
                self.samples.flow_rate_bps.push(Vec::new());
            }
        }
        flow.pacer = Pacer::new(flow.cc.rate_bps());
        self.flows[slot as usize] = flow;
        self.flow_counts.started += 1;
        self.in_flight += 1;
        self.flow_counts.peak_in_flight = self.flow_counts.peak_in_flight.max(self.in_flight);
        self.activate(slot);
    }

    /// The flow's last packet was acknowledged.
    pub(super) fn complete(&mut self, f: u32) {
        let now = self.now;
        let flow = &mut self.flows[f as usize];
        let fct = now - flow.start;
        let slowdown = fct.as_secs_f64() / flow.ideal.as_secs_f64().max(1e-15);
        let bucket = self
            .buckets
            .partition_point(|&b| b < flow.size)
            .min(self.buckets.len().saturating_sub(1));
        if let Some(h) = self.by_size.get_mut(bucket) {
            h.add(slowdown);
        }
        self.overall.add(slowdown);
        flow.live = false;
        flow.generation = flow.generation.wrapping_add(1);
        let (src, dst, size, start, ideal) =
            (flow.src, flow.dst, flow.size, flow.start, flow.ideal);
        if flow.active {
            flow.active = false;
            let list = &mut self.hosts[src as usize].active;
            if let Some(i) = list.iter().position(|&x| x == f) {
                list.swap_remove(i);
            }
        }
        if self.dcqcn {
            self.hosts[dst as usize].np.remove(crate::wire::Qpn::new(f));
        }
        self.free_flows.push(f);
        self.in_flight -= 1;
        self.flow_counts.finished += 1;
        if self.trace {
            self.obs.trace(TraceEvent::FlowDone {
                at: now,
                src,
                dst,
                bytes: size,
                start,
                fct,
                ideal,
            });
        }
    }

    pub(super) fn emit(&mut self, event: TraceEvent) {
        self.obs.trace(event);
    }

    /// Accounts the time a switch port's queue spent at its length until now.
    pub(super) fn account_queue(&mut self, p: u32) {
        let port = &mut self.f.ports[p as usize];
        let s = (port.node - self.f.hosts) as usize;
        let dt = (self.now - port.queue_changed_at).as_picos();
        if dt > 0 {
            self.queue_hist[s].add(port.total_bytes, dt);
        }
        port.queue_changed_at = self.now;
    }

    fn window_start(&mut self) {
        for ll in &mut self.long_lived {
            ll.at_window_start = self.flows[ll.slot as usize].delivered;
        }
    }

    fn sample(&mut self) {
        let now = self.now;
        let interval = self.cfg.sample_interval.as_secs_f64();
        self.samples.times.push(now);
        for (i, ll) in self.long_lived.iter().enumerate() {
            let flow = &mut self.flows[ll.slot as usize];
            let bytes = flow.delivered - flow.sampled;
            flow.sampled = flow.delivered;
            self.samples.flow_throughput_bps[i].push(bytes as f64 * 8.0 / interval);
            self.samples.flow_rate_bps[i].push(flow.cc.rate_bps());
        }
        let bytes = self.delivered - self.sampled_delivered;
        self.sampled_delivered = self.delivered;
        self.samples
            .delivered_bps
            .push(bytes as f64 * 8.0 / interval);
        for (p, port) in self.f.ports.iter_mut().enumerate() {
            self.port_queue[p].push(port.interval_max);
            port.interval_max = port.total_bytes;
            let paused = port.paused_time_all(now);
            let share = (paused - self.last_paused[p]).as_secs_f64() / interval;
            self.last_paused[p] = paused;
            self.port_paused[p].push(share.min(1.0) as f32);
        }
        let next = now + self.cfg.sample_interval;
        if next <= self.end {
            self.events.push(next, Event::new(Kind::Sample, 0));
        }
    }

    fn finish(mut self) -> NetReport {
        let end = self.end;
        let switch_ports: Vec<u32> = (0..self.f.ports.len() as u32)
            .filter(|&p| !self.f.is_host(self.f.ports[p as usize].node))
            .collect();
        for &p in &switch_ports {
            self.account_queue(p);
        }
        let secs = end.as_secs_f64();
        let mut pfc = PfcReport::default();
        let mut links = Vec::new();
        let mut series = Vec::new();
        for p in 0..self.f.ports.len() as u32 {
            let port = &self.f.ports[p as usize];
            let name = self.f.port_name(p);
            let paused = port.paused_time_all(end);
            let received = port.pause_frames_received();
            pfc.xoff_frames += port.xoff_sent;
            pfc.xon_frames += port.xon_sent;
            pfc.paused += paused;
            if port.xoff_sent + port.xon_sent + received > 0 {
                pfc.by_port.push(PortPfc {
                    port: name.clone(),
                    xoff_sent: port.xoff_sent,
                    xon_sent: port.xon_sent,
                    frames_received: received,
                    paused,
                });
            }
            links.push(LinkReport {
                port: name.clone(),
                gbps: port.bps as f64 / 1e9,
                utilisation: port.tx_bytes as f64 * 8.0 / (port.bps as f64 * secs),
                peak_queue_bytes: port.peak,
            });
            if port.peak > 0 || !paused.is_zero() {
                series.push(PortSeries {
                    port: name,
                    queue_bytes: std::mem::take(&mut self.port_queue[p as usize]),
                    paused: std::mem::take(&mut self.port_paused[p as usize]),
                });
            }
        }
        pfc.pause_frames = pfc.xoff_frames + pfc.xon_frames;
        pfc.by_port
            .sort_by(|a, b| b.paused.cmp(&a.paused).then(a.port.cmp(&b.port)));
        self.samples.ports = series;
        let queues = (0..self.mmu.len())
            .map(|s| {
                let node = &self.f.nodes[self.f.hosts as usize + s];
                let h = &self.queue_hist[s];
                let max_bytes = node
                    .ports
                    .iter()
                    .map(|&p| self.f.ports[p as usize].peak)
                    .max()
                    .unwrap_or(0);
                QueueReport {
                    switch: node.name.clone(),
                    p50_bytes: h.quantile(0.5).min(max_bytes),
                    p90_bytes: h.quantile(0.9).min(max_bytes),
                    p99_bytes: h.quantile(0.99).min(max_bytes),
                    max_bytes,
                    buffer_peak_bytes: self.mmu[s].peak,
                    drops: self.switch_drops[s],
                    cdf: h.cdf(),
                }
            })
            .collect();
        let window = self.cfg.window.min(end).as_secs_f64();
        let long_lived: Vec<LongLivedReport> = self
            .long_lived
            .iter()
            .map(|ll| {
                let flow = &self.flows[ll.slot as usize];
                LongLivedReport {
                    src: ll.src,
                    dst: ll.dst,
                    throughput_bps: (flow.delivered - ll.at_window_start) as f64 * 8.0 / window,
                    final_rate_bps: flow.cc.rate_bps(),
                }
            })
            .collect();
        let throughputs = fairness_group(&long_lived);
        self.flow_counts.unfinished = self.in_flight;
        self.flow_counts.slots = self.flows.len() as u64;
        let percentiles = |h: &SlowdownHist| Percentiles {
            flows: h.count(),
            p50: h.quantile(0.5),
            p95: h.quantile(0.95),
            p99: h.quantile(0.99),
            mean: h.mean(),
            max: h.max(),
        };
        let by_size = self
            .buckets
            .iter()
            .zip(&self.by_size)
            .map(|(&max_bytes, h)| SizeBucket {
                max_bytes,
                slowdown: percentiles(h),
            })
            .collect();
        NetReport {
            topology: self.cfg.topology.to_string(),
            control: self.cfg.control.name(),
            hosts: self.f.hosts,
            duration: end,
            base_rtt: max_base_rtt(self.cfg),
            events: self.events_done,
            flows: self.flow_counts,
            fct_slowdown: FctSlowdown {
                overall: percentiles(&self.overall),
                by_size,
            },
            pfc,
            drops: self.drops,
            packets: self.counts,
            links,
            queues,
            jain: jain(&throughputs),
            long_lived,
            samples: self.samples,
        }
    }
}
