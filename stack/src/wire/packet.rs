//! The layered slicer: Ethernet (+ 802.1Q tags) -> IPv4 | IPv6 -> UDP port 4791 -> BTH,
//! extension headers, payload, pad -> ICRC (IBA Vol. 1 Annex A17, RoCEv2), through any outer
//! layers the frame was captured in first (see [`super::decap`] and `slice.rs`).
//!
//! Lengths come from the IP and UDP headers, never from the frame: a short frame padded to
//! Ethernet's 60-byte minimum, or a capture that keeps the FCS, has bytes after the IP packet
//! that belong to no header ([`RocePacket::trailer`]). Every way a frame can fail to be a
//! well-formed RoCEv2 packet is a [`PacketError`] naming the layer; nothing here panics.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use etherparse::{Ethernet2HeaderSlice, Ipv4HeaderSlice, Ipv6HeaderSlice, SingleVlanHeaderSlice};
use thiserror::Error;

use super::FixedHeader;
use super::bth::BthRepr;
use super::builder::RoceRepr;
use super::decap::gre::IP_PROTOCOL_GRE;
use super::decap::{Encap, OuterKind};
use super::encap::{
    ETHERNET_HEADER_LEN, ETHERTYPE_VLAN, Ecn, EthernetRepr, IP_PROTOCOL_UDP, IPV6_HEADER_LEN,
    IpRepr, Ipv4Repr, Ipv6Repr, ROCEV2_UDP_PORT, UDP_HEADER_LEN, UdpRepr, VLAN_TAG_LEN, VlanTag,
    internet_checksum,
};
use super::error::WireError;
use super::ext::{ExtHeaders, IbPacketRepr};
use super::icrc::{self, ICRC_LEN};
use super::opcode::{Headers, Opcode};
use super::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, CnpRepr, DethRepr, FethRepr, IethRepr, ImmDtRepr,
    RethRepr,
};

/// The layers of a RoCEv2 frame, for saying where something is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// The Ethernet II header.
    Ethernet,
    /// An 802.1Q tag.
    Vlan,
    /// The IPv4 header.
    Ipv4,
    /// The IPv6 header.
    Ipv6,
    /// The UDP header.
    Udp,
    /// RoCEv1's Global Route Header.
    Grh,
    /// BTH through pad.
    Ib,
    /// A layer the packet was captured inside.
    Outer(OuterKind),
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Layer::Outer(kind) = self {
            return write!(f, "{kind}");
        }
        f.write_str(match self {
            Layer::Ethernet => "Ethernet",
            Layer::Vlan => "802.1Q VLAN",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv6 => "IPv6",
            Layer::Udp => "UDP",
            Layer::Grh => "GRH",
            Layer::Ib => "IB transport",
            Layer::Outer(_) => "",
        })
    }
}

/// Why a well-formed frame is not a RoCEv2 packet at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotRoce {
    /// An EtherType other than IPv4, IPv6 and RoCE v1.
    EtherType(u16),
    /// EtherType 0x8915: RoCE v1, the IB GRH straight over Ethernet, at `grh` in the frame,
    /// after `eth` (its tag the innermost one; zero MACs behind a cooked header, which has
    /// none) and whatever outer layers the slicer took off.
    RoceV1 {
        /// Where the GRH starts in the frame.
        grh: usize,
        /// The Ethernet header before it.
        eth: EthernetRepr,
    },
    /// IPv4 protocol or IPv6 next header other than UDP (IPv6 extension headers included).
    IpProtocol(u8),
    /// A UDP destination port other than 4791.
    UdpPort(u16),
    /// GRE other than version 0 (version 1 is PPTP's).
    GreVersion(u8),
}

impl fmt::Display for NotRoce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotRoce::EtherType(t) => write!(f, "EtherType {t:#06x} is neither IPv4 nor IPv6"),
            NotRoce::RoceV1 { .. } => {
                f.write_str("EtherType 0x8915 is RoCE v1 (GRH over Ethernet)")
            }
            NotRoce::IpProtocol(p) => write!(f, "IP protocol {p} is not UDP (17)"),
            NotRoce::UdpPort(p) => write!(f, "UDP destination port {p} is not {ROCEV2_UDP_PORT}"),
            NotRoce::GreVersion(v) => write!(f, "GRE version {v} is not 0"),
        }
    }
}

