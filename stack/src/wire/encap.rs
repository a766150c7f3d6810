//! What carries a RoCEv2 packet: Ethernet (with an optional 802.1Q tag), IPv4 or IPv6, and
//! UDP to port 4791 (IBA Vol. 1 Annex A17, RoCEv2). These are the owned forms that the slicer
//! ([`super::packet`]) produces and the builder ([`super::builder`]) consumes.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::field::Qpn;

/// The UDP destination port that marks a RoCEv2 packet (IANA; IBA Annex A17).
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// TTL / hop limit rxe sends with.
pub const DEFAULT_TTL: u8 = 64;

/// Ethernet II header: destination and source MAC, EtherType (IEEE 802.3 3.1.1).
pub const ETHERNET_HEADER_LEN: usize = 14;
/// The frame check sequence that ends every Ethernet frame on the wire (devices and most
/// captures leave it out).
pub const ETHERNET_FCS_LEN: usize = 4;
/// The shortest Ethernet frame without FCS: shorter frames are padded (IEEE 802.3 3.1.1).
pub const ETHERNET_MIN_FRAME_LEN: usize = 60;
/// What each frame costs on the wire besides its own bytes: preamble and start delimiter (8)
/// and the minimum inter-packet gap (12), IEEE 802.3 4.4.2.
pub const ETHERNET_PREAMBLE_AND_GAP_LEN: usize = 20;
/// One 802.1Q tag: TPID and TCI.
pub const VLAN_TAG_LEN: usize = 4;
/// An IPv4 header without options (RFC 791), as RoCEv2 senders write it.
pub const IPV4_HEADER_LEN: usize = 20;
/// The IPv4 header with the most options: IHL 15.
pub const IPV4_MAX_HEADER_LEN: usize = 60;
/// The fixed IPv6 header (RFC 8200).
pub const IPV6_HEADER_LEN: usize = 40;
/// The UDP header (RFC 768).
pub const UDP_HEADER_LEN: usize = 8;
/// The IB Global Route Header a UD receive buffer starts with (IBA 8.3, 11.4.1.2): RoCEv2
/// carries its fields in the IP header, and the area has the IPv6 header's layout.
pub const GRH_LEN: usize = IPV6_HEADER_LEN;

/// The GRH area of a UD receive as RoCEv2 fills it from the received IP header (Annex
/// A17.4.5.2): an IPv6 header takes all 40 bytes, an IPv4 header (20 bytes: RoCEv2 allows no
/// options) the second 20, the first 20 left zero (the annex leaves them undefined; rxe
/// zeroes them). None for a header of any other length.
pub fn ud_grh_area(ip_header: &[u8]) -> Option<[u8; GRH_LEN]> {
    let mut area = [0u8; GRH_LEN];
    match ip_header.len() {
        IPV6_HEADER_LEN => area.copy_from_slice(ip_header),
        IPV4_HEADER_LEN => area[GRH_LEN - IPV4_HEADER_LEN..].copy_from_slice(ip_header),
        _ => return None,
    }
    Some(area)
}

/// Who sent a UD receive, read back from its GRH area ([`ud_grh_area`]'s layout): the
/// source address and the traffic class of the IP header, what libibverbs'
/// `ibv_init_ah_from_wc` takes into the address handle that answers the message. An area
/// starting with IP version 6 is an IPv6 header (an IPv4-mapped source is read as IPv4);
/// otherwise the second half must be an IPv4 header without options. None for anything else.
pub fn ud_grh_area_source(area: &[u8]) -> Option<(IpAddr, u8)> {
    let area = area.get(..GRH_LEN)?;
    if area[0] >> 4 == 6 {
        let h = etherparse::Ipv6HeaderSlice::from_slice(area).ok()?;
        let src = h.source_addr();
        let src = src.to_ipv4_mapped().map_or(IpAddr::V6(src), IpAddr::V4);
        return Some((src, h.traffic_class()));
    }
    let h = etherparse::Ipv4HeaderSlice::from_slice(&area[GRH_LEN - IPV4_HEADER_LEN..]).ok()?;
    // The type of service byte whole, as libibverbs takes `tos`.
    let tos = (h.dcp().value() << 2) | h.ecn().value();
    Some((IpAddr::V4(h.source_addr()), tos))
}

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP (RFC 826).
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType (TPID) of an 802.1Q tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// RoCE v1: the IB GRH directly over Ethernet, without IP/UDP.
pub const ETHERTYPE_ROCE_V1: u16 = 0x8915;
/// EtherType of LLDP (IEEE 802.1AB), which every switch port sends.
pub const ETHERTYPE_LLDP: u16 = 0x88cc;
/// IP protocol number of UDP.
pub const IP_PROTOCOL_UDP: u8 = 17;
/// IP protocol number of ICMP.
pub const IP_PROTOCOL_ICMP: u8 = 1;
/// IP protocol number of IGMP.
pub const IP_PROTOCOL_IGMP: u8 = 2;
/// IP protocol number of TCP.
pub const IP_PROTOCOL_TCP: u8 = 6;
/// IP protocol number (IPv6 Next Header) of ICMPv6.
pub const IP_PROTOCOL_ICMPV6: u8 = 58;

