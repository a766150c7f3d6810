//! Complete RoCEv2 frames from their headers: the one builder that tests, the transport
//! engine, `roce gen` and the demo share. Lengths, the IPv4 header checksum, the pad count and
//! the ICRC are filled in; everything else comes from the caller's [`RoceRepr`], so a frame
//! parsed by [`super::packet::RocePacket`] re-emits byte for byte.

use core::net::IpAddr;

use etherparse::{
    EtherType, Ethernet2Header, IpNumber, Ipv6FlowLabel, Ipv6Header, SingleVlanHeader, UdpHeader,
    VlanId, VlanPcp,
};

use super::encap::{
    ETHERNET_HEADER_LEN, ETHERTYPE_VLAN, Ecn, EthernetRepr, IP_PROTOCOL_UDP, IPV4_HEADER_LEN,
    IPV4_MAX_HEADER_LEN, IPV6_HEADER_LEN, IpRepr, Ipv4Repr, Ipv6Repr, UDP_HEADER_LEN, UdpRepr,
    VLAN_TAG_LEN, set_ipv4_checksum,
};
use super::error::{Result, WireError, check_len};
use super::ext::IbPacketRepr;
use super::field::Qpn;
use super::icrc::{self, ICRC_LEN};

/// The most the builder writes around an IB packet (BTH through pad) in an untagged frame:
/// Ethernet, the longer of the two IP headers it writes (IPv6), UDP and the ICRC. An 802.1Q tag
/// adds [`VLAN_TAG_LEN`].
pub const MAX_UNTAGGED_OVERHEAD: usize =
    ETHERNET_HEADER_LEN + IPV6_HEADER_LEN + UDP_HEADER_LEN + ICRC_LEN;

/// The headers in front of the IB packet in an untagged IPv4 frame without IP options: where a
/// sender that does not know the destination yet writes the packet before the headers.
pub const UNTAGGED_IPV4_HEADERS_LEN: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;

/// Everything that makes up a RoCEv2 frame, from the Ethernet header to the pad; the ICRC is
/// computed on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceRepr<'a> {
    /// `None` for a bare IP packet without a link header (a TUN device, a cooked capture).
    pub eth: Option<EthernetRepr>,
    /// IPv4 or IPv6 header.
    pub ip: IpRepr<'a>,
    /// UDP header (destination port 4791).
    pub udp: UdpRepr,
    /// BTH, extension headers and payload.
    pub ib: IbPacketRepr<'a>,
}

impl<'a> RoceRepr<'a> {
    /// A frame as rxe would send it from the QP `src_qpn`: TTL 64, IPv4 DF, DSCP 0, not
    /// ECN-capable, UDP checksum 0, and the UDP source port rxe gives a UD QP (for RC and UC
    /// set `udp` to [`UdpRepr::rxe_connected`]). `None` if the two addresses are of different
    /// IP families.
    pub fn rxe(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src: IpAddr,
        dst: IpAddr,
        src_qpn: Qpn,
        ib: IbPacketRepr<'a>,
    ) -> Option<RoceRepr<'a>> {
        let RoceHeaders { eth, ip, udp } = RoceHeaders::rxe(src_mac, dst_mac, src, dst, src_qpn)?;
        Some(RoceRepr { eth, ip, udp, ib })
    }

    /// Adds an 802.1Q tag (no effect on a frame without an Ethernet header).
    pub fn with_vlan(mut self, pcp: u8, vid: u16) -> RoceRepr<'a> {
        if let Some(eth) = &mut self.eth {
            eth.vlan = Some(super::encap::VlanTag {
                pcp,
                dei: false,
                vid,
            });
        }
        self
    }

    /// Sets the IP ECN field (the ICRC masks it, so a switch may change it).
    pub fn with_ecn(mut self, ecn: Ecn) -> RoceRepr<'a> {
        self.ip.set_ecn(ecn);
        self
    }

    /// Sets the IP DSCP (the traffic class deployments give RoCE).
    pub fn with_dscp(mut self, dscp: u8) -> RoceRepr<'a> {
        self.ip.set_dscp(dscp);
        self
    }

    /// IPv4 TTL or IPv6 hop limit.
    pub fn with_ttl(mut self, ttl: u8) -> RoceRepr<'a> {
        self.ip.set_ttl(ttl);
        self
    }

    /// Sets the UDP source port (the entropy ECMP spreads flows by).
    pub fn with_udp_src_port(mut self, port: u16) -> RoceRepr<'a> {
        self.udp.src_port = port;
        self
    }

    /// The headers around the IB packet.
    pub fn headers(&self) -> RoceHeaders<'a> {
        RoceHeaders {
            eth: self.eth,
            ip: self.ip,
            udp: self.udp,
        }
    }

    /// Bytes of the IP packet, ICRC included.
    pub fn ip_len(&self) -> usize {
        self.headers().ip_len(self.ib.buffer_len())
    }

    /// Bytes of the whole frame.
    pub fn buffer_len(&self) -> usize {
        self.headers().frame_len(self.ib.buffer_len())
    }

    /// Writes the frame into the start of `buf` and returns its length. Fails, writing
    /// nothing useful, if `buf` is short, if the extension headers differ from what the opcode
    /// calls for, or if the packet does not fit the IP and UDP length fields.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let headers = self.headers();
        let ib_len = self.ib.buffer_len();
        let total = headers.frame_len(ib_len);
        check_len("frame", buf, total)?;
        let ib_start = headers.len();
        self.ib.emit(&mut buf[ib_start..total - ICRC_LEN])?;
        headers.emit_around(buf, ib_len)
    }

    /// The frame in a new vector (see [`RoceRepr::emit`]).
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.buffer_len()];
        self.emit(&mut buf)?;
        Ok(buf)
    }
}

