//! Atomic Extended Transport Header (IBA Vol. 1 9.3.4): the operands of COMPARE_SWAP and
//! FETCH_ADD on one aligned 64-bit word of the responder's memory.
//!
//! ```text
//!  bytes 0-7    virtual address (8-byte aligned)
//!  bytes 8-11   R_Key
//!  bytes 12-19  swap data (COMPARE_SWAP) or add data (FETCH_ADD)
//!  bytes 20-27  compare data (COMPARE_SWAP; ignored by FETCH_ADD)
//! ```

use super::FixedHeader;
use super::field::{self, FieldInfo};
use super::header::header_view;

header_view! {
    /// A view over the 28 bytes of an AtomicETH.
    AtomicEth, AtomicEthRepr,
    field_at { VA = 0, RKEY = 8, SWAP_ADD = 12, COMPARE = 20 }
}

impl<T: AsRef<[u8]>> AtomicEth<T> {
    /// The virtual address of the 8-byte word.
    pub fn va(&self) -> u64 {
        field::read_u64(self.bytes(), field_at::VA)
    }
    /// The R_Key granting atomic access.
    pub fn rkey(&self) -> u32 {
        field::read_u32(self.bytes(), field_at::RKEY)
    }
    /// The swap value (COMPARE_SWAP) or the addend (FETCH_ADD).
    pub fn swap_add(&self) -> u64 {
        field::read_u64(self.bytes(), field_at::SWAP_ADD)
    }
    /// The compare value (COMPARE_SWAP; ignored by FETCH_ADD).
    pub fn compare(&self) -> u64 {
        field::read_u64(self.bytes(), field_at::COMPARE)
    }
}

/// The owned form of an AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicEthRepr {
    /// Virtual address of the 8-byte word.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// Swap value or addend.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

impl AtomicEthRepr {
    /// The fields in wire order (IBA 9.3.4), for decoders.
    pub const FIELDS: [FieldInfo; 4] = [
        FieldInfo::new(
            "VA",
            field_at::VA,
            0,
            64,
            "address of the 8-byte-aligned remote word",
        ),
        FieldInfo::new(
            "R_Key",
            field_at::RKEY,
            0,
            32,
            "remote key that grants access to it",
        ),
        FieldInfo::new(
            "Swap/Add Data",
            field_at::SWAP_ADD,
            0,
            64,
            "value to swap in (COMPARE_SWAP) or add (FETCH_ADD)",
        ),
        FieldInfo::new(
            "Compare Data",
            field_at::COMPARE,
            0,
            64,
            "COMPARE_SWAP swaps only if the word equals this",
        ),
    ];
}

impl FixedHeader for AtomicEthRepr {
    const NAME: &'static str = "AtomicETH";
    const LEN: usize = 28;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = AtomicEth { buffer: buf };
        AtomicEthRepr {
            va: v.va(),
            rkey: v.rkey(),
            swap_add: v.swap_add(),
            compare: v.compare(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u64(buf, field_at::VA, self.va);
        field::write_u32(buf, field_at::RKEY, self.rkey);
        field::write_u64(buf, field_at::SWAP_ADD, self.swap_add);
        field::write_u64(buf, field_at::COMPARE, self.compare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fixture() {
        let mut bytes = [0u8; 28];
        bytes[7] = 0x08;
        bytes[11] = 0x42;
        bytes[19] = 0x01;
        bytes[20] = 0x80;
        let repr = AtomicEthRepr::parse(&bytes).unwrap();
        assert_eq!(
            repr,
            AtomicEthRepr {
                va: 8,
                rkey: 0x42,
                swap_add: 1,
                compare: 0x8000_0000_0000_0000
            }
        );
    }

    round_trip_proptest!(AtomicEthRepr);

    fields_proptest!(AtomicEthRepr, |r: &AtomicEthRepr| vec![
        r.va,
        u64::from(r.rkey),
        r.swap_add,
        r.compare
    ]);
}
