//! How a CM message's fields are declared: each once, with its place in the message (byte,
//! first bit counted from the most significant, width, as the spec's tables give them) and
//! the spec's name. From that one declaration come the view's accessors, the `Repr`, its
//! `parse`/`emit`, and the [`FieldInfo`] table the decoder walks to explain every field.

use core::net::Ipv6Addr;

use crate::wire::field::{self, PKey, Psn, Qpn};

pub use crate::wire::field::FieldInfo;

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

#[cfg(test)]
pub(crate) use crate::wire::field::assert_fields_tile_len;

/// [`assert_fields_tile_len`] for a CM message: the 232 bytes of MAD data.
#[cfg(test)]
pub(crate) fn assert_fields_tile(fields: &[FieldInfo]) {
    assert_fields_tile_len(fields, crate::wire::mad::MAD_DATA_LEN);
}
