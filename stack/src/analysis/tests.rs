//! Scenarios built packet by packet with the wire builder, each checking what the analysis
//! must conclude from it.

use core::net::IpAddr;

use super::report::{FlowReport, LossCause, MessageKind, Signal, Trigger};
use super::*;
use crate::capture::{Frame, Link};
use crate::wire::opcode::op;
use crate::wire::{
    AethRepr, BthRepr, ExtHeaders, IbPacketRepr, Msn, NakCode, RnrTimer, RoceRepr, Syndrome,
};

mod limits;

#[derive(Debug, Clone, Copy)]
struct Host {
    ip: IpAddr,
    qpn: Qpn,
}

fn host(last: u8, qpn: u32) -> Host {
    Host {
        ip: IpAddr::from([10, 0, 0, last]),
        qpn: Qpn::new(qpn),
    }
}

/// Frames of a scenario with their times, fed to an analyser at the end.
#[derive(Default)]
struct Scenario {
    frames: Vec<(u64, Vec<u8>)>,
    now: u64,
}

impl Scenario {
    /// Advances the clock by `us` microseconds.
    fn wait(&mut self, us: u64) -> &mut Self {
        self.now += us * 1000;
        self
    }

    /// Adds a frame at the time reached: `payload` in a packet of `opcode` and `psn` from
    /// `from` to `to`, its AETH `aeth`, its headers then changed by `adjust`.
    #[allow(clippy::too_many_arguments)]
    fn send_with(
        &mut self,
        from: Host,
        to: Host,
        opcode: Opcode,
        psn: u32,
        aeth: Option<Syndrome>,
        payload: &[u8],
        adjust: impl FnOnce(&mut RoceRepr<'_>),
    ) -> &mut Self {
        let (mut ext, _) = ExtHeaders::parse(opcode, &[0u8; 64]).unwrap();
        if let (Some(a), Some(s)) = (&mut ext.aeth, aeth) {
            *a = AethRepr {
                syndrome: s,
                msn: Msn::new(psn),
            };
        }
        if let Some(d) = &mut ext.deth {
            d.src_qp = from.qpn;
        }
        let ib = IbPacketRepr::new(BthRepr::new(opcode, to.qpn, Psn::new(psn)), ext, payload);
        let mac = [0x52, 0x54, 0, 0, 0, 1];
        let mut repr = RoceRepr::rxe(mac, mac, from.ip, to.ip, from.qpn, ib).unwrap();
        adjust(&mut repr);
        self.frames.push((self.now, repr.to_vec().unwrap()));
        self
    }

    fn send(
        &mut self,
        from: Host,
        to: Host,
        low: u8,
        psn: u32,
        aeth: Option<Syndrome>,
        len: usize,
    ) -> &mut Self {
        self.send_with(from, to, Opcode(low), psn, aeth, &vec![0x5a; len], |_| {})
    }

    fn ack(&mut self, from: Host, to: Host, psn: u32) -> &mut Self {
        self.send(
            from,
            to,
            op::ACKNOWLEDGE,
            psn,
            Some(Syndrome::Ack { credits: 31 }),
            0,
        )
    }

    /// A 1024-byte READ response (`low`: FIRST, MIDDLE, LAST or ONLY) at `psn`, with an
    /// ACK in its AETH where the opcode has one.
    fn read_response(&mut self, from: Host, to: Host, low: u8, psn: u32) -> &mut Self {
        self.send(
            from,
            to,
            low,
            psn,
            Some(Syndrome::Ack { credits: 31 }),
            1024,
        )
    }

    /// A READ request at `psn` for `len` bytes (its RETH's DMA length).
    fn read(&mut self, from: Host, to: Host, psn: u32, len: u32) -> &mut Self {
        let opcode = Opcode(op::RDMA_READ_REQUEST);
        self.send_with(from, to, opcode, psn, None, &[], |r| {
            if let Some(reth) = &mut r.ib.ext.reth {
                reth.dma_len = len;
            }
        })
    }

    fn write(
        &mut self,
        from: Host,
        to: Host,
        psns: impl IntoIterator<Item = u32>,
        first: u32,
        last: u32,
    ) -> &mut Self {
        for p in psns {
            let low = match (p == first, p == last) {
                (true, true) => op::RDMA_WRITE_ONLY,
                (true, false) => op::RDMA_WRITE_FIRST,
                (false, true) => op::RDMA_WRITE_LAST,
                (false, false) => op::RDMA_WRITE_MIDDLE,
            };
            self.send(from, to, low, p, None, 1024).wait(1);
        }
        self
    }

    fn analyse(&self) -> Report {
        let mut a = Analyzer::new();
        self.feed(&mut a);
        a.report()
    }

    /// Feeds every frame to `a`.
    fn feed(&self, a: &mut Analyzer) {
        for (i, (ts, data)) in self.frames.iter().enumerate() {
            a.frame(&Frame::whole(i as u64, *ts, Link::Ethernet, data));
        }
    }
}

fn flow(r: &Report, from: Host, to: Host) -> &FlowReport {
    r.flows
        .iter()
        .find(|f| f.src == from.ip && f.dst == to.ip && f.dest_qp == to.qpn)
        .expect("flow present")
}

/// Payload bytes the flow delivered, all buckets together.
fn goodput(f: &FlowReport) -> u64 {
    f.goodput.iter().sum()
}

fn count(list: &[(&'static str, u64)], name: &str) -> u64 {
    list.iter().find(|(n, _)| *n == name).map_or(0, |(_, c)| *c)
}

#[test]
fn pingpong_pairs_flows_and_measures_rtt() {
    let (a, b) = (host(1, 0x11), host(2, 0x11));
    let mut s = Scenario::default();
    for i in 0..5 {
        s.send(a, b, op::SEND_ONLY, 100 + i, None, 64).wait(30);
        s.ack(b, a, 100 + i).wait(5);
        s.send(b, a, op::SEND_ONLY, 900 + i, None, 64).wait(40);
        s.ack(a, b, 900 + i).wait(5);
    }
    let r = s.analyse();
    assert_eq!((r.packets, r.roce_packets, r.icrc_errors), (20, 20, 0));
    assert_eq!(r.flows.len(), 2);
    let ab = flow(&r, a, b);
    assert_eq!(ab.packets, 10);
    assert_eq!(count(&ab.opcodes, "RC_SEND_ONLY"), 5);
    assert_eq!(count(&ab.opcodes, "RC_ACKNOWLEDGE"), 5);
    assert_eq!(ab.retransmitted_packets, 0);
    assert_eq!(ab.payload_bytes, 5 * 64);
    assert_eq!(ab.reverse, Some(1));
    let req = ab.requester.as_ref().unwrap();
    assert_eq!(req.messages, vec![(MessageKind::Send, 5)]);
    assert_eq!(req.messages_acknowledged, 5);
    let rtt = req.rtt.unwrap();
    assert_eq!(rtt.samples, 5);
    assert_eq!(rtt.min_ns, 30_000);
    assert!((28_000..=32_000).contains(&rtt.median_ns), "{rtt:?}");
    let ba = flow(&r, b, a).requester.as_ref().unwrap().rtt.unwrap();
    assert!((38_000..=42_000).contains(&ba.median_ns), "{ba:?}");
    assert_eq!(req.episodes, 0);
    assert_eq!(goodput(ab), 5 * 64);
}

/// A WRITE of PSNs 0..=7 whose PSN 3 is lost; `seen` says whether the capture saw it.
fn lost_write(seen: bool) -> Report {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    let first: Vec<u32> = (0..8).filter(|&p| seen || p != 3).collect();
    s.write(a, b, first, 0, 7).wait(20);
    s.send(
        b,
        a,
        op::ACKNOWLEDGE,
        3,
        Some(Syndrome::Nak(NakCode::PsnSequenceError)),
        0,
    )
    .wait(10);
    s.write(a, b, 3..8, 0, 7).wait(20);
    s.ack(b, a, 7);
    s.analyse()
}

#[test]
fn go_back_n_after_a_loss_before_the_capture_point() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let r = lost_write(false);
    let ab = flow(&r, a, b);
    assert_eq!(
        ab.retransmitted_packets, 4,
        "4..=7 were seen before; 3 was not"
    );
    let ba = flow(&r, b, a);
    assert_eq!(count(&ba.naks, "PSN_SEQUENCE_ERROR"), 1);
    let req = ab.requester.as_ref().unwrap();
    assert_eq!(req.nak_causes, vec![(LossCause::BeforeCapturePoint, 1)]);
    assert_eq!(req.nak_events[0].psn, Psn::new(3));
    assert_eq!(req.nak_events[0].request, Some(MessageKind::Write));
    assert_eq!((req.episodes, req.packets_resent), (1, 5));
    let e = req.episode_list[0];
    assert_eq!(e.first_psn, Psn::new(3));
    assert_eq!(e.trigger, Trigger::Nak(NakCode::PsnSequenceError));
    assert_eq!(e.packets_resent, 5);
    assert_eq!(e.start_ts - e.trigger_ts, 10_000);
    assert_eq!(e.time_to_recover_ns(), Some(10_000 + 5_000 + 20_000));
    assert_eq!(req.messages, vec![(MessageKind::Write, 1)]);
    assert_eq!(req.messages_acknowledged, 1);
    assert_eq!(req.rtt, None, "a resent message gives no RTT sample");
    assert_eq!(goodput(ab), 8 * 1024, "resent data is not goodput");
}

#[test]
fn a_nak_for_a_captured_packet_means_loss_after_the_capture_point() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let r = lost_write(true);
    let req = flow(&r, a, b).requester.clone().unwrap();
    assert_eq!(flow(&r, a, b).retransmitted_packets, 5);
    assert_eq!(req.nak_causes, vec![(LossCause::AfterCapturePoint, 1)]);
}

#[test]
fn rnr_nak_and_the_wait_before_the_retry() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    s.send(a, b, op::SEND_ONLY, 10, None, 64).wait(15);
    let rnr = Syndrome::RnrNak {
        timer: RnrTimer::new(14),
    };
    s.send(b, a, op::ACKNOWLEDGE, 10, Some(rnr), 0).wait(2000);
    s.send(a, b, op::SEND_ONLY, 10, None, 64).wait(15);
    s.ack(b, a, 10);
    let r = s.analyse();
    assert_eq!(flow(&r, b, a).rnr_naks, 1);
    assert!(flow(&r, b, a).naks.is_empty());
    let req = flow(&r, a, b).requester.clone().unwrap();
    let e = req.rnr_events[0];
    assert_eq!(
        (e.psn, e.min_wait_us, e.wait_ns),
        (Psn::new(10), 1280, Some(2_000_000))
    );
    assert_eq!(req.episode_list[0].trigger, Trigger::RnrNak);
    assert!(req.episode_list[0].recovered_ts.is_some());
}

