//! Two connection managers, each with its engine, exchanging MADs in virtual time over a
//! link that can lose, duplicate or hold back any of them.

use core::time::Duration;
use std::net::IpAddr;

use super::*;
use crate::endpoint::gid::{GidTable, IpCidr};
use crate::transport::{CqId, QpInit, TransportConfig};
use crate::wire::cm::{CmAttribute, CmMadRepr, RtuRepr};
use crate::wire::mad::MadHeaderRepr;

/// The same over two whole hosts on the virtual net: ARP, frames, loss.
mod host;

const PORT: u16 = 7174;
/// Directions, as the log and the fate see them.
const TO_A: bool = false;
const TO_B: bool = true;

/// One-way delay of the test link.
const DELAY: Duration = Duration::from_micros(10);

struct Side {
    cm: ConnectionManager,
    engine: Engine,
    gids: GidTable,
    addr: IpAddr,
    cq: CqId,
    events: Vec<CmEvent>,
}

impl Side {
    fn new(addr: &str, seed: u64) -> Side {
        let cidr: IpCidr = format!("{addr}/24").parse().unwrap();
        let mut engine = Engine::new(TransportConfig::default());
        let cq = engine.create_cq(64);
        Side {
            cm: ConnectionManager::new(CmConfig {
                seed,
                ..CmConfig::default()
            }),
            engine,
            gids: GidTable::new([2, 0, 0, 0, 0, seed as u8], &[cidr]),
            addr: cidr.addr(),
            cq,
            events: Vec::new(),
        }
    }

    fn qp(&mut self) -> Qpn {
        self.engine
            .create_qp(QpInit::new(QpType::Rc, self.cq))
            .unwrap()
    }

    fn take_events(&mut self) -> Vec<CmEvent> {
        std::mem::take(&mut self.events)
    }
}

/// A MAD on the wire: when it arrives, whether it goes to B, and its bytes.
/// A MAD on its way: when it arrives, whether to B, the traffic class it arrives with (IPv6
/// only), the MAD.
type InFlight = (Instant, bool, Option<u8>, Vec<u8>);

/// Decides the fate of each MAD: true to drop it. Sees the direction (true: A to B) and
/// the message.
type Fate = Box<dyn FnMut(bool, CmAttribute) -> bool>;

struct Pair {
    a: Side,
    b: Side,
    now: Instant,
    wire: Vec<InFlight>,
    fate: Fate,
    /// Every MAD sent: (direction, message), dropped ones included.
    log: Vec<(bool, CmAttribute)>,
    /// The same with the traffic class each was sent with.
    classes: Vec<(bool, CmAttribute, Option<u8>)>,
    /// Whether the MADs travel over IPv6, so that each arrives with its traffic class.
    ipv6: bool,
}

impl Pair {
    fn new() -> Pair {
        Pair {
            a: Side::new("10.0.0.1", 1),
            b: Side::new("10.0.0.2", 2),
            now: Instant::ZERO,
            wire: Vec::new(),
            fate: Box::new(|_, _| false),
            log: Vec::new(),
            classes: Vec::new(),
            ipv6: false,
        }
    }

    fn side(&mut self, to_b: bool) -> &mut Side {
        if to_b { &mut self.b } else { &mut self.a }
    }

    /// Moves MADs and fires timers until nothing happens before `now + period`.
    fn run_for(&mut self, period: Duration) {
        let end = self.now + period;
        loop {
            self.flush();
            let next_wire = self.wire.iter().map(|w| w.0).min();
            let next = [
                next_wire,
                self.a.cm.poll_timeout(),
                self.b.cm.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next.filter(|&t| t <= end) else {
                self.now = end;
                return;
            };
            self.now = self.now.max(next);
            let now = self.now;
            let (due, later): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|w| w.0 <= now);
            self.wire = later;
            for (_, to_b, class, mad) in due {
                let from = self.side(!to_b).addr;
                let s = self.side(to_b);
                s.cm.handle_mad(now, from, class, &mad, &s.gids, &mut s.engine);
            }
            for s in [&mut self.a, &mut self.b] {
                s.cm.handle_timeout(now, &mut s.engine);
            }
        }
    }