/// Why a frame could not be sliced into a RoCEv2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PacketError {
    /// A well-formed frame of another protocol.
    #[error("not RoCEv2: {0}")]
    NotRoce(NotRoce),
    /// The frame ends inside a header.
    #[error("{layer}: truncated, {needed} bytes needed but {available} present")]
    Truncated {
        /// The header cut short.
        layer: Layer,
        /// Its length.
        needed: usize,
        /// The bytes the frame has left.
        available: usize,
    },
    /// A length field claims more bytes than the frame holds.
    #[error("{layer}: {field} says {value} bytes but only {available} are present")]
    LengthBeyondData {
        /// The layer of the length field.
        layer: Layer,
        /// The field's name.
        field: &'static str,
        /// What it says.
        value: usize,
        /// The bytes the frame has.
        available: usize,
    },
    /// A length field is smaller than the headers it must include.
    #[error("{layer}: {field} says {value} bytes, less than the {min} its headers take")]
    LengthTooSmall {
        /// The layer of the length field.
        layer: Layer,
        /// The field's name.
        field: &'static str,
        /// What it says.
        value: usize,
        /// The headers' length.
        min: usize,
    },
    /// The UDP length disagrees with the IP header's length.
    #[error("UDP: length says {udp} bytes but the IP header leaves {ip} for UDP")]
    UdpLengthMismatch {
        /// The UDP length field.
        udp: usize,
        /// What the IP header leaves after itself.
        ip: usize,
    },
    /// A header field holds a value the layer does not allow.
    #[error("{layer}: {reason}")]
    Malformed {
        /// The layer.
        layer: Layer,
        /// What is wrong.
        reason: &'static str,
    },
    /// BTH, extension headers or pad are wrong (unknown opcode, truncated header, pad too big).
    #[error("{0}")]
    Ib(#[from] WireError),
    /// More outer layers than the slicer follows (a GRE-in-GRE loop, say).
    #[error("encapsulated more than {limit} layers deep")]
    TooDeep {
        /// The most outer layers followed ([`super::decap::MAX_DEPTH`]).
        limit: usize,
    },
}

impl PacketError {
    /// True for frames that are not RoCEv2 at all, false for broken RoCEv2 frames.
    pub fn is_not_roce(&self) -> bool {
        matches!(self, PacketError::NotRoce(_))
    }
}

type Result<T> = core::result::Result<T, PacketError>;

/// A RoCEv2 frame sliced into its layers: a checked view over the frame's bytes.
///
/// Parsing checks every layer once and keeps the small Ethernet, IP and UDP headers; the IB
/// part (BTH, extension headers) is read from the bytes when asked for, so that the receive
/// path pays only for what it uses. After a successful parse no accessor can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RocePacket<'a> {
    frame: &'a [u8],
    eth: Option<EthernetRepr>,
    ip: IpRepr<'a>,
    udp: UdpRepr,
    ip_start: usize,
    /// BTH to ICRC; its end is the IP packet's, and any bytes after it are the trailer.
    ib: IbPart<'a>,
    ipv4_checksum: u16,
    /// Where the packet's own Ethernet header (or, without one, its IP header) starts.
    link_start: usize,
    encap: Encap,
    /// What the frame starts with, to walk its outer layers again when asked.
    link: LinkHeader,
    /// The tag nearest the IP header, even without an Ethernet header (Linux cooked).
    vlan: Option<VlanTag>,
}