#[test]
fn a_read_response_out_of_order_is_an_implied_nak() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    s.read(a, b, 20, 4 * 1024).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_FIRST, 20)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_MIDDLE, 21)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_LAST, 23)
        .wait(50);
    s.read(a, b, 22, 2 * 1024).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_FIRST, 22)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_LAST, 23)
        .wait(1);
    s.send(a, b, op::SEND_ONLY, 24, None, 8).wait(10);
    s.ack(b, a, 24);
    let r = s.analyse();
    let ab = flow(&r, a, b);
    assert_eq!(
        ab.retransmitted_packets, 0,
        "PSN 22 was never carried before"
    );
    let req = ab.requester.as_ref().unwrap();
    assert_eq!(req.implied_naks, 1);
    assert_eq!(req.implied_nak_events[0].expected, Psn::new(22));
    assert_eq!(req.implied_nak_events[0].got, Psn::new(23));
    assert_eq!(req.episodes, 1);
    let e = req.episode_list[0];
    assert_eq!(
        (e.trigger, e.first_psn),
        (Trigger::ImpliedNak, Psn::new(22))
    );
    assert_eq!(e.time_to_recover_ns(), Some(50_000 + 10_000 + 1_000));
    assert_eq!(
        req.messages,
        vec![(MessageKind::Send, 1), (MessageKind::Read, 1)]
    );
    assert_eq!(req.messages_acknowledged, 2, "the READ and the SEND");
    assert_eq!(
        req.rtt.unwrap().samples,
        2,
        "first READ response and the SEND's ACK"
    );
    let ba = flow(&r, b, a);
    assert_eq!(
        goodput(ba),
        4 * 1024,
        "the out-of-order response is not goodput"
    );
}

