//! Atomic Acknowledge Extended Transport Header (IBA Vol. 1 9.3.6): the value the target word
//! held before the atomic operation, returned in ATOMIC_ACKNOWLEDGE after the AETH.

use super::FixedHeader;
use super::field::{self, FieldInfo};
use super::header::header_view;

header_view!(
    /// A view over the 8 bytes of an AtomicAckETH.
    AtomicAckEth,
    AtomicAckEthRepr
);

impl<T: AsRef<[u8]>> AtomicAckEth<T> {
    /// The word's value before the atomic operation.
    pub fn orig(&self) -> u64 {
        field::read_u64(self.bytes(), 0)
    }
}

/// The owned form of an AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicAckEthRepr {
    /// Original remote data.
    pub orig: u64,
}

impl AtomicAckEthRepr {
    /// The one field (IBA 9.3.6), for decoders.
    pub const FIELDS: [FieldInfo; 1] = [FieldInfo::new(
        "Orig Remote Data",
        0,
        0,
        64,
        "the word's value before the atomic operation",
    )];
}

impl FixedHeader for AtomicAckEthRepr {
    const NAME: &'static str = "AtomicAckETH";
    const LEN: usize = 8;

    fn parse_unchecked(buf: &[u8]) -> Self {
        AtomicAckEthRepr {
            orig: AtomicAckEth { buffer: buf }.orig(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u64(buf, 0, self.orig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fixture() {
        let bytes = [0, 0, 0, 0, 0, 0, 0x01, 0x02];
        assert_eq!(AtomicAckEthRepr::parse(&bytes).unwrap().orig, 0x102);
    }

    round_trip_proptest!(AtomicAckEthRepr);

    fields_proptest!(AtomicAckEthRepr, |r: &AtomicAckEthRepr| vec![r.orig]);
}
