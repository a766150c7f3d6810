//! Invalidate Extended Transport Header (IBA Vol. 1 9.3.8): the R_Key that a
//! SEND_*_WITH_INVALIDATE asks the responder to invalidate once the message is received.

use super::FixedHeader;
use super::field::{self, FieldInfo};
use super::header::header_view;

header_view!(
    /// A view over the 4 bytes of an IETH.
    Ieth,
    IethRepr
);

impl<T: AsRef<[u8]>> Ieth<T> {
    /// The R_Key the responder invalidates.
    pub fn rkey(&self) -> u32 {
        field::read_u32(self.bytes(), 0)
    }
}

/// The owned form of an IETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IethRepr {
    /// The R_Key to invalidate.
    pub rkey: u32,
}

impl IethRepr {
    /// The one field (IBA 9.3.8), for decoders.
    pub const FIELDS: [FieldInfo; 1] = [FieldInfo::new(
        "R_Key",
        0,
        0,
        32,
        "the responder invalidates this remote key",
    )];
}

impl FixedHeader for IethRepr {
    const NAME: &'static str = "IETH";
    const LEN: usize = 4;

    fn parse_unchecked(buf: &[u8]) -> Self {
        IethRepr {
            rkey: Ieth { buffer: buf }.rkey(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u32(buf, 0, self.rkey);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fixture() {
        assert_eq!(IethRepr::parse(&[0, 0, 0x12, 0x34]).unwrap().rkey, 0x1234);
    }

    round_trip_proptest!(IethRepr);

    fields_proptest!(IethRepr, |r: &IethRepr| vec![u64::from(r.rkey)]);
}
