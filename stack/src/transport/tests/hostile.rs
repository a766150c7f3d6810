//! A responder facing a peer that does not follow the rules: more READs and atomics than
//! max_dest_rd_atomic, duplicates of READs it never sent, WRITEs over queued READs. Packets
//! are built by hand and fed to one engine whose output is not drained, so that a queue that
//! grows shows. Last, requesters driven packet by packet: one whose peer NAKs the same
//! request for ever, one whose peer replays an old READ response for ever, and the fast
//! retransmit timer's races (an ACK overtaking a probe; the requester's own process
//! descheduled past the timer).

use std::net::{IpAddr, Ipv4Addr};

use crate::time::Instant;
use crate::transport::{
    Access, Engine, MAX_PACKET_LEN, ModifyQp, Mtu, QpInit, QpState, QpType, QpUsage, SendOp,
    SendWr, Sge, TransportConfig, WcStatus,
};
use crate::wire::feth::{placement, selectivity};
use crate::wire::opcode::{Headers, op};
use crate::wire::{
    AethRepr, AtomicEthRepr, BthRepr, ExtHeaders, FethRepr, IbPacketRepr, Msn, NakCode, Opcode,
    PKey, Psn, Qpn, RethRepr, Syndrome, Transport,
};

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
const VA: u64 = 0x10_0000;
const LEN: usize = 256 * 1024;
const FIRST: u32 = 0x100;
/// The peer's plain ACK syndrome.
const ACK: Syndrome = Syndrome::Ack { credits: 31 };

struct Responder {
    engine: Engine,
    qpn: Qpn,
    rkey: u32,
    /// The next PSN the peer sends.
    psn: Psn,
    now: u64,
}

impl Responder {
    fn new(max_dest_rd_atomic: u8) -> Responder {
        let mut engine = Engine::new(TransportConfig::default());
        let cq = engine.create_cq(64);
        let data = (0..LEN).map(|i| (i * 7) as u8).collect();
        // Every remote right, FLUSH's too.
        let rights = Access::ALL | Access::FLUSH_GLOBAL;
        let rkey = engine.register_mr(VA, data, rights).unwrap();
        let qpn = engine.create_qp(QpInit::new(QpType::Rc, cq)).unwrap();
        let init = ModifyQp {
            access: Some(rights),
            ..ModifyQp::to(QpState::Init)
        };
        let rtr = ModifyQp {
            path_mtu: Some(Mtu::M1024),
            dest_qp: Some(Qpn::new(0x99)),
            dest_addr: Some(PEER),
            rq_psn: Some(Psn::new(FIRST)),
            max_dest_rd_atomic: Some(max_dest_rd_atomic),
            min_rnr_timer: Some(crate::wire::RnrTimer::new(1)),
            ..ModifyQp::to(QpState::Rtr)
        };
        for m in [init, rtr] {
            engine.modify_qp(qpn, &m).unwrap();
        }
        Responder {
            engine,
            qpn,
            rkey,
            psn: Psn::new(FIRST),
            now: 0,
        }
    }

    fn feed(&mut self, low: u8, psn: Psn, ext: ExtHeaders, payload: &[u8]) {
        let mut bth = BthRepr::new(Opcode::new(Transport::Rc, low), self.qpn, psn);
        bth.pkey = PKey::DEFAULT;
        let mut buf = vec![0u8; MAX_PACKET_LEN];
        let len = IbPacketRepr::new(bth, ext, payload).emit(&mut buf).unwrap();
        self.now += 1_000;
        let _ = self
            .engine
            .handle_packet(Instant::from_nanos(self.now), PEER, &buf[..len]);
    }

    /// A new READ of `len` bytes at `offset`; returns its PSN.
    fn read(&mut self, offset: u64, len: u32) -> Psn {
        let psn = self.psn;
        self.read_at(psn, self.rkey, offset, len);
        self.psn = psn.add(len.div_ceil(1024).max(1));
        psn
    }

    /// A READ request at any PSN (new or duplicate).
    fn read_at(&mut self, psn: Psn, rkey: u32, offset: u64, len: u32) {
        let reth = RethRepr {
            va: VA + offset,
            rkey,
            dma_len: len,
        };
        let ext = ExtHeaders {
            reth: Some(reth),
            ..ExtHeaders::default()
        };
        self.feed(op::RDMA_READ_REQUEST, psn, ext, &[]);
    }

