//! The connection manager behind two hosts' QP1 over the in-memory link in virtual time:
//! real frames, ARP, loss; then traffic on the connected QPs, checked byte for byte.

use core::time::Duration;

use crate::endpoint::cm::*;
use crate::endpoint::host::{Host, HostConfig};
use crate::endpoint::virtual_net::VirtualNet;
use crate::fault::FaultConfig;
use crate::io::memory::{MAC_A, MAC_B, MemoryLinkConfig};
use crate::transport::{CqId, QpInit, RecvWr, SendOp, SendWr, Sge, UdDest, WcStatus};
use crate::wire::{DethRepr, PKey, RocePacket, RoceRepr, rxe_connected_udp_src_port};

const VA: u64 = 0x20_0000;
const LEN: usize = 8192;
const PORT: u16 = 7174;

fn net(loss_percent: f64, seed: u64) -> VirtualNet {
    let lossy = FaultConfig {
        loss: loss_percent / 100.0,
        ..FaultConfig::default()
    };
    let link = MemoryLinkConfig {
        a_to_b: lossy,
        b_to_a: lossy,
        seed,
        ..MemoryLinkConfig::default()
    };
    let config = |addr: &str| HostConfig::new([0; 6], vec![addr.parse().unwrap()]);
    VirtualNet::new(link, config("10.0.0.1/24"), config("10.0.0.2/24")).unwrap()
}

/// A QP, its CQ and the key of a region every remote operation may use.
type Endpoint = (Qpn, CqId, u32);

/// A QP, its CQ and a region every remote operation may use.
fn endpoint(host: &mut Host, qp_type: QpType) -> Endpoint {
    let e = host.engine_mut();
    let cq = e.create_cq(256);
    let qpn = e.create_qp(QpInit::new(qp_type, cq)).unwrap();
    let key = e.register_mr(VA, vec![0; LEN], Access::ALL).unwrap();
    (qpn, cq, key)
}

fn next_event(net: &mut VirtualNet, a_side: bool, limit: Duration) -> Option<CmEvent> {
    let mut got = None;
    net.run_until(limit, |n| {
        let host = if a_side { &mut n.a } else { &mut n.b };
        got = host.poll_cm_event();
        got.is_some()
    })
    .unwrap();
    got
}

/// A listens, B connects; A accepts telling B its region's key in the REP's private data (as
/// an application would). Returns each side's (QP, CQ, key), B's connection and the key B
/// learnt.
fn connected(net: &mut VirtualNet) -> (Endpoint, Endpoint, ConnId, u32) {
    connected_with(net, None)
}

/// As [`connected`], B asking for `traffic_class` (rdma_cm's TOS option).
fn connected_with(
    net: &mut VirtualNet,
    traffic_class: Option<u8>,
) -> (Endpoint, Endpoint, ConnId, u32) {
    let a = endpoint(&mut net.a, QpType::Rc);
    let b = endpoint(&mut net.b, QpType::Rc);
    net.a
        .cm_listen(ListenParams {
            port_space: PortSpace::Tcp,
            port: PORT,
            addr: None,
        })
        .unwrap();
    let now = net.now();
    let dest = "10.0.0.1".parse().unwrap();
    let mut params = ConnectParams::rc(dest, dest, PORT, b.0);
    params.traffic_class = traffic_class;
    let b_id = net.b.cm_connect(now, params).unwrap();
    let limit = Duration::from_secs(60);
    let Some(CmEvent::ConnectRequest { id, request }) = next_event(net, true, limit) else {
        panic!("no connect request");
    };
    assert_eq!(request.peer, "10.0.0.2".parse::<IpAddr>().unwrap());
    let mut accept = AcceptParams::new(a.0);
    accept.private_data = a.2.to_be_bytes().to_vec();
    let now = net.now();
    net.a.cm_accept(now, id, accept).unwrap();
    let Some(CmEvent::Established { private_data, .. }) = next_event(net, false, limit) else {
        panic!("B not established");
    };
    let rkey = u32::from_be_bytes(private_data[..4].try_into().unwrap());
    (a, b, b_id, rkey)
}

/// B writes `LEN` bytes into A's region with the key the REP carried, and A's region then
/// holds them.
fn write_and_check(net: &mut VirtualNet, a: Endpoint, b: Endpoint, rkey: u32) {
    let data: Vec<u8> = (0..LEN).map(|i| (i * 7 + 3) as u8).collect();
    net.b
        .engine_mut()
        .mr_mut(b.2)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&data);
    let wr = SendWr::new(
        9,
        SendOp::Write {
            remote_addr: VA,
            rkey,
        },
        vec![Sge {
            addr: VA,
            length: LEN as u32,
            lkey: b.2,
        }],
    );
    net.b.engine_mut().post_send(b.0, wr).unwrap();
    let mut wc = None;
    net.run_until(Duration::from_secs(60), |n| {
        wc = n.b.engine_mut().poll_completion(b.1);
        wc.is_some()
    })
    .unwrap();
    assert_eq!(wc.map(|w| w.status), Some(WcStatus::Success));
    assert_eq!(net.a.engine().mr(a.2).unwrap().bytes(), &data[..]);
}

