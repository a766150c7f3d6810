//! RDMA Extended Transport Header (IBA Vol. 1 9.3.3): where an RDMA WRITE, READ, FLUSH or
//! ATOMIC_WRITE acts in the responder's memory.
//!
//! ```text
//!  bytes 0-7    virtual address
//!  bytes 8-11   R_Key
//!  bytes 12-15  DMA length (bytes of the whole message)
//! ```

use super::FixedHeader;
use super::field::{self, FieldInfo};
use super::header::header_view;

header_view! {
    /// A view over the 16 bytes of a RETH.
    Reth, RethRepr,
    field_at { VA = 0, RKEY = 8, DMA_LEN = 12 }
}

impl<T: AsRef<[u8]>> Reth<T> {
    /// The virtual address the data goes to or comes from.
    pub fn va(&self) -> u64 {
        field::read_u64(self.bytes(), field_at::VA)
    }
    /// The R_Key granting the access.
    pub fn rkey(&self) -> u32 {
        field::read_u32(self.bytes(), field_at::RKEY)
    }
    /// The length of the whole message (DMA length).
    pub fn dma_len(&self) -> u32 {
        field::read_u32(self.bytes(), field_at::DMA_LEN)
    }
}

/// The owned form of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RethRepr {
    /// Virtual address.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

impl RethRepr {
    /// The fields in wire order (IBA 9.3.3), for decoders.
    pub const FIELDS: [FieldInfo; 3] = [
        FieldInfo::new(
            "VA",
            field_at::VA,
            0,
            64,
            "virtual address in the responder's memory region",
        ),
        FieldInfo::new(
            "R_Key",
            field_at::RKEY,
            0,
            32,
            "remote key that grants access to that region",
        ),
        FieldInfo::new(
            "DMA Length",
            field_at::DMA_LEN,
            0,
            32,
            "bytes of the whole operation, not of this packet",
        ),
    ];
}

impl FixedHeader for RethRepr {
    const NAME: &'static str = "RETH";
    const LEN: usize = 16;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = Reth { buffer: buf };
        RethRepr {
            va: v.va(),
            rkey: v.rkey(),
            dma_len: v.dma_len(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u64(buf, field_at::VA, self.va);
        field::write_u32(buf, field_at::RKEY, self.rkey);
        field::write_u32(buf, field_at::DMA_LEN, self.dma_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fixture() {
        let bytes = [
            0x00, 0x00, 0x55, 0x55, 0x66, 0x77, 0x80, 0x00, 0x00, 0x00, 0x12, 0x34, 0x00, 0x01,
            0x00, 0x00,
        ];
        let repr = RethRepr::parse(&bytes).unwrap();
        assert_eq!(
            repr,
            RethRepr {
                va: 0x5555_6677_8000,
                rkey: 0x1234,
                dma_len: 65536
            }
        );
        let mut out = [0u8; 16];
        repr.emit(&mut out).unwrap();
        assert_eq!(out, bytes);
    }

    round_trip_proptest!(RethRepr);

    fields_proptest!(RethRepr, |r: &RethRepr| vec![
        r.va,
        u64::from(r.rkey),
        u64::from(r.dma_len)
    ]);
}
