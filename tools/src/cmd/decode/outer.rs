//! `roce decode`'s explanation of what comes before a packet's IP header: its Ethernet
//! header and tags, and every outer layer it was captured inside (Linux cooked headers, the
//! outer Ethernet, IP and UDP of a tunnel, VXLAN, Geneve, GRE, ERSPAN), each at its offset in
//! the frame, its fields where the wire layer declares them.

use roce::wire::decap::erspan::{
    ErspanIIIRepr, ErspanIIRepr, ErspanPlatformRepr, GRE_PROTOCOL_ERSPAN_II,
    GRE_PROTOCOL_ERSPAN_III,
};
use roce::wire::decap::geneve::GeneveRepr;
use roce::wire::decap::gre::{ETHERTYPE_TEB, GreRepr};
use roce::wire::decap::sll::{Sll2Repr, SllRepr};
use roce::wire::decap::vlan::{ETHERTYPE_QINQ, ETHERTYPE_QINQ_LEGACY, TagRepr};
use roce::wire::decap::vxlan::VxlanRepr;
use roce::wire::decap::{Header, HeaderKind};
use roce::wire::encap::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCE_V1, ETHERTYPE_VLAN};
use roce::wire::field::FieldInfo;
use roce::wire::{FixedHeader, RocePacket};

use super::explain::mac;
use super::section::{Section, field};

/// What an EtherType (or TPID, or GRE or Geneve protocol type) says follows it.
pub(crate) fn ethertype_meaning(t: u16) -> &'static str {
    match t {
        ETHERTYPE_IPV4 => "IPv4 follows",
        ETHERTYPE_IPV6 => "IPv6 follows",
        ETHERTYPE_VLAN => "an 802.1Q VLAN tag follows",
        ETHERTYPE_ROCE_V1 => "RoCEv1: an InfiniBand GRH follows (IBA Annex A16)",
        ETHERTYPE_QINQ => "an 802.1ad (QinQ) service tag follows",
        ETHERTYPE_QINQ_LEGACY => "a QinQ service tag follows (pre-802.1ad TPID)",
        ETHERTYPE_TEB => "an Ethernet frame follows (transparent Ethernet bridging)",
        GRE_PROTOCOL_ERSPAN_II => "ERSPAN type II follows (type I without a GRE sequence number)",
        GRE_PROTOCOL_ERSPAN_III => "ERSPAN type III follows",
        _ => "unknown",
    }
}

/// A field's value as printed: numbers that name a protocol or are bit patterns in hex,
/// counts and identifiers in decimal.
fn value(f: &FieldInfo, bytes: &[u8]) -> String {
    let Some(v) = f.read(bytes) else {
        return "?".into();
    };
    let hex = matches!(
        f.name,
        "Protocol Type"
            | "Protocol"
            | "EtherType"
            | "Flags"
            | "Checksum"
            | "Key"
            | "Address"
            | "Platform info"
    );
    if hex {
        format!("{v:#0w$x}", w = (f.width as usize).div_ceil(4) + 2)
    } else {
        v.to_string()
    }
}

fn table(title: impl Into<String>, h: &Header, bytes: &[u8], fields: &[FieldInfo]) -> Section {
    let mut fields: Vec<_> = fields
        .iter()
        .map(|f| {
            let v = value(f, bytes);
            let meaning = match f.name {
                "Protocol Type" | "EtherType" | "Protocol" => {
                    f.read(bytes)
                        .map_or(f.doc, |t| match ethertype_meaning(t as u16) {
                            "unknown" => f.doc,
                            m => m,
                        })
                }
                _ => f.doc,
            };
            field((f.first_bit(), f.width as usize), f.name, v, meaning)
        })
        .collect();
    if let HeaderKind::Geneve = h.kind
        && h.len > GeneveRepr::LEN
    {
        let options: String = bytes[GeneveRepr::LEN..h.len]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        fields.push(field(
            (GeneveRepr::LEN * 8, (h.len - GeneveRepr::LEN) * 8),
            "Options",
            options,
            "variable-length options (class, type, length, data), hex",
        ));
    }
    Section::new(title, h.start, h.len, fields)
}

fn ethernet(h: &Header, b: &[u8], outer: bool) -> Section {
    let mut d = [0; 6];
    let mut s = [0; 6];
    d.copy_from_slice(&b[..6]);
    s.copy_from_slice(&b[6..12]);
    let t = u16::from_be_bytes([b[12], b[13]]);
    let title = if outer {
        "Outer Ethernet II (IEEE 802.3): carries the tunnel"
    } else {
        "Ethernet II (IEEE 802.3)"
    };
    Section::new(
        title,
        h.start,
        h.len,
        vec![
            field((0, 48), "Destination", mac(d), "next hop's MAC address"),
            field((48, 48), "Source", mac(s), "sender's MAC address"),
            field(
                (96, 16),
                "EtherType",
                format!("{t:#06x}"),
                ethertype_meaning(t),
            ),
        ],
    )
}