/// The client's traffic class travels in the REQ; the server's QP takes it and the REQ's
/// hop limit into its address vector, as Linux's CM does, so both send with that DSCP.
#[test]
fn the_reqs_traffic_class_and_hop_limit_reach_both_qps() {
    for (asked, want) in [(None, None), (Some(0x68), Some(0x68))] {
        let mut net = net(0.0, 1);
        let (a, b, ..) = connected_with(&mut net, asked);
        for attrs in [
            net.a.engine().query_qp(a.0).unwrap().1,
            net.b.engine().query_qp(b.0).unwrap().1,
        ] {
            assert_eq!((attrs.traffic_class, attrs.hop_limit), (want, 64));
        }
    }
}

#[test]
fn connect_write_and_disconnect_between_two_hosts() {
    let mut net = net(0.0, 1);
    let (a, b, b_id, rkey) = connected(&mut net);
    assert!(matches!(
        next_event(&mut net, true, Duration::from_secs(1)),
        Some(CmEvent::Established { .. })
    ));
    write_and_check(&mut net, a, b, rkey);
    // The connection's RC frames leave both hosts from the port rxe derives from the
    // flow label rdma_cm chose (pcaps/rdma_cm_rping.pcap: 61904 from 0xab1fa).
    let label = net.b.cm().info(b_id).unwrap().flow_label;
    assert_ne!(label, 0);
    assert_eq!(net.b.engine().query_qp(b.0).unwrap().1.flow_label, label);
    assert_eq!(net.a.engine().query_qp(a.0).unwrap().1.flow_label, label);
    assert_eq!(rxe_connected_udp_src_port(0xab1fa, a.0, b.0), 61904);

    let now = net.now();
    net.b.cm_disconnect(now, b_id).unwrap();
    let limit = Duration::from_secs(5);
    assert!(matches!(
        next_event(&mut net, true, limit),
        Some(CmEvent::Disconnected { .. })
    ));
    assert!(matches!(
        next_event(&mut net, false, limit),
        Some(CmEvent::Disconnected { .. })
    ));
    assert_eq!(net.a.engine().query_qp(a.0).unwrap().0, QpState::Err);
    assert_eq!(net.b.engine().query_qp(b.0).unwrap().0, QpState::Err);
    let (a_cm, b_cm) = (net.a.cm().stats(), net.b.cm().stats());
    assert_eq!(
        (a_cm.mads_sent, b_cm.mads_sent),
        (2, 3),
        "REP, DREP; REQ, RTU, DREQ"
    );
    assert_eq!(a_cm.mads_received, 3);
}

#[test]
fn the_handshake_and_traffic_survive_thirty_percent_loss() {
    let mut retransmitted = 0;
    for seed in 1..=6 {
        let mut net = net(30.0, seed);
        let (a, b, _, rkey) = connected(&mut net);
        write_and_check(&mut net, a, b, rkey);
        retransmitted += net.a.cm().stats().retransmitted + net.b.cm().stats().retransmitted;
    }
    assert!(retransmitted > 0, "some MADs were lost and sent again");
}

#[test]
fn a_connection_to_a_closed_port_is_refused() {
    let mut net = net(0.0, 1);
    let (qpn, _, _) = endpoint(&mut net.b, QpType::Rc);
    let now = net.now();
    let dest = "10.0.0.1".parse().unwrap();
    let id = net
        .b
        .cm_connect(now, ConnectParams::rc(dest, dest, PORT, qpn))
        .unwrap();
    let event = next_event(&mut net, false, Duration::from_secs(5));
    assert!(
        matches!(event, Some(CmEvent::Rejected { id: got, reason: reject_reason::INVALID_SERVICE_ID, .. }) if got == id),
        "{event:?}"
    );
    let off_link = "192.168.9.9".parse().unwrap();
    assert!(matches!(
        net.b
            .cm_connect(now, ConnectParams::rc(off_link, off_link, PORT, qpn)),
        Err(crate::endpoint::host::HostCmError::NoRoute(_))
    ));
}