    /// Collects each side's MADs onto the wire and its events into its list.
    fn flush(&mut self) {
        for to_b in [true, false] {
            let now = self.now;
            loop {
                let s = self.side(!to_b);
                let Some(o) = s.cm.poll_transmit() else { break };
                let attr = CmMadRepr::parse(&o.mad).unwrap().message.attribute();
                self.log.push((to_b, attr));
                self.classes.push((to_b, attr, o.traffic_class));
                if !(self.fate)(to_b, attr) {
                    let class = o.traffic_class.filter(|_| self.ipv6);
                    self.wire.push((now + DELAY, to_b, class, o.mad));
                }
            }
        }
        for s in [&mut self.a, &mut self.b] {
            while let Some(e) = s.cm.poll_event() {
                s.events.push(e);
            }
        }
    }

    fn sent(&self, to_b: bool, attr: CmAttribute) -> usize {
        self.log.iter().filter(|&&l| l == (to_b, attr)).count()
    }

    /// A listens; B connects a fresh QP. Returns (B's connection, B's QP, A's QP).
    fn connect(&mut self) -> (ConnId, Qpn, Qpn) {
        let _ = self.a.cm.listen(ListenParams {
            port_space: PortSpace::Tcp,
            port: PORT,
            addr: None,
        });
        let qp_b = self.b.qp();
        let qp_a = self.a.qp();
        let params = ConnectParams::rc(self.b.addr, self.a.addr, PORT, qp_b);
        let now = self.now;
        let id = self.b.cm.connect(now, params, &mut self.b.engine).unwrap();
        (id, qp_b, qp_a)
    }

    /// A's first ConnectRequest.
    fn request(&mut self) -> (ConnId, ConnectRequest) {
        self.flush();
        self.a
            .events
            .iter()
            .find_map(|e| match e {
                CmEvent::ConnectRequest { id, request } => Some((*id, request.clone())),
                _ => None,
            })
            .expect("a connect request")
    }

    /// Runs until A has a connect request (at most `limit`), and returns it.
    fn run_until_request(&mut self, limit: Duration) -> (ConnId, ConnectRequest) {
        let step = Duration::from_millis(1);
        let mut waited = Duration::ZERO;
        while waited < limit {
            self.run_for(step);
            waited += step;
            let has = self
                .a
                .events
                .iter()
                .any(|e| matches!(e, CmEvent::ConnectRequest { .. }));
            if has {
                break;
            }
        }
        self.request()
    }

    fn accept(&mut self, id: ConnId, qpn: Qpn) {
        let now = self.now;
        self.a
            .cm
            .accept(now, id, AcceptParams::new(qpn), &mut self.a.engine)
            .unwrap();
    }

    /// Connects B to A and runs the handshake to its end.
    fn established(&mut self) -> (ConnId, ConnId, Qpn, Qpn) {
        let (b_id, qp_b, qp_a) = self.connect();
        self.run_for(Duration::from_millis(1));
        let (a_id, _) = self.request();
        self.accept(a_id, qp_a);
        self.run_for(Duration::from_millis(1));
        assert!(matches!(
            self.b.events.last(),
            Some(CmEvent::Established { .. })
        ));
        assert!(matches!(
            self.a.events.last(),
            Some(CmEvent::Established { .. })
        ));
        (a_id, b_id, qp_a, qp_b)
    }
}

fn is_established(events: &[CmEvent]) -> bool {
    events
        .iter()
        .any(|e| matches!(e, CmEvent::Established { .. }))
}