/// Offsets of single fields in the Ethernet, IPv4, IPv6 and UDP headers, for code that
/// reads one field without parsing the header (the XDP filter, the tracer, ARP and NDP).
pub mod field_at {
    /// Ethernet: the EtherType, or an 802.1Q tag's TPID, after the two MAC addresses.
    pub const ETHERTYPE: usize = 12;
    /// IPv4: Version (high nibble) and IHL (low nibble, in 4-byte words).
    pub const IPV4_VERSION_IHL: usize = 0;
    /// IPv4: Protocol.
    pub const IPV4_PROTOCOL: usize = 9;
    /// IPv4: the header checksum (2 bytes).
    pub const IPV4_CHECKSUM: usize = 10;
    /// IPv6: Next Header.
    pub const IPV6_NEXT_HEADER: usize = 6;
    /// UDP: the destination port (2 bytes, after the source port).
    pub const UDP_DST_PORT: usize = 2;
}

/// The first byte of an IPv4 header without options: version 4, IHL 5 words.
pub const IPV4_VERSION_IHL_NO_OPTIONS: u8 = (4 << 4) | (IPV4_HEADER_LEN / 4) as u8;

/// The length of an IPv4 header from its first byte's IHL (in 4-byte words).
pub const fn ipv4_header_len(version_ihl: u8) -> usize {
    (version_ihl & 0x0f) as usize * 4
}

/// The UDP source port rxe gives a QP when it creates it: `0xC000 + (hash_32(qpn, 14) & 0x3fff)`
/// with the kernel's multiplicative `hash_32`, so each QP is one flow for ECMP and RSS but
/// different QPs spread (rxe_qp.c; Annex A17 leaves the source port to the sender). UD QPs
/// keep it: real rxe UD traffic from QP 17 leaves from port 0xdf94, GSI (QP 1) from 0xd872.
/// Connected QPs get [`rxe_connected_udp_src_port`] instead once they are modified to RTR.
pub const fn rxe_udp_src_port(src_qpn: Qpn) -> u16 {
    const GOLDEN_RATIO_32: u32 = 0x61c8_8647;
    let hash = src_qpn.value().wrapping_mul(GOLDEN_RATIO_32) >> (32 - 14);
    0xc000 + (hash & 0x3fff) as u16
}

/// The UDP source port of an RC or UC QP, as the kernel's `rdma_get_udp_sport` gives it to rxe
/// when the QP moves to RTR: the GRH flow label folded to 14 bits, or, with no flow label, a
/// label computed from both QPNs so that the two directions of a connection share one port
/// (real rxe RC and UC traffic between two QPs 17 uses 0xc121).
pub const fn rxe_connected_udp_src_port(flow_label: u32, local_qpn: Qpn, remote_qpn: Qpn) -> u16 {
    let label = if flow_label & 0xf_ffff != 0 {
        flow_label & 0xf_ffff
    } else {
        let product = local_qpn.value() as u64 * remote_qpn.value() as u64;
        let folded = product ^ (product >> 20) ^ ((product ^ (product >> 20)) >> 40);
        (folded & 0xf_ffff) as u32
    };
    ((label & 0x3fff) ^ ((label & 0xf_c000) >> 14)) as u16 | 0xc000
}

