//! `roce decode` without `--json`: every header of a frame, field by field, for someone
//! learning the protocol: where each field sits (bits from the header's start, as the spec's
//! figures count them), its value, what that value means, and where the spec defines it.

use std::fmt::Write as _;

use roce::wire::encap::{ETHERNET_HEADER_LEN, ETHERTYPE_VLAN, VLAN_TAG_LEN};
use roce::wire::icrc::ICRC_LEN;
use roce::wire::{
    EthernetRepr, FixedHeader, IpRepr, Ipv4Repr, Ipv6Repr, RocePacket, UdpRepr, VlanTag,
};

use super::Dissected;
use super::fields::{bth_fields, ext_sections};
use super::outer::ethertype_meaning;
use super::section::{Section, bits_label, field};

fn render(out: &mut String, sections: &[Section]) {
    for s in sections {
        let range = s.range_label();
        let _ = writeln!(out, "  {:<66} {range}", s.title);
        // Long field names (the CM's) widen their section's name column, not every section's.
        let name_width = s
            .fields
            .iter()
            .map(|f| f.name.len())
            .max()
            .unwrap_or(0)
            .max(16);
        for f in &s.fields {
            let mut lines = f.meaning.lines();
            let _ = writeln!(
                out,
                "      {:<13} {:<name_width$} {:<20} {}",
                bits_label(f.bits),
                f.name,
                f.value,
                lines.next().unwrap_or_default()
            );
            for more in lines {
                let _ = writeln!(out, "{:<w$}{more}", "", w = 42 + name_width);
            }
        }
        if let Some(note) = s.note {
            let _ = writeln!(out, "      {note}");
        }
    }
}

pub(crate) fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The Ethernet header and any 802.1Q tag of a frame whose next header has EtherType
/// `ip_type` (IPv4, IPv6, RoCEv1's GRH).
pub(crate) fn link_sections(eth: Option<&EthernetRepr>, ip_type: u16, out: &mut Vec<Section>) {
    let Some(eth) = eth else { return };
    let outer = if eth.vlan.is_some() {
        ETHERTYPE_VLAN
    } else {
        ip_type
    };
    out.push(Section {
        title: "Ethernet II (IEEE 802.3)".into(),
        note: None,
        start: 0,
        len: ETHERNET_HEADER_LEN,
        fields: vec![
            field(
                (0, 48),
                "Destination",
                mac(eth.dst),
                "next hop's MAC address",
            ),
            field((48, 48), "Source", mac(eth.src), "sender's MAC address"),
            field(
                (96, 16),
                "EtherType",
                format!("{outer:#06x}"),
                ethertype_meaning(outer),
            ),
        ],
    });
    if let Some(VlanTag { pcp, dei, vid }) = eth.vlan {
        out.push(Section {
            title: "802.1Q VLAN tag (IEEE 802.1Q)".into(),
            note: None,
            start: ETHERNET_HEADER_LEN,
            len: VLAN_TAG_LEN,
            fields: vec![
                field(
                    (0, 3),
                    "PCP",
                    pcp,
                    "802.1p priority: the class PFC pauses (lossless RoCE)",
                ),
                field((3, 1), "DEI", u8::from(dei), "drop eligible"),
                field((4, 12), "VID", vid, "VLAN identifier"),
                field(
                    (16, 16),
                    "EtherType",
                    format!("{ip_type:#06x}"),
                    ethertype_meaning(ip_type),
                ),
            ],
        });
    }
}

pub(crate) fn ecn_meaning(bits: u8) -> &'static str {
    match bits {
        0b00 => "Not-ECT: sender does not use ECN (switches drop instead of marking)",
        0b10 => "ECT0: ECN-capable; a congested switch marks CE instead of dropping",
        0b01 => "ECT1: ECN-capable (codepoint 1)",
        _ => "CE: congestion experienced; the receiver answers with a CNP (DCQCN)",
    }
}

const MASKED: &str = "; masked in the ICRC";