#[test]
fn connect_accept_disconnect_moves_both_qps() {
    let mut p = Pair::new();
    let (b_id, qp_b, qp_a) = p.connect();
    p.run_for(Duration::from_millis(1));
    let (a_id, req) = p.request();
    assert_eq!(req.peer, p.b.addr);
    assert_eq!(req.remote_qpn, qp_b);
    assert_eq!(req.qp_type, QpType::Rc);
    p.accept(a_id, qp_a);
    p.run_for(Duration::from_millis(1));
    assert!(is_established(&p.a.events) && is_established(&p.b.events));
    let order: Vec<_> = p.log.iter().map(|l| l.1.name()).collect();
    assert_eq!(order, ["REQ", "REP", "RTU"]);
    // Each QP is in RTS, connected to the other with the other's first PSN.
    let (state_a, attrs_a) = p.a.engine.query_qp(qp_a).unwrap();
    let (state_b, attrs_b) = p.b.engine.query_qp(qp_b).unwrap();
    assert_eq!((state_a, state_b), (QpState::Rts, QpState::Rts));
    assert_eq!((attrs_a.dest_qp, attrs_b.dest_qp), (qp_b, qp_a));
    assert_eq!(attrs_a.rq_psn, attrs_b.sq_psn);
    assert_eq!(attrs_b.rq_psn, attrs_a.sq_psn);
    // As Linux: a side's Starting PSN is what its responder expects (the client of
    // pcaps/rdma_cm_rping.pcap sends its first SEND with the REP's PSN).
    let path = p.b.cm.conns[&b_id.0].path.unwrap();
    assert_eq!(
        (attrs_b.rq_psn, attrs_b.sq_psn),
        (path.local_psn, path.remote_psn)
    );
    assert_eq!((attrs_a.dest_addr, attrs_b.dest_addr), (p.b.addr, p.a.addr));
    assert_eq!(attrs_a.path_mtu, Mtu::M1024);
    assert_eq!(
        (attrs_a.max_rd_atomic, attrs_a.max_dest_rd_atomic),
        (1, 1),
        "rping's depth"
    );
    let info = p.b.cm.info(b_id).unwrap();
    assert!(info.established);
    assert_eq!(info.remote_qpn, qp_a);

    p.b.cm.disconnect(p.now, b_id, &mut p.b.engine).unwrap();
    p.run_for(Duration::from_millis(1));
    for s in [&p.a, &p.b] {
        assert!(
            matches!(s.events.last(), Some(CmEvent::Disconnected { .. })),
            "{:?}",
            s.events
        );
    }
    assert_eq!(p.a.engine.query_qp(qp_a).unwrap().0, QpState::Err);
    assert_eq!(p.b.engine.query_qp(qp_b).unwrap().0, QpState::Err);
    assert_eq!(p.log.last().unwrap().1, CmAttribute::Drep);
    assert_eq!(p.a.cm.info(a_id).unwrap().state, "in time-wait");
    p.run_for(p.a.cm.config().time_wait * 2);
    assert_eq!(
        (p.a.cm.connections(), p.b.cm.connections()),
        (0, 0),
        "forgotten after time-wait"
    );
}

/// Linux's CM sends a connection's MADs with the connection's address vector, so with its
/// path's traffic class: the client's TOS on REQ, RTU and DREQ, the REQ's on the server's REP
/// and DREP, a SIDR_REQ's TOS. Answers made from a received MAD alone (REJ for a port nobody
/// listens on, SIDR_REP) go with none over IPv4 and with the received MAD's class over IPv6,
/// as Linux's (`ib_init_ah_attr_from_wc` reads the class from the GRH area's first bytes: an
/// IPv6 header's, zeroes for IPv4).
#[test]
fn mads_carry_their_connections_traffic_class() {
    for ipv6 in [false, true] {
        mads_carry_traffic_class(ipv6);
    }
}

