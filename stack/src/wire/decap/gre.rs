//! Generic Routing Encapsulation (RFC 2784, with RFC 2890's key and sequence number): a
//! 4-byte header, then the optional fields its flags announce, then the payload whose
//! EtherType the header names (0x6558: an Ethernet frame, "transparent Ethernet bridging").
//!
//! ```text
//!  bit  0      C: checksum and reserved1 present (4 bytes)
//!  bit  1      R: routing present (RFC 1701; not decapsulated)
//!  bit  2      K: key present (4 bytes)
//!  bit  3      S: sequence number present (4 bytes)
//!  bits 4-12   reserved (RFC 1701's s, Recur, A and flags)
//!  bits 13-15  Ver: 0 (1 is PPTP's enhanced GRE)
//!  bytes 2-3   Protocol Type: an EtherType
//!  [checksum (16), reserved1 (16)] [key (32)] [sequence number (32)]
//! ```

use crate::wire::error::{Result, WireError, check_len};
use crate::wire::field::{self, FieldInfo};

/// IP protocol number of GRE.
pub const IP_PROTOCOL_GRE: u8 = 47;
/// GRE protocol type of an Ethernet frame: transparent Ethernet bridging.
pub const ETHERTYPE_TEB: u16 = 0x6558;

const NAME: &str = "GRE";
/// The fixed part: flags, version and protocol.
pub const BASE_LEN: usize = 4;
const FLAG_C: u16 = 0x8000;
const FLAG_R: u16 = 0x4000;
const FLAG_K: u16 = 0x2000;
const FLAG_S: u16 = 0x1000;
/// Bits 4-12 and R: the flags this header keeps as they are.
const RESERVED0: u16 = 0x4ff8;
const VERSION: u16 = 0x0007;

/// A view over a GRE header, checked to hold its optional fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gre<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Gre<T> {
    /// Wraps `buffer` after checking it holds the header with every field its flags announce;
    /// a header with routing (R) is refused, its length being a walk of the route.
    pub fn new_checked(buffer: T) -> Result<Gre<T>> {
        check_len(NAME, buffer.as_ref(), BASE_LEN)?;
        let g = Gre { buffer };
        if g.flags() & FLAG_R != 0 {
            return Err(WireError::Malformed {
                header: NAME,
                reason: "routing present (RFC 1701): not decapsulated",
            });
        }
        check_len(NAME, g.buffer.as_ref(), g.header_len())?;
        Ok(g)
    }

    fn flags(&self) -> u16 {
        field::read_u16(self.buffer.as_ref(), 0)
    }

    /// The header's length with its optional fields.
    pub fn header_len(&self) -> usize {
        let f = self.flags();
        BASE_LEN
            + 4 * ((f & FLAG_C != 0) as usize + (f & FLAG_K != 0) as usize)
            + 4 * (f & FLAG_S != 0) as usize
    }

    /// Ver: 0 for RFC 2784 GRE.
    pub fn version(&self) -> u8 {
        (self.flags() & VERSION) as u8
    }

    /// Protocol Type: the EtherType of the payload.
    pub fn protocol(&self) -> u16 {
        field::read_u16(self.buffer.as_ref(), 2)
    }

    fn optional(&self, flag: u16, before: &[u16]) -> Option<u32> {
        let f = self.flags();
        if f & flag == 0 {
            return None;
        }
        let at = BASE_LEN + 4 * before.iter().filter(|&&b| f & b != 0).count();
        Some(field::read_u32(self.buffer.as_ref(), at))
    }

    /// Checksum (high 16 bits) and reserved1 (low 16 bits), if C is set.
    pub fn checksum_word(&self) -> Option<u32> {
        self.optional(FLAG_C, &[])
    }
    /// The key, if K is set.
    pub fn key(&self) -> Option<u32> {
        self.optional(FLAG_K, &[FLAG_C])
    }
    /// The sequence number, if S is set.
    pub fn sequence(&self) -> Option<u32> {
        self.optional(FLAG_S, &[FLAG_C, FLAG_K])
    }

    /// The owned representation of these bytes.
    pub fn repr(&self) -> GreRepr {
        GreRepr {
            reserved0: self.flags() & RESERVED0,
            version: self.version(),
            protocol: self.protocol(),
            checksum: self.checksum_word().map(|w| ((w >> 16) as u16, w as u16)),
            key: self.key(),
            sequence: self.sequence(),
        }
    }
}

/// A GRE header; each optional field is present when `Some`, which sets its flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GreRepr {
    /// Bits 4-12 (and R, which parsing refuses), kept as found; 0 when sending.
    pub reserved0: u16,
    /// 3 bits; 0 for RFC 2784 GRE.
    pub version: u8,
    /// Protocol Type: the EtherType of the payload.
    pub protocol: u16,
    /// Checksum and reserved1.
    pub checksum: Option<(u16, u16)>,
    /// The key (RFC 2890), when present.
    pub key: Option<u32>,
    /// The sequence number (RFC 2890), when present.
    pub sequence: Option<u32>,
}