#[test]
fn a_resend_with_nothing_on_the_wire_is_a_timeout() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    s.send(a, b, op::SEND_ONLY, 30, None, 64).wait(67_000);
    s.send(a, b, op::SEND_ONLY, 30, None, 64).wait(20);
    s.ack(b, a, 30);
    let r = s.analyse();
    let req = flow(&r, a, b).requester.clone().unwrap();
    let e = req.episode_list[0];
    assert_eq!(e.trigger, Trigger::Unseen);
    assert_eq!(e.start_ts - e.trigger_ts, 67_000_000);
    assert_eq!(flow(&r, a, b).retransmitted_packets, 1);
}

#[test]
fn psn_tracking_crosses_the_wrap() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    let start = (1u32 << 24) - 3;
    for i in 0..6u32 {
        let psn = start.wrapping_add(i) & 0xff_ffff;
        s.send(a, b, op::SEND_ONLY, psn, None, 16).wait(5);
        s.ack(b, a, psn).wait(5);
    }
    let r = s.analyse();
    let ab = flow(&r, a, b);
    assert_eq!(ab.retransmitted_packets, 0);
    let req = ab.requester.as_ref().unwrap();
    assert_eq!((req.psn_wraps, req.highest_psn), (1, Some(Psn::new(2))));
    assert_eq!((req.episodes, req.messages_acknowledged), (0, 6));
}

