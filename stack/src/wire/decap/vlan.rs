//! The 802.1Q tag (IEEE 802.1Q 9.6) and the service tag that stacks on it, QinQ (802.1ad,
//! TPID 0x88A8; 0x9100 before the standard). A tag sits where the EtherType would be: its TPID
//! says a tag follows, then
//!
//! ```text
//!  bits 0-2    PCP: priority code point, the 802.1p class PFC pauses
//!  bit  3      DEI: drop eligible
//!  bits 4-15   VID: VLAN identifier
//!  bytes 2-3   EtherType of what follows (or the TPID of the next tag)
//! ```

use crate::wire::FixedHeader;
use crate::wire::encap::{ETHERTYPE_VLAN, VLAN_TAG_LEN, VlanTag};
use crate::wire::field::{self, FieldInfo};
use crate::wire::header::header_view;

/// TPID of an 802.1ad service tag (the outer tag of QinQ).
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
/// TPID of a service tag as switches wrote it before 802.1ad.
pub const ETHERTYPE_QINQ_LEGACY: u16 = 0x9100;

/// True for the TPIDs that announce a tag: 802.1Q's 0x8100 and QinQ's 0x88A8 and 0x9100.
pub const fn is_tpid(ethertype: u16) -> bool {
    matches!(
        ethertype,
        ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_LEGACY
    )
}

header_view! {
    /// A view over the 4 bytes after a tag's TPID: the TCI and the next EtherType.
    Tag, TagRepr,
    field_at { TCI = 0, ETHERTYPE = 2 }
}

impl<T: AsRef<[u8]>> Tag<T> {
    /// PCP: the 802.1p priority.
    pub fn pcp(&self) -> u8 {
        self.bytes()[field_at::TCI] >> 5
    }
    /// DEI: drop eligible.
    pub fn dei(&self) -> bool {
        self.bytes()[field_at::TCI] & 0x10 != 0
    }
    /// VID: the VLAN identifier.
    pub fn vid(&self) -> u16 {
        field::read_u16(self.bytes(), field_at::TCI) & 0x0fff
    }
    /// The EtherType after the tag (or the next TPID).
    pub fn ethertype(&self) -> u16 {
        field::read_u16(self.bytes(), field_at::ETHERTYPE)
    }
}

/// A tag and the EtherType after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TagRepr {
    /// PCP, DEI and VID.
    pub tag: VlanTag,
    /// The EtherType after the tag (or the next TPID).
    pub ethertype: u16,
}

impl TagRepr {
    /// The fields in wire order (802.1Q 9.6), for decoders.
    pub const FIELDS: [FieldInfo; 4] = [
        FieldInfo::new(
            "PCP",
            field_at::TCI,
            0,
            3,
            "802.1p priority: the class PFC pauses (lossless RoCE)",
        ),
        FieldInfo::new("DEI", field_at::TCI, 3, 1, "drop eligible"),
        FieldInfo::new("VID", field_at::TCI, 4, 12, "VLAN identifier"),
        FieldInfo::new(
            "EtherType",
            field_at::ETHERTYPE,
            0,
            16,
            "what follows the tag (another TPID: another tag)",
        ),
    ];
}

impl FixedHeader for TagRepr {
    const NAME: &'static str = "802.1Q tag";
    const LEN: usize = VLAN_TAG_LEN;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = Tag { buffer: buf };
        TagRepr {
            tag: VlanTag {
                pcp: v.pcp(),
                dei: v.dei(),
                vid: v.vid(),
            },
            ethertype: v.ethertype(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        let t = &self.tag;
        let tci = (u16::from(t.pcp & 0x7) << 13) | (u16::from(t.dei) << 12) | (t.vid & 0x0fff);
        field::write_u16(buf, field_at::TCI, tci);
        field::write_u16(buf, field_at::ETHERTYPE, self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fixture() {
        let t = TagRepr::parse(&[0x60, 0x64, 0x08, 0x00]).unwrap();
        assert_eq!((t.tag.pcp, t.tag.dei, t.tag.vid), (3, false, 100));
        assert_eq!(t.ethertype, 0x0800);
        assert!(is_tpid(0x8100) && is_tpid(0x88a8) && is_tpid(0x9100) && !is_tpid(0x0800));
    }

    round_trip_proptest!(TagRepr);

    fields_proptest!(TagRepr, |r: &TagRepr| vec![
        u64::from(r.tag.pcp),
        u64::from(r.tag.dei),
        u64::from(r.tag.vid),
        u64::from(r.ethertype)
    ]);
}
