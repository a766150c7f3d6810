//! Geneve (RFC 8926): a frame in UDP to port 6081 after an 8-byte header and its options.
//!
//! ```text
//!  bits 0-1    Ver: 0
//!  bits 2-7    Opt Len: options after the fixed header, in 4-byte words
//!  bit  8      O: an OAM frame
//!  bit  9      C: a critical option is present
//!  bits 10-15  reserved
//!  bytes 2-3   Protocol Type: the EtherType of the payload (0x6558: an Ethernet frame)
//!  bytes 4-6   VNI
//!  byte 7      reserved
//! ```

use crate::wire::FixedHeader;
use crate::wire::field::{self, FieldInfo};
use crate::wire::header::header_view;

use super::vxlan::vni_word;

/// The IANA UDP port of Geneve.
pub const GENEVE_UDP_PORT: u16 = 6081;
/// The only Geneve version (RFC 8926 3.4).
pub const VERSION: u8 = 0;

header_view! {
    /// A view over the fixed 8 bytes of a Geneve header (the options follow).
    Geneve, GeneveRepr,
    field_at { VER_OPT_LEN = 0, FLAGS = 1, PROTOCOL = 2, VNI = 4, RESERVED2 = 7 }
}

impl<T: AsRef<[u8]>> Geneve<T> {
    /// Ver: 0.
    pub fn version(&self) -> u8 {
        self.bytes()[field_at::VER_OPT_LEN] >> 6
    }
    /// Opt Len: options in 4-byte words.
    pub fn opt_len(&self) -> u8 {
        self.bytes()[field_at::VER_OPT_LEN] & 0x3f
    }
    /// O: an OAM frame.
    pub fn oam(&self) -> bool {
        self.bytes()[field_at::FLAGS] & 0x80 != 0
    }
    /// C: a critical option is present.
    pub fn critical(&self) -> bool {
        self.bytes()[field_at::FLAGS] & 0x40 != 0
    }
    /// The 6 reserved bits after the flags.
    pub fn reserved1(&self) -> u8 {
        self.bytes()[field_at::FLAGS] & 0x3f
    }
    /// Protocol Type: the EtherType of the payload.
    pub fn protocol(&self) -> u16 {
        field::read_u16(self.bytes(), field_at::PROTOCOL)
    }
    vni_word!(accessors);
}

/// A Geneve header's fixed part; fields wider than theirs are masked on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GeneveRepr {
    /// Ver (2 bits).
    pub version: u8,
    /// Options length in 4-byte words (6 bits).
    pub opt_len: u8,
    /// O: an OAM frame.
    pub oam: bool,
    /// C: a critical option is present.
    pub critical: bool,
    /// Reserved bits after the flags (6 bits).
    pub reserved1: u8,
    /// The EtherType of the payload.
    pub protocol: u16,
    /// The virtual network identifier (24 bits).
    pub vni: u32,
    /// The reserved byte after the VNI.
    pub reserved2: u8,
}

impl GeneveRepr {
    /// The header and its options, in bytes.
    pub const fn header_len(&self) -> usize {
        Self::LEN + 4 * (self.opt_len & 0x3f) as usize
    }

    /// The fields in wire order (RFC 8926 3.4), for decoders.
    pub const FIELDS: [FieldInfo; 8] = [
        FieldInfo::new("Ver", field_at::VER_OPT_LEN, 0, 2, "Geneve version, 0"),
        FieldInfo::new(
            "Opt Len",
            field_at::VER_OPT_LEN,
            2,
            6,
            "options after this header, in 4-byte words",
        ),
        FieldInfo::new("O", field_at::FLAGS, 0, 1, "an OAM (control) frame"),
        FieldInfo::new("C", field_at::FLAGS, 1, 1, "a critical option is present"),
        FieldInfo::new("Reserved", field_at::FLAGS, 2, 6, "reserved, zero"),
        FieldInfo::new(
            "Protocol Type",
            field_at::PROTOCOL,
            0,
            16,
            "EtherType of the payload: 0x6558 an Ethernet frame",
        ),
        FieldInfo::new("VNI", field_at::VNI, 0, 24, "virtual network identifier"),
        FieldInfo::new("Reserved", field_at::RESERVED2, 0, 8, "reserved, zero"),
    ];
}

impl FixedHeader for GeneveRepr {
    const NAME: &'static str = "Geneve";
    const LEN: usize = 8;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = Geneve { buffer: buf };
        GeneveRepr {
            version: v.version(),
            opt_len: v.opt_len(),
            oam: v.oam(),
            critical: v.critical(),
            reserved1: v.reserved1(),
            protocol: v.protocol(),
            vni: v.vni(),
            reserved2: v.reserved2(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        buf[field_at::VER_OPT_LEN] = (self.version << 6) | (self.opt_len & 0x3f);
        buf[field_at::FLAGS] =
            (u8::from(self.oam) << 7) | (u8::from(self.critical) << 6) | (self.reserved1 & 0x3f);
        field::write_u16(buf, field_at::PROTOCOL, self.protocol);
        vni_word!(emit buf, self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fixture() {
        let g = GeneveRepr::parse(&[0x02, 0x40, 0x65, 0x58, 0, 0, 7, 0]).unwrap();
        assert_eq!((g.version, g.opt_len, g.critical), (0, 2, true));
        assert_eq!((g.protocol, g.vni, g.header_len()), (0x6558, 7, 16));
    }

    round_trip_proptest!(GeneveRepr);

    fields_proptest!(GeneveRepr, |r: &GeneveRepr| vec![
        u64::from(r.version),
        u64::from(r.opt_len),
        u64::from(r.oam),
        u64::from(r.critical),
        u64::from(r.reserved1),
        u64::from(r.protocol),
        u64::from(r.vni),
        u64::from(r.reserved2)
    ]);
}
