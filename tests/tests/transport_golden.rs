//! Golden tests of the transport engine against real rdma_rxe traffic (pcaps/README.md): the
//! request packets of each capture are fed to our engine playing the responder's queue pair,
//! and its answers must carry the opcodes, PSNs, AETH syndromes and MSNs rxe answered with.
//!
//! Allowances, each a documented choice of the engine:
//! - rxe re-ACKs every duplicate request packet; we re-ACK only duplicates that carry AckReq
//!   or end a message. Runs of identical ACKs are therefore compared as one.
//! - The application's receive posting is not in a capture: a receive is posted just before a
//!   SEND that rxe accepted, and none before a SEND rxe answered with an RNR NAK.
//! - Loss captures hold the frames the bridge then dropped: in them a request is taken as
//!   dropped when it is the last transmission of the PSN a later PSN sequence error NAK
//!   names. (The reordering capture needs no such guess: its order is the order rxe saw.)

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use roce::capture::CaptureReader;
use roce::time::Instant;
use roce::transport::{
    Access, Engine, MAX_PACKET_LEN, ModifyQp, Mtu, QpInit, QpState, QpType, RecvWr, Sge,
    TransportConfig, WcStatus,
};
use roce::wire::opcode::op;
use roce::wire::{IbPacketRepr, Opcode, Psn, Qpn, RnrTimer, Syndrome, Transport};

/// One RoCEv2 packet of a capture: its addresses and IB part (BTH through pad).
struct Packet {
    index: u64,
    src: IpAddr,
    dst: IpAddr,
    ib: Vec<u8>,
}

impl Packet {
    fn repr(&self) -> IbPacketRepr<'_> {
        IbPacketRepr::parse(&self.ib).expect("captured packets parse")
    }
}

fn load(name: &str) -> Vec<Packet> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../pcaps")
        .join(name);
    let mut reader = CaptureReader::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut out = Vec::new();
    while let Some(frame) = reader.next_frame().expect("readable capture") {
        let Ok(pkt) = frame.roce() else { continue };
        let start = pkt.bth_offset();
        let ib = frame.data[start..start + pkt.ib().buffer_len()].to_vec();
        out.push(Packet {
            index: frame.index,
            src: pkt.ip().src_addr(),
            dst: pkt.ip().dst_addr(),
            ib,
        });
    }
    out
}

/// What a response says, for comparison: opcode, PSN, syndrome, MSN, payload length.
type Answer = (Opcode, Psn, Option<u8>, Option<u32>, usize);

fn answer(p: &IbPacketRepr<'_>) -> Answer {
    let aeth = p.ext.aeth;
    (
        p.bth.opcode,
        p.bth.psn,
        aeth.map(|a| a.syndrome.to_byte()),
        aeth.map(|a| a.msn.value()),
        p.payload.len(),
    )
}

/// Runs of identical ACKs count once (see the module comment).
fn coalesce(answers: Vec<Answer>) -> Vec<Answer> {
    let mut out: Vec<Answer> = Vec::new();
    for a in answers {
        let ack = a.0.low() == op::ACKNOWLEDGE;
        if ack && out.last() == Some(&a) {
            continue;
        }
        out.push(a);
    }
    out
}

/// The RC requests from `client` to `server`'s QP `qpn`, and rxe's answers.
struct Flow<'a> {
    client: IpAddr,
    server: IpAddr,
    qpn: Qpn,
    requests: Vec<&'a Packet>,
    responses: Vec<&'a Packet>,
}

fn rc_flows(packets: &[Packet]) -> Vec<Flow<'_>> {
    let mut flows: BTreeMap<(String, String, u32), Flow<'_>> = BTreeMap::new();
    for p in packets {
        let r = p.repr();
        if r.bth.opcode.transport() != Transport::Rc || !r.bth.opcode.is_request() {
            continue;
        }
        let key = (p.src.to_string(), p.dst.to_string(), r.bth.dest_qp.value());
        flows
            .entry(key)
            .or_insert_with(|| Flow {
                client: p.src,
                server: p.dst,
                qpn: r.bth.dest_qp,
                requests: Vec::new(),
                responses: Vec::new(),
            })
            .requests
            .push(p);
    }
    let mut flows: Vec<Flow<'_>> = flows.into_values().collect();
    for flow in &mut flows {
        flow.responses = packets
            .iter()
            .filter(|p| p.src == flow.server && p.dst == flow.client)
            .filter(|p| {
                let op = p.repr().bth.opcode;
                op.transport() == Transport::Rc && !op.is_request()
            })
            .collect();
    }
    flows
}

