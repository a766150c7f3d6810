//! The slicer's walk, from the capture's link header in: Ethernet and its tags, IP, then
//! either UDP port 4791 (the RoCEv2 packet, which ends the walk) or a tunnel whose payload is
//! walked the same way (VXLAN, Geneve, GRE with or without ERSPAN). Every step moves forward
//! by at least one header and at most [`MAX_DEPTH`] outer layers are followed, so a walk
//! ends in a few steps whatever the frame; a tunnel's payload ends where its outer IP packet
//! does, never at the frame's end.

use super::{
    IbPart, IpParts, Layer, NotRoce, PacketError, Result, RocePacket, be16, parse_ipv4, parse_ipv6,
};
use crate::wire::FixedHeader;
use crate::wire::decap::erspan::{
    ErspanIIIRepr, ErspanIIRepr, ErspanPlatformRepr, GRE_PROTOCOL_ERSPAN_II,
    GRE_PROTOCOL_ERSPAN_III, VERSION_II, VERSION_III,
};
use crate::wire::decap::geneve::{self, GENEVE_UDP_PORT, GeneveRepr};
use crate::wire::decap::gre::{ETHERTYPE_TEB, Gre};
use crate::wire::decap::sll::{Sll2Repr, SllRepr};
use crate::wire::decap::vlan::{self, TagRepr};
use crate::wire::decap::vxlan::{VXLAN_UDP_PORT, VxlanRepr};
use crate::wire::decap::{Encap, HeaderKind, MAX_DEPTH, OuterKind, Trace};
use crate::wire::encap::{
    ETHERNET_HEADER_LEN, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCE_V1, ETHERTYPE_VLAN,
    EthernetRepr, IP_PROTOCOL_UDP, IPV4_HEADER_LEN, IpRepr, ROCEV2_UDP_PORT, UDP_HEADER_LEN,
    UdpRepr, VLAN_TAG_LEN, VlanTag,
};
use crate::wire::error::WireError;

/// The header a frame starts with: its capture's link type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkHeader {
    /// LINKTYPE_ETHERNET.
    Ethernet,
    /// LINKTYPE_RAW, IPV4, IPV6: an IP packet.
    Ip,
    /// LINKTYPE_LINUX_SLL.
    Sll,
    /// LINKTYPE_LINUX_SLL2.
    Sll2,
}

/// Where the walk goes next.
enum Next {
    Ethernet(usize),
    /// The EtherType at the end of an Ethernet or cooked header, the header's MACs if any.
    EtherType {
        ethertype: u16,
        at: usize,
        mac: Option<([u8; 6], [u8; 6])>,
    },
    /// An IP packet; `version` 0 when only its first nibble can say.
    Ip {
        start: usize,
        version: u8,
        eth: Option<EthernetRepr>,
        vlan: Option<VlanTag>,
    },
}

