//! RoCEv1 (IBA Vol. 1 Annex A16, "RDMA over Converged Ethernet"): the InfiniBand Global Route
//! Header straight over Ethernet (EtherType 0x8915), then BTH, extension headers, payload,
//! pad and ICRC as in InfiniBand; no IP, no UDP, so it is not routable beyond its L2 domain.
//!
//! ```text
//!  GRH (IBA 8.3, 40 bytes; laid out like an IPv6 header)
//!  bits 0-3     IPVer        6
//!  bits 4-11    TClass       traffic class (a switch queue; RoCEv1 maps it to a priority)
//!  bits 12-31   FlowLabel
//!  bits 32-47   PayLen       bytes after the GRH: BTH through ICRC
//!  bits 48-55   NxtHdr       0x1B: IBA transport (a BTH follows)
//!  bits 56-63   HopLmt
//!  bits 64-191  SGID         the sender's port GID
//!  bits 192-319 DGID         the receiver's port GID
//! ```
//!
//! The ICRC is IBA's (7.8.1) with the LRH, which RoCEv1 does not carry, taken as 8 bytes of
//! ones: CRC-32 over those, the GRH with TClass, FlowLabel and HopLmt as ones, BTH with byte
//! 4 (FECN, BECN, Resv6) as ones, then the rest ([`super::icrc::compute_roce_v1`]). This is the
//! RoCEv2 computation over IPv6 without the UDP header.

use core::net::Ipv6Addr;

use super::Ecn;
use super::FixedHeader;
use super::builder::emit_ethernet;
use super::encap::{ETHERTYPE_ROCE_V1, EthernetRepr};
use super::error::Result as WireResult;
use super::ext::IbPacketRepr;
use super::field;
use super::header::header_view;
use super::icrc::{self, ICRC_LEN};
use super::packet::{IbPart, Layer, NotRoce, PacketError, ethernet_link};

/// The GRH's IPVer.
pub const GRH_IP_VERSION: u8 = 6;
/// NxtHdr of an IBA transport header (IBA 8.3.1).
pub const NEXT_HEADER_IBA: u8 = 0x1b;

header_view! {
    /// A view over the 40 bytes of a GRH.
    Grh, GrhRepr,
    field_at { VERSION_CLASS_FLOW = 0, PAYLEN = 4, NXTHDR = 6, HOPLMT = 7, SGID = 8, DGID = 24 }
}

impl<T: AsRef<[u8]>> Grh<T> {
    fn first_word(&self) -> u32 {
        field::read_u32(self.bytes(), field_at::VERSION_CLASS_FLOW)
    }
    /// IPVer: 6.
    pub fn ip_version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }
    /// TClass: DSCP in the high six bits, ECN in the low two.
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }
    /// FlowLabel, 20 bits.
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0xf_ffff
    }
    /// PayLen: bytes after the GRH, BTH through ICRC.
    pub fn payload_len(&self) -> u16 {
        field::read_u16(self.bytes(), field_at::PAYLEN)
    }
    /// NxtHdr: 0x1B for an IBA transport header.
    pub fn next_header(&self) -> u8 {
        self.bytes()[field_at::NXTHDR]
    }
    /// HopLmt.
    pub fn hop_limit(&self) -> u8 {
        self.bytes()[field_at::HOPLMT]
    }
    /// SGID: the sender's port GID.
    pub fn sgid(&self) -> [u8; 16] {
        gid(self.bytes(), field_at::SGID)
    }
    /// DGID: the receiver's port GID.
    pub fn dgid(&self) -> [u8; 16] {
        gid(self.bytes(), field_at::DGID)
    }
}

fn gid(b: &[u8], at: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[at..at + 16]);
    g
}

/// A GRH's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrhRepr {
    /// 4 bits; 6 on the wire.
    pub ip_version: u8,
    /// TClass: DSCP and ECN, as an IP header's traffic class.
    pub traffic_class: u8,
    /// 20 bits; wider values are masked on emit.
    pub flow_label: u32,
    /// PayLen: bytes after the GRH (the builder sets it).
    pub payload_len: u16,
    /// NxtHdr: [`NEXT_HEADER_IBA`].
    pub next_header: u8,
    /// HopLmt.
    pub hop_limit: u8,
    /// The sender's port GID.
    pub sgid: [u8; 16],
    /// The receiver's port GID.
    pub dgid: [u8; 16],
}

