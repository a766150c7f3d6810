//! How a CM message's fields are declared: each once, with its place in the message (byte,
//! first bit counted from the most significant, width, as the spec's tables give them) and
//! the spec's name. From that one declaration come the view's accessors, the `Repr`, its
//! `parse`/`emit`, and the [`FieldInfo`] table the decoder walks to explain every field.

use core::net::Ipv6Addr;

use crate::wire::field::{self, PKey, Psn, Qpn};

/// One field of a CM message, as the decoder lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldInfo {
    /// The spec's name of the field.
    pub name: &'static str,
    /// Byte of the message (after the 24-byte MAD header) where the field starts.
    pub byte: usize,
    /// First bit within that byte, 0 being the most significant.
    pub bit: u32,
    /// Width in bits.
    pub width: u32,
    /// What the field means (the field's documentation).
    pub doc: &'static str,
}

impl FieldInfo {
    /// The field's bits as a number, for fields up to 64 bits wide; `None` for wider ones
    /// (GIDs, private data) or a message shorter than the field.
    pub fn read(&self, message: &[u8]) -> Option<u64> {
        if self.width > 64 || message.len() < self.end_byte() {
            return None;
        }
        Some(field::read_bits(message, self.byte, self.bit, self.width))
    }

    /// The field's bytes, for byte-aligned fields of whole bytes.
    pub fn bytes<'a>(&self, message: &'a [u8]) -> Option<&'a [u8]> {
        if self.bit != 0 || self.width % 8 != 0 {
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

/// A field's place: byte, first bit, width.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loc {
    pub byte: usize,
    pub bit: u32,
    pub width: u32,
}

/// A value a CM field holds: read from and written to its [`Loc`] exactly.
pub(crate) trait CmField: Sized {
    fn read(buf: &[u8], at: Loc) -> Self;
    fn write(&self, buf: &mut [u8], at: Loc);
}

macro_rules! number_field {
    ($($ty:ty),*) => {$(
        impl CmField for $ty {
            fn read(buf: &[u8], at: Loc) -> Self {
                field::read_bits(buf, at.byte, at.bit, at.width) as $ty
            }
            fn write(&self, buf: &mut [u8], at: Loc) {
                field::write_bits(buf, at.byte, at.bit, at.width, u64::from(*self));
            }
        }
    )*};
}
number_field!(u8, u16, u32, u64);

impl CmField for bool {
    fn read(buf: &[u8], at: Loc) -> Self {
        field::read_bits(buf, at.byte, at.bit, at.width) != 0
    }
    fn write(&self, buf: &mut [u8], at: Loc) {
        field::write_bits(buf, at.byte, at.bit, at.width, u64::from(*self));
    }
}

impl CmField for Qpn {
    fn read(buf: &[u8], at: Loc) -> Self {
        Qpn::new(u32::read(buf, at))
    }
    fn write(&self, buf: &mut [u8], at: Loc) {
        self.value().write(buf, at);
    }
}

impl CmField for Psn {
    fn read(buf: &[u8], at: Loc) -> Self {
        Psn::new(u32::read(buf, at))
    }
    fn write(&self, buf: &mut [u8], at: Loc) {
        self.value().write(buf, at);
    }
}

impl CmField for PKey {
    fn read(buf: &[u8], at: Loc) -> Self {
        PKey(u16::read(buf, at))
    }
    fn write(&self, buf: &mut [u8], at: Loc) {
        self.0.write(buf, at);
    }
}

// Wide fields are whole, aligned bytes in every CM message.
impl<const N: usize> CmField for [u8; N] {
    fn read(buf: &[u8], at: Loc) -> Self {
        let mut out = [0u8; N];
        out.copy_from_slice(&buf[at.byte..at.byte + N]);
        out
    }
    fn write(&self, buf: &mut [u8], at: Loc) {
        buf[at.byte..at.byte + N].copy_from_slice(self);
    }
}

impl CmField for Ipv6Addr {
    fn read(buf: &[u8], at: Loc) -> Self {
        Ipv6Addr::from(<[u8; 16]>::read(buf, at))
    }
    fn write(&self, buf: &mut [u8], at: Loc) {
        self.octets().write(buf, at);
    }
}

/// Declares one CM message: a view, a `Repr` of all its fields (reserved ones too, so that
/// `parse` then `emit` gives back every bit), `FixedHeader` over the 232 bytes of MAD data,
/// and `FIELDS` for the decoder. Each field: `/// doc` then
/// `name "Spec Name": Type = (byte, bit, width);`.
macro_rules! cm_message {
    (
        $(#[$doc:meta])*
        $view:ident, $repr:ident, $name:literal;
        $( $(#[doc = $fdoc:literal])* $field:ident $label:literal : $ty:ty = ($byte:expr, $bit:expr, $width:expr); )*
    ) => {
        $crate::wire::header::header_view!($(#[$doc])* $view, $repr);

        impl<T: AsRef<[u8]>> $view<T> {
            $(
                $(#[doc = $fdoc])*
                pub fn $field(&self) -> $ty {
                    <$ty as $crate::wire::cm::layout::CmField>::read(
                        self.bytes(),
                        $crate::wire::cm::layout::Loc { byte: $byte, bit: $bit, width: $width },
                    )
                }
            )*
        }

        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub struct $repr {
            $( $(#[doc = $fdoc])* pub $field: $ty, )*
        }

        impl $repr {
            /// Every field of the message in wire order, for decoders.
            pub const FIELDS: &'static [$crate::wire::cm::layout::FieldInfo] = &[
                $( $crate::wire::cm::layout::FieldInfo {
                    name: $label,
                    byte: $byte,
                    bit: $bit,
                    width: $width,
                    doc: concat!($($fdoc),*),
                }, )*
            ];
        }

        impl $crate::wire::FixedHeader for $repr {
            const NAME: &'static str = $name;
            const LEN: usize = $crate::wire::mad::MAD_DATA_LEN;

            fn parse_unchecked(buf: &[u8]) -> Self {
                let v = $view { buffer: buf };
                $repr { $( $field: v.$field(), )* }
            }

            fn emit_unchecked(&self, buf: &mut [u8]) {
                $(
                    $crate::wire::cm::layout::CmField::write(
                        &self.$field,
                        buf,
                        $crate::wire::cm::layout::Loc { byte: $byte, bit: $bit, width: $width },
                    );
                )*
            }
        }
    };
}

pub(crate) use cm_message;

/// Test helper: the fields tile a message of `len` bytes exactly (no gap, no overlap, in
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

/// [`assert_fields_tile_len`] for a CM message: the 232 bytes of MAD data.
#[cfg(test)]
pub(crate) fn assert_fields_tile(fields: &[FieldInfo]) {
    assert_fields_tile_len(fields, crate::wire::mad::MAD_DATA_LEN);
}