/// The headers RoCEv2 wraps an IB packet in: Ethernet (unless `None`), IP and UDP; the ICRC
/// follows the packet. [`RoceHeaders::emit_around`] writes them around a packet already in
/// place, so a packet written where the frame is sent from is not copied again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceHeaders<'a> {
    /// `None` for a bare IP packet without a link header.
    pub eth: Option<EthernetRepr>,
    /// IPv4 or IPv6 header.
    pub ip: IpRepr<'a>,
    /// UDP header (destination port 4791).
    pub udp: UdpRepr,
}

impl RoceHeaders<'_> {
    /// The headers of [`RoceRepr::rxe`]'s frame, for a packet written in place.
    pub fn rxe(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src: IpAddr,
        dst: IpAddr,
        src_qpn: Qpn,
    ) -> Option<RoceHeaders<'static>> {
        Some(RoceHeaders {
            eth: Some(EthernetRepr::new(src_mac, dst_mac)),
            ip: IpRepr::new(src, dst)?,
            udp: UdpRepr::rxe(src_qpn),
        })
    }

    fn link_len(&self) -> usize {
        self.eth.as_ref().map_or(0, EthernetRepr::header_len)
    }

    /// Bytes from the start of the frame to the IB packet (the BTH).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.link_len() + self.ip.header_len() + UDP_HEADER_LEN
    }

    /// Bytes of the IP packet around an IB packet of `ib_len` bytes, ICRC included.
    pub fn ip_len(&self, ib_len: usize) -> usize {
        self.ip.header_len() + UDP_HEADER_LEN + ib_len + ICRC_LEN
    }

    /// Bytes of the frame around an IB packet of `ib_len` bytes.
    pub fn frame_len(&self, ib_len: usize) -> usize {
        self.link_len() + self.ip_len(ib_len)
    }

    /// Writes the headers into the start of `buf`, in front of the IB packet (BTH through pad,
    /// `ib_len` bytes) that is already at [`RoceHeaders::len`], and the ICRC after it; returns
    /// the frame's length. Fails if `buf` is short or the packet does not fit the IP and UDP
    /// length fields.
    pub fn emit_around(&self, buf: &mut [u8], ib_len: usize) -> Result<usize> {
        let total = self.frame_len(ib_len);
        check_len("frame", buf, total)?;
        let udp_len = length_field("UDP", UDP_HEADER_LEN + ib_len + ICRC_LEN)?;
        let ip_start = self.link_len();
        if let Some(eth) = &self.eth {
            emit_ethernet(eth, self.ip.ethertype(), &mut buf[..ip_start]);
        }
        let udp_start = ip_start + self.ip.header_len();
        match &self.ip {
            IpRepr::V4(h) => emit_ipv4(h, udp_len, &mut buf[ip_start..udp_start])?,
            IpRepr::V6(h) => emit_ipv6(h, udp_len, &mut buf[ip_start..udp_start]),
        }
        let udp = UdpHeader {
            source_port: self.udp.src_port,
            destination_port: self.udp.dst_port,
            length: udp_len,
            checksum: self.udp.checksum,
        };
        buf[udp_start..udp_start + UDP_HEADER_LEN].copy_from_slice(&udp.to_bytes());
        icrc::fill(&mut buf[ip_start..total])?;
        Ok(total)
    }
}