/// The ECN field: the low two bits of the IPv4 TOS or IPv6 traffic class (RFC 3168 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// 00: the sender does not take part in ECN.
    #[default]
    NotEct,
    /// 01: ECN-capable transport, codepoint 1.
    Ect1,
    /// 10: ECN-capable transport, codepoint 0 (what DCQCN senders mark their data with).
    Ect0,
    /// 11: congestion experienced, set by a switch instead of dropping.
    Ce,
}

impl Ecn {
    /// The codepoint of the two low bits.
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 0x3 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two-bit codepoint.
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect1 => 0b01,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }

    /// `Not-ECT`, `ECT0`, `ECT1` or `CE`, as `roce decode --json` prints it.
    pub const fn name(self) -> &'static str {
        match self {
            Ecn::NotEct => "Not-ECT",
            Ecn::Ect1 => "ECT1",
            Ecn::Ect0 => "ECT0",
            Ecn::Ce => "CE",
        }
    }
}

impl fmt::Display for Ecn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An 802.1Q tag: priority (PCP, 3 bits), drop eligible (DEI) and VLAN ID (12 bits).
/// Wider values are masked on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point, 3 bits: the PFC priority.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 12 bits.
    pub vid: u16,
}

impl VlanTag {
    /// Where the tag goes in a frame: after the two MAC addresses, where the EtherType of an
    /// untagged frame is (802.1Q 9.3).
    pub const AT: usize = field_at::ETHERTYPE;

    /// The Tag Control Information: PCP (3 bits), DEI (1), VID (12).
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }

    /// The tag a Tag Control Information word holds.
    pub const fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    /// The outer 802.1Q tag (TPID 0x8100) of an Ethernet frame, if it has one.
    pub fn of_frame(frame: &[u8]) -> Option<VlanTag> {
        let tag = frame.get(Self::AT..Self::AT + VLAN_TAG_LEN)?;
        (u16::from_be_bytes([tag[0], tag[1]]) == ETHERTYPE_VLAN)
            .then(|| VlanTag::from_tci(u16::from_be_bytes([tag[2], tag[3]])))
    }

    /// `frame` with this tag inserted, into `out` (cleared first). A frame too short for
    /// the MAC addresses is copied as it is.
    pub fn tag(&self, frame: &[u8], out: &mut Vec<u8>) {
        out.clear();
        if frame.len() < Self::AT {
            out.extend_from_slice(frame);
            return;
        }
        out.extend_from_slice(&frame[..Self::AT]);
        out.extend_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
        out.extend_from_slice(&self.tci().to_be_bytes());
        out.extend_from_slice(&frame[Self::AT..]);
    }

    /// `frame` without its outer tag, into `out` (cleared first); a frame without one is
    /// copied as it is.
    pub fn untag(frame: &[u8], out: &mut Vec<u8>) {
        out.clear();
        if VlanTag::of_frame(frame).is_none() {
            out.extend_from_slice(frame);
            return;
        }
        out.extend_from_slice(&frame[..Self::AT]);
        out.extend_from_slice(&frame[Self::AT + VLAN_TAG_LEN..]);
    }
}

/// An Ethernet II header; the EtherType follows from the IP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination MAC address.
    pub dst: [u8; 6],
    /// Source MAC address.
    pub src: [u8; 6],
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
}

impl EthernetRepr {
    /// An untagged header from `src` to `dst`.
    pub const fn new(src: [u8; 6], dst: [u8; 6]) -> EthernetRepr {
        EthernetRepr {
            dst,
            src,
            vlan: None,
        }
    }

    /// Bytes on the wire: 14, or 18 with a tag.
    pub const fn header_len(&self) -> usize {
        ETHERNET_HEADER_LEN + if self.vlan.is_some() { VLAN_TAG_LEN } else { 0 }
    }
}

/// The IPv4 header fields a RoCEv2 sender chooses; length, protocol and checksum are derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr<'a> {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// 6 bits; wider values are masked on emit.
    pub dscp: u8,
    /// ECN field.
    pub ecn: Ecn,
    /// Identification (rxe counts it per packet).
    pub identification: u16,
    /// rxe sets DF: RoCEv2 packets are sized to the path MTU and never fragmented.
    pub dont_fragment: bool,
    /// Time to live.
    pub ttl: u8,
    /// Raw IPv4 options (a multiple of 4 bytes, at most 40); rxe sends none.
    pub options: &'a [u8],
}