fn ipv4_section(p: &RocePacket<'_>, h: &Ipv4Repr<'_>) -> Section {
    let hl = 20 + h.options.len();
    let total = p.ip_packet().len();
    let checksum = if p.ip_checksum_ok() {
        "correct"
    } else {
        "WRONG: a receiver drops this packet"
    };
    let mut fields = vec![
        field((0, 4), "Version", 4, "IPv4"),
        field(
            (4, 4),
            "IHL",
            hl / 4,
            if hl == 20 {
                format!("header is {hl} bytes")
            } else {
                format!(
                    "header is {hl} bytes: RoCEv2 allows no options (IHL 5, Annex A17 CA17-3), \
                     a receiver drops this packet"
                )
            },
        ),
        field(
            (8, 6),
            "DSCP",
            h.dscp,
            format!("differentiated services: picks the switch queue{MASKED}"),
        ),
        field(
            (14, 2),
            "ECN",
            h.ecn.name(),
            format!("{}{MASKED}", ecn_meaning(h.ecn.bits())),
        ),
        field(
            (16, 16),
            "Total Length",
            total,
            "bytes from the IP header through the ICRC",
        ),
        field(
            (32, 16),
            "Identification",
            format!("{:#06x}", h.identification),
            "fragment reassembly id",
        ),
        field((48, 1), "Reserved", 0, "must be zero"),
        field(
            (49, 1),
            "DF",
            u8::from(h.dont_fragment),
            if h.dont_fragment {
                "don't fragment: RoCEv2 packets fit the path MTU"
            } else {
                "clear, where RoCEv2 sets it (Annex A17 CA17-7): a receiver drops this packet"
            },
        ),
        field((50, 1), "MF", 0, "no more fragments"),
        field((51, 13), "Fragment Offset", 0, "not a fragment"),
        field(
            (64, 8),
            "TTL",
            h.ttl,
            format!("hops left (rxe sends 64){MASKED}, routers decrement it"),
        ),
        field((72, 8), "Protocol", 17, "UDP follows"),
        field(
            (80, 16),
            "Header Checksum",
            format!("{:#06x}", p.ipv4_checksum()),
            format!("{checksum}{MASKED}"),
        ),
        field(
            (96, 32),
            "Source",
            h.src,
            format!("sender; its RoCE GID is ::ffff:{} (IPv4-mapped)", h.src),
        ),
        field(
            (128, 32),
            "Destination",
            h.dst,
            format!("receiver; GID ::ffff:{}", h.dst),
        ),
    ];
    if !h.options.is_empty() {
        fields.push(field(
            (160, h.options.len() * 8),
            "Options",
            format!("{} bytes", h.options.len()),
            "IP options (covered by the ICRC)",
        ));
    }
    Section {
        title: "IPv4 (RFC 791; RoCEv2: IBA Annex A17)".into(),
        note: None,
        start: p.ip_offset(),
        len: hl,
        fields,
    }
}

fn ipv6_section(p: &RocePacket<'_>, h: &Ipv6Repr) -> Section {
    let payload = p.ip_packet().len() - 40;
    Section {
        title: "IPv6 (RFC 8200; RoCEv2: IBA Annex A17)".into(),
        note: None,
        start: p.ip_offset(),
        len: 40,
        fields: vec![
            field((0, 4), "Version", 6, "IPv6"),
            field(
                (4, 6),
                "DSCP",
                h.dscp,
                format!("traffic class, high 6 bits: picks the switch queue{MASKED}"),
            ),
            field(
                (10, 2),
                "ECN",
                h.ecn.name(),
                format!("{}{MASKED}", ecn_meaning(h.ecn.bits())),
            ),
            field(
                (12, 20),
                "Flow Label",
                format!("{:#07x}", h.flow_label),
                format!("keeps a flow on one path{MASKED}"),
            ),
            field(
                (32, 16),
                "Payload Length",
                payload,
                "bytes after this header, through the ICRC",
            ),
            field((48, 8), "Next Header", 17, "UDP follows"),
            field(
                (56, 8),
                "Hop Limit",
                h.hop_limit,
                format!("hops left{MASKED}"),
            ),
            field((64, 128), "Source", h.src, "sender; also its RoCE GID"),
            field(
                (192, 128),
                "Destination",
                h.dst,
                "receiver; also its RoCE GID",
            ),
        ],
    }
}