    fn fetch_add(&mut self, offset: u64) -> Psn {
        let psn = self.psn;
        let atomic_eth = AtomicEthRepr {
            va: VA + offset,
            rkey: self.rkey,
            swap_add: 1,
            compare: 0,
        };
        let ext = ExtHeaders {
            atomic_eth: Some(atomic_eth),
            ..ExtHeaders::default()
        };
        self.feed(op::FETCH_ADD, psn, ext, &[]);
        self.psn = psn.next();
        psn
    }

    fn write(&mut self, offset: u64, bytes: &[u8]) {
        let reth = RethRepr {
            va: VA + offset,
            rkey: self.rkey,
            dma_len: bytes.len() as u32,
        };
        let ext = ExtHeaders {
            reth: Some(reth),
            ..ExtHeaders::default()
        };
        let psn = self.psn;
        self.feed(op::RDMA_WRITE_ONLY, psn, ext, bytes);
        self.psn = psn.next();
    }

    fn usage(&self) -> QpUsage {
        self.engine.qp_usage(self.qpn).unwrap()
    }

    fn state(&self) -> QpState {
        self.engine.query_qp(self.qpn).unwrap().0
    }

    /// Everything the responder sends now: (opcode, PSN, payload bytes, NAK code).
    fn drain(&mut self) -> Vec<(u8, Psn, usize, Option<NakCode>)> {
        let mut buf = vec![0u8; MAX_PACKET_LEN];
        let mut out = Vec::new();
        while let Some(tx) = self
            .engine
            .poll_transmit(Instant::from_nanos(self.now), &mut buf)
        {
            let p = IbPacketRepr::parse(&buf[..tx.len]).unwrap();
            let nak = p.ext.aeth.and_then(|a| match a.syndrome {
                Syndrome::Nak(code) => Some(code),
                _ => None,
            });
            out.push((p.bth.opcode.low(), p.bth.psn, p.payload.len(), nak));
        }
        out
    }

    /// The bytes of READ responses among `sent`.
    fn read_bytes(sent: &[(u8, Psn, usize, Option<NakCode>)]) -> usize {
        sent.iter()
            .filter(|s| s.0 != op::ACKNOWLEDGE)
            .map(|s| s.2)
            .sum()
    }
}

#[test]
fn reads_beyond_max_dest_rd_atomic_are_naked_invalid_request() {
    let mut r = Responder::new(4);
    for i in 0..4 {
        r.read(i * 65_536, 65_536);
        assert_eq!(r.usage().rd_atomic, i as usize + 1);
    }
    assert_eq!(r.state(), QpState::Rtr);
    let fifth = r.read(0, 65_536);
    assert_eq!(r.usage().rd_atomic, 4, "{:?}", r.usage());
    assert_eq!(r.state(), QpState::Err);
    // The four READs are answered, then the NAK at the fifth's PSN ends the connection.
    let sent = r.drain();
    assert_eq!(Responder::read_bytes(&sent), 4 * 65_536);
    let last = sent.last().unwrap();
    assert_eq!(
        (last.0, last.1, last.3),
        (op::ACKNOWLEDGE, fifth, Some(NakCode::InvalidRequest))
    );
    // A thousand more change nothing: the QP is in ERR.
    for _ in 0..1000 {
        r.read(0, 65_536);
    }
    assert!(r.usage().responses == 0 && r.drain().is_empty());
}

#[test]
fn atomics_count_against_the_same_depth() {
    let mut r = Responder::new(2);
    r.read(0, 4096);
    r.fetch_add(8);
    let third = r.fetch_add(16);
    assert_eq!(r.state(), QpState::Err);
    let sent = r.drain();
    let last = sent.last().unwrap();
    assert_eq!((last.1, last.3), (third, Some(NakCode::InvalidRequest)));
    let untouched: Vec<u8> = (16..24).map(|i| (i * 7) as u8).collect();
    assert_eq!(r.engine.mr(r.rkey).unwrap().bytes()[16..24], untouched[..]);
}

