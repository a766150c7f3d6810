//! What a capture held besides RoCE: each frame that is not RoCE counted by kind, so that an
//! analysis with few or no RoCE frames says what the capture was instead ("0 RoCE frames:
//! 12,000 frames, of which 11,800 VXLAN with non-RoCE inner frames, 200 ARP"). A frame inside
//! a tunnel counts as that tunnel's (what the operator needs to know: the mirror or overlay
//! worked, the traffic in it is something else); outside one, by its protocol. The kinds are a
//! fixed set, so the counts take the same room whatever the capture.

use std::collections::BTreeMap;

use crate::capture::Frame;
use crate::wire::decap::OuterKind;
use crate::wire::encap::{
    ETHERTYPE_ARP, ETHERTYPE_LLDP, IP_PROTOCOL_ICMP, IP_PROTOCOL_ICMPV6, IP_PROTOCOL_IGMP,
    IP_PROTOCOL_TCP,
};
use crate::wire::pause::ETHERTYPE_MAC_CONTROL;
use crate::wire::{NotRoce, PacketError, RocePacket};

/// What a frame that is not RoCE was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NotRoceKind {
    /// A frame that is not RoCE inside this tunnel (the outermost, when nested).
    InTunnel(OuterKind),
    /// ARP (EtherType 0x0806).
    Arp,
    /// LLDP (EtherType 0x88CC).
    Lldp,
    /// 802.3x PAUSE and PFC frames (EtherType 0x8808).
    MacControl,
    /// EtherType 0x8915.
    RoceV1,
    /// Any other EtherType.
    OtherEtherType,
    /// TCP over IP.
    Tcp,
    /// ICMP.
    Icmp,
    /// ICMPv6 (neighbour discovery among others).
    Icmpv6,
    /// IGMP.
    Igmp,
    /// IPv6 extension headers included.
    OtherIpProtocol,
    /// UDP to a port other than 4791 (and not a tunnel's).
    OtherUdp,
    /// GRE other than version 0 (PPTP's).
    OtherGre,
    /// A link type the capture reader does not slice.
    OtherLinkType,
}

impl NotRoceKind {
    /// The key in `roce analyze --json`'s `not_roce.by_kind`.
    pub fn name(self) -> &'static str {
        match self {
            NotRoceKind::InTunnel(t) => match t {
                OuterKind::Vxlan => "IN_VXLAN",
                OuterKind::Geneve => "IN_GENEVE",
                OuterKind::ErspanI => "IN_ERSPAN_I",
                OuterKind::ErspanII => "IN_ERSPAN_II",
                OuterKind::ErspanIII => "IN_ERSPAN_III",
                // Tags and cooked headers are never a frame's tunnel.
                _ => "IN_GRE",
            },
            NotRoceKind::Arp => "ARP",
            NotRoceKind::Lldp => "LLDP",
            NotRoceKind::MacControl => "MAC_CONTROL",
            NotRoceKind::RoceV1 => "ROCE_V1",
            NotRoceKind::OtherEtherType => "OTHER_ETHERTYPE",
            NotRoceKind::Tcp => "TCP",
            NotRoceKind::Icmp => "ICMP",
            NotRoceKind::Icmpv6 => "ICMPV6",
            NotRoceKind::Igmp => "IGMP",
            NotRoceKind::OtherIpProtocol => "OTHER_IP_PROTOCOL",
            NotRoceKind::OtherUdp => "OTHER_UDP",
            NotRoceKind::OtherGre => "OTHER_GRE",
            NotRoceKind::OtherLinkType => "OTHER_LINK_TYPE",
        }
    }

    /// The words in `roce analyze`'s text ("11,800 VXLAN with non-RoCE inner frames").
    pub fn describe(self) -> String {
        match self {
            NotRoceKind::InTunnel(t) => format!("{t} with non-RoCE inner frames"),
            NotRoceKind::Arp => "ARP".into(),
            NotRoceKind::Lldp => "LLDP".into(),
            NotRoceKind::MacControl => "PAUSE/PFC (MAC control)".into(),
            NotRoceKind::RoceV1 => "RoCEv1 (EtherType 0x8915)".into(),
            NotRoceKind::OtherEtherType => "of other EtherTypes".into(),
            NotRoceKind::Tcp => "TCP".into(),
            NotRoceKind::Icmp => "ICMP".into(),
            NotRoceKind::Icmpv6 => "ICMPv6".into(),
            NotRoceKind::Igmp => "IGMP".into(),
            NotRoceKind::OtherIpProtocol => "of other IP protocols".into(),
            NotRoceKind::OtherUdp => "UDP to other ports".into(),
            NotRoceKind::OtherGre => "GRE other than version 0".into(),
            NotRoceKind::OtherLinkType => "of a link type not read".into(),
        }
    }

    /// The kind of `frame`, sliced afresh (only frames already found not to be RoCE come
    /// here); `None` if it is RoCE or broken after all.
    pub fn of(frame: &Frame<'_>) -> Option<NotRoceKind> {
        let Some(link) = frame.link_header() else {
            return Some(NotRoceKind::OtherLinkType);
        };
        let (encap, result) = RocePacket::parse_outer(frame.data, link);
        let Err(PacketError::NotRoce(why)) = result else {
            return None;
        };
        if let Some(tunnel) = encap.outermost_tunnel() {
            return Some(NotRoceKind::InTunnel(tunnel));
        }
        Some(match why {
            NotRoce::EtherType(ETHERTYPE_ARP) => NotRoceKind::Arp,
            NotRoce::EtherType(ETHERTYPE_LLDP) => NotRoceKind::Lldp,
            NotRoce::EtherType(ETHERTYPE_MAC_CONTROL) => NotRoceKind::MacControl,
            NotRoce::EtherType(_) => NotRoceKind::OtherEtherType,
            NotRoce::RoceV1 { .. } => NotRoceKind::RoceV1,
            NotRoce::IpProtocol(IP_PROTOCOL_TCP) => NotRoceKind::Tcp,
            NotRoce::IpProtocol(IP_PROTOCOL_ICMP) => NotRoceKind::Icmp,
            NotRoce::IpProtocol(IP_PROTOCOL_ICMPV6) => NotRoceKind::Icmpv6,
            NotRoce::IpProtocol(IP_PROTOCOL_IGMP) => NotRoceKind::Igmp,
            NotRoce::IpProtocol(_) => NotRoceKind::OtherIpProtocol,
            NotRoce::UdpPort(_) => NotRoceKind::OtherUdp,
            NotRoce::GreVersion(_) => NotRoceKind::OtherGre,
        })
    }
}

/// The frames that were not RoCE, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotRoceCounts {
    /// Frames that were not RoCE.
    pub frames: u64,
    /// Those frames by kind.
    pub by_kind: BTreeMap<NotRoceKind, u64>,
}

impl NotRoceCounts {
    pub(super) fn count(&mut self, kind: NotRoceKind) {
        self.frames += 1;
        *self.by_kind.entry(kind).or_default() += 1;
    }

    /// The kinds, most frames first (then by name).
    pub fn largest_first(&self) -> Vec<(NotRoceKind, u64)> {
        let mut v: Vec<_> = self.by_kind.iter().map(|(k, n)| (*k, *n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.name().cmp(b.0.name())));
        v
    }
}