impl<'a> RocePacket<'a> {
    /// All the headers, in the form the builder emits.
    pub fn repr(&self) -> RoceRepr<'a> {
        RoceRepr {
            eth: self.eth,
            ip: self.ip,
            udp: self.udp,
            ib: self.ib(),
        }
    }
    /// The layers the packet was found inside, outermost first (empty for a plain frame).
    pub fn encap(&self) -> Encap {
        self.encap
    }
    /// Every header before the packet's IP header, outermost first: the outer layers and the
    /// packet's own Ethernet header and tags (for decoders; walks the frame again).
    pub fn link_headers(&self) -> Vec<super::decap::Header> {
        let mut headers = Vec::new();
        let _ = Self::parse_traced(self.frame, self.link, &mut headers);
        headers.retain(|h| h.start < self.ip_start);
        headers
    }
    /// Where the packet's own link header starts: its Ethernet header, or its IP header when
    /// it has none; everything before belongs to outer layers.
    pub fn link_offset(&self) -> usize {
        self.link_start
    }
    /// The tag nearest the IP header (its PCP is the packet's 802.1p priority), whether the
    /// packet has an Ethernet header or a Linux cooked one.
    pub fn vlan(&self) -> Option<VlanTag> {
        self.vlan
    }
    /// The packet's own Ethernet header, the innermost (its `vlan` the last tag before IP);
    /// `None` when the IP packet came without one (raw IP, Linux cooked, GRE carrying IP).
    pub fn eth(&self) -> Option<&EthernetRepr> {
        self.eth.as_ref()
    }
    /// The IP header.
    pub fn ip(&self) -> &IpRepr<'a> {
        &self.ip
    }
    /// The IP ECN field.
    pub fn ecn(&self) -> Ecn {
        self.ip.ecn()
    }
    /// The UDP header.
    pub fn udp(&self) -> &UdpRepr {
        &self.udp
    }
    /// The ICRC the packet should carry (computed on each call).
    pub fn computed_icrc(&self) -> u32 {
        // Cannot fail: parsing checked the IP, UDP and BTH headers are present. Should it ever,
        // the complement of the received value makes `icrc_ok` false rather than panicking.
        icrc::compute(&self.frame[self.ip_start..self.ib.end - ICRC_LEN]).unwrap_or(!self.icrc())
    }

    /// Whether the ICRC the packet carries is the one it should carry.
    pub fn icrc_ok(&self) -> bool {
        self.computed_icrc() == self.icrc()
    }

    /// Whether the packet is an RC FLUSH carrying the ICRC rdma_rxe gives one instead of the
    /// spec's ([`icrc::compute_rxe_flush`]).
    pub fn icrc_is_rxe_flush(&self) -> bool {
        self.bth().opcode
            == super::opcode::Opcode::new(super::opcode::Transport::Rc, super::opcode::op::FLUSH)
            && icrc::compute_rxe_flush(&self.frame[self.ip_start..self.ib.end - ICRC_LEN])
                .is_ok_and(|c| c == self.icrc())
    }

    /// The IPv4 header checksum as received (0 for IPv6, which has none).
    pub fn ipv4_checksum(&self) -> u16 {
        self.ipv4_checksum
    }

    /// True if the IPv4 header checksum is right (always true for IPv6).
    pub fn ip_checksum_ok(&self) -> bool {
        let header = &self.frame[self.ip_start..self.udp_offset()];
        match self.ip {
            IpRepr::V4(_) => internet_checksum(header) == 0,
            IpRepr::V6(_) => true,
        }
    }

    /// What breaks the RoCEv2 annex's rules for an IPv4 header (A17.3.1.1), for which a
    /// receiver drops the packet silently (A17.3.4, CA17-24): a wrong header checksum (RFC
    /// 791: the ICRC does not cover it, nor the TOS and TTL it protects), options (CA17-3:
    /// IHL 5) or DF clear (CA17-7). Fragments are refused by [`RocePacket::parse`] already.
    /// None for a conforming header, and for IPv6.
    pub fn ipv4_violation(&self) -> Option<&'static str> {
        let IpRepr::V4(h) = &self.ip else {
            return None;
        };
        if !self.ip_checksum_ok() {
            Some("the IPv4 header checksum is wrong")
        } else if !h.options.is_empty() {
            Some("IPv4 options (IHL is not 5)")
        } else if !h.dont_fragment {
            Some("IPv4 DF is clear")
        } else {
            None
        }
    }

    /// Where the IP header starts in the frame.
    pub fn ip_offset(&self) -> usize {
        self.ip_start
    }
    /// Where the UDP header starts in the frame.
    pub fn udp_offset(&self) -> usize {
        self.ib.bth_start - UDP_HEADER_LEN
    }

    /// The IP packet, ICRC included.
    pub fn ip_packet(&self) -> &'a [u8] {
        &self.frame[self.ip_start..self.ib.end]
    }

    /// The frame up to the end of the ICRC.
    pub fn packet_bytes(&self) -> &'a [u8] {
        &self.frame[..self.ib.end]
    }

    /// Bytes after the ICRC: Ethernet padding or an FCS.
    pub fn trailer(&self) -> &'a [u8] {
        &self.frame[self.ib.end..]
    }
}