#[test]
fn max_dest_rd_atomic_zero_accepts_no_read() {
    let mut r = Responder::new(0);
    let psn = r.read(0, 8);
    assert_eq!(
        r.drain(),
        vec![(op::ACKNOWLEDGE, psn, 0, Some(NakCode::InvalidRequest))]
    );
}

#[test]
fn queued_answers_to_duplicates_give_way_to_new_requests() {
    // The requester completes in order and keeps max_rd_atomic outstanding: with both
    // answers to duplicates queued, a new READ means it has the oldest already.
    let mut r = Responder::new(2);
    let one = r.read(0, 2048);
    let two = r.read(4096, 2048);
    assert_eq!(Responder::read_bytes(&r.drain()), 4096);
    r.read_at(one, r.rkey, 0, 2048);
    r.read_at(two, r.rkey, 4096, 2048);
    assert_eq!(r.usage().rd_atomic, 2);
    let three = r.read(8192, 2048);
    let four = r.read(12_288, 2048);
    assert_eq!(
        r.state(),
        QpState::Rtr,
        "no NAK for a requester within its depth"
    );
    let psns: Vec<Psn> = r.drain().iter().map(|s| s.1).collect();
    assert_eq!(psns, vec![three, three.next(), four, four.next()]);
    // Two first answers queued: a third READ is one too many.
    r.read(16_384, 2048);
    r.read(20_480, 2048);
    r.read(24_576, 2048);
    assert_eq!(r.state(), QpState::Err);
}

#[test]
fn a_duplicate_read_is_answered_only_from_a_remembered_read() {
    let mut r = Responder::new(4);
    let first = r.read(0, 4096);
    let sent = r.drain();
    assert_eq!(Responder::read_bytes(&sent), 4096);
    let before = r.engine.stats().duplicates_dropped;
    // At PSNs where no READ executed, with a RETH of their own: nothing is sent (the old
    // responder executed each, reflecting 64 KiB per 28-byte request).
    for k in 1..=100u32 {
        r.read_at(first.sub(k * 100), r.rkey, 0, 65_536);
        assert!(r.drain().is_empty(), "duplicate {k} answered");
    }
    // Inside the READ but asking for more, elsewhere, or with another key: dropped too.
    r.read_at(first, r.rkey, 0, 8192);
    r.read_at(first, r.rkey, 8192, 4096);
    r.read_at(first, r.rkey ^ 0x100, 0, 4096);
    r.read_at(first.add(1), r.rkey, 0, 4096);
    assert!(r.drain().is_empty());
    assert_eq!(r.engine.stats().duplicates_dropped - before, 104);
    // The READ itself, or its tail from a later PSN, is answered again.
    r.read_at(first, r.rkey, 0, 4096);
    assert_eq!(Responder::read_bytes(&r.drain()), 4096);
    r.read_at(first.add(2), r.rkey, 2048, 2048);
    let again = r.drain();
    assert_eq!(Responder::read_bytes(&again), 2048);
    assert_eq!(
        again[0].0,
        op::RDMA_READ_RESPONSE_MIDDLE,
        "continues the READ's opcodes"
    );
}

#[test]
fn duplicates_of_a_queued_read_are_not_queued_twice() {
    let mut r = Responder::new(4);
    let first = r.read(0, 65_536);
    for _ in 0..100 {
        r.read_at(first, r.rkey, 0, 65_536);
    }
    assert_eq!(r.usage().rd_atomic, 1);
    assert_eq!(Responder::read_bytes(&r.drain()), 65_536);
}

#[test]
fn resumes_of_one_read_arriving_out_of_order_queue_one_response() {
    // 35 of a 40-packet READ's responses are sent; the requester resumes the READ from
    // PSN first+30, then from first+20, and the link swaps them. Both ask for the same READ:
    // one response stays queued, from the older PSN. (A proptest found the older resume
    // queueing a second response beside the first answer, which filled the queue and made
    // the next new READ an Invalid Request.)
    let mut r = Responder::new(2);
    let first = r.read(0, 40 * 1024);
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    for _ in 0..35 {
        let sent = r.engine.poll_transmit(Instant::from_nanos(r.now), &mut buf);
        assert!(sent.is_some());
    }
    r.read_at(first.add(30), r.rkey, 30 * 1024, 10 * 1024);
    r.read_at(first.add(20), r.rkey, 20 * 1024, 20 * 1024);
    assert_eq!(r.usage().rd_atomic, 1);
    r.read(0, 1024);
    assert_eq!(
        r.state(),
        QpState::Rtr,
        "a READ within the depth was refused"
    );
    let sent = r.drain();
    assert_eq!(sent[0].1, first.add(20));
    assert_eq!(Responder::read_bytes(&sent), 20 * 1024 + 1024);
}