fn length_field(header: &'static str, len: usize) -> Result<u16> {
    u16::try_from(len).map_err(|_| WireError::Malformed {
        header,
        reason: "the packet is longer than the 16-bit length field allows",
    })
}

pub(crate) fn emit_ethernet(eth: &EthernetRepr, ethertype: u16, buf: &mut [u8]) {
    let outer = if eth.vlan.is_some() {
        ETHERTYPE_VLAN
    } else {
        ethertype
    };
    let header = Ethernet2Header {
        source: eth.src,
        destination: eth.dst,
        ether_type: EtherType(outer),
    };
    buf[..ETHERNET_HEADER_LEN].copy_from_slice(&header.to_bytes());
    if let Some(tag) = &eth.vlan {
        let vlan = SingleVlanHeader {
            pcp: VlanPcp::try_new(tag.pcp & 0x7).unwrap_or_default(),
            drop_eligible_indicator: tag.dei,
            vlan_id: VlanId::try_new(tag.vid & 0x0fff).unwrap_or_default(),
            ether_type: EtherType(ethertype),
        };
        buf[ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + VLAN_TAG_LEN]
            .copy_from_slice(&vlan.to_bytes());
    }
}

// The masks below keep every value in range, so the `unwrap_or_default`s never take effect.

/// Writes the IPv4 header (`buf` is exactly its length, 20 bytes and the options) in front
/// of a UDP datagram of `udp_len` bytes. Written field by field, the checksum summed over the
/// bytes written: this runs once per frame sent (etherparse's header, built and serialised,
/// took 3% of a 64-byte SEND client's user time).
fn emit_ipv4(h: &Ipv4Repr<'_>, udp_len: u16, buf: &mut [u8]) -> Result<()> {
    let options = h.options;
    if !options.len().is_multiple_of(4) || options.len() > IPV4_MAX_HEADER_LEN - IPV4_HEADER_LEN {
        return Err(WireError::Malformed {
            header: "IPv4",
            reason: "options must be a multiple of 4 bytes and at most 40",
        });
    }
    debug_assert_eq!(buf.len(), IPV4_HEADER_LEN + options.len());
    let total_len = length_field("IPv4", buf.len() + usize::from(udp_len))?;
    let flags: u16 = if h.dont_fragment { 0x4000 } else { 0 };
    buf[0] = 0x40 | (buf.len() / 4) as u8; // version 4, IHL in words
    buf[1] = (h.dscp & 0x3f) << 2 | h.ecn.bits();
    buf[2..4].copy_from_slice(&total_len.to_be_bytes());
    buf[4..6].copy_from_slice(&h.identification.to_be_bytes());
    buf[6..8].copy_from_slice(&flags.to_be_bytes()); // fragment offset 0
    buf[8] = h.ttl;
    buf[9] = IP_PROTOCOL_UDP;
    buf[12..16].copy_from_slice(&h.src.octets());
    buf[16..20].copy_from_slice(&h.dst.octets());
    buf[IPV4_HEADER_LEN..].copy_from_slice(options);
    set_ipv4_checksum(buf);
    Ok(())
}

