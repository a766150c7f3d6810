//! The invariant CRC of a RoCEv2 packet (IBA Vol. 1 7.8.1; RoCEv2, Annex A17, keeps the IB ICRC
//! and defines which IP and UDP fields it covers).
//!
//! The ICRC is CRC-32 (the zlib/Ethernet function) over an 8-byte pseudo-LRH of all ones, then
//! the IP header, UDP header, BTH, extension headers, payload and pad. Fields that routers may
//! change are replaced by ones first: IPv4 TOS, TTL and header checksum; IPv6 traffic class,
//! flow label and hop limit; the UDP checksum; and the whole of BTH byte 4 (FECN, BECN, Resv6).
//! The result is sent least-significant byte first.
//!
//! All the masked fields lie in the first 5 bytes after the UDP header at most, so only that
//! prefix (at most 60 + 8 + 5 bytes) is copied into a stack buffer; the payload goes straight
//! to crc32fast, which is what keeps the ICRC as fast as a plain CRC.

use crc32fast::Hasher;

use super::error::{Result, WireError, check_len};

/// Every function's input is an IP packet; this names it in errors.
const NAME: &str = "ICRC";

/// Size of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

const UDP_LEN: usize = 8;
const BTH_LEN: usize = 12;
/// BTH bytes up to and including byte 4 (FECN, BECN, Resv6), the last masked one.
const BTH_MASKED_PREFIX: usize = 5;
const MAX_IPV4_HEADER: usize = 60;
const IPV6_HEADER: usize = 40;

/// CRC-32 of the eight 0xFF bytes of the pseudo-LRH, in crc32fast's (complemented) form: the
/// raw register 0xDEBB20E3 that rxe starts from, inverted.
const PSEUDO_LRH_CRC: u32 = !0xdebb_20e3;

/// The length of the IP header at the start of `packet`, from its version nibble (and IHL).
///
/// RoCEv2 carries UDP directly after the fixed IPv6 header; IPv6 extension headers are not
/// covered by the ICRC rules, so they are not accepted here.
pub fn ip_header_len(packet: &[u8]) -> Result<usize> {
    check_len(NAME, packet, 1)?;
    match packet[0] >> 4 {
        4 => {
            let len = usize::from(packet[0] & 0x0f) * 4;
            if len < 20 {
                return Err(WireError::Malformed {
                    header: "IPv4",
                    reason: "IHL is less than 5 (20 bytes)",
                });
            }
            Ok(len)
        }
        6 => Ok(IPV6_HEADER),
        _ => Err(WireError::Malformed {
            header: NAME,
            reason: "the packet does not start with an IPv4 or IPv6 header",
        }),
    }
}

/// Computes the ICRC of `covered`: an IP packet from its first byte through the pad, without
/// the ICRC trailer. Fails if it is too short to hold IP, UDP and BTH headers.
pub fn compute(covered: &[u8]) -> Result<u32> {
    let ip_len = ip_header_len(covered)?;
    let prefix_len = ip_len + UDP_LEN + BTH_MASKED_PREFIX;
    check_len(NAME, covered, ip_len + UDP_LEN + BTH_LEN)?;

    let mut prefix = [0u8; MAX_IPV4_HEADER + UDP_LEN + BTH_MASKED_PREFIX];
    let prefix = &mut prefix[..prefix_len];
    prefix.copy_from_slice(&covered[..prefix_len]);
    if covered[0] >> 4 == 6 {
        // Traffic class and flow label: everything after the version nibble of bytes 0-3.
        prefix[0] |= 0x0f;
        prefix[1..4].fill(0xff);
        prefix[7] = 0xff; // hop limit
    } else {
        prefix[1] = 0xff; // TOS: DSCP and ECN
        prefix[8] = 0xff; // TTL
        prefix[10..12].fill(0xff); // header checksum
    }
    prefix[ip_len + 6..ip_len + 8].fill(0xff); // UDP checksum
    prefix[ip_len + UDP_LEN + 4] = 0xff; // BTH byte 4: FECN, BECN, Resv6

    let mut hasher = Hasher::new_with_initial(PSEUDO_LRH_CRC);
    hasher.update(prefix);
    hasher.update(&covered[prefix_len..]);
    Ok(hasher.finalize())
}

/// Splits an IP packet ending in its ICRC into the covered bytes and the received ICRC.
fn split(packet: &[u8]) -> Result<(&[u8], u32)> {
    check_len(NAME, packet, ICRC_LEN)?;
    let (covered, trailer) = packet.split_at(packet.len() - ICRC_LEN);
    let mut icrc = [0u8; ICRC_LEN];
    icrc.copy_from_slice(trailer);
    Ok((covered, u32::from_le_bytes(icrc)))
}

/// The ICRC carried in the last four bytes of `packet` (an IP packet ending in its ICRC).
pub fn received(packet: &[u8]) -> Result<u32> {
    split(packet).map(|(_, icrc)| icrc)
}

/// True if the last four bytes of `packet` (an IP packet ending in its ICRC) are its ICRC.
pub fn verify(packet: &[u8]) -> Result<bool> {
    let (covered, icrc) = split(packet)?;
    Ok(compute(covered)? == icrc)
}

