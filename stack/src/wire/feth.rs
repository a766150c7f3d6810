//! FLUSH Extended Transport Header (IBA Vol. 1 1.5, 9.3.9; rxe's `rxe_feth`): how far and how
//! persistently a FLUSH pushes prior writes. Bits 31..6 are reserved.
//!
//! ```text
//!  bits 5..4  selectivity level: 0 the RETH's range, 1 the whole memory region
//!  bits 3..0  placement type: bit 0 global visibility, bit 1 persistence
//! ```

use super::FixedHeader;
use super::field::{self, FieldInfo};
use super::header::header_view;

header_view!(
    /// A view over the 4 bytes of a FETH.
    Feth,
    FethRepr
);

impl<T: AsRef<[u8]>> Feth<T> {
    /// The whole 32-bit word.
    pub fn raw(&self) -> u32 {
        field::read_u32(self.bytes(), 0)
    }
}

/// Placement type bits (rxe's `enum ib_flush_type`).
pub mod placement {
    /// Make prior writes globally visible.
    pub const GLOBAL: u8 = 1;
    /// Make prior writes persistent.
    pub const PERSISTENT: u8 = 2;
}

/// Selectivity levels (rxe's `enum ib_flush_level`).
pub mod selectivity {
    /// The range the RETH names.
    pub const RANGE: u8 = 0;
    /// The whole memory region the R_Key names (the RETH's address and length are unused).
    pub const MEMORY_REGION: u8 = 1;
}

/// The whole 32-bit word is kept so that reserved bits survive a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FethRepr {
    /// The word: selectivity level in bits 5-4, placement type in bits 3-0.
    pub raw: u32,
}

impl FethRepr {
    /// A FETH of a selectivity level ([`selectivity`]) and placement bits ([`placement`]).
    pub const fn new(selectivity_level: u8, placement_type: u8) -> FethRepr {
        FethRepr {
            raw: ((selectivity_level as u32 & 0x3) << 4) | (placement_type as u32 & 0xf),
        }
    }
    /// The selectivity level, bits 5-4.
    pub const fn selectivity_level(self) -> u8 {
        ((self.raw >> 4) & 0x3) as u8
    }
    /// The placement type, bits 3-0.
    pub const fn placement_type(self) -> u8 {
        (self.raw & 0xf) as u8
    }

    /// The fields in wire order (IBA 9.3.9), for decoders.
    pub const FIELDS: [FieldInfo; 3] = [
        FieldInfo::new("Reserved", 0, 0, 26, "reserved"),
        FieldInfo::new(
            "SelectivityLevel",
            3,
            2,
            2,
            "0: the RETH's range; 1: the whole memory region",
        ),
        FieldInfo::new(
            "PlacementType",
            3,
            4,
            4,
            "bit 0: global visibility; bit 1: persistence",
        ),
    ];
}

impl FixedHeader for FethRepr {
    const NAME: &'static str = "FETH";
    const LEN: usize = 4;

    fn parse_unchecked(buf: &[u8]) -> Self {
        FethRepr {
            raw: Feth { buffer: buf }.raw(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u32(buf, 0, self.raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fields() {
        let f = FethRepr::parse(&[0, 0, 0, 0x12]).unwrap();
        assert_eq!((f.selectivity_level(), f.placement_type()), (1, 2));
        assert_eq!(FethRepr::new(1, 2), f);
    }

    round_trip_proptest!(FethRepr);

    fields_proptest!(FethRepr, |r: &FethRepr| vec![
        u64::from(r.raw >> 6),
        u64::from(r.selectivity_level()),
        u64::from(r.placement_type())
    ]);
}