impl<'a> RocePacket<'a> {
    /// Slices an Ethernet frame (without FCS; any bytes after the IP packet are the trailer).
    pub fn parse(frame: &'a [u8]) -> Result<RocePacket<'a>> {
        slice(frame, LinkHeader::Ethernet, &mut (), &mut Encap::default())
    }

    /// Slices a bare IP packet (no link header); the version field says whether it is IPv4
    /// or IPv6.
    pub fn parse_ip(packet: &'a [u8]) -> Result<RocePacket<'a>> {
        slice(packet, LinkHeader::Ip, &mut (), &mut Encap::default())
    }

    /// Slices a frame that starts with `link`.
    pub fn parse_link(frame: &'a [u8], link: LinkHeader) -> Result<RocePacket<'a>> {
        slice(frame, link, &mut (), &mut Encap::default())
    }

    /// As [`RocePacket::parse_link`], also saying the outer layers found when the frame is
    /// not a RoCE packet (a VXLAN frame carrying ARP: `[VXLAN]` and not RoCE).
    pub fn parse_outer(frame: &'a [u8], link: LinkHeader) -> (Encap, Result<RocePacket<'a>>) {
        let mut encap = Encap::default();
        let result = slice(frame, link, &mut (), &mut encap);
        (encap, result)
    }

    /// As [`RocePacket::parse_link`], telling `trace` every header met on the way: the outer
    /// layers, then the packet's own Ethernet, tags, IP and UDP headers.
    pub fn parse_traced(
        frame: &'a [u8],
        link: LinkHeader,
        trace: &mut impl Trace,
    ) -> Result<RocePacket<'a>> {
        slice(frame, link, trace, &mut Encap::default())
    }
}

fn push(encap: &mut Encap, kind: OuterKind) -> Result<()> {
    encap
        .push(kind)
        .map_err(|_| PacketError::TooDeep { limit: MAX_DEPTH })
}

/// The fixed header `H` of outer layer `kind` at `at`, if the bytes up to `end` hold it.
fn outer<H: FixedHeader>(frame: &[u8], at: usize, end: usize, kind: OuterKind) -> Result<H> {
    let bytes = frame.get(at..end).unwrap_or_default();
    H::parse(bytes).map_err(|e| outer_error(kind, e))
}

fn outer_error(kind: OuterKind, e: WireError) -> PacketError {
    let layer = Layer::Outer(kind);
    match e {
        WireError::Truncated {
            needed, available, ..
        } => PacketError::Truncated {
            layer,
            needed,
            available,
        },
        WireError::Malformed { reason, .. } => PacketError::Malformed { layer, reason },
        WireError::UnknownOpcode(_) => PacketError::Malformed {
            layer,
            reason: "unreadable",
        },
    }
}

/// What a tunnel's protocol type (an EtherType) says it carries.
fn carried(at: usize, protocol: u16) -> Result<Next> {
    match protocol {
        ETHERTYPE_TEB => Ok(Next::Ethernet(at)),
        ETHERTYPE_IPV4 => Ok(Next::Ip {
            start: at,
            version: 4,
            eth: None,
            vlan: None,
        }),
        ETHERTYPE_IPV6 => Ok(Next::Ip {
            start: at,
            version: 6,
            eth: None,
            vlan: None,
        }),
        other => Err(PacketError::NotRoce(NotRoce::EtherType(other))),
    }
}

/// The walk. `encap` gathers the outer layers, and keeps them when the frame turns out not
/// to be RoCE.
#[inline]
fn slice<'a, T: Trace>(
    frame: &'a [u8],
    link: LinkHeader,
    trace: &mut T,
    encap: &mut Encap,
) -> Result<RocePacket<'a>> {
    // The bytes of the innermost layer found so far end here.
    let mut end = frame.len();
    let mut eth_start = 0;
    let mut next = match link {
        LinkHeader::Ethernet => Next::Ethernet(0),
        LinkHeader::Ip => Next::Ip {
            start: 0,
            version: 0,
            eth: None,
            vlan: None,
        },
        LinkHeader::Sll => {
            let h: SllRepr = outer(frame, 0, end, OuterKind::Sll)?;
            push(encap, OuterKind::Sll)?;
            trace.header(HeaderKind::Sll, 0, SllRepr::LEN);
            Next::EtherType {
                ethertype: h.protocol,
                at: SllRepr::LEN,
                mac: None,
            }
        }
        LinkHeader::Sll2 => {
            let h: Sll2Repr = outer(frame, 0, end, OuterKind::Sll2)?;
            push(encap, OuterKind::Sll2)?;
            trace.header(HeaderKind::Sll2, 0, Sll2Repr::LEN);
            Next::EtherType {
                ethertype: h.protocol,
                at: Sll2Repr::LEN,
                mac: None,
            }
        }
    };
    loop {
        next = match next {
            Next::Ethernet(start) => {
                let data = &frame[start..end];
                if data.len() < ETHERNET_HEADER_LEN {
                    return Err(PacketError::Truncated {
                        layer: Layer::Ethernet,
                        needed: ETHERNET_HEADER_LEN,
                        available: data.len(),
                    });
                }
                trace.header(HeaderKind::Ethernet, start, ETHERNET_HEADER_LEN);
                eth_start = start;
                let mut dst = [0; 6];
                let mut src = [0; 6];
                dst.copy_from_slice(&data[..6]);
                src.copy_from_slice(&data[6..12]);
                Next::EtherType {
                    ethertype: be16(data, 12),
                    at: start + ETHERNET_HEADER_LEN,
                    mac: Some((dst, src)),
                }
            }
            Next::EtherType {
                mut ethertype,
                mut at,
                mac,
            } => {
                let mut vlan = None;
                while vlan::is_tpid(ethertype) {
                    let kind = if ethertype == ETHERTYPE_VLAN {
                        OuterKind::Vlan
                    } else {
                        OuterKind::QinQ
                    };
                    push(encap, kind)?;
                    let data = &frame[at..end];
                    if data.len() < VLAN_TAG_LEN {
                        return Err(PacketError::Truncated {
                            layer: Layer::Vlan,
                            needed: VLAN_TAG_LEN,
                            available: data.len(),
                        });
                    }
                    trace.header(HeaderKind::Tag { tpid: ethertype }, at, VLAN_TAG_LEN);
                    let tag = TagRepr::parse_unchecked(data);
                    vlan = Some(tag.tag);
                    ethertype = tag.ethertype;
                    at += VLAN_TAG_LEN;
                }
                let eth = mac.map(|(dst, src)| EthernetRepr { dst, src, vlan });
                match ethertype {
                    ETHERTYPE_IPV4 => Next::Ip {
                        start: at,
                        version: 4,
                        eth,
                        vlan,
                    },
                    ETHERTYPE_IPV6 => Next::Ip {
                        start: at,
                        version: 6,
                        eth,
                        vlan,
                    },
                    ETHERTYPE_ROCE_V1 => {
                        let eth = eth.unwrap_or(EthernetRepr {
                            dst: [0; 6],
                            src: [0; 6],
                            vlan,
                        });
                        return Err(PacketError::NotRoce(NotRoce::RoceV1 { grh: at, eth }));
                    }
                    other => return Err(PacketError::NotRoce(NotRoce::EtherType(other))),
                }
            }
            Next::Ip {
                start,
                version,
                eth,
                vlan,
            } => {
                let data = &frame[start..end];
                let version = match (version, data.first()) {
                    (0, Some(b)) => b >> 4,
                    (0, None) => {
                        return Err(PacketError::Truncated {
                            layer: Layer::Ipv4,
                            needed: IPV4_HEADER_LEN,
                            available: 0,
                        });
                    }
                    (v, _) => v,
                };
                let ip = match version {
                    4 => parse_ipv4(data)?,
                    6 => parse_ipv6(data)?,
                    _ => {
                        return Err(PacketError::Malformed {
                            layer: Layer::Ipv4,
                            reason: "the version field is neither 4 nor 6",
                        });
                    }
                };
                let link_start = if eth.is_some() { eth_start } else { start };
                if ip.protocol == IP_PROTOCOL_UDP {
                    let udp = &data[ip.header_len..];
                    if udp.len() < UDP_HEADER_LEN {
                        return Err(PacketError::Truncated {
                            layer: Layer::Udp,
                            needed: UDP_HEADER_LEN,
                            available: udp.len(),
                        });
                    }
                    // The port is checked before any length, so that a truncated or odd
                    // datagram of another protocol is reported as simply not RoCE.
                    let port = be16(udp, 2);
                    let tunnel = match port {
                        ROCEV2_UDP_PORT => {
                            trace_ip(trace, &ip, start);
                            trace.header(HeaderKind::Udp, start + ip.header_len, UDP_HEADER_LEN);
                            return finish(
                                frame,
                                start,
                                data,
                                (eth, vlan),
                                ip,
                                (link, link_start),
                                *encap,
                            );
                        }
                        VXLAN_UDP_PORT => OuterKind::Vxlan,
                        GENEVE_UDP_PORT => OuterKind::Geneve,
                        other => return Err(PacketError::NotRoce(NotRoce::UdpPort(other))),
                    };
                    ip.check_len(data.len())?;
                    push(encap, tunnel)?;
                    trace_ip(trace, &ip, start);
                    trace.header(HeaderKind::Udp, start + ip.header_len, UDP_HEADER_LEN);
                    let at = start + ip.header_len + UDP_HEADER_LEN;
                    end = start + ip.packet_len;
                    if tunnel == OuterKind::Vxlan {
                        outer::<VxlanRepr>(frame, at, end, tunnel)?;
                        trace.header(HeaderKind::Vxlan, at, VxlanRepr::LEN);
                        Next::Ethernet(at + VxlanRepr::LEN)
                    } else {
                        let g: GeneveRepr = outer(frame, at, end, tunnel)?;
                        if g.version != geneve::VERSION {
                            return Err(PacketError::Malformed {
                                layer: Layer::Outer(tunnel),
                                reason: "unknown version (not 0)",
                            });
                        }
                        if end - at < g.header_len() {
                            return Err(PacketError::Truncated {
                                layer: Layer::Outer(tunnel),
                                needed: g.header_len(),
                                available: end - at,
                            });
                        }
                        trace.header(HeaderKind::Geneve, at, g.header_len());
                        carried(at + g.header_len(), g.protocol)?
                    }
                } else {
                    // GRE (parse_ipv4 and parse_ipv6 let nothing else through).
                    ip.check_len(data.len())?;
                    trace_ip(trace, &ip, start);
                    let at = start + ip.header_len;
                    end = start + ip.packet_len;
                    let gre = Gre::new_checked(&frame[at..end])
                        .map_err(|e| outer_error(OuterKind::Gre, e))?;
                    if gre.version() != 0 {
                        return Err(PacketError::NotRoce(NotRoce::GreVersion(gre.version())));
                    }
                    trace.header(HeaderKind::Gre, at, gre.header_len());
                    let at = at + gre.header_len();
                    match gre.protocol() {
                        GRE_PROTOCOL_ERSPAN_II if gre.sequence().is_some() => {
                            push(encap, OuterKind::ErspanII)?;
                            push(encap, OuterKind::Gre)?;
                            let h: ErspanIIRepr = outer(frame, at, end, OuterKind::ErspanII)?;
                            check_version(h.version, VERSION_II, OuterKind::ErspanII)?;
                            trace.header(HeaderKind::ErspanII, at, ErspanIIRepr::LEN);
                            Next::Ethernet(at + ErspanIIRepr::LEN)
                        }
                        GRE_PROTOCOL_ERSPAN_II => {
                            push(encap, OuterKind::ErspanI)?;
                            push(encap, OuterKind::Gre)?;
                            Next::Ethernet(at)
                        }
                        GRE_PROTOCOL_ERSPAN_III => {
                            push(encap, OuterKind::ErspanIII)?;
                            push(encap, OuterKind::Gre)?;
                            let h: ErspanIIIRepr = outer(frame, at, end, OuterKind::ErspanIII)?;
                            check_version(h.version, VERSION_III, OuterKind::ErspanIII)?;
                            trace.header(HeaderKind::ErspanIII, at, ErspanIIIRepr::LEN);
                            let mut at = at + ErspanIIIRepr::LEN;
                            if h.optional {
                                outer::<ErspanPlatformRepr>(frame, at, end, OuterKind::ErspanIII)?;
                                trace.header(
                                    HeaderKind::ErspanPlatform,
                                    at,
                                    ErspanPlatformRepr::LEN,
                                );
                                at += ErspanPlatformRepr::LEN;
                            }
                            Next::Ethernet(at)
                        }
                        protocol => {
                            push(encap, OuterKind::Gre)?;
                            carried(at, protocol)?
                        }
                    }
                }
            }
        }
    }
}

