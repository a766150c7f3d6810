//! Address resolution messages: ARP for IPv4 (RFC 826) and IPv6 neighbour discovery's
//! solicitations and advertisements (RFC 4861 4.3, 4.4, 7.1), parsed and built as whole
//! Ethernet frames. etherparse parses ARP and checks ICMPv6 checksums; `wire::ndp` lays out
//! the NDP message bodies.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::icmpv6::NeighborAdvertisementHeader;
use etherparse::{
    ArpEthIpv4Packet, ArpOperation, ArpPacketSlice, EtherType, Ethernet2Header, Icmpv6Slice,
    Icmpv6Type, IpNumber, Ipv6FlowLabel, Ipv6Header,
};

use crate::wire::encap::{
    ETHERNET_HEADER_LEN, ETHERNET_MIN_FRAME_LEN, ETHERTYPE_ARP, ETHERTYPE_IPV6, IP_PROTOCOL_ICMPV6,
    IPV6_HEADER_LEN, field_at,
};
use crate::wire::ndp::{
    self, HOP_LIMIT, LinkLayerOption, NEIGHBOR_ADVERTISEMENT, NEIGHBOR_SOLICITATION, TARGET_LEN,
};
pub use crate::wire::ndp::{multicast_mac, solicited_node};

/// The Ethernet broadcast address, where ARP requests go.
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];

/// What an ARP or NDP message tells the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Who has `target`? Tell `sender` at `sender_mac` (learned from the message).
    Request {
        /// The asking host's address.
        sender: IpAddr,
        /// The asking host's MAC.
        sender_mac: [u8; 6],
        /// The address asked about.
        target: IpAddr,
    },
    /// `addr` is at `mac`.
    Reply {
        /// The address resolved.
        addr: IpAddr,
        /// Its MAC.
        mac: [u8; 6],
    },
}

/// Why an ARP or NDP frame was not acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// Another ICMPv6 message or ARP for another protocol: not ours to handle.
    Other,
    /// Broken: truncated, bad checksum, hop limit not 255, missing link-layer address.
    Malformed(&'static str),
}

fn ethernet(src: [u8; 6], dst: [u8; 6], ethertype: u16) -> [u8; ETHERNET_HEADER_LEN] {
    Ethernet2Header {
        source: src,
        destination: dst,
        ether_type: EtherType(ethertype),
    }
    .to_bytes()
}

/// Parses an ARP or NDP frame (Ethernet II, untagged). `None` if the frame is neither ARP
/// nor ICMPv6.
pub fn parse(frame: &[u8]) -> Option<Result<Resolution, Ignored>> {
    let at = field_at::ETHERTYPE;
    let ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    let body = &frame[ETHERNET_HEADER_LEN..];
    match ethertype {
        ETHERTYPE_ARP => Some(parse_arp(body)),
        ETHERTYPE_IPV6 if body.get(field_at::IPV6_NEXT_HEADER) == Some(&IP_PROTOCOL_ICMPV6) => {
            Some(parse_ndp(frame, body))
        }
        _ => None,
    }
}

fn parse_arp(body: &[u8]) -> Result<Resolution, Ignored> {
    let arp = ArpPacketSlice::from_slice(body)
        .map_err(|_| Ignored::Malformed("ARP: truncated"))?
        .to_packet()
        .try_eth_ipv4()
        .map_err(|_| Ignored::Other)?;
    let sender = IpAddr::V4(arp.sender_ipv4_addr());
    match arp.operation {
        ArpOperation::REQUEST => Ok(Resolution::Request {
            sender,
            sender_mac: arp.sender_mac,
            target: IpAddr::V4(arp.target_ipv4_addr()),
        }),
        ArpOperation::REPLY => Ok(Resolution::Reply {
            addr: sender,
            mac: arp.sender_mac,
        }),
        _ => Err(Ignored::Other),
    }
}