fn mads_carry_traffic_class(ipv6: bool) {
    let mut p = Pair::new();
    p.ipv6 = ipv6;
    let tos = Some(104);
    // What answers made from a received MAD alone go with.
    let echoed = if ipv6 { tos } else { None };
    for (port_space, port) in [(PortSpace::Tcp, PORT), (PortSpace::Udp, PORT)] {
        let listen = ListenParams {
            port_space,
            port,
            addr: None,
        };
        p.a.cm.listen(listen).unwrap();
    }
    let (qp_b, qp_a) = (p.b.qp(), p.a.qp());
    let mut params = ConnectParams::rc(p.b.addr, p.a.addr, PORT, qp_b);
    params.traffic_class = tos;
    let b_id = p.b.cm.connect(p.now, params, &mut p.b.engine).unwrap();
    p.run_for(Duration::from_millis(1));
    let (a_id, _) = p.request();
    p.accept(a_id, qp_a);
    p.run_for(Duration::from_millis(1));
    p.b.cm.disconnect(p.now, b_id, &mut p.b.engine).unwrap();
    p.run_for(Duration::from_millis(1));
    let qp = p.b.qp();
    let mut params = ConnectParams::rc(p.b.addr, p.a.addr, PORT + 1, qp);
    params.traffic_class = tos;
    p.b.cm.connect(p.now, params, &mut p.b.engine).unwrap();
    p.run_for(Duration::from_millis(1));
    let params = SidrParams {
        dest: p.a.addr,
        src: p.b.addr,
        port: PORT,
        private_data: Vec::new(),
        traffic_class: tos,
    };
    p.b.cm.resolve(p.now, params).unwrap();
    p.run_for(Duration::from_millis(1));
    let Some(CmEvent::SidrRequest { id, .. }) = p.a.events.last().cloned() else {
        panic!("{:?}", p.a.events)
    };
    let reply = SidrReply::new(Qpn::new(0x42), RDMA_UDP_QKEY);
    p.a.cm.sidr_reply(p.now, id, &reply).unwrap();
    p.run_for(Duration::from_millis(1));
    use CmAttribute::*;
    assert_eq!(
        p.classes,
        [
            (TO_A, Req, tos),
            (TO_B, Rep, tos),
            (TO_A, Rtu, tos),
            (TO_A, Dreq, tos),
            (TO_B, Drep, tos),
            (TO_A, Req, tos),
            (TO_B, Rej, echoed),
            (TO_A, SidrReq, tos),
            (TO_B, SidrRep, echoed),
        ],
        "over IPv6: {ipv6}"
    );
}

#[test]
fn no_listener_is_rejected_with_invalid_service_id() {
    let mut p = Pair::new();
    let qp = p.b.qp();
    let params = ConnectParams::rc(p.b.addr, p.a.addr, PORT, qp);
    let id = p.b.cm.connect(p.now, params, &mut p.b.engine).unwrap();
    p.run_for(Duration::from_millis(1));
    assert_eq!(
        p.b.take_events(),
        [CmEvent::Rejected {
            id,
            reason: reject_reason::INVALID_SERVICE_ID,
            private_data: vec![0; 148]
        }]
    );
    assert_eq!(p.b.cm.connections(), 0);
    assert_eq!(p.a.cm.connections(), 0, "no state kept for a refused REQ");
    assert_eq!(p.a.cm.stats().rejects_sent, 1);
}

#[test]
fn consumer_reject_carries_private_data() {
    let mut p = Pair::new();
    let (b_id, _, _) = p.connect();
    p.run_for(Duration::from_millis(1));
    let (a_id, _) = p.request();
    p.a.cm.reject(p.now, a_id, b"busy").unwrap();
    p.run_for(Duration::from_millis(1));
    let events = p.b.take_events();
    let [
        CmEvent::Rejected {
            id,
            reason,
            private_data,
        },
    ] = &events[..]
    else {
        panic!("{events:?}");
    };
    assert_eq!((*id, *reason), (b_id, reject_reason::CONSUMER_DEFINED));
    assert_eq!(&private_data[..4], b"busy");
}

#[test]
fn lost_req_rep_and_rtu_are_recovered_by_retries() {
    for lost in [CmAttribute::Req, CmAttribute::Rep, CmAttribute::Rtu] {
        let mut p = Pair::new();
        let mut dropped = false;
        p.fate = Box::new(move |_, attr| {
            let drop = attr == lost && !dropped;
            dropped |= drop;
            drop
        });
        let (_, _, qp_a) = p.connect();
        let (a_id, _) = p.run_until_request(Duration::from_secs(5));
        p.accept(a_id, qp_a);
        p.run_for(Duration::from_secs(10));
        assert!(is_established(&p.a.events), "{lost:?}: {:?}", p.a.events);
        assert!(is_established(&p.b.events), "{lost:?}: {:?}", p.b.events);
        assert_eq!(
            p.sent(true, lost) + p.sent(false, lost),
            2,
            "{lost:?} sent twice: {:?}",
            p.log
        );
    }
}

#[test]
fn a_lost_rtu_is_replaced_by_the_first_packet_on_the_qp() {
    let mut p = Pair::new();
    p.fate = Box::new(|_, attr| attr == CmAttribute::Rtu);
    let (_, _, qp_a) = p.connect();
    p.run_for(Duration::from_millis(1));
    let (a_id, _) = p.request();
    p.accept(a_id, qp_a);
    p.run_for(Duration::from_millis(1));
    assert!(!is_established(&p.a.events));
    assert!(p.a.cm.awaits_rtu(qp_a));
    p.a.cm.qp_active(qp_a);
    p.flush();
    assert!(is_established(&p.a.events));
    assert!(!p.a.cm.awaits_rtu(qp_a));
}

