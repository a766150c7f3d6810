//! A DCQCN simulation: N senders, each running the real [`ReactionPoint`] and [`Pacer`],
//! send MTU-size packets into one switch egress queue that drains at the bottleneck rate and
//! CE-marks packets with the real [`Marker`] as they are dequeued; a receiver runs the real
//! [`NotificationPoint`] on each packet and its CNPs reach the sender after the feedback delay.
//!
//! Topology and timing (the SIGCOMM 2015 paper's single-bottleneck setting):
//! - every sender's line rate equals the bottleneck's, so one flow alone never queues;
//! - senders reach the switch with no delay; a packet marked on leaving the queue reaches the
//!   receiver when its last bit is out; the CNP that answers it reaches its sender
//!   `feedback_delay` later. So `feedback_delay` is the whole loop delay except queueing and
//!   serialisation (the fluid model's tau*);
//! - the queue holds up to `buffer_bytes` and drops at the tail beyond (counted): DCQCN keeps
//!   it far below any real buffer, so drops only show a run without congestion control;
//! - packets carry `payload_bytes` plus Ethernet, IPv4, UDP, BTH, ICRC and FCS headers, and
//!   occupy the wire for preamble and inter-frame gap too: rates count wire bytes, so N flows
//!   at C/N fill the link exactly.
//!
//! Events: each flow's next send sits in a tournament tree (one entry per flow, moved in
//! place at rate changes); CC timers, CNP arrivals and samples wait in a small binary heap; the
//! link's departures come from its FIFO in order. No event allocates.

mod min_tree;
mod report;

pub use report::{FlowReport, SimReport, SimSummary, jain_index};

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use thiserror::Error;

use crate::cc::{
    CNP_INTERVAL, CcError, CongestionControl, DcqcnParams, Marker, NoControl, NotificationPoint,
    Pacer, ReactionPoint, Time, transmission_time,
};
use crate::rng::Rng;
use crate::wire::encap::{
    ETHERNET_FCS_LEN, ETHERNET_HEADER_LEN, ETHERNET_PREAMBLE_AND_GAP_LEN, IPV4_HEADER_LEN,
    UDP_HEADER_LEN,
};
use crate::wire::icrc::ICRC_LEN;
use crate::wire::{BthRepr, FixedHeader, Qpn};
use min_tree::MinTree;

/// The bytes around a data packet's payload: Ethernet, IPv4, UDP, BTH, ICRC and FCS (62).
pub const HEADER_BYTES: u32 = (ETHERNET_HEADER_LEN
    + IPV4_HEADER_LEN
    + UDP_HEADER_LEN
    + BthRepr::LEN
    + ICRC_LEN
    + ETHERNET_FCS_LEN) as u32;
/// Preamble and start delimiter 8 + inter-frame gap 12: wire time that carries no frame.
pub const WIRE_OVERHEAD_BYTES: u32 = ETHERNET_PREAMBLE_AND_GAP_LEN as u32;

/// Which controller the senders run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Control {
    /// DCQCN with these parameters.
    Dcqcn(DcqcnParams),
    /// Always line rate: what rdma_rxe does.
    None,
}

/// What a DCQCN simulation runs: flows through one marking switch queue to one receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Bottleneck and sender line rate, bit/s.
    pub link_bps: u64,
    /// One start time per flow.
    pub flow_starts: Vec<Time>,
    /// Simulated time to run.
    pub duration: Time,
    /// The loop delay from a marked packet to its CNP's effect (see the module documentation).
    pub feedback_delay: Time,
    /// The senders' controller.
    pub control: Control,
    /// The switch's RED/ECN marking.
    pub marker: Marker,
    /// The notification point's minimum CNP spacing per QP.
    pub cnp_interval: Time,
    /// Payload bytes per packet; [`HEADER_BYTES`] are added on the wire.
    pub payload_bytes: u32,
    /// The switch queue's capacity in bytes.
    pub buffer_bytes: u64,
    /// Seeds the marking draws: the same seed gives the same run.
    pub seed: u64,
    /// Spacing of the rate and queue samples.
    pub sample_interval: Time,
    /// The summary (mean rates, fairness, utilisation, queue) covers the run's last `window`.
    pub window: Time,
}

impl SimConfig {
    /// `flows` flows all starting at 0 on a `link_gbps` link with the paper's parameters,
    /// 1024-byte payloads, 4 us feedback delay, 100 ms, samples every 100 us, 10 ms window.
    pub fn paper(flows: usize, link_gbps: u64) -> SimConfig {
        let link_bps = link_gbps.saturating_mul(1_000_000_000);
        SimConfig {
            link_bps,
            flow_starts: vec![Time::ZERO; flows],
            duration: Time::from_millis(100),
            feedback_delay: Time::from_micros(4),
            control: Control::Dcqcn(DcqcnParams::paper(link_bps as f64)),
            marker: Marker::paper(),
            cnp_interval: CNP_INTERVAL,
            payload_bytes: 1024,
            buffer_bytes: 32 << 20,
            seed: 1,
            sample_interval: Time::from_micros(100),
            window: Time::from_millis(10),
        }
    }