fn udp_section(p: &RocePacket<'_>, u: &UdpRepr) -> Section {
    let checksum = if u.checksum == 0 {
        "none, as the annex recommends (A17.3.2.4): the ICRC protects the packet end to end"
            .to_string()
    } else {
        format!("set, where the annex recommends 0 (A17.3.2.4); not checked here{MASKED}")
    };
    Section {
        title: "UDP (RFC 768; RoCEv2: IBA Annex A17)".into(),
        note: None,
        start: p.udp_offset(),
        len: 8,
        fields: vec![
            field(
                (0, 16),
                "Source Port",
                u.src_port,
                "picked per QP or connection (rxe: from the QPNs) so flows spread over paths",
            ),
            field(
                (16, 16),
                "Destination Port",
                u.dst_port,
                "4791: the IANA port of RoCEv2",
            ),
            field(
                (32, 16),
                "Length",
                p.ip_packet().len() - (p.udp_offset() - p.ip_offset()),
                "bytes from the UDP header through the ICRC",
            ),
            field(
                (48, 16),
                "Checksum",
                format!("{:#06x}", u.checksum),
                checksum,
            ),
        ],
    }
}

/// What the sections after the transport headers show: payload (or a MAD), pad, ICRC and
/// any trailer, of a RoCEv2 or a RoCEv1 packet.
pub(crate) struct Tail<'a> {
    /// Where the ICRC starts in the frame.
    pub ib_end: usize,
    pub payload: &'a [u8],
    pub pad: &'a [u8],
    /// The payload as a management datagram to QP1, when it is one.
    pub mad: Option<&'a [u8]>,
    pub icrc: u32,
    pub computed_icrc: u32,
    /// The ICRC is rdma_rxe's FLUSH ICRC (`wire::icrc::compute_rxe_flush`), not the spec's.
    pub rxe_flush: bool,
    /// What the ICRC covers, in a sentence, and the annex that says so.
    pub icrc_note: &'static str,
    pub annex: &'static str,
    /// The frame through the ICRC, and the bytes after it.
    pub packet_len: usize,
    pub trailer_len: usize,
}

fn rocev2_tail<'a>(p: &RocePacket<'a>) -> Tail<'a> {
    Tail {
        ib_end: p.ip_offset() + p.ip_packet().len() - ICRC_LEN,
        payload: p.payload(),
        pad: p.pad(),
        mad: super::mad::mad_payload(p),
        icrc: p.icrc(),
        computed_icrc: p.computed_icrc(),
        rxe_flush: p.icrc_is_rxe_flush(),
        icrc_note: "CRC-32 over 8 bytes of 0xFF, then IP header through pad with the fields \
                    marked 'masked' (and all of BTH byte 4) replaced by ones; sent \
                    least-significant byte first",
        annex: "A17",
        packet_len: p.packet_bytes().len(),
        trailer_len: p.trailer().len(),
    }
}

pub(crate) fn tail_sections(t: &Tail<'_>, out: &mut Vec<Section>) {
    let ib_end = t.ib_end;
    let pad = t.pad;
    let payload_start = ib_end - pad.len() - t.payload.len();
    let preview: String = t
        .payload
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    let more = if t.payload.len() > 16 { "..." } else { "" };
    if let Some(mad) = t.mad {
        super::mad::sections(mad, payload_start, out);
    } else {
        out.push(Section {
            title: format!("Payload: {} bytes of message data", t.payload.len()),
            note: None,
            start: payload_start,
            len: t.payload.len(),
            fields: if t.payload.is_empty() {
                vec![]
            } else {
                vec![field(
                    (0, t.payload.len() * 8),
                    "Data",
                    format!("{preview}{more}"),
                    "first bytes, hex",
                )]
            },
        });
    }
    if !pad.is_empty() {
        let hex: String = pad.iter().map(|b| format!("{b:02x}")).collect();
        out.push(Section {
            title: format!("Pad: {} bytes (BTH PadCnt) to a 4-byte boundary", pad.len()),
            note: None,
            start: ib_end - pad.len(),
            len: pad.len(),
            fields: vec![field(
                (0, pad.len() * 8),
                "Pad",
                hex,
                "zeros; covered by the ICRC",
            )],
        });
    }
    let verdict = if t.icrc == t.computed_icrc {
        "correct".to_string()
    } else if t.rxe_flush {
        format!(
            "WRONG: should be {:#010x}; it is rdma_rxe's FLUSH ICRC (Linux 6.2-6.12), which \
             hashes BTH, FETH and RETH twice",
            t.computed_icrc
        )
    } else {
        format!("WRONG: should be {:#010x}", t.computed_icrc)
    };
    out.push(Section {
        title: format!("ICRC: invariant CRC (IBA Vol. 1 7.8.1; Annex {})", t.annex),
        start: ib_end,
        len: ICRC_LEN,
        fields: vec![field((0, 32), "ICRC", format!("{:#010x}", t.icrc), verdict)],
        note: Some(t.icrc_note),
    });
    if t.trailer_len > 0 {
        out.push(Section {
            title: format!(
                "Trailer: {} bytes after the IP packet (Ethernet padding or FCS)",
                t.trailer_len
            ),
            note: None,
            start: t.packet_len,
            len: t.trailer_len,
            fields: vec![],
        });
    }
}