#[test]
fn flushes_do_not_take_read_and_atomic_slots_but_are_bounded() {
    // rxe's requester does not count FLUSH against max_rd_atomic: with depth 1 it sent a
    // second FLUSH while the first one's answer still waited to go out (interop, iba15
    // flush as server), and an Invalid Request NAK failed its QP.
    let mut r = Responder::new(1);
    let flush = |r: &mut Responder| {
        let psn = r.psn;
        let ext = ExtHeaders {
            reth: Some(RethRepr {
                va: VA,
                rkey: r.rkey,
                dma_len: 64,
            }),
            feth: Some(FethRepr::new(selectivity::RANGE, placement::GLOBAL)),
            ..ExtHeaders::default()
        };
        r.feed(op::FLUSH, psn, ext, &[]);
        r.psn = psn.next();
    };
    flush(&mut r);
    flush(&mut r);
    r.read(0, 1024);
    assert_eq!(r.state(), QpState::Rtr, "a FLUSH or the READ was refused");
    let sent = r.drain();
    let answers: Vec<u8> = sent.iter().map(|s| s.0).collect();
    assert_eq!(answers, vec![op::RDMA_READ_RESPONSE_ONLY; 3]);
    // Their own bound: MAX_EMPTY_READS answers queued, the next FLUSH is one too many.
    for _ in 0..64 {
        flush(&mut r);
    }
    assert_eq!(r.state(), QpState::Rtr);
    flush(&mut r);
    assert_eq!(r.state(), QpState::Err);
}

#[test]
fn a_write_over_queued_reads_keeps_only_what_it_overwrites() {
    let mut r = Responder::new(16);
    let before = r.engine.mr(r.rkey).unwrap().bytes()[..65_536].to_vec();
    for _ in 0..16 {
        r.read(0, 65_536);
    }
    r.write(1000, &[0xee]);
    let usage = r.usage();
    assert_eq!(
        (usage.rd_atomic, usage.preserved_bytes),
        (16, 16),
        "{usage:?}"
    );
    r.write(30_000, &[0xdd; 1024]);
    assert_eq!(r.usage().preserved_bytes, 16 * 1025);
    // Every READ returns the memory as it executed, before both WRITEs.
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let mut got = Vec::new();
    while let Some(tx) = r.engine.poll_transmit(Instant::from_nanos(r.now), &mut buf) {
        let p = IbPacketRepr::parse(&buf[..tx.len]).unwrap();
        got.extend_from_slice(p.payload);
    }
    assert_eq!(got.len(), 16 * 65_536);
    for chunk in got.chunks(65_536) {
        assert!(chunk == before, "a READ saw a later WRITE");
    }
    assert_eq!(
        r.usage(),
        QpUsage {
            resources: 16,
            ..QpUsage::default()
        }
    );
}

