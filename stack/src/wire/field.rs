//! Newtypes for the spec's fixed-width fields, and big-endian accessors used by every header.
//!
//! The 24-bit types (`Psn`, `Qpn`, `Msn`) can never hold a value wider than their field, so
//! emitting one can never spill into the neighbouring byte.

use core::cmp::Ordering;
use core::fmt;

const U24_MASK: u32 = 0x00ff_ffff;

macro_rules! u24_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(u32);

        impl $name {
            /// Largest representable value, 2^24 - 1.
            pub const MAX: Self = Self(U24_MASK);

            /// Keeps the low 24 bits of `value`, as the wire does.
            pub const fn new(value: u32) -> Self {
                Self(value & U24_MASK)
            }

            /// Returns `None` if `value` does not fit in 24 bits.
            pub const fn try_new(value: u32) -> Option<Self> {
                if value > U24_MASK { None } else { Some(Self(value)) }
            }

            /// The number.
            pub const fn value(self) -> u32 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::LowerHex for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerHex::fmt(&self.0, f)
            }
        }

        /// As the number it holds.
        #[cfg(feature = "serde")]
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_u32(self.0)
            }
        }
    };
}

u24_newtype!(
    /// Queue pair number (BTH DestQP, DETH SrcQP): 24 bits.
    Qpn
);
u24_newtype!(
    /// Message sequence number (AETH MSN): 24 bits, wraps.
    Msn
);
u24_newtype!(
    /// Packet sequence number: 24 bits, wraps; ordered with a +-2^23 window (IBA 9.7.1).
    Psn
);

impl Qpn {
    /// QP0, the subnet management QP: a RoCEv2 port has none (Annex A17.5.8), and a packet
    /// addressed to it is dropped silently (A17.6, CA17-33).
    pub const SMI: Qpn = Qpn(0);
    /// QP1, the general services interface (CM MADs are sent to it over UD).
    pub const GSI: Qpn = Qpn(1);
}

impl Psn {
    /// The next PSN, wrapping at 2^24.
    pub const fn next(self) -> Psn {
        self.add(1)
    }

    /// `self + n`, wrapping at 2^24.
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n) & U24_MASK)
    }

    /// `self - n`, wrapping at 2^24.
    pub const fn sub(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n) & U24_MASK)
    }

    /// Signed distance from `other` to `self` within the +-2^23 window: positive when `self`
    /// is later. Shifting the 24-bit difference into the top of an i32 makes the sign bit the
    /// PSN's bit 23, which is exactly the spec's half-window rule.
    pub const fn distance(self, other: Psn) -> i32 {
        ((self.0.wrapping_sub(other.0)) << 8) as i32 >> 8
    }
}

impl PartialOrd for Psn {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Psn {
    /// Serial-number order: not transitive over more than half the PSN space, which is the
    /// spec's own rule, so never sort PSNs that span more than 2^23.
    fn cmp(&self, other: &Self) -> Ordering {
        self.distance(*other).cmp(&0)
    }
}

/// Partition key (BTH P_Key): the high bit is the membership type (1 = full member).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PKey(pub u16);

impl PKey {
    /// The default partition, full membership: what rxe and the rdma-core tools use.
    pub const DEFAULT: PKey = PKey(0xffff);

    /// True for full membership (bit 15 set).
    pub const fn is_full_member(self) -> bool {
        self.0 & 0x8000 != 0
    }

    /// The 15-bit partition number, without the membership bit.
    pub const fn base(self) -> u16 {
        self.0 & 0x7fff
    }

    /// Two P_Keys match when their bases are equal and at least one is a full member (IBA 10.9.3).
    pub const fn matches(self, other: PKey) -> bool {
        self.base() == other.base() && (self.is_full_member() || other.is_full_member())
    }
}

impl Default for PKey {
    fn default() -> Self {
        PKey::DEFAULT
    }
}

impl fmt::Display for PKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x}", self.0)
    }
}

