//! Any frame, through everything that reads it: the slicer (as an Ethernet frame, a bare IP
//! packet and after each Linux cooked header, through any outer layers), every accessor of a parsed packet, and `roce decode`'s JSON and annotated output
//! under every link type it reads. No panic, and the slicer's ranges tile the input. (Whole
//! capture files are the `capture` target's.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce::capture::{Frame, Link};
use roce::wire::decap::MAX_DEPTH;
use roce::wire::{LinkHeader, RocePacket};
use roce_tools::cmd::decode::describe;

fn exercise(pkt: &RocePacket<'_>, input: &[u8]) {
    assert_eq!(pkt.packet_bytes().len() + pkt.trailer().len(), input.len());
    // The outer layers and the packet's own link header tile the frame up to its IP header.
    let mut at = 0;
    for h in pkt.link_headers() {
        assert_eq!(h.start, at, "{h:?}");
        at += h.len;
    }
    assert_eq!(at, pkt.ip_offset());
    assert!(pkt.encap().len() <= MAX_DEPTH && pkt.link_offset() <= pkt.ip_offset());
    assert!(pkt.ip_offset() < pkt.udp_offset() && pkt.udp_offset() < pkt.bth_offset());
    let ib = pkt.ib();
    assert_eq!(usize::from(ib.bth.pad_count), pkt.pad().len());
    assert_eq!(ib.payload, pkt.payload());
    let _ = (
        pkt.icrc_ok(),
        pkt.ip_checksum_ok(),
        pkt.ecn(),
        pkt.repr().buffer_len(),
    );
}

/// Pause quanta read at `roce decode`'s default link speed.
const LINK: u64 = roce::analysis::pfc::DEFAULT_LINK_GBPS * 1_000_000_000;

fuzz_target!(|data: &[u8]| {
    if let Ok(pkt) = RocePacket::parse(data) {
        exercise(&pkt, data);
    }
    for link in [LinkHeader::Ip, LinkHeader::Sll, LinkHeader::Sll2] {
        if let Ok(pkt) = RocePacket::parse_link(data, link) {
            exercise(&pkt, data);
        }
    }
    for link in [Link::Ethernet, Link::RawIp, Link::LinuxSll, Link::LinuxSll2] {
        let frame = Frame {
            index: 0,
            timestamp_ns: 0,
            link,
            data,
            orig_len: data.len() as u32,
        };
        let _ = (describe(&frame, true, LINK), describe(&frame, false, LINK));
    }
});