/// The Ethernet header of a frame (with one 802.1Q tag, if any), the EtherType of what
/// follows, and where that starts (RoCEv2's IP header, RoCEv1's GRH).
#[inline]
pub(crate) fn ethernet_link(frame: &[u8]) -> Result<(EthernetRepr, u16, usize)> {
    let eth = Ethernet2HeaderSlice::from_slice(frame).map_err(|_| PacketError::Truncated {
        layer: Layer::Ethernet,
        needed: ETHERNET_HEADER_LEN,
        available: frame.len(),
    })?;
    let mut ethertype = eth.ether_type().0;
    let mut vlan = None;
    let mut ip_start = ETHERNET_HEADER_LEN;
    if ethertype == ETHERTYPE_VLAN {
        let tag = SingleVlanHeaderSlice::from_slice(&frame[ip_start..]).map_err(|_| {
            PacketError::Truncated {
                layer: Layer::Vlan,
                needed: VLAN_TAG_LEN,
                available: frame.len() - ip_start,
            }
        })?;
        vlan = Some(VlanTag {
            pcp: tag.priority_code_point().value(),
            dei: tag.drop_eligible_indicator(),
            vid: tag.vlan_identifier().value(),
        });
        ethertype = tag.ether_type().0;
        ip_start += VLAN_TAG_LEN;
    }
    let eth = EthernetRepr {
        dst: eth.destination(),
        src: eth.source(),
        vlan,
    };
    Ok((eth, ethertype, ip_start))
}

impl<'a> core::ops::Deref for RocePacket<'a> {
    type Target = IbPart<'a>;

    /// The IB transport part: `bth()`, `ext()`, `payload()`, `icrc()` and the rest.
    fn deref(&self) -> &IbPart<'a> {
        &self.ib
    }
}

/// The InfiniBand transport part of a checked RoCE packet, BTH through ICRC, as RoCEv2 (after
/// UDP) and RoCEv1 (after the GRH) carry it alike. The BTH and extension headers are read from
/// the bytes when asked for; after a successful parse no accessor can fail. [`RocePacket`]
/// and [`RoceV1Packet`](super::grh::RoceV1Packet) dereference to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbPart<'a> {
    frame: &'a [u8],
    bth_start: usize,
    payload_start: usize,
    payload_end: usize,
    /// End of the ICRC.
    pub(super) end: usize,
}