impl Ipv4Repr<'_> {
    /// rxe's choices: DF, TTL 64, DSCP 0, not ECN-capable, identification 0, no options.
    pub const fn new(src: Ipv4Addr, dst: Ipv4Addr) -> Ipv4Repr<'static> {
        Ipv4Repr {
            src,
            dst,
            dscp: 0,
            ecn: Ecn::NotEct,
            identification: 0,
            dont_fragment: true,
            ttl: DEFAULT_TTL,
            options: &[],
        }
    }
}

/// The IPv6 header fields a RoCEv2 sender chooses; payload length and next header are derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// 6 bits; wider values are masked on emit.
    pub dscp: u8,
    /// ECN field.
    pub ecn: Ecn,
    /// 20 bits; wider values are masked on emit.
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Ipv6Repr {
    /// Default header fields: traffic class 0, flow label 0, hop limit 64.
    pub const fn new(src: Ipv6Addr, dst: Ipv6Addr) -> Ipv6Repr {
        Ipv6Repr {
            src,
            dst,
            dscp: 0,
            ecn: Ecn::NotEct,
            flow_label: 0,
            hop_limit: DEFAULT_TTL,
        }
    }
}

/// IPv4 or IPv6, with accessors for what both have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr<'a> {
    /// IPv4.
    V4(Ipv4Repr<'a>),
    /// IPv6.
    V6(Ipv6Repr),
}

impl<'a> IpRepr<'a> {
    /// Default headers (see [`Ipv4Repr::new`], [`Ipv6Repr::new`]); fails if the two addresses
    /// are of different families.
    pub fn new(src: IpAddr, dst: IpAddr) -> Option<IpRepr<'a>> {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Some(IpRepr::V4(Ipv4Repr::new(s, d))),
            (IpAddr::V6(s), IpAddr::V6(d)) => Some(IpRepr::V6(Ipv6Repr::new(s, d))),
            _ => None,
        }
    }

    /// Source address.
    pub fn src_addr(&self) -> IpAddr {
        match self {
            IpRepr::V4(h) => h.src.into(),
            IpRepr::V6(h) => h.src.into(),
        }
    }

    /// Destination address.
    pub fn dst_addr(&self) -> IpAddr {
        match self {
            IpRepr::V4(h) => h.dst.into(),
            IpRepr::V6(h) => h.dst.into(),
        }
    }

    /// ECN field.
    pub fn ecn(&self) -> Ecn {
        match self {
            IpRepr::V4(h) => h.ecn,
            IpRepr::V6(h) => h.ecn,
        }
    }

    /// Sets the ECN field.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        match self {
            IpRepr::V4(h) => h.ecn = ecn,
            IpRepr::V6(h) => h.ecn = ecn,
        }
    }

    /// DSCP, the traffic class's upper six bits.
    pub fn dscp(&self) -> u8 {
        match self {
            IpRepr::V4(h) => h.dscp,
            IpRepr::V6(h) => h.dscp,
        }
    }

    /// Sets the DSCP.
    pub fn set_dscp(&mut self, dscp: u8) {
        match self {
            IpRepr::V4(h) => h.dscp = dscp,
            IpRepr::V6(h) => h.dscp = dscp,
        }
    }

    /// IPv4 TTL or IPv6 hop limit.
    pub fn ttl(&self) -> u8 {
        match self {
            IpRepr::V4(h) => h.ttl,
            IpRepr::V6(h) => h.hop_limit,
        }
    }

    /// Sets the IPv4 TTL or IPv6 hop limit.
    pub fn set_ttl(&mut self, ttl: u8) {
        match self {
            IpRepr::V4(h) => h.ttl = ttl,
            IpRepr::V6(h) => h.hop_limit = ttl,
        }
    }

    /// Bytes on the wire: 20 plus options, or 40.
    pub fn header_len(&self) -> usize {
        match self {
            IpRepr::V4(h) => IPV4_HEADER_LEN + h.options.len(),
            IpRepr::V6(_) => IPV6_HEADER_LEN,
        }
    }

    /// The EtherType that announces this header.
    pub const fn ethertype(&self) -> u16 {
        match self {
            IpRepr::V4(_) => ETHERTYPE_IPV4,
            IpRepr::V6(_) => ETHERTYPE_IPV6,
        }
    }
}