impl GreRepr {
    /// GRE version 0 carrying `protocol`, with no optional field.
    pub const fn new(protocol: u16) -> GreRepr {
        GreRepr {
            reserved0: 0,
            version: 0,
            protocol,
            checksum: None,
            key: None,
            sequence: None,
        }
    }

    /// Reads the header and its optional fields from the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<GreRepr> {
        Gre::new_checked(buf).map(|g| g.repr())
    }

    /// Bytes the header takes with its optional fields.
    pub fn buffer_len(&self) -> usize {
        BASE_LEN
            + 4 * (self.checksum.is_some() as usize
                + self.key.is_some() as usize
                + self.sequence.is_some() as usize)
    }

    /// Writes the header, its flags following the optional fields present.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_len(NAME, buf, self.buffer_len())?;
        let mut flags = (self.reserved0 & RESERVED0) | (u16::from(self.version) & VERSION);
        let mut at = BASE_LEN;
        if let Some((sum, reserved1)) = self.checksum {
            flags |= FLAG_C;
            field::write_u32(buf, at, u32::from(sum) << 16 | u32::from(reserved1));
            at += 4;
        }
        if let Some(key) = self.key {
            flags |= FLAG_K;
            field::write_u32(buf, at, key);
            at += 4;
        }
        if let Some(seq) = self.sequence {
            flags |= FLAG_S;
            field::write_u32(buf, at, seq);
        }
        field::write_u16(buf, 0, flags);
        field::write_u16(buf, 2, self.protocol);
        Ok(())
    }

    /// The fields in wire order, optional ones where this header has them, for decoders.
    pub fn fields(&self) -> Vec<FieldInfo> {
        let mut v = vec![
            FieldInfo::new("C", 0, 0, 1, "checksum present"),
            FieldInfo::new("R", 0, 1, 1, "routing present (RFC 1701)"),
            FieldInfo::new("K", 0, 2, 1, "key present (RFC 2890)"),
            FieldInfo::new("S", 0, 3, 1, "sequence number present (RFC 2890)"),
            FieldInfo::new("Reserved0", 0, 4, 9, "reserved, zero"),
            FieldInfo::new("Ver", 1, 5, 3, "GRE version, 0"),
            FieldInfo::new(
                "Protocol Type",
                2,
                0,
                16,
                "EtherType of the payload: 0x6558 Ethernet, 0x88be ERSPAN II, 0x22eb ERSPAN III",
            ),
        ];
        let mut at = BASE_LEN;
        if self.checksum.is_some() {
            v.push(FieldInfo::new(
                "Checksum",
                at,
                0,
                16,
                "one's complement sum of header and payload",
            ));
            v.push(FieldInfo::new("Reserved1", at + 2, 0, 16, "reserved, zero"));
            at += 4;
        }
        if self.key.is_some() {
            v.push(FieldInfo::new(
                "Key",
                at,
                0,
                32,
                "identifies the flow or tunnel",
            ));
            at += 4;
        }
        if self.sequence.is_some() {
            v.push(FieldInfo::new(
                "Sequence Number",
                at,
                0,
                32,
                "counts the packets of the tunnel",
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn optional_fields_follow_their_flags() {
        let bytes = [0x30, 0x00, 0x88, 0xbe, 0, 0, 0, 7, 0, 0, 0, 9, 0xaa];
        let g = Gre::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            (g.header_len(), g.key(), g.sequence()),
            (12, Some(7), Some(9))
        );
        assert_eq!(g.checksum_word(), None);
        assert!(Gre::new_checked(&bytes[..11]).is_err(), "sequence cut");
        assert!(
            Gre::new_checked(&[0x40, 0, 0x65, 0x58][..]).is_err(),
            "routing"
        );
    }

    proptest! {
        #[test]
        fn round_trip(raw in proptest::collection::vec(any::<u8>(), 4..24)) {
            let Ok(repr) = GreRepr::parse(&raw) else {
                let needed = 4 + 4 * (raw[0] >> 4 & 0b1011).count_ones() as usize;
                prop_assert!(raw[0] & 0x40 != 0 || raw.len() < needed);
                return Ok(());
            };
            let mut out = vec![0; repr.buffer_len()];
            repr.emit(&mut out).unwrap();
            prop_assert_eq!(&out[..], &raw[..repr.buffer_len()]);
            prop_assert_eq!(GreRepr::parse(&out).unwrap(), repr);
            let fields = repr.fields();
            crate::wire::field::assert_fields_tile_len(&fields, repr.buffer_len());
            prop_assert_eq!(fields[6].read(&raw), Some(u64::from(repr.protocol)));
        }
    }
}