#[test]
fn a_cnp_slows_the_marked_flow_and_the_change_is_measured() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    let mut psn = 0;
    for _ in 0..20 {
        s.send_with(
            a,
            b,
            Opcode(op::RDMA_WRITE_MIDDLE),
            psn,
            None,
            &[0; 1024],
            |r| {
                r.ip.set_ecn(if psn == 19 { Ecn::Ce } else { Ecn::Ect0 });
            },
        );
        s.wait(1);
        psn += 1;
    }
    s.send(b, a, 0x81, 0, None, 0);
    for _ in 0..20 {
        s.send(a, b, op::RDMA_WRITE_MIDDLE, psn, None, 1024).wait(4);
        psn += 1;
    }
    let r = s.analyse();
    assert_eq!(flow(&r, b, a).cnps, 1);
    let ab = flow(&r, a, b);
    assert_eq!(ab.ecn_ce, 1);
    let changes = &ab.rate_changes;
    assert_eq!(
        changes.len(),
        1,
        "the CNP came while the CE measurement ran: {changes:?}"
    );
    assert_eq!(changes[0].signal, Signal::EcnCe);
    assert_eq!(changes[0].gap_before_ns, 1000);
    assert!(changes[0].gap_after_ns > 3000, "{changes:?}");
}

#[test]
fn rdma_cm_ties_qps_that_psns_could_not() {
    let (cq, sq) = (host(1, 0x31), host(2, 0x42));
    let r = cm_scenario().analyse();
    assert_eq!(r.connections.len(), 1);
    let c = &r.connections[0];
    assert_eq!(c.state.name(), "ESTABLISHED");
    assert_eq!(
        (c.client_qpn, c.server_qpn),
        (Some(Qpn::new(0x31)), Some(Qpn::new(0x42)))
    );
    let to_server = r
        .flows
        .iter()
        .position(|f| f.src == cq.ip && f.dest_qp == sq.qpn)
        .unwrap();
    assert_eq!(flow(&r, sq, cq).reverse, Some(to_server));
    assert_eq!(
        flow(&r, cq, sq)
            .requester
            .as_ref()
            .unwrap()
            .messages_acknowledged,
        1
    );
}