fn emit_ipv6(h: &Ipv6Repr, udp_len: u16, buf: &mut [u8]) {
    let header = Ipv6Header {
        traffic_class: (h.dscp & 0x3f) << 2 | h.ecn.bits(),
        flow_label: Ipv6FlowLabel::try_new(h.flow_label & 0xf_ffff).unwrap_or_default(),
        payload_length: udp_len,
        next_header: IpNumber::UDP,
        hop_limit: h.hop_limit,
        source: h.src.octets(),
        destination: h.dst.octets(),
    };
    buf.copy_from_slice(&header.to_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::encap::{internet_checksum, rxe_udp_src_port};
    use crate::wire::{AethRepr, BthRepr, ExtHeaders, Msn, Opcode, Psn};
    use core::net::{Ipv4Addr, Ipv6Addr};

    const A: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];
    const B: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];

    fn ack() -> IbPacketRepr<'static> {
        let ext = ExtHeaders {
            aeth: Some(AethRepr::ack(Msn::new(5))),
            ..Default::default()
        };
        IbPacketRepr::new(
            BthRepr::new(Opcode(0x11), Qpn::new(0x11), Psn::new(0x12_3456)),
            ext,
            &[],
        )
    }

    /// The same ACK as the ICRC module's fixture, now inside Ethernet.
    #[test]
    fn ipv4_ack_fixture() {
        let src = Ipv4Addr::new(192, 168, 122, 10);
        let dst = Ipv4Addr::new(192, 168, 122, 11);
        let mut repr = RoceRepr::rxe(A, B, src.into(), dst.into(), Qpn::new(0x11), ack())
            .unwrap()
            .with_udp_src_port(0xc123);
        if let IpRepr::V4(h) = &mut repr.ip {
            h.identification = 0x1234;
        }
        let frame = repr.to_vec().unwrap();
        assert_eq!(frame.len(), 14 + 48);
        assert_eq!(&frame[12..14], &[0x08, 0x00]);
        let ip = &frame[14..];
        assert_eq!(&ip[..10], &[0x45, 0, 0, 0x30, 0x12, 0x34, 0x40, 0, 64, 17]);
        assert_eq!(&ip[20..28], &[0xc1, 0x23, 0x12, 0xb7, 0, 0x1c, 0, 0]);
        assert_eq!(&ip[44..], &[0x5c, 0x6a, 0xb2, 0x47], "ICRC as in icrc.rs");
        let sum = etherparse::Ipv4HeaderSlice::from_slice(ip).unwrap();
        assert_eq!(
            sum.header_checksum(),
            sum.to_header().calc_header_checksum()
        );
    }

    #[test]
    fn vlan_ipv6_with_pad() {
        let payload = [1u8, 2, 3, 4, 5];
        let ib = IbPacketRepr::new(
            BthRepr::new(Opcode(0x04), Qpn::new(7), Psn::new(1)),
            ExtHeaders::default(),
            &payload,
        );
        let repr = RoceRepr::rxe(
            A,
            B,
            Ipv6Addr::LOCALHOST.into(),
            Ipv6Addr::LOCALHOST.into(),
            Qpn::new(9),
            ib,
        )
        .unwrap()
        .with_vlan(3, 100)
        .with_ecn(Ecn::Ect0)
        .with_dscp(26);
        let mut buf = [0xeeu8; 200];
        let n = repr.emit(&mut buf).unwrap();
        assert_eq!(n, 18 + 40 + 8 + 12 + 8 + 4);
        assert_eq!(&buf[12..18], &[0x81, 0x00, 0x60, 100, 0x86, 0xdd]);
        assert_eq!(buf[18] & 0x0f, 26 >> 2, "traffic class high nibble");
        assert_eq!(buf[19] >> 4, (26 << 2 | 0b10) & 0x0f);
        assert_eq!(&buf[18 + 4..18 + 6], &(8u16 + 12 + 8 + 4).to_be_bytes());
        assert_eq!(
            buf[18 + 40..18 + 42],
            rxe_udp_src_port(Qpn::new(9)).to_be_bytes()
        );
        assert_eq!(buf[18 + 48 + 1] >> 4 & 3, 3, "pad count 3");
        assert_eq!(&buf[18 + 60..18 + 68], &[1, 2, 3, 4, 5, 0, 0, 0]);
        assert!(icrc::verify(&buf[18..n]).unwrap());
        assert_eq!(buf[n], 0xee, "nothing written past the frame");
    }

    #[test]
    fn errors_instead_of_panics() {
        let v4 = Ipv4Addr::LOCALHOST.into();
        let repr = RoceRepr::rxe(A, B, v4, v4, Qpn::new(1), ack()).unwrap();
        assert!(repr.emit(&mut [0u8; 61]).is_err(), "one byte short");
        let mut bad = repr;
        bad.ib.ext = ExtHeaders::default();
        assert!(bad.to_vec().is_err(), "ACK without AETH");
        let mut bad = repr;
        if let IpRepr::V4(h) = &mut bad.ip {
            h.options = &[1, 1, 1];
        }
        assert!(bad.to_vec().is_err(), "options not a multiple of 4");
        let big = vec![0u8; 70_000];
        let mut bad = repr;
        bad.ib = IbPacketRepr::new(
            BthRepr::new(Opcode(0x04), Qpn::new(1), Psn::new(0)),
            ExtHeaders::default(),
            &big,
        );
        assert!(bad.to_vec().is_err(), "longer than IP allows");
        assert!(RoceRepr::rxe(A, B, v4, Ipv6Addr::LOCALHOST.into(), Qpn::new(1), ack()).is_none());
    }

    proptest::proptest! {
        /// The IPv4 header written field by field is the one etherparse reads back, checksum
        /// included, for any field values and options.
        #[test]
        fn ipv4_header_as_etherparse_reads_it(
            src in proptest::prelude::any::<[u8; 4]>(),
            dst in proptest::prelude::any::<[u8; 4]>(),
            dscp in 0u8..64,
            ecn in 0u8..4,
            identification in proptest::prelude::any::<u16>(),
            dont_fragment in proptest::prelude::any::<bool>(),
            ttl in proptest::prelude::any::<u8>(),
            option_words in 0usize..=10,
            udp_len in 8u16..9000,
        ) {
            let options: Vec<u8> = (0..option_words * 4).map(|i| i as u8 ^ 0x5a).collect();
            let h = Ipv4Repr {
                src: src.into(),
                dst: dst.into(),
                dscp,
                ecn: Ecn::from_bits(ecn),
                identification,
                dont_fragment,
                ttl,
                options: &options,
            };
            let mut buf = vec![0u8; IPV4_HEADER_LEN + options.len()];
            emit_ipv4(&h, udp_len, &mut buf).unwrap();
            let (read, _) = etherparse::Ipv4Header::from_slice(&buf).unwrap();
            proptest::prop_assert_eq!(read.source, src);
            proptest::prop_assert_eq!(read.destination, dst);
            proptest::prop_assert_eq!(read.dscp.value(), dscp);
            proptest::prop_assert_eq!(read.ecn.value(), ecn);
            proptest::prop_assert_eq!(read.identification, identification);
            proptest::prop_assert_eq!(read.dont_fragment, dont_fragment);
            proptest::prop_assert!(!read.more_fragments);
            proptest::prop_assert_eq!(read.fragment_offset.value(), 0);
            proptest::prop_assert_eq!(read.time_to_live, ttl);
            proptest::prop_assert_eq!(read.protocol, IpNumber::UDP);
            proptest::prop_assert_eq!(read.options.as_slice(), &options[..]);
            proptest::prop_assert_eq!(usize::from(read.total_len), buf.len() + usize::from(udp_len));
            proptest::prop_assert_eq!(read.header_checksum, read.calc_header_checksum());
            proptest::prop_assert_eq!(internet_checksum(&buf), 0);
        }
    }

    #[test]
    fn ipv4_options_of_a_bad_length_are_refused() {
        let three = [1u8, 2, 3];
        let h = Ipv4Repr {
            options: &three,
            ..Ipv4Repr::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
        };
        let mut buf = vec![0u8; IPV4_HEADER_LEN + three.len()];
        assert!(emit_ipv4(&h, 8, &mut buf).is_err());
        let long = [0u8; 44];
        let h = Ipv4Repr {
            options: &long,
            ..h
        };
        let mut buf = vec![0u8; IPV4_HEADER_LEN + long.len()];
        assert!(emit_ipv4(&h, 8, &mut buf).is_err());
    }
}