/// The UDP header fields a sender chooses; the length is derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port: flow entropy for ECMP, derived from the QPs by rxe.
    pub src_port: u16,
    /// Destination port: 4791 for RoCEv2.
    pub dst_port: u16,
    /// rxe sends 0 (no checksum): the ICRC protects the packet end to end.
    pub checksum: u16,
}

impl UdpRepr {
    /// To port 4791 with no checksum, from `src_port`.
    pub const fn new(src_port: u16) -> UdpRepr {
        UdpRepr {
            src_port,
            dst_port: ROCEV2_UDP_PORT,
            checksum: 0,
        }
    }

    /// As rxe sends for the UD QP `src_qpn` (see [`rxe_udp_src_port`]).
    pub const fn rxe(src_qpn: Qpn) -> UdpRepr {
        UdpRepr::new(rxe_udp_src_port(src_qpn))
    }

    /// As rxe sends for a connected (RC, UC) QP (see [`rxe_connected_udp_src_port`]).
    pub const fn rxe_connected(flow_label: u32, local_qpn: Qpn, remote_qpn: Qpn) -> UdpRepr {
        UdpRepr::new(rxe_connected_udp_src_port(
            flow_label, local_qpn, remote_qpn,
        ))
    }
}

/// The Internet checksum (RFC 1071): the one's complement of the one's complement sum of
/// `bytes` as big-endian 16-bit words (an odd last byte padded with zero). Over an IPv4
/// header whose checksum field is zero it is that field's value; over a header with its
/// checksum in place it is 0 when the checksum is right. GRE's checksum is the same function
/// (RFC 2784 2.5).
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut words = bytes.chunks_exact(2);
    let mut sum: u32 = (&mut words)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes the checksum of IPv4 header `header` (options included) into its checksum field,