#[test]
fn an_unanswering_server_times_out_after_the_advertised_retries() {
    let mut p = Pair::new();
    p.fate = Box::new(|to_b, _| to_b == TO_B); // A answers nothing
    let (b_id, _, _) = p.connect();
    let config = p.b.cm.config().clone();
    let interval = cm_time(config.response_timeout) + cm_time(config.packet_life_time) * 2;
    let budget = interval * (u32::from(config.max_retries) + 1);
    p.run_for(budget - Duration::from_millis(1));
    assert!(p.b.events.is_empty(), "still trying: {:?}", p.b.events);
    p.run_for(Duration::from_millis(2));
    assert_eq!(
        p.b.take_events(),
        [CmEvent::TimedOut {
            id: b_id,
            stage: TimedOutStage::Req,
            retries: config.max_retries
        }]
    );
    assert_eq!(
        p.sent(TO_A, CmAttribute::Req),
        1 + usize::from(config.max_retries)
    );
    assert_eq!(
        p.sent(TO_A, CmAttribute::Rej),
        1,
        "REJ timeout tells the server"
    );
    assert_eq!(p.b.cm.connections(), 0);
}

#[test]
fn a_slow_consumer_gets_an_mra_and_the_client_waits() {
    let mut p = Pair::new();
    let (_, _, qp_a) = p.connect();
    let wait = cm_time(p.b.cm.config().response_timeout) * 3;
    p.run_for(wait);
    let (a_id, _) = p.request();
    assert!(
        p.sent(TO_A, CmAttribute::Req) >= 2,
        "the client repeated its REQ"
    );
    assert_eq!(
        p.sent(TO_B, CmAttribute::Mra),
        p.sent(TO_A, CmAttribute::Req) - 1
    );
    assert_eq!(p.a.events.len(), 1, "one request for all the copies");
    let reqs = p.sent(TO_A, CmAttribute::Req);
    // The MRA's service timeout (2^20 x 4.096 us, 4.3 s) holds the client back.
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.sent(TO_A, CmAttribute::Req), reqs);
    p.accept(a_id, qp_a);
    p.run_for(Duration::from_millis(1));
    assert!(is_established(&p.a.events) && is_established(&p.b.events));
}

#[test]
fn duplicates_are_answered_from_state() {
    let mut p = Pair::new();
    let (a_id, b_id, _, qp_b) = p.established();
    let rtu = p.b.cm.conns[&b_id.0].last_answer.clone().unwrap();
    let rep = p.a.cm.conns[&a_id.0].last_answer.clone().unwrap();
    // A REP again (our RTU lost): the RTU again.
    let (now, a) = (p.now, p.a.addr);
    p.b.cm
        .handle_mad(now, a, None, &rep, &p.b.gids, &mut p.b.engine);
    assert_eq!(p.b.cm.poll_transmit().unwrap().mad, rtu);
    // An RTU again: nothing.
    let b = p.b.addr;
    p.a.cm
        .handle_mad(now, b, None, &rtu, &p.a.gids, &mut p.a.engine);
    assert!(p.a.cm.poll_transmit().is_none());
    assert_eq!(p.a.cm.stats().duplicates, 1);
    // DREQ, then the same DREQ again: the same DREP twice.
    p.b.cm.disconnect(now, b_id, &mut p.b.engine).unwrap();
    let dreq = p.b.cm.poll_transmit().unwrap().mad;
    p.a.cm
        .handle_mad(now, b, None, &dreq, &p.a.gids, &mut p.a.engine);
    let drep = p.a.cm.poll_transmit().unwrap().mad;
    p.a.cm
        .handle_mad(now, b, None, &dreq, &p.a.gids, &mut p.a.engine);
    assert_eq!(p.a.cm.poll_transmit().unwrap().mad, drep);
    assert_eq!(p.a.cm.stats().duplicates, 2);
    // A DREQ with a wrong QPN is ignored (as Linux does).
    let mut wrong = CmMadRepr::parse(&dreq).unwrap();
    if let CmMessage::Dreq(d) = &mut wrong.message {
        d.remote_qpn = Qpn::new(qp_b.value() + 100);
    }
    p.a.cm
        .handle_mad(now, b, None, &wrong.to_vec(), &p.a.gids, &mut p.a.engine);
    assert!(p.a.cm.poll_transmit().is_none());
}

