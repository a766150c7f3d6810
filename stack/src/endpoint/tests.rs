//! Two hosts over the in-memory link in virtual time: address resolution, then RC, UC and
//! UD traffic checked byte for byte; every kind of bad frame counted as a drop.

use core::time::Duration;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use super::congestion::CongestionHook;
use super::connect::{QpPath, connect, to_rts};
use super::dcqcn::DcqcnHook;
use super::host::{Host, HostConfig};
use super::virtual_net::VirtualNet;
use crate::cc::DcqcnParams;
use crate::fault::{CeMarking, FaultConfig};
use crate::io::Device;
use crate::io::memory::{MAC_A, MAC_B, MemoryLinkConfig};
use crate::time::Instant;
use crate::transport::{
    Access, CqId, ModifyQp, Mtu, QpInit, QpState, QpType, RecvWr, SendOp, SendWr, Sge, UdDest,
    WcOpcode, WcStatus, WorkCompletion,
};
use crate::wire::encap::{field_at, set_ipv4_checksum};
use crate::wire::{
    BthRepr, Ecn, ExtHeaders, IbPacketRepr, IpRepr, Ipv4Repr, Opcode, PKey, Psn, Qpn, RethRepr,
    RocePacket, RoceRepr, rxe_connected_udp_src_port, rxe_udp_src_port,
};

const VA: u64 = 0x10_0000;
const LEN: usize = 64 * 1024;

fn config(addrs: &[&str]) -> HostConfig {
    HostConfig::new([0; 6], addrs.iter().map(|a| a.parse().unwrap()).collect())
}

fn net(link: MemoryLinkConfig, a: &[&str], b: &[&str]) -> VirtualNet {
    VirtualNet::new(link, config(a), config(b)).unwrap()
}

fn v4_net() -> VirtualNet {
    net(
        MemoryLinkConfig::default(),
        &["10.0.0.1/24"],
        &["10.0.0.2/24"],
    )
}

/// One side of a connection: its QP, CQ and a registered region.
#[derive(Debug, Clone, Copy)]
struct Side {
    qpn: Qpn,
    cq: CqId,
    key: u32,
}

fn setup(host: &mut Host, qp_type: QpType) -> Side {
    let e = host.engine_mut();
    let cq = e.create_cq(4096);
    let qpn = e.create_qp(QpInit::new(qp_type, cq)).unwrap();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let key = e.register_mr(VA, vec![0; LEN], access).unwrap();
    Side { qpn, cq, key }
}