fn check_version(found: u8, expected: u8, kind: OuterKind) -> Result<()> {
    if found == expected {
        return Ok(());
    }
    Err(PacketError::Malformed {
        layer: Layer::Outer(kind),
        reason: "the version field does not match the GRE protocol type",
    })
}

fn trace_ip(trace: &mut impl Trace, ip: &IpParts<'_>, start: usize) {
    let kind = match ip.repr {
        IpRepr::V4(_) => HeaderKind::Ipv4,
        IpRepr::V6(_) => HeaderKind::Ipv6,
    };
    trace.header(kind, start, ip.header_len);
}

/// The RoCEv2 packet whose IP header starts at `ip_start` (`data` from there to the end of
/// the innermost layer): its lengths checked, its IB headers bounded.
#[inline]
fn finish<'a>(
    frame: &'a [u8],
    ip_start: usize,
    data: &'a [u8],
    (eth, vlan): (Option<EthernetRepr>, Option<VlanTag>),
    ip: IpParts<'a>,
    (link, link_start): (LinkHeader, usize),
    encap: Encap,
) -> Result<RocePacket<'a>> {
    let udp_bytes = &data[ip.header_len..];
    let udp = UdpRepr {
        src_port: be16(udp_bytes, 0),
        dst_port: be16(udp_bytes, 2),
        checksum: be16(udp_bytes, 6),
    };
    ip.check_len(data.len())?;
    let udp_len = usize::from(be16(udp_bytes, 4));
    let ip_payload_len = ip.packet_len - ip.header_len;
    if udp_len != ip_payload_len {
        return Err(PacketError::UdpLengthMismatch {
            udp: udp_len,
            ip: ip_payload_len,
        });
    }
    let bth_start = ip_start + ip.header_len + UDP_HEADER_LEN;
    let ip_end = ip_start + ip.packet_len;
    let ib = IbPart::parse(frame, bth_start, ip_end)?;
    Ok(RocePacket {
        frame,
        eth,
        ip: ip.repr,
        udp,
        ip_start,
        ib,
        ipv4_checksum: ip.checksum,
        link_start,
        encap,
        link,
        vlan,
    })
}