    /// Bytes one packet occupies on the wire, including preamble and gap.
    pub fn wire_bytes(&self) -> u64 {
        u64::from(self.payload_bytes) + u64::from(HEADER_BYTES + WIRE_OVERHEAD_BYTES)
    }

    fn validate(&self) -> Result<(), SimError> {
        let bad = |s: &str| Err(SimError::Config(s.to_string()));
        if self.link_bps == 0 {
            return bad("the link rate must be positive");
        }
        if self.flow_starts.is_empty() || self.flow_starts.len() > MAX_FLOWS {
            return bad("between 1 and 10000 flows");
        }
        if self.duration.is_zero() || self.sample_interval.is_zero() || self.window.is_zero() {
            return bad("duration, sample interval and window must be positive");
        }
        if self.window > self.duration {
            return bad("the summary window must not exceed the duration");
        }
        if self.payload_bytes == 0 || self.payload_bytes > 4096 {
            return bad("the payload must be 1 to 4096 bytes (an IB MTU)");
        }
        // Every flow may send at line rate (without control they do).
        let sends = self.link_bps as f64 * self.duration.as_secs_f64()
            / (8 * self.wire_bytes()) as f64
            * self.flow_starts.len() as f64;
        if sends > MAX_PACKETS {
            return bad("too long: the flows could send over 2e9 packets; shorten the run");
        }
        let samples = self.duration.as_picos() / self.sample_interval.as_picos();
        let series = 2 * self.flow_starts.len() as u64 + 2;
        if samples.saturating_mul(series) > MAX_SAMPLE_VALUES {
            return bad("too many samples: raise the sample interval or shorten the run");
        }
        if let Control::Dcqcn(p) = &self.control {
            p.validate()?;
            if p.line_rate_bps != self.link_bps as f64 {
                return bad("the DCQCN line rate must equal the link rate");
            }
        }
        Ok(())
    }
}

const MAX_FLOWS: usize = 10_000;
/// A bound on the work of one run: about a minute of CPU.
const MAX_PACKETS: f64 = 2e9;
/// Rates and queue lengths kept for the report: 400 MB at most.
const MAX_SAMPLE_VALUES: u64 = 50_000_000;

/// A simulation that cannot run as configured.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SimError {
    /// A value out of range, described.
    #[error("simulation: {0}")]
    Config(String),
    /// The DCQCN parameters or the marker are invalid.
    #[error(transparent)]
    Cc(#[from] CcError),
}

