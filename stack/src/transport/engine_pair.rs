//! Two engines joined by a simulated link, in virtual time: the harness of the transport's
//! tests, and a building block for benchmarks and the demo.
//!
//! Each direction of the link sends one packet at a time at its line rate (the engine is
//! polled when the wire is free, as a NIC pulls from its queues) into the project's seeded
//! fault model, [`crate::fault::FaultyLink`]: loss, duplication, reordering, delay with
//! jitter, corruption and ECN CE marking, or a congested bottleneck queue.
//!
//! With [`Framing::Ethernet`] every packet travels as a complete RoCEv2 frame (Ethernet,
//! IPv4 marked ECT(0), UDP, ICRC) built by [`crate::wire::builder`]: a corrupted frame fails
//! the receiver's ICRC check and is dropped, as on a real link, and CE marks are seen.
//! [`Framing::Ib`] carries the IB part alone, for benchmarks that measure the engines: the
//! fault model's corruption is then drawn separately and the packet dropped, as its ICRC
//! check would.

use core::time::Duration;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use super::{
    Access, CqId, Engine, MAX_PACKET_LEN, ModifyQp, Mtu, QpInit, QpState, QpType, TransportConfig,
};
use crate::fault::{Delay, Fate, FaultConfig, FaultError, FaultyLink};
use crate::rng::Rng;
use crate::time::Instant;
use crate::wire::builder::RoceRepr;
use crate::wire::encap::{
    ETHERNET_FCS_LEN, ETHERNET_HEADER_LEN, ETHERNET_PREAMBLE_AND_GAP_LEN, Ecn, IPV4_HEADER_LEN,
    UDP_HEADER_LEN,
};
use crate::wire::icrc::ICRC_LEN;
use crate::wire::packet::RocePacket;
use crate::wire::{IbPacketRepr, Psn, Qpn, RnrTimer};

/// Engine A's IP address.
pub const ADDR_A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
/// Engine B's IP address.
pub const ADDR_B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
/// Engine A's MAC address, in the frames of [`Framing::Ethernet`] and [`Captured::frame`].
pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
/// Engine B's MAC address.
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

/// Bytes a RoCEv2 packet adds on the wire around the IB part: ICRC, UDP, IPv4, Ethernet and
/// its FCS, preamble and inter-frame gap (70).
pub const WIRE_OVERHEAD: usize = ICRC_LEN
    + UDP_HEADER_LEN
    + IPV4_HEADER_LEN
    + ETHERNET_HEADER_LEN
    + ETHERNET_FCS_LEN
    + ETHERNET_PREAMBLE_AND_GAP_LEN;

/// What travels on the simulated link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Complete RoCEv2 frames with ICRC.
    Ethernet,
    /// The IB part only (BTH through pad).
    Ib,
}

/// The simulated link between the two engines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Line rate of each direction in Gb/s; 0 means infinitely fast.
    pub gbps: f64,
    /// Delay and faults, the same model in each direction (seeded differently).
    pub faults: FaultConfig,
    /// What a packet on the link is: a whole frame or only its IB part.
    pub framing: Framing,
}

impl LinkConfig {
    /// A perfect 100 Gb/s link with 1 us of delay each way, carrying Ethernet frames.
    pub fn new() -> LinkConfig {
        LinkConfig {
            gbps: 100.0,
            faults: FaultConfig {
                delay: Delay {
                    base: Duration::from_micros(1),
                    jitter: Duration::ZERO,
                },
                ..FaultConfig::default()
            },
            framing: Framing::Ethernet,
        }
    }

    /// The same link losing `loss` of the packets at random.
    pub fn lossy(loss: f64) -> LinkConfig {
        let mut link = LinkConfig::new();
        link.faults.loss = loss;
        link
    }
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig::new()
    }
}

/// What the link did, both directions summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    /// Packets put on the link.
    pub sent: u64,
    /// Lost by the fault model or dropped by a test's filter.
    pub dropped: u64,
    /// Dropped at the receiver because their ICRC did not match.
    pub corrupted: u64,
    /// Packets the fault model delivered twice.
    pub duplicated: u64,
    /// Packets the fault model held back.
    pub reordered: u64,
    /// Delivered with ECN CE set.
    pub ce_marked: u64,
    /// Packets handed to the receiving engine.
    pub delivered: u64,
}

/// One of the two engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Engine A, at [`ADDR_A`].
    A,
    /// Engine B, at [`ADDR_B`].
    B,
}

impl Side {
    fn index(self) -> usize {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }

    fn addr(self) -> IpAddr {
        match self {
            Side::A => ADDR_A,
            Side::B => ADDR_B,
        }
    }

    fn mac(self) -> [u8; 6] {
        match self {
            Side::A => MAC_A,
            Side::B => MAC_B,
        }
    }

    fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// One packet a side sent, for tests that look at the exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// When it was sent.
    pub time: Instant,
    /// Which side sent it.
    pub from: Side,
    /// The sending QP (the UDP source port derives from it).
    pub src_qp: Qpn,
    /// BTH through pad.
    pub bytes: Vec<u8>,
    /// False if the fault model or the filter dropped it at once (a packet corrupted on the
    /// way is dropped later, at the receiver).
    pub delivered: bool,
}

