//! Tests of the slicer: fixtures, every layer's errors, and round trips through the builder.

use super::*;
use crate::rng::Rng;
use crate::wire::decap::OuterKind;
use crate::wire::sample;
use crate::wire::{AethRepr, Msn, Opcode, Psn, Qpn};
use proptest::prelude::*;

/// An RC ACKNOWLEDGE inside Ethernet, identical to the ICRC module's fixture.
fn ack_frame() -> Vec<u8> {
    let mut f = vec![0x52, 0x54, 0, 0, 0, 2, 0x52, 0x54, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[
        0x45, 0x00, 0x00, 0x30, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 192, 168, 122, 10,
        192, 168, 122, 11, 0xc1, 0x23, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x00, 0xff, 0xff,
        0x00, 0x00, 0x00, 0x11, 0x00, 0x12, 0x34, 0x56, 0x1f, 0x00, 0x00, 0x05, 0x5c, 0x6a, 0xb2,
        0x47,
    ]);
    let sum = etherparse::Ipv4HeaderSlice::from_slice(&f[14..])
        .unwrap()
        .to_header()
        .calc_header_checksum();
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f
}

#[test]
fn parses_every_layer_of_the_fixture() {
    let frame = ack_frame();
    let pkt = RocePacket::parse(&frame).unwrap();
    assert_eq!(pkt.eth().unwrap().src, [0x52, 0x54, 0, 0, 0, 1]);
    assert_eq!(pkt.ip().src_addr().to_string(), "192.168.122.10");
    assert_eq!(pkt.ip().dst_addr().to_string(), "192.168.122.11");
    assert_eq!(
        (pkt.ip().ttl(), pkt.ecn(), pkt.ip().dscp()),
        (64, Ecn::NotEct, 0)
    );
    assert_eq!((pkt.udp().src_port, pkt.udp().dst_port), (0xc123, 4791));
    assert_eq!(pkt.bth().opcode, Opcode(0x11));
    assert_eq!(pkt.bth().dest_qp, Qpn::new(0x11));
    assert_eq!(pkt.bth().psn, Psn::new(0x12_3456));
    assert_eq!(pkt.ext().aeth, Some(AethRepr::ack(Msn::new(5))));
    assert!(pkt.payload().is_empty() && pkt.pad().is_empty() && pkt.trailer().is_empty());
    assert_eq!(pkt.icrc(), 0x47b2_6a5c);
    assert!(pkt.icrc_ok() && pkt.ip_checksum_ok());
    assert_eq!(
        (pkt.ip_offset(), pkt.udp_offset(), pkt.bth_offset()),
        (14, 34, 42)
    );
    assert_eq!(
        pkt.repr().to_vec().unwrap(),
        frame,
        "re-emits byte for byte"
    );
}

#[test]
fn ethernet_padding_is_a_trailer_not_payload() {
    let mut frame = ack_frame();
    frame.extend_from_slice(&[0, 0, 0, 0xde, 0xad]);
    let pkt = RocePacket::parse(&frame).unwrap();
    assert_eq!(pkt.trailer(), &[0, 0, 0, 0xde, 0xad]);
    assert!(pkt.icrc_ok());
    assert_eq!(pkt.packet_bytes(), &frame[..62]);
}

#[test]
fn bad_icrc_and_ip_checksum_are_reported_not_fatal() {
    let mut frame = ack_frame();
    frame[60] ^= 1;
    frame[22] = 1; // TTL: masked in the ICRC, covered by the IPv4 checksum
    let pkt = RocePacket::parse(&frame).unwrap();
    assert!(!pkt.icrc_ok());
    assert!(!pkt.ip_checksum_ok());
}

fn err(frame: &[u8]) -> PacketError {
    RocePacket::parse(frame).unwrap_err()
}

#[test]
fn each_layer_names_its_own_error() {
    let frame = ack_frame();
    assert!(matches!(
        err(&frame[..10]),
        PacketError::Truncated {
            layer: Layer::Ethernet,
            ..
        }
    ));
    assert!(matches!(
        err(&frame[..30]),
        PacketError::Truncated {
            layer: Layer::Ipv4,
            ..
        }
    ));
    assert!(matches!(
        err(&frame[..38]),
        PacketError::Truncated {
            layer: Layer::Udp,
            ..
        }
    ));
    assert_eq!(
        err(&frame[..50]).to_string(),
        "IPv4: total length says 48 bytes but only 36 are present"
    );

    let mut f = frame.clone();
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(err(&f), PacketError::NotRoce(NotRoce::EtherType(0x0806)));
    f[12..14].copy_from_slice(&[0x89, 0x15]);
    assert!(
        matches!(err(&f), PacketError::NotRoce(NotRoce::RoceV1 { grh: 14, eth }) if eth.vlan.is_none()),
        "{:?}",
        err(&f)
    );
    let mut f = frame.clone();
    f[23] = 6;
    assert_eq!(
        err(&f).to_string(),
        "not RoCEv2: IP protocol 6 is not UDP (17)"
    );
    let mut f = frame.clone();
    f[36..38].copy_from_slice(&53u16.to_be_bytes());
    assert!(err(&f).is_not_roce());

    let mut f = frame.clone();
    f[14] = 0x55;
    assert!(matches!(
        err(&f),
        PacketError::Malformed {
            layer: Layer::Ipv4,
            ..
        }
    ));
    let mut f = frame.clone();
    f[16..18].copy_from_slice(&20u16.to_be_bytes());
    assert!(matches!(
        err(&f),
        PacketError::LengthTooSmall {
            layer: Layer::Ipv4,
            ..
        }
    ));
    let mut f = frame.clone();
    f[38..40].copy_from_slice(&20u16.to_be_bytes());
    assert_eq!(
        err(&f).to_string(),
        "UDP: length says 20 bytes but the IP header leaves 28 for UDP"
    );
    let mut f = frame.clone();
    f[20] = 0x20; // more fragments
    assert!(matches!(
        err(&f),
        PacketError::Malformed {
            layer: Layer::Ipv4,
            ..
        }
    ));
    let mut f = frame.clone();
    f[42] = 0x15;
    assert_eq!(err(&f).to_string(), "BTH: unknown opcode 0x15");
    let mut f = frame.clone();
    f[42] = 0x04; // SEND_ONLY: the 4 AETH bytes become payload
    f[43] = 0x30; // pad 3 of a 4-byte payload is fine...
    assert!(RocePacket::parse(&f).is_ok());
    f[42] = 0x0a; // ...but RDMA_WRITE_ONLY needs a 16-byte RETH
    assert!(matches!(
        err(&f),
        PacketError::Ib(WireError::Truncated { header: "RETH", .. })
    ));
    let mut f = frame;
    f[43] = 0x30; // ACK has no payload, so no room for 3 pad bytes
    assert!(matches!(
        err(&f),
        PacketError::Ib(WireError::Malformed { .. })
    ));
}