/// Runs the simulation described by `config`.
pub fn run(config: &SimConfig) -> Result<SimReport, SimError> {
    config.validate()?;
    match config.control {
        Control::Dcqcn(params) => Ok(Sim::new(config, || ReactionPoint::new(params))?.run()),
        Control::None => Ok(Sim::new(config, || NoControl::new(config.link_bps as f64))?.run()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Sample,
    Timer(u32),
    Cnp(u32),
    /// The notification point owes deferred CNPs.
    NpTimer,
}

/// (time, sequence number, kind): the sequence number makes ties deterministic and lets a
/// rescheduled timer tell its live event from stale ones.
type Event = Reverse<(Time, u64, Kind)>;

#[derive(Debug)]
struct Flow<C> {
    cc: C,
    pacer: Pacer,
    live_timer: Option<(Time, u64)>,
    sent: u64,
    delivered_bytes: u64,
    window_bytes: u64,
    sampled_bytes: u64,
    marked: u64,
    cnps: u64,
    report: FlowReport,
}

#[derive(Debug)]
struct Sim<'a, C> {
    cfg: &'a SimConfig,
    flows: Vec<Flow<C>>,
    heap: BinaryHeap<Event>,
    sends: MinTree,
    seq: u64,
    np: NotificationPoint,
    np_timer: Option<(Time, u64)>,
    rng: Rng,
    wire: u64,
    tx_time: Time,
    window_start: Time,
    /// Packets waiting (not the one on the wire), by flow.
    queue: VecDeque<u32>,
    queue_bytes: u64,
    /// The packet on the wire: (flow, CE), and when its last bit leaves.
    on_wire: Option<(u32, bool)>,
    wire_free_at: Time,
    queue_changed_at: Time,
    report: SimReport,
    interval_queue_max: u64,
}

impl<'a, C: CongestionControl> Sim<'a, C> {
    fn new(
        cfg: &'a SimConfig,
        mut make_cc: impl FnMut() -> Result<C, CcError>,
    ) -> Result<Self, SimError> {
        let wire = cfg.wire_bytes();
        let mut flows = Vec::with_capacity(cfg.flow_starts.len());
        for &start in &cfg.flow_starts {
            let cc = make_cc()?;
            let pacer = Pacer::new(cc.rate_bps());
            flows.push(Flow {
                cc,
                pacer,
                live_timer: None,
                sent: 0,
                delivered_bytes: 0,
                window_bytes: 0,
                sampled_bytes: 0,
                marked: 0,
                cnps: 0,
                report: FlowReport::new(start),
            });
        }
        let samples = (cfg.duration.as_picos() / cfg.sample_interval.as_picos()) as usize;
        let mut sim = Sim {
            cfg,
            flows,
            heap: BinaryHeap::with_capacity(4 * cfg.flow_starts.len() + 16),
            sends: MinTree::new(cfg.flow_starts.len()),
            seq: 0,
            np: NotificationPoint::new(cfg.cnp_interval),
            np_timer: None,
            rng: Rng::new(cfg.seed),
            wire,
            tx_time: transmission_time(wire, cfg.link_bps as f64),
            window_start: cfg.duration - cfg.window,
            queue: VecDeque::with_capacity(1024),
            queue_bytes: 0,
            on_wire: None,
            wire_free_at: Time::ZERO,
            queue_changed_at: Time::ZERO,
            report: SimReport::new(cfg, samples),
            interval_queue_max: 0,
        };
        for (i, &start) in cfg.flow_starts.iter().enumerate() {
            sim.sends.set(i, start);
        }
        sim.push(cfg.sample_interval, Kind::Sample);
        Ok(sim)
    }

    fn push(&mut self, at: Time, kind: Kind) -> u64 {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, kind)));
        self.seq
    }

    fn run(mut self) -> SimReport {
        let end = self.cfg.duration;
        loop {
            let next_event = self.heap.peek().map_or(Time::MAX, |Reverse((t, _, _))| *t);
            let next_departure = if self.on_wire.is_some() {
                self.wire_free_at
            } else {
                Time::MAX
            };
            let (sender, next_send) = self.sends.min();
            let next = next_event.min(next_departure).min(next_send);
            if next > end {
                break;
            }
            self.report.summary.events += 1;
            if next_departure == next {
                self.depart(next);
                continue;
            }
            if next_event > next {
                self.send(next, sender as u32);
                continue;
            }
            let Some(Reverse((now, seq, kind))) = self.heap.pop() else {
                break;
            };
            match kind {
                Kind::Timer(f) => {
                    if self.flows[f as usize].live_timer.map(|(_, s)| s) == Some(seq) {
                        self.flows[f as usize].live_timer = None;
                        self.flows[f as usize].cc.on_timer(now);
                        self.after_cc(now, f);
                    }
                }
                Kind::Cnp(f) => {
                    let flow = &mut self.flows[f as usize];
                    flow.cnps += 1;
                    flow.cc.on_cnp(now);
                    self.after_cc(now, f);
                }
                Kind::NpTimer => {
                    if self.np_timer.map(|(_, s)| s) == Some(seq) {
                        self.np_timer = None;
                        while let Some(qpn) = self.np.poll_cnp(now) {
                            self.send_cnp(now, qpn.value());
                        }
                        self.sync_np_timer();
                    }
                }
                Kind::Sample => self.sample(now),
            }
        }
        self.account_queue(end);
        self.finish()
    }

    /// A sender puts one packet on its wire; it enters the switch queue at once.
    fn send(&mut self, now: Time, f: u32) {
        let wire = self.wire;
        let flow = &mut self.flows[f as usize];
        flow.pacer.on_send(now, wire);
        flow.sent += 1;
        flow.cc.on_bytes_sent(now, wire);
        let rate = flow.cc.rate_bps();
        if rate != flow.pacer.rate_bps() {
            flow.pacer.set_rate(rate);
        }
        let next = flow.pacer.next_send_time();
        self.sends.set(f as usize, next);
        self.sync_timer(now, f);
        self.report.summary.packets += 1;
        self.enqueue(now, f);
    }

    /// Carries a rate change from a CNP or timer to the pacer, moving the pending send.
    fn after_cc(&mut self, now: Time, f: u32) {
        let flow = &mut self.flows[f as usize];
        let rate = flow.cc.rate_bps();
        if rate != flow.pacer.rate_bps() {
            let before = flow.pacer.next_send_time();
            flow.pacer.set_rate(rate);
            let after = flow.pacer.next_send_time();
            if after != before {
                self.sends.set(f as usize, after.max(now));
            }
        }
        self.sync_timer(now, f);
    }

    /// Keeps one live timer event per flow, at the controller's next deadline.
    fn sync_timer(&mut self, now: Time, f: u32) {
        let flow = &self.flows[f as usize];
        let Some(due) = flow.cc.next_timer() else {
            return;
        };
        if flow.live_timer.map(|(t, _)| t) != Some(due) {
            let seq = self.push(due.max(now), Kind::Timer(f));
            self.flows[f as usize].live_timer = Some((due, seq));
        }
    }

    fn enqueue(&mut self, now: Time, f: u32) {
        self.account_queue(now);
        if self.on_wire.is_none() {
            self.start_transmission(now, f);
        } else if self.queue_bytes + self.wire > self.cfg.buffer_bytes {
            self.report.summary.drops += 1;
        } else {
            self.queue.push_back(f);
            self.queue_bytes += self.wire;
            self.interval_queue_max = self.interval_queue_max.max(self.queue_bytes);
            self.report.summary.queue_peak_bytes =
                self.report.summary.queue_peak_bytes.max(self.queue_bytes);
        }
    }

    /// Marks on dequeue, from the bytes left behind (as the authors' ns-3 switch does): the
    /// mark reflects the queue at the latest moment, the fluid model's p(q(t)).
    fn start_transmission(&mut self, now: Time, f: u32) {
        let ce = self.cfg.marker.mark(self.queue_bytes, &mut self.rng);
        if ce {
            self.report.summary.marks += 1;
            self.flows[f as usize].marked += 1;
        }
        self.on_wire = Some((f, ce));
        self.wire_free_at = now + self.tx_time;
    }

    /// The packet on the wire has left the switch and reaches the receiver.
    fn depart(&mut self, now: Time) {
        let Some((f, ce)) = self.on_wire.take() else {
            return;
        };
        let flow = &mut self.flows[f as usize];
        flow.delivered_bytes += self.wire;
        if now > self.window_start {
            flow.window_bytes += self.wire;
        }
        if ce {
            if self.np.on_packet(now, Qpn::new(f), ce) {
                self.send_cnp(now, f);
            } else {
                self.sync_np_timer();
            }
        }
        if let Some(next) = self.queue.pop_front() {
            self.account_queue(now);
            self.queue_bytes -= self.wire;
            self.start_transmission(now, next);
        }
    }

    fn send_cnp(&mut self, now: Time, f: u32) {
        self.report.summary.cnps += 1;
        self.push(now + self.cfg.feedback_delay, Kind::Cnp(f));
    }

    fn sync_np_timer(&mut self) {
        let Some(due) = self.np.next_timer() else {
            return;
        };
        if self.np_timer.is_none_or(|(t, _)| due < t) {
            let seq = self.push(due, Kind::NpTimer);
            self.np_timer = Some((due, seq));
        }
    }

    /// Integrates the queue length over the summary window, for its time-weighted mean.
    fn account_queue(&mut self, now: Time) {
        let from = self.queue_changed_at.max(self.window_start);
        if now > from {
            let span = (now - from).as_picos() as f64;
            self.report.window_queue_area += self.queue_bytes as f64 * span;
        }
        if now > self.window_start {
            self.report.summary.window_queue_max =
                self.report.summary.window_queue_max.max(self.queue_bytes);
        }
        self.queue_changed_at = now;
    }

    fn sample(&mut self, now: Time) {
        let interval = self.cfg.sample_interval.as_secs_f64();
        for flow in &mut self.flows {
            let bytes = flow.delivered_bytes - flow.sampled_bytes;
            flow.sampled_bytes = flow.delivered_bytes;
            let started = flow.report.start <= now;
            let rate = if started { flow.cc.rate_bps() } else { 0.0 };
            flow.report.rate_bps.push(rate);
            flow.report
                .throughput_bps
                .push(bytes as f64 * 8.0 / interval);
        }
        self.report.sample_times.push(now);
        self.report.queue_bytes.push(self.queue_bytes);
        self.report.queue_max_bytes.push(self.interval_queue_max);
        self.interval_queue_max = self.queue_bytes;
        self.push(now + self.cfg.sample_interval, Kind::Sample);
    }

    fn finish(mut self) -> SimReport {
        let window = self.cfg.window.as_secs_f64();
        for flow in &mut self.flows {
            let mut r = std::mem::replace(&mut flow.report, FlowReport::new(Time::ZERO));
            r.final_rate_bps = flow.cc.rate_bps();
            r.window_mean_bps = flow.window_bytes as f64 * 8.0 / window;
            r.packets = flow.sent;
            r.marked = flow.marked;
            r.cnps = flow.cnps;
            self.report.flows.push(r);
        }
        self.report.summarise(self.cfg);
        self.report
    }
}

#[cfg(test)]
mod tests;