impl Captured {
    /// The packet as the complete frame rxe would put on the wire (for pcap files).
    pub fn frame(&self) -> Option<Vec<u8>> {
        let ib = IbPacketRepr::parse(&self.bytes).ok()?;
        let to = self.from.peer();
        let repr = RoceRepr::rxe(
            self.from.mac(),
            to.mac(),
            self.from.addr(),
            to.addr(),
            self.src_qp,
            ib,
        )?;
        repr.to_vec().ok()
    }
}

/// Decides whether a packet the fault model let through is dropped anyway: tests use it to
/// lose exactly the packets a rule is about.
pub type Filter = Box<dyn FnMut(Side, &[u8]) -> bool>;

/// Where the IB part starts in the frames of [`Framing::Ethernet`] (Ethernet, IPv4, UDP): the
/// engine writes there and the headers are filled in front.
const IB_OFFSET: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;

/// Two engines, A and B, and the link between them.
pub struct Pair {
    /// Engine A.
    pub a: Engine,
    /// Engine B.
    pub b: Engine,
    now: Instant,
    link: LinkConfig,
    /// Per direction (A to B, B to A): when the wire is free, and the fault model.
    free_at: [Instant; 2],
    lines: [FaultyLink; 2],
    /// Corruption draws of [`Framing::Ib`].
    rng: Rng,
    pool: Vec<Vec<u8>>,
    scratch: Vec<u8>,
    /// What the link did so far.
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
    /// The RC QP on side A.
    pub qp_a: Qpn,
    /// The RC QP on side B.
    pub qp_b: Qpn,
    /// A's completion queue, for sends and receives.
    pub cq_a: CqId,
    /// B's completion queue, for sends and receives.
    pub cq_b: CqId,
}

