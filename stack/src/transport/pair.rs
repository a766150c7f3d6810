//! Two engines joined by a simulated link, in virtual time: the harness of the transport's
//! tests, and a building block for benchmarks and the demo.
//!
//! Each direction of the link sends one packet at a time at its line rate (the engine is
//! polled when the wire is free, as a NIC pulls from its queues), then applies the seeded
//! faults: loss, duplication, reordering (extra delay), corruption (dropped, as the
//! receiver's ICRC check would drop it) and ECN CE marking (counted; the IB part carries no IP
//! header to mark). The fault decisions draw from `roce::rng::Rng` in the same order as the
//! project's `fault` model, so the link can be swapped for it once that lands on main.

use core::time::Duration;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use super::{
    Access, CqId, Engine, MAX_PACKET_LEN, ModifyQp, Mtu, QpInit, QpState, QpType, Time,
    TransportConfig,
};
use crate::rng::Rng;
use crate::wire::{Psn, Qpn, RnrTimer};

pub const ADDR_A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
pub const ADDR_B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

/// Bytes a RoCEv2 packet adds on the wire around the IB part: ICRC 4, UDP 8, IPv4 20,
/// Ethernet 14 + FCS 4, preamble and inter-frame gap 20.
pub const WIRE_OVERHEAD: usize = 70;

/// Probabilities in `[0, 1]` of each fault, per packet.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    /// Extra delay of a reordered packet.
    pub reorder_delay: Duration,
    pub corrupt: f64,
    pub ce_mark: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Line rate of each direction in Gb/s; 0 means infinitely fast.
    pub gbps: f64,
    /// One-way propagation delay.
    pub delay: Duration,
    pub faults: Faults,
}

impl Default for LinkConfig {
    /// 100 Gb/s, 1 us each way, no faults.
    fn default() -> Self {
        LinkConfig {
            gbps: 100.0,
            delay: Duration::from_micros(1),
            faults: Faults::default(),
        }
    }
}

/// What the link did, per direction summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    pub sent: u64,
    pub dropped: u64,
    pub corrupted: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub ce_marked: u64,
    pub delivered: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

/// One packet the link carried, for tests that look at the exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    pub time: Time,
    pub from: Side,
    /// BTH through pad.
    pub bytes: Vec<u8>,
    /// False if the link dropped (or corrupted) it.
    pub delivered: bool,
}

/// Decides whether a packet the fault model let through is dropped anyway: tests use it to
/// lose exactly the packets a rule is about.
pub type Filter = Box<dyn FnMut(Side, &[u8]) -> bool>;

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Time,
    seq: u64,
    len: usize,
    buf: Vec<u8>,
}

#[derive(Debug, Default)]
struct Direction {
    free_at: Time,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
}

/// Two engines, A and B, and the link between them.
pub struct Pair {
    pub a: Engine,
    pub b: Engine,
    now: Time,
    link: LinkConfig,
    dirs: [Direction; 2],
    rng: Rng,
    pool: Vec<Vec<u8>>,
    pub stats: LinkStats,
    /// When set, every packet is recorded here.
    pub capture: Option<Vec<Captured>>,
    /// When set, packets it returns false for are dropped.
    pub filter: Option<Filter>,
}

impl fmt::Debug for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pair")
            .field("now", &self.now)
            .field("link", &self.link)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The queue pairs and CQs [`Pair::connect`] made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    pub qp_a: Qpn,
    pub qp_b: Qpn,
    pub cq_a: CqId,
    pub cq_b: CqId,
}

/// Attributes for [`Pair::connect`]; the same on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectOptions {
    pub mtu: Mtu,
    pub psn_a: Psn,
    pub psn_b: Psn,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: RnrTimer,
    pub max_rd_atomic: u8,
    pub access: Access,
    pub qkey: u32,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            mtu: Mtu::M1024,
            psn_a: Psn::new(100),
            psn_b: Psn::new(5000),
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: RnrTimer::new(1),
            max_rd_atomic: 4,
            access: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            qkey: 0x1111_1111,
        }
    }
}

