//! The bodies of the transport's fuzz targets: arbitrary packet sequences fed to an engine
//! whose memory is watched. `fuzz/fuzz_targets/responder.rs` calls [`responder`] and
//! `completer.rs` calls [`completer`] with the fuzzer's bytes; the property tests below call
//! them with random ones.
//!
//! Invariants checked after every packet (a violation panics, which is what a fuzzer finds):
//! - nothing panics, whatever the bytes;
//! - a region without REMOTE_WRITE or REMOTE_ATOMIC is never changed, nor the parts of the
//!   receive region no receive was posted for;
//! - every packet the engine sends parses, and is a response, an ACK or a NAK (the engine
//!   under test has nothing to send of its own);
//! - what a queue pair holds stays bounded (see [`check_limits`]) while its output is not
//!   drained: a built packet with bit 0x10 of its head byte set leaves it queued.
//!
//! The input is read as a list of packets. Each starts with one byte: with its high bit
//! clear, the next `byte & 0x3f` bytes are sent raw (BTH onwards); with it set, a packet is
//! built from the following bytes around the engine's own state (its QPN, its expected
//! PSN, its keys and addresses), so that the fuzzer reaches the deep paths quickly.

use std::net::{IpAddr, Ipv4Addr};

use super::{
    Access, Engine, MAX_PACKET_LEN, ModifyQp, Mtu, QpInit, QpState, QpType, RecvWr, Sge,
    TransportConfig,
};
use crate::time::Instant;
use crate::wire::opcode::op;
use crate::wire::{
    AtomicEthRepr, BthRepr, DethRepr, ExtHeaders, IbPacketRepr, IethRepr, ImmDtRepr, Opcode, PKey,
    Psn, Qpn, RethRepr, Transport,
};

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
const OPEN_VA: u64 = 0x1_0000;
const OPEN_LEN: usize = 8192;
const SHUT_VA: u64 = 0x2_0000;
const RECV_VA: u64 = 0x3_0000;
const RECV_LEN: usize = 4 * 4096;
/// Receives are posted into the first half of the receive region; the second must stay put.
const RECV_POSTED: usize = RECV_LEN / 2;
const QKEY: u32 = 0x1111_1111;

struct Target {
    engine: Engine,
    qps: [Qpn; 3],
    open: u32,
    shut: u32,
    recv: u32,
    shut_bytes: Vec<u8>,
    recv_tail: Vec<u8>,
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn setup() -> Target {
    let mut engine = Engine::new(TransportConfig::default());
    let cq = engine.create_cq(1024);
    let all =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let open = engine
        .register_mr(OPEN_VA, pattern(OPEN_LEN, 1), all)
        .expect("valid region");
    let shut = engine
        .register_mr(
            SHUT_VA,
            pattern(4096, 2),
            Access::LOCAL_WRITE | Access::REMOTE_READ,
        )
        .expect("valid region");
    let recv = engine
        .register_mr(RECV_VA, pattern(RECV_LEN, 3), Access::LOCAL_WRITE)
        .expect("valid region");
    let mut qps = [Qpn::new(0); 3];
    for (i, qp_type) in [QpType::Rc, QpType::Uc, QpType::Ud].into_iter().enumerate() {
        let qpn = engine.create_qp(QpInit::new(qp_type, cq)).expect("new QP");
        for m in bring_up(qp_type) {
            engine.modify_qp(qpn, &m).expect("valid transition");
        }
        qps[i] = qpn;
    }
    let shut_bytes = engine
        .mr(shut)
        .map(|m| m.bytes().to_vec())
        .unwrap_or_default();
    let recv_tail = engine
        .mr(recv)
        .map(|m| m.bytes()[RECV_POSTED..].to_vec())
        .unwrap_or_default();
    Target {
        engine,
        qps,
        open,
        shut,
        recv,
        shut_bytes,
        recv_tail,
    }
}

fn bring_up(qp_type: QpType) -> Vec<ModifyQp> {
    let access = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    if qp_type == QpType::Ud {
        return vec![
            ModifyQp {
                qkey: Some(QKEY),
                ..ModifyQp::to(QpState::Init)
            },
            ModifyQp::to(QpState::Rtr),
        ];
    }
    let rc = qp_type == QpType::Rc;
    vec![
        ModifyQp {
            access: Some(access),
            ..ModifyQp::to(QpState::Init)
        },
        ModifyQp {
            path_mtu: Some(Mtu::M256),
            dest_qp: Some(Qpn::new(0x99)),
            dest_addr: Some(PEER),
            rq_psn: Some(Psn::new(0xff_fff0)),
            max_dest_rd_atomic: rc.then_some(MAX_DEST_RD_ATOMIC),
            min_rnr_timer: rc.then_some(crate::wire::RnrTimer::new(1)),
            ..ModifyQp::to(QpState::Rtr)
        },
    ]
}

/// Reads bytes from the fuzzer's input, zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
}