/// A requester whose peer answers every SEND with a sequence error NAK for that same SEND,
/// acknowledging nothing: each such NAK costs a retry, as a local ACK timeout does, so the
/// request fails with RETRY_EXC_ERR after retry_cnt + 1 of them instead of being sent again
/// for ever (the old code went back on every one).
#[test]
fn sequence_naks_without_progress_spend_retry_cnt() {
    const RETRY_CNT: u8 = 3;
    // A local ACK timeout of 4.3 s: only the NAKs can spend retries here.
    let (mut engine, cq, qpn) = requester(20, RETRY_CNT);
    engine
        .post_send(qpn, SendWr::new(1, SendOp::Send, Vec::new()))
        .unwrap();
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let mut sent = 0;
    let mut naks = 0;
    // 10 ms apart: each NAK comes long after the requester's last transmission, so none is
    // taken for an echo of the one before.
    for step in 1..=20u64 {
        let now = Instant::from_nanos(step * 10_000_000);
        while let Some(tx) = engine.poll_transmit(now, &mut buf) {
            let p = IbPacketRepr::parse(&buf[..tx.len]).unwrap();
            assert_eq!(
                p.bth.psn,
                Psn::new(FIRST),
                "only the SEND goes, again and again"
            );
            sent += 1;
        }
        if let Some(wc) = engine.poll_completion(cq) {
            assert_eq!(wc.status, WcStatus::RetryExcErr);
            assert_eq!(naks, RETRY_CNT as usize + 1, "retry_cnt + 1 NAKs");
            assert_eq!(
                sent,
                RETRY_CNT as usize + 1,
                "sent once, then once per retry"
            );
            assert_eq!(engine.query_qp(qpn).unwrap().0, QpState::Err);
            return;
        }
        let nak = acknowledge(
            qpn,
            Psn::new(FIRST),
            Syndrome::Nak(NakCode::PsnSequenceError),
            0,
        );
        let _ = engine.handle_packet(now, PEER, &nak);
        naks += 1;
    }
    panic!("{naks} NAKs without progress and the request still stands ({sent} sent)");
}

/// A requester's RC QP in RTS towards `PEER`, its send PSN `FIRST`, with the local ACK
/// timeout `timeout` and `retry_cnt`.
fn requester(timeout: u8, retry_cnt: u8) -> (Engine, crate::transport::CqId, Qpn) {
    let mut engine = Engine::new(TransportConfig::default());
    let cq = engine.create_cq(8);
    let qpn = engine.create_qp(QpInit::new(QpType::Rc, cq)).unwrap();
    let init = ModifyQp {
        access: Some(Access::NONE),
        ..ModifyQp::to(QpState::Init)
    };
    let rtr = ModifyQp {
        path_mtu: Some(Mtu::M1024),
        dest_qp: Some(Qpn::new(0x99)),
        dest_addr: Some(PEER),
        rq_psn: Some(Psn::new(0)),
        max_dest_rd_atomic: Some(1),
        min_rnr_timer: Some(crate::wire::RnrTimer::new(1)),
        ..ModifyQp::to(QpState::Rtr)
    };
    let rts = ModifyQp {
        sq_psn: Some(Psn::new(FIRST)),
        timeout: Some(timeout),
        retry_cnt: Some(retry_cnt),
        rnr_retry: Some(7),
        max_rd_atomic: Some(1),
        ..ModifyQp::to(QpState::Rts)
    };
    for m in [init, rtr, rts] {
        engine.modify_qp(qpn, &m).unwrap();
    }
    (engine, cq, qpn)
}

/// The peer's acknowledgement (ACK or NAK) of `psn` to the requester's `qpn`.
fn acknowledge(qpn: Qpn, psn: Psn, syndrome: Syndrome, msn: u32) -> Vec<u8> {
    response(qpn, op::ACKNOWLEDGE, psn, syndrome, msn, &[])
}

/// A response packet `low` at `psn` to the requester's `qpn`, with an AETH if the opcode
/// calls for one.
fn response(qpn: Qpn, low: u8, psn: Psn, syndrome: Syndrome, msn: u32, data: &[u8]) -> Vec<u8> {
    let opcode = Opcode::new(Transport::Rc, low);
    let mut bth = BthRepr::new(opcode, qpn, psn);
    bth.pkey = PKey::DEFAULT;
    let with_aeth = opcode
        .info()
        .is_some_and(|i| i.headers.contains(Headers::AETH));
    let ext = ExtHeaders {
        aeth: with_aeth.then_some(AethRepr {
            syndrome,
            msn: Msn::new(msn),
        }),
        ..ExtHeaders::default()
    };
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let len = IbPacketRepr::new(bth, ext, data).emit(&mut buf).unwrap();
    buf.truncate(len);
    buf
}