impl GrhRepr {
    /// A GRH from `sgid` to `dgid` for an IBA transport packet: TClass 0, flow label 0, hop
    /// limit 64 (the payload length is set when the packet is emitted).
    pub const fn new(sgid: Ipv6Addr, dgid: Ipv6Addr) -> GrhRepr {
        GrhRepr {
            ip_version: GRH_IP_VERSION,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 0,
            next_header: NEXT_HEADER_IBA,
            hop_limit: super::encap::DEFAULT_TTL,
            sgid: sgid.octets(),
            dgid: dgid.octets(),
        }
    }

    /// The SGID as an IPv6 address, as GIDs are written.
    pub fn sgid_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.sgid)
    }
    /// The DGID as an IPv6 address.
    pub fn dgid_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dgid)
    }
    /// TClass's high six bits, as DSCP in an IP header.
    pub const fn dscp(&self) -> u8 {
        self.traffic_class >> 2
    }
    /// TClass's low two bits, read as ECN (RFC 3168) as over IP.
    pub const fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class)
    }
}

impl FixedHeader for GrhRepr {
    const NAME: &'static str = "GRH";
    const LEN: usize = super::encap::GRH_LEN;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = Grh { buffer: buf };
        GrhRepr {
            ip_version: v.ip_version(),
            traffic_class: v.traffic_class(),
            flow_label: v.flow_label(),
            payload_len: v.payload_len(),
            next_header: v.next_header(),
            hop_limit: v.hop_limit(),
            sgid: v.sgid(),
            dgid: v.dgid(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        let word = (u32::from(self.ip_version & 0xf) << 28)
            | (u32::from(self.traffic_class) << 20)
            | (self.flow_label & 0xf_ffff);
        field::write_u32(buf, field_at::VERSION_CLASS_FLOW, word);
        field::write_u16(buf, field_at::PAYLEN, self.payload_len);
        buf[field_at::NXTHDR] = self.next_header;
        buf[field_at::HOPLMT] = self.hop_limit;
        buf[field_at::SGID..field_at::SGID + 16].copy_from_slice(&self.sgid);
        buf[field_at::DGID..field_at::DGID + 16].copy_from_slice(&self.dgid);
    }
}

/// A RoCEv1 frame sliced into its layers: a checked view, after which no accessor fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceV1Packet<'a> {
    frame: &'a [u8],
    eth: EthernetRepr,
    grh: GrhRepr,
    grh_start: usize,
    /// BTH to ICRC; its end is the GRH payload's, and any bytes after it are the trailer.
    ib: IbPart<'a>,
}

impl<'a> RoceV1Packet<'a> {
    /// Slices an Ethernet frame (without FCS). Frames of another EtherType are
    /// [`PacketError::NotRoce`].
    pub fn parse(frame: &'a [u8]) -> Result<RoceV1Packet<'a>, PacketError> {
        let (eth, ethertype, grh_start) = ethernet_link(frame)?;
        if ethertype != ETHERTYPE_ROCE_V1 {
            return Err(PacketError::NotRoce(NotRoce::EtherType(ethertype)));
        }
        RoceV1Packet::parse_at(frame, eth, grh_start)
    }

    /// Slices the RoCEv1 packet whose GRH starts at `grh_start` in `frame`, after the
    /// Ethernet header `eth`: where the frame slicer found EtherType 0x8915 behind tags,
    /// tunnels or a cooked header (its [`NotRoce::RoceV1`]).
    pub fn parse_at(
        frame: &'a [u8],
        eth: EthernetRepr,
        grh_start: usize,
    ) -> Result<RoceV1Packet<'a>, PacketError> {
        let data = frame.get(grh_start..).unwrap_or_default();
        let grh = GrhRepr::parse(data).map_err(|_| PacketError::Truncated {
            layer: Layer::Grh,
            needed: GrhRepr::LEN,
            available: data.len(),
        })?;
        let malformed = |reason| PacketError::Malformed {
            layer: Layer::Grh,
            reason,
        };
        if grh.ip_version != GRH_IP_VERSION {
            return Err(malformed("IPVer is not 6"));
        }
        if grh.next_header != NEXT_HEADER_IBA {
            return Err(malformed("NxtHdr is not 0x1B (IBA transport)"));
        }
        let paylen = usize::from(grh.payload_len);
        let available = data.len() - GrhRepr::LEN;
        if paylen > available {
            return Err(PacketError::LengthBeyondData {
                layer: Layer::Grh,
                field: "PayLen",
                value: paylen,
                available,
            });
        }
        let bth_start = grh_start + GrhRepr::LEN;
        let end = bth_start + paylen;
        Ok(RoceV1Packet {
            frame,
            eth,
            grh,
            grh_start,
            ib: IbPart::parse(frame, bth_start, end)?,
        })
    }