/// Runs the engine over the packets `data` describes, checking the invariants; returns what
/// the engine counted, so that tests can see how deep the input went.
pub fn responder(data: &[u8]) -> super::Stats {
    let mut t = setup();
    let mut input = Input(data);
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let mut built = vec![0u8; MAX_PACKET_LEN];
    let mut posted = 0u64;
    let mut now = 0u64;
    while !input.0.is_empty() {
        let head = input.byte();
        // Keep a few receives posted on every QP, in the watched first half.
        if head & 0x40 != 0 {
            for &qpn in &t.qps {
                let sge = Sge {
                    addr: RECV_VA + (posted % 4) * (RECV_POSTED as u64 / 4),
                    length: RECV_POSTED as u32 / 4,
                    lkey: t.recv,
                };
                let _ = t.engine.post_recv(qpn, RecvWr::new(posted, vec![sge]));
                posted += 1;
            }
        }
        let packet: &[u8] = if head & 0x80 == 0 {
            input.take(usize::from(head & 0x3f) * 4)
        } else {
            let len = build(&t, &mut input, &mut built);
            &built[..len]
        };
        now += 1_000;
        let _ = t
            .engine
            .handle_packet(Instant::from_nanos(now), PEER, packet);
        if head & 0x20 != 0 {
            now += 50_000_000;
            t.engine.handle_timeout(Instant::from_nanos(now));
        }
        let hold = head & 0x90 == 0x90;
        while let Some(tx) = (!hold)
            .then(|| t.engine.poll_transmit(Instant::from_nanos(now), &mut buf))
            .flatten()
        {
            let sent = IbPacketRepr::parse(&buf[..tx.len]).expect("the engine sends valid packets");
            assert!(
                !sent.bth.opcode.is_request(),
                "the engine under test has no requests of its own: {:?}",
                sent.bth.opcode
            );
        }
        check(&t);
        for &qpn in &t.qps {
            check_limits(&t.engine, qpn, MAX_DEST_RD_ATOMIC, OPEN_LEN);
        }
    }
    *t.engine.stats()
}

/// The responder's max_dest_rd_atomic in the targets.
const MAX_DEST_RD_ATOMIC: u8 = 4;

/// What a queue pair may hold whatever the peer sends: at most `depth` READ and atomic
/// responses, with at most two ACKs (a NAK and a re-ACK) around each; the READs and
/// atomics remembered for duplicates; bytes kept for queued READs no more than they read
/// (`region` bounds one READ).
pub fn check_limits(engine: &Engine, qpn: Qpn, depth: u8, region: usize) {
    let Ok(u) = engine.qp_usage(qpn) else { return };
    let depth = usize::from(depth);
    assert!(
        u.rd_atomic <= depth,
        "{u:?}: more READ/atomic responses than max_dest_rd_atomic"
    );
    assert!(
        u.responses <= 3 * (depth + 1),
        "{u:?}: the response queue grows"
    );
    let remembered = engine.config().atomic_results.max(depth).max(1);
    assert!(
        u.resources <= remembered,
        "{u:?}: remembered READs and atomics grow"
    );
    assert!(
        u.preserved_bytes <= u.rd_atomic * region,
        "{u:?}: more bytes kept than the queued READs read"
    );
}