/// Connects `a` and `b` with the GIDs at `gid_index` in each host's table.
fn connect_pair(net: &mut VirtualNet, qp_type: QpType, gid_index: usize) -> (Side, Side) {
    let sa = setup(&mut net.a, qp_type);
    let sb = setup(&mut net.b, qp_type);
    let addr_a = net.a.gids().get(gid_index).unwrap().addr();
    let addr_b = net.b.gids().get(gid_index).unwrap().addr();
    let path = |dest, dest_qp, rq, sq| {
        let mut p = QpPath::new(
            qp_type,
            dest,
            dest_qp,
            Psn::new(rq),
            Psn::new(sq),
            Mtu::M1024,
        );
        p.access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        p
    };
    let pa = path(addr_b, sb.qpn, 2000, 1000);
    let pb = path(addr_a, sa.qpn, 1000, 2000);
    connect(net.a.engine_mut(), sa.qpn, &pa).unwrap();
    connect(net.b.engine_mut(), sb.qpn, &pb).unwrap();
    (sa, sb)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn fill(host: &mut Host, key: u32, at: usize, bytes: &[u8]) {
    let mr = host.engine_mut().mr_mut(key).unwrap();
    mr.bytes_mut()[at..at + bytes.len()].copy_from_slice(bytes);
}

fn region(host: &Host, key: u32) -> &[u8] {
    host.engine().mr(key).unwrap().bytes()
}

fn completions(host: &mut Host, cq: CqId) -> Vec<WorkCompletion> {
    std::iter::from_fn(|| host.engine_mut().poll_completion(cq)).collect()
}

/// Runs until `a` and `b` have `na` and `nb` completions, returned in order.
fn run_for(
    net: &mut VirtualNet,
    (ca, na): (CqId, usize),
    (cb, nb): (CqId, usize),
) -> (Vec<WorkCompletion>, Vec<WorkCompletion>) {
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    let done = net
        .run_until(Duration::from_secs(30), |n| {
            wa.extend(completions(&mut n.a, ca));
            wb.extend(completions(&mut n.b, cb));
            wa.len() >= na && wb.len() >= nb
        })
        .unwrap();
    assert!(
        done,
        "only {}/{na} and {}/{nb} completions: {wa:?} {wb:?}\n{:?}\n{:?}\n{:?}",
        wa.len(),
        wb.len(),
        net.b.stats(),
        net.b.engine().stats(),
        net.a.engine().stats(),
    );
    (wa, wb)
}

/// A WRITE (wr_id 1) of `len` bytes from the start of a's region to the start of b's.
fn write_wr(sa: Side, sb: Side, len: u32) -> SendWr {
    let remote = SendOp::Write {
        remote_addr: VA,
        rkey: sb.key,
    };
    let sge = Sge {
        addr: VA,
        length: len,
        lkey: sa.key,
    };
    SendWr::new(1, remote, vec![sge])
}

fn write_then_send(net: &mut VirtualNet, sa: Side, sb: Side, write_len: usize, send_len: usize) {
    let data = pattern(write_len, 7);
    let msg = pattern(send_len, 99);
    fill(&mut net.a, sa.key, 0, &data);
    fill(&mut net.a, sa.key, write_len, &msg);
    let recv = RecvWr::new(
        5,
        vec![Sge {
            addr: VA + 32 * 1024,
            length: 16 * 1024,
            lkey: sb.key,
        }],
    );
    net.b.engine_mut().post_recv(sb.qpn, recv).unwrap();
    let write = write_wr(sa, sb, write_len as u32);
    let send = SendWr::new(
        2,
        SendOp::Send,
        vec![Sge {
            addr: VA + write_len as u64,
            length: send_len as u32,
            lkey: sa.key,
        }],
    );
    net.a.engine_mut().post_send(sa.qpn, write).unwrap();
    net.a.engine_mut().post_send(sa.qpn, send).unwrap();
    let (wa, wb) = run_for(net, (sa.cq, 2), (sb.cq, 1));
    assert!(wa.iter().all(|w| w.status == WcStatus::Success), "{wa:?}");
    assert_eq!(
        (wa[0].opcode, wa[1].opcode),
        (WcOpcode::RdmaWrite, WcOpcode::Send)
    );
    assert_eq!(
        (wb[0].status, wb[0].opcode),
        (WcStatus::Success, WcOpcode::Recv)
    );
    assert_eq!(wb[0].byte_len as usize, send_len);
    assert_eq!(
        &region(&net.b, sb.key)[..write_len],
        &data[..],
        "WRITE bytes"
    );
    let at = 32 * 1024;
    assert_eq!(
        &region(&net.b, sb.key)[at..at + send_len],
        &msg[..],
        "SEND bytes"
    );
}

#[test]
fn arp_then_rc_write_and_send() {
    let mut net = v4_net();
    let (sa, sb) = connect_pair(&mut net, QpType::Rc, 1);
    write_then_send(&mut net, sa, sb, 10_000, 3000);
    for host in [&net.a, &net.b] {
        let s = host.stats();
        assert_eq!(s.drops.total(), 0, "{s:?}");
        assert_eq!(s.resolution_sent, 1, "one ARP request or one reply: {s:?}");
        assert_eq!(s.resolution_received, 1, "{s:?}");
    }
    assert_eq!(net.a.neighbour("10.0.0.2".parse().unwrap()), Some(MAC_B));
    assert_eq!(net.b.neighbour("10.0.0.1".parse().unwrap()), Some(MAC_A));
    // 10 WRITE packets and 3 SEND packets at MTU 1024, besides ARP.
    assert_eq!(net.a.stats().roce_sent, 13);
}

/// An ARP reply nobody asked for, from anyone on the link, neither creates an entry nor
/// moves a resolved peer to another MAC; a request for us names its asker's MAC only if we
/// knew none (issue 14: the cache took every reply and never forgot).
#[test]
fn unsolicited_arp_replies_do_not_poison_the_cache() {
    use super::resolve::{arp_reply, arp_request};
    let mut net = v4_net();
    let (sa, sb) = connect_pair(&mut net, QpType::Rc, 1);
    write_then_send(&mut net, sa, sb, 1000, 100);
    let evil = [2, 0, 0, 0, 0, 0xee];
    let ours = "10.0.0.1".parse().unwrap();
    let (peer, stranger) = ("10.0.0.2".parse().unwrap(), "10.0.0.9".parse().unwrap());
    let now = Instant::ZERO;
    for claimed in [peer, stranger] {
        net.a
            .handle_frame(now, &arp_reply(evil, claimed, MAC_A, ours));
        net.a.handle_frame(now, &arp_request(evil, claimed, ours));
    }
    let a = &net.a;
    assert_eq!(a.neighbour(IpAddr::V4(peer)), Some(MAC_B));
    assert_eq!(
        a.neighbour(IpAddr::V4(stranger)),
        Some(evil),
        "a new asker is answered"
    );
    assert_eq!(a.stats().resolution_refused, 3, "{:?}", a.stats());
    write_then_send(&mut net, sa, sb, 1000, 100);
}

#[test]
fn ipv6_global_and_link_local_with_neighbour_discovery() {
    for gid_index in [1, 0] {
        let mut net = net(
            MemoryLinkConfig::default(),
            &["fd00:77::1/64"],
            &["fd00:77::2/64"],
        );
        let (sa, sb) = connect_pair(&mut net, QpType::Rc, gid_index);
        write_then_send(&mut net, sa, sb, 5000, 100);
        assert_eq!(net.a.stats().drops.total(), 0, "{:?}", net.a.stats());
        assert_eq!(net.b.stats().drops.total(), 0, "{:?}", net.b.stats());
        assert_eq!(net.b.stats().resolution_sent, 1, "one advertisement");
    }
}

#[test]
fn rc_survives_loss() {
    let lossy = FaultConfig {
        loss: 0.05,
        ..FaultConfig::default()
    };
    let link = MemoryLinkConfig {
        a_to_b: lossy,
        b_to_a: lossy,
        seed: 42,
        ..MemoryLinkConfig::default()
    };
    let mut net = net(link, &["10.0.0.1/24"], &["10.0.0.2/24"]);
    let (sa, sb) = connect_pair(&mut net, QpType::Rc, 1);
    write_then_send(&mut net, sa, sb, 30_000, 2000);
    assert!(net.a.engine().stats().retransmitted_packets > 0);
}

/// Posts a receive on b and a UD SEND of `len` bytes from the start of a's region.
fn ud_send(net: &mut VirtualNet, sa: Side, sb: Side, len: u32, qkey: u32) {
    let sge = |lkey, length| {
        vec![Sge {
            addr: VA,
            length,
            lkey,
        }]
    };
    let recv = RecvWr::new(9, sge(sb.key, 2048));
    net.b.engine_mut().post_recv(sb.qpn, recv).unwrap();
    let mut send = SendWr::new(1, SendOp::Send, sge(sa.key, len));
    send.ud = Some(UdDest::new(
        net.b.gids().get(1).unwrap().addr(),
        sb.qpn,
        qkey,
    ));
    net.a.engine_mut().post_send(sa.qpn, send).unwrap();
}

#[test]
fn uc_write_and_ud_send() {
    let mut net = v4_net();
    let (sa, sb) = connect_pair(&mut net, QpType::Uc, 1);
    write_then_send(&mut net, sa, sb, 4000, 500);

    let mut net = v4_net();
    let (sa, sb) = connect_pair(&mut net, QpType::Ud, 1);
    let msg = pattern(900, 3);
    fill(&mut net.a, sa.key, 0, &msg);
    ud_send(&mut net, sa, sb, 900, 0x1111_1111);
    let (_, wb) = run_for(&mut net, (sa.cq, 1), (sb.cq, 1));
    assert_eq!(wb[0].status, WcStatus::Success);
    assert_eq!(wb[0].byte_len, 940, "GRH area and payload");
    assert_eq!(wb[0].src_addr, Some("10.0.0.1".parse().unwrap()));
    assert_eq!(&region(&net.b, sb.key)[40..940], &msg[..]);
}

/// Annex A17.4.5.2: a UD receive's first 40 bytes hold the IP header as it arrived: IPv6
/// whole, IPv4 in the second 20 bytes after 20 zero bytes (as rxe fills them).
#[test]
fn a_ud_receive_gets_the_ip_header_in_its_grh_area() {
    for (a, b) in [
        ("10.0.0.1/24", "10.0.0.2/24"),
        ("fd00:77::1/64", "fd00:77::2/64"),
    ] {
        let mut net = net(MemoryLinkConfig::default(), &[a], &[b]);
        let (sa, sb) = connect_pair(&mut net, QpType::Ud, 1);
        ud_send(&mut net, sa, sb, 100, 0x1111_1111);
        let (_, wb) = run_for(&mut net, (sa.cq, 1), (sb.cq, 1));
        assert_eq!((wb[0].status, wb[0].byte_len), (WcStatus::Success, 140));
        let area = &region(&net.b, sb.key)[..40];
        // UDP, BTH, DETH, 100 bytes and the ICRC.
        let ip_payload = 8 + 12 + 8 + 100 + 4;
        let gid = |h: &Host| h.gids().get(1).unwrap().addr();
        match (gid(&net.a), gid(&net.b)) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                assert_eq!(area[..20], [0; 20], "{a}");
                let h = &area[20..];
                assert_eq!((h[0], h[9]), (0x45, 17), "version 4, IHL 5, UDP");
                assert_eq!(
                    usize::from(u16::from_be_bytes([h[2], h[3]])),
                    20 + ip_payload
                );
                assert_eq!(
                    (&h[12..16], &h[16..20]),
                    (&src.octets()[..], &dst.octets()[..])
                );
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                assert_eq!(
                    (area[0] >> 4, area[6]),
                    (6, 17),
                    "version 6, next header UDP"
                );
                assert_eq!(
                    usize::from(u16::from_be_bytes([area[4], area[5]])),
                    ip_payload
                );
                assert_eq!(
                    (&area[8..24], &area[24..40]),
                    (&src.octets()[..], &dst.octets()[..])
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

/// An RC WRITE_ONLY frame from a to b, as a's host would send it.
fn write_frame(qpn: Qpn, pkey: PKey, payload: &[u8]) -> Vec<u8> {
    write_frame_at(qpn, pkey, Psn::new(2000), payload)
}

/// An RC RDMA_WRITE_ONLY from 10.0.0.1 to `qpn` at 10.0.0.2 with rkey 0.
fn write_frame_at(qpn: Qpn, pkey: PKey, psn: Psn, payload: &[u8]) -> Vec<u8> {
    write_frame_ipv4(qpn, pkey, psn, payload, |_| {})
}

/// [`write_frame_at`] with its IPv4 header changed by `edit` before it is built (checksum
/// and ICRC then agree with the change).
fn write_frame_ipv4(
    qpn: Qpn,
    pkey: PKey,
    psn: Psn,
    payload: &[u8],
    edit: impl for<'x> FnOnce(&mut Ipv4Repr<'x>),
) -> Vec<u8> {
    let mut bth = BthRepr::new(Opcode(0x0a), qpn, psn);
    bth.pkey = pkey;
    bth.ack_req = true;
    let ext = ExtHeaders {
        reth: Some(RethRepr {
            va: VA,
            rkey: 0,
            dma_len: payload.len() as u32,
        }),
        ..ExtHeaders::default()
    };
    let ib = IbPacketRepr::new(bth, ext, payload);
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let b: IpAddr = "10.0.0.2".parse().unwrap();
    let mut repr = RoceRepr::rxe(MAC_A, MAC_B, a, b, Qpn::new(0x11), ib).unwrap();
    if let IpRepr::V4(h) = &mut repr.ip {
        edit(h);
    }
    repr.to_vec().unwrap()
}

#[test]
fn bad_frames_are_counted_drops() {
    let mut net = v4_net();
    let (_, sb) = connect_pair(&mut net, QpType::Rc, 1);
    let now = Instant::ZERO;
    let b = &mut net.b;
    let good = write_frame(sb.qpn, PKey::DEFAULT, &[1, 2, 3, 4]);

    let mut bad_icrc = good.clone();
    let n = bad_icrc.len();
    bad_icrc[n - 6] ^= 0xff;
    b.handle_frame(now, &bad_icrc);
    assert_eq!(b.stats().drops.bad_icrc, 1);

    b.handle_frame(
        now,
        &write_frame(Qpn::new(0x77), PKey::DEFAULT, &[1, 2, 3, 4]),
    );
    assert_eq!(b.stats().drops.unknown_qp, 1);

    b.handle_frame(now, &write_frame(sb.qpn, PKey(0x1234), &[1, 2, 3, 4]));
    assert_eq!(b.stats().drops.pkey_mismatch, 1);

    // Annex A17.3.4: IPv4 headers the annex does not allow, each with a valid ICRC.
    let mut bad_checksum = good.clone();
    bad_checksum[14 + field_at::IPV4_CHECKSUM] ^= 0x5a;
    let options = write_frame_ipv4(sb.qpn, PKey::DEFAULT, Psn::new(2000), &[1; 4], |h| {
        h.options = &[1, 1, 1, 0]; // NOP, NOP, NOP, end of options: IHL 6
    });
    let no_df = write_frame_ipv4(sb.qpn, PKey::DEFAULT, Psn::new(2000), &[1; 4], |h| {
        h.dont_fragment = false;
    });
    for (frame, why) in [
        (&bad_checksum, "the IPv4 header checksum is wrong"),
        (&options, "IPv4 options (IHL is not 5)"),
        (&no_df, "IPv4 DF is clear"),
    ] {
        let p = RocePacket::parse(frame).unwrap();
        assert!(p.icrc_ok(), "{why}");
        assert_eq!(p.ipv4_violation(), Some(why));
    }
    assert_eq!(RocePacket::parse(&good).unwrap().ipv4_violation(), None);
    for frame in [bad_checksum, options, no_df] {
        b.handle_frame(now, &frame);
    }
    assert_eq!(b.stats().drops.bad_ip_header, 3);

    let mut other_mac = good.clone();
    other_mac[..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
    b.handle_frame(now, &other_mac);
    let mut other_ip = good.clone();
    other_ip[14 + 19] = 77;
    b.handle_frame(now, &other_ip);
    assert_eq!(b.stats().drops.not_for_us, 2);

    let mut tcp = good.clone();
    tcp[14 + 9] = 6;
    b.handle_frame(now, &tcp);
    let mut arp_other = super::resolve::arp_request(MAC_A, [10, 0, 0, 1].into(), [1; 4].into());
    arp_other[16..18].copy_from_slice(&[0x86, 0xdd]);
    b.handle_frame(now, &arp_other);
    assert_eq!(b.stats().drops.not_roce, 2);

    b.handle_frame(now, &good[..40]);
    b.handle_frame(now, &good[..3]);
    assert_eq!(b.stats().drops.malformed, 2);
    assert_eq!(
        b.stats().roce_received,
        2,
        "the unknown QP and the P_Key mismatch"
    );
    assert_eq!(b.stats().drops.total(), 12);
    assert_eq!(b.engine().stats().dropped, 2);
}

#[test]
fn an_invalid_rkey_is_answered_with_a_remote_access_error_nak() {
    let mut net = v4_net();
    let (_, sb) = connect_pair(&mut net, QpType::Rc, 1);
    net.b.add_neighbour("10.0.0.1".parse().unwrap(), MAC_A);
    // write_frame's RETH carries rkey 0, which no region of b has.
    assert_ne!(sb.key, 0);
    let psn = net.b.engine().expected_psn(sb.qpn).unwrap();
    let frame = write_frame_at(sb.qpn, PKey::DEFAULT, psn, &[1, 2, 3, 4]);
    net.b.handle_frame(Instant::ZERO, &frame);
    let (frame, _) = next_frame(&mut net.b);
    let nak = RocePacket::parse(&frame).unwrap();
    assert_eq!(nak.opcode(), Opcode(0x11), "RC ACKNOWLEDGE");
    let aeth = nak.ext().aeth.expect("an AETH");
    assert_eq!(
        aeth.syndrome.to_byte(),
        0x62,
        "NAK, remote access error (IBA 9.7.5.2.4)"
    );
    assert_eq!(region(&net.b, sb.key)[..4], [0; 4], "nothing written");
}

#[test]
fn ud_qkey_mismatch_is_counted() {
    let mut net = v4_net();
    let (sa, sb) = connect_pair(&mut net, QpType::Ud, 1);
    ud_send(&mut net, sa, sb, 10, 0x2222);
    run_for(&mut net, (sa.cq, 1), (sb.cq, 0));
    net.run_until(Duration::from_millis(10), |_| false).unwrap();
    assert_eq!(net.b.stats().drops.qkey_mismatch, 1);
    assert!(completions(&mut net.b, sb.cq).is_empty());
}

#[test]
fn unanswered_resolution_drops_the_queued_frames() {
    let mut net = v4_net();
    let sa = setup(&mut net.a, QpType::Rc);
    let absent: IpAddr = "10.0.0.99".parse().unwrap();
    let mut path = QpPath::new(
        QpType::Rc,
        absent,
        Qpn::new(0x11),
        Psn::new(0),
        Psn::new(0),
        Mtu::M1024,
    );
    path.retry_cnt = 0;
    connect(net.a.engine_mut(), sa.qpn, &path).unwrap();
    let send = SendWr::new(
        1,
        SendOp::Send,
        vec![Sge {
            addr: VA,
            length: 100,
            lkey: sa.key,
        }],
    );
    net.a.engine_mut().post_send(sa.qpn, send).unwrap();
    net.run_until(Duration::from_secs(10), |_| false).unwrap();
    let s = net.a.stats();
    assert_eq!(s.resolution_sent, 3, "three ARP requests: {s:?}");
    assert!(s.drops.unresolved >= 1, "{s:?}");
    let b = net.b.stats();
    assert_eq!((b.resolution_received, b.resolution_sent), (3, 0), "{b:?}");
    assert_eq!(
        net.b.neighbour("10.0.0.1".parse().unwrap()),
        None,
        "not asked for b"
    );
    assert!(
        !net.a.resolve(Instant::ZERO, "192.168.1.1".parse().unwrap()),
        "no route"
    );
}

/// Records CNPs and answers every CE mark with one, to exercise the seam.
#[derive(Debug, Default, Clone)]
struct Recorder(Arc<Mutex<(u32, u32)>>);

impl CongestionHook for Recorder {
    fn on_cnp(&mut self, _now: Instant, _qpn: Qpn) {
        self.0.lock().unwrap().0 += 1;
    }
    fn on_congestion_experienced(&mut self, _now: Instant, _qpn: Qpn) -> bool {
        self.0.lock().unwrap().1 += 1;
        true
    }
}

#[test]
fn ce_marks_become_cnps_through_the_congestion_seam() {
    let marking = FaultConfig {
        ce_mark: CeMarking::Probability(1.0),
        ..FaultConfig::default()
    };
    let link = MemoryLinkConfig {
        a_to_b: marking,
        ..MemoryLinkConfig::default()
    };
    let mut a = config(&["10.0.0.1/24"]);
    a.ecn = Ecn::Ect0;
    let mut net = VirtualNet::new(link, a, config(&["10.0.0.2/24"])).unwrap();
    let (rec_a, rec_b) = (Recorder::default(), Recorder::default());
    net.a.set_congestion_control(Box::new(rec_a.clone()));
    net.b.set_congestion_control(Box::new(rec_b.clone()));
    let (sa, sb) = connect_pair(&mut net, QpType::Rc, 1);
    write_then_send(&mut net, sa, sb, 3000, 10);
    let marked = net.b.stats().ce_received;
    assert_eq!(marked, 4, "3 WRITE packets and the SEND");
    assert_eq!(rec_b.0.lock().unwrap().1, 4);
    assert_eq!(net.b.stats().cnps_sent, 4);
    assert_eq!(net.a.stats().cnps_received, 4);
    assert_eq!(rec_a.0.lock().unwrap().0, 4);
}

/// `frame` as a congested router leaves it: ECN CE, the IPv4 header checksum mended (the
/// ICRC does not cover the ECN bits).
fn ce_marked(mut frame: Vec<u8>) -> Vec<u8> {
    frame[14 + 1] |= Ecn::Ce.bits();
    set_ipv4_checksum(&mut frame[14..34]);
    frame
}

#[test]
fn marks_for_unknown_or_destroyed_qps_are_not_remembered() {
    let mut net = v4_net();
    let (hook_b, _) = DcqcnHook::new(DcqcnParams::paper(100e9)).unwrap();
    net.b.set_congestion_control(Box::new(hook_b));
    let (_, sb) = connect_pair(&mut net, QpType::Rc, 1);
    let now = Instant::ZERO;
    let b = &mut net.b;
    for qpn in 0x100..0x140 {
        b.handle_frame(
            now,
            &ce_marked(write_frame(Qpn::new(qpn), PKey::DEFAULT, &[1; 4])),
        );
    }
    assert_eq!(b.stats().drops.unknown_qp, 0x40);
    assert_eq!((b.stats().ce_received, b.marked_qps()), (0, 0));
    assert_eq!(
        b.stats().cnps_sent,
        0,
        "no CNP for a QP that does not exist"
    );

    b.handle_frame(now, &ce_marked(write_frame(sb.qpn, PKey::DEFAULT, &[1; 4])));
    assert_eq!((b.stats().ce_received, b.marked_qps()), (1, 1));
    b.destroy_qp(sb.qpn).unwrap();
    assert_eq!(b.marked_qps(), 0);
    assert!(b.engine().query_qp(sb.qpn).is_err());
}

fn marking_net() -> VirtualNet {
    let link = MemoryLinkConfig {
        a_to_b: FaultConfig {
            ce_mark: CeMarking::Probability(1.0),
            ..FaultConfig::default()
        },
        ..MemoryLinkConfig::default()
    };
    let mut a = config(&["10.0.0.1/24"]);
    a.ecn = Ecn::Ect0;
    VirtualNet::new(link, a, config(&["10.0.0.2/24"])).unwrap()
}

#[test]
fn marks_inside_the_cnp_interval_bring_one_deferred_cnp() {
    let mut net = marking_net();
    let params = DcqcnParams::paper(100e9);
    let (hook_a, monitor_a) = DcqcnHook::new(params).unwrap();
    let (hook_b, monitor_b) = DcqcnHook::new(params).unwrap();
    net.a.set_congestion_control(Box::new(hook_a));
    net.b.set_congestion_control(Box::new(hook_b));
    let (sa, sb) = connect_pair(&mut net, QpType::Rc, 1);
    // The link has no delay: all four packets arrive marked within the same 50 us.
    write_then_send(&mut net, sa, sb, 3000, 10);
    net.run_until(Duration::from_millis(1), |_| false).unwrap();
    assert_eq!(net.b.stats().ce_received, 4);
    assert_eq!(
        net.b.stats().cnps_sent,
        2,
        "one CNP at the first mark, one at the end of its interval for the other three"
    );
    assert_eq!(monitor_b.report().cnps_sent, 2);
    assert_eq!(net.a.stats().cnps_received, 2);
    assert_eq!(monitor_a.report().cnps_received, 2);
    assert_eq!(monitor_a.report().rate_cuts, 2);
}

/// Annex A17.9.3 (Figure 6): a CNP carries the P_Key of the marked packet it answers, the
/// first one at once and the one deferred to the end of the interval alike.
#[test]
fn a_cnp_carries_the_p_key_of_the_marked_packet() {
    let pkey = PKey(0x8123);
    let mut net = v4_net();
    let (hook_b, _) = DcqcnHook::new(DcqcnParams::paper(100e9)).unwrap();
    net.b.set_congestion_control(Box::new(hook_b));
    net.a.add_neighbour("10.0.0.2".parse().unwrap(), MAC_B);
    net.b.add_neighbour("10.0.0.1".parse().unwrap(), MAC_A);
    let (sa, sb) = (setup(&mut net.a, QpType::Rc), setup(&mut net.b, QpType::Rc));
    for (host, qpn, dest, dest_qp) in [
        (&mut net.a, sa.qpn, "10.0.0.2", sb.qpn),
        (&mut net.b, sb.qpn, "10.0.0.1", sa.qpn),
    ] {
        let path = QpPath::new(
            QpType::Rc,
            dest.parse().unwrap(),
            dest_qp,
            Psn::new(0),
            Psn::new(0),
            Mtu::M1024,
        );
        let mut init = ModifyQp::to(QpState::Init);
        init.access = Some(Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        init.pkey = Some(pkey);
        host.engine_mut().modify_qp(qpn, &init).unwrap();
        to_rts(host.engine_mut(), qpn, &path).unwrap();
    }
    net.a
        .engine_mut()
        .post_send(sa.qpn, write_wr(sa, sb, 3000))
        .unwrap();
    let mut cnps = Vec::new();
    let mut buf = vec![0; Host::max_frame_len()];
    let mut take = |b: &mut Host, now: Instant, cnps: &mut Vec<(Qpn, PKey, Psn)>| {
        while let Some(n) = b.poll_transmit(now, &mut buf) {
            let p = RocePacket::parse(&buf[..n]).expect("a RoCE frame");
            if p.opcode() == Opcode::CNP {
                assert!(p.icrc_ok());
                cnps.push((p.bth().dest_qp, p.bth().pkey, p.bth().psn));
            }
        }
    };
    for _ in 0..3 {
        let (frame, _) = next_frame(&mut net.a);
        assert_eq!(RocePacket::parse(&frame).unwrap().bth().pkey, pkey);
        net.b.handle_frame(Instant::ZERO, &ce_marked(frame));
    }
    take(&mut net.b, Instant::ZERO, &mut cnps);
    assert_eq!(cnps.len(), 1, "one CNP at the first mark");
    // The end of the notification interval (50 us), with whatever timers come before it.
    let end = Instant::ZERO + Duration::from_micros(100);
    let mut now = Instant::ZERO;
    while let Some(t) = net.b.poll_timeout(now).filter(|&t| t <= end) {
        now = t;
        net.b.handle_timeout(now);
        take(&mut net.b, now, &mut cnps);
    }
    assert_eq!(cnps, [(sa.qpn, pkey, Psn::new(0)); 2]);
}

#[test]
fn dcqcn_keeps_working_with_a_peer_that_ignores_and_never_sends_cnps() {
    // rdma_rxe neither sends nor reacts to CNPs: B plays it, with marking on the way to B.
    let mut net = marking_net();
    let (hook_a, monitor_a) = DcqcnHook::new(DcqcnParams::paper(100e9)).unwrap();
    net.a.set_congestion_control(Box::new(hook_a));
    let (sa, sb) = connect_pair(&mut net, QpType::Rc, 1);
    write_then_send(&mut net, sa, sb, 3000, 10);
    assert_eq!(net.b.stats().ce_received, 4);
    assert_eq!(net.b.stats().cnps_sent, 0);
    let r = monitor_a.report();
    assert_eq!((r.cnps_received, r.rate_cuts), (0, 0));
    assert_eq!(r.rate_bps, 100e9);
}

/// The next frame `host` sends, and its UDP source port.
fn next_frame(host: &mut Host) -> (Vec<u8>, u16) {
    let mut buf = vec![0; Host::max_frame_len()];
    let n = host
        .poll_transmit(Instant::ZERO, &mut buf)
        .expect("a frame");
    buf.truncate(n);
    let port = RocePacket::parse(&buf).unwrap().udp().src_port;
    (buf, port)
}

#[test]
fn udp_source_ports_are_rxe_s() {
    // RC and UC: rdma_get_udp_sport from both QPNs, the same port both ways.
    for qp_type in [QpType::Rc, QpType::Uc] {
        let mut net = v4_net();
        let (sa, sb) = connect_pair(&mut net, qp_type, 1);
        net.a.add_neighbour("10.0.0.2".parse().unwrap(), MAC_B);
        net.b.add_neighbour("10.0.0.1".parse().unwrap(), MAC_A);
        let expected = rxe_connected_udp_src_port(0, sa.qpn, sb.qpn);
        assert_ne!(
            expected,
            rxe_udp_src_port(sa.qpn),
            "the test tells them apart"
        );
        net.a
            .engine_mut()
            .post_send(sa.qpn, write_wr(sa, sb, 100))
            .unwrap();
        let (frame, port) = next_frame(&mut net.a);
        assert_eq!(port, expected, "{qp_type:?} request");
        net.b.handle_frame(Instant::ZERO, &frame);
        if qp_type == QpType::Rc {
            assert_eq!(next_frame(&mut net.b).1, expected, "RC acknowledgement");
        }
    }
    // UD: the port rxe derives from the sending QP alone.
    let mut net = v4_net();
    let (sa, sb) = connect_pair(&mut net, QpType::Ud, 1);
    net.a.add_neighbour("10.0.0.2".parse().unwrap(), MAC_B);
    ud_send(&mut net, sa, sb, 100, 0x1111_1111);
    assert_eq!(next_frame(&mut net.a).1, rxe_udp_src_port(sa.qpn));
}

/// `--tclass`: every RoCE frame the host sends carries its DSCP, beside its ECN field; ARP
/// carries no IP header to mark.
#[test]
fn roce_frames_carry_the_configured_dscp() {
    let mut a = config(&["10.0.0.1/24"]);
    a.dscp = 26;
    a.ecn = Ecn::Ect0;
    let mut net =
        VirtualNet::new(MemoryLinkConfig::default(), a, config(&["10.0.0.2/24"])).unwrap();
    net.a.add_neighbour("10.0.0.2".parse().unwrap(), MAC_B);
    let (sa, sb) = connect_pair(&mut net, QpType::Rc, 1);
    net.a
        .engine_mut()
        .post_send(sa.qpn, write_wr(sa, sb, 3000))
        .unwrap();
    let mut buf = vec![0; Host::max_frame_len()];
    let mut sent = 0;
    while let Some(n) = net.a.poll_transmit(net.now(), &mut buf) {
        let p = RocePacket::parse(&buf[..n]).expect("a RoCE frame");
        assert_eq!((p.ip().dscp(), p.ecn()), (26, Ecn::Ect0));
        assert!(p.icrc_ok(), "the ICRC masks the traffic class");
        sent += 1;
    }
    assert_eq!(sent, 3, "3 WRITE packets at MTU 1024");
}

/// A's host with DSCP 26, B's MAC known to it.
fn dscp26_net() -> VirtualNet {
    let mut a = config(&["10.0.0.1/24"]);
    a.dscp = 26;
    let mut net =
        VirtualNet::new(MemoryLinkConfig::default(), a, config(&["10.0.0.2/24"])).unwrap();
    net.a.add_neighbour("10.0.0.2".parse().unwrap(), MAC_B);
    net
}

/// The DSCP and TTL of the next RoCE frame A sends, whose ECN must be Not-ECT (congestion
/// control's) and whose ICRC must hold (it masks both fields).
fn next_dscp_and_ttl(net: &mut VirtualNet) -> (u8, u8) {
    let mut buf = vec![0; Host::max_frame_len()];
    let n = net.a.poll_transmit(net.now(), &mut buf).expect("a frame");
    let p = RocePacket::parse(&buf[..n]).expect("a RoCE frame");
    assert_eq!(p.ecn(), Ecn::NotEct, "ECN is congestion control's");
    assert!(p.icrc_ok(), "the ICRC masks DSCP and TTL");
    (p.ip().dscp(), p.ip().ttl())
}

/// Annex A17 CA17-4, CA17-9: a QP whose address vector gives a traffic class and hop limit
/// sends with that DSCP and TTL; one without keeps the host's DSCP and TTL 64.
#[test]
fn a_qps_address_vector_sets_its_dscp_and_ttl() {
    let mut net = dscp26_net();
    let (plain, plain_b) = connect_pair(&mut net, QpType::Rc, 1);
    let (sa, sb) = (setup(&mut net.a, QpType::Rc), setup(&mut net.b, QpType::Rc));
    let dest = net.b.gids().get(1).unwrap().addr();
    let mut path = QpPath::new(
        QpType::Rc,
        dest,
        sb.qpn,
        Psn::new(0),
        Psn::new(0),
        Mtu::M1024,
    );
    path.traffic_class = Some(46 << 2 | 0b11); // DSCP 46; the ECN bits are not taken
    path.hop_limit = 9;
    connect(net.a.engine_mut(), sa.qpn, &path).unwrap();
    assert_eq!(
        net.a.engine().query_qp(sa.qpn).unwrap().1.traffic_class,
        Some(46 << 2 | 0b11)
    );
    for (from, to, want) in [(plain, plain_b, (26, 64)), (sa, sb, (46, 9))] {
        net.a
            .engine_mut()
            .post_send(from.qpn, write_wr(from, to, 100))
            .unwrap();
        assert_eq!(next_dscp_and_ttl(&mut net), want);
    }
}

/// The same for UD, where the address vector is each work request's address handle: a UD
/// SEND whose handle gives a traffic class and hop limit goes out with that DSCP and TTL, one
/// without with the host's DSCP and TTL 64; and the receiver's answering handle
/// (`UdDest::reply_to`, `ibv_init_ah_from_wc`) takes the class it arrived with.
#[test]
fn a_ud_address_handle_sets_its_dscp_and_ttl() {
    let mut net = dscp26_net();
    let (sa, sb) = connect_pair(&mut net, QpType::Ud, 1);
    let to = net.b.gids().get(1).unwrap().addr();
    let mut with_class = UdDest::new(to, sb.qpn, 0x1111_1111);
    with_class.traffic_class = Some(46 << 2 | 0b11); // DSCP 46; the ECN bits are not taken
    with_class.hop_limit = 9;
    for (dest, want) in [
        (UdDest::new(to, sb.qpn, 0x1111_1111), (26, 64)),
        (with_class, (46, 9)),
    ] {
        let sge = vec![Sge {
            addr: VA,
            length: 100,
            lkey: sa.key,
        }];
        let mut send = SendWr::new(1, SendOp::Send, sge);
        send.ud = Some(dest);
        net.a.engine_mut().post_send(sa.qpn, send).unwrap();
        assert_eq!(next_dscp_and_ttl(&mut net), want);
    }
    // The second SEND again, received: B's answer goes back to A's QP with DSCP 46.
    let recv = RecvWr::new(
        9,
        vec![Sge {
            addr: VA,
            length: 2048,
            lkey: sb.key,
        }],
    );
    net.b.engine_mut().post_recv(sb.qpn, recv).unwrap();
    let mut send = SendWr::new(
        2,
        SendOp::Send,
        vec![Sge {
            addr: VA,
            length: 100,
            lkey: sa.key,
        }],
    );
    send.ud = Some(with_class);
    net.a.engine_mut().post_send(sa.qpn, send).unwrap();
    let (_, wb) = run_for(&mut net, (sa.cq, 1), (sb.cq, 1));
    assert_eq!(wb[0].status, WcStatus::Success);
    let reply = UdDest::reply_to(&region(&net.b, sb.key)[..40], sa.qpn, 0x1111_1111);
    let from = net.a.gids().get(1).unwrap().addr();
    assert_eq!(
        reply.map(|r| (r.addr, r.remote_qpn, r.traffic_class, r.hop_limit)),
        Some((from, sa.qpn, Some(46 << 2), 64))
    );
}

/// What B sends after one CE-marked WRITE from A, with `--tclass 104` (DSCP 26) and
/// `cnp_dscp` given: each frame's opcode, DSCP and ECN, decoded by our parser, its ICRC
/// checked.
fn answers_to_a_marked_write(cnp_dscp: Option<u8>) -> Vec<(&'static str, u8, Ecn)> {
    let mut a = config(&["10.0.0.1/24"]);
    a.ecn = Ecn::Ect0;
    let mut b = config(&["10.0.0.2/24"]);
    b.dscp = 26;
    b.cnp_dscp = cnp_dscp;
    let mut net = VirtualNet::new(MemoryLinkConfig::default(), a, b).unwrap();
    net.a.add_neighbour("10.0.0.2".parse().unwrap(), MAC_B);
    net.b.add_neighbour("10.0.0.1".parse().unwrap(), MAC_A);
    net.b.set_congestion_control(Box::new(Recorder::default()));
    let (sa, sb) = connect_pair(&mut net, QpType::Rc, 1);
    net.a
        .engine_mut()
        .post_send(sa.qpn, write_wr(sa, sb, 100))
        .unwrap();
    let (frame, _) = next_frame(&mut net.a);
    net.b.handle_frame(Instant::ZERO, &ce_marked(frame));
    let mut buf = vec![0; Host::max_frame_len()];
    let mut sent = Vec::new();
    while let Some(n) = net.b.poll_transmit(Instant::ZERO, &mut buf) {
        let p = RocePacket::parse(&buf[..n]).expect("a RoCE frame");
        assert!(p.icrc_ok(), "the ICRC masks DSCP and ECN");
        if p.opcode() == Opcode::CNP {
            assert!(p.bth().becn && p.bth().dest_qp == sa.qpn);
        }
        sent.push((p.opcode().name(), p.ip().dscp(), p.ecn()));
    }
    sent
}

/// `--cnp-dscp 48`: the CNP carries DSCP 48, not ECN-capable, its ICRC valid; the data
/// (the acknowledgement) keep the `--tclass` DSCP.
#[test]
fn cnps_carry_their_own_dscp_when_given_one() {
    assert_eq!(
        answers_to_a_marked_write(Some(48)),
        [
            ("CNP", 48, Ecn::NotEct),
            ("RC_ACKNOWLEDGE", 26, Ecn::NotEct)
        ]
    );
}

/// Unless told otherwise a CNP rides the class of the data it answers, as before the
/// option existed.
#[test]
fn cnps_ride_the_data_dscp_by_default() {
    assert_eq!(HostConfig::new([0; 6], Vec::new()).cnp_dscp, None);
    assert_eq!(
        answers_to_a_marked_write(None),
        [
            ("CNP", 26, Ecn::NotEct),
            ("RC_ACKNOWLEDGE", 26, Ecn::NotEct)
        ]
    );
}

/// Every frame both hosts of `net` send until `done` holds, each built by `poll_transmit`
/// into a buffer first filled with `junk`: a device that lends its transmit buffers (AF_XDP's
/// UMEM, `Device::transmit_built`) hands the builder whatever its last frame left there.
fn frames_built_over(
    net: &mut VirtualNet,
    junk: u8,
    mut done: impl FnMut(&mut VirtualNet) -> bool,
) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let end = net.now() + Duration::from_secs(30);
    while !done(net) {
        let now = net.now();
        let mut moved = false;
        for (host, dev) in [(&mut net.a, &mut net.dev_a), (&mut net.b, &mut net.dev_b)] {
            while dev.receive(&mut |f| host.handle_frame(now, f)).unwrap() {
                moved = true;
            }
            if host.poll_timeout(now).is_some_and(|t| t <= now) {
                host.handle_timeout(now);
            }
            loop {
                net.buf.fill(junk);
                let Some(n) = host.poll_transmit(now, &mut net.buf) else {
                    break;
                };
                frames.push(net.buf[..n].to_vec());
                dev.transmit(&net.buf[..n]).unwrap();
                moved = true;
            }
        }
        if !moved {
            let next = net
                .next_event()
                .filter(|&t| t <= end)
                .expect("traffic stalled");
            net.clock
                .advance_to(next.max(now + Duration::from_nanos(1)));
        }
    }
    frames
}

/// The frames a host builds depend on nothing its buffer held before: every byte is written
/// (ARP and neighbour discovery, RC WRITE, SEND, READ and its responses, ACKs, UD with its
/// DETH, over IPv4 and IPv6), so a
/// device lending a used buffer sends what the copy path sends, byte for byte.
#[test]
fn frames_do_not_depend_on_what_the_buffer_held() {
    let run = |junk: u8| {
        let mut rc = v4_net();
        let (sa, sb) = connect_pair(&mut rc, QpType::Rc, 1);
        fill(&mut rc.a, sa.key, 0, &pattern(LEN, 5));
        fill(&mut rc.b, sb.key, 0, &pattern(LEN, 9));
        let sge = |lkey, at: u64, length| {
            vec![Sge {
                addr: VA + at,
                length,
                lkey,
            }]
        };
        let recv = RecvWr::new(5, sge(sb.key, 32 * 1024, 16 * 1024));
        rc.b.engine_mut().post_recv(sb.qpn, recv).unwrap();
        let read = SendOp::Read {
            remote_addr: VA + 8192,
            rkey: sb.key,
        };
        let wrs = [
            write_wr(sa, sb, 5000),
            SendWr::new(2, SendOp::Send, sge(sa.key, 0, 1001)),
            SendWr::new(3, read, sge(sa.key, 40_000, 3333)),
        ];
        for wr in wrs {
            rc.a.engine_mut().post_send(sa.qpn, wr).unwrap();
        }
        let mut ud = v4_net();
        let (ua, ub) = connect_pair(&mut ud, QpType::Ud, 1);
        ud_send(&mut ud, ua, ub, 700, 0x1111_1111);
        let (mut na, mut nb) = (0, 0);
        let mut frames = frames_built_over(&mut rc, junk, |n| {
            na += completions(&mut n.a, sa.cq).len();
            nb += completions(&mut n.b, sb.cq).len();
            na == 3 && nb == 1
        });
        let mut got = 0;
        frames.extend(frames_built_over(&mut ud, junk, |n| {
            got += completions(&mut n.b, ub.cq).len();
            got == 1
        }));
        // IPv6: the packet moves up for the longer header.
        let mut v6 = net(
            MemoryLinkConfig::default(),
            &["fd00:77::1/64"],
            &["fd00:77::2/64"],
        );
        let (sa, sb) = connect_pair(&mut v6, QpType::Rc, 1);
        fill(&mut v6.a, sa.key, 0, &pattern(LEN, 3));
        let write = write_wr(sa, sb, 2500);
        v6.a.engine_mut().post_send(sa.qpn, write).unwrap();
        let mut done = 0;
        frames.extend(frames_built_over(&mut v6, junk, |n| {
            done += completions(&mut n.a, sa.cq).len();
            done == 1
        }));
        frames
    };
    let clean = run(0);
    assert!(clean.len() > 10, "{} frames", clean.len());
    for junk in [0xa5, 0xff] {
        assert_eq!(run(junk), clean, "frames built over 0x{junk:02x}");
    }
}