fn parse_ndp(frame: &[u8], ip: &[u8]) -> Result<Resolution, Ignored> {
    let header = Ipv6Header::from_slice(ip)
        .map_err(|_| Ignored::Malformed("IPv6: truncated"))?
        .0;
    let end = IPV6_HEADER_LEN + usize::from(header.payload_length);
    let icmp = ip
        .get(IPV6_HEADER_LEN..end)
        .ok_or(Ignored::Malformed("IPv6: payload length beyond the frame"))?;
    let icmp = Icmpv6Slice::from_slice(icmp).map_err(|_| Ignored::Malformed("ICMPv6: short"))?;
    let kind = icmp.type_u8();
    if kind != NEIGHBOR_SOLICITATION && kind != NEIGHBOR_ADVERTISEMENT {
        return Err(Ignored::Other);
    }
    if header.hop_limit != HOP_LIMIT || icmp.code_u8() != 0 {
        return Err(Ignored::Malformed("NDP: hop limit not 255 or code not 0"));
    }
    if !icmp.is_checksum_valid(header.source, header.destination) {
        return Err(Ignored::Malformed("NDP: bad ICMPv6 checksum"));
    }
    let payload = icmp.payload();
    let target = payload
        .get(..TARGET_LEN)
        .and_then(|t| <[u8; 16]>::try_from(t).ok())
        .map(Ipv6Addr::from)
        .ok_or(Ignored::Malformed("NDP: no target address"))?;
    let wanted = if kind == NEIGHBOR_SOLICITATION {
        LinkLayerOption::Source
    } else {
        LinkLayerOption::Target
    };
    let option_mac =
        ndp::find_link_layer_option(&payload[TARGET_LEN..], wanted).map_err(Ignored::Malformed)?;
    let source = Ipv6Addr::from(header.source);
    if kind == NEIGHBOR_SOLICITATION {
        if source.is_unspecified() {
            // Duplicate address detection (RFC 4862 5.4.3): nothing to learn or answer here.
            return Err(Ignored::Other);
        }
        // RFC 4861 7.2.3: without the option the frame's source is the best we have.
        let sender_mac = option_mac.unwrap_or_else(|| mac_at(frame, 6));
        Ok(Resolution::Request {
            sender: IpAddr::V6(source),
            sender_mac,
            target: IpAddr::V6(target),
        })
    } else {
        let mac = option_mac.ok_or(Ignored::Malformed("NA without target link-layer address"))?;
        Ok(Resolution::Reply {
            addr: IpAddr::V6(target),
            mac,
        })
    }
}

fn mac_at(frame: &[u8], at: usize) -> [u8; 6] {
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&frame[at..at + 6]);
    mac
}

fn arp(op: ArpOperation, src: ([u8; 6], Ipv4Addr), dst: ([u8; 6], Ipv4Addr)) -> Vec<u8> {
    let eth_dst = if op == ArpOperation::REQUEST {
        BROADCAST_MAC
    } else {
        dst.0
    };
    let packet = ArpEthIpv4Packet {
        operation: op,
        sender_mac: src.0,
        sender_ipv4: src.1.octets(),
        target_mac: dst.0,
        target_ipv4: dst.1.octets(),
    };
    let mut frame = Vec::with_capacity(ETHERNET_MIN_FRAME_LEN);
    frame.extend_from_slice(&ethernet(src.0, eth_dst, ETHERTYPE_ARP));
    frame.extend_from_slice(&packet.to_bytes());
    frame.resize(ETHERNET_MIN_FRAME_LEN, 0);
    frame
}

/// A broadcast "who has `target`?" (the target MAC is zero, RFC 826).
pub fn arp_request(mac: [u8; 6], addr: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    arp(ArpOperation::REQUEST, (mac, addr), ([0; 6], target))
}

/// "`addr` is at `mac`", sent straight to the asker.
pub fn arp_reply(mac: [u8; 6], addr: Ipv4Addr, to_mac: [u8; 6], to: Ipv4Addr) -> Vec<u8> {
    arp(ArpOperation::REPLY, (mac, addr), (to_mac, to))
}

fn ndp(
    src: ([u8; 6], Ipv6Addr),
    dst: ([u8; 6], Ipv6Addr),
    kind: Icmpv6Type,
    target: Ipv6Addr,
    option: LinkLayerOption,
) -> Vec<u8> {
    let body = ndp::body(target, option, src.0);
    let icmp = kind
        .to_header(src.1.octets(), dst.1.octets(), &body)
        .map(|h| h.to_bytes());
    let Ok(icmp) = icmp else {
        // Cannot happen: the body is far below the length limit.
        return Vec::new();
    };
    let ip = Ipv6Header {
        traffic_class: 0,
        flow_label: Ipv6FlowLabel::ZERO,
        payload_length: (icmp.len() + body.len()) as u16,
        next_header: IpNumber::IPV6_ICMP,
        hop_limit: HOP_LIMIT,
        source: src.1.octets(),
        destination: dst.1.octets(),
    };
    let mut frame =
        Vec::with_capacity(ETHERNET_HEADER_LEN + IPV6_HEADER_LEN + icmp.len() + body.len());
    frame.extend_from_slice(&ethernet(src.0, dst.0, ETHERTYPE_IPV6));
    frame.extend_from_slice(&ip.to_bytes());
    frame.extend_from_slice(&icmp);
    frame.extend_from_slice(&body);
    frame
}

