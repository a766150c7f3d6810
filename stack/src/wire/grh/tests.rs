use super::*;
use crate::wire::icrc::tests::hex;
use crate::wire::opcode::{Opcode, op};
use crate::wire::{Psn, Qpn};

/// A RoCEv1 RC SEND_ONLY (QP 0x11, PSN 5, AckReq, FECN and BECN set) from fe80::1 to fe80::2,
/// TClass 0x2a, flow label 0x12345: GRH through pad.
const SEND_V1: &str = "62a1234500201b40fe800000000000000000000000000001fe80000000000000000000\
                       00000000020400ffffc0000011800000055a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";
/// Its ICRC, computed independently with Python's `zlib.crc32` over eight 0xFF bytes, the GRH
/// with TClass, FlowLabel and HopLmt as ones, and BTH byte 4 as ones (tests/scapy/run.sh
/// checks the same rule on whole frames with scapy's GRH dissection).
const SEND_V1_ICRC: u32 = 0x8988_e1c2;

fn frame(covered: &[u8], icrc: u32) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x89, 0x15];
    f.extend_from_slice(covered);
    f.extend_from_slice(&icrc.to_le_bytes());
    f
}

#[test]
fn the_icrc_matches_an_independent_computation() {
    let covered = hex(SEND_V1);
    assert_eq!(icrc::compute_roce_v1(&covered).unwrap(), SEND_V1_ICRC);
    // The masked fields do not change it; an unmasked one does.
    let mut other = covered.clone();
    other[1] ^= 0xf0; // TClass and flow label
    other[7] = 3; // HopLmt
    other[GrhRepr::LEN + 4] = 0; // FECN, BECN
    assert_eq!(icrc::compute_roce_v1(&other).unwrap(), SEND_V1_ICRC);
    other[GrhRepr::LEN + 11] ^= 1; // PSN
    assert_ne!(icrc::compute_roce_v1(&other).unwrap(), SEND_V1_ICRC);
    assert!(
        icrc::compute_roce_v1(&covered[..50]).is_err(),
        "no whole BTH"
    );
}

#[test]
fn a_frame_slices_and_rebuilds_byte_for_byte() {
    let f = frame(&hex(SEND_V1), SEND_V1_ICRC);
    let p = RoceV1Packet::parse(&f).unwrap();
    assert!(p.icrc_ok());
    let grh = p.grh();
    assert_eq!(
        (
            grh.traffic_class,
            grh.flow_label,
            grh.hop_limit,
            grh.payload_len
        ),
        (0x2a, 0x12345, 64, 32)
    );
    assert_eq!(grh.sgid_addr().to_string(), "fe80::1");
    assert_eq!(grh.dgid_addr().to_string(), "fe80::2");
    assert_eq!((grh.dscp(), grh.ecn()), (10, Ecn::Ect0));
    let bth = p.bth();
    assert_eq!(bth.opcode, Opcode(op::SEND_ONLY));
    assert_eq!((bth.dest_qp, bth.psn), (Qpn::new(0x11), Psn::new(5)));
    assert!(bth.fecn && bth.becn && bth.ack_req);
    assert_eq!(p.payload(), &[0x5a; 16]);
    assert_eq!(p.repr().to_vec().unwrap(), f);
    // RoCEv2's slicer leaves it alone, and says what it is and where its GRH starts.
    assert_eq!(
        crate::wire::RocePacket::parse(&f),
        Err(PacketError::NotRoce(NotRoce::RoceV1 {
            grh: 14,
            eth: *p.eth()
        }))
    );
}

#[test]
fn a_tagged_frame_with_a_trailer_slices() {
    let covered = hex(SEND_V1);
    let mut f = vec![
        2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x60, 0x64, 0x89, 0x15,
    ];
    f.extend_from_slice(&covered);
    f.extend_from_slice(&SEND_V1_ICRC.to_le_bytes());
    f.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let p = RoceV1Packet::parse(&f).unwrap();
    assert!(p.icrc_ok());
    assert_eq!(p.eth().vlan.map(|v| (v.pcp, v.vid)), Some((3, 100)));
    assert_eq!(p.trailer(), &[0xde, 0xad, 0xbe, 0xef]);
}

#[test]
fn broken_frames_are_errors_not_panics() {
    let good = frame(&hex(SEND_V1), SEND_V1_ICRC);
    for cut in 0..good.len() {
        let _ = RoceV1Packet::parse(&good[..cut]);
    }
    let mut bad = good.clone();
    bad[14 + 6] = 17; // NxtHdr: UDP
    assert!(matches!(
        RoceV1Packet::parse(&bad),
        Err(PacketError::Malformed {
            layer: Layer::Grh,
            ..
        })
    ));
    let mut long = good.clone();
    long[14 + 5] = 0xff; // PayLen beyond the frame
    assert!(matches!(
        RoceV1Packet::parse(&long),
        Err(PacketError::LengthBeyondData { .. })
    ));
    let mut wrong = good;
    *wrong.last_mut().unwrap() ^= 1;
    assert!(!RoceV1Packet::parse(&wrong).unwrap().icrc_ok());
}

mod grh {
    use super::*;
    crate::wire::header::round_trip_proptest!(GrhRepr);
}

proptest::proptest! {
    #[test]
    fn any_bytes_after_the_ethertype_never_panic(tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120)) {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x89, 0x15];
        f.extend_from_slice(&tail);
        if let Ok(p) = RoceV1Packet::parse(&f) {
            let _ = (p.icrc_ok(), p.ext(), p.pad(), p.repr());
        }
    }
}