/// Posts a READ of `len` bytes (work request 1) on the requester's `qpn` and sends its
/// request at `now`.
fn post_read(engine: &mut Engine, qpn: Qpn, len: u32, now: Instant) {
    let region = vec![0; len as usize];
    let lkey = engine.register_mr(VA, region, Access::LOCAL_WRITE).unwrap();
    let sge = Sge {
        addr: VA,
        length: len,
        lkey,
    };
    let read = SendOp::Read {
        remote_addr: 0,
        rkey: 1,
    };
    engine
        .post_send(qpn, SendWr::new(1, read, vec![sge]))
        .unwrap();
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let tx = engine
        .poll_transmit(now, &mut buf)
        .expect("the READ request");
    let request = IbPacketRepr::parse(&buf[..tx.len]).unwrap();
    assert_eq!(request.bth.opcode.low(), op::RDMA_READ_REQUEST);
}

/// The other side of the rule below: a legitimate replay holds the timers off. The first
/// response of a 16-packet READ is lost; the second implies the loss, and the requester asks
/// for the READ again. The responder first sends the rest of the READ as first asked, one
/// packet every half millisecond (7 ms: longer than the fast timer's 1 ms and the local ACK
/// timeout's 4.2 ms), then all of it again. The requester waits for it: one request more,
/// no retry spent. Going back on a timer meanwhile would ask for the READ a third time, and
/// each request queues one more replay behind the last.
#[test]
fn the_rest_of_a_read_asked_again_holds_off_the_timers() {
    const PACKETS: u32 = 16;
    let (mut engine, cq, qpn) = requester(10, 3);
    let len = PACKETS * 1024;
    let mut now = Instant::from_nanos(1_000_000);
    post_read(&mut engine, qpn, len, now);
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let mut requests = 0;
    let mut answer = |engine: &mut Engine, now: Instant, k: u32| {
        let low = match k {
            0 => op::RDMA_READ_RESPONSE_FIRST,
            k if k == PACKETS - 1 => op::RDMA_READ_RESPONSE_LAST,
            _ => op::RDMA_READ_RESPONSE_MIDDLE,
        };
        let pkt = response(qpn, low, Psn::new(FIRST + k), ACK, 1, &[5; 1024]);
        engine.handle_packet(now, PEER, &pkt).unwrap();
        while let Some(tx) = engine.poll_transmit(now, &mut buf) {
            let p = IbPacketRepr::parse(&buf[..tx.len]).unwrap();
            assert_eq!(p.bth.opcode.low(), op::RDMA_READ_REQUEST);
            requests += 1;
        }
    };
    // The first response is lost, the second implies it.
    answer(&mut engine, now, 1);
    assert_eq!(engine.stats().implied_naks, 1);
    let tick = core::time::Duration::from_micros(500);
    for k in (2..PACKETS).chain(0..PACKETS) {
        now += tick;
        if engine.poll_timeout().is_some_and(|t| t <= now) {
            engine.handle_timeout(now);
        }
        answer(&mut engine, now, k);
    }
    let wc = engine.poll_completion(cq).expect("the READ completes");
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
    // `answer` counts the requests after the first.
    assert_eq!(requests, 1, "the READ asked for once more");
    let stats = engine.stats();
    assert_eq!((stats.probes, stats.fast_retransmits), (0, 0));
}

/// A peer answers a READ, then replays that answer every millisecond and never acknowledges
/// the SEND that follows. A replayed response restarts the requester's timers (a responder
/// answering a READ asked twice sends the rest of it again before anything newer), but only
/// for as many responses as were asked for: once those are spent, the local ACK timeout
/// runs, and the SEND fails with RETRY_EXC_ERR after `retry_cnt` + 1 of them. It never
/// failed: each replay restarted both timers, and the QP waited for ever.
#[test]
fn replayed_read_responses_do_not_hold_off_the_retry_limit() {
    const RETRY_CNT: u8 = 3;
    // A local ACK timeout of 4.2 ms.
    let (mut engine, cq, qpn) = requester(10, RETRY_CNT);
    let mut now = Instant::from_nanos(1_000_000);
    post_read(&mut engine, qpn, 1024, now);
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let answer = response(
        qpn,
        op::RDMA_READ_RESPONSE_ONLY,
        Psn::new(FIRST),
        ACK,
        1,
        &[5; 1024],
    );
    engine.handle_packet(now, PEER, &answer).unwrap();
    let wc = engine.poll_completion(cq).expect("the READ completes");
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
    engine
        .post_send(qpn, SendWr::new(2, SendOp::Send, Vec::new()))
        .unwrap();
    // One second of replays, a thousand times the retry limit's 17 ms.
    for _ in 0..1000 {
        while engine.poll_transmit(now, &mut buf).is_some() {}
        now += core::time::Duration::from_millis(1);
        if engine.poll_timeout().is_some_and(|t| t <= now) {
            engine.handle_timeout(now);
        }
        if let Some(wc) = engine.poll_completion(cq) {
            assert_eq!((wc.wr_id, wc.status), (2, WcStatus::RetryExcErr));
            assert_eq!(engine.query_qp(qpn).unwrap().0, QpState::Err);
            return;
        }
        let _ = engine.handle_packet(now, PEER, &answer);
    }
    panic!("a second of replayed READ responses and the SEND still waits");
}