/// after a change to any of its fields.
pub fn set_ipv4_checksum(header: &mut [u8]) {
    let at = field_at::IPV4_CHECKSUM;
    header[at..at + 2].copy_from_slice(&[0, 0]);
    let checksum = internet_checksum(header);
    header[at..at + 2].copy_from_slice(&checksum.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ud_grh_area_holds_the_ip_header_where_the_annex_puts_it() {
        let v4: Vec<u8> = (1..=20).collect();
        let area = ud_grh_area(&v4).unwrap();
        assert_eq!((&area[..20], &area[20..]), (&[0; 20][..], &v4[..]));
        let v6: Vec<u8> = (1..=40).collect();
        assert_eq!(ud_grh_area(&v6).unwrap()[..], v6[..]);
        for len in [0, 19, 24, 60] {
            assert_eq!(ud_grh_area(&vec![0x45; len]), None, "{len}");
        }
    }

    /// The sender and traffic class come back out of the area either IP version leaves, the
    /// engine's own IPv6-style area (IPv4-mapped source) included; anything else is None.
    #[test]
    fn the_ud_grh_area_tells_who_sent_and_with_which_class() {
        let mut v4 = [0u8; IPV4_HEADER_LEN];
        v4[0] = 0x45;
        v4[1] = 0x6a; // DSCP 26, ECT(0)
        v4[8] = 64;
        v4[9] = IP_PROTOCOL_UDP;
        v4[12..16].copy_from_slice(&[10, 0, 0, 7]);
        let area = ud_grh_area(&v4).unwrap();
        let src = IpAddr::from([10, 0, 0, 7]);
        assert_eq!(ud_grh_area_source(&area), Some((src, 0x6a)));
        let mut v6 = [0u8; IPV6_HEADER_LEN];
        v6[..4].copy_from_slice(&[0x66, 0x80, 0, 0]); // traffic class 0x68
        let fe80 = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 7);
        v6[8..24].copy_from_slice(&fe80.octets());
        assert_eq!(ud_grh_area_source(&v6), Some((IpAddr::V6(fe80), 0x68)));
        v6[8..24].copy_from_slice(&Ipv4Addr::new(10, 0, 0, 7).to_ipv6_mapped().octets());
        assert_eq!(ud_grh_area_source(&v6), Some((src, 0x68)));
        let mut options = v4;
        options[0] = 0x46;
        for bad in [[0; GRH_LEN], ud_grh_area(&options).unwrap()] {
            assert_eq!(ud_grh_area_source(&bad), None);
        }
        assert_eq!(ud_grh_area_source(&area[..GRH_LEN - 1]), None);
    }

    #[test]
    fn vlan_tags_go_in_and_come_out_whole() {
        let tag = VlanTag {
            pcp: 3,
            dei: true,
            vid: 0xabc,
        };
        assert_eq!(tag.tci(), 0x7abc);
        assert_eq!(VlanTag::from_tci(0x7abc), tag);
        let frame: Vec<u8> = (0..60).collect();
        let mut tagged = Vec::new();
        tag.tag(&frame, &mut tagged);
        assert_eq!(tagged.len(), 64);
        assert_eq!(tagged[12..16], [0x81, 0x00, 0x7a, 0xbc]);
        assert_eq!(VlanTag::of_frame(&tagged), Some(tag));
        assert_eq!(VlanTag::of_frame(&frame), None);
        let mut back = Vec::new();
        VlanTag::untag(&tagged, &mut back);
        assert_eq!(back, frame);
        VlanTag::untag(&frame, &mut back);
        assert_eq!(back, frame);
        // Too short for a tag: as it is, never a panic.
        tag.tag(&frame[..5], &mut back);
        assert_eq!(back, frame[..5]);
        assert_eq!(VlanTag::of_frame(&tagged[..15]), None);
    }

    #[test]
    fn ecn_codepoints_follow_rfc3168() {
        assert_eq!(Ecn::from_bits(0b10), Ecn::Ect0);
        assert_eq!(Ecn::from_bits(0b01), Ecn::Ect1);
        assert_eq!(Ecn::from_bits(0b11).name(), "CE");
        assert_eq!(Ecn::NotEct.to_string(), "Not-ECT");
        for b in 0..4 {
            assert_eq!(Ecn::from_bits(b).bits(), b);
        }
    }

    #[test]
    fn connected_source_ports_match_real_rxe_traffic() {
        // pcaps/rc_read.pcap, uc_send.pcap: QP 17 to QP 17, no flow label, both directions.
        assert_eq!(
            rxe_connected_udp_src_port(0, Qpn::new(17), Qpn::new(17)),
            0xc121
        );
        // rdma_calc_flow_label folds the 48-bit product to 20 bits; then 20 bits fold to 14.
        let (a, b) = (Qpn::new(0xab_cdef), Qpn::new(0x12_3456));
        let product = 0xab_cdefu64 * 0x12_3456;
        let mut fl = product ^ (product >> 20);
        fl ^= fl >> 40;
        let fl = (fl & 0xf_ffff) as u32;
        let expected = ((fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14)) as u16 | 0xc000;
        assert_eq!(rxe_connected_udp_src_port(0, a, b), expected);
        assert_eq!(rxe_connected_udp_src_port(0, b, a), expected, "symmetric");
        assert_eq!(
            rxe_connected_udp_src_port(0x4_0001, a, b),
            0xc000 | (1 ^ 0x10)
        );
    }

    #[test]
    fn rxe_source_ports() {
        // hash_32(qpn, 14) = (qpn * 0x61c88647) >> 18, computed by hand.
        assert_eq!(rxe_udp_src_port(Qpn::new(0)), 0xc000);
        assert_eq!(rxe_udp_src_port(Qpn::new(1)), 0xd872);
        assert_eq!(rxe_udp_src_port(Qpn::new(0x11)), 0xdf94);
        for q in [1u32, 0x11, 0xffff, 0xff_ffff] {
            assert!(rxe_udp_src_port(Qpn::new(q)) >= 0xc000);
        }
    }

    #[test]
    fn ip_families_must_match() {
        let v4: IpAddr = Ipv4Addr::LOCALHOST.into();
        let v6: IpAddr = Ipv6Addr::LOCALHOST.into();
        assert!(IpRepr::new(v4, v6).is_none());
        let mut ip = IpRepr::new(v6, v6).unwrap();
        ip.set_ttl(3);
        ip.set_ecn(Ecn::Ce);
        assert_eq!((ip.ttl(), ip.ecn(), ip.header_len()), (3, Ecn::Ce, 40));
    }
}
