//! What every fixed-size RoCEv2 header has in common: a checked view over bytes and an owned
//! representation that parses from and emits into exactly `LEN` bytes.

use super::error::{Result, check_len};

/// An owned header value with a fixed wire size.
///
/// `parse` reads the first `LEN` bytes of a buffer (anything after belongs to the next header),
/// `emit` writes exactly `LEN` bytes. Both fail on a short buffer instead of panicking; a
/// successful `parse` followed by `emit` reproduces the bytes, reserved bits included.
pub trait FixedHeader: Sized {
    /// The header's name in the spec, used in errors and decoders.
    const NAME: &'static str;
    /// Size on the wire in bytes.
    const LEN: usize;

    /// Reads the header from the first `LEN` bytes of a buffer at least that long.
    fn parse_unchecked(buf: &[u8]) -> Self;

    /// Writes the header into the first `LEN` bytes of a buffer at least that long.
    fn emit_unchecked(&self, buf: &mut [u8]);

    /// Reads the header, or says the buffer is too short.
    fn parse(buf: &[u8]) -> Result<Self> {
        check_len(Self::NAME, buf, Self::LEN)?;
        Ok(Self::parse_unchecked(buf))
    }

    /// Writes the header, or says the buffer is too short.
    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_len(Self::NAME, buf, Self::LEN)?;
        self.emit_unchecked(buf);
        Ok(())
    }

    /// The header's length on the wire, `LEN`.
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
}

