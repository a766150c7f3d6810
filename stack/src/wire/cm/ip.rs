//! The RDMA IP CM Service (IBA Vol. 1 Annex A11): how rdma_cm maps IP addresses and ports
//! onto the CM. A service ID names a port space and a port; the REQ's (and SIDR_REQ's)
//! private data starts with a 36-byte header carrying both ends' addresses and the client's
//! port (Linux: `struct cma_hdr`):
//!
//! ```text
//!  byte 0       MajV (bits 7-4) | MinV (bits 3-0): 0.0
//!  byte 1       IPV (bits 7-4): 4 or 6 | reserved
//!  bytes 2-3    source port (the client's port)
//!  bytes 4-19   source IP address (IPv4: 12 zero bytes, then the address)
//!  bytes 20-35  destination IP address
//! ```
//!
//! The consumer's own private data follows it (56 bytes of a REQ's 92, 180 of a SIDR_REQ's).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::super::FixedHeader;
use super::super::field;
use super::super::header::header_view;

/// The service ID prefix of the IP CM service (Annex A11.2.1): bytes 0-4 are 00 00 00 00 01.
const IP_SERVICE_PREFIX: u64 = 0x0000_0000_0100_0000;
const IP_SERVICE_MASK: u64 = 0xffff_ffff_ff00_0000;

/// rdma_cm port spaces: the protocol byte of an IP CM service ID (Annex A11.2.1, Linux's
/// `enum rdma_ucm_port_space`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortSpace {
    /// `RDMA_PS_TCP` (0x06): reliable connections (rping, perftest -R, ucmatose).
    Tcp,
    /// `RDMA_PS_UDP` (0x11): unreliable datagrams resolved with SIDR (udaddy).
    Udp,
    /// `RDMA_PS_IB` (0x3F): native InfiniBand service IDs, any QP type.
    Ib,
    /// `RDMA_PS_IPOIB` (0x02).
    Ipoib,
}

impl PortSpace {
    /// The protocol byte of the service ID.
    pub const fn protocol(self) -> u8 {
        match self {
            PortSpace::Tcp => 0x06,
            PortSpace::Udp => 0x11,
            PortSpace::Ib => 0x3f,
            PortSpace::Ipoib => 0x02,
        }
    }

    /// The port space of a service ID's protocol byte.
    pub const fn from_protocol(protocol: u8) -> Option<PortSpace> {
        Some(match protocol {
            0x06 => PortSpace::Tcp,
            0x11 => PortSpace::Udp,
            0x3f => PortSpace::Ib,
            0x02 => PortSpace::Ipoib,
            _ => return None,
        })
    }

    /// The kernel's name for the port space.
    pub const fn name(self) -> &'static str {
        match self {
            PortSpace::Tcp => "RDMA_PS_TCP",
            PortSpace::Udp => "RDMA_PS_UDP",
            PortSpace::Ib => "RDMA_PS_IB",
            PortSpace::Ipoib => "RDMA_PS_IPOIB",
        }
    }

    /// The service ID of `port` in this port space.
    pub const fn service_id(self, port: u16) -> u64 {
        IP_SERVICE_PREFIX | (self.protocol() as u64) << 16 | port as u64
    }
}

/// Splits an IP CM service ID into its port space and port; `None` for other service IDs.
pub fn parse_service_id(service_id: u64) -> Option<(PortSpace, u16)> {
    if service_id & IP_SERVICE_MASK != IP_SERVICE_PREFIX {
        return None;
    }
    let space = PortSpace::from_protocol((service_id >> 16) as u8)?;
    Some((space, service_id as u16))
}

header_view! {
    /// A view over the 36-byte IP CM private data header.
    IpCmHeader, IpCmHeaderRepr,
    field_at { VERSION = 0, IP_VERSION = 1, SRC_PORT = 2, SRC_ADDR = 4, DST_ADDR = 20 }
}

/// Each address takes 16 bytes, an IPv4 one as IPv4-mapped IPv6.
const ADDR_LEN: usize = 16;

impl<T: AsRef<[u8]>> IpCmHeader<T> {
    /// Byte 0: major and minor version.
    pub fn version(&self) -> u8 {
        self.bytes()[field_at::VERSION]
    }
    /// 4 or 6.
    pub fn ip_version(&self) -> u8 {
        self.bytes()[field_at::IP_VERSION] >> 4
    }
    /// The client's port.
    pub fn src_port(&self) -> u16 {
        field::read_u16(self.bytes(), field_at::SRC_PORT)
    }
}

/// The IP CM private data header, addresses as their 16 bytes on the wire (interpret them
/// with [`IpCmHeaderRepr::src_addr`] and [`IpCmHeaderRepr::dst_addr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpCmHeaderRepr {
    /// Major version (high nibble) and minor version (low nibble): 0.0.
    pub version: u8,
    /// 4 or 6.
    pub ip_version: u8,
    /// The low nibble of byte 1.
    pub reserved: u8,
    /// The client's port.
    pub src_port: u16,
    /// The client's address as sent.
    pub src: [u8; 16],
    /// The server's address as sent.
    pub dst: [u8; 16],
}

