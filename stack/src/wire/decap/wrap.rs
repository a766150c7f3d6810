//! Puts an Ethernet frame inside the outer layers the slicer takes off: what test captures,
//! fuzz seeds and cross-checks against other dissectors are made with. Each layer is emitted
//! by its own wire type, so the slicer and this are the two halves of one definition.

use core::net::Ipv4Addr;

use etherparse::{IpNumber, Ipv4Header};

use super::OuterKind;
use super::erspan::{
    ErspanIIIRepr, ErspanIIRepr, ErspanPlatformRepr, GRE_PROTOCOL_ERSPAN_II,
    GRE_PROTOCOL_ERSPAN_III, VERSION_II, VERSION_III,
};
use super::geneve::{GENEVE_UDP_PORT, GeneveRepr};
use super::gre::{ETHERTYPE_TEB, GreRepr, IP_PROTOCOL_GRE};
use super::sll::{Sll2Repr, SllRepr};
use super::vlan::{ETHERTYPE_QINQ, ETHERTYPE_QINQ_LEGACY, TagRepr};
use super::vxlan::{VXLAN_UDP_PORT, VxlanRepr};
use crate::wire::FixedHeader;
use crate::wire::encap::{
    DEFAULT_TTL, ETHERNET_HEADER_LEN, ETHERTYPE_IPV4, ETHERTYPE_VLAN, IP_PROTOCOL_UDP,
    UDP_HEADER_LEN, VlanTag, internet_checksum,
};
use crate::wire::packet::LinkHeader;

/// One way to wrap a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wrapping {
    /// An 802.1Q tag (PCP 3, VID 100) after the MACs.
    Vlan,
    /// An 802.1ad service tag (VID 200) over an 802.1Q tag.
    QinQ,
    /// The same with the pre-standard TPID 0x9100.
    QinQ9100,
    /// Ethernet, IPv4, UDP 4789, VXLAN (VNI 42).
    Vxlan,
    /// Ethernet, IPv4, UDP 6081, Geneve (VNI 42) with one 8-byte option.
    Geneve,
    /// Ethernet, IPv4, GRE with checksum, key and sequence number, protocol 0x6558.
    GreTeb,
    /// Ethernet, IPv4, GRE with a sequence number, ERSPAN II (session 100).
    ErspanII,
    /// Ethernet, IPv4, GRE with a sequence number, ERSPAN III (session 7), with the
    /// platform subheader when `true`.
    ErspanIII(bool),
    /// A Linux cooked header instead of the Ethernet header.
    Sll,
    /// A Linux cooked v2 header instead of the Ethernet header.
    Sll2,
    /// A Linux cooked header and the frame's 802.1Q tag put back after it (PCP 3, VID 100).
    SllVlan,
}

impl Wrapping {
    /// Every wrapping, for tests that try them all.
    pub const ALL: [Wrapping; 12] = [
        Wrapping::Vlan,
        Wrapping::QinQ,
        Wrapping::QinQ9100,
        Wrapping::Vxlan,
        Wrapping::Geneve,
        Wrapping::GreTeb,
        Wrapping::ErspanII,
        Wrapping::ErspanIII(false),
        Wrapping::ErspanIII(true),
        Wrapping::Sll,
        Wrapping::Sll2,
        Wrapping::SllVlan,
    ];

    /// A short name, for file names and test messages.
    pub const fn name(self) -> &'static str {
        match self {
            Wrapping::Vlan => "vlan",
            Wrapping::QinQ => "qinq",
            Wrapping::QinQ9100 => "qinq9100",
            Wrapping::Vxlan => "vxlan",
            Wrapping::Geneve => "geneve",
            Wrapping::GreTeb => "gre_teb",
            Wrapping::ErspanII => "erspan2",
            Wrapping::ErspanIII(false) => "erspan3",
            Wrapping::ErspanIII(true) => "erspan3_platform",
            Wrapping::Sll => "sll",
            Wrapping::Sll2 => "sll2",
            Wrapping::SllVlan => "sll_vlan",
        }
    }

    /// The link header a wrapped frame starts with.
    pub const fn link(self) -> LinkHeader {
        match self {
            Wrapping::Sll | Wrapping::SllVlan => LinkHeader::Sll,
            Wrapping::Sll2 => LinkHeader::Sll2,
            _ => LinkHeader::Ethernet,
        }
    }

    /// The outer layers the slicer reports for a wrapped plain frame, outermost first.
    pub fn encap(self) -> Vec<OuterKind> {
        use OuterKind as K;
        match self {
            Wrapping::Vlan => vec![K::Vlan],
            Wrapping::QinQ | Wrapping::QinQ9100 => vec![K::QinQ, K::Vlan],
            Wrapping::Vxlan => vec![K::Vxlan],
            Wrapping::Geneve => vec![K::Geneve],
            Wrapping::GreTeb => vec![K::Gre],
            Wrapping::ErspanII => vec![K::ErspanII, K::Gre],
            Wrapping::ErspanIII(_) => vec![K::ErspanIII, K::Gre],
            Wrapping::Sll => vec![K::Sll],
            Wrapping::Sll2 => vec![K::Sll2],
            Wrapping::SllVlan => vec![K::Sll, K::Vlan],
        }
    }
}