impl<'a> IbPart<'a> {
    /// Checks the IB packet in `frame[bth_start..end]` (see [`ib_bounds`]).
    pub(crate) fn parse(frame: &'a [u8], bth_start: usize, end: usize) -> Result<IbPart<'a>> {
        let (payload_start, payload_end) = ib_bounds(&frame[bth_start..end])?;
        Ok(IbPart {
            frame,
            bth_start,
            payload_start: bth_start + payload_start,
            payload_end: bth_start + payload_end,
            end,
        })
    }
    /// Where the BTH starts in the frame.
    pub fn bth_offset(&self) -> usize {
        self.bth_start
    }
    /// The BTH opcode.
    pub fn opcode(&self) -> Opcode {
        Opcode(self.frame[self.bth_start])
    }
    /// The BTH.
    pub fn bth(&self) -> BthRepr {
        BthRepr::parse_unchecked(&self.frame[self.bth_start..])
    }
    /// The extension headers the opcode calls for.
    pub fn ext(&self) -> ExtHeaders {
        let bytes = &self.frame[self.bth_start + BthRepr::LEN..self.payload_start];
        // Cannot fail: parsing checked the opcode and that its headers are all present.
        ExtHeaders::parse(self.opcode(), bytes).map_or_else(|_| ExtHeaders::default(), |(e, _)| e)
    }
    /// BTH, extension headers and payload.
    pub fn ib(&self) -> IbPacketRepr<'a> {
        IbPacketRepr {
            bth: self.bth(),
            ext: self.ext(),
            payload: self.payload(),
        }
    }
    /// The payload (the message data), without the pad.
    pub fn payload(&self) -> &'a [u8] {
        &self.frame[self.payload_start..self.payload_end]
    }
    /// The `PadCnt` bytes between payload and ICRC.
    pub fn pad(&self) -> &'a [u8] {
        &self.frame[self.payload_end..self.end - ICRC_LEN]
    }
    /// The ICRC the packet carries (sent least-significant byte first).
    pub fn icrc(&self) -> u32 {
        let mut b = [0u8; ICRC_LEN];
        b.copy_from_slice(&self.frame[self.end - ICRC_LEN..self.end]);
        u32::from_le_bytes(b)
    }
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Where the payload starts and ends in `ib` (BTH through ICRC), after checking that the
/// opcode is known, its extension headers are all there and the pad fits. This is the hot
/// path, so it only computes lengths; on failure the full parse names what is wrong.
pub(crate) fn ib_bounds(ib: &[u8]) -> Result<(usize, usize)> {
    let min = BthRepr::LEN + ICRC_LEN;
    if ib.len() < min {
        return Err(PacketError::Truncated {
            layer: Layer::Ib,
            needed: min,
            available: ib.len(),
        });
    }
    let covered = &ib[..ib.len() - ICRC_LEN];
    let ext_len = EXT_LEN[usize::from(covered[0])];
    let start = BthRepr::LEN + usize::from(ext_len);
    let pad = usize::from((covered[1] >> 4) & 0x3);
    if ext_len != UNKNOWN && start + pad <= covered.len() {
        return Ok((start, covered.len() - pad));
    }
    Err(match IbPacketRepr::parse(covered) {
        Err(e) => PacketError::Ib(e),
        Ok(_) => PacketError::Malformed {
            layer: Layer::Ib,
            reason: "the headers or pad do not fit the packet",
        },
    })
}

/// [`EXT_LEN`]'s mark for an opcode the table does not know.
const UNKNOWN: u8 = 0xff;

/// Bytes of extension headers each opcode carries, [`UNKNOWN`] for unknown opcodes: one load
/// instead of a walk through the opcode table on every packet. Must agree with
/// [`ExtHeaders::len_for`] (a test checks every opcode).
static EXT_LEN: [u8; 256] = {
    const SIZES: [(Headers, usize); 9] = [
        (Headers::DETH, DethRepr::LEN),
        (Headers::FETH, FethRepr::LEN),
        (Headers::RETH, RethRepr::LEN),
        (Headers::ATOMIC_ETH, AtomicEthRepr::LEN),
        (Headers::AETH, AethRepr::LEN),
        (Headers::ATOMIC_ACK_ETH, AtomicAckEthRepr::LEN),
        (Headers::IMMDT, ImmDtRepr::LEN),
        (Headers::IETH, IethRepr::LEN),
        (Headers::CNP, CnpRepr::LEN),
    ];
    let mut table = [UNKNOWN; 256];
    let mut v = 0;
    while v < 256 {
        if let Some(info) = Opcode(v as u8).info() {
            let mut len = 0;
            let mut i = 0;
            while i < SIZES.len() {
                if info.headers.contains(SIZES[i].0) {
                    len += SIZES[i].1;
                }
                i += 1;
            }
            table[v] = len as u8;
        }
        v += 1;
    }
    table
};

/// An IP header as sliced, before its length is checked against the data.
struct IpParts<'a> {
    repr: IpRepr<'a>,
    /// UDP or GRE: the slicer's only ways on.
    protocol: u8,
    header_len: usize,
    /// What the header's length field says the whole IP packet takes.
    packet_len: usize,
    /// IPv4 header checksum as received; 0 for IPv6.
    checksum: u16,
}