fn ipv4(h: &Header, b: &[u8]) -> Section {
    let protocol = b[9];
    Section::new(
        "Outer IPv4 (RFC 791): carries the tunnel",
        h.start,
        h.len,
        vec![
            field((0, 4), "Version", b[0] >> 4, "IPv4"),
            field(
                (4, 4),
                "IHL",
                b[0] & 0xf,
                format!("header is {} bytes", h.len),
            ),
            field((8, 6), "DSCP", b[1] >> 2, "differentiated services"),
            field((14, 2), "ECN", b[1] & 3, "explicit congestion notification"),
            field(
                (16, 16),
                "Total Length",
                u16::from_be_bytes([b[2], b[3]]),
                "bytes of the outer IP packet",
            ),
            field(
                (32, 16),
                "Identification",
                format!("{:#06x}", u16::from_be_bytes([b[4], b[5]])),
                "fragment reassembly id",
            ),
            field((48, 3), "Flags", b[6] >> 5, "reserved, DF, MF"),
            field(
                (51, 13),
                "Fragment Offset",
                u16::from_be_bytes([b[6], b[7]]) & 0x1fff,
                "0: not a fragment",
            ),
            field((64, 8), "TTL", b[8], "hops left"),
            field(
                (72, 8),
                "Protocol",
                protocol,
                match protocol {
                    17 => "UDP",
                    47 => "GRE",
                    _ => "other",
                },
            ),
            field(
                (80, 16),
                "Header Checksum",
                format!("{:#06x}", u16::from_be_bytes([b[10], b[11]])),
                "over the outer header",
            ),
            field(
                (96, 32),
                "Source",
                core::net::Ipv4Addr::new(b[12], b[13], b[14], b[15]),
                "tunnel source",
            ),
            field(
                (128, 32),
                "Destination",
                core::net::Ipv4Addr::new(b[16], b[17], b[18], b[19]),
                "tunnel destination",
            ),
        ],
    )
}

fn ipv6(h: &Header, b: &[u8]) -> Section {
    let addr = |at: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[at..at + 16]);
        core::net::Ipv6Addr::from(a)
    };
    let word = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Section::new(
        "Outer IPv6 (RFC 8200): carries the tunnel",
        h.start,
        h.len,
        vec![
            field((0, 4), "Version", word >> 28, "IPv6"),
            field((4, 8), "Traffic Class", (word >> 20) & 0xff, "DSCP and ECN"),
            field((12, 20), "Flow Label", word & 0xf_ffff, "flow identifier"),
            field(
                (32, 16),
                "Payload Length",
                u16::from_be_bytes([b[4], b[5]]),
                "bytes after this header",
            ),
            field(
                (48, 8),
                "Next Header",
                b[6],
                match b[6] {
                    17 => "UDP",
                    47 => "GRE",
                    _ => "other",
                },
            ),
            field((56, 8), "Hop Limit", b[7], "hops left"),
            field((64, 128), "Source", addr(8), "tunnel source"),
            field((192, 128), "Destination", addr(24), "tunnel destination"),
        ],
    )
}

fn udp(h: &Header, b: &[u8]) -> Section {
    let port = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    Section::new(
        "Outer UDP (RFC 768): carries the tunnel",
        h.start,
        h.len,
        vec![
            field(
                (0, 16),
                "Source Port",
                port(0),
                "picked by the tunnel endpoint",
            ),
            field(
                (16, 16),
                "Destination Port",
                port(2),
                match port(2) {
                    4789 => "4789: VXLAN",
                    6081 => "6081: Geneve",
                    _ => "the tunnel's port",
                },
            ),
            field((32, 16), "Length", port(4), "bytes from the UDP header on"),
            field((48, 16), "Checksum", format!("{:#06x}", port(6)), "0: none"),
        ],
    )
}