/// Where one field of a header lies and what the spec calls it: declared once beside the
/// header's accessors, listed in wire order by each header's `FIELDS` for decoders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldInfo {
    /// The spec's name of the field.
    pub name: &'static str,
    /// Byte of the header where the field starts (for a CM message, of the MAD data after
    /// the 24-byte MAD header).
    pub byte: usize,
    /// First bit within that byte, 0 being the most significant.
    pub bit: u32,
    /// Width in bits.
    pub width: u32,
    /// What the field means (the field's documentation).
    pub doc: &'static str,
}

impl FieldInfo {
    /// A field of `width` bits from bit `bit` (0 = most significant) of byte `byte`.
    pub const fn new(
        name: &'static str,
        byte: usize,
        bit: u32,
        width: u32,
        doc: &'static str,
    ) -> FieldInfo {
        FieldInfo {
            name,
            byte,
            bit,
            width,
            doc,
        }
    }

    /// The field's bits as a number, for fields up to 64 bits wide; `None` for wider ones
    /// (GIDs, private data) or a header shorter than the field.
    pub fn read(&self, message: &[u8]) -> Option<u64> {
        if self.width > 64 || message.len() < self.end_byte() {
            return None;
        }
        Some(read_bits(message, self.byte, self.bit, self.width))
    }

    /// The field's bytes, for byte-aligned fields of whole bytes.
    pub fn bytes<'a>(&self, message: &'a [u8]) -> Option<&'a [u8]> {
        if self.bit != 0 || !self.width.is_multiple_of(8) {
            return None;
        }
        message.get(self.byte..self.end_byte())
    }

    /// The first bit of the field counted from the start of the message.
    pub const fn first_bit(&self) -> usize {
        self.byte * 8 + self.bit as usize
    }

    fn end_byte(&self) -> usize {
        (self.first_bit() + self.width as usize).div_ceil(8)
    }
}

/// Test helper: the fields tile a header (or message) of `len` bytes exactly (no gap, no overlap, in
/// order), so that `emit` writes every bit `parse` read.
#[cfg(test)]
pub(crate) fn assert_fields_tile_len(fields: &[FieldInfo], len: usize) {
    let mut next = 0;
    for f in fields {
        assert_eq!(
            f.first_bit(),
            next,
            "{} starts where the last field ended",
            f.name
        );
        assert!(f.width > 0 && (f.width <= 64 || f.bit == 0 && f.width % 8 == 0));
        assert!(!f.doc.is_empty(), "{} is documented", f.name);
        next += f.width as usize;
    }
    assert_eq!(next, len * 8, "fields cover the message");
}

// Big-endian accessors. Callers have checked the buffer length first (the `new_checked`
// constructors), so these index without further checks; a short buffer here is a bug in the
// caller, not bad input.

#[inline]
pub(crate) fn read_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

#[inline]
pub(crate) fn read_u24(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, buf[at], buf[at + 1], buf[at + 2]])
}

#[inline]
pub(crate) fn read_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(buf[at..at + 4].try_into().expect("4-byte slice"))
}

#[inline]
pub(crate) fn read_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(buf[at..at + 8].try_into().expect("8-byte slice"))
}

