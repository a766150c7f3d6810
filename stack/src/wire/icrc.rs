//! The invariant CRC of a RoCEv2 packet (IBA Vol. 1 7.8.1; RoCEv2, Annex A17, keeps the IB ICRC
//! and defines which IP and UDP fields it covers).
//!
//! The ICRC is CRC-32 (the zlib/Ethernet function) over an 8-byte pseudo-LRH of all ones, then
//! the IP header, UDP header, BTH, extension headers, payload and pad. Fields that routers may
//! change are replaced by ones first: IPv4 TOS, TTL and header checksum; IPv6 traffic class,
//! flow label and hop limit; the UDP checksum; and the whole of BTH byte 4 (FECN, BECN, Resv6).
//! The result is sent least-significant byte first.
//!
//! All the masked fields lie in the first 5 bytes after the UDP header at most. That prefix,
//! rounded up to whole 8-byte words, is run through a slicing-by-8 table CRC with the masks
//! ORed in as the words are loaded (masking to ones is an OR), so nothing is copied and no
//! store is reloaded; the rest of the packet goes straight to crc32fast's carry-less-multiply
//! kernels. This keeps the ICRC within a few nanoseconds of a plain CRC of the same bytes.

use crc32fast::Hasher;

use super::error::{Result, WireError, check_len};

/// Every function's input is an IP packet; this names it in errors.
const NAME: &str = "ICRC";

/// Size of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

const UDP_LEN: usize = super::encap::UDP_HEADER_LEN;
const BTH_LEN: usize = <super::bth::BthRepr as super::FixedHeader>::LEN;
/// BTH bytes up to and including byte 4 (FECN, BECN, Resv6), the last masked one.
const BTH_MASKED_PREFIX: usize = 5;
const MAX_IPV4_HEADER: usize = super::encap::IPV4_MAX_HEADER_LEN;
const IPV6_HEADER: usize = super::encap::IPV6_HEADER_LEN;

/// CRC-32 of the eight 0xFF bytes of the pseudo-LRH, in crc32fast's (complemented) form: the
/// raw register 0xDEBB20E3 that rxe starts from, inverted.
const PSEUDO_LRH_CRC: u32 = !0xdebb_20e3;