/// The field table of a header the wire layer declares one for (every outer header but
/// Ethernet, IP and UDP, which are explained by hand).
pub fn declared_fields(kind: HeaderKind, bytes: &[u8]) -> Option<Vec<FieldInfo>> {
    Some(match kind {
        HeaderKind::Tag { .. } => TagRepr::FIELDS.to_vec(),
        HeaderKind::Sll => SllRepr::FIELDS.to_vec(),
        HeaderKind::Sll2 => Sll2Repr::FIELDS.to_vec(),
        HeaderKind::Vxlan => VxlanRepr::FIELDS.to_vec(),
        HeaderKind::Geneve => GeneveRepr::FIELDS.to_vec(),
        HeaderKind::Gre => GreRepr::parse(bytes).ok()?.fields(),
        HeaderKind::ErspanII => ErspanIIRepr::FIELDS.to_vec(),
        HeaderKind::ErspanIII => ErspanIIIRepr::FIELDS.to_vec(),
        HeaderKind::ErspanPlatform => ErspanPlatformRepr::FIELDS.to_vec(),
        HeaderKind::Ethernet | HeaderKind::Ipv4 | HeaderKind::Ipv6 | HeaderKind::Udp => {
            return None;
        }
    })
}

/// The name of a header in `roce decode --json`'s `outer_headers`.
pub fn header_name(kind: HeaderKind) -> &'static str {
    match kind {
        HeaderKind::Ethernet => "ETHERNET",
        HeaderKind::Tag {
            tpid: ETHERTYPE_VLAN,
        } => "VLAN",
        HeaderKind::Tag { .. } => "QINQ",
        HeaderKind::Sll => "SLL",
        HeaderKind::Sll2 => "SLL2",
        HeaderKind::Ipv4 => "IPV4",
        HeaderKind::Ipv6 => "IPV6",
        HeaderKind::Udp => "UDP",
        HeaderKind::Vxlan => "VXLAN",
        HeaderKind::Geneve => "GENEVE",
        HeaderKind::Gre => "GRE",
        HeaderKind::ErspanII => "ERSPAN_II",
        HeaderKind::ErspanIII => "ERSPAN_III",
        HeaderKind::ErspanPlatform => "ERSPAN_III_PLATFORM",
    }
}

/// The sections of every header before `p`'s IP header, in frame order.
pub fn sections(p: &RocePacket<'_>) -> Vec<Section> {
    let frame = p.packet_bytes();
    p.link_headers()
        .iter()
        .map(|h| {
            let b = &frame[h.start..h.start + h.len];
            let outer = h.start < p.link_offset();
            match h.kind {
                HeaderKind::Ethernet => ethernet(h, b, outer),
                HeaderKind::Tag { tpid } => {
                    let title = match tpid {
                        ETHERTYPE_VLAN => {
                            "802.1Q VLAN tag (IEEE 802.1Q), after TPID 0x8100".to_string()
                        }
                        t => format!("802.1ad service tag (QinQ), after TPID {t:#06x}"),
                    };
                    table(title, h, b, &TagRepr::FIELDS)
                }
                HeaderKind::Sll => table(
                    "Linux cooked capture header (LINKTYPE_LINUX_SLL; added by the capturing \
                     host, not on the wire)",
                    h,
                    b,
                    &SllRepr::FIELDS,
                ),
                HeaderKind::Sll2 => table(
                    "Linux cooked capture header v2 (LINKTYPE_LINUX_SLL2; added by the \
                     capturing host, not on the wire)",
                    h,
                    b,
                    &Sll2Repr::FIELDS,
                ),
                HeaderKind::Ipv4 => ipv4(h, b),
                HeaderKind::Ipv6 => ipv6(h, b),
                HeaderKind::Udp => udp(h, b),
                HeaderKind::Vxlan => table(
                    "VXLAN (RFC 7348): an Ethernet frame follows",
                    h,
                    b,
                    &VxlanRepr::FIELDS,
                ),
                HeaderKind::Geneve => table("Geneve (RFC 8926)", h, b, &GeneveRepr::FIELDS),
                HeaderKind::Gre => {
                    let fields = GreRepr::parse(b).map(|g| g.fields()).unwrap_or_default();
                    table(
                        "GRE: generic routing encapsulation (RFC 2784, RFC 2890)",
                        h,
                        b,
                        &fields,
                    )
                }
                HeaderKind::ErspanII => table(
                    "ERSPAN type II (draft-foschiano-erspan): a mirrored frame follows",
                    h,
                    b,
                    &ErspanIIRepr::FIELDS,
                ),
                HeaderKind::ErspanIII => table(
                    "ERSPAN type III (draft-foschiano-erspan): a mirrored frame follows",
                    h,
                    b,
                    &ErspanIIIRepr::FIELDS,
                ),
                HeaderKind::ErspanPlatform => table(
                    "ERSPAN type III platform-specific subheader",
                    h,
                    b,
                    &ErspanPlatformRepr::FIELDS,
                ),
            }
        })
        .collect()
}
