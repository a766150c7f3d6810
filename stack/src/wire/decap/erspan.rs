//! ERSPAN, the mirror-port encapsulation of switches (draft-foschiano-erspan): a mirrored
//! Ethernet frame in GRE, after an ERSPAN header. Type II rides GRE protocol 0x88BE with a
//! sequence number; type I is the same protocol without one, and has no ERSPAN header at all;
//! type III rides 0x22EB and may add an 8-byte platform-specific subheader (its O bit).
//!
//! ```text
//!  type II (8 bytes)                      type III (12 bytes)
//!  bits 0-3    Ver: 1                     bits 0-3    Ver: 2
//!  bits 4-15   VLAN of the mirrored frame bits 4-15   VLAN
//!  bits 16-18  COS                        bits 16-18  COS
//!  bits 19-20  En: trunk encapsulation    bits 19-20  BSO: bad/short/oversized
//!  bit  21     T: truncated               bit  21     T: truncated
//!  bits 22-31  Session ID                 bits 22-31  Session ID
//!  bits 32-43  reserved                   bytes 4-7   Timestamp
//!  bits 44-63  Index: port and direction  bytes 8-9   SGT: security group tag
//!                                         bit  80     P: the frame is Ethernet
//!                                         bits 81-85  FT: frame type (0 Ethernet)
//!                                         bits 86-91  Hw ID
//!                                         bit  92     D: 0 ingress, 1 egress
//!                                         bits 93-94  Gra: timestamp granularity
//!                                         bit  95     O: a platform subheader follows
//! ```

use crate::wire::FixedHeader;
use crate::wire::field::{FieldInfo, read_bits, write_bits};

/// GRE protocol of ERSPAN type II (and type I, told apart by GRE's sequence number).
pub const GRE_PROTOCOL_ERSPAN_II: u16 = 0x88be;
/// GRE protocol of ERSPAN type III.
pub const GRE_PROTOCOL_ERSPAN_III: u16 = 0x22eb;
/// The Ver field of type II.
pub const VERSION_II: u8 = 1;
/// The Ver field of type III.
pub const VERSION_III: u8 = 2;

fn get(f: &FieldInfo, buf: &[u8]) -> u64 {
    read_bits(buf, f.byte, f.bit, f.width)
}

fn put(f: &FieldInfo, buf: &mut [u8], v: u64) {
    write_bits(buf, f.byte, f.bit, f.width, v);
}

const VER_DOC: &str = "ERSPAN version: 1 type II, 2 type III";
const VLAN_DOC: &str = "the mirrored frame's VLAN";
const COS_DOC: &str = "the mirrored frame's class of service";
const T_DOC: &str = "1: the mirrored frame was truncated";
const SESSION_DOC: &str = "the mirror session";

/// An ERSPAN type II header. Fields wider than theirs are masked on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErspanIIRepr {
    /// Ver: 1 for type II, 2 for type III.
    pub version: u8,
    /// The mirrored frame's VLAN (12 bits).
    pub vlan: u16,
    /// The mirrored frame's class of service (3 bits).
    pub cos: u8,
    /// En: how the frame was mirrored (2 bits).
    pub encap_type: u8,
    /// T: the mirrored frame was truncated.
    pub truncated: bool,
    /// The mirror session (10 bits).
    pub session_id: u16,
    /// Reserved (12 bits), kept as found.
    pub reserved: u16,
    /// The mirrored port and direction (20 bits).
    pub index: u32,
}

impl ErspanIIRepr {
    /// The fields in wire order, for decoders (and for parse and emit).
    pub const FIELDS: [FieldInfo; 8] = [
        FieldInfo::new("Ver", 0, 0, 4, VER_DOC),
        FieldInfo::new("VLAN", 0, 4, 12, VLAN_DOC),
        FieldInfo::new("COS", 2, 0, 3, COS_DOC),
        FieldInfo::new(
            "En",
            2,
            3,
            2,
            "how the frame was mirrored: 0 untagged, 1 ISL, 2 802.1Q, 3 VLAN kept",
        ),
        FieldInfo::new("T", 2, 5, 1, T_DOC),
        FieldInfo::new("Session ID", 2, 6, 10, SESSION_DOC),
        FieldInfo::new("Reserved", 4, 0, 12, "reserved, zero"),
        FieldInfo::new(
            "Index",
            5,
            4,
            20,
            "the mirrored port and direction, platform-defined",
        ),
    ];
}