#[test]
fn ipv6_and_bare_ip() {
    for frame in sample::frames(7) {
        let pkt = RocePacket::parse(&frame).unwrap();
        let bare = RocePacket::parse_ip(pkt.ip_packet()).unwrap();
        assert_eq!(bare.ib(), pkt.ib());
        assert!(bare.eth().is_none() && bare.icrc_ok());
        assert_eq!(bare.repr().to_vec().unwrap(), pkt.ip_packet());
    }
    assert!(RocePacket::parse_ip(&[]).is_err());
    assert!(RocePacket::parse_ip(&[0x50; 60]).is_err());
    let frame = &sample::frames(7)[2];
    let mut f = frame.clone();
    assert_eq!(&f[12..14], &[0x86, 0xdd]);
    f[18..20].copy_from_slice(&1000u16.to_be_bytes());
    assert!(matches!(
        err(&f),
        PacketError::LengthBeyondData {
            layer: Layer::Ipv6,
            value: 1000,
            ..
        }
    ));
    f[18..20].copy_from_slice(&4u16.to_be_bytes());
    assert!(matches!(
        err(&f),
        PacketError::LengthTooSmall {
            layer: Layer::Ipv6,
            ..
        }
    ));
}

#[test]
fn ext_len_table_agrees_with_the_opcode_table() {
    for v in 0..=255u8 {
        let expected = ExtHeaders::len_for(Opcode(v)).map_or(UNKNOWN, |n| n as u8);
        assert_eq!(EXT_LEN[usize::from(v)], expected, "opcode {v:#04x}");
    }
}

#[test]
fn sample_frames_round_trip() {
    for frame in sample::frames(3) {
        let pkt = RocePacket::parse(&frame).unwrap();
        assert!(pkt.icrc_ok() && pkt.ip_checksum_ok());
        assert_eq!(pkt.repr().to_vec().unwrap(), frame);
    }
}

proptest! {
    /// Any bytes: an error or a packet; a packet re-emits to the same bytes except where
    /// the builder computes a value (IPv4 checksum, pad bytes, ICRC).
    #[test]
    fn never_panics_and_round_trips(seed in any::<u64>(), flips in 0usize..6, cut in 0usize..3000) {
        let frames = sample::frames(seed % 4);
        let mut rng = Rng::new(seed);
        let mut frame = frames[rng.below(frames.len() as u64) as usize].clone();
        for _ in 0..flips {
            let at = rng.below(frame.len() as u64) as usize;
            frame[at] ^= 1 << rng.below(8);
        }
        frame.truncate(cut);
        if let Ok(pkt) = RocePacket::parse(&frame) {
            // A flipped bit can make a tag 0x9100 or a tunnel: the builder writes neither.
            let plain = pkt.link_offset() == 0
                && pkt.encap().len() <= 1
                && pkt.encap().iter().all(|k| k == OuterKind::Vlan);
            if !plain {
                return Ok(());
            }
            let mut expected = pkt.packet_bytes().to_vec();
            let out = pkt.repr().to_vec().unwrap();
            let ip = pkt.ip_offset();
            if matches!(pkt.ip(), IpRepr::V4(_)) {
                expected[ip + 10..ip + 12].copy_from_slice(&out[ip + 10..ip + 12]);
            }
            let end = expected.len() - ICRC_LEN;
            expected[end - pkt.pad().len()..end].fill(0);
            if pkt.pad().iter().all(|&b| b == 0) && pkt.icrc_ok() && pkt.ip_checksum_ok() {
                prop_assert_eq!(&out, &pkt.packet_bytes().to_vec());
            }
            expected[end..].copy_from_slice(&out[end..]);
            prop_assert_eq!(out, expected);
        }
    }

    #[test]
    fn random_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..200), eth in any::<bool>()) {
        let _ = if eth { RocePacket::parse(&raw) } else { RocePacket::parse_ip(&raw) }
            .map(|p| (p.icrc_ok(), p.ip_checksum_ok(), p.pad().len(), p.trailer().len()));
    }
}