const OUTER_SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xaa];
const OUTER_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];
/// Outer addresses from TEST-NET-2 (RFC 5737), apart from any inner RoCE address.
const OUTER_SRC_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const OUTER_DST_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const TAG: VlanTag = VlanTag {
    pcp: 3,
    dei: false,
    vid: 100,
};

fn emit<H: FixedHeader>(h: &H, out: &mut Vec<u8>) {
    let at = out.len();
    out.resize(at + H::LEN, 0);
    // Cannot fail: the buffer was just grown to LEN.
    let _ = h.emit(&mut out[at..]);
}

fn tag(tpid: u16, tag: VlanTag, ethertype: u16, out: &mut Vec<u8>) {
    out.extend_from_slice(&tpid.to_be_bytes());
    emit(&TagRepr { tag, ethertype }, out);
}

/// Ethernet and IPv4 headers for a payload of `len` bytes of IP protocol `protocol`.
fn outer_ip(protocol: u8, len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&OUTER_DST_MAC);
    out.extend_from_slice(&OUTER_SRC_MAC);
    out.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let mut ip = Ipv4Header::new(
        len as u16,
        DEFAULT_TTL,
        IpNumber(protocol),
        OUTER_SRC_IP.octets(),
        OUTER_DST_IP.octets(),
    )
    .unwrap_or_default();
    ip.dont_fragment = true;
    ip.header_checksum = ip.calc_header_checksum();
    out.extend_from_slice(&ip.to_bytes());
}

fn outer_udp(port: u16, payload_len: usize, out: &mut Vec<u8>) {
    let len = UDP_HEADER_LEN + payload_len;
    outer_ip(IP_PROTOCOL_UDP, len, out);
    out.extend_from_slice(&49152u16.to_be_bytes());
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
}

fn outer_gre(gre: GreRepr, header: &[u8], frame: &[u8], out: &mut Vec<u8>) {
    let mut body = vec![0; gre.buffer_len()];
    // Cannot fail: the buffer is the header's length.
    let _ = gre.emit(&mut body);
    body.extend_from_slice(header);
    body.extend_from_slice(frame);
    if gre.checksum.is_some() {
        let sum = internet_checksum(&body);
        body[4..6].copy_from_slice(&sum.to_be_bytes());
    }
    outer_ip(IP_PROTOCOL_GRE, body.len(), out);
    out.extend_from_slice(&body);
}