impl Pair {
    pub fn new(config: TransportConfig, link: LinkConfig, seed: u64) -> Pair {
        Pair {
            a: Engine::new(config),
            b: Engine::new(config),
            now: Time::ZERO,
            link,
            dirs: [Direction::default(), Direction::default()],
            rng: Rng::new(seed),
            pool: Vec::new(),
            stats: LinkStats::default(),
            capture: None,
            filter: None,
        }
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn link(&self) -> &LinkConfig {
        &self.link
    }

    /// Changes the link (for example to cut it) from now on.
    pub fn set_link(&mut self, link: LinkConfig) {
        self.link = link;
    }

    pub fn engine(&mut self, side: Side) -> &mut Engine {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// Creates a CQ and a queue pair of `qp_type` on each side and brings both to RTS,
    /// connected to each other (UD: to RTS with `opts.qkey`).
    pub fn connect(&mut self, qp_type: QpType, opts: &ConnectOptions) -> Connection {
        let cq_a = self.a.create_cq(1 << 16);
        let cq_b = self.b.create_cq(1 << 16);
        let qp_a = self
            .a
            .create_qp(QpInit::new(qp_type, cq_a))
            .expect("new QP");
        let qp_b = self
            .b
            .create_qp(QpInit::new(qp_type, cq_b))
            .expect("new QP");
        let ends = [
            (Side::A, qp_a, qp_b, ADDR_B, opts.psn_a, opts.psn_b),
            (Side::B, qp_b, qp_a, ADDR_A, opts.psn_b, opts.psn_a),
        ];
        for (side, qpn, peer, peer_addr, sq_psn, rq_psn) in ends {
            let engine = self.engine(side);
            for m in bring_up(qp_type, opts, peer, peer_addr, sq_psn, rq_psn) {
                engine.modify_qp(qpn, &m).expect("valid transition");
            }
        }
        Connection {
            qp_a,
            qp_b,
            cq_a,
            cq_b,
        }
    }

    /// Moves time forward to the next event and handles it. False when nothing is left to
    /// happen: no packet in flight, no timer armed, nothing to send.
    pub fn step(&mut self) -> bool {
        self.transmit();
        let mut next = [self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        for d in &self.dirs {
            if let Some(Reverse(p)) = d.in_flight.peek() {
                next = Some(next.map_or(p.at, |n| n.min(p.at)));
            }
            if d.free_at > self.now {
                next = Some(next.map_or(d.free_at, |n| n.min(d.free_at)));
            }
        }
        let Some(next) = next else {
            return false;
        };
        self.now = self.now.max(next);
        self.deliver();
        for side in [Side::A, Side::B] {
            let now = self.now;
            let engine = self.engine(side);
            if engine.poll_timeout().is_some_and(|t| t <= now) {
                engine.handle_timeout(now);
            }
        }
        true
    }

    /// Steps until `done` holds (true), nothing is left to happen or `limit` passes (false).
    pub fn run_until(&mut self, limit: Time, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.now > limit || !self.step() {
                return done(self);
            }
        }
    }

    /// Steps until nothing is left to happen or `limit` passes; true if it went idle.
    pub fn run_idle(&mut self, limit: Time) -> bool {
        while self.now <= limit {
            if !self.step() {
                return true;
            }
        }
        false
    }

    fn transmit(&mut self) {
        for (d, from) in [(0, Side::A), (1, Side::B)] {
            while self.dirs[d].free_at <= self.now {
                let mut buf = self.pool.pop().unwrap_or_else(|| vec![0; MAX_PACKET_LEN]);
                let now = self.now;
                let Some(t) = self.engine(from).poll_transmit(now, &mut buf) else {
                    self.pool.push(buf);
                    break;
                };
                let bits = ((t.len + WIRE_OVERHEAD) * 8) as f64;
                let ser = if self.link.gbps > 0.0 {
                    Duration::from_nanos((bits / self.link.gbps).ceil() as u64)
                } else {
                    Duration::ZERO
                };
                self.dirs[d].free_at = now + ser;
                self.launch(d, from, buf, t.len);
            }
        }
    }

    /// Applies the faults to a packet that left at `free_at` and schedules its deliveries.
    fn launch(&mut self, d: usize, from: Side, buf: Vec<u8>, len: usize) {
        let f = self.link.faults;
        self.stats.sent += 1;
        let lost = self.rng.chance(f.loss);
        let duplicated = self.rng.chance(f.duplicate);
        let reordered = self.rng.chance(f.reorder);
        let corrupt = self.rng.chance(f.corrupt);
        let ce = self.rng.chance(f.ce_mark);
        let filtered = match &mut self.filter {
            Some(keep) => !keep(from, &buf[..len]),
            None => false,
        };
        let delivered = !(lost || corrupt || filtered);
        if let Some(capture) = &mut self.capture {
            capture.push(Captured {
                time: self.now,
                from,
                bytes: buf[..len].to_vec(),
                delivered,
            });
        }
        if !delivered {
            self.stats.dropped += u64::from(lost || filtered);
            self.stats.corrupted += u64::from(corrupt && !lost);
            self.pool.push(buf);
            return;
        }
        self.stats.ce_marked += u64::from(ce);
        let mut at = self.dirs[d].free_at + self.link.delay;
        if reordered {
            self.stats.reordered += 1;
            at = at + f.reorder_delay;
        }
        if duplicated {
            self.stats.duplicated += 1;
            let copy = buf.clone();
            self.schedule(d, at, copy, len);
        }
        self.schedule(d, at, buf, len);
    }

    fn schedule(&mut self, d: usize, at: Time, buf: Vec<u8>, len: usize) {
        let dir = &mut self.dirs[d];
        dir.seq += 1;
        dir.in_flight.push(Reverse(InFlight {
            at,
            seq: dir.seq,
            len,
            buf,
        }));
    }

    fn deliver(&mut self) {
        for (d, to, src) in [(0, Side::B, ADDR_A), (1, Side::A, ADDR_B)] {
            while self.dirs[d]
                .in_flight
                .peek()
                .is_some_and(|Reverse(p)| p.at <= self.now)
            {
                let Some(Reverse(p)) = self.dirs[d].in_flight.pop() else {
                    break;
                };
                self.stats.delivered += 1;
                let now = self.now;
                let _ = self.engine(to).handle_packet(now, src, &p.buf[..p.len]);
                self.pool.push(p.buf);
            }
        }
    }
}

/// The modifications RESET -> INIT -> RTR -> RTS of one side.
fn bring_up(
    qp_type: QpType,
    opts: &ConnectOptions,
    peer: Qpn,
    peer_addr: IpAddr,
    sq_psn: Psn,
    rq_psn: Psn,
) -> [ModifyQp; 3] {
    let connected = qp_type != QpType::Ud;
    let init = ModifyQp {
        access: connected.then_some(opts.access),
        qkey: (!connected).then_some(opts.qkey),
        ..ModifyQp::to(QpState::Init)
    };
    let rtr = if connected {
        ModifyQp {
            path_mtu: Some(opts.mtu),
            dest_qp: Some(peer),
            dest_addr: Some(peer_addr),
            rq_psn: Some(rq_psn),
            max_dest_rd_atomic: (qp_type == QpType::Rc).then_some(opts.max_rd_atomic),
            min_rnr_timer: (qp_type == QpType::Rc).then_some(opts.min_rnr_timer),
            ..ModifyQp::to(QpState::Rtr)
        }
    } else {
        ModifyQp::to(QpState::Rtr)
    };
    let rc = qp_type == QpType::Rc;
    let rts = ModifyQp {
        sq_psn: Some(sq_psn),
        timeout: rc.then_some(opts.timeout),
        retry_cnt: rc.then_some(opts.retry_cnt),
        rnr_retry: rc.then_some(opts.rnr_retry),
        max_rd_atomic: rc.then_some(opts.max_rd_atomic),
        ..ModifyQp::to(QpState::Rts)
    };
    [init, rtr, rts]
}