fn addr_bytes(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(v4) => Ipv4Addr::to_ipv6_compatible(&v4).octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn addr_of(ip_version: u8, bytes: [u8; 16]) -> Option<IpAddr> {
    match ip_version {
        4 if bytes[..12].iter().all(|&b| b == 0) => Some(IpAddr::V4(Ipv4Addr::new(
            bytes[12], bytes[13], bytes[14], bytes[15],
        ))),
        6 => Some(IpAddr::V6(Ipv6Addr::from(bytes))),
        _ => None,
    }
}

impl IpCmHeaderRepr {
    /// The header rdma_cm sends from `src` port `src_port` to `dst` (both of one family).
    pub fn new(src: IpAddr, src_port: u16, dst: IpAddr) -> IpCmHeaderRepr {
        IpCmHeaderRepr {
            version: 0,
            ip_version: if src.is_ipv4() { 4 } else { 6 },
            reserved: 0,
            src_port,
            src: addr_bytes(src),
            dst: addr_bytes(dst),
        }
    }

    /// The source address, if the version is 4 or 6 and an IPv4 address is padded with zeros.
    pub fn src_addr(&self) -> Option<IpAddr> {
        addr_of(self.ip_version, self.src)
    }

    /// The destination address, on the same terms.
    pub fn dst_addr(&self) -> Option<IpAddr> {
        addr_of(self.ip_version, self.dst)
    }
}

impl FixedHeader for IpCmHeaderRepr {
    const NAME: &'static str = "IP CM private data header";
    const LEN: usize = 36;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = IpCmHeader { buffer: buf };
        let mut src = [0; 16];
        let mut dst = [0; 16];
        src.copy_from_slice(&buf[field_at::SRC_ADDR..][..ADDR_LEN]);
        dst.copy_from_slice(&buf[field_at::DST_ADDR..][..ADDR_LEN]);
        IpCmHeaderRepr {
            version: v.version(),
            ip_version: v.ip_version(),
            reserved: buf[field_at::IP_VERSION] & 0x0f,
            src_port: v.src_port(),
            src,
            dst,
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        buf[field_at::VERSION] = self.version;
        buf[field_at::IP_VERSION] = self.ip_version << 4 | (self.reserved & 0x0f);
        field::write_u16(buf, field_at::SRC_PORT, self.src_port);
        buf[field_at::SRC_ADDR..][..ADDR_LEN].copy_from_slice(&self.src);
        buf[field_at::DST_ADDR..][..ADDR_LEN].copy_from_slice(&self.dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::cm::ReqRepr;
    use crate::wire::header::round_trip_proptest;

    #[test]
    fn service_ids() {
        assert_eq!(PortSpace::Tcp.service_id(7174), 0x0000_0000_0106_1c06);
        assert_eq!(
            parse_service_id(0x0000_0000_0111_4e20),
            Some((PortSpace::Udp, 20000))
        );
        assert_eq!(parse_service_id(0x0002_c903_0000_1234), None, "not IP CM");
        assert_eq!(
            parse_service_id(0x0000_0000_0199_0001),
            None,
            "no such port space"
        );
    }

    #[test]
    fn rping_req_private_data() {
        let req = ReqRepr::parse(&crate::wire::cm::tests::rping_mad(1)[24..]).unwrap();
        let h = IpCmHeaderRepr::parse(&req.private_data).unwrap();
        assert_eq!((h.version, h.ip_version, h.src_port), (0, 4, 0xdb8c));
        let (client, server) = ("10.77.0.12".parse().unwrap(), "10.77.0.11".parse().unwrap());
        assert_eq!(h.src_addr(), Some(client));
        assert_eq!(h.dst_addr(), Some(server));
        assert_eq!(IpCmHeaderRepr::new(client, 0xdb8c, server), h);
    }

    #[test]
    fn ipv6_and_broken_headers() {
        let a: IpAddr = "fd00:77::12".parse().unwrap();
        let b: IpAddr = "fd00:77::11".parse().unwrap();
        let h = IpCmHeaderRepr::new(a, 1, b);
        assert_eq!(
            (h.ip_version, h.src_addr(), h.dst_addr()),
            (6, Some(a), Some(b))
        );
        let mut odd = h;
        odd.ip_version = 5;
        assert_eq!(odd.src_addr(), None, "neither 4 nor 6");
        let mut v4 =
            IpCmHeaderRepr::new("10.0.0.1".parse().unwrap(), 1, "10.0.0.2".parse().unwrap());
        v4.src[0] = 1;
        assert_eq!(v4.src_addr(), None, "IPv4 with a non-zero pad");
    }

    round_trip_proptest!(IpCmHeaderRepr);
}