/// The smallest IB MTU that holds every payload of the capture (at least 1024).
fn path_mtu(packets: &[Packet]) -> Mtu {
    let largest = packets
        .iter()
        .map(|p| p.repr().payload.len())
        .max()
        .unwrap_or(0);
    [Mtu::M1024, Mtu::M2048, Mtu::M4096]
        .into_iter()
        .find(|m| m.bytes() as usize >= largest)
        .unwrap_or(Mtu::M4096)
}

/// Requests the bridge dropped: the last transmission, before the NAK, of each PSN that a PSN
/// sequence error NAK names.
fn dropped(flow: &Flow<'_>) -> Vec<u64> {
    let mut out = Vec::new();
    for nak in &flow.responses {
        let r = nak.repr();
        let is_seq_nak = r.ext.aeth.is_some_and(|a| a.syndrome.to_byte() == 0x60);
        if !is_seq_nak {
            continue;
        }
        // A sequence NAK right after an RNR NAK of the same PSN reports no loss.
        let after_rnr = flow
            .responses
            .iter()
            .rfind(|a| a.index < nak.index && a.repr().bth.psn == r.bth.psn)
            .is_some_and(|a| is_rnr(&a.repr()));
        if after_rnr {
            continue;
        }
        let lost = flow
            .requests
            .iter()
            .rfind(|q| q.index < nak.index && q.repr().bth.psn == r.bth.psn);
        if let Some(q) = lost {
            out.push(q.index);
        }
    }
    out
}

fn is_rnr(p: &IbPacketRepr<'_>) -> bool {
    matches!(
        p.ext.aeth.map(|a| a.syndrome),
        Some(Syndrome::RnrNak { .. })
    )
}

/// The PSN the requester started from: the earliest of the first requests (in a reordered
/// capture the first packet seen need not be the first sent).
fn first_psn(requests: &[&Packet]) -> Psn {
    let mut first = requests[0].repr().bth.psn;
    for q in requests.iter().take(256) {
        let psn = q.repr().bth.psn;
        if psn.distance(first) < 0 {
            first = psn;
        }
    }
    first
}

/// True for the requests that consume a receive (IBA 9.7.5.2.3).
fn needs_receive(op: Opcode) -> bool {
    matches!(
        op.low(),
        op::SEND_FIRST
            | op::SEND_ONLY
            | op::SEND_ONLY_WITH_IMMEDIATE
            | op::SEND_ONLY_WITH_INVALIDATE
            | op::RDMA_WRITE_LAST_WITH_IMMEDIATE
            | op::RDMA_WRITE_ONLY_WITH_IMMEDIATE
    )
}

/// Our engine as the server's QP of `flow`, with every R_Key the client used registered.
fn responder(flow: &Flow<'_>, mtu: Mtu) -> (Engine, roce::transport::CqId, u32) {
    let mut engine = Engine::new(TransportConfig::default());
    let cq = engine.create_cq(1 << 12);
    engine
        .create_qp_with_qpn(flow.qpn, QpInit::new(QpType::Rc, cq))
        .unwrap();
    let client_qpn = flow
        .responses
        .first()
        .map_or(Qpn::new(0), |r| r.repr().bth.dest_qp);
    let rnr_timer = flow
        .responses
        .iter()
        .find_map(|r| match r.repr().ext.aeth?.syndrome {
            Syndrome::RnrNak { timer } => Some(timer),
            _ => None,
        })
        .unwrap_or(RnrTimer::new(12));
    let remote = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let access = remote | Access::REMOTE_ATOMIC;
    let steps = [
        ModifyQp {
            access: Some(access),
            ..ModifyQp::to(QpState::Init)
        },
        ModifyQp {
            path_mtu: Some(mtu),
            dest_qp: Some(client_qpn),
            dest_addr: Some(flow.client),
            rq_psn: Some(first_psn(&flow.requests)),
            max_dest_rd_atomic: Some(16),
            min_rnr_timer: Some(rnr_timer),
            ..ModifyQp::to(QpState::Rtr)
        },
        ModifyQp {
            sq_psn: Some(Psn::new(0)),
            timeout: Some(14),
            retry_cnt: Some(7),
            rnr_retry: Some(7),
            max_rd_atomic: Some(16),
            ..ModifyQp::to(QpState::Rts)
        },
    ];
    for m in &steps {
        engine.modify_qp(flow.qpn, m).unwrap();
    }
    // Every region the client named, as one region per R_Key spanning what it touched.
    let mut spans: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for q in &flow.requests {
        let r = q.repr();
        let target = match (r.ext.reth, r.ext.atomic_eth) {
            (Some(reth), _) => Some((reth.rkey, reth.va, u64::from(reth.dma_len))),
            (_, Some(a)) => Some((a.rkey, a.va, 8)),
            _ => None,
        };
        if let Some((rkey, va, len)) = target {
            let span = spans.entry(rkey).or_insert((va, va + len));
            span.0 = span.0.min(va);
            span.1 = span.1.max(va + len);
        }
    }
    for (rkey, (start, end)) in spans {
        let data = vec![0; (end - start) as usize];
        engine
            .register_mr_with_key(rkey, start, data, access)
            .unwrap();
    }
    let recv_key = engine
        .register_mr(0x7000_0000, vec![0; 1 << 20], Access::LOCAL_WRITE)
        .unwrap();
    (engine, cq, recv_key)
}