    /// The Ethernet header (with its 802.1Q tag, if any).
    pub fn eth(&self) -> &EthernetRepr {
        &self.eth
    }
    /// The GRH.
    pub fn grh(&self) -> &GrhRepr {
        &self.grh
    }
    /// Where the GRH starts in the frame.
    pub fn grh_offset(&self) -> usize {
        self.grh_start
    }
    /// The ICRC the packet should carry.
    pub fn computed_icrc(&self) -> u32 {
        icrc::compute_roce_v1(&self.frame[self.grh_start..self.ib.end - ICRC_LEN])
            .unwrap_or(!self.icrc())
    }
    /// True if the packet carries the ICRC it should.
    pub fn icrc_ok(&self) -> bool {
        self.computed_icrc() == self.icrc()
    }
    /// GRH through ICRC.
    pub fn grh_packet(&self) -> &'a [u8] {
        &self.frame[self.grh_start..self.ib.end]
    }
    /// The frame up to the end of the ICRC.
    pub fn packet_bytes(&self) -> &'a [u8] {
        &self.frame[..self.ib.end]
    }
    /// Bytes after the ICRC: Ethernet padding or an FCS.
    pub fn trailer(&self) -> &'a [u8] {
        &self.frame[self.ib.end..]
    }
    /// The headers, in the form [`RoceV1Repr`] emits.
    pub fn repr(&self) -> RoceV1Repr<'a> {
        RoceV1Repr {
            eth: self.eth,
            grh: self.grh,
            ib: self.ib(),
        }
    }
}

impl<'a> core::ops::Deref for RoceV1Packet<'a> {
    type Target = IbPart<'a>;

    /// The IB transport part: `bth()`, `ext()`, `payload()`, `icrc()` and the rest.
    fn deref(&self) -> &IbPart<'a> {
        &self.ib
    }
}

/// A whole RoCEv1 frame to emit: the GRH's PayLen is derived, the ICRC computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceV1Repr<'a> {
    /// Ethernet header; the EtherType written is RoCEv1's.
    pub eth: EthernetRepr,
    /// The GRH; its PayLen is replaced by the packet's.
    pub grh: GrhRepr,
    /// BTH, extension headers and payload.
    pub ib: IbPacketRepr<'a>,
}

impl RoceV1Repr<'_> {
    /// Bytes of the whole frame.
    pub fn buffer_len(&self) -> usize {
        self.eth.header_len() + GrhRepr::LEN + self.ib.buffer_len() + ICRC_LEN
    }

    /// Writes the frame into the start of `buf`; its length.
    pub fn emit(&self, buf: &mut [u8]) -> WireResult<usize> {
        let total = self.buffer_len();
        super::error::check_len("frame", buf, total)?;
        let grh_start = self.eth.header_len();
        emit_ethernet(&self.eth, ETHERTYPE_ROCE_V1, &mut buf[..grh_start]);
        let bth_start = grh_start + GrhRepr::LEN;
        let paylen = total - bth_start;
        let grh = GrhRepr {
            payload_len: u16::try_from(paylen).map_err(|_| super::WireError::Malformed {
                header: "GRH",
                reason: "the packet does not fit PayLen",
            })?,
            ..self.grh
        };
        grh.emit_unchecked(&mut buf[grh_start..bth_start]);
        self.ib.emit(&mut buf[bth_start..total - ICRC_LEN])?;
        icrc::fill_roce_v1(&mut buf[grh_start..total])?;
        Ok(total)
    }

    /// The frame in a new vector (see [`RoceV1Repr::emit`]).
    pub fn to_vec(&self) -> WireResult<Vec<u8>> {
        let mut buf = vec![0u8; self.buffer_len()];
        self.emit(&mut buf)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests;