impl FixedHeader for ErspanIIRepr {
    const NAME: &'static str = "ERSPAN II";
    const LEN: usize = 8;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let f = |i: usize| get(&Self::FIELDS[i], buf);
        ErspanIIRepr {
            version: f(0) as u8,
            vlan: f(1) as u16,
            cos: f(2) as u8,
            encap_type: f(3) as u8,
            truncated: f(4) != 0,
            session_id: f(5) as u16,
            reserved: f(6) as u16,
            index: f(7) as u32,
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        let values = [
            u64::from(self.version),
            u64::from(self.vlan),
            u64::from(self.cos),
            u64::from(self.encap_type),
            u64::from(self.truncated),
            u64::from(self.session_id),
            u64::from(self.reserved),
            u64::from(self.index),
        ];
        for (f, v) in Self::FIELDS.iter().zip(values) {
            put(f, buf, v);
        }
    }
}

/// An ERSPAN type III header (without its platform subheader). Fields wider than theirs are
/// masked on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErspanIIIRepr {
    /// Ver: 1 for type II, 2 for type III.
    pub version: u8,
    /// The mirrored frame's VLAN (12 bits).
    pub vlan: u16,
    /// The mirrored frame's class of service (3 bits).
    pub cos: u8,
    /// BSO: bad, short or oversized frame (2 bits).
    pub bso: u8,
    /// T: the mirrored frame was truncated.
    pub truncated: bool,
    /// The mirror session (10 bits).
    pub session_id: u16,
    /// When the frame was mirrored, in units of `granularity`.
    pub timestamp: u32,
    /// Security group tag.
    pub sgt: u16,
    /// P: the mirrored frame is Ethernet.
    pub p: bool,
    /// FT: frame type, 0 Ethernet (5 bits).
    pub frame_type: u8,
    /// The mirroring engine (6 bits).
    pub hw_id: u8,
    /// D: mirrored on egress (else ingress).
    pub direction: bool,
    /// Gra: timestamp granularity (2 bits).
    pub granularity: u8,
    /// O: a platform-specific subheader ([`ErspanPlatformRepr`]) follows.
    pub optional: bool,
}

impl ErspanIIIRepr {
    /// The fields in wire order, for decoders (and for parse and emit).
    pub const FIELDS: [FieldInfo; 14] = [
        FieldInfo::new("Ver", 0, 0, 4, VER_DOC),
        FieldInfo::new("VLAN", 0, 4, 12, VLAN_DOC),
        FieldInfo::new("COS", 2, 0, 3, COS_DOC),
        FieldInfo::new(
            "BSO",
            2,
            3,
            2,
            "0 good frame, 1 short, 2 oversized, 3 bad FCS",
        ),
        FieldInfo::new("T", 2, 5, 1, T_DOC),
        FieldInfo::new("Session ID", 2, 6, 10, SESSION_DOC),
        FieldInfo::new(
            "Timestamp",
            4,
            0,
            32,
            "when the frame was mirrored, in units of Gra",
        ),
        FieldInfo::new("SGT", 8, 0, 16, "security group tag"),
        FieldInfo::new("P", 10, 0, 1, "1: the mirrored frame is Ethernet"),
        FieldInfo::new("FT", 10, 1, 5, "frame type: 0 Ethernet, 2 IP"),
        FieldInfo::new("Hw ID", 10, 6, 6, "the mirroring engine"),
        FieldInfo::new("D", 11, 4, 1, "0 mirrored on ingress, 1 on egress"),
        FieldInfo::new(
            "Gra",
            11,
            5,
            2,
            "timestamp granularity: 0 100 us, 1 100 ns, 2 IEEE 1588, 3 platform",
        ),
        FieldInfo::new(
            "O",
            11,
            7,
            1,
            "1: an 8-byte platform-specific subheader follows",
        ),
    ];
}