/// Feeds the flow's requests to our engine and returns (ours, rxe's) answers.
fn replay(flow: &Flow<'_>, mtu: Mtu, lossy: bool) -> (Vec<Answer>, Vec<Answer>) {
    let (mut engine, cq, recv_key) = responder(flow, mtu);
    let lost = if lossy { dropped(flow) } else { Vec::new() };
    let mut ours = Vec::new();
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let mut posted = 0u64;
    let mut outstanding = 0u32;
    for q in &flow.requests {
        if lost.contains(&q.index) {
            continue;
        }
        let r = q.repr();
        let now = Instant::from_micros(q.index);
        // Only a request our responder will execute now can consume a receive.
        let in_sequence = engine.expected_psn(flow.qpn).unwrap() == r.bth.psn;
        if in_sequence && needs_receive(r.bth.opcode) {
            let psn = r.bth.psn;
            // rxe's verdict on this PSN: the next ACK or RNR NAK naming it (a sequence NAK
            // naming it only says rxe waits for it).
            let rnr = flow
                .responses
                .iter()
                .filter(|a| a.index > q.index)
                .map(|a| a.repr())
                .filter(|a| a.bth.psn == psn)
                .find(|a| {
                    matches!(
                        a.ext.aeth.map(|x| x.syndrome),
                        Some(Syndrome::RnrNak { .. } | Syndrome::Ack { .. })
                    )
                })
                .is_some_and(|a| is_rnr(&a));
            if !rnr && outstanding == 0 {
                let sge = Sge {
                    addr: 0x7000_0000 + (posted % 16) * 65536,
                    length: 65536,
                    lkey: recv_key,
                };
                engine
                    .post_recv(flow.qpn, RecvWr::new(posted, vec![sge]))
                    .unwrap();
                posted += 1;
                outstanding += 1;
            }
        }
        engine
            .handle_packet(now, flow.client, &q.ib)
            .unwrap_or_else(|e| panic!("frame {}: {e}", q.index));
        while let Some(t) = engine.poll_transmit(now, &mut buf) {
            ours.push(answer(&IbPacketRepr::parse(&buf[..t.len]).unwrap()));
        }
        while let Some(wc) = engine.poll_completion(cq) {
            assert_eq!(wc.status, WcStatus::Success, "frame {}", q.index);
            outstanding -= 1;
        }
    }
    let theirs = flow.responses.iter().map(|a| answer(&a.repr())).collect();
    (coalesce(ours), coalesce(theirs))
}

