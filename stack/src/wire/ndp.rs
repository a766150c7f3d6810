//! IPv6 neighbour discovery's solicitations and advertisements (RFC 4861 4.3, 4.4, 7.1):
//! the numbers and addresses an endpoint needs to resolve IPv6 neighbours. The endpoint's
//! `resolve` parses and builds the messages (etherparse checks their ICMPv6 checksums).

use std::net::Ipv6Addr;

/// RFC 4861 7.1: a node accepts NDP messages only with hop limit 255, which proves they
/// were not forwarded by a router.
pub const HOP_LIMIT: u8 = 255;
/// ICMPv6 type of a neighbour solicitation.
pub const NEIGHBOR_SOLICITATION: u8 = 135;
/// ICMPv6 type of a neighbour advertisement.
pub const NEIGHBOR_ADVERTISEMENT: u8 = 136;
/// Both messages' bodies open with the target address; options follow it.
pub const TARGET_LEN: usize = 16;

/// The link-layer address options (RFC 4861 4.6.1); options come in units of 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLayerOption {
    /// The sender's address, in a solicitation.
    Source = 1,
    /// The target's address, in an advertisement.
    Target = 2,
}

impl LinkLayerOption {
    /// The option's type byte.
    pub const fn code(self) -> u8 {
        self as u8
    }
}

/// The solicited-node multicast address of `addr`: `ff02::1:ff` and its low 24 bits
/// (RFC 4291 2.7.1).
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet address of an IPv6 multicast group: `33:33` and its low 32 bits (RFC 2464 7).
pub fn multicast_mac(group: Ipv6Addr) -> [u8; 6] {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}