/// Declares a zero-copy view `$view<T: AsRef<[u8]>>` over a fixed-size header: checked
/// construction, after which no accessor can panic. With `field_at { NAME = byte, .. }` (or
/// another module name) it also declares the header's field offsets as `field_at::NAME`, so
/// that one declaration says where each field is; the accessors, `Repr` and `FIELDS` are
/// written per header and read them.
macro_rules! header_view {
    ($(#[$doc:meta])* $view:ident, $repr:ty, $at_mod:ident { $($field:ident = $at:expr),+ $(,)? }) => {
        /// Where each field starts: its byte in the header.
        mod $at_mod {
            $(pub const $field: usize = $at;)+
        }

        $crate::wire::header::header_view!($(#[$doc])* $view, $repr);
    };
    ($(#[$doc:meta])* $view:ident, $repr:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $view<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $view<T> {
            /// Size of the header on the wire.
            pub const LEN: usize = <$repr as $crate::wire::FixedHeader>::LEN;

            /// Wraps `buffer` after checking it holds the whole header.
            pub fn new_checked(buffer: T) -> $crate::wire::Result<Self> {
                $crate::wire::error::check_len(
                    <$repr as $crate::wire::FixedHeader>::NAME,
                    buffer.as_ref(),
                    Self::LEN,
                )?;
                Ok(Self { buffer })
            }

            /// The buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// The header's own bytes (the buffer may continue past them).
            pub fn header_bytes(&self) -> &[u8] {
                &self.buffer.as_ref()[..Self::LEN]
            }

            /// Whatever follows the header in the buffer.
            pub fn rest(&self) -> &[u8] {
                &self.buffer.as_ref()[Self::LEN..]
            }

            /// The owned representation of these bytes.
            pub fn repr(&self) -> $repr {
                <$repr as $crate::wire::FixedHeader>::parse_unchecked(self.buffer.as_ref())
            }

            #[allow(dead_code)]
            fn bytes(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $view<T> {
            #[allow(dead_code)]
            fn bytes_mut(&mut self) -> &mut [u8] {
                self.buffer.as_mut()
            }
        }
    };
}

pub(crate) use header_view;

/// Proptest helper: `Repr -> emit -> parse` gives the Repr back, and `parse -> emit` of
/// arbitrary bytes gives the same bytes.
#[cfg(test)]
pub(crate) fn assert_round_trips<H: FixedHeader + PartialEq + core::fmt::Debug>(
    repr: &H,
    raw: &[u8],
) {
    let mut buf = vec![0u8; H::LEN];
    repr.emit(&mut buf).expect("buffer is LEN long");
    assert_eq!(&H::parse(&buf).expect("LEN bytes parse"), repr);

    let parsed = H::parse(raw).expect("raw holds LEN bytes");
    let mut again = vec![0u8; H::LEN];
    parsed.emit(&mut again).expect("buffer is LEN long");
    assert_eq!(&again[..], &raw[..H::LEN]);

    assert!(
        H::parse(&raw[..H::LEN - 1]).is_err(),
        "one byte short must fail"
    );
}

/// Declares the proptest round trip of a fixed header (see [`assert_round_trips`]).
#[cfg(test)]
macro_rules! round_trip_proptest {
    ($repr:ty) => {
        proptest::proptest! {
            #[test]
            fn round_trip(raw in proptest::collection::vec(proptest::prelude::any::<u8>(),
                    <$repr as $crate::wire::FixedHeader>::LEN..<$repr as $crate::wire::FixedHeader>::LEN + 8)) {
                let repr = <$repr as $crate::wire::FixedHeader>::parse(&raw).unwrap();
                $crate::wire::header::assert_round_trips(&repr, &raw);
            }
        }
    };
}

#[cfg(test)]
pub(crate) use round_trip_proptest;

/// Test helper: `fields` cover the header's bits exactly once, in wire order, and read from
/// `raw` what the `Repr` parsed (`values`, one per field up to 64 bits wide).
#[cfg(test)]
pub(crate) fn assert_fields<H: FixedHeader>(
    fields: &[super::field::FieldInfo],
    raw: &[u8],
    values: &[u64],
) {
    super::field::assert_fields_tile_len(fields, H::LEN);
    let read: Vec<u64> = fields.iter().filter_map(|f| f.read(raw)).collect();
    assert_eq!(
        read,
        values,
        "{}'s fields read what the accessors read",
        H::NAME
    );
}

/// Declares the proptest that `$repr::FIELDS` say where the accessors read (see
/// [`assert_fields`]); `$values` maps a parsed `Repr` to its field values in wire order.
#[cfg(test)]
macro_rules! fields_proptest {
    ($repr:ty, $values:expr) => {
        proptest::proptest! {
            #[test]
            fn fields_say_where_the_accessors_read(raw in proptest::collection::vec(
                    proptest::prelude::any::<u8>(), <$repr as $crate::wire::FixedHeader>::LEN)) {
                let repr = <$repr as $crate::wire::FixedHeader>::parse(&raw).unwrap();
                let values: Vec<u64> = ($values)(&repr);
                $crate::wire::header::assert_fields::<$repr>(&<$repr>::FIELDS, &raw, &values);
            }
        }
    };
}

#[cfg(test)]
pub(crate) use fields_proptest;

/// A parsed field as the number [`FieldInfo::read`](super::field::FieldInfo::read) gives for
/// it, so that [`header_proptests!`] can list a header's fields by name.
#[cfg(test)]
pub(crate) trait FieldValue {
    fn field_value(&self) -> u64;
}

#[cfg(test)]
macro_rules! field_value_from {
    ($($t:ty),+) => {
        $(impl FieldValue for $t {
            fn field_value(&self) -> u64 {
                u64::from(*self)
            }
        })+
    };
}

#[cfg(test)]
field_value_from!(bool, u8, u16, u32, u64);

/// An 8-byte address field, read as one big-endian number.
#[cfg(test)]
impl FieldValue for [u8; 8] {
    fn field_value(&self) -> u64 {
        u64::from_be_bytes(*self)
    }
}

/// Declares module `$module` with both proptests of a fixed header (see
/// [`round_trip_proptest!`] and [`fields_proptest!`]) for a `Repr` whose `FIELDS` are its
/// public `$field`s, in wire order.
#[cfg(test)]
macro_rules! header_proptests {
    ($module:ident: $repr:ident { $($field:ident),+ $(,)? }) => {
        mod $module {
            use super::*;
            $crate::wire::header::round_trip_proptest!($repr);
            $crate::wire::header::fields_proptest!($repr, |r: &$repr| vec![
                $($crate::wire::header::FieldValue::field_value(&r.$field)),+
            ]);
        }
    };
}

#[cfg(test)]
pub(crate) use header_proptests;