/// Attributes for [`Pair::connect`]; the same on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Path MTU.
    pub mtu: Mtu,
    /// A's first send PSN (B's expected PSN).
    pub psn_a: Psn,
    /// B's first send PSN (A's expected PSN).
    pub psn_b: Psn,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Retries after a timeout.
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (7: forever).
    pub rnr_retry: u8,
    /// The RNR NAK timer each responder asks for.
    pub min_rnr_timer: RnrTimer,
    /// READs and atomics outstanding per requester, and kept per responder.
    pub max_rd_atomic: u8,
    /// Remote operations each responder accepts.
    pub access: Access,
    /// The Q_Key (UD).
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
    /// Two engines with `config` over `link`; `seed` decides every fault.
    pub fn new(config: TransportConfig, link: LinkConfig, seed: u64) -> Result<Pair, FaultError> {
        let lines = Self::lines(&link, seed)?;
        Ok(Pair {
            a: Engine::new(config),
            b: Engine::new(config),
            now: Instant::ZERO,
            link,
            free_at: [Instant::ZERO; 2],
            lines,
            rng: Rng::new(seed ^ 0xc0ff_ee00),
            pool: Vec::new(),
            scratch: vec![0; MAX_PACKET_LEN],
            stats: LinkStats::default(),
            capture: None,
            filter: None,
        })
    }

    fn lines(link: &LinkConfig, seed: u64) -> Result<[FaultyLink; 2], FaultError> {
        let mut faults = link.faults;
        if link.framing == Framing::Ib {
            // Without an ICRC a corrupted packet could not be told apart: drawn separately.
            faults.corrupt = 0.0;
        }
        Ok([
            FaultyLink::new(faults, seed)?,
            FaultyLink::new(faults, seed.rotate_left(32) ^ 0x5151)?,
        ])
    }

    /// The virtual time both engines have reached.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The link as configured.
    pub fn link(&self) -> &LinkConfig {
        &self.link
    }

    /// Changes the link from now on (for example to cut it); packets already on their way
    /// are lost with the old link.
    pub fn set_link(&mut self, link: LinkConfig, seed: u64) -> Result<(), FaultError> {
        self.lines = Self::lines(&link, seed)?;
        self.link = link;
        Ok(())
    }

    /// The engine on `side`.
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
        let init_a = QpInit::new(qp_type, cq_a);
        let init_b = QpInit::new(qp_type, cq_b);
        self.connect_with(init_a, init_b, opts)
    }

    /// [`Pair::connect`] with queue pairs created as `init_a` and `init_b` say (a shared
    /// receive queue, a protection domain, CQs of the caller's); both of one type.
    pub fn connect_with(
        &mut self,
        init_a: QpInit,
        init_b: QpInit,
        opts: &ConnectOptions,
    ) -> Connection {
        let qp_type = init_a.qp_type;
        let (cq_a, cq_b) = (init_a.recv_cq, init_b.recv_cq);
        let qp_a = self.a.create_qp(init_a).expect("new QP");
        let qp_b = self.b.create_qp(init_b).expect("new QP");
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
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        for d in 0..2 {
            if let Some(at) = self.lines[d].next_delivery() {
                consider(at);
            }
            if self.free_at[d] > self.now {
                consider(self.free_at[d]);
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
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
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
    pub fn run_idle(&mut self, limit: Instant) -> bool {
        while self.now <= limit {
            if !self.step() {
                return true;
            }
        }
        false
    }

    fn transmit(&mut self) {
        for from in [Side::A, Side::B] {
            let d = from.index();
            while self.free_at[d] <= self.now {
                let now = self.now;
                let mut buf = self.pool.pop().unwrap_or_default();
                buf.resize(IB_OFFSET + MAX_PACKET_LEN + ICRC_LEN, 0);
                let written = match self.link.framing {
                    Framing::Ib => self.engine(from).poll_transmit(now, &mut buf),
                    Framing::Ethernet => {
                        let mut scratch = core::mem::take(&mut self.scratch);
                        let t = self.engine(from).poll_transmit(now, &mut scratch);
                        self.scratch = scratch;
                        t
                    }
                };
                let Some(t) = written else {
                    self.pool.push(buf);
                    break;
                };
                let bits = ((t.len + WIRE_OVERHEAD) * 8) as f64;
                let ser = if self.link.gbps > 0.0 {
                    Duration::from_nanos((bits / self.link.gbps).ceil() as u64)
                } else {
                    Duration::ZERO
                };
                self.free_at[d] = now + ser;
                let len = match self.link.framing {
                    Framing::Ib => t.len,
                    Framing::Ethernet => match self.frame(from, t.src_qp, t.len, &mut buf) {
                        Some(len) => len,
                        None => continue,
                    },
                };
                buf.truncate(len);
                self.launch(from, t.src_qp, buf);
            }
        }
    }

    /// Builds the frame of the IB packet in `scratch` into `buf`, as rxe would send it but
    /// ECN-capable (ECT(0)) so that CE marking can show.
    fn frame(&self, from: Side, src_qp: Qpn, len: usize, buf: &mut [u8]) -> Option<usize> {
        let ib = IbPacketRepr::parse(&self.scratch[..len]).ok()?;
        let to = from.peer();
        let repr = RoceRepr::rxe(from.mac(), to.mac(), from.addr(), to.addr(), src_qp, ib)?
            .with_ecn(Ecn::Ect0);
        repr.emit(buf).ok()
    }

    /// Hands a packet that left at `free_at` to the fault model.
    fn launch(&mut self, from: Side, src_qp: Qpn, frame: Vec<u8>) {
        let d = from.index();
        self.stats.sent += 1;
        let corrupt_ib =
            self.link.framing == Framing::Ib && self.rng.chance(self.link.faults.corrupt);
        let ib = match self.link.framing {
            Framing::Ib => &frame[..],
            Framing::Ethernet => &frame[IB_OFFSET..frame.len().saturating_sub(ICRC_LEN)],
        };
        let filtered = match &mut self.filter {
            Some(keep) => !keep(from, ib),
            None => false,
        };
        let copy = self.capture.is_some().then(|| ib.to_vec());
        let fate = if filtered || corrupt_ib {
            self.pool.push(frame);
            Fate::Dropped
        } else {
            self.lines[d].send(self.free_at[d], frame)
        };
        if let (Some(capture), Some(bytes)) = (&mut self.capture, copy) {
            capture.push(Captured {
                time: self.now,
                from,
                src_qp,
                bytes,
                delivered: fate != Fate::Dropped,
            });
        }
        match fate {
            Fate::Dropped if corrupt_ib => self.stats.corrupted += 1,
            Fate::Dropped => self.stats.dropped += 1,
            Fate::Scheduled {
                copies, reordered, ..
            } => {
                self.stats.duplicated += u64::from(copies > 1);
                self.stats.reordered += u64::from(reordered);
            }
        }
    }

    fn deliver(&mut self) {
        for to in [Side::B, Side::A] {
            let d = to.peer().index();
            let now = self.now;
            while let Some(frame) = self.lines[d].poll(now) {
                self.receive(to, &frame);
                self.pool.push(frame);
            }
        }
    }

    /// What the receiving endpoint does: check the frame (ICRC, IP checksum) and hand the IB
    /// part to the engine.
    fn receive(&mut self, to: Side, frame: &[u8]) {
        let now = self.now;
        let (src, ib) = match self.link.framing {
            Framing::Ib => (to.peer().addr(), frame),
            Framing::Ethernet => {
                let packet = match RocePacket::parse(frame) {
                    Ok(p) if p.icrc_ok() && p.ip_checksum_ok() => p,
                    _ => {
                        self.stats.corrupted += 1;
                        return;
                    }
                };
                if packet.ecn() == Ecn::Ce {
                    self.stats.ce_marked += 1;
                }
                let start = packet.bth_offset();
                let end = start + packet.ib().buffer_len();
                (packet.ip().src_addr(), &frame[start..end])
            }
        };
        self.stats.delivered += 1;
        let _ = self.engine(to).handle_packet(now, src, ib);
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