/// The whole explanation of one RoCE packet: its headers in frame order, each with its fields.
/// `roce decode` prints them; `roce view` shows the same sections.
pub fn sections(p: &RocePacket<'_>) -> Vec<Section> {
    let mut sections = super::outer::sections(p);
    sections.push(match p.ip() {
        IpRepr::V4(h) => ipv4_section(p, h),
        IpRepr::V6(h) => ipv6_section(p, h),
    });
    sections.push(udp_section(p, p.udp()));
    sections.push(Section {
        title: "BTH: Base Transport Header (IBA Vol. 1 9.2)".into(),
        note: None,
        start: p.bth_offset(),
        len: roce::wire::BthRepr::LEN,
        fields: bth_fields(&p.bth()),
    });
    let ext_start = p.bth_offset() + roce::wire::BthRepr::LEN;
    sections.extend(ext_sections(&p.ext(), ext_start));
    tail_sections(&rocev2_tail(p), &mut sections);
    sections
}

/// The explanation of the frame at `index` (from 0): a summary line headed by its frame number
/// as Wireshark counts (from 1), then every header for a RoCE frame.
pub fn frame(index: usize, frame_len: usize, dissected: &Dissected<'_>) -> String {
    let mut out = summary(index, frame_len, dissected);
    render(&mut out, &frame_sections(dissected));
    out
}

/// The headers explained under the summary line, for any kind of frame (none for a frame
/// that is not RoCE). `roce view` shows exactly these, so a frame kind explained here is
/// explained there too.
pub fn frame_sections(dissected: &Dissected<'_>) -> Vec<Section> {
    match dissected {
        Dissected::Roce(p) => sections(p),
        Dissected::MacControl(p) => super::pause::sections(p),
        Dissected::RoceV1(p) => super::v1::sections(p),
        _ => Vec::new(),
    }
}

/// The explanation's first line, ending in a newline: frame number (from 1), length, and what
/// the frame is.
pub fn summary(index: usize, frame_len: usize, dissected: &Dissected<'_>) -> String {
    let mut out = String::new();
    let number = index + 1;
    match dissected {
        Dissected::Roce(p) => {
            let bth = p.bth();
            let mad = super::mad::mad_payload(p)
                .map(|m| format!("  {}", super::mad::summary(m)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "#{number}  {frame_len} bytes  {} -> {}  {}  QP {}  PSN {}  ICRC {}{mad}",
                p.ip().src_addr(),
                p.ip().dst_addr(),
                bth.opcode,
                bth.dest_qp,
                bth.psn,
                if p.icrc_ok() { "ok" } else { "BAD" }
            );
        }
        Dissected::NotRoce(why, encap) if !encap.is_empty() => {
            let _ = writeln!(out, "#{number}  {frame_len} bytes  in {encap}: {why}");
        }
        Dissected::NotRoce(why, _) => {
            let _ = writeln!(out, "#{number}  {frame_len} bytes  {why}");
        }
        Dissected::RoceV1(p) => {
            let _ = writeln!(
                out,
                "#{number}  {frame_len} bytes  {}",
                super::v1::summary(p)
            );
        }
        Dissected::MacControl(p) => {
            let why = super::pause::summary(p);
            let _ = writeln!(out, "#{number}  {frame_len} bytes  {why}");
        }
        Dissected::Broken(why, encap) if !encap.is_empty() => {
            let _ = writeln!(
                out,
                "#{number}  {frame_len} bytes  in {encap}: malformed RoCEv2: {why}"
            );
        }
        Dissected::Broken(why, _) => {
            let _ = writeln!(out, "#{number}  {frame_len} bytes  malformed RoCEv2: {why}");
        }
    }
    out
}