/// An rdma_cm handshake between QP 0x31 of 10.0.0.1 and QP 0x42 of 10.0.0.2, then a SEND and
/// its ACK, with a busier QP of the client beside them that PSNs alone would pair instead.
fn cm_scenario() -> Scenario {
    let (client, server) = (host(1, 0x1), host(2, 0x1));
    let (cq, sq) = (host(1, 0x31), host(2, 0x42));
    let other = host(1, 0x77);
    let mut s = Scenario::default();
    let cm = |attr: u16, fields: &[(usize, &[u8])]| {
        let mut m = vec![0u8; 256];
        m[..4].copy_from_slice(&[1, 7, 2, 3]);
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        for (at, b) in fields {
            m[24 + at..24 + at + b.len()].copy_from_slice(b);
        }
        m
    };
    let req = cm(0x10, &[(0, &5u32.to_be_bytes()), (32, &[0, 0, 0x31])]);
    let rep = cm(
        0x13,
        &[
            (0, &6u32.to_be_bytes()),
            (4, &5u32.to_be_bytes()),
            (12, &[0, 0, 0x42]),
        ],
    );
    let rtu = cm(0x14, &[(0, &5u32.to_be_bytes()), (4, &6u32.to_be_bytes())]);
    for (from, to, mad) in [
        (client, server, &req),
        (server, client, &rep),
        (client, server, &rtu),
    ] {
        s.send_with(from, to, Opcode(0x64), 0, None, mad, |_| {});
        s.wait(100);
    }
    // A second, busier QP on the client: without CM it would win the pairing.
    for p in 0..5 {
        s.send(other, sq, op::SEND_ONLY, 7 + p, None, 8).wait(1);
    }
    s.send(cq, sq, op::SEND_ONLY, 7, None, 8).wait(10);
    s.ack(sq, cq, 7);
    s
}

/// Frames worked out ahead by `slice_ahead` (as `roce analyze`'s reading thread does) are
/// analysed as the analyser would have read them itself: the same report, with the rdma_cm
/// pairing read from the MADs' payloads, IPv6 addresses and an ICRC error.
#[test]
fn frames_sliced_ahead_are_analysed_as_frames_read_in_place() {
    let mut s = cm_scenario();
    let v6 = |last: u16, qpn: u32| Host {
        ip: IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 0, last]),
        qpn: Qpn::new(qpn),
    };
    let (a, b) = (v6(1, 0x21), v6(2, 0x22));
    s.send(a, b, op::SEND_ONLY, 1, None, 64).wait(1);
    s.ack(b, a, 1).wait(1);
    s.send(a, b, op::SEND_ONLY, 2, None, 64);
    let last = s.frames.len() - 1;
    s.frames[last].1[80] ^= 0xff; // a payload byte: the ICRC is wrong
    let mut analyzer = Analyzer::new();
    for (i, (ts, data)) in s.frames.iter().enumerate() {
        let frame = Frame::whole(i as u64, *ts, Link::Ethernet, data);
        let ahead = slice_ahead(&frame);
        assert!(ahead.is_some(), "frame {i} is whole RoCEv2");
        analyzer.frame_sliced(&frame, ahead);
    }
    let (got, want) = (analyzer.report(), s.analyse());
    assert_eq!(got, want);
    assert_eq!((want.connections.len(), want.icrc_errors), (1, 1));
    assert_eq!(flow(&want, a, b).packets, 2);
    // A frame cut by a snap length is left to the analyser.
    let whole = &s.frames[0].1;
    let cut = Frame {
        data: &whole[..58],
        orig_len: whole.len() as u32,
        ..Frame::whole(0, 0, Link::Ethernet, whole)
    };
    assert!(slice_ahead(&cut).is_none());
}

#[test]
fn icrc_errors_and_cut_frames_are_counted_and_analysed() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    s.send(a, b, op::SEND_ONLY, 1, None, 64).wait(1);
    s.send(a, b, op::SEND_ONLY, 2, None, 64).wait(1);
    let last = s.frames.len() - 1;
    s.frames[last].1[60] ^= 0xff;
    let mut r = Analyzer::new();
    s.feed(&mut r);
    let cut = &s.frames[0].1;
    let note = r.frame(&Frame {
        index: 2,
        timestamp_ns: 5000,
        link: Link::Ethernet,
        data: &cut[..58],
        orig_len: cut.len() as u32,
    });
    let Outcome::Roce(note) = note else {
        panic!("a cut frame's headers are still read: {note:?}");
    };
    assert_eq!(
        (note.icrc_ok, note.retransmitted, note.payload_len),
        (None, true, 64)
    );
    let rep = r.report();
    assert_eq!((rep.icrc_errors, rep.input.cut_frames), (1, 1));
    assert_eq!(flow(&rep, a, b).packets, 3);
    assert_eq!(flow(&rep, a, b).icrc_errors, 1);
}