fn check_rc(name: &str) {
    let packets = load(name);
    let mtu = path_mtu(&packets);
    let flows = rc_flows(&packets);
    assert!(!flows.is_empty(), "{name}: no RC requests");
    for flow in &flows {
        let (ours, theirs) = replay(flow, mtu, name.contains("loss"));
        assert!(!theirs.is_empty(), "{name}: rxe answered nothing");
        if let Some(at) = (0..ours.len().max(theirs.len())).find(|&i| ours.get(i) != theirs.get(i))
        {
            let window = |v: &[Answer]| {
                v.iter()
                    .enumerate()
                    .skip(at.saturating_sub(3))
                    .take(6)
                    .map(|(i, a)| format!("  {i}: {a:?}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            panic!(
                "{name}: answers to QP {:#x} of {} differ at {at} of {}/{}\nours:\n{}\nrxe:\n{}",
                flow.qpn,
                flow.server,
                ours.len(),
                theirs.len(),
                window(&ours),
                window(&theirs)
            );
        }
    }
}

macro_rules! golden {
    ($($test:ident => $file:literal,)*) => {
        $(
            #[test]
            fn $test() {
                check_rc($file);
            }
        )*
    };
}

golden! {
    send_only => "rc_send_only.pcap",
    send_first_middle_last => "rc_send_first_middle_last.pcap",
    send_with_immediate => "rc_send_imm.pcap",
    write => "rc_write.pcap",
    write_64k => "rc_write_64k.pcap",
    write_only => "rc_write_only.pcap",
    write_with_immediate => "rc_write_imm.pcap",
    read => "rc_read.pcap",
    read_only => "rc_read_only.pcap",
    compare_swap => "rc_atomic_cmp_swap.pcap",
    fetch_add => "rc_atomic_fetch_add.pcap",
    ipv6 => "rc_ipv6.pcap",
    mtu_4096 => "rc_mtu4096.pcap",
    rnr_nak => "rc_rnr_nak.pcap",
    rnr_nak_verbs => "rc_rnr_nak_verbs.pcap",
    rdma_cm_rc_part => "rdma_cm_rping.pcap",
    loss_write => "rc_loss_write.pcap",
    loss_read => "rc_loss_read.pcap",
    reordering => "rc_reorder_write.pcap",
}

/// UC and UD have no responses: every message of the capture must complete at our receiver
/// with its length (plus the GRH area on UD), immediate and source QP.
fn check_unreliable(name: &str, transport: Transport) {
    let packets = load(name);
    let mtu = path_mtu(&packets);
    let mut flows: BTreeMap<(String, String, u32), Vec<&Packet>> = BTreeMap::new();
    for p in &packets {
        let r = p.repr();
        if r.bth.opcode.transport() == transport {
            let key = (p.src.to_string(), p.dst.to_string(), r.bth.dest_qp.value());
            flows.entry(key).or_default().push(p);
        }
    }
    assert!(!flows.is_empty(), "{name}: no {transport:?} packets");
    for requests in flows.values() {
        let first = requests[0].repr();
        let (qp_type, qkey) = match first.ext.deth {
            Some(deth) => (QpType::Ud, Some(deth.qkey)),
            None => (QpType::Uc, None),
        };
        let mut engine = Engine::new(TransportConfig::default());
        let cq = engine.create_cq(1 << 12);
        let qpn = first.bth.dest_qp;
        engine
            .create_qp_with_qpn(qpn, QpInit::new(qp_type, cq))
            .unwrap();
        let steps = match qkey {
            Some(qkey) => vec![
                ModifyQp {
                    qkey: Some(qkey),
                    ..ModifyQp::to(QpState::Init)
                },
                ModifyQp::to(QpState::Rtr),
            ],
            None => vec![
                ModifyQp {
                    access: Some(Access::REMOTE_WRITE | Access::LOCAL_WRITE),
                    ..ModifyQp::to(QpState::Init)
                },
                ModifyQp {
                    path_mtu: Some(mtu),
                    dest_qp: Some(Qpn::new(0)),
                    dest_addr: Some(requests[0].src),
                    rq_psn: Some(first_psn(requests)),
                    ..ModifyQp::to(QpState::Rtr)
                },
            ],
        };
        for m in &steps {
            engine.modify_qp(qpn, m).unwrap();
        }
        let key = engine
            .register_mr(0, vec![0; 1 << 20], Access::LOCAL_WRITE)
            .unwrap();
        let mut expected = Vec::new();
        let mut message = 0;
        for (i, q) in requests.iter().enumerate() {
            let r = q.repr();
            if r.bth.opcode.is_first() {
                let sge = Sge {
                    addr: (i as u64 % 16) * 65536,
                    length: 65536,
                    lkey: key,
                };
                engine
                    .post_recv(qpn, RecvWr::new(i as u64, vec![sge]))
                    .unwrap();
                message = if qp_type == QpType::Ud { 40 } else { 0 };
            }
            message += r.payload.len();
            if r.bth.opcode.is_last() {
                let imm = r.ext.immdt.map(|x| x.imm);
                expected.push((message, imm, r.ext.deth.map(|d| d.src_qp)));
            }
            engine
                .handle_packet(Instant::from_micros(q.index), q.src, &q.ib)
                .unwrap_or_else(|e| panic!("{name} frame {}: {e}", q.index));
        }
        let mut got = Vec::new();
        while let Some(wc) = engine.poll_completion(cq) {
            assert_eq!(wc.status, WcStatus::Success, "{name}");
            got.push((wc.byte_len as usize, wc.imm_data, wc.src_qp));
        }
        assert_eq!(got, expected, "{name}: messages to QP {qpn:#x}");
    }
}

#[test]
fn uc_send() {
    check_unreliable("uc_send.pcap", Transport::Uc);
}

#[test]
fn uc_send_first_middle_last() {
    check_unreliable("uc_send_first_middle_last.pcap", Transport::Uc);
}

#[test]
fn ud_send_ipv6() {
    check_unreliable("ud_send_ipv6.pcap", Transport::Ud);
}

#[test]
fn ud_send() {
    check_unreliable("ud_send.pcap", Transport::Ud);
}

#[test]
fn ud_cm_mads_to_qp1() {
    check_unreliable("rdma_cm_rping.pcap", Transport::Ud);
}