fn check(t: &Target) {
    let shut = t.engine.mr(t.shut).map(|m| m.bytes());
    assert!(
        shut == Some(&t.shut_bytes[..]),
        "a region without remote write rights changed"
    );
    let recv = t.engine.mr(t.recv).map(|m| &m.bytes()[RECV_POSTED..]);
    assert!(
        recv == Some(&t.recv_tail[..]),
        "receive bytes outside every posted receive changed"
    );
    assert!(t.engine.mr(t.open).is_some());
}

/// A packet near the engine's state, from the next input bytes; returns its length.
fn build(t: &Target, input: &mut Input<'_>, buf: &mut [u8]) -> usize {
    let which = usize::from(input.byte() % 3);
    let transport = [Transport::Rc, Transport::Uc, Transport::Ud][which];
    let qpn = t.qps[which];
    let low = match transport {
        Transport::Ud => {
            [op::SEND_ONLY, op::SEND_ONLY_WITH_IMMEDIATE][usize::from(input.byte() & 1)]
        }
        _ => input.byte() % 0x20,
    };
    let opcode = Opcode::new(transport, low);
    if !opcode.is_known() {
        return 0;
    }
    let expected = t.engine.expected_psn(qpn).unwrap_or_default();
    let psn = expected.add(u32::from(input.byte() % 8)).sub(2);
    let mut bth = BthRepr::new(opcode, qpn, psn);
    bth.ack_req = input.byte() & 1 != 0;
    bth.pkey = PKey::DEFAULT;
    let key = [t.open, t.shut, t.recv, input.u32()][usize::from(input.byte() % 4)];
    let va = [OPEN_VA, SHUT_VA, RECV_VA, u64::from(input.u32())][usize::from(input.byte() % 4)]
        .wrapping_add(u64::from(input.byte()) * 8);
    let dma_len = u32::from(input.byte()) * 16;
    let ext = ExtHeaders {
        reth: Some(RethRepr {
            va,
            rkey: key,
            dma_len,
        }),
        atomic_eth: Some(AtomicEthRepr {
            va,
            rkey: key,
            swap_add: u64::from(input.u32()),
            compare: u64::from(input.u32()),
        }),
        immdt: Some(ImmDtRepr { imm: 7 }),
        ieth: Some(IethRepr { rkey: key }),
        deth: Some(DethRepr {
            qkey: if input.byte() & 1 == 0 {
                QKEY
            } else {
                0x8000_0000
            },
            resv: 0,
            src_qp: Qpn::new(0x55),
        }),
        ..ExtHeaders::default()
    };
    let wanted = opcode.info().map(|i| i.headers).unwrap_or_default();
    let mut keep = ExtHeaders::default();
    let present = |h| wanted.contains(h);
    use crate::wire::Headers as H;
    keep.reth = ext.reth.filter(|_| present(H::RETH));
    keep.atomic_eth = ext.atomic_eth.filter(|_| present(H::ATOMIC_ETH));
    keep.immdt = ext.immdt.filter(|_| present(H::IMMDT));
    keep.ieth = ext.ieth.filter(|_| present(H::IETH));
    keep.deth = ext.deth.filter(|_| present(H::DETH));
    let payload_len = [0usize, 1, 255, 256, 300][usize::from(input.byte() % 5)];
    let payload = vec![0xee; payload_len];
    let pkt = IbPacketRepr::new(bth, keep, &payload);
    pkt.emit(buf).unwrap_or(0)
}