/// Annex A17.3.4: packets whose IPv4 header a receiver drops are counted, whatever their
/// ICRC (the checksum is outside it, DF inside), and still followed.
#[test]
fn ipv4_headers_a_receiver_drops_are_counted() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    for psn in 1..=3 {
        s.send(a, b, op::SEND_ONLY, psn, None, 64).wait(1);
    }
    s.frames[1].1[14 + 10] ^= 0x5a; // the header checksum
    s.frames[2].1[14 + 6] &= !0x40; // DF
    let mut r = Analyzer::new();
    s.feed(&mut r);
    let rep = r.report();
    assert_eq!((rep.ip_header_errors, rep.icrc_errors), (2, 1));
    assert_eq!(flow(&rep, a, b).packets, 3);
}

#[test]
fn state_stays_bounded_however_many_episodes() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    for round in 0..200u32 {
        let base = round * 4;
        s.write(a, b, base..base + 4, base, base + 3);
        s.send(
            b,
            a,
            op::ACKNOWLEDGE,
            base + 1,
            Some(Syndrome::Nak(NakCode::PsnSequenceError)),
            0,
        );
        s.write(a, b, base + 1..base + 4, base, base + 3);
        s.ack(b, a, base + 3).wait(5);
    }
    let r = s.analyse();
    let req = flow(&r, a, b).requester.clone().unwrap();
    assert_eq!(req.episodes, 200);
    assert_eq!(req.episode_list.len(), requester::EVENTS_KEPT);
    assert_eq!(req.nak_events.len(), requester::EVENTS_KEPT);
    assert_eq!(flow(&r, a, b).retransmitted_packets, 600);
    assert_eq!(flow(&r, b, a).naks, vec![("PSN_SEQUENCE_ERROR", 200)]);
}

#[test]
fn an_ack_naming_a_read_or_atomic_is_counted() {
    // rping against rxe under loss: a WRITE and a READ answered; the requester sends both
    // again, and the ACK of the duplicate WRITE names the READ's PSN.
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    s.send(a, b, op::RDMA_WRITE_ONLY, 30, None, 64).wait(5);
    s.ack(b, a, 30).wait(1);
    s.read(a, b, 31, 2 * 1024).wait(5);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_FIRST, 31)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_LAST, 32)
        .wait(30);
    s.send(a, b, op::RDMA_WRITE_ONLY, 30, None, 64).wait(5);
    s.ack(b, a, 30).wait(1);
    s.ack(b, a, 32).wait(1);
    // A FETCH_ADD still waiting, and an ACK at its PSN instead of its atomic ACK.
    s.send(a, b, op::FETCH_ADD, 33, None, 0).wait(5);
    s.ack(b, a, 33);
    let r = s.analyse();
    let req = flow(&r, a, b).requester.clone().unwrap();
    let named: Vec<_> = req
        .ack_naming_read_events
        .iter()
        .map(|e| (e.psn.value(), e.request))
        .collect();
    assert_eq!(req.acks_naming_reads, 2);
    assert_eq!(
        named,
        vec![(32, MessageKind::Read), (33, MessageKind::Atomic)],
        "the ACKs at the WRITE's PSN name no READ"
    );
}

