//! The Linux cooked capture headers (`tcpdump -i any`): LINKTYPE_LINUX_SLL (113) and
//! LINKTYPE_LINUX_SLL2 (276). The capturing host writes them in place of the link header; they
//! are never on the wire. Both end (SLL) or start (SLL2) with the protocol, an EtherType; a
//! VLAN tag the kernel took off is put back after the header (protocol 0x8100).
//!
//! ```text
//!  SLL                              SLL2
//!  bytes 0-1   packet type          bytes 0-1   protocol
//!  bytes 2-3   ARPHRD_ type         bytes 2-3   reserved
//!  bytes 4-5   address length       bytes 4-7   interface index
//!  bytes 6-13  address (padded)     bytes 8-9   ARPHRD_ type
//!  bytes 14-15 protocol             byte 10     packet type
//!                                   byte 11     address length
//!                                   bytes 12-19 address (padded)
//! ```

use crate::wire::FixedHeader;
use crate::wire::field::{self, FieldInfo};
use crate::wire::header::header_view;

const PACKET_TYPE_DOC: &str = "0 to us, 1 broadcast, 2 multicast, 3 to another host, 4 sent by us";

header_view! {
    /// A view over the 16-byte SLL header.
    Sll, SllRepr,
    sll_at { PACKET_TYPE = 0, ARPHRD = 2, ADDR_LEN = 4, ADDR = 6, PROTOCOL = 14 }
}

header_view! {
    /// A view over the 20-byte SLL2 header.
    Sll2, Sll2Repr,
    sll2_at {
        PROTOCOL = 0, RESERVED = 2, IFINDEX = 4, ARPHRD = 8, PACKET_TYPE = 10, ADDR_LEN = 11,
        ADDR = 12,
    }
}

impl<T: AsRef<[u8]>> Sll<T> {
    /// The EtherType of what follows.
    pub fn protocol(&self) -> u16 {
        field::read_u16(self.bytes(), sll_at::PROTOCOL)
    }
}

impl<T: AsRef<[u8]>> Sll2<T> {
    /// The EtherType of what follows.
    pub fn protocol(&self) -> u16 {
        field::read_u16(self.bytes(), sll2_at::PROTOCOL)
    }
}

/// A Linux cooked (v1) header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SllRepr {
    /// To us, broadcast, multicast, to another host or sent by us.
    pub packet_type: u16,
    /// The device's ARPHRD_ link type.
    pub arphrd: u16,
    /// Bytes of `addr` used.
    pub addr_len: u16,
    /// The sender's link address, padded.
    pub addr: [u8; 8],
    /// The EtherType of what follows.
    pub protocol: u16,
}

/// A Linux cooked v2 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sll2Repr {
    /// The EtherType of what follows.
    pub protocol: u16,
    /// Reserved, zero.
    pub reserved: u16,
    /// The capturing host's interface index.
    pub ifindex: u32,
    /// The device's ARPHRD_ link type.
    pub arphrd: u16,
    /// To us, broadcast, multicast, to another host or sent by us.
    pub packet_type: u8,
    /// Bytes of `addr` used.
    pub addr_len: u8,
    /// The sender's link address, padded.
    pub addr: [u8; 8],
}

fn addr(buf: &[u8], at: usize) -> [u8; 8] {
    let mut a = [0; 8];
    a.copy_from_slice(&buf[at..at + 8]);
    a
}

impl SllRepr {
    /// The fields in wire order (libpcap's LINKTYPE_LINUX_SLL), for decoders.
    pub const FIELDS: [FieldInfo; 5] = [
        FieldInfo::new("Packet type", sll_at::PACKET_TYPE, 0, 16, PACKET_TYPE_DOC),
        FieldInfo::new(
            "ARPHRD type",
            sll_at::ARPHRD,
            0,
            16,
            "the device's link type (1: Ethernet)",
        ),
        FieldInfo::new(
            "Address length",
            sll_at::ADDR_LEN,
            0,
            16,
            "bytes of the address that are used",
        ),
        FieldInfo::new("Address", sll_at::ADDR, 0, 64, "the sender's link address"),
        FieldInfo::new(
            "Protocol",
            sll_at::PROTOCOL,
            0,
            16,
            "EtherType of what follows",
        ),
    ];
}