/// `frame` (an Ethernet frame, without FCS) wrapped as `how` says; `seq` numbers the frames
/// of a tunnel (GRE's sequence number, ERSPAN III's timestamp). `None` when `frame` is shorter
/// than an Ethernet header.
pub fn wrap(frame: &[u8], how: Wrapping, seq: u32) -> Option<Vec<u8>> {
    if frame.len() < ETHERNET_HEADER_LEN {
        return None;
    }
    let (macs, ethertype, rest) = (&frame[..12], &frame[12..14], &frame[14..]);
    let ethertype = u16::from_be_bytes([ethertype[0], ethertype[1]]);
    let mut out = Vec::with_capacity(frame.len() + 64);
    match how {
        Wrapping::Vlan | Wrapping::QinQ | Wrapping::QinQ9100 => {
            out.extend_from_slice(macs);
            let s_tpid = match how {
                Wrapping::QinQ => Some(ETHERTYPE_QINQ),
                Wrapping::QinQ9100 => Some(ETHERTYPE_QINQ_LEGACY),
                _ => None,
            };
            if let Some(tpid) = s_tpid {
                let s_tag = VlanTag { vid: 200, ..TAG };
                tag(tpid, s_tag, ETHERTYPE_VLAN, &mut out);
                // The C-tag's TPID is the S-tag's EtherType, already written.
                emit(
                    &TagRepr {
                        tag: TAG,
                        ethertype,
                    },
                    &mut out,
                );
            } else {
                tag(ETHERTYPE_VLAN, TAG, ethertype, &mut out);
            }
            out.extend_from_slice(rest);
        }
        Wrapping::Vxlan => {
            outer_udp(VXLAN_UDP_PORT, VxlanRepr::LEN + frame.len(), &mut out);
            emit(&VxlanRepr::new(42), &mut out);
            out.extend_from_slice(frame);
        }
        Wrapping::Geneve => {
            // One option: class 0x0102, type 0x80, 4 bytes of data (RFC 8926 3.5).
            let option = [0x01, 0x02, 0x80, 0x01, 0xde, 0xad, 0xbe, 0xef];
            outer_udp(
                GENEVE_UDP_PORT,
                GeneveRepr::LEN + option.len() + frame.len(),
                &mut out,
            );
            let g = GeneveRepr {
                version: 0,
                opt_len: (option.len() / 4) as u8,
                oam: false,
                critical: false,
                reserved1: 0,
                protocol: ETHERTYPE_TEB,
                vni: 42,
                reserved2: 0,
            };
            emit(&g, &mut out);
            out.extend_from_slice(&option);
            out.extend_from_slice(frame);
        }
        Wrapping::GreTeb => {
            let gre = GreRepr {
                checksum: Some((0, 0)),
                key: Some(0x2a),
                sequence: Some(seq),
                ..GreRepr::new(ETHERTYPE_TEB)
            };
            outer_gre(gre, &[], frame, &mut out);
        }
        Wrapping::ErspanII => {
            let h = ErspanIIRepr {
                version: VERSION_II,
                vlan: 0,
                cos: 0,
                encap_type: 0,
                truncated: false,
                session_id: 100,
                reserved: 0,
                index: 1,
            };
            let mut header = Vec::new();
            emit(&h, &mut header);
            let gre = GreRepr {
                sequence: Some(seq),
                ..GreRepr::new(GRE_PROTOCOL_ERSPAN_II)
            };
            outer_gre(gre, &header, frame, &mut out);
        }
        Wrapping::ErspanIII(platform) => {
            let h = ErspanIIIRepr {
                version: VERSION_III,
                vlan: 0,
                cos: 0,
                bso: 0,
                truncated: false,
                session_id: 7,
                timestamp: seq,
                sgt: 0,
                p: false,
                frame_type: 0,
                hw_id: 1,
                direction: false,
                granularity: 1,
                optional: platform,
            };
            let mut header = Vec::new();
            emit(&h, &mut header);
            if platform {
                let p = ErspanPlatformRepr {
                    platform_id: 3,
                    info: 0x0001_0000_0000,
                };
                emit(&p, &mut header);
            }
            let gre = GreRepr {
                sequence: Some(seq),
                ..GreRepr::new(GRE_PROTOCOL_ERSPAN_III)
            };
            outer_gre(gre, &header, frame, &mut out);
        }
        Wrapping::Sll | Wrapping::SllVlan => {
            let mut addr = [0; 8];
            addr[..6].copy_from_slice(&frame[6..12]);
            let protocol = if how == Wrapping::SllVlan {
                ETHERTYPE_VLAN
            } else {
                ethertype
            };
            let h = SllRepr {
                packet_type: 0,
                arphrd: 1,
                addr_len: 6,
                addr,
                protocol,
            };
            emit(&h, &mut out);
            if how == Wrapping::SllVlan {
                emit(
                    &TagRepr {
                        tag: TAG,
                        ethertype,
                    },
                    &mut out,
                );
            }
            out.extend_from_slice(rest);
        }
        Wrapping::Sll2 => {
            let mut addr = [0; 8];
            addr[..6].copy_from_slice(&frame[6..12]);
            let h = Sll2Repr {
                protocol: ethertype,
                reserved: 0,
                ifindex: 2,
                arphrd: 1,
                packet_type: 0,
                addr_len: 6,
                addr,
            };
            emit(&h, &mut out);
            out.extend_from_slice(rest);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::RocePacket;
    use crate::wire::sample;

    #[test]
    fn internet_checksum_of_rfc1071_example() {
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(internet_checksum(&bytes), !0xddf2);
    }

    #[test]
    fn every_wrapping_slices_back_to_the_same_packet() {
        for frame in sample::frames(7) {
            let plain = RocePacket::parse(&frame).unwrap();
            for how in Wrapping::ALL {
                let wrapped = wrap(&frame, how, 5).unwrap();
                let p = RocePacket::parse_link(&wrapped, how.link())
                    .unwrap_or_else(|e| panic!("{}: {e}", how.name()));
                assert_eq!(p.ip(), plain.ip(), "{}", how.name());
                assert_eq!(p.udp(), plain.udp());
                assert_eq!(p.ib(), plain.ib());
                assert!(p.icrc_ok());
                let mut expected = how.encap();
                expected.extend(plain.encap().iter());
                assert_eq!(p.encap().iter().collect::<Vec<_>>(), expected);
                let mut headers = Vec::new();
                RocePacket::parse_traced(&wrapped, how.link(), &mut headers).unwrap();
                let mut at = 0;
                for h in &headers {
                    assert_eq!(h.start, at, "{}: {h:?} follows the last", how.name());
                    at += h.len;
                }
                assert_eq!(at, p.bth_offset(), "{}: headers reach the BTH", how.name());
            }
        }
    }
}

#[cfg(test)]
mod bad_input {
    use super::*;
    use crate::wire::decap::MAX_DEPTH;
    use crate::wire::{Layer, NotRoce, PacketError, RocePacket};

    fn plain() -> Vec<u8> {
        crate::wire::sample::frames(3).remove(0)
    }

    #[test]
    fn a_vxlan_header_with_no_inner_frame_is_reported() {
        let mut f = wrap(&plain(), Wrapping::Vxlan, 0).unwrap();
        // Keep the outer headers and the VXLAN header, and say so in the lengths.
        let keep = 14 + 20 + 8 + 8;
        f.truncate(keep);
        f[16..18].copy_from_slice(&((keep - 14) as u16).to_be_bytes());
        f[38..40].copy_from_slice(&16u16.to_be_bytes());
        let e = RocePacket::parse(&f).unwrap_err();
        assert!(
            matches!(
                e,
                PacketError::Truncated {
                    layer: Layer::Ethernet,
                    available: 0,
                    ..
                }
            ),
            "{e}"
        );
        assert!(!e.is_not_roce());
        f.truncate(keep - 3);
        let e = RocePacket::parse(&f).unwrap_err();
        assert!(matches!(e, PacketError::LengthBeyondData { .. }), "{e}");
    }

    #[test]
    fn every_cut_of_every_wrapping_is_an_error_naming_a_layer() {
        let frame = plain();
        for how in Wrapping::ALL {
            let wrapped = wrap(&frame, how, 1).unwrap();
            let inner_ip = RocePacket::parse_link(&wrapped, how.link())
                .unwrap()
                .ip_offset();
            for cut in 0..inner_ip {
                let e = RocePacket::parse_link(&wrapped[..cut], how.link()).unwrap_err();
                assert!(!e.is_not_roce(), "{} cut at {cut}: {e}", how.name());
            }
        }
    }

    #[test]
    fn gre_in_gre_beyond_the_depth_limit_is_too_deep() {
        let mut f = plain();
        for _ in 0..MAX_DEPTH {
            f = wrap(&f, Wrapping::GreTeb, 0).unwrap();
        }
        assert_eq!(RocePacket::parse(&f).unwrap().encap().len(), MAX_DEPTH);
        let f = wrap(&f, Wrapping::GreTeb, 0).unwrap();
        let e = RocePacket::parse(&f).unwrap_err();
        assert_eq!(e, PacketError::TooDeep { limit: MAX_DEPTH });
        assert_eq!(e.to_string(), "encapsulated more than 8 layers deep");
    }

    #[test]
    fn a_tunnel_of_something_else_keeps_its_layers() {
        let mut arp = plain();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        let f = wrap(&arp, Wrapping::ErspanIII(true), 0).unwrap();
        let (encap, result) = RocePacket::parse_outer(&f, LinkHeader::Ethernet);
        assert_eq!(
            result.unwrap_err(),
            PacketError::NotRoce(NotRoce::EtherType(0x0806))
        );
        assert_eq!(encap.to_string(), "ERSPAN_III / GRE");
        assert_eq!(encap.outermost_tunnel(), Some(OuterKind::ErspanIII));
    }

    #[test]
    fn erspan_versions_must_match_their_protocol() {
        let mut f = wrap(&plain(), Wrapping::ErspanII, 0).unwrap();
        f[14 + 20 + 8] = 0x20; // Ver 2 under protocol 0x88be
        let e = RocePacket::parse(&f).unwrap_err();
        assert!(
            matches!(
                e,
                PacketError::Malformed {
                    layer: Layer::Outer(OuterKind::ErspanII),
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "ERSPAN II: the version field does not match the GRE protocol type"
        );
    }
}