/// After the requester went back for a lost READ response, the rest of the READ the
/// responder had begun still comes, past the PSN expected: no new loss, no second implied
/// NAK (ib_read_bw at 2% loss counted 112 implied NAKs for 79 go-backs).
#[test]
fn the_rest_of_a_read_after_going_back_implies_no_second_nak() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    s.read(a, b, 20, 4 * 1024).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_FIRST, 20)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_MIDDLE, 22)
        .wait(5);
    s.read(a, b, 21, 3 * 1024).wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_LAST, 23)
        .wait(20);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_FIRST, 21)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_MIDDLE, 22)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_LAST, 23)
        .wait(1);
    // A second READ loses its first response: that is a new implied NAK.
    s.read(a, b, 24, 2 * 1024).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_LAST, 25);
    let r = s.analyse();
    let req = flow(&r, a, b).requester.clone().unwrap();
    let implied: Vec<_> = req
        .implied_nak_events
        .iter()
        .map(|e| (e.expected.value(), e.got.value()))
        .collect();
    assert_eq!(implied, vec![(21, 22), (24, 25)]);
    assert_eq!(req.implied_naks, 2);
    assert_eq!(req.episodes, 1);
    let e = req.episode_list[0];
    assert_eq!((e.trigger, e.first_psn.value()), (Trigger::ImpliedNak, 21));
    assert!(e.recovered_ts.is_some());
    assert_eq!(req.messages_acknowledged, 1);
    assert_eq!(
        goodput(flow(&r, b, a)),
        4 * 1024,
        "PSNs 20 to 23, each once: not the late 23, nor 22 or 25 out of order"
    );
}

/// Seen at the responder: a READ answered in full and then asked again (its responses were
/// lost past the capture point) carries its data once.
#[test]
fn a_read_asked_again_after_its_answer_is_goodput_once() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    for round in 0..2 {
        s.read(a, b, 30, 2 * 1024).wait(10);
        s.read_response(b, a, op::RDMA_READ_RESPONSE_FIRST, 30)
            .wait(1);
        s.read_response(b, a, op::RDMA_READ_RESPONSE_LAST, 31)
            .wait(100 * (1 - round));
    }
    let r = s.analyse();
    assert_eq!(flow(&r, a, b).retransmitted_packets, 1);
    assert_eq!(goodput(flow(&r, b, a)), 2 * 1024);
}

#[test]
fn atomics_are_answered_in_order_or_imply_a_nak() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let ack = Some(Syndrome::Ack { credits: 31 });
    let mut s = Scenario::default();
    s.send(a, b, op::COMPARE_SWAP, 40, None, 0).wait(7);
    s.send(b, a, op::ATOMIC_ACKNOWLEDGE, 40, ack, 0).wait(1);
    s.send(a, b, op::FETCH_ADD, 41, None, 0).wait(1);
    s.send(a, b, op::FETCH_ADD, 42, None, 0).wait(7);
    s.send(b, a, op::ATOMIC_ACKNOWLEDGE, 42, ack, 0).wait(30);
    s.send(a, b, op::FETCH_ADD, 41, None, 0).wait(7);
    s.send(b, a, op::ATOMIC_ACKNOWLEDGE, 41, ack, 0).wait(1);
    s.send(b, a, op::ATOMIC_ACKNOWLEDGE, 42, ack, 0);
    let r = s.analyse();
    let req = flow(&r, a, b).requester.clone().unwrap();
    assert_eq!(req.messages, vec![(MessageKind::Atomic, 3)]);
    assert_eq!(req.implied_naks, 1);
    assert_eq!(req.implied_nak_events[0].expected, Psn::new(41));
    assert_eq!(req.episode_list[0].trigger, Trigger::ImpliedNak);
    assert_eq!(req.messages_acknowledged, 3);
    assert_eq!(req.rtt.unwrap().min_ns, 7_000);
    assert_eq!(flow(&r, a, b).retransmitted_packets, 1);
}

#[test]
fn duplicate_acks_between_resends_do_not_split_the_episode() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    for p in 0..4 {
        s.send(a, b, op::SEND_ONLY, p, None, 8).wait(1);
    }
    s.ack(b, a, 3).wait(80_000);
    // The ACK was lost after the capture point: the requester times out and resends one by
    // one, and each resend draws the same ACK again.
    for p in 2..4 {
        s.send(a, b, op::SEND_ONLY, p, None, 8).wait(100);
        s.ack(b, a, 3).wait(100);
    }
    let r = s.analyse();
    let req = flow(&r, a, b).requester.clone().unwrap();
    assert_eq!((req.episodes, req.packets_resent), (1, 2));
    let e = req.episode_list[0];
    assert_eq!(
        (e.first_psn, e.packets_resent, e.trigger),
        (Psn::new(2), 2, Trigger::Unseen)
    );
    assert!(e.recovered_ts.is_some() && !e.interrupted);
}

