//! Immediate Data Extended Transport Header (IBA Vol. 1 9.3.7): 32 bits the responder hands to
//! the consumer in the receive completion of a *_WITH_IMMEDIATE message. Opaque to the
//! transport; shown in network byte order, as ibv_wc.imm_data carries it.

use super::FixedHeader;
use super::field::{self, FieldInfo};
use super::header::header_view;

header_view!(
    /// A view over the 4 bytes of an ImmDt.
    ImmDt,
    ImmDtRepr
);

impl<T: AsRef<[u8]>> ImmDt<T> {
    /// The immediate data, as sent (big-endian on the wire).
    pub fn imm(&self) -> u32 {
        field::read_u32(self.bytes(), 0)
    }
}

/// The owned form of an ImmDt header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImmDtRepr {
    /// Immediate data.
    pub imm: u32,
}

impl ImmDtRepr {
    /// The one field (IBA 9.3.7), for decoders.
    pub const FIELDS: [FieldInfo; 1] = [FieldInfo::new(
        "Immediate Data",
        0,
        0,
        32,
        "handed to the receiver in its completion",
    )];
}

impl FixedHeader for ImmDtRepr {
    const NAME: &'static str = "ImmDt";
    const LEN: usize = 4;

    fn parse_unchecked(buf: &[u8]) -> Self {
        ImmDtRepr {
            imm: ImmDt { buffer: buf }.imm(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u32(buf, 0, self.imm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fixture() {
        assert_eq!(
            ImmDtRepr::parse(&[0xde, 0xad, 0xbe, 0xef]).unwrap().imm,
            0xdead_beef
        );
    }

    round_trip_proptest!(ImmDtRepr);

    fields_proptest!(ImmDtRepr, |r: &ImmDtRepr| vec![u64::from(r.imm)]);
}