/// The fast retransmit timer fires and marks the newest packet for a tail-loss probe, and
/// the ACK of that packet, already on its way, arrives before the probe is sent. The probe
/// is then moot and must not go. It went, and sending it armed the fast timer again with
/// nothing outstanding; when that fired, the same packet was marked again, and so on: against
/// the conformance tester (`req.cnp.rate`, which ACKs each packet once), whose pacing let
/// one packet out per 88 usec while the fast timer ran out in less, our agent sent one
/// packet of a 32-packet WRITE again in every pacing slot for 272 s, and the rest of the
/// WRITE never went.
#[test]
fn a_probe_overtaken_by_its_ack_is_not_sent() {
    const PACKETS: u32 = 3;
    let (mut engine, cq, qpn) = requester(16, 7);
    let len = PACKETS * 1024;
    let lkey = engine
        .register_mr(VA, vec![7; len as usize], Access::NONE)
        .unwrap();
    let sge = Sge {
        addr: VA,
        length: len,
        lkey,
    };
    engine
        .post_send(qpn, SendWr::new(1, SendOp::Send, vec![sge]))
        .unwrap();
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    // The first packet of the SEND goes; the test lets no other out before the race.
    let t0 = Instant::from_nanos(1_000_000);
    let tx = engine
        .poll_transmit(t0, &mut buf)
        .expect("the first packet");
    assert_eq!(
        IbPacketRepr::parse(&buf[..tx.len]).unwrap().bth.psn,
        Psn::new(FIRST)
    );
    // The fast timer's first timeout (no round trip measured yet: `initial_fast_rto`)
    // marks it for a probe; its ACK comes before the probe leaves.
    let due = engine.poll_timeout().expect("a timer runs for the SEND");
    engine.handle_timeout(due);
    engine
        .handle_packet(due, PEER, &acknowledge(qpn, Psn::new(FIRST), ACK, 0))
        .unwrap();
    // From here on the peer ACKs each packet it has not seen, at once, as the tester does.
    let mut sent = Vec::new();
    let mut now = due;
    for _ in 0..1000 {
        while let Some(tx) = engine.poll_transmit(now, &mut buf) {
            let psn = IbPacketRepr::parse(&buf[..tx.len]).unwrap().bth.psn;
            if !sent.contains(&psn) && psn != Psn::new(FIRST) {
                let msn = u32::from(psn == Psn::new(FIRST + PACKETS - 1));
                let ack = acknowledge(qpn, psn, ACK, msn);
                engine.handle_packet(now, PEER, &ack).unwrap();
            }
            sent.push(psn);
        }
        let Some(t) = engine.poll_timeout() else {
            break;
        };
        now = t.max(now);
        engine.handle_timeout(now);
    }
    let rest: Vec<Psn> = (1..PACKETS).map(|k| Psn::new(FIRST + k)).collect();
    assert_eq!(
        sent, rest,
        "after the ACK of the first packet, the rest once"
    );
    let wc = engine.poll_completion(cq).expect("the SEND completes");
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
}

