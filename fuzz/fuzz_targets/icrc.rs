//! The ICRC: fill then verify always agrees, and agrees with a plain copy-mask-CRC reference;
//! flipping any bit of the covered bytes is detected unless that bit is one the ICRC masks.
//!
//! Input: two bytes of bit position to flip (little-endian, taken modulo the covered bits),
//! then an IP packet whose last four bytes receive the ICRC.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce::wire::icrc::{self, ICRC_LEN};

/// Bits the ICRC replaces by ones (IBA 7.8.1, Annex A17), as a mask per covered byte.
fn masked_bits(packet: &[u8], at: usize, ip_len: usize) -> u8 {
    let v6 = packet[0] >> 4 == 6;
    let ip_masked = if v6 {
        match at {
            0 => 0x0f,
            1..=3 | 7 => 0xff,
            _ => 0,
        }
    } else {
        match at {
            1 | 8 | 10 | 11 => 0xff,
            _ => 0,
        }
    };
    let udp_checksum = at == ip_len + 6 || at == ip_len + 7;
    let bth_byte4 = at == ip_len + 8 + 4;
    if udp_checksum || bth_byte4 {
        0xff
    } else {
        ip_masked
    }
}

/// The definition, spelled out: copy, mask, prepend eight 0xFF bytes, CRC-32.
fn reference(covered: &[u8], ip_len: usize) -> u32 {
    let mut buf = vec![0xff; 8];
    buf.extend(
        covered
            .iter()
            .enumerate()
            .map(|(i, &b)| b | masked_bits(covered, i, ip_len)),
    );
    crc32fast_reference(&buf)
}

/// Bitwise CRC-32 (reflected 0xEDB88320), independent of any table or SIMD code.
fn crc32fast_reference(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let flip = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let mut packet = data[2..].to_vec();
    let Ok(ip_len) = icrc::ip_header_len(&packet) else {
        assert!(icrc::verify(&packet).is_err());
        return;
    };
    let Ok(value) = icrc::fill(&mut packet) else {
        assert!(
            packet.len() < ip_len + 8 + 12 + ICRC_LEN,
            "only a short packet is refused"
        );
        return;
    };
    let covered_len = packet.len() - ICRC_LEN;
    assert_eq!(value, reference(&packet[..covered_len], ip_len));
    assert_eq!(icrc::verify(&packet), Ok(true));

    let (at, bit) = (flip / 8 % covered_len, 1u8 << (flip % 8));
    // Judged on the packet as filled: a flip in byte 0 (version, IHL) changes how it is read.
    let masked = masked_bits(&packet, at, ip_len) & bit != 0;
    packet[at] ^= bit;
    let verdict = icrc::verify(&packet);
    if masked {
        assert_eq!(verdict, Ok(true), "byte {at} bit {bit:#04x} is masked");
    } else {
        assert_ne!(verdict, Ok(true), "byte {at} bit {bit:#04x} is covered");
    }
});
