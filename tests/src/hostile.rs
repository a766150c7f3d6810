//! Captures shaped to cost an analyser the most per byte (issue 14), for the benchmarks that
//! show `roce analyze` stays linear on them and the tests that bound its memory:
//! - [`one_packet_flows`]: every frame a flow of its own (an RC SEND of no payload, 58 bytes,
//!   to another destination QP each time);
//! - [`cnp_flood`]: `n` requests from A to B on `n` QPs, then `n` CNPs from B to A on `n` other
//!   QPs: each CNP's flow looks for its reverse among A's unpaired flows;
//! - [`fat_flows`]: every flow five packets that make it take on all it can (five opcodes: a
//!   table of them; PSNs 300 apart: the whole window of seen PSNs), about 12 KB each;
//! - [`cm_flood`]: `n` rdma_cm REQs (UD to QP1) from one client, each with its own
//!   Communication ID, then a REP for each.
//!
//! Frames are built with the wire builder (lengths, checksums and ICRCs right), one
//! microsecond apart from `START_NS`.

use std::net::{IpAddr, Ipv4Addr};

use roce::wire::cm::{CmMadRepr, CmMessage, RepRepr, ReqRepr};
use roce::wire::{
    BthRepr, CnpRepr, DethRepr, ExtHeaders, IbPacketRepr, Opcode, PKey, Psn, Qpn, RoceRepr,
    Transport,
};

/// The first frame's time: some date in 2023, in nanoseconds since the epoch.
pub const START_NS: u64 = 1_700_000_000_000_000_000;
const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn frame(from_a: bool, src_qp: Qpn, ib: IbPacketRepr<'_>) -> Vec<u8> {
    let (src, dst, src_mac, dst_mac) = if from_a {
        (A, B, MAC_A, MAC_B)
    } else {
        (B, A, MAC_B, MAC_A)
    };
    RoceRepr::rxe(src_mac, dst_mac, src, dst, src_qp, ib)
        .and_then(|r| r.to_vec().ok())
        .unwrap_or_default()
}

fn timed(frames: impl Iterator<Item = Vec<u8>>) -> impl Iterator<Item = (u64, Vec<u8>)> {
    frames
        .enumerate()
        .map(|(i, f)| (START_NS + i as u64 * 1000, f))
}

/// QPN `i` of a range starting at 0x100 (24 bits, QP0 and QP1 avoided).
fn qpn(i: usize) -> Qpn {
    Qpn::new(0x100 + (i as u32 % 0xff_fe00))
}

fn send_only(dest: Qpn, psn: Psn) -> IbPacketRepr<'static> {
    rc_request(0x04, dest, psn)
}

/// An RC request of no payload and no header beyond the BTH.
fn rc_request(low: u8, dest: Qpn, psn: Psn) -> IbPacketRepr<'static> {
    let mut bth = BthRepr::new(Opcode::new(Transport::Rc, low), dest, psn);
    bth.pkey = PKey::DEFAULT;
    IbPacketRepr::new(bth, ExtHeaders::default(), &[])
}

/// `n` flows of one packet each, A to B.
pub fn one_packet_flows(n: usize) -> impl Iterator<Item = (u64, Vec<u8>)> {
    timed((0..n).map(|i| frame(true, qpn(i), send_only(qpn(i), Psn::new(i as u32)))))
}

/// `n` flows A to B of five packets each: SEND_FIRST, SEND_MIDDLE, RDMA_WRITE_MIDDLE,
/// RDMA_WRITE_LAST and SEND_LAST (only a BTH each), the last three 300 PSNs on.
pub fn fat_flows(n: usize) -> impl Iterator<Item = (u64, Vec<u8>)> {
    let packets = [(0x00, 0), (0x01, 1), (0x07, 300), (0x08, 301), (0x02, 302)];
    timed((0..n).flat_map(move |i| {
        packets
            .into_iter()
            .map(move |(low, psn)| frame(true, qpn(i), rc_request(low, qpn(i), Psn::new(psn))))
    }))
}

/// `n` requests A to B on `n` QPs, then `n` CNPs B to A on `n` other QPs.
pub fn cnp_flood(n: usize) -> impl Iterator<Item = (u64, Vec<u8>)> {
    let requests = (0..n).map(|i| frame(true, qpn(i), send_only(qpn(i), Psn::new(7))));
    let cnps = (0..n).map(move |i| {
        let dest = qpn(n + i);
        let mut bth = BthRepr::new(Opcode::CNP, dest, Psn::new(0));
        bth.becn = true;
        bth.pkey = PKey::DEFAULT;
        let ext = ExtHeaders {
            cnp: Some(CnpRepr::default()),
            ..ExtHeaders::default()
        };
        frame(false, dest, IbPacketRepr::new(bth, ext, &[]))
    });
    timed(requests.chain(cnps))
}

/// A CM MAD in a UD SEND to QP1 from `from_a`'s QP1 (Q_Key 0x80010000, IBA 12.11).
fn mad(from_a: bool, message: CmMessage, tid: u64) -> Vec<u8> {
    let mad = CmMadRepr::new(tid, message).to_vec();
    let mut bth = BthRepr::new(
        Opcode::new(Transport::Ud, 0x04),
        Qpn::GSI,
        Psn::new(tid as u32),
    );
    bth.pkey = PKey::DEFAULT;
    let ext = ExtHeaders {
        deth: Some(DethRepr {
            qkey: 0x8001_0000,
            resv: 0,
            src_qp: Qpn::GSI,
        }),
        ..ExtHeaders::default()
    };
    frame(from_a, Qpn::GSI, IbPacketRepr::new(bth, ext, &mad))
}

/// `n` REQs from A to B, each with its own Communication ID and QP, then a REP for each.
pub fn cm_flood(n: usize) -> impl Iterator<Item = (u64, Vec<u8>)> {
    let reqs = (0..n).map(|i| {
        let mut req = ReqRepr::zeroed();
        req.local_comm_id = 0x1000 + i as u32;
        req.local_qpn = qpn(i);
        req.starting_psn = Psn::new(i as u32);
        mad(true, CmMessage::Req(req), i as u64)
    });
    let reps = (0..n).map(move |i| {
        use roce::wire::FixedHeader;
        let mut rep = RepRepr::parse_unchecked(&[0; roce::wire::mad::MAD_DATA_LEN]);
        rep.local_comm_id = 0x8000_0000 + i as u32;
        rep.remote_comm_id = 0x1000 + i as u32;
        rep.local_qpn = qpn(n + i);
        mad(false, CmMessage::Rep(rep), i as u64)
    });
    timed(reqs.chain(reps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce::wire::RocePacket;

    #[test]
    fn every_frame_is_roce_and_the_shapes_are_what_they_say() {
        let flows: Vec<_> = one_packet_flows(3).collect();
        assert_eq!(flows[0].1.len(), 58, "the smallest RoCEv2 frame");
        let more: Vec<_> = cnp_flood(2).chain(fat_flows(2)).collect();
        assert_eq!(more.len(), 4 + 10);
        for (_, f) in flows.iter().chain(&more) {
            let p = RocePacket::parse(f).unwrap();
            assert!(p.icrc_ok());
        }
        let cm: Vec<_> = cm_flood(2).collect();
        assert_eq!(cm.len(), 4);
        let p = RocePacket::parse(&cm[0].1).unwrap();
        let m = roce::analysis::cm::CmMessage::parse(p.payload()).unwrap();
        assert_eq!((m.local_comm_id, m.qpn), (0x1000, Some(qpn(0))));
    }
}
