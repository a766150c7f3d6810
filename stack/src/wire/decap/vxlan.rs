//! VXLAN (RFC 7348): an Ethernet frame in UDP to port 4789, after an 8-byte header.
//!
//! ```text
//!  byte 0      flags: 0x08 (I) says the VNI is valid; the rest reserved
//!  bytes 1-3   reserved
//!  bytes 4-6   VNI: the overlay network the frame belongs to
//!  byte 7      reserved
//! ```

use crate::wire::FixedHeader;
use crate::wire::field::{self, FieldInfo};
use crate::wire::header::header_view;

/// The IANA UDP port of VXLAN.
pub const VXLAN_UDP_PORT: u16 = 4789;
/// The I flag: the VNI is valid (RFC 7348 5).
pub const FLAG_VNI_VALID: u8 = 0x08;

header_view! {
    /// A view over the 8-byte VXLAN header.
    Vxlan, VxlanRepr,
    field_at { FLAGS = 0, RESERVED1 = 1, VNI = 4, RESERVED2 = 7 }
}

impl<T: AsRef<[u8]>> Vxlan<T> {
    /// The flags byte (0x08: the VNI is valid).
    pub fn flags(&self) -> u8 {
        self.bytes()[field_at::FLAGS]
    }
    /// The 24 reserved bits after the flags.
    pub fn reserved1(&self) -> u32 {
        field::read_u24(self.bytes(), field_at::RESERVED1)
    }
    vni_word!(accessors);
}

/// The 32-bit word VXLAN and Geneve share (RFC 8926 3.4 keeps VXLAN's layout): the 24-bit
/// VNI at `field_at::VNI` and the reserved byte after it at `field_at::RESERVED2`, in the
/// caller's module. `vni_word!(accessors)` declares a view's `vni()` and `reserved2()`;
/// `vni_word!(emit buf, repr)` writes a Repr's `vni` and `reserved2` into `buf`.
macro_rules! vni_word {
    (accessors) => {
        /// The virtual network identifier: the overlay segment.
        pub fn vni(&self) -> u32 {
            $crate::wire::field::read_u24(self.bytes(), field_at::VNI)
        }
        /// The reserved byte after the VNI.
        pub fn reserved2(&self) -> u8 {
            self.bytes()[field_at::RESERVED2]
        }
    };
    (emit $buf:ident, $repr:expr) => {
        $crate::wire::field::write_u24($buf, field_at::VNI, $repr.vni);
        $buf[field_at::RESERVED2] = $repr.reserved2;
    };
}

pub(super) use vni_word;

/// A VXLAN header; 24-bit fields wider than 24 bits are masked on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanRepr {
    /// The flags byte.
    pub flags: u8,
    /// Reserved (24 bits).
    pub reserved1: u32,
    /// The VXLAN network identifier (24 bits).
    pub vni: u32,
    /// Reserved.
    pub reserved2: u8,
}

impl VxlanRepr {
    /// As a VTEP sends it: the I flag set, reserved fields zero.
    pub const fn new(vni: u32) -> VxlanRepr {
        VxlanRepr {
            flags: FLAG_VNI_VALID,
            reserved1: 0,
            vni: vni & 0xff_ffff,
            reserved2: 0,
        }
    }

    /// The fields in wire order (RFC 7348 5), for decoders.
    pub const FIELDS: [FieldInfo; 4] = [
        FieldInfo::new(
            "Flags",
            field_at::FLAGS,
            0,
            8,
            "0x08 (I): the VNI is valid; other bits reserved",
        ),
        FieldInfo::new("Reserved", field_at::RESERVED1, 0, 24, "reserved, zero"),
        FieldInfo::new(
            "VNI",
            field_at::VNI,
            0,
            24,
            "VXLAN network identifier: the overlay segment",
        ),
        FieldInfo::new("Reserved", field_at::RESERVED2, 0, 8, "reserved, zero"),
    ];
}

impl FixedHeader for VxlanRepr {
    const NAME: &'static str = "VXLAN";
    const LEN: usize = 8;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = Vxlan { buffer: buf };
        VxlanRepr {
            flags: v.flags(),
            reserved1: v.reserved1(),
            vni: v.vni(),
            reserved2: v.reserved2(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        buf[field_at::FLAGS] = self.flags;
        field::write_u24(buf, field_at::RESERVED1, self.reserved1);
        vni_word!(emit buf, self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fixture() {
        let v = VxlanRepr::parse(&[0x08, 0, 0, 0, 0x00, 0x12, 0x34, 0]).unwrap();
        assert_eq!(v, VxlanRepr::new(0x1234));
    }

    round_trip_proptest!(VxlanRepr);

    fields_proptest!(VxlanRepr, |r: &VxlanRepr| vec![
        u64::from(r.flags),
        u64::from(r.reserved1),
        u64::from(r.vni),
        u64::from(r.reserved2)
    ]);
}
