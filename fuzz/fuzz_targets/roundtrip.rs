//! Parse -> emit -> the same bytes. Whenever a frame parses, the builder re-emits it from its
//! parsed form identically, except the fields the builder computes (IPv4 header checksum, pad
//! bytes, ICRC); when those were already right the bytes are identical outright, and the
//! emitted frame always parses back to the same headers. RoCEv1 frames (GRH over Ethernet)
//! likewise, through their own builder.
//! An encapsulated packet is compared from its own Ethernet (or IP) header on, when the builder
//! can write that header (one 802.1Q tag at most).
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce::wire::grh::RoceV1Packet;
use roce::wire::icrc::ICRC_LEN;
use roce::wire::decap::OuterKind;
use roce::wire::{IpRepr, RocePacket};

/// A RoCEv1 frame re-emits identically but for its pad and ICRC, and parses back.
fn roce_v1(data: &[u8]) {
    let Ok(pkt) = RoceV1Packet::parse(data) else {
        return;
    };
    let out = pkt.repr().to_vec().expect("a parsed RoCEv1 packet re-emits");
    let mut expected = pkt.packet_bytes().to_vec();
    let end = expected.len() - ICRC_LEN;
    expected[end - pkt.pad().len()..end].fill(0);
    expected[end..].copy_from_slice(&out[end..]);
    assert_eq!(out, expected, "only the pad and ICRC differ");
    let again = RoceV1Packet::parse(&out).expect("an emitted RoCEv1 frame parses");
    assert_eq!(again.repr(), pkt.repr());
    assert!(again.icrc_ok());
}

fuzz_target!(|data: &[u8]| {
    roce_v1(data);
    let Ok(pkt) = RocePacket::parse(data) else {
        return;
    };
    let repr = pkt.repr();
    let link = pkt.link_offset();
    let own_link_len = repr.eth.map_or(0, |e| e.header_len());
    let qinq = pkt.encap().iter().any(|k| k == OuterKind::QinQ);
    if pkt.ip_offset() - link != own_link_len || qinq {
        return; // more tags than EthernetRepr holds, or a service tag's TPID it cannot write
    }
    let out = repr.to_vec().expect("a parsed packet re-emits");
    let original = &pkt.packet_bytes()[link..];
    assert_eq!(out.len(), original.len());
    if pkt.icrc_ok() && pkt.ip_checksum_ok() && pkt.pad().iter().all(|&b| b == 0) {
        assert_eq!(out, original, "a correct frame re-emits byte for byte");
    }
    let mut expected = original.to_vec();
    let ip = pkt.ip_offset() - link;
    if matches!(pkt.ip(), IpRepr::V4(_)) {
        expected[ip + 10..ip + 12].copy_from_slice(&out[ip + 10..ip + 12]);
    }
    let end = expected.len() - ICRC_LEN;
    expected[end - pkt.pad().len()..end].fill(0);
    expected[end..].copy_from_slice(&out[end..]);
    assert_eq!(out, expected, "only the computed fields differ");

    let again = match repr.eth {
        Some(_) => RocePacket::parse(&out),
        None => RocePacket::parse_ip(&out),
    }
    .expect("an emitted frame parses");
    assert_eq!(again.repr(), pkt.repr());
    assert!(again.icrc_ok() && again.ip_checksum_ok());
});