/// The CRC-32 byte tables for slicing-by-16: `TABLES[0]` is the classic reflected table of
/// polynomial 0xEDB88320, `TABLES[k]` advances a byte through `k` further zero bytes.
static TABLES: [[u32; 256]; 16] = {
    let mut t = [[0u32; 256]; 16];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
            bit += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 16 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// Advances the raw CRC register over sixteen bytes given as two little-endian words. The
/// sixteen lookups are independent, so the dependent chain is one step per 16 bytes.
#[inline(always)]
fn step16(reg: u32, lo: u64, hi: u64) -> u32 {
    let x = lo ^ u64::from(reg);
    let t = |table: usize, word: u64, shift: u32| TABLES[table][((word >> shift) & 0xff) as usize];
    (t(15, x, 0) ^ t(14, x, 8) ^ t(13, x, 16) ^ t(12, x, 24))
        ^ (t(11, x, 32) ^ t(10, x, 40) ^ t(9, x, 48) ^ t(8, x, 56))
        ^ (t(7, hi, 0) ^ t(6, hi, 8) ^ t(5, hi, 16) ^ t(4, hi, 24))
        ^ (t(3, hi, 32) ^ t(2, hi, 40) ^ t(1, hi, 48) ^ t(0, hi, 56))
}

/// Advances the raw CRC register over eight bytes given as a little-endian word.
#[inline(always)]
fn step8(reg: u32, word: u64) -> u32 {
    let x = word ^ u64::from(reg);
    let t = |table: usize, shift: u32| TABLES[table][((x >> shift) & 0xff) as usize];
    (t(7, 0) ^ t(6, 8) ^ t(5, 16) ^ t(4, 24)) ^ (t(3, 32) ^ t(2, 40) ^ t(1, 48) ^ t(0, 56))
}

/// The longest masked prefix in words: a 60-byte IPv4 header, UDP, 5 BTH bytes, rounded up.
const MAX_PREFIX_WORDS: usize = (MAX_IPV4_HEADER + UDP_LEN + BTH_MASKED_PREFIX).div_ceil(8);

/// Words of the masked prefix for an IP header of `ip_len` bytes.
const fn prefix_words(ip_len: usize) -> usize {
    (ip_len + UDP_LEN + BTH_MASKED_PREFIX).div_ceil(8)
}

/// The bits replaced by ones, as little-endian words over the prefix, for an IPv6 header or
/// an IPv4 header of `ip_len` bytes.
const fn or_masks(v6: bool, ip_len: usize) -> [u64; MAX_PREFIX_WORDS] {
    let mut bytes = [0u8; MAX_PREFIX_WORDS * 8];
    if v6 {
        bytes[0] = 0x0f; // traffic class, high nibble (the low one is the version)
        bytes[1] = 0xff; // traffic class, low nibble, and flow label
        bytes[2] = 0xff;
        bytes[3] = 0xff;
        bytes[7] = 0xff; // hop limit
    } else {
        bytes[1] = 0xff; // TOS: DSCP and ECN
        bytes[8] = 0xff; // TTL
        bytes[10] = 0xff; // header checksum
        bytes[11] = 0xff;
    }
    bytes[ip_len + 6] = 0xff; // UDP checksum
    bytes[ip_len + 7] = 0xff;
    bytes[ip_len + UDP_LEN + 4] = 0xff; // BTH byte 4: FECN, BECN, Resv6
    let mut words = [0u64; MAX_PREFIX_WORDS];
    let mut i = 0;
    while i < MAX_PREFIX_WORDS * 8 {
        words[i / 8] |= (bytes[i] as u64) << (8 * (i % 8));
        i += 1;
    }
    words
}

static IPV6_MASKS: [u64; MAX_PREFIX_WORDS] = or_masks(true, IPV6_HEADER);

/// Indexed by IHL; entries below 5 are never used (such headers are refused).
static IPV4_MASKS: [[u64; MAX_PREFIX_WORDS]; 16] = {
    let mut m = [[0u64; MAX_PREFIX_WORDS]; 16];
    let mut ihl = 5;
    while ihl < 16 {
        m[ihl] = or_masks(false, ihl * 4);
        ihl += 1;
    }
    m
};

/// The length of the IP header at the start of `packet`, from its version nibble (and IHL).
///
/// RoCEv2 carries UDP directly after the fixed IPv6 header; IPv6 extension headers are not
/// covered by the ICRC rules, so they are not accepted here.
pub fn ip_header_len(packet: &[u8]) -> Result<usize> {
    check_len(NAME, packet, 1)?;
    match packet[0] >> 4 {
        4 => ipv4_len(packet[0]),
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
    compute_masked(covered, ip_len, covered[0] >> 4 == 6)
}

/// The ICRC an IPv4 receiver computes for `covered` whatever its version field says (its
/// header length from the IHL): what a test sends with a version other than 4 in an IPv4
/// frame (Annex A17 CA17-27), so that only the version is wrong.
pub fn compute_as_ipv4(covered: &[u8]) -> Result<u32> {
    check_len(NAME, covered, 1)?;
    compute_masked(covered, ipv4_len(covered[0])?, false)
}

/// An IPv4 header's length from its first byte's IHL, at least 20 bytes.
fn ipv4_len(version_ihl: u8) -> Result<usize> {
    match super::encap::ipv4_header_len(version_ihl) {
        len if len < 20 => Err(WireError::Malformed {
            header: "IPv4",
            reason: "IHL is less than 5 (20 bytes)",
        }),
        len => Ok(len),
    }
}

/// [`compute`] with the IP header's length and family given.
fn compute_masked(covered: &[u8], ip_len: usize, ipv6: bool) -> Result<u32> {
    // The whole BTH is required, which also makes the rounded-up prefix fit.
    check_len(NAME, covered, ip_len + UDP_LEN + BTH_LEN)?;
    let masks = if ipv6 {
        &IPV6_MASKS
    } else {
        &IPV4_MASKS[ip_len / 4]
    };
    let (prefix, rest) = covered.split_at(prefix_words(ip_len) * 8);
    let mut words = prefix.chunks_exact(8).zip(masks).map(|(chunk, mask)| {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        u64::from_le_bytes(word) | mask
    });
    let mut reg = !PSEUDO_LRH_CRC;
    while let Some(lo) = words.next() {
        reg = match words.next() {
            Some(hi) => step16(reg, lo, hi),
            None => step8(reg, lo),
        };
    }
    let mut hasher = Hasher::new_with_initial(!reg);
    hasher.update(rest);
    Ok(hasher.finalize())
}

/// The ICRC rdma_rxe puts on (and expects of) an RC FLUSH, Linux 6.2 through at least 6.12:
/// the ICRC of [`compute`] run on over the BTH, FETH and RETH a second time, unmasked. Its
/// opcode table gives `IB_OPCODE_RC_FLUSH` no payload offset, so the payload it hashes after
/// the headers starts at offset 0 of the BTH and runs to the ICRC (checked against the lab's
/// captures, `tests/interop/iba15.sh`). Two rxe ends agree; a receiver that follows the spec
/// drops rxe's FLUSH and rxe drops a FLUSH with the spec's ICRC. `covered` is as for
/// [`compute`]; any opcode is hashed so (only RC FLUSH is sent so by rxe).
pub fn compute_rxe_flush(covered: &[u8]) -> Result<u32> {
    let spec = compute(covered)?;
    let ib_start = ip_header_len(covered)? + UDP_LEN;
    let mut hasher = Hasher::new_with_initial(spec);
    hasher.update(&covered[ib_start..]);
    Ok(hasher.finalize())
}

/// As [`fill`], with rxe's FLUSH ICRC ([`compute_rxe_flush`]).
pub fn fill_rxe_flush(packet: &mut [u8]) -> Result<u32> {
    fill_by(packet, compute_rxe_flush)
}

/// Computes the ICRC of `packet` without its last four bytes with `compute` and writes it
/// there; returns it.
fn fill_by(packet: &mut [u8], compute: fn(&[u8]) -> Result<u32>) -> Result<u32> {
    check_len(NAME, packet, ICRC_LEN)?;
    let at = packet.len() - ICRC_LEN;
    let icrc = compute(&packet[..at])?;
    packet[at..].copy_from_slice(&icrc.to_le_bytes());
    Ok(icrc)
}

/// GRH bytes and BTH byte 4 masked in a RoCEv1 ICRC: the GRH's TClass and FlowLabel (after
/// its version nibble) and HopLmt, then FECN, BECN and Resv6 (IBA 7.8.1; Annex A16).
const ROCE_V1_MASKS: [(usize, u8); 6] = [
    (0, 0x0f),
    (1, 0xff),
    (2, 0xff),
    (3, 0xff),
    (7, 0xff),
    (GRH_LEN + 4, 0xff),
];
const GRH_LEN: usize = super::encap::GRH_LEN;

/// Computes the ICRC of a RoCEv1 packet: `covered` is its GRH through the pad, without the
/// ICRC. Fails if it is too short to hold a GRH and a BTH. Not on a hot path: the masked
/// prefix is copied.
pub fn compute_roce_v1(covered: &[u8]) -> Result<u32> {
    check_len(NAME, covered, GRH_LEN + BTH_LEN)?;
    const PREFIX: usize = GRH_LEN + BTH_MASKED_PREFIX;
    let mut prefix = [0u8; PREFIX];
    prefix.copy_from_slice(&covered[..PREFIX]);
    for (at, mask) in ROCE_V1_MASKS {
        prefix[at] |= mask;
    }
    let mut hasher = Hasher::new_with_initial(PSEUDO_LRH_CRC);
    hasher.update(&prefix);
    hasher.update(&covered[PREFIX..]);
    Ok(hasher.finalize())
}

/// Computes the ICRC of `packet` (a RoCEv1 GRH through its last four bytes, reserved for the
/// ICRC) and writes it there; returns it.
pub fn fill_roce_v1(packet: &mut [u8]) -> Result<u32> {
    fill_by(packet, compute_roce_v1)
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
    fill_by(packet, compute)
}

/// As [`fill`], with [`compute_as_ipv4`].
pub fn fill_as_ipv4(packet: &mut [u8]) -> Result<u32> {
    fill_by(packet, compute_as_ipv4)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An RC FLUSH (global visibility, 2000 bytes at 0x55bc1bd12000, R_Key 0x2f3) as rdma_rxe
    /// 6.12 sent it in the lab, IPv4 from 10.77.0.12 to 10.77.0.11, PSN 0xe02178, its ICRC last:
    /// rxe's.
    const RXE_FLUSH_V4: [u8; 64] = [
        0x45, 0x00, 0x00, 0x40, 0x66, 0x3f, 0x40, 0x00, 0x40, 0x11, 0xbf, 0xbd, // IPv4
        0x0a, 0x4d, 0x00, 0x0c, 0x0a, 0x4d, 0x00, 0x0b, //
        0xc1, 0x21, 0x12, 0xb7, 0x00, 0x2c, 0x00, 0x00, // UDP
        0x1c, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0xe0, 0x21, 0x78, // BTH
        0x00, 0x00, 0x00, 0x01, // FETH: selectivity 0, placement 1 (global visibility)
        0x00, 0x00, 0x55, 0xbc, 0x1b, 0xd1, 0x20, 0x00, 0x00, 0x00, 0x02, 0xf3, 0x00, 0x00, 0x07,
        0xd0, // RETH
        0x30, 0x2e, 0x2b, 0xb5, // rxe's ICRC
    ];

    #[test]
    fn rxe_flush_icrc_hashes_the_transport_headers_twice() {
        assert!(!verify(&RXE_FLUSH_V4).unwrap(), "not the spec's ICRC");
        let (covered, icrc) = split(&RXE_FLUSH_V4).unwrap();
        assert_eq!(compute(covered).unwrap(), 0xad62_d6f5);
        assert_eq!(compute_rxe_flush(covered).unwrap(), icrc);
        let mut refilled = RXE_FLUSH_V4;
        fill(&mut refilled).unwrap();
        assert!(verify(&refilled).unwrap());
        assert_eq!(fill_rxe_flush(&mut refilled).unwrap(), icrc);
        assert_eq!(refilled, RXE_FLUSH_V4);
    }

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

    /// Real rdma_rxe packets (IP header through ICRC) from pcaps/: an RC ACKNOWLEDGE over IPv4
    /// (rc_write_only.pcap) and one over IPv6 (rc_ipv6.pcap), each ending in the ICRC rxe sent.
    const RXE_ACK_V4: &str = "45000030bf614000401166ab0a4d000b0a4d000cc12112b7001c00001100ffff\
                              0000001100735caf1f000001fcaa321a";
    const RXE_ACK_V6: &str = "60000000001c1140fd000077000000000000000000000011fd00007700000000\
                              0000000000000012c12112b7001c00001100ffff000000110095a9261f000001\
                              61268115";

    /// The bytes of a hex string (whitespace and line breaks ignored).
    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(core::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn real_rxe_packets_verify() {
        for (fixture, icrc) in [(RXE_ACK_V4, 0x1a32_aafc), (RXE_ACK_V6, 0x1581_2661)] {
            let mut pkt = hex(fixture);
            assert_eq!(received(&pkt).unwrap(), icrc);
            assert!(verify(&pkt).unwrap());
            let n = pkt.len();
            pkt[n - 4..].fill(0);
            assert_eq!(
                fill(&mut pkt).unwrap(),
                icrc,
                "fill reproduces what rxe sent"
            );
            assert_eq!(icrc, reference(&pkt[..n - 4]));
        }
    }

    #[test]
    fn pseudo_lrh_constant_is_eight_ones() {
        assert_eq!(crc32fast::hash(&[0xff; 8]), PSEUDO_LRH_CRC);
    }

    /// The straightforward definition: copy, mask, prepend eight 0xFF, CRC the lot.
    fn reference(covered: &[u8]) -> u32 {
        reference_as(covered, covered[0] >> 4 == 6)
    }

    /// [`reference`] with the masks of the family given, whatever the version field says.
    fn reference_as(covered: &[u8], ipv6: bool) -> u32 {
        let mut buf = vec![0xffu8; 8];
        buf.extend_from_slice(covered);
        let ip = &mut buf[8..];
        let ip_len = if ipv6 {
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

    /// `compute_as_ipv4` is `compute` on an IPv4 packet, and on the same bytes with version 6
    /// it is the straightforward IPv4 definition over them (the version nibble is covered).
    #[test]
    fn an_ipv4_icrc_whatever_the_version_field_says() {
        let covered = &ACK_V4[..44];
        assert_eq!(compute_as_ipv4(covered).unwrap(), ACK_V4_ICRC);
        let mut v6 = covered.to_vec();
        v6[0] = 0x65;
        let icrc = compute_as_ipv4(&v6).unwrap();
        assert_eq!(icrc, reference_as(&v6, false));
        assert_ne!(icrc, ACK_V4_ICRC);
        let mut pkt = ACK_V4;
        pkt[0] = 0x65;
        assert_eq!(fill_as_ipv4(&mut pkt).unwrap(), icrc);
        assert!(compute_as_ipv4(&[0x64; 44]).is_err(), "IHL 4");
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
