//! ECN in place: the ECN field of an Ethernet frame's IP header read and set to Congestion
//! Experienced as a congested switch does (RFC 3168 section 5), without parsing the rest of
//! the frame. The ICRC masks the IPv4 TOS byte and the IPv6 traffic class (Annex A17.3.3)
//! exactly so that switches can do this; the IPv4 header checksum is recomputed.

use super::Ecn;
use super::encap::{
    ETHERNET_HEADER_LEN, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN, IPV4_HEADER_LEN,
    IPV6_HEADER_LEN, VLAN_TAG_LEN, set_ipv4_checksum,
};

/// The byte of either IP version that holds the ECN field (TOS, or the traffic class's low
/// nibble and the flow label's first).
const ECN_BYTE: usize = 1;

/// The result of [`mark_ce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CeOutcome {
    /// Was ECT(0) or ECT(1), is CE now (checksum updated).
    Marked,
    /// Was CE already: left alone.
    AlreadyCe,
    /// Not-ECT: left alone (RFC 3168 section 5).
    NotEct,
    /// Not an IPv4 or IPv6 frame, or too short to hold the IP header.
    NotIp,
}

/// The EtherType of an Ethernet frame's payload, after at most one 802.1Q tag, and where
/// that payload starts.
pub fn payload_ethertype(frame: &[u8]) -> Option<(usize, u16)> {
    let ethertype_at = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let mut offset = ETHERNET_HEADER_LEN;
    let mut ethertype = ethertype_at(offset - 2)?;
    if ethertype == ETHERTYPE_VLAN {
        offset += VLAN_TAG_LEN;
        ethertype = ethertype_at(offset - 2)?;
    }
    Some((offset, ethertype))
}

/// Where the IP header starts in an Ethernet frame (after at most one 802.1Q tag), and its
/// version.
pub fn ip_offset(frame: &[u8]) -> Option<(usize, u8)> {
    match payload_ethertype(frame)? {
        (offset, ETHERTYPE_IPV4) => Some((offset, 4)),
        (offset, ETHERTYPE_IPV6) => Some((offset, 6)),
        _ => None,
    }
}

/// The ECN field of an Ethernet frame carrying IPv4 or IPv6, if it carries either.
pub fn ecn(frame: &[u8]) -> Option<u8> {
    let (ip, version) = ip_offset(frame)?;
    let byte = frame.get(ip + ECN_BYTE)?;
    Some(match version {
        4 => byte & 0b11,
        _ => (byte >> 4) & 0b11,
    })
}

/// Sets ECN to CE in the IP header of an Ethernet frame, as a congested switch does.
pub fn mark_ce(frame: &mut [u8]) -> CeOutcome {
    let Some((ip, version)) = ip_offset(frame) else {
        return CeOutcome::NotIp;
    };
    let Some(current) = ecn(frame) else {
        return CeOutcome::NotIp;
    };
    match Ecn::from_bits(current) {
        Ecn::Ce => return CeOutcome::AlreadyCe,
        Ecn::NotEct => return CeOutcome::NotEct,
        Ecn::Ect0 | Ecn::Ect1 => {}
    }
    if version == 6 {
        if frame.len() < ip + IPV6_HEADER_LEN {
            return CeOutcome::NotIp;
        }
        frame[ip + ECN_BYTE] |= Ecn::Ce.bits() << 4;
        return CeOutcome::Marked;
    }
    let ihl = usize::from(frame[ip] & 0x0f) * 4;
    if ihl < IPV4_HEADER_LEN || frame.len() < ip + ihl {
        return CeOutcome::NotIp;
    }
    frame[ip + ECN_BYTE] |= Ecn::Ce.bits();
    set_ipv4_checksum(&mut frame[ip..ip + ihl]);
    CeOutcome::Marked
}