#[inline]
pub(crate) fn write_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn write_u24(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

#[inline]
pub(crate) fn write_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn write_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Reads a field of `width` bits (at most 64) starting `bit` bits into byte `byte`, bits
/// counted from the most significant (how the spec's message tables and the kernel's
/// `IBA_FIELD_BLOC` place sub-byte fields). The caller has checked the buffer's length.
pub(crate) fn read_bits(buf: &[u8], byte: usize, bit: u32, width: u32) -> u64 {
    let bytes = (bit + width).div_ceil(8) as usize;
    let mut acc: u128 = 0;
    for &b in &buf[byte..byte + bytes] {
        acc = acc << 8 | u128::from(b);
    }
    let shift = bytes as u32 * 8 - bit - width;
    ((acc >> shift) & ((1u128 << width) - 1)) as u64
}

/// Writes the low `width` bits of `value` where [`read_bits`] reads them, leaving the other
/// bits of the bytes it touches as they were.
pub(crate) fn write_bits(buf: &mut [u8], byte: usize, bit: u32, width: u32, value: u64) {
    let bytes = (bit + width).div_ceil(8) as usize;
    let span = &mut buf[byte..byte + bytes];
    let mut acc: u128 = 0;
    for &b in span.iter() {
        acc = acc << 8 | u128::from(b);
    }
    let shift = bytes as u32 * 8 - bit - width;
    let mask = ((1u128 << width) - 1) << shift;
    acc = (acc & !mask) | ((u128::from(value) << shift) & mask);
    for (i, b) in span.iter_mut().enumerate() {
        *b = (acc >> ((bytes - 1 - i) * 8)) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn psn_wraps_at_24_bits() {
        assert_eq!(Psn::MAX.next(), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1), Psn::MAX);
        assert_eq!(Psn::new(0x1_000_005), Psn::new(5));
    }

    #[test]
    fn psn_order_uses_half_window() {
        assert!(Psn::new(0) > Psn::MAX, "0 follows 2^24-1");
        assert!(Psn::new(5) < Psn::new(6));
        assert_eq!(Psn::new(3).distance(Psn::MAX), 4);
        assert_eq!(Psn::MAX.distance(Psn::new(3)), -4);
        // Exactly half the space away reads as "before": the sign bit is set.
        assert_eq!(Psn::new(0x80_0000).distance(Psn::new(0)), -0x80_0000);
    }

    #[test]
    fn pkey_membership() {
        assert!(PKey(0xffff).matches(PKey(0x7fff)));
        assert!(
            !PKey(0x7fff).matches(PKey(0x7fff)),
            "two limited members never match"
        );
        assert!(!PKey(0xffff).matches(PKey(0x8001)));
    }

    #[test]
    fn u24_round_trip() {
        let mut b = [0u8; 5];
        write_u24(&mut b, 1, 0x12_3456);
        assert_eq!(b, [0, 0x12, 0x34, 0x56, 0]);
        assert_eq!(read_u24(&b, 1), 0x12_3456);
    }

    #[test]
    fn bit_fields_count_from_the_most_significant_bit() {
        // REQ byte 43 of rping's ConnectRequest: 0xa0 = timeout 20 (5 bits), type 0, flag 0.
        let b = [0xa0];
        assert_eq!(read_bits(&b, 0, 0, 5), 20);
        assert_eq!(read_bits(&b, 0, 5, 2), 0);
        // A 20-bit flow label spanning three bytes, and the 6 bits after it.
        let mut w = [0xab, 0x1f, 0xa0, 0x2b];
        assert_eq!(read_bits(&w, 0, 0, 20), 0xab1fa);
        assert_eq!(read_bits(&w, 2, 4, 6), 0);
        assert_eq!(read_bits(&w, 3, 2, 6), 0x2b);
        write_bits(&mut w, 0, 0, 20, 0x12345);
        assert_eq!(w, [0x12, 0x34, 0x50, 0x2b]);
        write_bits(&mut w, 2, 4, 6, 0x3f);
        assert_eq!(w, [0x12, 0x34, 0x5f, 0xeb]);
    }

    proptest! {
        #[test]
        fn bits_write_then_read(byte in 0usize..4, bit in 0u32..8, width in 1u32..=64,
                                value: u64, fill: u8) {
            let mut buf = [fill; 16];
            write_bits(&mut buf, byte, bit, width, value);
            let mask = if width == 64 { u64::MAX } else { (1 << width) - 1 };
            prop_assert_eq!(read_bits(&buf, byte, bit, width), value & mask);
            // Bits outside the field keep their value.
            let before = buf;
            write_bits(&mut buf, byte, bit, width, !value);
            write_bits(&mut buf, byte, bit, width, value);
            prop_assert_eq!(buf, before);
        }

        #[test]
        fn psn_add_then_distance(a in 0u32..(1 << 24), n in 0u32..(1 << 23)) {
            let p = Psn::new(a);
            prop_assert_eq!(p.add(n).distance(p), n as i32);
            prop_assert_eq!(p.add(n).sub(n), p);
        }
    }
}