impl IpParts<'_> {
    /// Checks the length field against the `available` bytes from the IP header on, in the
    /// field's own terms (IPv4 counts the header, IPv6 does not).
    fn check_len(&self, available: usize) -> Result<()> {
        let (layer, field, counted_from) = match self.repr {
            IpRepr::V4(_) => (Layer::Ipv4, "total length", 0),
            IpRepr::V6(_) => (Layer::Ipv6, "payload length", IPV6_HEADER_LEN),
        };
        if self.packet_len > available {
            return Err(PacketError::LengthBeyondData {
                layer,
                field,
                value: self.packet_len - counted_from,
                available: available - counted_from,
            });
        }
        let min = self.header_len + UDP_HEADER_LEN;
        if self.packet_len < min {
            return Err(PacketError::LengthTooSmall {
                layer,
                field,
                value: self.packet_len - counted_from,
                min: min - counted_from,
            });
        }
        Ok(())
    }
}

fn parse_ipv4(data: &[u8]) -> Result<IpParts<'_>> {
    use etherparse::err::ipv4::{HeaderError, HeaderSliceError};
    let h = Ipv4HeaderSlice::from_slice(data).map_err(|e| match e {
        HeaderSliceError::Len(l) => PacketError::Truncated {
            layer: Layer::Ipv4,
            needed: l.required_len,
            available: l.len,
        },
        HeaderSliceError::Content(HeaderError::UnexpectedVersion { .. }) => {
            PacketError::Malformed {
                layer: Layer::Ipv4,
                reason: "the version field is not 4",
            }
        }
        HeaderSliceError::Content(HeaderError::HeaderLengthSmallerThanHeader { .. }) => {
            PacketError::Malformed {
                layer: Layer::Ipv4,
                reason: "IHL is less than 5 (a 20-byte header)",
            }
        }
    })?;
    let protocol = h.protocol().0;
    if protocol != IP_PROTOCOL_UDP && protocol != IP_PROTOCOL_GRE {
        return Err(PacketError::NotRoce(NotRoce::IpProtocol(protocol)));
    }
    if data[6] & 0x80 != 0 {
        return Err(PacketError::Malformed {
            layer: Layer::Ipv4,
            reason: "the reserved flag bit is set",
        });
    }
    if h.more_fragments() || h.fragments_offset().value() != 0 {
        return Err(PacketError::Malformed {
            layer: Layer::Ipv4,
            reason: "fragment: RoCEv2 packets fit the path MTU and are never fragmented",
        });
    }
    let repr = Ipv4Repr {
        src: Ipv4Addr::from(h.source()),
        dst: Ipv4Addr::from(h.destination()),
        dscp: data[1] >> 2,
        ecn: Ecn::from_bits(data[1]),
        identification: h.identification(),
        dont_fragment: h.dont_fragment(),
        ttl: h.ttl(),
        options: h.options(),
    };
    Ok(IpParts {
        repr: IpRepr::V4(repr),
        protocol,
        header_len: h.slice().len(),
        packet_len: usize::from(h.total_len()),
        checksum: h.header_checksum(),
    })
}

fn parse_ipv6(data: &[u8]) -> Result<IpParts<'_>> {
    use etherparse::err::ipv6::HeaderSliceError;
    let h = Ipv6HeaderSlice::from_slice(data).map_err(|e| match e {
        HeaderSliceError::Len(l) => PacketError::Truncated {
            layer: Layer::Ipv6,
            needed: l.required_len,
            available: l.len,
        },
        HeaderSliceError::Content(_) => PacketError::Malformed {
            layer: Layer::Ipv6,
            reason: "the version field is not 6",
        },
    })?;
    let protocol = h.next_header().0;
    if protocol != IP_PROTOCOL_UDP && protocol != IP_PROTOCOL_GRE {
        return Err(PacketError::NotRoce(NotRoce::IpProtocol(protocol)));
    }
    let repr = Ipv6Repr {
        src: Ipv6Addr::from(h.source()),
        dst: Ipv6Addr::from(h.destination()),
        dscp: h.traffic_class() >> 2,
        ecn: Ecn::from_bits(h.traffic_class()),
        flow_label: h.flow_label().value(),
        hop_limit: h.hop_limit(),
    };
    Ok(IpParts {
        repr: IpRepr::V6(repr),
        protocol,
        header_len: IPV6_HEADER_LEN,
        packet_len: IPV6_HEADER_LEN + usize::from(h.payload_length()),
        checksum: 0,
    })
}

mod slice;
pub use slice::LinkHeader;

#[cfg(test)]
mod tests;