impl FixedHeader for ErspanIIIRepr {
    const NAME: &'static str = "ERSPAN III";
    const LEN: usize = 12;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let f = |i: usize| get(&Self::FIELDS[i], buf);
        ErspanIIIRepr {
            version: f(0) as u8,
            vlan: f(1) as u16,
            cos: f(2) as u8,
            bso: f(3) as u8,
            truncated: f(4) != 0,
            session_id: f(5) as u16,
            timestamp: f(6) as u32,
            sgt: f(7) as u16,
            p: f(8) != 0,
            frame_type: f(9) as u8,
            hw_id: f(10) as u8,
            direction: f(11) != 0,
            granularity: f(12) as u8,
            optional: f(13) != 0,
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        let values = [
            u64::from(self.version),
            u64::from(self.vlan),
            u64::from(self.cos),
            u64::from(self.bso),
            u64::from(self.truncated),
            u64::from(self.session_id),
            u64::from(self.timestamp),
            u64::from(self.sgt),
            u64::from(self.p),
            u64::from(self.frame_type),
            u64::from(self.hw_id),
            u64::from(self.direction),
            u64::from(self.granularity),
            u64::from(self.optional),
        ];
        for (f, v) in Self::FIELDS.iter().zip(values) {
            put(f, buf, v);
        }
    }
}

/// ERSPAN III's platform-specific subheader: a platform ID and 58 bits the platform defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErspanPlatformRepr {
    /// The platform ID (6 bits): the layout of `info`.
    pub platform_id: u8,
    /// The 58 platform-specific bits.
    pub info: u64,
}

impl ErspanPlatformRepr {
    /// The fields in wire order, for decoders (and for parse and emit).
    pub const FIELDS: [FieldInfo; 2] = [
        FieldInfo::new(
            "Platf ID",
            0,
            0,
            6,
            "the layout of the rest (e.g. 3: port ID and upper timestamp)",
        ),
        FieldInfo::new("Platform info", 0, 6, 58, "platform-specific"),
    ];
}

impl FixedHeader for ErspanPlatformRepr {
    const NAME: &'static str = "ERSPAN III platform subheader";
    const LEN: usize = 8;

    fn parse_unchecked(buf: &[u8]) -> Self {
        ErspanPlatformRepr {
            platform_id: get(&Self::FIELDS[0], buf) as u8,
            info: get(&Self::FIELDS[1], buf),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        put(&Self::FIELDS[0], buf, u64::from(self.platform_id));
        put(&Self::FIELDS[1], buf, self.info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::header_proptests;

    #[test]
    fn fixtures() {
        // Session 100, VLAN 5, COS 3, index 0x12345 (as scapy's ERSPAN_II writes them).
        let ii = [0x10, 0x05, 0x60, 0x64, 0x00, 0x01, 0x23, 0x45];
        let r = ErspanIIRepr::parse(&ii).unwrap();
        assert_eq!((r.version, r.vlan, r.cos, r.session_id), (1, 5, 3, 100));
        assert_eq!(r.index, 0x12345);
        let iii = [0x20, 0, 0, 0x07, 0, 0, 0, 9, 0, 0, 0x80, 0x01];
        let r = ErspanIIIRepr::parse(&iii).unwrap();
        assert_eq!((r.version, r.session_id, r.timestamp), (2, 7, 9));
        assert!(r.p && r.optional && !r.direction);
    }

    header_proptests!(ii: ErspanIIRepr {
        version, vlan, cos, encap_type, truncated, session_id, reserved, index
    });

    header_proptests!(iii: ErspanIIIRepr {
        version, vlan, cos, bso, truncated, session_id, timestamp, sgt, p, frame_type, hw_id,
        direction, granularity, optional
    });

    header_proptests!(platform: ErspanPlatformRepr { platform_id, info });
}