#[test]
fn a_repeated_req_gets_the_rep_again_once_accepted() {
    let mut p = Pair::new();
    let (_, _, qp_a) = p.connect();
    let req = p.b.cm.poll_transmit().unwrap().mad;
    let (now, b) = (p.now, p.b.addr);
    p.a.cm
        .handle_mad(now, b, None, &req, &p.a.gids, &mut p.a.engine);
    let (a_id, _) = p.request();
    p.accept(a_id, qp_a);
    let rep = p.a.cm.poll_transmit().unwrap().mad;
    p.a.cm
        .handle_mad(now, b, None, &req, &p.a.gids, &mut p.a.engine);
    assert_eq!(p.a.cm.poll_transmit().unwrap().mad, rep, "the same REP");
    assert_eq!(p.a.cm.stats().duplicates, 1);
}

/// A MAD from `mad` with its header changed by `f`.
fn altered(mad: &[u8], f: impl FnOnce(&mut MadHeaderRepr)) -> Vec<u8> {
    let mut h = MadHeaderRepr::parse(mad).unwrap();
    f(&mut h);
    let mut out = mad.to_vec();
    h.emit(&mut out).unwrap();
    out
}

#[test]
fn strangers_and_garbage_get_what_the_spec_says() {
    let mut p = Pair::new();
    let (a_id, b_id, _, _) = p.established();
    let (now, a, b) = (p.now, p.a.addr, p.b.addr);
    let rep = p.a.cm.conns[&a_id.0].last_answer.clone().unwrap();
    let side = &mut p.b;
    let mut feed = |mad: &[u8]| {
        side.cm
            .handle_mad(now, a, None, mad, &side.gids, &mut side.engine);
        let out: Vec<_> = std::iter::from_fn(|| side.cm.poll_transmit()).collect();
        out.iter()
            .map(|o| CmMadRepr::parse(&o.mad).unwrap().message)
            .collect::<Vec<_>>()
    };
    // A REP naming a communication ID we never used: REJ "invalid comm ID", IDs swapped.
    let mut stranger = CmMadRepr::parse(&rep).unwrap();
    if let CmMessage::Rep(r) = &mut stranger.message {
        r.remote_comm_id ^= 0x5a5a;
    }
    let out = feed(&stranger.to_vec());
    let [CmMessage::Rej(r)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(r.reason, reject_reason::INVALID_COMM_ID);
    assert_eq!(r.message_rejected, message_code::REP);
    // A DREQ for no connection: a DREP all the same.
    let dreq = DreqRepr::new(77, 88, Qpn::new(5));
    let out = feed(&CmMadRepr::new(9, CmMessage::Dreq(dreq)).to_vec());
    let [CmMessage::Drep(d)] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!((d.local_comm_id, d.remote_comm_id), (88, 77));
    // An RTU for nothing, truncated MADs, other classes, responses: counted, unanswered.
    let rtu = RtuRepr {
        local_comm_id: 1,
        remote_comm_id: 2,
        private_data: [0; 224],
    };
    let rtu = CmMadRepr::new(9, CmMessage::Rtu(rtu)).to_vec();
    assert!(feed(&rtu).is_empty());
    assert!(feed(&rtu[..100]).is_empty());
    assert!(feed(&[]).is_empty());
    assert!(feed(&altered(&rtu, |h| h.mgmt_class = 0x03)).is_empty());
    assert!(feed(&altered(&rtu, |h| h.method = 0x83)).is_empty());
    assert!(feed(&altered(&rtu, |h| h.attribute_id = 0x0001)).is_empty());
    assert!(feed(&altered(&rtu, |h| h.class_version = 1)).is_empty());
    let stats = *p.b.cm.stats();
    assert_eq!(stats.malformed, 5);
    assert_eq!(stats.bad_version, 1);
    assert_eq!(stats.unexpected, 3);
    assert!(
        p.b.cm.info(b_id).unwrap().established,
        "nothing disturbed the connection"
    );
    let _ = b;
}

/// A listens; B connects and its REQ is taken off before it is sent. Returns B's connection
/// and the REQ.
fn req_in_hand(p: &mut Pair) -> (ConnId, Vec<u8>) {
    p.a.cm
        .listen(ListenParams {
            port_space: PortSpace::Tcp,
            port: PORT,
            addr: None,
        })
        .unwrap();
    let qp = p.b.qp();
    let params = ConnectParams::rc(p.b.addr, p.a.addr, PORT, qp);
    let id = p.b.cm.connect(p.now, params, &mut p.b.engine).unwrap();
    (id, p.b.cm.poll_transmit().unwrap().mad)
}

#[test]
fn a_req_of_another_class_version_is_refused_naming_ours() {
    let mut p = Pair::new();
    let (id, req) = req_in_hand(&mut p);
    let (now, b) = (p.now, p.b.addr);
    let v1 = altered(&req, |h| h.class_version = 1);
    p.a.cm
        .handle_mad(now, b, None, &v1, &p.a.gids, &mut p.a.engine);
    let rej = p.a.cm.poll_transmit().unwrap().mad;
    let CmMessage::Rej(r) = CmMadRepr::parse(&rej).unwrap().message else {
        panic!()
    };
    assert_eq!(r.reason, reject_reason::INVALID_CLASS_VERSION);
    assert_eq!((r.reject_info_length, r.ari[0]), (1, 2));
    assert_eq!(r.remote_comm_id, id.0);
    assert_eq!(p.a.cm.connections(), 0);
}

#[test]
fn a_flood_of_reqs_is_capped_and_forgotten() {
    let mut p = Pair::new();
    let (_, req) = req_in_hand(&mut p);
    let template = CmMadRepr::parse(&req).unwrap();
    let cap = p.a.cm.config().max_half_open;
    let (now, b) = (p.now, p.b.addr);
    for i in 0..10_000u32 {
        let mut m = template.clone();
        if let CmMessage::Req(r) = &mut m.message {
            r.local_comm_id = 1000 + i;
            r.local_qpn = Qpn::new(0x100 + i);
        }
        p.a.cm
            .handle_mad(now, b, None, &m.to_vec(), &p.a.gids, &mut p.a.engine);
    }
    assert_eq!(p.a.cm.connections(), cap);
    assert_eq!(p.a.cm.stats().half_open_full, 10_000 - cap as u64);
    let requests = std::iter::from_fn(|| p.a.cm.poll_event()).count();
    assert_eq!(requests, cap);
    // Nobody answers them: each is forgotten once its client must have given up.
    p.run_for(Duration::from_secs(120));
    assert_eq!(p.a.cm.connections(), 0);
}

#[test]
fn a_req_from_a_qp_still_connected_is_stale() {
    let mut p = Pair::new();
    let (_, b_id, _, qp_b) = p.established();
    // B forgets the connection without a word and asks again from the same QP.
    p.b.cm.remove(b_id.0);
    let mut params = ConnectParams::rc(p.b.addr, p.a.addr, PORT, qp_b);
    params.qpn = qp_b;
    let id = p.b.cm.connect(p.now, params, &mut p.b.engine).unwrap();
    p.run_for(Duration::from_millis(1));
    let events = p.b.take_events();
    assert!(
        events.contains(&CmEvent::Rejected {
            id,
            reason: reject_reason::STALE_CONN,
            private_data: vec![0; 148]
        }),
        "{events:?}"
    );
    assert!(matches!(
        p.a.events.last(),
        Some(CmEvent::Disconnected { .. })
    ));
}

#[test]
fn sidr_resolves_a_ud_service_and_answers_repeats_alike() {
    let mut p = Pair::new();
    let mut drops = 1;
    p.fate = Box::new(move |_, attr| {
        let drop = attr == CmAttribute::SidrRep && drops > 0;
        drops -= i32::from(drop);
        drop
    });
    p.a.cm
        .listen(ListenParams {
            port_space: PortSpace::Udp,
            port: PORT,
            addr: None,
        })
        .unwrap();
    let params = SidrParams {
        dest: p.a.addr,
        src: p.b.addr,
        port: PORT,
        private_data: b"hello".to_vec(),
        traffic_class: None,
    };
    let id = p.b.cm.resolve(p.now, params).unwrap();
    p.run_for(Duration::from_millis(1));
    let events = p.a.take_events();
    let [CmEvent::SidrRequest { id: a_id, request }] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(&request.private_data[..5], b"hello");
    p.a.cm
        .sidr_reply(p.now, *a_id, &SidrReply::new(Qpn::new(0x42), RDMA_UDP_QKEY))
        .unwrap();
    p.run_for(Duration::from_secs(5));
    let events = p.b.take_events();
    let [
        CmEvent::SidrResolved {
            id: got, qpn, qkey, ..
        },
    ] = &events[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!((*got, *qpn, *qkey), (id, Qpn::new(0x42), RDMA_UDP_QKEY));
    assert_eq!(p.sent(TO_A, CmAttribute::SidrReq), 2, "one SIDR_REP lost");
    assert_eq!(
        p.sent(TO_B, CmAttribute::SidrRep),
        2,
        "answered again from state"
    );
    assert!(p.a.events.is_empty(), "the consumer asked once");

    // No listener on the port: status 1.
    let params = SidrParams {
        dest: p.a.addr,
        src: p.b.addr,
        port: PORT + 1,
        private_data: Vec::new(),
        traffic_class: None,
    };
    let id = p.b.cm.resolve(p.now, params).unwrap();
    p.run_for(Duration::from_millis(1));
    assert_eq!(
        p.b.take_events(),
        [CmEvent::SidrFailed {
            id,
            status: sidr_status::SERVICE_ID_NOT_SUPPORTED
        }]
    );
}

#[test]
fn runs_are_deterministic() {
    let run = || {
        let mut p = Pair::new();
        let mut n = 0;
        p.fate = Box::new(move |_, _| {
            n += 1;
            n % 3 == 0
        });
        let (_, _, qp_a) = p.connect();
        p.run_for(Duration::from_secs(3));
        let (a_id, _) = p.request();
        p.accept(a_id, qp_a);
        p.run_for(Duration::from_secs(30));
        (p.log, p.a.events, p.b.events)
    };
    assert_eq!(run(), run());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Whatever is lost, the handshake ends the same on both sides: established, or given
    /// up by the client (and then never established at the server).
    #[test]
    fn any_loss_pattern_ends_consistently(losses in proptest::collection::vec(proptest::prelude::any::<bool>(), 40)) {
        let mut p = Pair::new();
        let mut i = 0;
        p.fate = Box::new(move |_, _| {
            let drop = losses.get(i).copied().unwrap_or(false);
            i += 1;
            drop
        });
        let (_, _, qp_a) = p.connect();
        p.run_for(Duration::from_secs(30));
        if let Some((a_id, _)) = p.a.events.iter().find_map(|e| match e {
            CmEvent::ConnectRequest { id, request } => Some((*id, request.clone())),
            _ => None,
        }) {
            let now = p.now;
            let _ = p.a.cm.accept(now, a_id, AcceptParams::new(qp_a), &mut p.a.engine);
        }
        p.run_for(Duration::from_secs(120));
        let b_up = is_established(&p.b.events);
        let a_up = is_established(&p.a.events);
        let b_gave_up = p.b.events.iter().any(|e| matches!(e, CmEvent::TimedOut { .. }));
        proptest::prop_assert!(b_up != b_gave_up, "{:?}", p.b.events);
        proptest::prop_assert!(!a_up || b_up);
        proptest::prop_assert!(p.a.cm.connections() <= 1 && p.b.cm.connections() <= 1);
    }

    /// Random bytes never panic the manager, on either side of a live connection.
    #[test]
    fn garbage_never_panics(mads in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), 1..20), attr in 0x10u16..=0x1a) {
        let mut p = Pair::new();
        let _ = p.established();
        let (now, b) = (p.now, p.b.addr);
        for mut m in mads {
            if m.len() >= 24 {
                m[0] = 1;
                m[1] = 7;
                m[2] = 2;
                m[3] = 3;
                m[16..18].copy_from_slice(&attr.to_be_bytes());
            }
            p.a.cm.handle_mad(now, b, None, &m, &p.a.gids, &mut p.a.engine);
        }
        p.run_for(Duration::from_secs(60));
    }
}