/// A neighbour solicitation for `target` to its solicited-node group, with our link-layer
/// address (RFC 4861 7.2.2).
pub fn neighbour_solicitation(mac: [u8; 6], addr: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let group = solicited_node(target);
    ndp(
        (mac, addr),
        (multicast_mac(group), group),
        Icmpv6Type::NeighborSolicitation,
        target,
        LinkLayerOption::Source,
    )
}

/// A solicited advertisement of `addr` at `mac`, with the override flag, straight to the
/// soliciting node (RFC 4861 7.2.4).
pub fn neighbour_advertisement(
    mac: [u8; 6],
    addr: Ipv6Addr,
    to_mac: [u8; 6],
    to: Ipv6Addr,
) -> Vec<u8> {
    let flags = NeighborAdvertisementHeader {
        router: false,
        solicited: true,
        r#override: true,
    };
    ndp(
        (mac, addr),
        (to_mac, to),
        Icmpv6Type::NeighborAdvertisement(flags),
        addr,
        LinkLayerOption::Target,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
    const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

    #[test]
    fn arp_round_trip() {
        let a = Ipv4Addr::new(10, 0, 0, 1);
        let b = Ipv4Addr::new(10, 0, 0, 2);
        let req = arp_request(A, a, b);
        assert_eq!(req.len(), 60);
        assert_eq!(&req[..6], &BROADCAST_MAC);
        assert_eq!(
            parse(&req),
            Some(Ok(Resolution::Request {
                sender: a.into(),
                sender_mac: A,
                target: b.into()
            }))
        );
        let rep = arp_reply(B, b, A, a);
        assert_eq!(&rep[..6], &A);
        assert_eq!(
            parse(&rep),
            Some(Ok(Resolution::Reply {
                addr: b.into(),
                mac: B
            }))
        );
        assert!(matches!(
            parse(&rep[..20]),
            Some(Err(Ignored::Malformed(_)))
        ));
    }

    #[test]
    fn ndp_round_trip() {
        let a: Ipv6Addr = "fd00::a".parse().unwrap();
        let b: Ipv6Addr = "fd00::1:b".parse().unwrap();
        let ns = neighbour_solicitation(A, a, b);
        assert_eq!(&ns[..6], &[0x33, 0x33, 0xff, 0x01, 0x00, 0x0b]);
        assert_eq!(
            solicited_node(b).to_string(),
            "ff02::1:ff01:b",
            "RFC 4291 2.7.1"
        );
        assert_eq!(
            parse(&ns),
            Some(Ok(Resolution::Request {
                sender: a.into(),
                sender_mac: A,
                target: b.into()
            }))
        );
        let na = neighbour_advertisement(B, b, A, a);
        assert_eq!(
            parse(&na),
            Some(Ok(Resolution::Reply {
                addr: b.into(),
                mac: B
            }))
        );
        let mut bad = na.clone();
        bad[ETHERNET_HEADER_LEN + 7] = 64;
        assert!(matches!(parse(&bad), Some(Err(Ignored::Malformed(_)))));
        let mut bad = na;
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(
            parse(&bad),
            Some(Err(Ignored::Malformed("NDP: bad ICMPv6 checksum")))
        );
    }

    #[test]
    fn other_frames_are_not_resolution() {
        assert_eq!(parse(&[0u8; 10]), None);
        let mut ipv4 = arp_request(A, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
        ipv4[12..14].copy_from_slice(&[8, 0]);
        assert_eq!(parse(&ipv4), None);
    }

    #[test]
    fn never_panics_on_garbage() {
        let ns = neighbour_solicitation(A, "fd00::a".parse().unwrap(), "fd00::b".parse().unwrap());
        for cut in 0..ns.len() {
            let _ = parse(&ns[..cut]);
        }
        let mut zero_opt = ns.clone();
        let n = zero_opt.len();
        zero_opt[n - 7] = 0;
        let _ = parse(&zero_opt);
    }
}