#[test]
fn a_sequence_error_after_an_rnr_nak_is_no_loss() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let rnr = Syndrome::RnrNak {
        timer: RnrTimer::new(12),
    };
    let mut s = Scenario::default();
    s.send(a, b, op::SEND_ONLY, 5, None, 8).wait(1);
    s.send(a, b, op::SEND_ONLY, 6, None, 8).wait(5);
    s.send(b, a, op::ACKNOWLEDGE, 5, Some(rnr), 0).wait(1);
    s.send(
        b,
        a,
        op::ACKNOWLEDGE,
        5,
        Some(Syndrome::Nak(NakCode::PsnSequenceError)),
        0,
    )
    .wait(700);
    s.send(a, b, op::SEND_ONLY, 5, None, 8).wait(1);
    s.send(a, b, op::SEND_ONLY, 6, None, 8).wait(5);
    s.ack(b, a, 6);
    let r = s.analyse();
    let req = flow(&r, a, b).requester.clone().unwrap();
    assert_eq!(req.nak_causes, vec![(LossCause::RnrRefused, 1)]);
    assert_eq!(req.rnr_events[0].wait_ns, Some(701_000));
    assert_eq!(req.episodes, 1);
}

/// The last responses of a 4-packet READ are lost; the requester asks for the rest, at a PSN
/// inside the READ's span that no response has shown yet. That is a resend of the READ (its
/// DMA length over the path MTU, learnt from an earlier READ, says how far it reaches), not
/// a new READ: taken for one, it stood first in line for responses and every READ after it
/// counted as no new data (`ib_read_bw -a` at our side: 16.8 of 83.9 MB of goodput).
#[test]
fn asking_for_the_rest_of_a_read_after_a_tail_loss_is_a_resend() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    s.read(a, b, 1, 2048).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_FIRST, 1)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_LAST, 2)
        .wait(1);
    s.read(a, b, 3, 4096).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_FIRST, 3)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_MIDDLE, 4)
        .wait(500);
    // 5 and 6 lost; the requester's timer runs out.
    s.read(a, b, 5, 2048).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_FIRST, 5)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_LAST, 6)
        .wait(1);
    s.read(a, b, 7, 1024).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_ONLY, 7);
    let r = s.analyse();
    let req = flow(&r, a, b).requester.clone().unwrap();
    assert_eq!(req.messages, vec![(MessageKind::Read, 3)]);
    assert_eq!(req.episodes, 1);
    assert_eq!(req.episode_list[0].first_psn, Psn::new(5));
    assert_eq!(goodput(flow(&r, b, a)), 7 * 1024);
}

/// Seen at the responder: a READ request lost before the capture point shows only when the
/// requester sends it again, after the next one; its responses come before that one's. The
/// requester takes them: they are goodput.
#[test]
fn the_answer_to_a_read_first_seen_as_a_resend_is_goodput() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    s.read(a, b, 1, 1024).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_ONLY, 1)
        .wait(1);
    // The READ at 2 was lost before the capture point; the responder NAKs the one at 3.
    s.read(a, b, 3, 1024).wait(1);
    let nak = Some(Syndrome::Nak(NakCode::PsnSequenceError));
    s.send(b, a, op::ACKNOWLEDGE, 2, nak, 0).wait(10);
    s.read(a, b, 2, 1024).wait(1);
    s.read(a, b, 3, 1024).wait(10);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_ONLY, 2)
        .wait(1);
    s.read_response(b, a, op::RDMA_READ_RESPONSE_ONLY, 3);
    let r = s.analyse();
    assert_eq!(goodput(flow(&r, b, a)), 3 * 1024);
    let req = flow(&r, a, b).requester.clone().unwrap();
    assert_eq!(req.implied_naks, 0);
}
