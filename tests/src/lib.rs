//! Integration tests live in `tests/tests/`; this library holds their shared helpers.

/// A classic pcap file (microsecond timestamps, Ethernet link type) holding `frames`, one per
/// millisecond from time 0. Written by hand to keep the test helpers free of a writer crate.
pub fn pcap_bytes(frames: &[Vec<u8>]) -> Vec<u8> {
    pcap_bytes_with_link(frames, 1)
}

/// As [`pcap_bytes`] with another link type (113 Linux SLL, 276 SLL2, 101 raw IP).
pub fn pcap_bytes_with_link(frames: &[Vec<u8>], link_type: u32) -> Vec<u8> {
    pcap_bytes_snap(frames, link_type, 65535)
}

/// As [`pcap_bytes_with_link`], keeping at most `snaplen` bytes of each frame (the record
/// still gives the frame's full length, as a capture with `-s SNAPLEN` does).
pub fn pcap_bytes_snap(frames: &[Vec<u8>], link_type: u32, snaplen: u32) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    out.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    out.extend_from_slice(&snaplen.to_le_bytes());
    out.extend_from_slice(&link_type.to_le_bytes());
    for (i, frame) in frames.iter().enumerate() {
        let len = frame.len() as u32;
        let kept = len.min(snaplen);
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(i as u32 * 1000).to_le_bytes());
        out.extend_from_slice(&kept.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&frame[..kept as usize]);
    }
    out
}

/// A pcapng file (one section, one Ethernet interface, one enhanced packet block per frame).
pub fn pcapng_bytes(frames: &[Vec<u8>]) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, block_type: u32, body: &[u8]) {
        let padded = body.len().div_ceil(4) * 4;
        let total = (12 + padded) as u32;
        out.extend_from_slice(&block_type.to_le_bytes());
        out.extend_from_slice(&total.to_le_bytes());
        out.extend_from_slice(body);
        out.resize(out.len() + padded - body.len(), 0);
        out.extend_from_slice(&total.to_le_bytes());
    }
    let mut out = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes()); // section length unknown
    block(&mut out, 0x0a0d_0d0a, &shb);
    let mut idb = Vec::new();
    idb.extend_from_slice(&1u16.to_le_bytes()); // Ethernet
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&0u32.to_le_bytes()); // no snaplen
    block(&mut out, 1, &idb);
    for frame in frames {
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes()); // interface 0
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(frame);
        block(&mut out, 6, &epb);
    }
    out
}

/// The pcap and pcapng files directly in `dir`, sorted by name (empty if there are none).
pub fn captures_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    found.sort();
    found
}

pub mod bench;
pub mod hostile;
pub mod netns;
pub mod wrap;
