//! The RoCEv2 congestion notification packet body (Annex A17.9.3, Figure 6): after a BTH
//! with opcode 0x81 (PSN 0, the marked packet's P_Key, BECN set as NICs send it) come 16
//! reserved bytes, then the ICRC. The DestQP names the QP whose
//! traffic arrived CE-marked; the reaction point slows that QP down.

use super::FixedHeader;
use super::field::FieldInfo;
use super::header::header_view;

header_view!(
    /// A view over the 16 reserved bytes of a CNP.
    Cnp,
    CnpRepr
);

/// The reserved bytes are kept verbatim: senders must zero them but receivers ignore them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CnpRepr {
    /// The 16 bytes after the BTH.
    pub reserved: [u8; 16],
}

impl CnpRepr {
    /// The one field (Annex A17.9.3, Figure 6), for decoders.
    pub const FIELDS: [FieldInfo; 1] = [FieldInfo::new(
        "Reserved",
        0,
        0,
        128,
        "reserved; the receiver ignores them",
    )];
}

impl FixedHeader for CnpRepr {
    const NAME: &'static str = "CNP";
    const LEN: usize = 16;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let mut reserved = [0u8; 16];
        reserved.copy_from_slice(&buf[..16]);
        CnpRepr { reserved }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        buf[..16].copy_from_slice(&self.reserved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn zero_body() {
        assert_eq!(CnpRepr::parse(&[0; 16]).unwrap(), CnpRepr::default());
        assert!(CnpRepr::parse(&[0; 15]).is_err());
    }

    round_trip_proptest!(CnpRepr);

    fields_proptest!(CnpRepr, |_: &CnpRepr| vec![]);
}