/// A requester with READs, WRITEs and atomics outstanding, fed arbitrary responses. Checks
/// that nothing panics, that local memory changes only inside the READ and atomic result
/// buffers, and that completions never outnumber the work requests.
pub fn completer(data: &[u8]) -> super::Stats {
    let mut engine = Engine::new(TransportConfig::default());
    let cq = engine.create_cq(1024);
    let src = engine
        .register_mr(OPEN_VA, pattern(OPEN_LEN, 4), Access::NONE)
        .expect("valid region");
    let land = engine
        .register_mr(RECV_VA, pattern(RECV_LEN, 5), Access::LOCAL_WRITE)
        .expect("valid region");
    let qpn = engine
        .create_qp(QpInit::new(QpType::Rc, cq))
        .expect("new QP");
    let mut steps = bring_up(QpType::Rc);
    steps.push(ModifyQp {
        sq_psn: Some(Psn::new(0xff_fff8)),
        timeout: Some(10),
        retry_cnt: Some(2),
        rnr_retry: Some(2),
        max_rd_atomic: Some(4),
        ..ModifyQp::to(QpState::Rts)
    });
    for m in &steps {
        engine.modify_qp(qpn, m).expect("valid transition");
    }
    // READs and atomics land in the first half of `land`; the second half must stay put.
    let ops = [
        super::SendOp::Read {
            remote_addr: 0x9000,
            rkey: 1,
        },
        super::SendOp::Write {
            remote_addr: 0x9000,
            rkey: 1,
        },
        super::SendOp::FetchAdd {
            remote_addr: 0x9000,
            rkey: 1,
            add: 1,
        },
        super::SendOp::Read {
            remote_addr: 0x9000,
            rkey: 1,
        },
        super::SendOp::Send,
        super::SendOp::CompareSwap {
            remote_addr: 0x9000,
            rkey: 1,
            compare: 0,
            swap: 1,
        },
    ];
    for (i, op) in ops.iter().enumerate() {
        let sge = if op.needs_response() {
            Sge {
                addr: RECV_VA + i as u64 * 1024,
                length: 1000,
                lkey: land,
            }
        } else {
            Sge {
                addr: OPEN_VA,
                length: 700,
                lkey: src,
            }
        };
        let _ = engine.post_send(qpn, super::SendWr::new(i as u64, *op, vec![sge]));
    }
    let tail = engine.mr(land).map(|m| m.bytes()[RECV_POSTED..].to_vec());
    let mut input = Input(data);
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let mut built = vec![0u8; MAX_PACKET_LEN];
    let mut now = 0u64;
    let mut completions = 0;
    let mut events = 0;
    while !input.0.is_empty() {
        now += 1_000;
        while engine
            .poll_transmit(Instant::from_nanos(now), &mut buf)
            .is_some()
        {}
        let head = input.byte();
        if head & 0x20 != 0 {
            now += 2_000_000;
            engine.handle_timeout(Instant::from_nanos(now));
        }
        let packet: &[u8] = if head & 0x80 == 0 {
            input.take(usize::from(head & 0x3f) * 4)
        } else {
            let low = [
                op::ACKNOWLEDGE,
                op::RDMA_READ_RESPONSE_FIRST,
                op::RDMA_READ_RESPONSE_MIDDLE,
                op::RDMA_READ_RESPONSE_LAST,
                op::RDMA_READ_RESPONSE_ONLY,
                op::ATOMIC_ACKNOWLEDGE,
            ][usize::from(input.byte() % 6)];
            let opcode = Opcode::new(Transport::Rc, low);
            let psn = Psn::new(0xff_fff8).add(u32::from(input.byte() % 24));
            let mut bth = BthRepr::new(opcode, qpn, psn);
            bth.pkey = PKey::DEFAULT;
            let wanted = opcode.info().map(|i| i.headers).unwrap_or_default();
            let aeth = crate::wire::AethRepr {
                syndrome: crate::wire::Syndrome::from_byte(input.byte() & 0x7f),
                msn: crate::wire::Msn::new(u32::from(input.byte())),
            };
            let ext = ExtHeaders {
                aeth: wanted.contains(crate::wire::Headers::AETH).then_some(aeth),
                atomic_ack_eth: wanted
                    .contains(crate::wire::Headers::ATOMIC_ACK_ETH)
                    .then(|| crate::wire::AtomicAckEthRepr {
                        orig: u64::from(input.u32()),
                    }),
                ..ExtHeaders::default()
            };
            let payload = vec![0xdd; [0usize, 256, 232, 100][usize::from(input.byte() % 4)]];
            let len = IbPacketRepr::new(bth, ext, &payload)
                .emit(&mut built)
                .unwrap_or(0);
            &built[..len]
        };
        let _ = engine.handle_packet(Instant::from_nanos(now), PEER, packet);
        // Completions are left queued now and then, to see that they do not pile up.
        let queued = engine.cq(cq).map_or(0, |q| q.len());
        assert!(
            completions + queued <= ops.len(),
            "more completions than work requests"
        );
        if head & 0x10 == 0 {
            while engine.poll_completion(cq).is_some() {
                completions += 1;
            }
        }
        while engine.poll_event().is_some() {
            events += 1;
        }
        assert!(events <= 1, "more than one event from one queue pair");
        let u = engine.qp_usage(qpn).unwrap_or_default();
        assert!(u.send_wqes <= ops.len(), "{u:?}: send queue grows");
        check_limits(&engine, qpn, MAX_DEST_RD_ATOMIC, OPEN_LEN);
        let now_tail = engine.mr(land).map(|m| m.bytes()[RECV_POSTED..].to_vec());
        assert!(
            now_tail == tail,
            "a response was written outside its buffer"
        );
    }
    *engine.stats()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn responder_invariants_hold(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            super::responder(&data);
        }

        /// Mostly built packets, which go deep: every header byte 0x80 | random flags.
        #[test]
        fn responder_invariants_hold_for_built_packets(
            data in proptest::collection::vec(any::<u8>(), 0..4096),
            heads in proptest::collection::vec(0x80u8..=0xff, 0..64),
        ) {
            let mut input = Vec::new();
            for (i, h) in heads.iter().enumerate() {
                input.push(*h);
                let at = (i * 24) % data.len().max(1);
                input.extend_from_slice(&data[at.min(data.len())..(at + 24).min(data.len())]);
            }
            super::responder(&input);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn completer_invariants_hold(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            super::completer(&data);
        }
    }

    #[test]
    fn built_responses_complete_requests() {
        let mut rng = crate::rng::Rng::new(6);
        let (mut acked, mut implied) = (0, 0);
        for _ in 0..300 {
            let mut input = vec![0u8; 400];
            rng.fill(&mut input);
            for chunk in input.chunks_mut(10) {
                chunk[0] |= 0x80;
            }
            let s = super::completer(&input);
            acked += s.acks_received;
            implied += s.implied_naks + s.rewinds;
        }
        assert!(acked > 0 && implied > 0, "{acked} {implied}");
    }

    /// The input bytes `build` reads for an RC READ request of 1 KiB at the expected PSN,
    /// its output left queued (head 0x90).
    fn held_read() -> Vec<u8> {
        let mut v = vec![0x90, 0, crate::wire::opcode::op::RDMA_READ_REQUEST, 2, 0];
        v.extend_from_slice(&[0, 0, 0, 0, 0]); // random key, then "the open region's"
        v.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // random VA, then "OPEN_VA", offset 0
        v.push(64); // 64 x 16 bytes
        v.extend_from_slice(&[0; 8]); // atomic operands
        v.extend_from_slice(&[0, 0]); // Q_Key choice, payload length choice
        v
    }

    /// READs past max_dest_rd_atomic with nothing sent in between: the fifth is NAKed and
    /// the queue stops growing (the old responder queued every one).
    #[test]
    fn held_reads_stop_at_max_dest_rd_atomic() {
        let input: Vec<u8> = (0..8).flat_map(|_| held_read()).collect();
        let s = super::responder(&input);
        assert_eq!(s.error_naks_sent, 1, "{s:?}");
        assert_eq!(s.packets_received, 8);
    }

    /// Built packets reach execution, duplicates, NAKs and errors: the fuzz body is not
    /// stopped at the first check.
    #[test]
    fn built_packets_reach_the_deep_paths() {
        let mut rng = crate::rng::Rng::new(5);
        let mut total = crate::transport::Stats::default();
        for _ in 0..300 {
            let mut input = vec![0u8; 600];
            rng.fill(&mut input);
            for chunk in input.chunks_mut(30) {
                chunk[0] |= 0xc0;
            }
            let s = super::responder(&input);
            total.acks_sent += s.acks_sent;
            total.payload_bytes_delivered += s.payload_bytes_delivered;
            total.seq_naks_sent += s.seq_naks_sent;
            total.error_naks_sent += s.error_naks_sent;
            total.duplicate_requests += s.duplicate_requests;
            total.rnr_naks_sent += s.rnr_naks_sent;
        }
        assert!(total.payload_bytes_delivered > 0, "{total:?}");
        assert!(total.acks_sent > 0 && total.seq_naks_sent > 0, "{total:?}");
        assert!(
            total.error_naks_sent > 0 && total.duplicate_requests > 0,
            "{total:?}"
        );
    }
}