#[test]
fn sidr_then_ud_send() {
    let mut net = net(0.0, 3);
    let (qa, cqa, ka) = endpoint(&mut net.a, QpType::Ud);
    let (qb, _, kb) = endpoint(&mut net.b, QpType::Ud);
    for (host, qpn) in [(&mut net.a, qa), (&mut net.b, qb)] {
        let mut path = connect::QpPath::new(
            QpType::Ud,
            IpAddr::from([0, 0, 0, 0]),
            Qpn::new(0),
            Psn::new(0),
            Psn::new(0),
            Mtu::M1024,
        );
        path.qkey = RDMA_UDP_QKEY;
        connect::connect(host.engine_mut(), qpn, &path).unwrap();
    }
    let recv = RecvWr::new(
        1,
        vec![Sge {
            addr: VA,
            length: 1024,
            lkey: ka,
        }],
    );
    net.a.engine_mut().post_recv(qa, recv).unwrap();
    net.a
        .cm_listen(ListenParams {
            port_space: PortSpace::Udp,
            port: PORT,
            addr: None,
        })
        .unwrap();
    let now = net.now();
    let dest: IpAddr = "10.0.0.1".parse().unwrap();
    let params = SidrParams {
        dest,
        src: dest,
        port: PORT,
        private_data: Vec::new(),
        traffic_class: None,
    };
    net.b.cm_resolve(now, params).unwrap();
    let Some(CmEvent::SidrRequest { id, .. }) = next_event(&mut net, true, Duration::from_secs(5))
    else {
        panic!("no SIDR request")
    };
    let now = net.now();
    net.a
        .cm_sidr_reply(now, id, &SidrReply::new(qa, RDMA_UDP_QKEY))
        .unwrap();
    let Some(CmEvent::SidrResolved { qpn, qkey, .. }) =
        next_event(&mut net, false, Duration::from_secs(5))
    else {
        panic!("not resolved")
    };
    assert_eq!((qpn, qkey), (qa, RDMA_UDP_QKEY));
    let mut send = SendWr::new(
        2,
        SendOp::Send,
        vec![Sge {
            addr: VA,
            length: 100,
            lkey: kb,
        }],
    );
    send.ud = Some(UdDest::new(dest, qpn, qkey));
    net.b.engine_mut().post_send(qb, send).unwrap();
    let mut wc = None;
    net.run_until(Duration::from_secs(5), |n| {
        wc = n.a.engine_mut().poll_completion(cqa);
        wc.is_some()
    })
    .unwrap();
    assert_eq!(
        wc.map(|w| (w.status, w.byte_len)),
        Some((WcStatus::Success, 140))
    );
}

/// A MAD to QP1 of host B from 10.0.0.1, with the given Q_Key and P_Key.
fn gsi_frame(mad: &[u8], qkey: u32, pkey: PKey) -> Vec<u8> {
    let mut ib = crate::wire::mad::gsi_packet(Psn::new(0), pkey, mad);
    if let Some(deth) = &mut ib.ext.deth {
        deth.qkey = qkey;
    }
    let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    RoceRepr::rxe(MAC_A, MAC_B, a, b, Qpn::GSI, ib)
        .unwrap()
        .to_vec()
        .unwrap()
}

#[test]
fn the_gsi_takes_only_whole_mads_with_its_q_key_and_our_partition() {
    let mut net = net(0.0, 1);
    let dreq = DreqRepr::new(1, 2, Qpn::new(0x11));
    let mad = CmMadRepr::new(5, CmMessage::Dreq(dreq)).to_vec();
    let now = net.now();
    let b = &mut net.b;
    b.handle_frame(now, &gsi_frame(&mad, 0x1111_1111, PKey::DEFAULT));
    b.handle_frame(now, &gsi_frame(&mad, DethRepr::GSI_QKEY, PKey(0x8001)));
    b.handle_frame(
        now,
        &gsi_frame(&mad[..200], DethRepr::GSI_QKEY, PKey::DEFAULT),
    );
    let d = b.stats().drops;
    assert_eq!((d.qkey_mismatch, d.pkey_mismatch, d.malformed), (1, 1, 1));
    assert_eq!(b.cm().stats().mads_received, 0);
    // A limited member of the default partition is still in it; the DREQ for nothing gets
    // its DREP back to QP1 of the sender, as rxe sends MADs.
    b.handle_frame(now, &gsi_frame(&mad, DethRepr::GSI_QKEY, PKey(0x7fff)));
    assert_eq!(b.cm().stats().mads_received, 1);
    b.add_neighbour("10.0.0.1".parse().unwrap(), MAC_A);
    let mut buf = vec![0; Host::max_frame_len()];
    let n = b.poll_transmit(now, &mut buf).unwrap();
    let reply = RocePacket::parse(&buf[..n]).unwrap();
    let bth = reply.bth();
    assert_eq!(
        (bth.dest_qp, bth.psn, bth.ack_req),
        (Qpn::GSI, Psn::new(0), true)
    );
    let deth = reply.ext().deth.unwrap();
    assert_eq!((deth.qkey, deth.src_qp), (DethRepr::GSI_QKEY, Qpn::GSI));
    assert_eq!(reply.udp().src_port, 55410, "rxe's QP1 port");
    let drep = CmMadRepr::parse(reply.payload()).unwrap();
    assert_eq!(drep.header.transaction_id, 5);
    assert!(matches!(drep.message, CmMessage::Drep(_)));
}