/// Computes the ICRC of `packet` (an IP packet whose last four bytes are reserved for the
/// ICRC) and writes it there; returns it.
pub fn fill(packet: &mut [u8]) -> Result<u32> {
    check_len(NAME, packet, ICRC_LEN)?;
    let at = packet.len() - ICRC_LEN;
    let icrc = compute(&packet[..at])?;
    packet[at..].copy_from_slice(&icrc.to_le_bytes());
    Ok(icrc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An RC ACKNOWLEDGE (QP 0x11, PSN 0x123456, MSN 5) from 192.168.122.10 to .11, IPv4 with
    /// DF and TTL 64 as rxe sends it.
    const ACK_V4: [u8; 48] = [
        0x45, 0x00, 0x00, 0x30, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, // IPv4
        192, 168, 122, 10, 192, 168, 122, 11, //
        0xc1, 0x23, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, // UDP 0xc123 -> 4791, len 28
        0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x12, 0x34, 0x56, // BTH
        0x1f, 0x00, 0x00, 0x05, // AETH
        0x00, 0x00, 0x00, 0x00, // ICRC placeholder
    ];
    /// Its ICRC, computed independently with Python's `zlib.crc32` over eight 0xFF bytes and
    /// the masked packet.
    const ACK_V4_ICRC: u32 = 0x47b2_6a5c;

    #[test]
    fn pseudo_lrh_constant_is_eight_ones() {
        assert_eq!(crc32fast::hash(&[0xff; 8]), PSEUDO_LRH_CRC);
    }

    /// The straightforward definition: copy, mask, prepend eight 0xFF, CRC the lot.
    fn reference(covered: &[u8]) -> u32 {
        let mut buf = vec![0xffu8; 8];
        buf.extend_from_slice(covered);
        let ip = &mut buf[8..];
        let ip_len = if ip[0] >> 4 == 6 {
            ip[0] |= 0x0f;
            ip[1..4].fill(0xff);
            ip[7] = 0xff;
            40
        } else {
            ip[1] = 0xff;
            ip[8] = 0xff;
            ip[10..12].fill(0xff);
            usize::from(ip[0] & 0xf) * 4
        };
        ip[ip_len + 6..ip_len + 8].fill(0xff);
        ip[ip_len + 12] = 0xff;
        crc32fast::hash(&buf)
    }

    #[test]
    fn ipv4_fixture() {
        let mut pkt = ACK_V4;
        let icrc = fill(&mut pkt).unwrap();
        assert_eq!(icrc, ACK_V4_ICRC);
        assert_eq!(icrc, reference(&ACK_V4[..44]));
        assert_eq!(
            &pkt[44..],
            &[0x5c, 0x6a, 0xb2, 0x47],
            "least significant byte first"
        );
        assert!(verify(&pkt).unwrap());
        assert_eq!(received(&pkt).unwrap(), icrc);
    }

    #[test]
    fn masked_fields_do_not_change_the_icrc() {
        let mut pkt = ACK_V4;
        fill(&mut pkt).unwrap();
        for (at, value) in [
            (1, 0x03),
            (8, 0x01),
            (10, 0xab),
            (11, 0xcd),
            (26, 0x99),
            (32, 0xc0),
        ] {
            let mut changed = pkt;
            changed[at] = value;
            assert!(verify(&changed).unwrap(), "byte {at} is masked");
        }
        for at in [2, 4, 6, 9, 12, 19, 20, 22, 24, 28, 31, 33, 40, 43] {
            let mut changed = pkt;
            changed[at] ^= 0x01;
            assert!(!verify(&changed).unwrap(), "byte {at} is covered");
        }
    }

    #[test]
    fn ipv6_masks_traffic_class_flow_label_and_hop_limit() {
        let mut pkt = vec![0u8; 40 + 8 + 12 + 4];
        pkt[0] = 0x60;
        pkt[6] = 17;
        pkt[7] = 64;
        pkt[42..44].copy_from_slice(&4791u16.to_be_bytes());
        let icrc = fill(&mut pkt).unwrap();
        assert_eq!(icrc, reference(&pkt[..60]));
        for at in 0..4 {
            let mut changed = pkt.clone();
            changed[at] |= if at == 0 { 0x0f } else { 0xff };
            changed[7] = 1;
            assert!(verify(&changed).unwrap());
        }
        let mut changed = pkt.clone();
        changed[0] = 0x70;
        assert!(
            verify(&changed).is_err(),
            "version nibble is not IPv4 or IPv6"
        );
        let mut changed = pkt;
        changed[6] = 6;
        assert!(!verify(&changed).unwrap(), "next header is covered");
    }

    #[test]
    fn short_or_foreign_input_is_an_error() {
        assert!(verify(&[]).is_err());
        assert!(verify(&ACK_V4[..30]).is_err());
        assert!(compute(&[0x45; 39]).is_err(), "no room for UDP and BTH");
        assert!(compute(&[0x43; 64]).is_err(), "IHL 3");
        assert!(fill(&mut [0u8; 3]).is_err());
    }

    proptest! {
        #[test]
        fn agrees_with_the_reference(mut raw in proptest::collection::vec(any::<u8>(), 84..300),
                                     v6 in any::<bool>(), ihl in 5u8..16) {
            raw[0] = if v6 { 0x60 } else { 0x40 | ihl };
            prop_assert_eq!(compute(&raw).unwrap(), reference(&raw));
            fill(&mut raw).unwrap();
            prop_assert!(verify(&raw).unwrap());
        }
    }
}