/// The requester's process is descheduled for longer than its fast retransmit timer, once
/// between two messages and once inside one. When it runs again, the timer is due and
/// packets are ready: they go, and the timer, which ran out while this side sent nothing,
/// does not act. It probed the tail and then went back with one packet in flight until an
/// answer, so a responder that answers only once it has all it waits for never got the
/// rest (our conformance agent on a host whose cores were taken failed `req.psn.wrap`,
/// `req.wire.segmentation` and `req.ack.coalesced` with RETRY_EXC_ERR that way, and sent
/// the NAKed packet of `req.gbn.from-nak` and the probe in turn for ever).
#[test]
fn a_requester_that_did_not_send_does_not_time_out() {
    let (mut engine, cq, qpn) = requester(16, 7);
    let lkey = engine.register_mr(VA, vec![7; 4096], Access::NONE).unwrap();
    // A one-packet SEND, then a three-packet one.
    for (wr_id, len) in [(1, 1024), (2, 3072)] {
        let sge = Sge {
            addr: VA,
            length: len,
            lkey,
        };
        engine
            .post_send(qpn, SendWr::new(wr_id, SendOp::Send, vec![sge]))
            .unwrap();
    }
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let mut psn_of = |engine: &mut Engine, now| {
        let tx = engine.poll_transmit(now, &mut buf)?;
        Some(IbPacketRepr::parse(&buf[..tx.len]).unwrap().bth.psn)
    };
    let mut now = Instant::from_nanos(1_000_000);
    let mut sent = vec![psn_of(&mut engine, now).unwrap()];
    // Back 10 ms later, long after the fast timer fell due: one packet, then away again.
    for more in [1, usize::MAX] {
        now += core::time::Duration::from_millis(10);
        assert!(engine.poll_timeout().is_some_and(|t| t <= now));
        engine.handle_timeout(now);
        for _ in 0..more {
            let Some(psn) = psn_of(&mut engine, now) else {
                break;
            };
            sent.push(psn);
        }
    }
    let all: Vec<Psn> = (0..4).map(|k| Psn::new(FIRST + k)).collect();
    assert_eq!(sent, all, "each packet once, in order");
    let ack = acknowledge(qpn, Psn::new(FIRST + 3), ACK, 2);
    engine.handle_packet(now, PEER, &ack).unwrap();
    for wr_id in 1..=2 {
        let wc = engine.poll_completion(cq).expect("both SENDs complete");
        assert_eq!((wc.wr_id, wc.status), (wr_id, WcStatus::Success));
    }
    let stats = engine.stats();
    assert_eq!(
        (
            stats.probes,
            stats.fast_retransmits,
            stats.retransmitted_packets
        ),
        (0, 0, 0)
    );
    assert_eq!(engine.poll_timeout(), None, "nothing outstanding, no timer");
}

/// A peer that never answers: the fast retransmit timer, backed off, still runs out between
/// two local ACK timeouts, so each retry the spec's timer spends comes with one more attempt
/// that costs none. Capped at the timeout itself, it fell due with it once backed off: on a
/// link losing a fifth of the frames each way, a loss that took nine round trips to recover
/// failed the request (`rc_workloads_survive_any_faults`).
#[test]
fn the_fast_timer_acts_between_two_local_ack_timeouts() {
    const RETRY_CNT: u8 = 3;
    // 4.2 ms: far above the fast timer's first timeouts.
    let (mut engine, cq, qpn) = requester(10, RETRY_CNT);
    engine
        .post_send(qpn, SendWr::new(1, SendOp::Send, Vec::new()))
        .unwrap();
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let mut now = Instant::from_nanos(1_000_000);
    let mut sent_at = Vec::new();
    loop {
        while engine.poll_transmit(now, &mut buf).is_some() {
            sent_at.push(now);
        }
        let Some(t) = engine.poll_timeout() else {
            break;
        };
        now = t.max(now);
        engine.handle_timeout(now);
    }
    let wc = engine.poll_completion(cq).expect("the SEND fails");
    assert_eq!(wc.status, WcStatus::RetryExcErr);
    let stats = engine.stats();
    assert_eq!(stats.local_ack_timeouts, u64::from(RETRY_CNT) + 1);
    // After the first local ACK timeout, each interval to the next holds the go-back of the
    // timeout and one of the fast timer's.
    let timeout = crate::transport::local_ack_timeout(10).unwrap();
    let first = sent_at[0] + timeout;
    for k in 1..u32::from(RETRY_CNT) + 1 {
        let (from, to) = (first + timeout * (k - 1), first + timeout * k);
        let n = sent_at.iter().filter(|&&t| t >= from && t < to).count();
        assert!(
            n >= 2,
            "{n} sent in local ACK timeout interval {k}: {sent_at:?}"
        );
    }
}