impl Sll2Repr {
    /// The fields in wire order (libpcap's LINKTYPE_LINUX_SLL2), for decoders.
    pub const FIELDS: [FieldInfo; 7] = [
        FieldInfo::new(
            "Protocol",
            sll2_at::PROTOCOL,
            0,
            16,
            "EtherType of what follows",
        ),
        FieldInfo::new("Reserved", sll2_at::RESERVED, 0, 16, "reserved, zero"),
        FieldInfo::new(
            "Interface index",
            sll2_at::IFINDEX,
            0,
            32,
            "the capturing host's interface",
        ),
        FieldInfo::new(
            "ARPHRD type",
            sll2_at::ARPHRD,
            0,
            16,
            "the device's link type (1: Ethernet)",
        ),
        FieldInfo::new("Packet type", sll2_at::PACKET_TYPE, 0, 8, PACKET_TYPE_DOC),
        FieldInfo::new(
            "Address length",
            sll2_at::ADDR_LEN,
            0,
            8,
            "bytes of the address that are used",
        ),
        FieldInfo::new("Address", sll2_at::ADDR, 0, 64, "the sender's link address"),
    ];
}

impl FixedHeader for SllRepr {
    const NAME: &'static str = "Linux cooked header";
    const LEN: usize = 16;

    fn parse_unchecked(buf: &[u8]) -> Self {
        SllRepr {
            packet_type: field::read_u16(buf, sll_at::PACKET_TYPE),
            arphrd: field::read_u16(buf, sll_at::ARPHRD),
            addr_len: field::read_u16(buf, sll_at::ADDR_LEN),
            addr: addr(buf, sll_at::ADDR),
            protocol: Sll { buffer: buf }.protocol(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u16(buf, sll_at::PACKET_TYPE, self.packet_type);
        field::write_u16(buf, sll_at::ARPHRD, self.arphrd);
        field::write_u16(buf, sll_at::ADDR_LEN, self.addr_len);
        buf[sll_at::ADDR..sll_at::ADDR + 8].copy_from_slice(&self.addr);
        field::write_u16(buf, sll_at::PROTOCOL, self.protocol);
    }
}

impl FixedHeader for Sll2Repr {
    const NAME: &'static str = "Linux cooked v2 header";
    const LEN: usize = 20;

    fn parse_unchecked(buf: &[u8]) -> Self {
        Sll2Repr {
            protocol: Sll2 { buffer: buf }.protocol(),
            reserved: field::read_u16(buf, sll2_at::RESERVED),
            ifindex: field::read_u32(buf, sll2_at::IFINDEX),
            arphrd: field::read_u16(buf, sll2_at::ARPHRD),
            packet_type: buf[sll2_at::PACKET_TYPE],
            addr_len: buf[sll2_at::ADDR_LEN],
            addr: addr(buf, sll2_at::ADDR),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u16(buf, sll2_at::PROTOCOL, self.protocol);
        field::write_u16(buf, sll2_at::RESERVED, self.reserved);
        field::write_u32(buf, sll2_at::IFINDEX, self.ifindex);
        field::write_u16(buf, sll2_at::ARPHRD, self.arphrd);
        buf[sll2_at::PACKET_TYPE] = self.packet_type;
        buf[sll2_at::ADDR_LEN] = self.addr_len;
        buf[sll2_at::ADDR..sll2_at::ADDR + 8].copy_from_slice(&self.addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::wire::header::header_proptests!(sll: SllRepr {
        packet_type, arphrd, addr_len, addr, protocol
    });

    crate::wire::header::header_proptests!(sll2: Sll2Repr {
        protocol, reserved, ifindex, arphrd, packet_type, addr_len, addr
    });
}
